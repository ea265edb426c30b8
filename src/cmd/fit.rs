//! `ctx fit`'s flags and runner; the pipeline is [`crate::ops::fit`].

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::prune::{self, PruneFlags};
use super::runner::{Counted, Rewrite, Rewritten};
use super::summarize::{self, Engine, Summarizer, SummaryArgs};
use super::truncate::{self, TruncateFlags};
use super::{BudgetArgs, ChangeArgs, DocArgs, Env, OutputArgs, Prepared, one_of};
use crate::settings::Budget;

pub(crate) use crate::ops::fit::{DEFAULT_SHORTEN_ARGS, Options, Stage, fit};

/// Bring each document under its budget with the least loss: old tool outputs go first, then
/// the arguments of old calls, then (with --summarize) old messages into a summary, then old
/// units, and only then newer outputs and the remaining units; each stage takes only what the
/// budget needs, and the run stops at the first stage after which the document fits. No stage
/// before partial touches the newest unit.
///
/// Documents at or under --trigger (default: the budget) pass through unchanged; documents over
/// it come out within the budget. With a trigger above the budget, a loop that calls fit before
/// every API call compacts once, well below the trigger, and not again until the conversation
/// has grown past it.
///
/// Stages, in their default order (--stages chooses and orders them):
///   prune         old tool results become placeholders, oldest first (the --keep newest and
///                 those under --min-saving stay)
///   clip          results over 25% of the budget are clipped middle-out (the largest first)
///   args          long values in old calls' arguments are shortened (--shorten-args)
///   summarize     the oldest units become one summary, read from the original messages; as
///                 many recent units stay verbatim as leave the summary its room (only with
///                 --summarize or in --stages)
///   truncate      old units are removed, never the --keep newest exchanges (--strategy)
///   prune-all     newer results become placeholders too, except the newest unit's, whatever
///                 clearing saves (--min-saving does not apply)
///   truncate-all  every unpinned unit but the newest is removed
///   partial       the newest unit's largest text is cut to the exact budget (only with
///                 --partial or in --stages)
///
/// Example:
///   ctx fit --budget 100000 < body.json | curl -d @- https://api.openai.com/v1/chat/completions ...
///   ctx fit --budget 60% --trigger 80% --summarize=extractive < session.json
///
/// Exit codes: 0 ok; 2 bad input or flags; 3 even the last stage cannot reach the budget;
/// 4 the summarizer failed (with --on-error fail). Nothing is written for a failed document.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub doc: DocArgs,

    #[command(flatten)]
    pub budget: BudgetArgs,

    /// Pass documents at or under N tokens (or P% of the window) through unchanged; documents
    /// over it are brought within the budget (default: the budget; never below it). Like the
    /// budget, lowered with a warning to the window minus the reserve.
    #[arg(long, value_name = "N|P%")]
    pub trigger: Option<Budget>,

    /// Warn on stderr when an input is over N tokens or P% of the window.
    #[arg(long, value_name = "N|P%")]
    pub warn_at: Option<Budget>,

    /// The stages to run, in order (default:
    /// prune,clip,args,summarize,truncate,prune-all,truncate-all,partial, where summarize needs
    /// --summarize and partial needs --partial).
    #[arg(long, value_name = "A,B", value_delimiter = ',', value_parser = one_of(&Stage::ALL, Stage::name))]
    pub stages: Vec<Stage>,

    /// Run the summarize stage, with this engine (default auto).
    #[arg(
        long,
        value_name = "ENGINE",
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "auto"
    )]
    pub summarize: Option<Engine>,

    /// Run the partial stage: when whole units cannot fit, cut the largest unpinned text.
    #[arg(long)]
    pub partial: bool,

    /// Report what would be done (to --report FILE, else to stderr as a JSON line, with what
    /// each stage cleared, clipped, shortened and removed) and write the input unchanged.
    #[arg(long)]
    pub dry_run: bool,

    #[command(flatten)]
    pub prune: PruneFlags,

    /// args stage: string values over N tokens in the arguments of calls older than the --keep
    /// newest results are cut to their start and a marker (the JSON stays valid).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SHORTEN_ARGS)]
    pub shorten_args: usize,

    #[command(flatten)]
    pub truncate: TruncateFlags,

    #[command(flatten)]
    pub summary: SummaryArgs,

    #[command(flatten)]
    pub change: ChangeArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

