//! ctx's integration tests, one test binary: each module is a topic, and the binary links the
//! library (and its tokenizer tables) once instead of once per topic. Run one topic with
//! `cargo test --test suite summarize::`, one test with `cargo test --test suite NAME`.
//!
//! These tests run the `ctx` binary and use the library's public API only. Tests of the
//! library's internals (the operations' properties over generated conversations, the counter,
//! the HTTP client) are its unit tests, in src/tests: `cargo test --lib tests::prune::`.
//!
//! Goldens, re-blessed after an intended change (then review the diff):
//!
//!   TRYCMD=overwrite cargo test --test suite -- --exact cli::golden    (tests/cmd)
//!   LEDGER_BLESS=1 cargo test --test suite ledger::                     (tests/ledger)
//!   EXACT_BLESS=1 cargo test --test suite exact::                       (tests/exact)
//!
//! The tokenizer's oracle tests against tiktoken-rs are unit tests too (src/tokenizer/tests.rs).

// Helpers shared by the topics.
/// Conversation generators, SPEC §2's invariant checks, the corpus (shared with the library's
/// unit tests).
mod common;
/// Running the binary isolated from the developer's environment.
mod isolated;
/// A scripted HTTP server on 127.0.0.1 (the summarizer, `count --exact`): no network.
mod scripted;
/// What the shared helpers (`common`) work on here: ctx's public API.
mod subject {
    pub use ctx::{Dialect, Document, Severity, check};

    /// `doc`'s tokens, counted for its model.
    pub fn tokens(doc: &Document) -> usize {
        ctx::count(doc, &ctx::Model::default())
            .expect("counts")
            .tokens
    }
}

// Topics.
mod cli;
mod counting;
mod dialect;
mod exact;
mod fit_cli;
mod ledger;
mod parallel;
mod profile;
mod retention;
mod robustness;
mod summarize;
mod summarize_llm;
