//! The library's API: documents, what they are counted against, and the operations behind the
//! command line's commands, as functions over owned values.
//!
//! Every item here is re-exported at the crate root; the rest of the crate is private (the
//! `cmd`, `input`, `output` and `profile` modules are public only for the `ctx` binary, with the
//! `cli` feature, and are no stable API). Each function does what its command does to one
//! document, with the same defaults: [`count`] and [`check`] read a document, [`prune`],
//! [`truncate`], [`summarize`] and [`fit`] rewrite one. Nothing here reads the environment
//! (`$CTX_MODEL`), files or the network, or writes anywhere: warnings come back in the result.

mod error;
mod ops;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde_json::{Map, Value};

pub use self::error::{Error, ErrorKind, Result};
pub use self::ops::{
    FitOptions, PruneOptions, Rewritten, SummarizeOptions, TruncateOptions, fit, prune, summarize,
    truncate,
};
pub use crate::ops::Dropped;
pub use crate::ops::check::{Finding, Severity};
pub use crate::ops::prune::Thinking;
pub use crate::ops::summarize::{OnError, SummaryRole};
pub use crate::ops::truncate::Strategy;
pub use crate::settings::Budget;
pub use crate::tokenizer::Encoding;

// The operations behind the commands: the one place their paths are written.
use crate::ops::check as check_op;
use crate::ops::fit as fit_op;
use crate::ops::prune as prune_op;
use crate::ops::summarize as summarize_op;
use crate::ops::truncate as truncate_op;

use crate::counter::Counter;
use crate::document;
use crate::settings::{ModelOptions, Settings, is_tool_definitions};

/// The API a document is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// OpenAI Chat Completions (and the many servers that speak it).
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses (a body's `input` items); counts are estimates.
    Responses,
}

impl Dialect {
    /// The dialect's name as the command line's `--format` takes it (`openai`, `anthropic`).
    pub fn name(self) -> &'static str {
        self.inner().name()
    }

    fn inner(self) -> document::Dialect {
        match self {
            Dialect::Openai => document::Dialect::Openai,
            Dialect::Anthropic => document::Dialect::Anthropic,
            Dialect::Responses => document::Dialect::Responses,
        }
    }

    fn of(inner: document::Dialect) -> Dialect {
        match inner {
            document::Dialect::Openai => Dialect::Openai,
            document::Dialect::Anthropic => Dialect::Anthropic,
            document::Dialect::Responses => Dialect::Responses,
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dialect {
    type Err = Error;

    /// A dialect by its [`name`](Dialect::name).
    fn from_str(s: &str) -> Result<Dialect> {
        [Dialect::Openai, Dialect::Anthropic]
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                Error::new(anyhow::anyhow!(
                    "unknown dialect '{s}' (known: openai, anthropic)"
                ))
            })
    }
}

impl FromStr for Encoding {
    type Err = Error;

    /// An encoding by its name as tiktoken spells it (`o200k_base`, ...; `approx`).
    fn from_str(s: &str) -> Result<Encoding> {
        Encoding::parse(s).map_err(Error::new)
    }
}

/// A conversation as a request carries it: a bare array of messages, or a whole request body
/// (`{"model", "messages", "tools", ...}`), in one [`Dialect`].
///
/// Operations rewrite only the messages; every other key of a body is kept as it was, in its
/// place and order. [`Document::into_value`] gives back the same shape that came in.
#[derive(Clone, Debug)]
pub struct Document {
    inner: document::Document,
}

impl Document {
    /// Recognises `value`: an array of messages or a request body with `messages`, read as
    /// `dialect`, or, with `None`, as the dialect its structure shows (tool calls and results
    /// first, then Anthropic's `system` and blocks; plain text messages are OpenAI). A value that
    /// is neither, or a message that is not an object, is an [`ErrorKind::Input`] error.
    pub fn parse(value: Value, dialect: Option<Dialect>) -> Result<Document> {
        document::Document::parse(value, dialect.map(Dialect::inner))
            .map(|inner| Document { inner })
            .map_err(Error::new)
    }

    /// A bare array of messages, its dialect read from its structure.
    pub fn from_messages(messages: Vec<Value>) -> Result<Document> {
        Document::parse(Value::Array(messages), None)
    }

    /// The dialect the document is read as.
    pub fn dialect(&self) -> Dialect {
        Dialect::of(self.inner.dialect)
    }

    /// The messages.
    pub fn messages(&self) -> &[Value] {
        self.inner.messages()
    }

    /// The request body, when the document is one (`None` for a bare array); for an OpenAI
    /// Batch input line, its `body`.
    pub fn body(&self) -> Option<&Map<String, Value>> {
        self.inner.body()
    }

    /// The `custom_id` of the OpenAI Batch input line the document is, if it is one.
    pub fn custom_id(&self) -> Option<&str> {
        self.inner.custom_id()
    }

