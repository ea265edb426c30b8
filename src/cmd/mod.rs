//! The commands, one file each, and the plumbing they share: input flags, the per-document
//! result ([`Outcome`]), and how a document is prepared (recognised, model resolved).

pub mod check;
pub mod count;
pub mod models;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use serde_json::Value;

use crate::document::{Dialect, Document};
use crate::settings::{ModelArgs, Settings};

/// Input flags shared by every command that reads documents.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct InputArgs {
    /// Input files (JSON, several documents, or JSON Lines); stdin when none or `-`.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Dialect of the messages, overriding detection.
    #[arg(long, value_enum, value_name = "DIALECT")]
    pub format: Option<Dialect>,
}

/// Output flags shared by every command.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct OutputArgs {
    /// Compact output: one line per document.
    #[arg(short = 'c', long)]
    pub compact: bool,

    /// No warnings on stderr (errors are still reported).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// The environment a run reads, captured once at start so that processing stays pure.
#[derive(Clone, Debug, Default)]
pub struct Env {
    /// `$CTX_MODEL`.
    pub model: Option<String>,
}

impl Env {
    /// Reads the process environment.
    pub fn from_process() -> Env {
        Env {
            model: std::env::var("CTX_MODEL").ok().filter(|s| !s.is_empty()),
        }
    }
}

/// What processing one document produced.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The rendered output document (written with one write).
    pub stdout: Vec<u8>,
    /// 0, or 1 when a check failed (the output is still written).
    pub code: u8,
    /// Warnings for stderr.
    pub warnings: Vec<String>,
}

/// A document ready for a command: recognised, with its model resolved.
pub struct Prepared {
    pub doc: Document,
    pub settings: Settings,
    pub warnings: Vec<String>,
}

/// Recognises a document and resolves its model settings.
pub fn prepare(
    value: Value,
    input: &InputArgs,
    model: &ModelArgs,
    env: &Env,
    extra_tools: Option<Arc<Value>>,
) -> Result<Prepared> {
    let flag_or_env = model.model.as_deref().or(env.model.as_deref());
    let doc = Document::parse(value, input.format, |body_model| {
        Settings::is_claude(model.model.as_deref().or(body_model).or(flag_or_env))
    })?;
    let mut warnings = Vec::new();
    let settings = Settings::resolve(
        model,
        doc.body_model(),
        env.model.as_deref(),
        extra_tools,
        &mut warnings,
    );
    Ok(Prepared {
        doc,
        settings,
        warnings,
    })
}

/// The exit code for a failed document (SPEC §5): usage and input errors are 2.
pub fn exit_code(_e: &anyhow::Error) -> u8 {
    2
}
