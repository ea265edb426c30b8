//! The operations, below the commands: pure prune, truncate, summarize, fit and check over a
//! document and its [`Conversation`](crate::conversation::Conversation), with plain option
//! structs and no clap. `cmd` holds the thin command-line adapters that build these options from
//! flags and run an operation over each document; the library's API (`crate::api`) calls them
//! too, so they build without the `cli` feature (what only the command line uses is compiled
//! only with it).

pub mod check;
pub mod fit;
pub mod prune;
pub mod summarize;
pub mod truncate;

use std::sync::Arc;

use serde_json::Value;

/// Refuses to remove items from a body that continues a conversation the server holds (a
/// Responses body with `previous_response_id` or `conversation`): its `input` is only the newest
/// items, and what the server holds cannot be edited from here, so removing some of them would
/// not shrink the context and would change what the model sees.
pub(crate) fn refuse_server_state(
    doc: &crate::document::Document,
    what: &str,
) -> anyhow::Result<()> {
    match doc.server_state() {
        Some(key) => anyhow::bail!(
            "{what} would remove items, but the body continues a conversation the server holds (`{key}`): ctx cannot edit the server's items, so it does not remove any; send the whole conversation without `{key}`, or let the server truncate (`\"truncation\": \"auto\"`) or compact it"
        ),
        None => Ok(()),
    }
}

/// Takes one progress line (without the `ctx: ` prefix).
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// The budget is smaller than what must be kept (exit 3).
#[derive(Debug)]
pub struct CannotFit {
    /// Why, in words: the budget, what must be kept, and what could help.
    pub reason: String,
    /// The document's tokens before anything was done.
    #[cfg_attr(
        not(feature = "cli"),
        expect(dead_code, reason = "read by the command line's --report")
    )]
    pub tokens_before: usize,
    /// The budget.
    pub budget: u64,
}

impl std::fmt::Display for CannotFit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot fit in {} tokens: {}", self.budget, self.reason)
    }
}

impl std::error::Error for CannotFit {}

/// The summarizer failed after its retries and `--on-error fail` (exit 4).
#[derive(Debug)]
pub struct SummarizerFailed {
    /// What went wrong (never the API key).
    pub reason: String,
}

impl std::fmt::Display for SummarizerFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "summarizer failed: {}", self.reason)
    }
}

impl std::error::Error for SummarizerFailed {}

/// A removed or rewritten original message, for `--dropped`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Dropped {
    /// Its index in the input document.
    pub index: usize,
    /// Why: `truncated`, `partial`, `summarized`, `cleared`, `clipped`, `args`, `thinking`
    /// (several joined by `,`).
    pub reason: String,
    /// The original message.
    pub message: Value,
}