    /// The body key naming conversation state the server holds, when the document continues
    /// it (a Responses body's `previous_response_id` or `conversation`): its messages are then
    /// only the newest, and the operations that would remove some refuse it.
    pub fn server_state(&self) -> Option<&'static str> {
        self.inner.server_state()
    }

    /// The whole document, as JSON.
    pub fn as_value(&self) -> &Value {
        self.inner.value()
    }

    /// The whole document, as JSON: an array for an array, the body for a body (the Batch line
    /// for a Batch line; a Responses `input` string as a string while it is one message).
    pub fn into_value(self) -> Value {
        self.inner.into_value()
    }

    /// The messages alone (a body's other keys are dropped).
    pub fn into_messages(self) -> Vec<Value> {
        match self.inner.into_value() {
            Value::Array(messages) => messages,
            Value::Object(mut body) => match body.remove("messages") {
                Some(Value::Array(messages)) => messages,
                _ => unreachable!("a body document holds a `messages` array"),
            },
            _ => unreachable!("a document is an array or a body"),
        }
    }

    pub(crate) fn into_inner(self) -> document::Document {
        self.inner
    }

    pub(crate) fn from_inner(inner: document::Document) -> Document {
        Document { inner }
    }
}

impl From<Document> for Value {
    fn from(doc: Document) -> Value {
        doc.into_value()
    }
}

/// What the operations take as a document: a [`Document`], or JSON recognised as one with
/// [`Document::parse`] (a `Vec` of messages, or a `Value` holding an array or a body).
pub trait IntoDocument: sealed::Sealed {
    /// The document; an [`ErrorKind::Input`] error when the JSON is not one.
    fn into_document(self) -> Result<Document>;
}

mod sealed {
    /// Implemented only here: the set of inputs may grow without breaking anyone.
    pub trait Sealed {}
    impl Sealed for super::Document {}
    impl Sealed for Vec<serde_json::Value> {}
    impl Sealed for serde_json::Value {}
}

impl IntoDocument for Document {
    fn into_document(self) -> Result<Document> {
        Ok(self)
    }
}

impl IntoDocument for Vec<Value> {
    fn into_document(self) -> Result<Document> {
        Document::from_messages(self)
    }
}

impl IntoDocument for Value {
    fn into_document(self) -> Result<Document> {
        Document::parse(self, None)
    }
}

/// What a document is counted against: a model (its encoding, message formatting, image
/// pricing and context window come from ctx's model table; docs/counting.md), and what
/// overrides it.
///
/// The default names no model: a body's `model` is used, else the dialect's default (gpt-4o for
/// OpenAI documents, the current Claude Sonnet for Anthropic ones). A model the table does not
/// know is counted with o200k_base as an estimate, with a warning; it needs
/// [`context_window`](Model::context_window) for anything that works out a budget.
///
/// ```
/// let model = ctx::Model::named("my-local-model")
///     .encoding(ctx::Encoding::Cl100kBase)
///     .context_window(32_768);
/// # let _ = model;
/// ```
#[derive(Clone, Debug, Default)]
pub struct Model {
    name: Option<String>,
    encoding: Option<Encoding>,
    context_window: Option<u64>,
    image_size: Option<(u32, u32)>,
    tools: Option<Arc<Value>>,
}

impl Model {
    /// The model `name` (beats the body's `model`).
    pub fn named(name: impl Into<String>) -> Model {
        Model {
            name: Some(name.into()),
            ..Model::default()
        }
    }

    /// Counts with `encoding` instead of the model's (counts are then estimates unless it is
    /// the model's own).
    #[must_use]
    pub fn encoding(mut self, encoding: Encoding) -> Model {
        self.encoding = Some(encoding);
        self
    }

    /// The context window, in tokens, instead of the model table's (at least 1).
    #[must_use]
    pub fn context_window(mut self, tokens: u64) -> Model {
        self.context_window = Some(tokens);
        self
    }

    /// The size assumed for images whose dimensions cannot be read (remote URLs; default
    /// 1024x1024; both at least 1).
    #[must_use]
    pub fn image_size(mut self, width: u32, height: u32) -> Model {
        self.image_size = Some((width, height));
        self
    }

    /// Tool definitions counted with a bare array of messages (a body counts its own `tools`):
    /// an array of definitions, or an object with a `tools` or `functions` array.
    #[must_use]
    pub fn tools(mut self, tools: Value) -> Model {
        self.tools = Some(Arc::new(tools));
        self
    }