impl Args {
    /// The stages to run: those `--stages` names, in its order (each once), else the default
    /// order with summarize only with `--summarize` and partial only with `--partial`.
    pub fn stages(&self) -> Result<Vec<Stage>> {
        if self.stages.is_empty() {
            return Ok(Stage::defaults(self.summarize.is_some(), self.partial));
        }
        let mut seen = Vec::new();
        for &s in &self.stages {
            if seen.contains(&s) {
                bail!("--stages names {} twice", s.name());
            }
            seen.push(s);
        }
        Ok(seen)
    }

    /// `fit`'s options from its flags, with a budget and a trigger of 0: those are resolved for
    /// each document, against its window ([`Options::for_budget`]).
    pub fn options(&self) -> Result<Options> {
        let pins = self.change.pin.pins();
        let truncate = truncate::Options {
            pins: pins.clone(),
            ..self.truncate.options()?
        };
        Ok(Options {
            budget: 0,
            shorten_args: self.shorten_args,
            trigger: 0,
            stages: self.stages()?,
            details: self.change.side.report.is_some() || self.dry_run,
            prune: prune::Options {
                pins: pins.clone(),
                keep_originals: self.change.side.dropped.is_some(),
                ..self.prune.options()
            },
            truncate,
            summarize: summarize::Options {
                keep_recent: self.summary.keep_recent,
                after_messages: 0,
                over_tokens: 0,
                force: true,
                pins,
                budget: None,
                task: None,
            },
        })
    }
}

impl Rewrite for Args {
    /// The options of the flags (each document's budget and trigger go in) and the summarizer
    /// of the summarize stage, when it runs.
    type Setup = (Options, Option<Summarizer>);

    /// The budget and the trigger, in tokens.
    type Limits = (u64, u64);

    /// Checks the flags and resolves the stages and the summarizer.
    fn setup(&self, env: &Env) -> Result<Self::Setup> {
        if let (Some(Budget::Tokens(b)), Some(Budget::Tokens(t))) =
            (self.budget.budget, self.trigger)
        {
            if t < b {
                bail!(
                    "--trigger {t} is below --budget {b}: the trigger must be at least the budget"
                );
            }
        }
        let options = self.options()?;
        let summarizer = if options.stages.contains(&Stage::Summarize) {
            if self.dry_run && self.summarize == Some(Engine::Llm) {
                bail!(
                    "--dry-run with --summarize=llm would call the server; preview with --summarize=extractive"
                );
            }
            let s = Summarizer::new(
                &self.summary,
                self.summarize.unwrap_or(Engine::Auto),
                env,
                self.output.quiet || self.change.side.report_to_stderr(),
                "fit",
                self.doc.input.max_input_size,
            )?;
            if self.dry_run && s.is_llm() {
                bail!(
                    "--dry-run with --summarize: the auto engine chose the llm one (ctx is configured for an endpoint), and previewing would call the server; preview with --summarize=extractive"
                );
            }
            Some(s)
        } else {
            None
        };
        Ok((options, summarizer))
    }

    fn note((_, summarizer): &Self::Setup) -> Option<&str> {
        summarizer.as_ref().and_then(Summarizer::note)
    }

    fn limits(&self, p: &mut Prepared) -> Result<(u64, u64)> {
        let budget = self.budget.budget(p)?;
        let trigger = match self.trigger {
            Some(t) => {
                // Compared as given: lowering both to the window minus the reserve may make
                // them equal, which is fine.
                let given = p.settings.budget_tokens(t)?;
                let given_budget = match self.budget.budget {
                    Some(b) => p.settings.budget_tokens(b)?,
                    None => budget,
                };
                if given < given_budget {
                    bail!(
                        "--trigger ({given} tokens) is below the budget ({given_budget} tokens): the trigger must be at least the budget"
                    );
                }
                p.request_tokens("--trigger", t, self.budget.reserve.tokens)?
            }
            None => budget,
        };
        Ok((budget, trigger))
    }

