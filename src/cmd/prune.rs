//! `ctx prune`'s flags and runner; the operation is [`crate::ops::prune`].

use anyhow::{Result, bail};
use serde_json::{Map, Value, json};

use super::runner::{Counted, Rewrite, Rewritten};
use super::{CannotFit, ChangeArgs, DocArgs, Env, OutputArgs, Prepared, ReserveArgs, one_of};
use crate::clip::DEFAULT_PLACEHOLDER;
use crate::settings::Budget;

pub(crate) use crate::ops::prune::{DEFAULT_KEEP, DEFAULT_MIN_SAVING, Options, Thinking, prune};

/// Clear old tool results (and optionally old reasoning), keeping every message and id.
///
/// The N most recent tool results stay verbatim; older ones become a placeholder that keeps
/// what an engineer looks at first: the call (tool and a short form of its arguments), the size,
/// whether it failed (error flag, or a non-zero exit status in the output), and the output's
/// first and last lines plus lines reporting errors or test outcomes, at most 80 tokens in all.
/// A result is cleared only when that saves at least --min-saving tokens. Results of
/// --exclude-tools, error results (unless --include-errors), pinned messages and results already
/// cleared are left alone. Nothing is removed, so no tool call loses its result.
///
/// With --budget, results are cleared oldest first only until the document fits (then clipping
/// with --max-tool-tokens and shortening with --shorten-args, each also only while it does not).
///
/// Example:
///   ctx prune --keep 5 --max-tool-tokens 2000 < agent.json | ctx count
///   ctx prune --budget 60% --shorten-args 200 --report - < agent.json
///   ctx prune --trigger 80% --clear-at-least 5000 --exclude-tools memory < body.json
///
/// Exit codes: 0 ok; 2 bad input or flags; 3 with --budget, the document does not fit even
/// after everything prune may do (nothing is written for it).
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub doc: DocArgs,

    #[command(flatten)]
    pub prune: PruneFlags,

    /// Clear oldest first only until the document is within N tokens (or P% of the window,
    /// lowered to the window minus the reserve), keeping the --keep newest; exit 3 if it cannot
    /// get there.
    #[arg(long, value_name = "N|P%")]
    pub budget: Option<Budget>,

    /// Cut string values over N tokens inside the arguments of old tool calls to their start and
    /// a marker (valid JSON kept; the calls of the --keep newest results and of the newest unit
    /// are left alone).
    #[arg(long, value_name = "N")]
    pub shorten_args: Option<usize>,

    /// Do nothing unless the document is over N tokens or P% of the window (lowered, with a
    /// warning, to the window minus the reserve: the provider would reject a larger request).
    #[arg(long, value_name = "N|P%")]
    pub trigger: Option<Budget>,

    #[command(flatten)]
    pub reserve: ReserveArgs,

    /// Clear nothing unless at least N tokens would be cleared.
    #[arg(long, value_name = "N")]
    pub clear_at_least: Option<usize>,

    /// Clip any tool result over N tokens middle-out (head and tail kept, a marker with the
    /// omitted count between), kept results included.
    #[arg(long, value_name = "N")]
    pub max_tool_tokens: Option<usize>,

    #[command(flatten)]
    pub change: ChangeArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// How tool results are cleared: the flags `prune` shares with `fit`'s prune stages.
#[derive(clap::Args, Clone, Debug)]
pub struct PruneFlags {
    /// Most recent tool results kept verbatim (each result of a parallel call counts; results
    /// of excluded tools and error results do not).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_KEEP)]
    pub keep: usize,

    /// Placeholder text for cleared results; {tool}, {args}, {tokens}, {chars}, {status},
    /// {head}, {tail} and {salient} are replaced (see docs/strategies.md).
    #[arg(long, value_name = "TEXT", default_value = DEFAULT_PLACEHOLDER, hide_default_value = true)]
    pub placeholder: String,

    /// Clear a result only when that saves at least N tokens (its tokens minus its
    /// placeholder's).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MIN_SAVING)]
    pub min_saving: usize,

    /// Never clear, clip or shorten the results and calls of these tools.
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub exclude_tools: Vec<String>,

