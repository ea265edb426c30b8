//! ctx: keep LLM conversations inside their context window.
//!
//! The library behind the `ctx` binary. [`conversation`] is the centre: messages grouped into
//! units, turns, the task and pins, which every command works on. [`counter`] counts what the
//! API bills, through [`tokenizer`] (ctx's own BPE over rank tables embedded at build time). [`document`]
//! recognises input shapes and dialects; [`cmd`] holds one file per command. Nothing here reads
//! stdin, writes stdout or stderr, or exits: that is `main.rs`'s job. Input comes in through
//! readers the caller gives ([`input::Documents`]), results go out as values ([`cmd::Outcome`])
//! or through writers the caller gives ([`output`], [`cmd::sidecar`]), and progress through a
//! callback ([`cmd::Env::progress`]).
//!
//! [`api`] is the library's API for programs that embed ctx: documents, what they are counted
//! against, and the operations as functions over owned values, re-exported here at the root.

pub mod api;
pub mod args;
pub mod clip;
pub mod cmd;
pub mod conversation;
pub mod counter;
pub mod document;
pub mod exact;
pub mod excerpt;
pub mod extractive;
pub mod image;
pub mod input;
pub mod llm;
pub mod models;
pub mod output;
pub mod profile;
pub mod settings;
pub mod shell;
pub mod signals;
pub mod tokenizer;

pub use api::{
    Budget, Count, Dialect, Document, Dropped, Encoding, Error, ErrorKind, Finding, FitOptions,
    IntoDocument, Model, OnError, PruneOptions, Result, Rewritten, Severity, Strategy,
    SummarizeOptions, SummaryRole, Thinking, TruncateOptions, check, count, fit, prune, summarize,
    truncate,
};

#[cfg(test)]
mod tests;
