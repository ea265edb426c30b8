//! `ctx summarize`'s flags and runner, and the summarizer built from its flags; the operation
//! is [`crate::ops::summarize`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::json;

use super::runner::{Counted, Rewrite, Rewritten};
use super::{ChangeArgs, DocArgs, Env, OutputArgs, Prepared, ReserveArgs, one_of};
use crate::input::{ByteSize, read_flag_file};
use crate::llm::{BaseUrl, Endpoint, UrlArg};
use crate::ops::summarize::{Llm, Source};
use crate::settings::Budget;

/// Finds a summary made by ctx: the cumulative count in its header (for tests that read
/// `ctx summarize`'s output).
pub use crate::ops::summarize::summary_header;
pub(crate) use crate::ops::summarize::{
    DEFAULT_KEEP_RECENT, DEFAULT_MAX_SUMMARY_TOKENS, DEFAULT_PROMPT, OnError, Options, Summarizer,
    SummaryRole, TRUNCATED_SUMMARY, plan, summarize,
};

/// Replace older messages with a summary (an LLM's, an offline ledger, or your own text).
///
/// Every unpinned message older than the --keep-recent newest (extended back so no tool call
/// is separated from its result) is summarized into one message, placed after the pinned
/// messages that precede it (always after the task) and before the kept ones. Its text starts
/// with `[ctx summary of N earlier messages]`; a later run extends that running summary with
/// only the newly aged-out messages (only a message in that place and role is ctx's summary).
/// A summary is never larger than what it replaces: a longer one is clipped middle-out, and
/// when none fits, --on-error decides. Runs only when a trigger holds (--after-messages,
/// --over-tokens) or with --force.
///
/// The llm engine calls {base}/chat/completions of any OpenAI-compatible server: --base-url or
/// $CTX_BASE_URL, else $OPENAI_BASE_URL, else https://api.openai.com/v1. The key is $CTX_API_KEY,
/// else $OPENAI_API_KEY, which goes only to https://api.openai.com or to $OPENAI_BASE_URL, never
/// to a server named by --base-url, $CTX_BASE_URL or a profile. Redirects are not followed.
/// --engine auto uses llm only when ctx itself is configured for one (--base-url, $CTX_BASE_URL
/// or $CTX_API_KEY), else the offline extractive engine.
///
/// The llm request asks for sections (task and intent; what was done: commands, files created
/// or edited, tests and their outcomes; current state; errors and decisions; what remains;
/// --instructions adds to these instructions, --prompt-file replaces them). It sends the pinned
/// messages (system prompt, task) as context not to summarize, tool outputs shortened to their
/// ends, exit status and error and test-outcome lines, and on a later run the running summary
/// with the instruction to update it rather than rewrite it.
///
/// Example:
///   ctx summarize --engine extractive --keep-recent 8 --force < agent.json
///   CTX_BASE_URL=http://localhost:11434/v1 ctx summarize --summary-model llama3.1 < chat.json
///
/// Exit codes: 0 ok; 2 bad input or flags; 4 the summarizer failed after retries and
/// --on-error fail (nothing written for that document).
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub doc: DocArgs,

    /// Summarize when at least N messages came since the last summary.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub after_messages: usize,

    /// Summarize when the document is over N tokens or P% of the window (default: the smaller
    /// of 128000 and the window minus the reserve; never above the window minus the reserve,
    /// where the provider would reject the request: a larger value is lowered, with a warning).
    #[arg(long, value_name = "N|P%")]
    pub over_tokens: Option<Budget>,

    #[command(flatten)]
    pub reserve: ReserveArgs,

    /// Summarize even when no trigger holds.
    #[arg(long)]
    pub force: bool,

    /// Where the summary comes from: llm (an OpenAI-compatible server), extractive (an offline
    /// ledger: the task, actions, files edited, tests run, errors, the latest state; see
    /// docs/summarize.md), or auto.
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: Engine,

    #[command(flatten)]
    pub summary: SummaryArgs,

    /// Report what would be summarized (as JSON on stdout) without calling anything.
    #[arg(long)]
    pub dry_run: bool,

    #[command(flatten)]
    pub change: ChangeArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// How a summary is made and placed: the flags `summarize` shares with `fit`.
#[derive(clap::Args, Clone, Debug)]
pub struct SummaryArgs {
    /// At least the N newest messages stay verbatim (extended back to a unit boundary).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_KEEP_RECENT)]
    pub keep_recent: usize,

    /// OpenAI-compatible base URL including the version path (http://localhost:11434/v1); a
    /// query string stays at the end, user:password@ is sent as Basic auth, never printed.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<UrlArg>,

    /// Model that writes the summary (default: $CTX_SUMMARY_MODEL, else the conversation's).
    #[arg(long, value_name = "NAME")]
    pub summary_model: Option<String>,

    /// Longest summary text, in tokens (sent as the request's max_tokens and enforced); a
    /// summary is also never larger than what it replaces, nor in fit than the budget leaves.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SUMMARY_TOKENS)]
    pub max_summary_tokens: usize,