    fn rewrite(
        &self,
        (options, summarizer): &Self::Setup,
        d: Counted<'_>,
        (budget, trigger): (u64, u64),
    ) -> Result<Rewritten> {
        let mut warnings = Vec::new();
        if let Some(w) = self.warn_at {
            let settings = d.counter.settings;
            let limit = settings.budget_tokens(w)?;
            let tokens = d.count.total();
            if tokens as u64 > limit {
                let share = match settings.context_window {
                    Some(win) if win > 0 => format!(
                        ", {:.1}% of the {win}-token window",
                        tokens as f64 * 100.0 / win as f64
                    ),
                    _ => String::new(),
                };
                warnings.push(format!(
                    "the input has {tokens} tokens{share}, over --warn-at ({limit} tokens)"
                ));
            }
        }
        let opts = options.for_budget(budget, trigger);
        let input = self.dry_run.then(|| d.doc.value().clone());
        let f = fit(d.doc, d.counter, d.count, &opts, summarizer.as_ref())?;
        if f.stages.iter().any(|s| s["summary_truncated"] == true) {
            warnings.push(summarize::TRUNCATED_SUMMARY.to_string());
        }
        let stopped_at = if f.triggered {
            f.stages
                .last()
                .and_then(|s| s["stage"].as_str())
                .map(Value::from)
                .unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        let mut report = json!({
            "command": "fit",
            "budget": budget,
            "trigger": trigger,
            "triggered": f.triggered,
            "tokens_before": f.tokens_before,
            "tokens_after": f.tokens_after,
            "stages": f.stages,
            "stopped_at": stopped_at,
        });
        Ok(match input {
            Some(input) => {
                report["dry_run"] = json!(true);
                Rewritten {
                    output: input,
                    report: Some(report),
                    dropped: Vec::new(),
                    warnings,
                }
            }
            None => Rewritten {
                output: f.doc.into_value(),
                report: Some(report),
                dropped: f.dropped,
                warnings,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::prune::Thinking;

    fn parse(flags: &str) -> Args {
        crate::cmd::parse_flags(&format!("fit {flags}"))
    }

    /// fit's prune and truncate stages take prune's and truncate's flags with their defaults.
    #[test]
    fn the_stages_take_prune_and_truncate_flags_and_defaults() {
        let o = parse("").options().unwrap();
        let prune_defaults = prune::Options {
            keep_originals: false,
            ..prune::Options::default()
        };
        assert_eq!(format!("{:?}", o.prune), format!("{prune_defaults:?}"));
        let truncate_defaults = truncate::Options::default();
        assert_eq!(
            format!("{:?}", o.truncate),
            format!("{truncate_defaults:?}")
        );
        assert_eq!(
            o.stages,
            [
                Stage::Prune,
                Stage::Clip,
                Stage::Args,
                Stage::Truncate,
                Stage::PruneAll,
                Stage::TruncateAll
            ]
        );

        let o = parse(
            "--keep=5 --thinking=old --exclude-tools=memory,todo --strategy=middle \
            --keep-first=1 --note --pin=-1 --dropped=d.jsonl",
        )
        .options()
        .unwrap()
        .for_budget(1000, 2000);
        assert_eq!((o.prune.keep, o.prune.thinking), (5, Thinking::Old));
        assert_eq!(o.prune.exclude_tools, ["memory", "todo"]);
        assert!(o.prune.keep_originals);
        assert_eq!(o.truncate.strategy, truncate::Strategy::Middle);
        assert_eq!(o.truncate.keep_first, 1);
        assert_eq!(
            o.truncate.note.as_deref(),
            Some(crate::ops::truncate::DEFAULT_NOTE)
        );
        assert_eq!(o.prune.pins.pins, [-1]);
        assert_eq!(o.truncate.pins.pins, [-1]);
        assert_eq!(o.summarize.pins.pins, [-1]);
        assert_eq!((o.budget, o.trigger, o.truncate.budget), (1000, 2000, 1000));
        assert_eq!(o.summarize.budget, Some(1000));
    }

    #[test]
    fn stage_names_match_the_flag_values() {
        let cmd = <Args as clap::Args>::augment_args(clap::Command::new("fit"));
        let stages = cmd
            .get_arguments()
            .find(|a| a.get_id() == "stages")
            .expect("--stages");
        let values: Vec<String> = stages
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(values, names);
    }
}
