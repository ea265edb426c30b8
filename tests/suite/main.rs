//! ctx's integration tests, one test binary: each module is a topic, and the binary links the
//! library (and its tokenizer tables) once instead of once per topic. Run one topic with
//! `cargo test --test suite prune::`, one test with `cargo test --test suite NAME`.
//!
//! Goldens, re-blessed after an intended change (then review the diff):
//!
//!   TRYCMD=overwrite cargo test --test suite -- --exact cli::golden    (tests/cmd)
//!   LEDGER_BLESS=1 cargo test --test suite ledger::                     (tests/ledger)
//!   EXACT_BLESS=1 cargo test --test suite exact::                       (tests/exact)
//!
//! The tokenizer's oracle tests against tiktoken-rs (tests/tokenizer.rs) are a binary of their
//! own.

// Helpers shared by the topics.
/// Conversation generators, SPEC §2's invariant checks, counting, the corpus.
mod common;
/// Running the binary isolated from the developer's environment.
mod isolated;
/// A scripted HTTP server on 127.0.0.1 (the summarizer, `count --exact`): no network.
mod scripted;

// Topics.
mod approx;
mod cli;
mod counting;
mod dialect;
mod exact;
mod fit;
mod ledger;
mod llm;
mod parallel;
mod profile;
mod prune;
mod retention;
mod robustness;
mod summarize;
mod summarize_llm;
mod tool_definitions;
mod truncate;
