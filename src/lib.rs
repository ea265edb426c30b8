//! ctx: keep LLM conversations inside their context window.
//!
//! The library behind the `ctx` binary. [`conversation`] is the centre: messages grouped into
//! units, turns, the task and pins, which every command works on. [`dialect`] alone knows each
//! message format (one module per API). [`counter`] counts what the API bills, through
//! [`tokenizer`] (ctx's own BPE over rank tables embedded at build time). [`document`]
//! recognises input shapes and dialects; [`cmd`] holds one file per command. Nothing here reads
//! stdin, writes stdout or stderr, or exits: that is `main.rs`'s job. Input comes in through
//! readers the caller gives ([`input::Documents`]), results go out as values ([`cmd::Outcome`])
//! or through writers the caller gives ([`output`], [`cmd::sidecar`]), and progress through a
//! callback ([`cmd::Env::progress`]).

pub mod args;
pub mod clip;
pub mod cmd;
pub mod conversation;
pub mod counter;
pub mod dialect;
pub mod document;
pub mod exact;
pub mod excerpt;
pub mod extractive;
pub mod image;
pub mod input;
pub mod llm;
pub mod models;
pub mod ops;
pub mod output;
pub mod profile;
pub mod settings;
pub mod shell;
pub mod signals;
pub mod tokenizer;
