//! The commands, one file each, and the plumbing they share: input flags, the per-document
//! result ([`Outcome`]), and a document prepared for a command ([`Prepared`]: recognised, its
//! model resolved). Each command's file holds its clap flags and one conversion from them to
//! the plain options its operation takes (`Args::options`); flags two commands share are one
//! struct both flatten ([`DocArgs`] in every command that counts, [`ChangeArgs`] in every
//! command that rewrites, `prune::PruneFlags` and `truncate::TruncateFlags` in `fit`,
//! `summarize::SummaryArgs`). The steps every command takes for each document (preparing it
//! among them) are written once, in `runner`.
//!
//! This is the command line's module, compiled only with the `cli` feature: public because the
//! `ctx` binary is a crate of its own, and no stable API (the library's is at the crate root).

pub mod check;
pub mod count;
pub mod exit;
pub mod fit;
pub mod models;
pub mod pool;
pub mod prune;
pub mod run;
mod runner;
pub mod sidecar;
pub mod summarize;
pub mod truncate;
pub mod usage;

pub use crate::ops::Progress;
pub(crate) use crate::ops::{CannotFit, Dropped, SummarizerFailed};
pub use exit::Exit;
pub use run::{Filter, Run};

use std::path::PathBuf;

use anyhow::Result;
use serde_json::Value;

use crate::document::{Dialect, Document};
use crate::settings::{Budget, InputLimit, ModelArgs, Settings};

/// Input flags shared by every command that reads documents.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct InputArgs {
    /// Input files (JSON, several documents, or JSON Lines); stdin when none or `-`.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Dialect of the messages, overriding detection.
    #[arg(long, value_enum, value_name = "DIALECT")]
    pub format: Option<Dialect>,

    /// Largest document ctx reads, and largest --tools, --prompt-file or --summary-file: a
    /// number of bytes with an optional K, M or G (powers of 1024). A larger one is an input
    /// error (exit 2) that ends its input.
    #[arg(long, value_name = "SIZE", default_value = "256M")]
    pub max_input_size: crate::input::ByteSize,
}

/// The flags of the documents a command counts: where they come from ([`InputArgs`]) and what
/// they are counted for ([`ModelArgs`]). Every command that counts documents flattens it first
/// (`check` counts nothing and takes [`InputArgs`] alone).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct DocArgs {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub model: ModelArgs,
}

/// The parser of a flag whose value is one of `all`, spelt as `name` spells it: help lists the
/// names, and any other value gets clap's error with its suggestion. It keeps the enums the
/// operations take (`--thinking`, `--strategy`, `--stages`, ...) free of clap.
pub(crate) fn one_of<T: Copy + Send + Sync + 'static>(
    all: &'static [T],
    name: fn(T) -> &'static str,
) -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(all.iter().map(|&v| name(v))).try_map(move |s| {
        all.iter()
            .copied()
            .find(|&v| name(v) == s)
            .ok_or("not one of the possible values")
    })
}

/// A command's flags parsed from `line` (the command's name and its flags, split at white
/// space), for tests.
#[cfg(test)]
pub(crate) fn parse_flags<A: clap::Args>(line: &str) -> A {
    let matches = A::augment_args(clap::Command::new("ctx"))
        .try_get_matches_from(line.split_whitespace())
        .expect("the flags parse");
    A::from_arg_matches(&matches).expect("the flags parse")
}

/// Output flags shared by every command.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct OutputArgs {
    /// Compact output: one line per document.
    #[arg(short = 'c', long)]
    pub compact: bool,

    /// No warnings or notes on stderr (errors are still reported).
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Documents processed at once, for streams of many documents (default, and with 0: the
    /// number of CPUs; at most 64). Output order is always the input order.
    #[arg(short = 'j', long, value_name = "N")]
    pub jobs: Option<usize>,
}