    /// Also empty the arguments of cleared calls where the API takes an empty value ({}; "" for
    /// a Responses custom tool call's input); required actions and operations are kept.
    #[arg(long)]
    pub clear_inputs: bool,

    /// Drop reasoning (thinking, redacted_thinking, reasoning_content) from older assistant
    /// turns (`old`) or all of them (`all`); never from an unfinished tool loop.
    #[arg(long, value_parser = one_of(&Thinking::ALL, Thinking::name), default_value = Thinking::Keep.name())]
    pub thinking: Thinking,

    /// Clear error results too (Anthropic `is_error: true`).
    #[arg(long)]
    pub include_errors: bool,
}

impl PruneFlags {
    /// The options these flags set, the others as [`Options::default`] has them.
    pub fn options(&self) -> Options {
        Options {
            keep: self.keep,
            placeholder: self.placeholder.clone(),
            min_saving: self.min_saving,
            exclude_tools: self.exclude_tools.clone(),
            clear_inputs: self.clear_inputs,
            thinking: self.thinking,
            include_errors: self.include_errors,
            ..Options::default()
        }
    }
}

impl Args {
    /// `prune`'s options from its flags, without a trigger or a budget: those are resolved for
    /// each document, against its window.
    pub fn options(&self) -> Options {
        Options {
            clear_at_least: self.clear_at_least,
            max_tool_tokens: self.max_tool_tokens,
            shorten_args: self.shorten_args,
            pins: self.change.pin.pins(),
            keep_originals: self.change.side.dropped.is_some(),
            ..self.prune.options()
        }
    }
}

impl Rewrite for Args {
    /// The options of the flags; each document's trigger and budget go in.
    type Setup = Options;

    /// `--trigger` and `--budget`, in tokens.
    type Limits = (Option<u64>, Option<u64>);

    /// Checks the limits of clipping and shortening.
    fn setup(&self, _env: &Env) -> Result<Options> {
        if self.max_tool_tokens == Some(0) {
            bail!("--max-tool-tokens must be at least 1");
        }
        if self.shorten_args == Some(0) {
            bail!("--shorten-args must be at least 1");
        }
        Ok(self.options())
    }

    fn limits(&self, p: &mut Prepared) -> Result<Self::Limits> {
        let reserve = self.reserve.tokens;
        let trigger = self
            .trigger
            .map(|t| p.request_tokens("--trigger", t, reserve))
            .transpose()?;
        let budget = self
            .budget
            .map(|b| p.request_tokens("--budget", b, reserve))
            .transpose()?;
        Ok((trigger, budget))
    }

    fn rewrite(
        &self,
        options: &Options,
        d: Counted<'_>,
        (trigger, budget): Self::Limits,
    ) -> Result<Rewritten> {
        let opts = Options {
            trigger,
            budget,
            ..options.clone()
        };
        let r = prune(d.doc, d.counter, &d.count, &opts)?;
        if let Some(b) = budget {
            let under_trigger = opts.trigger.is_some_and(|t| r.tokens_before as u64 <= t);
            if r.tokens_after as u64 > b && !under_trigger {
                return Err(CannotFit {
                    reason: format!(
                        "pruning leaves {} tokens: the --keep {} newest results, results that would save under --min-saving {} tokens, error results and pinned messages stay (try ctx fit, or a lower --keep or --min-saving)",
                        r.tokens_after, opts.keep, opts.min_saving
                    ),
                    tokens_before: r.tokens_before,
                    budget: b,
                }
                .into());
            }
        }
        let mut report = Map::new();
        report.insert("command".into(), json!("prune"));
        if let Some(b) = budget {
            report.insert("budget".into(), json!(b));
        }
        report.insert("triggered".into(), json!(r.triggered));
        report.insert("tokens_before".into(), json!(r.tokens_before));
        report.insert("tokens_after".into(), json!(r.tokens_after));
        report.extend(r.report_lists(Value::from));
        report.insert("thinking".into(), json!(r.thinking));
        Ok(Rewritten {
            output: r.doc.into_value(),
            report: Some(Value::Object(report)),
            dropped: r.dropped,
            warnings: Vec::new(),
        })
    }
}
