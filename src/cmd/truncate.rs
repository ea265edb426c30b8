//! `ctx truncate`'s flags and runner; the operation is [`crate::ops::truncate`].

use anyhow::Result;
use serde_json::json;

use super::runner::{Counted, Rewrite, Rewritten};
use super::{BudgetArgs, ChangeArgs, DocArgs, Env, OutputArgs, Prepared, one_of};

pub(crate) use crate::ops::truncate::{
    DEFAULT_KEEP_FIRST, Options, Strategy, Weights, note_text, parse_weights, truncate,
};

/// Remove whole units (oldest first by default) until each document fits its budget.
///
/// A unit is a tool exchange (the assistant message with its calls and the results answering
/// them), a system/developer message, or any other single message. Pinned units are never
/// removed: system and developer messages (unless --drop-system), the task (the first user
/// message, unless --no-keep-task) and --pin. The newest unit is always kept.
///
/// Example:
///   ctx truncate --budget 6000 < session.json | ctx count --budget 6000
///   ctx truncate --strategy importance --keep-last 40 --note < chat.json
///   ctx truncate --budget 6000 --note-text "[{count} older messages removed]" chat.json
///
/// Exit codes: 0 ok; 2 bad input or flags; 3 the pinned messages and the newest unit exceed the
/// budget (and --partial cannot help): nothing is written for that document.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub doc: DocArgs,

    #[command(flatten)]
    pub budget: BudgetArgs,

    #[command(flatten)]
    pub change: ChangeArgs,

    /// Keep at most the N newest non-system messages, rounded down to a unit boundary (the
    /// newest unit is always kept; pinned messages do not count).
    #[arg(long, value_name = "N")]
    pub keep_last: Option<usize>,

    #[command(flatten)]
    pub truncate: TruncateFlags,

    /// When whole units cannot fit, cut the largest unpinned text (tool results first)
    /// middle-out to use the budget exactly.
    #[arg(long)]
    pub partial: bool,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// Which units go and what marks the gap: the flags `truncate` shares with `fit`'s truncate
/// stages.
#[derive(clap::Args, Clone, Debug)]
pub struct TruncateFlags {
    /// Which units go first: the oldest, the middle (after --keep-first), or the least
    /// important (see --weights). With oldest and importance, older copies of a message
    /// repeated identically later go before anything else.
    #[arg(long, value_parser = one_of(&Strategy::ALL, Strategy::name), default_value = Strategy::Oldest.name())]
    pub strategy: Strategy,

    /// With --strategy middle: the number of units after the pinned ones kept at the start.
    #[arg(long, value_name = "K", default_value_t = DEFAULT_KEEP_FIRST)]
    pub keep_first: usize,

    /// With --strategy importance: scores as key=value pairs (user, exchange, assistant,
    /// system, other, short, short_tokens, repeat, error, test, edit, recency); see
    /// docs/strategies.md.
    #[arg(long, value_name = "K=V,...", value_parser = parse_weights)]
    pub weights: Option<Weights>,

    /// Put a note where messages were removed: "[ctx: {count} earlier messages were removed
    /// here to fit the context window]". A flag: it takes no value.
    #[arg(long)]
    pub note: bool,

    /// Put a note with this text instead ({count}: how many messages were removed there);
    /// implies --note.
    #[arg(long, value_name = "TEXT")]
    pub note_text: Option<String>,
}

impl TruncateFlags {
    /// The options these flags set, the others as [`Options::default`] has them; an empty
    /// `--note-text` is a usage error.
    pub fn options(&self) -> Result<Options> {
        Ok(Options {
            strategy: self.strategy,
            keep_first: self.keep_first,
            weights: self.weights.unwrap_or_default(),
            note: note_text(self.note, self.note_text.as_deref())?,
            ..Options::default()
        })
    }
}

impl Args {
    /// `truncate`'s options from its flags, with a budget of 0: the budget is resolved for each
    /// document, against its window.
    pub fn options(&self) -> Result<Options> {
        Ok(Options {
            keep_last: self.keep_last,
            partial: self.partial,
            pins: self.change.pin.pins(),
            ..self.truncate.options()?
        })
    }
}

impl Rewrite for Args {
    /// The options of the flags; each document's budget goes in.
    type Setup = Options;

    /// The budget, in tokens.
    type Limits = u64;

    /// Checks the note's text.
    fn setup(&self, _env: &Env) -> Result<Options> {
        self.options()
    }

    fn limits(&self, p: &mut Prepared) -> Result<u64> {
        self.budget.budget(p)
    }

    fn rewrite(&self, options: &Options, d: Counted<'_>, budget: u64) -> Result<Rewritten> {
        let opts = Options {
            budget,
            ..options.clone()
        };
        let t = truncate(d.doc, d.counter, &d.count, &opts)?;
        let report = json!({
            "command": "truncate",
            "budget": budget,
            "tokens_before": t.tokens_before,
            "tokens_after": t.tokens_after,
            "removed": t.removed,
            "partial": t.partial.iter().map(|&(i, b, a)| json!({"index": i, "tokens_before": b, "tokens_after": a})).collect::<Vec<_>>(),
            "notes": t.notes,
        });
        let flags = &self.truncate;
        let misplaced = flags.weights.is_some() && flags.strategy != Strategy::Importance;
        let warnings = misplaced.then(|| "--weights only applies to --strategy importance".into());
        Ok(Rewritten {
            output: t.doc.into_value(),
            report: Some(report),
            dropped: t.dropped,
            warnings: warnings.into_iter().collect(),
        })
    }
}