    /// Seconds before a summarizer request is abandoned (more than 0, at most 86400).
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub timeout: f64,

    /// Retries after a 429, a 5xx, a timeout or a refused connection (at most 100).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 2,
        value_parser = clap::value_parser!(u32).range(..=MAX_RETRIES),
        allow_negative_numbers = true
    )]
    pub retries: u32,

    /// Text added to the default instructions.
    #[arg(long, value_name = "TEXT")]
    pub instructions: Option<String>,

    /// File whose text replaces the default instructions.
    #[arg(long, value_name = "FILE")]
    pub prompt_file: Option<PathBuf>,

    /// Role of the summary message for OpenAI conversations (Anthropic always uses user).
    #[arg(long, value_parser = one_of(&SummaryRole::ALL, SummaryRole::name), default_value = SummaryRole::System.name())]
    pub summary_role: SummaryRole,

    /// Use this file's text as the summary instead of calling an engine.
    #[arg(long, value_name = "FILE")]
    pub summary_file: Option<PathBuf>,

    /// When the summarizer fails: exit 4 (fail), drop the range instead (truncate), or leave
    /// the document unchanged (passthrough).
    #[arg(long, value_parser = one_of(&OnError::ALL, OnError::name), default_value = OnError::Fail.name())]
    pub on_error: OnError,
}

/// The longest `--timeout`, in seconds: a day.
pub(crate) const MAX_TIMEOUT: f64 = 86_400.0;

/// The most `--retries`: with backoff capped at 30 s, about 50 minutes of trying.
pub(crate) const MAX_RETRIES: i64 = 100;

/// `--timeout`: a finite number of seconds in (0, [`MAX_TIMEOUT`]].
pub(crate) fn parse_timeout(s: &str) -> Result<f64, String> {
    let t: f64 = s
        .trim()
        .parse()
        .map_err(|_| "not a number of seconds".to_string())?;
    if !(t > 0.0 && t <= MAX_TIMEOUT) {
        return Err(format!(
            "the timeout must be more than 0 and at most {MAX_TIMEOUT} seconds"
        ));
    }
    Ok(t)
}

/// `--engine` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    Auto,
    Llm,
    Extractive,
}

/// The llm engine's endpoint: the base URL from `--base-url`, `$CTX_BASE_URL`,
/// `$OPENAI_BASE_URL` or OpenAI's, and the key that may go there: `$CTX_API_KEY` to whatever ctx
/// is configured for; `$OPENAI_API_KEY` only to OpenAI's own API or to `$OPENAI_BASE_URL`, the
/// servers it was set for. Also says whether an `$OPENAI_API_KEY` was held back.
fn resolve_endpoint(args: &SummaryArgs, env: &Env, timeout: Duration) -> Result<(Endpoint, bool)> {
    // The URL, where it came from, and whether OPENAI_API_KEY was set for it.
    let (text, from, set_for_openai_key) = if let Some(u) = &args.base_url {
        (u.0.as_str(), "--base-url", false)
    } else if let Some(u) = &env.ctx_base_url {
        (u.as_str(), "CTX_BASE_URL", false)
    } else if let Some(u) = &env.openai_base_url {
        (u.as_str(), "OPENAI_BASE_URL", true)
    } else {
        ("https://api.openai.com/v1", "the default base URL", true)
    };
    let base_url = BaseUrl::parse(text).map_err(|why| anyhow!("{from}: {why}"))?;
    let openai_key_fits = set_for_openai_key || base_url.is_openai();
    let api_key = match (&env.ctx_api_key, &env.openai_api_key) {
        (Some(key), _) => Some(key.clone()),
        (None, Some(key)) if openai_key_fits => Some(key.clone()),
        _ => None,
    };
    let withheld = api_key.is_none() && env.openai_api_key.is_some();
    if base_url.has_credentials() && api_key.is_some() {
        let key = if env.ctx_api_key.is_some() {
            "CTX_API_KEY"
        } else {
            "OPENAI_API_KEY"
        };
        bail!(
            "{from} holds credentials (user:password@) and {key} is set: both would be the Authorization header; use one"
        );
    }
    let endpoint = Endpoint {
        base_url,
        api_key,
        timeout,
        retries: args.retries,
        max_backoff: Duration::from_secs(30),
    };
    Ok((endpoint, withheld))
}