/// The environment a run reads, captured once at start so that processing stays pure. `Debug`
/// redacts the keys and the base URLs' credentials.
#[derive(Clone, Default)]
pub struct Env {
    /// `$CTX_MODEL`.
    pub model: Option<String>,
    /// `$CTX_BASE_URL`.
    pub ctx_base_url: Option<String>,
    /// `$OPENAI_BASE_URL`.
    pub openai_base_url: Option<String>,
    /// `$CTX_API_KEY`.
    pub ctx_api_key: Option<String>,
    /// `$OPENAI_API_KEY`.
    pub openai_api_key: Option<String>,
    /// `$CTX_SUMMARY_MODEL`.
    pub summary_model: Option<String>,
    /// What the providers' counting endpoints read (`count --exact`).
    pub exact: crate::exact::ExactEnv,
    /// Where to tell the progress of a long run (`summarize: part 1 of 3`), or `None`: the
    /// binary gives one when stderr is a terminal. The library never writes to stderr itself.
    pub progress: Option<Progress>,
}

impl Env {
    /// Reads the process environment.
    pub fn from_process() -> Env {
        let var = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
        Env {
            model: var("CTX_MODEL"),
            ctx_base_url: var("CTX_BASE_URL"),
            openai_base_url: var("OPENAI_BASE_URL"),
            ctx_api_key: var("CTX_API_KEY"),
            openai_api_key: var("OPENAI_API_KEY"),
            summary_model: var("CTX_SUMMARY_MODEL"),
            exact: crate::exact::ExactEnv::from_process(),
            progress: None,
        }
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key = |k: &Option<String>| k.as_ref().map(|_| "[redacted]");
        let url = |u: &Option<String>| u.clone().map(crate::llm::UrlArg);
        f.debug_struct("Env")
            .field("model", &self.model)
            .field("ctx_base_url", &url(&self.ctx_base_url))
            .field("openai_base_url", &url(&self.openai_base_url))
            .field("ctx_api_key", &key(&self.ctx_api_key))
            .field("openai_api_key", &key(&self.openai_api_key))
            .field("summary_model", &self.summary_model)
            .field("exact", &self.exact)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// What processing one document produced.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The rendered output document (written with one write).
    pub stdout: Vec<u8>,
    /// Success, or [`Exit::CheckFailed`] (the output is still written).
    pub code: Exit,
    /// Warnings for stderr.
    pub warnings: Vec<String>,
    /// The `--report` line for this document (main adds its index and file).
    pub report: Option<Value>,
    /// Originals of removed or rewritten messages, for `--dropped`.
    pub dropped: Vec<Dropped>,
}

/// A document ready for a command: recognised, with its model resolved.
pub struct Prepared {
    pub doc: Document,
    pub settings: Settings,
    pub warnings: Vec<String>,
}

impl Prepared {
    /// The most input a request for this document may hold: the window minus the reserve
    /// (`reserve`, else the body's max_completion_tokens, max_tokens or max_output_tokens, else
    /// 4096); `None` when
    /// the window is unknown.
    pub fn input_limit(&self, reserve: Option<u64>) -> Result<Option<InputLimit>> {
        self.settings
            .input_limit(reserve, self.doc.body_max_tokens())
    }

    /// A budget or trigger of a command that writes requests, in tokens: lowered to the input
    /// limit, with a warning, when it is above it (SPEC §3).
    pub fn request_tokens(&mut self, flag: &str, b: Budget, reserve: Option<u64>) -> Result<u64> {
        let limit = self.input_limit(reserve)?;
        self.settings
            .request_tokens(flag, b, limit.as_ref(), &mut self.warnings)
    }
}

/// The exit for a failed document (SPEC §5): [`Exit::CannotFit`] when it cannot fit its
/// budget, [`Exit::SummarizerFailed`] when the summarizer or a provider's count
/// (`--exact=required`) failed, else [`Exit::UsageOrInput`].
pub fn exit_code(e: &anyhow::Error) -> Exit {
    if e.downcast_ref::<CannotFit>().is_some() {
        Exit::CannotFit
    } else if e.downcast_ref::<SummarizerFailed>().is_some()
        || e.downcast_ref::<ExactCountFailed>().is_some()
    {
        Exit::SummarizerFailed
    } else {
        Exit::UsageOrInput
    }
}

/// `count --exact=required` got no count from the provider (exit 4).
#[derive(Debug)]
pub struct ExactCountFailed {
    /// Why, naming the provider (never the API key).
    pub reason: String,
}

impl std::fmt::Display for ExactCountFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--exact=required: no count from the provider: {}",
            self.reason
        )
    }
}

impl std::error::Error for ExactCountFailed {}

