//! ctx: keep LLM conversations inside their context window.
//!
//! The library behind the `ctx` command line, for programs that hold a conversation as JSON
//! (OpenAI Chat Completions or Anthropic Messages; a bare array of messages or a whole request
//! body) and must keep it within a model's window: count it, check it, and prune, truncate,
//! summarize or fit it to a budget, with the same rules and defaults as the commands of the same
//! names (docs/SPEC.md). Counting is ctx's own BPE over the encodings' rank tables, built in:
//! nothing is downloaded, and nothing here reads the environment or files, touches the network,
//! or writes anywhere.
//!
//! ```
//! # fn main() -> Result<(), ctx::Error> {
//! let messages: Vec<serde_json::Value> = serde_json::from_str(
//!     r#"[{"role": "system", "content": "You are a coding agent."},
//!         {"role": "user", "content": "Fix the failing test in src/lib.rs."}]"#,
//! ).unwrap();
//! let fitted = ctx::fit(messages, &ctx::FitOptions::new(8000).model("gpt-4o"))?;
//! assert!(fitted.tokens_after <= 8000);
//! let messages: Vec<serde_json::Value> = fitted.into_messages(); // send these
//! # assert_eq!(messages.len(), 2);
//! # Ok(())
//! # }
//! ```
//!
//! # The API
//!
//! - [`Document`]: a conversation recognised ([`Document::parse`]), in its [`Dialect`]. The
//!   operations also take a `Vec<serde_json::Value>` of messages or a `serde_json::Value`
//!   ([`IntoDocument`]), and give back the shape they were given.
//! - [`Model`]: what a document is counted against (a model name, or the body's `model`; an
//!   [`Encoding`], a context window, tool definitions).
//! - [`count`] (a [`Count`]) and [`check`] (a list of [`Finding`]s) read a document.
//! - [`fit`] ([`FitOptions`]), [`prune`] ([`PruneOptions`]), [`truncate`] ([`TruncateOptions`])
//!   and [`summarize`] ([`SummarizeOptions`]; the offline extractive engine) rewrite one: each
//!   gives back a [`Rewritten`] document with its tokens before and after, the originals of what
//!   it removed or rewrote ([`Dropped`]) and its warnings.
//! - Every failure is an [`Error`], whose [`ErrorKind`] says whether the input was unusable,
//!   the budget too small, or the summarizer failed.
//!
//! Options are builders whose defaults are the commands' defaults. Types that may grow
//! (results, enums) are `#[non_exhaustive]`. docs/library.md says more, and what is stable.
//!
//! # Layers
//!
//! A document goes JSON → [`Document`] (the internal `document` module recognises its shape and
//! dialect; `dialect` alone knows each message format, one module per API) → the conversation
//! model (messages grouped into units, turns, the task and pins: `conversation`) → an operation
//! (`ops::{check, prune, truncate, summarize, fit}`, with plain option structs) → JSON.
//! Counting (`counter`, `settings`, `models`, `tokenizer`, `image`) works out what the API
//! bills. The operations' helpers: `clip` (middle-out cuts, placeholders), `args` (tool-call
//! arguments), `excerpt` and `signals` (what a tool output shows), `extractive` and `shell` (the
//! offline summary ledger), `llm` (the summarizer's HTTP client). These modules are private: the
//! API above is the way in, and the `api` module is the one place that reaches them for it.
//! docs/architecture.md draws the layers.
//!
//! # Features
//!
//! `cli` (default) builds the `ctx` binary: its flag parsing (clap), its ctx.toml profiles
//! (toml), and the modules only the binary uses, `cmd` (each command's flags and runner, the
//! runner skeleton, the parallel map, the sidecars, exit codes), `input`, `output` and
//! `profile`, which are public for the binary's sake and are no stable API. Embed with
//! `default-features = false` to build the library alone.

#![warn(missing_docs)]

mod api;

pub use api::{
    Budget, Count, Dialect, Document, Dropped, Encoding, Error, ErrorKind, Finding, FitOptions,
    IntoDocument, Model, OnError, PruneOptions, Result, Rewritten, Severity, Strategy,
    SummarizeOptions, SummaryRole, Thinking, TruncateOptions, check, count, fit, prune, summarize,
    truncate,
};

// The command line's modules: public for the `ctx` binary, which is a crate of its own, and no
// stable API (the docs say so).
#[cfg(feature = "cli")]
#[allow(
    missing_docs,
    reason = "the binary's module: documented for its readers, not as an API"
)]
#[allow(
    rustdoc::private_intra_doc_links,
    reason = "its docs link to the private modules it works with"
)]
#[allow(
    rustdoc::bare_urls,
    reason = "the doc comments of its flags are their --help text, where URLs stay plain"
)]
pub mod cmd;
#[cfg(feature = "cli")]
mod exact;
#[cfg(feature = "cli")]
pub mod input;
#[cfg(feature = "cli")]
pub mod output;
#[cfg(feature = "cli")]
pub mod profile;

mod args;
mod clip;
mod conversation;
mod counter;
mod dialect;
mod document;
mod excerpt;
mod extractive;
mod image;
mod llm;
mod models;
mod ops;
mod settings;
mod shell;
mod signals;
mod tokenizer;

#[cfg(test)]
mod tests;

/// The examples of docs/library.md, run as doctests so that the page stays true.
#[cfg(doctest)]
#[doc = include_str!("../docs/library.md")]
struct LibraryGuide;