    /// The settings `doc` is counted with, and the warnings of resolving them (an unknown
    /// model).
    fn settings(&self, doc: &document::Document) -> anyhow::Result<(Settings, Vec<String>)> {
        if self.context_window == Some(0) {
            anyhow::bail!("a context window of 0 tokens holds nothing; give the model's window");
        }
        let defaults = ModelOptions::default();
        let image_size = self.image_size.unwrap_or(defaults.image_size);
        if image_size.0 == 0 || image_size.1 == 0 {
            anyhow::bail!(
                "image size {}x{}: sizes must be positive",
                image_size.0,
                image_size.1
            );
        }
        if let Some(tools) = &self.tools {
            if !is_tool_definitions(tools) {
                anyhow::bail!(
                    "tools: expected an array of tool definitions or an object with `tools`"
                );
            }
        }
        let options = ModelOptions {
            model: self.name.clone(),
            encoding: self.encoding,
            context_window: self.context_window,
            image_size,
        };
        let mut warnings = Vec::new();
        let settings = Settings::resolve(
            options,
            doc.body_model(),
            None,
            doc.dialect,
            self.tools.clone(),
            &mut warnings,
        );
        Ok((settings, warnings))
    }
}

impl From<&str> for Model {
    fn from(name: &str) -> Model {
        Model::named(name)
    }
}

impl From<String> for Model {
    fn from(name: String) -> Model {
        Model::named(name)
    }
}

/// A document's tokens, as [`count`] found them.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Count {
    /// The input tokens of a request holding the document: what the provider bills.
    pub tokens: usize,
    /// Whether `tokens` is the provider's own count (false when anything was estimated; see
    /// `estimated`).
    pub exact: bool,
    /// Each message's tokens, its formatting included.
    pub messages: Vec<usize>,
    /// The tool definitions' tokens, with the provider's overhead for them.
    pub tools: usize,
    /// The model counted for.
    pub model: String,
    /// The encoding counted with.
    pub encoding: Encoding,
    /// The dialect the document was read as.
    pub dialect: Dialect,
    /// The model's context window, when known.
    pub context_window: Option<u64>,
    /// What was estimated, and why.
    pub estimated: Vec<String>,
    /// Warnings: an unknown model, a document mixing both dialects, unknown part types.
    pub warnings: Vec<String>,
}

/// The settings `doc` is counted with, and the warnings so far, as every operation starts (the
/// command line's `prepare`): a message without a role is an input error, a document that
/// mixes both dialects gets a warning, and, for an operation that rewrites messages
/// (`rewrites`), tool calls or results of the other dialect are an input error.
fn prepare(
    doc: &document::Document,
    model: &Model,
    rewrites: bool,
) -> anyhow::Result<(Settings, Vec<String>)> {
    doc.require_roles()?;
    let mut warnings: Vec<String> = doc.mixed_dialects().into_iter().collect();
    let (settings, resolved) = model.settings(doc)?;
    warnings.extend(resolved);
    if rewrites {
        doc.require_one_tool_format()?;
    }
    Ok((settings, warnings))
}

/// Counts `doc`'s input tokens for `model`, as `ctx count` does.
///
/// ```
/// # fn main() -> Result<(), ctx::Error> {
/// let doc = ctx::Document::from_messages(vec![
///     serde_json::json!({"role": "system", "content": "You are terse."}),
///     serde_json::json!({"role": "user", "content": "How many tokens is this?"}),
/// ])?;
/// let count = ctx::count(&doc, &ctx::Model::named("gpt-4o"))?;
/// assert!(count.exact);
/// assert_eq!(count.messages.len(), 2);
/// assert_eq!(count.context_window, Some(128_000));
/// # Ok(())
/// # }
/// ```
pub fn count(doc: &Document, model: &Model) -> Result<Count> {
    let doc = &doc.inner;
    let run = || -> anyhow::Result<Count> {
        let (settings, mut warnings) = prepare(doc, model, false)?;
        let counted = Counter::new(&settings, doc.dialect).document(doc)?;
        warnings.extend(counted.notes.warnings.iter().cloned());
        Ok(Count {
            tokens: counted.total(),
            exact: counted.exact,
            messages: counted.messages.iter().map(|m| m.total()).collect(),
            tools: counted.tools,
            model: settings.model_name.clone(),
            encoding: settings.encoding,
            dialect: Dialect::of(doc.dialect),
            context_window: settings.context_window,
            estimated: counted.notes.estimates.iter().cloned().collect(),
            warnings,
        })
    };
    run().map_err(Error::new)
}

/// What is wrong with `doc` as its API would see it, as `ctx check` finds it: orphan tool
/// results, unanswered calls, duplicate ids, unknown roles and part types, in message order.
///
/// ```
/// # fn main() -> Result<(), ctx::Error> {
/// let doc = ctx::Document::from_messages(vec![
///     serde_json::json!({"role": "user", "content": "hi"}),
///     serde_json::json!({"role": "tool", "tool_call_id": "call_1", "content": "42"}),
/// ])?;
/// let findings = ctx::check(&doc);
/// assert!(findings.iter().any(|f| f.severity == ctx::Severity::Error && f.index == Some(1)));
/// # Ok(())
/// # }
/// ```
pub fn check(doc: &Document) -> Vec<Finding> {
    check_op::check(&doc.inner)
}
