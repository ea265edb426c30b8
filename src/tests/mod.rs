//! The library's tests of its internals that reach across modules: the properties of the
//! operations over generated conversations and the corpus (SPEC §2's invariants and each
//! operation's promises), the counter against the encodings and tool definitions, and the LLM
//! client against a scripted server. They were integration tests until the modules they use
//! became private; the integration tests (tests/suite) run the binary and use the public API.
//!
//! Run one topic with `cargo test --lib tests::prune::`.

pub(crate) mod common;
/// A scripted HTTP server on 127.0.0.1 (shared with the integration tests): no network.
#[path = "../../tests/suite/scripted.rs"]
#[expect(
    dead_code,
    reason = "shared with the integration tests, whose summarizer tests also use `Reply::Respond`"
)]
mod scripted;

mod approx;
mod fit;
mod llm;
mod prune;
mod summarize;
mod tool_definitions;
mod truncate;
