//! `ctx check`'s flags and runner; the checks are [`crate::ops::check`].

use anyhow::Result;
use serde_json::{Value, json};

use super::{Env, InputArgs, Outcome, OutputArgs, Run};
use crate::document::Document;
use crate::input::Origin;
use crate::output::render;

pub(crate) use crate::ops::check::{Finding, Severity, check};

/// Validate the structure of each conversation.
///
/// Writes a JSON array of findings per document: severity (error or warning), a code, the
/// message index, a jq-style path and an explanation. Errors are what the provider would reject;
/// warnings are legal but unusual. A tool call in the final message is a loop in progress, not
/// an unanswered call.
///
/// Example:
///   ctx check session.json | jq '.[] | select(.severity == "error")'
///
/// Exit codes: 0 no errors (warnings allowed); 1 errors found; 2 bad input or flags.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    /// Accepted for compatibility and ignored: the dialect is read from the document's
    /// structure (--format forces it).
    #[arg(short = 'm', long, value_name = "NAME", hide = true)]
    pub model: Option<String>,

    #[command(flatten)]
    pub output: OutputArgs,
}

impl Finding {
    fn to_json(&self) -> Value {
        json!({
            "severity": match self.severity { Severity::Error => "error", Severity::Warning => "warning" },
            "code": self.code,
            "index": self.index,
            "path": self.path,
            "message": self.message,
        })
    }
}

/// Runs `check` over documents.
pub struct Runner<'a> {
    args: &'a Args,
}

impl<'a> Runner<'a> {
    /// A runner for these flags (nothing in the environment changes what check finds).
    pub fn new(args: &'a Args, _env: &'a Env) -> Runner<'a> {
        Runner { args }
    }
}

impl Run for Runner<'_> {
    /// Checks one document.
    fn process(&self, _origin: &Origin, value: Value) -> Result<Outcome> {
        let doc = Document::parse(value, self.args.input.format)?;
        let findings = check(&doc);
        let errors = findings.iter().any(|f| f.severity == Severity::Error);
        let list = Value::Array(findings.iter().map(Finding::to_json).collect());
        Ok(Outcome {
            stdout: render(&list, self.args.output.compact),
            code: if errors {
                super::Exit::CheckFailed
            } else {
                super::Exit::Success
            },
            warnings: Vec::new(),
            ..Outcome::default()
        })
    }
}