impl Summarizer {
    /// Resolves `engine` (auto picks llm only when ctx itself is configured for an endpoint,
    /// and [`Summarizer::note`] says which) and reads the prompt and summary files, each at most
    /// `max_file_size` bytes (`--max-input-size`). Unless `quiet`, a long LLM summary counts its
    /// parts out on stderr when stderr is a terminal.
    pub fn new(
        args: &SummaryArgs,
        engine: Engine,
        env: &Env,
        quiet: bool,
        command: &str,
        max_file_size: ByteSize,
    ) -> Result<Summarizer> {
        let mut prompt = match &args.prompt_file {
            Some(p) => read_flag_file(p, max_file_size)
                .with_context(|| format!("--prompt-file {}", p.display()))?,
            None => DEFAULT_PROMPT.to_string(),
        };
        if let Some(extra) = &args.instructions {
            prompt.push_str("\n\n");
            prompt.push_str(extra);
        }
        let summary_text = match &args.summary_file {
            Some(p) => {
                let t = read_flag_file(p, max_file_size)
                    .with_context(|| format!("--summary-file {}", p.display()))?;
                if t.trim().is_empty() {
                    bail!("--summary-file {}: the file is empty", p.display());
                }
                Some(t.trim().to_string())
            }
            None => None,
        };
        if args.max_summary_tokens == 0 {
            bail!("--max-summary-tokens must be at least 1");
        }
        let timeout = Duration::try_from_secs_f64(args.timeout)
            .ok()
            .filter(|t| !t.is_zero() && args.timeout <= MAX_TIMEOUT)
            .ok_or_else(|| {
                anyhow!("--timeout must be more than 0 and at most {MAX_TIMEOUT} seconds")
            })?;
        let configured =
            args.base_url.is_some() || env.ctx_base_url.is_some() || env.ctx_api_key.is_some();
        let resolved = match engine {
            Engine::Auto if summary_text.is_some() => Engine::Extractive,
            Engine::Auto if configured => Engine::Llm,
            Engine::Auto => Engine::Extractive,
            other => other,
        };
        let note = (engine == Engine::Auto && summary_text.is_none()).then(|| match resolved {
            Engine::Llm => {
                format!("{command}: --engine auto chose llm (ctx is configured for an endpoint)")
            }
            _ => format!(
                "{command}: --engine auto chose extractive (no --base-url, CTX_BASE_URL or CTX_API_KEY)"
            ),
        });
        let source = match (summary_text, resolved) {
            (Some(text), _) => Source::File(text),
            (None, Engine::Llm) => {
                let (endpoint, openai_key_withheld) = resolve_endpoint(args, env, timeout)?;
                Source::Llm(Box::new(Llm {
                    endpoint,
                    openai_key_withheld,
                    prompt,
                    progress: env.progress.clone().filter(|_| !quiet),
                }))
            }
            (None, _) => Source::Extractive,
        };
        Ok(Summarizer {
            source,
            summary_model: args
                .summary_model
                .clone()
                .or_else(|| env.summary_model.clone()),
            max_summary_tokens: args.max_summary_tokens,
            summary_role: args.summary_role,
            on_error: args.on_error,
            note,
        })
    }
}

impl Args {
    /// `summarize`'s options from its flags, with `over_tokens` 0: that trigger is resolved for
    /// each document, against its window.
    pub fn options(&self) -> Options {
        Options {
            keep_recent: self.summary.keep_recent,
            after_messages: self.after_messages,
            over_tokens: 0,
            force: self.force,
            pins: self.change.pin.pins(),
            budget: None,
            task: None,
        }
    }
}

impl Rewrite for Args {
    /// The options of the flags (each document's `--over-tokens` goes in) and the summarizer.
    type Setup = (Options, Summarizer);

    /// `--over-tokens`, in tokens.
    type Limits = u64;

    /// Resolves the engine and reads the files the run shares.
    fn setup(&self, env: &Env) -> Result<Self::Setup> {
        let summarizer = Summarizer::new(
            &self.summary,
            self.engine,
            env,
            self.output.quiet || self.change.side.report_to_stderr(),
            "summarize",
            self.doc.input.max_input_size,
        )?;
        Ok((self.options(), summarizer))
    }

    fn note((_, summarizer): &Self::Setup) -> Option<&str> {
        summarizer.note()
    }

    fn limits(&self, p: &mut Prepared) -> Result<u64> {
        Ok(match self.over_tokens {
            Some(b) => p.request_tokens("--over-tokens", b, self.reserve.tokens)?,
            None => p
                .settings
                .default_budget(self.reserve.tokens, p.doc.body_max_tokens())
                .map_or(128_000, |b| b.min(128_000)),
        })
    }

    fn rewrite(
        &self,
        (options, summarizer): &Self::Setup,
        d: Counted<'_>,
        over_tokens: u64,
    ) -> Result<Rewritten> {
        let opts = Options {
            over_tokens,
            ..options.clone()
        };
        if self.dry_run {
            let plan = plan(&d.doc, &d.count, &opts, summarizer.summary_role)?;
            let report = json!({
                "command": "summarize",
                "triggered": plan.triggered,
                "engine": summarizer.engine_name(),
                "range": plan.range,
                "range_tokens": plan.range_tokens,
                "tokens_before": d.count.total(),
                "dry_run": true,
                "would_summarize": plan.triggered && !plan.range.is_empty(),
            });
            return Ok(Rewritten {
                output: report,
                ..Rewritten::default()
            });
        }
        let s = summarize(d.doc, d.counter, &d.count, &opts, summarizer, &[])?;
        Ok(Rewritten {
            report: Some(s.report(summarizer.engine_name())),
            warnings: s.truncation_warning().into_iter().collect(),
            output: s.doc.into_value(),
            dropped: s.dropped,
        })
    }
}
