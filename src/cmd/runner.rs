//! The steps every command that reads documents takes, written once: read `--tools` for the
//! run, prepare each document (recognise it, resolve its model), count it, and render what the
//! command made of it with its warnings.
//!
//! [`Shared`] holds what a run shares and does the common steps; a command that rewrites
//! documents (`prune`, `truncate`, `summarize`, `fit`) supplies only its own part, by
//! implementing [`Rewrite`] on its flags: what it resolves once for the run (its options, its
//! summarizer), the limits it works out from the prepared document before counting (its
//! budget, trigger), and what it does with the counted document. [`Rewriter`] runs any of
//! them. `count` uses [`Shared`]'s steps directly (its output is a report, and its warnings
//! come in their own order). This module knows nothing of any one command.

use std::sync::Arc;

use anyhow::Result;
use serde_json::Value;

use super::Run;
use super::{DocArgs, Dropped, Env, InputArgs, Outcome, OutputArgs, Prepared};
use crate::counter::{Counter, DocumentCount};
use crate::document::Document;
use crate::input::Origin;
use crate::output::render;
use crate::settings::{ModelOptions, Settings, read_tools_file};

/// What a run of a command shares across its documents: its input, model and output flags, the
/// environment, and the `--tools` definitions, read once.
pub struct Shared<'a> {
    input: &'a InputArgs,
    model: ModelOptions,
    env: &'a Env,
    compact: bool,
    tools: Option<Arc<Value>>,
}

/// A command that rewrites documents, implemented by its flags: the part of the run that is its
/// own.
pub trait Rewrite: Sync {
    /// What the command resolves from its flags once for the whole run (the options they set,
    /// the summarizer).
    type Setup: Sync;

    /// What the command works out from a prepared document before it is counted (its budget,
    /// its trigger, in tokens).
    type Limits;

    /// Checks the flags and resolves the run's setup; an error is a usage error and nothing is
    /// read.
    fn setup(&self, env: &Env) -> Result<Self::Setup>;

    /// The note about the whole run, told once (which engine `--engine auto` chose).
    fn note(_setup: &Self::Setup) -> Option<&str> {
        None
    }

    /// Works out the limits of `p`; a limit lowered to the window adds its warning to `p`.
    fn limits(&self, p: &mut Prepared) -> Result<Self::Limits>;

    /// Rewrites a counted document within its limits.
    fn rewrite(
        &self,
        setup: &Self::Setup,
        doc: Counted<'_>,
        limits: Self::Limits,
    ) -> Result<Rewritten>;
}

/// Runs a command that rewrites documents: what the run shares, the command's flags, and the
/// setup it resolved from them.
pub struct Rewriter<'a, C: Rewrite> {
    shared: Shared<'a>,
    command: &'a C,
    setup: C::Setup,
}

impl<'a, C: Rewrite> Rewriter<'a, C> {
    /// Reads what the run shares (`doc`, `output`), then resolves the command's setup.
    pub fn new(
        command: &'a C,
        doc: &'a DocArgs,
        output: &OutputArgs,
        env: &'a Env,
    ) -> Result<Rewriter<'a, C>> {
        let shared = Shared::new(doc, output, env)?;
        let setup = command.setup(env)?;
        Ok(Rewriter {
            shared,
            command,
            setup,
        })
    }
}

impl<C: Rewrite> Run for Rewriter<'_, C> {
    fn process(&self, _origin: &Origin, value: Value) -> Result<Outcome> {
        self.shared.rewrite(self.command, &self.setup, value)
    }

    fn notes(&self) -> Vec<String> {
        C::note(&self.setup).map(String::from).into_iter().collect()
    }
}

/// A document prepared and counted, as a command gets it to rewrite.
pub struct Counted<'c> {
    pub doc: Document,
    /// What counted it (its settings are the document's).
    pub counter: &'c Counter<'c>,
    pub count: DocumentCount,
}

/// What a command made of one document.
#[derive(Default)]
pub struct Rewritten {
    /// The JSON written to stdout: the rewritten document (or, for a dry run, what the command
    /// writes instead).
    pub output: Value,
    /// The `--report` line.
    pub report: Option<Value>,
    /// Originals of removed or rewritten messages, for `--dropped`.
    pub dropped: Vec<Dropped>,
    /// The command's warnings, written after those of preparing and counting.
    pub warnings: Vec<String>,
}

impl<'a> Shared<'a> {
    /// Reads what the run shares: the `--tools` file, at most `--max-input-size` bytes (an error
    /// here ends the run before any document is read).
    pub fn new(doc: &'a DocArgs, output: &OutputArgs, env: &'a Env) -> Result<Shared<'a>> {
        let input = &doc.input;
        let tools = doc
            .model
            .tools
            .as_deref()
            .map(|p| read_tools_file(p, input.max_input_size))
            .transpose()?;
        Ok(Shared {
            input,
            model: (&doc.model).into(),
            env,
            compact: output.compact,
            tools,
        })
    }

    /// Recognises a document and resolves its model settings, for `count`. A message without
    /// a `role` is an input error; a document that mixes the two dialects gets a warning (it is
    /// counted whole).
    pub fn prepare_to_count(&self, value: Value) -> Result<Prepared> {
        let doc = Document::parse(value, self.input.format)?;
        doc.require_roles()?;
        let mut warnings = Vec::new();
        warnings.extend(doc.mixed_dialects());
        let settings = Settings::resolve(
            &self.model,
            doc.body_model(),
            self.env.model.as_deref(),
            doc.dialect,
            self.tools.clone(),
            &mut warnings,
        );
        Ok(Prepared {
            doc,
            settings,
            warnings,
        })
    }

    /// [`Shared::prepare_to_count`] for the commands that remove or rewrite messages: also
    /// refuses a document whose tool calls or results are written in the other dialect than the
    /// one it is read as, since they could not be paired safely.
    pub fn prepare(&self, value: Value) -> Result<Prepared> {
        let p = self.prepare_to_count(value)?;
        p.doc.require_one_tool_format()?;
        Ok(p)
    }

    /// Renders a JSON output as `--compact` says.
    pub fn render(&self, output: &Value) -> Vec<u8> {
        render(output, self.compact)
    }

    /// One document through a rewriting command: prepared, its limits worked out, counted,
    /// rewritten by `command`, and rendered with the warnings of every step in that order.
    pub fn rewrite<C: Rewrite>(
        &self,
        command: &C,
        setup: &C::Setup,
        value: Value,
    ) -> Result<Outcome> {
        let mut p = self.prepare(value)?;
        let limits = command.limits(&mut p)?;
        let Prepared {
            doc,
            settings,
            mut warnings,
        } = p;
        let counter = Counter::new(&settings, doc.dialect);
        let count = counter.document(&doc)?;
        warnings.extend(count.notes.warnings.iter().cloned());
        let custom_id = doc.custom_id().map(str::to_string);
        let counted = Counted {
            doc,
            counter: &counter,
            count,
        };
        let mut r = command.rewrite(setup, counted, limits)?;
        warnings.extend(r.warnings);
        // A Batch line's report names its request.
        if let (Some(id), Some(Value::Object(report))) = (custom_id, r.report.as_mut()) {
            report.insert("custom_id".into(), Value::String(id));
        }
        Ok(Outcome {
            stdout: self.render(&r.output),
            code: super::Exit::Success,
            warnings,
            report: r.report,
            dropped: r.dropped,
        })
    }
}