/// Budget flags of the commands that need a budget.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct BudgetArgs {
    /// Token budget: N tokens, or P% of the context window (default: the window minus the
    /// reserve). A budget above the window minus the reserve is lowered to it, with a
    /// warning: the provider would reject a larger request.
    #[arg(long, value_name = "N|P%")]
    pub budget: Option<Budget>,

    #[command(flatten)]
    pub reserve: ReserveArgs,
}

/// `--reserve`, for every command with a budget or a trigger.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct ReserveArgs {
    /// Tokens kept free for the reply: no budget or trigger goes above the window minus this
    /// (default: the body's max_completion_tokens, max_tokens or max_output_tokens, else 4096).
    #[arg(long = "reserve", value_name = "N")]
    pub tokens: Option<u64>,
}

impl BudgetArgs {
    /// The budget for a document: `--budget` (lowered to the window minus the reserve, with a
    /// warning in `p`), else the window minus the reserve.
    pub fn budget(&self, p: &mut Prepared) -> Result<u64> {
        match self.budget {
            Some(b) => p.request_tokens("--budget", b, self.reserve.tokens),
            None => p
                .settings
                .default_budget(self.reserve.tokens, p.doc.body_max_tokens()),
        }
    }
}

/// Which messages must never be removed or rewritten, beyond system messages and the task.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct PinArgs {
    /// Also pin the units of these messages (input indices; negative counts from the end).
    #[arg(
        long,
        value_name = "I,J",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    pub pin: Vec<i64>,

    /// System and developer messages are not pinned.
    #[arg(long)]
    pub drop_system: bool,

    /// The task (the first user message) is not pinned.
    #[arg(long)]
    pub no_keep_task: bool,
}

impl PinArgs {
    /// The pin options of these flags.
    pub fn pins(&self) -> crate::conversation::PinOptions {
        crate::conversation::PinOptions {
            drop_system: self.drop_system,
            no_keep_task: self.no_keep_task,
            pins: self.pin.clone(),
        }
    }
}

/// The flags of every command that removes or rewrites messages: which messages it must leave
/// alone, and where it records what it did.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ChangeArgs {
    #[command(flatten)]
    pub pin: PinArgs,

    #[command(flatten)]
    pub side: SideArgs,
}

/// Where the commands that change messages record what they did.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SideArgs {
    /// Write a JSON line per document (what was removed or rewritten, tokens before and after)
    /// to FILE (overwritten), or to stderr with `-` (the run's notes then go in the first
    /// line's `notices`, so that stderr stays JSON Lines but for error and warning lines). FILE
    /// may not be an input.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    /// Append every removed or rewritten original message, as a JSON line with its document
    /// index, message index and reason, to FILE (`-` for stderr). FILE may not be an input.
    #[arg(long, value_name = "FILE")]
    pub dropped: Option<PathBuf>,
}

impl SideArgs {
    /// Whether the report goes to stderr (`--report -`), where it must stay JSON Lines.
    pub fn report_to_stderr(&self) -> bool {
        self.report.as_deref() == Some(std::path::Path::new("-"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's defaults are the commands': the options of no flags are each operation's
    /// `Options::default()`, whether from the flags a command shares with `fit` or from all of
    /// its own (`prune` keeps no originals without `--dropped`; the library keeps them).
    #[test]
    fn options_from_no_flags_are_the_defaults() {
        let debug = |options: &dyn std::fmt::Debug| format!("{options:?}");
        let prune: prune::Args = parse_flags("prune");
        let truncate: truncate::Args = parse_flags("truncate");
        let prune_all = prune::Options {
            keep_originals: true,
            ..prune.options()
        };
        let prune_defaults = debug(&prune::Options::default());
        let truncate_defaults = debug(&truncate::Options::default());
        for (flags, options, defaults) in [
            (
                "prune's shared",
                debug(&prune.prune.options()),
                &prune_defaults,
            ),
            ("prune's", debug(&prune_all), &prune_defaults),
            (
                "truncate's shared",
                debug(&truncate.truncate.options().unwrap()),
                &truncate_defaults,
            ),
            (
                "truncate's",
                debug(&truncate.options().unwrap()),
                &truncate_defaults,
            ),
        ] {
            assert_eq!(&options, defaults, "{flags} flags");
        }
    }
}
