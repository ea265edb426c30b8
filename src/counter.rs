//! Token counting for whole documents: what the API bills as input (SPEC §3).
//!
//! Turns a document into per-message counts plus the fixed parts (Anthropic's top-level system,
//! tool definitions, reply priming) so that `total = fixed + Σ messages`: commands that drop or
//! rewrite messages recount only what they change. The rules are OpenAI's published chat
//! formula, the rendering of tool definitions that API-measured counts verify ([`tools`]), the
//! providers' image formulas, and documented estimates for the rest (docs/counting.md). All
//! text goes through [`crate::tokenizer`].

pub mod tools;

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::dialect::{Dialect, Field, ImageData, ItemMeasure, Measure, find_part, item_measure};
use crate::document::Document;
use crate::image::{self, OpenAiImageScheme};
use crate::models::ImageRule;
use crate::settings::Settings;
use crate::tokenizer::Encoding;

/// Reply priming: every reply is primed with `<|start|>assistant<|message|>`.
pub const REPLY_PRIMING: usize = 3;
/// Estimated overhead of one tool call or tool-use block (name framing, arguments framing).
pub const CALL_OVERHEAD: usize = 3;
/// Tokens around a namespace of function definitions: the system message it makes (or shares
/// with the first system message, whose own framing then counts as the namespace's) and the
/// text that introduces it. Measured: docs/counting.md, "Tool definitions".
pub const NAMESPACE_FRAMING: usize = 9;
/// `tool_choice: {"type": "function", "function": {"name": N}}` costs this plus N's tokens.
pub const NAMED_TOOL_CHOICE: usize = 7;
/// Legacy `function_call: {"name": N}` costs this plus N's tokens.
pub const NAMED_FUNCTION_CALL: usize = 4;
/// Model table rows whose tool rendering API measurements verify (docs/counting.md).
const TOOLS_VERIFIED_MODELS: &[&str] = &[
    "gpt-4o",
    "gpt-4o-2024-05-13",
    "gpt-4o-mini",
    "gpt-4-turbo",
    "gpt-4-1106",
    "gpt-4-0125",
    "gpt-4",
    "gpt-4-32k",
    "gpt-3.5-turbo",
    "gpt-3.5-turbo-0613",
    "gpt-3.5-turbo-16k",
];

/// The tokens of one message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MessageTokens {
    /// Role, name, content, tool calls.
    pub content: usize,
    /// Per-message formatting overhead.
    pub overhead: usize,
    /// Of `content`, the tokens of the message's `content` field when it is a string (an
    /// OpenAI message); 0 otherwise.
    pub text: usize,
    /// False when any part of the message is estimated.
    pub exact: bool,
}

impl MessageTokens {
    /// Content plus overhead.
    pub fn total(&self) -> usize {
        self.content + self.overhead
    }
}

/// The tokens of a whole document.
#[derive(Clone, Debug, Default)]
pub struct DocumentCount {
    /// Anthropic's top-level `system`.
    pub system: usize,
    /// Tool and function definitions, with the provider's overhead.
    pub tools: usize,
    /// One entry per message.
    pub messages: Vec<MessageTokens>,
    /// Reply priming.
    pub priming: usize,
    /// False as soon as anything is estimated.
    pub exact: bool,
    /// What was estimated and what was unusual.
    pub notes: Notes,
}

/// Human notes gathered while counting.
#[derive(Clone, Debug, Default)]
pub struct Notes {
    /// What was estimated, and why (reported with the count).
    pub estimates: BTreeSet<String>,
    /// Unusual input worth a warning on stderr (unknown part types).
    pub warnings: BTreeSet<String>,
}

impl DocumentCount {
    /// Everything outside the messages.
    pub fn fixed(&self) -> usize {
        self.system + self.tools + self.priming
    }

    /// The document's input tokens.
    pub fn total(&self) -> usize {
        self.fixed()
            + self
                .messages
                .iter()
                .map(MessageTokens::total)
                .sum::<usize>()
    }
}

/// Turns an error whose contexts are path segments (`.content`, `[2]`) into one line:
/// `message 3 (.messages[3].content[2]): <cause>`.
fn located(e: anyhow::Error, what: &str, base: &str) -> anyhow::Error {
    let chain: Vec<String> = e.chain().map(ToString::to_string).collect();
    let (cause, segments) = chain.split_last().expect("an error has a cause");
    anyhow::anyhow!("{what} ({base}{}): {cause}", segments.concat())
}

/// Counts documents under one set of [`Settings`].
pub struct Counter<'a> {
    pub settings: &'a Settings,
    pub dialect: Dialect,
}

/// The request fields that change what tool definitions cost.
struct OpenAiChoice<'v> {
    tool_choice: Option<&'v Value>,
    function_call: Option<&'v Value>,
    parallel_tool_calls: Option<&'v Value>,
}

/// Accumulates tokens and whether they are exact.
struct Acc<'n> {
    tokens: usize,
    /// The tokens of a string `content`, also counted in `tokens`.
    text: usize,
    exact: bool,
    notes: &'n mut Notes,
}

impl Acc<'_> {
    fn estimate(&mut self, note: impl Into<String>) {
        self.exact = false;
        self.notes.estimates.insert(note.into());
    }
}

/// How encrypted reasoning and compactions are estimated.
const ENCRYPTED_NOTE: &str = "encrypted reasoning and compaction content is estimated from its length, as Codex does: (bytes x 3/4 - 650) / 4 tokens";

/// The estimate of encrypted content (Codex's `estimate_reasoning_length`): the decoded length
/// less a fixed overhead, at four bytes a token.
pub fn encrypted_tokens(e: &str) -> usize {
    (e.len() * 3 / 4).saturating_sub(650).div_ceil(4)
}

/// Keys whose strings are binary payloads, never text the model reads as tokens.
const BINARY_KEYS: &[&str] = &[
    "data",
    "signature",
    "encrypted_content",
    "encrypted_index",
    "file_data",
];

impl<'a> Counter<'a> {
    /// A counter for `dialect` under `settings`.
    pub fn new(settings: &'a Settings, dialect: Dialect) -> Counter<'a> {
        Counter { settings, dialect }
    }

    fn enc(&self) -> Encoding {
        self.settings.encoding
    }

    /// Counts plain text.
    pub fn text(&self, s: &str) -> Result<usize> {
        Ok(self.enc().count(s))
    }

    /// Counts a whole document.
    pub fn document(&self, doc: &Document) -> Result<DocumentCount> {
        let mut notes = Notes::default();
        let mut exact = self.settings.exact && self.dialect.exact_counts();
        if !self.settings.exact {
            notes.estimates.insert(match self.settings.model {
                Some(m) if !m.exact => format!(
                    "{} does not publish its tokenizer: counts are {} estimates",
                    self.settings.model_name, self.settings.encoding
                ),
                _ => format!("counts with {} are estimates", self.settings.encoding),
            });
        }
        if !self.dialect.exact_counts() && self.settings.exact {
            notes.estimates.insert(format!(
                "{} documents are counted with estimated overheads",
                self.dialect.title()
            ));
        }
        let mut out = DocumentCount {
            priming: REPLY_PRIMING,
            ..Default::default()
        };
        // Tool definitions: the body's, else --tools for bare arrays. `tool_choice` and
        // `function_call` come from the same place.
        let body = doc
            .body()
            .filter(|b| b.contains_key("tools") || b.contains_key("functions"));
        let src: Option<&Value> = match (body, &self.settings.extra_tools) {
            (Some(_), _) => None,
            (None, Some(extra)) => Some(&**extra),
            (None, None) => None,
        };
        let pick = |key: &str| -> Option<&Value> {
            match (body, src) {
                (Some(b), _) => b.get(key),
                (None, Some(Value::Array(_))) if key == "tools" => src,
                (None, Some(Value::Array(_))) => None,
                (None, Some(other)) => other.field(key),
                (None, None) => None,
            }
        };
        let (tools, functions) = (pick("tools"), pick("functions"));
        // The message that carries the namespace of function definitions, when there is one.
        let mut carrier = None;
        {
            let mut acc = Acc {
                tokens: 0,
                text: 0,
                exact: true,
                notes: &mut notes,
            };
            // The model's provider decides how definitions are billed: a Claude model gets
            // Anthropic's tool-use prompt whatever shape its definitions arrive in (OpenRouter
            // and LiteLLM convert OpenAI ones).
            if self.dialect.provider() == "anthropic" || self.settings.is_anthropic_model() {
                self.anthropic_tools(tools, functions, &mut acc)
                    .map_err(|e| located(e, "tool definitions", ".tools"))?
            } else {
                let choice = OpenAiChoice {
                    tool_choice: pick("tool_choice"),
                    function_call: pick("function_call"),
                    parallel_tool_calls: pick("parallel_tool_calls"),
                };
                let namespace = self
                    .openai_tools(tools, functions, &choice, &mut acc)
                    .map_err(|e| located(e, "tool definitions", ".tools"))?;
                if namespace {
                    carrier = self.namespace_carrier(doc.messages(), &mut acc);
                }
            }
            out.tools = acc.tokens;
            exact &= acc.exact;
        }
        if let Some(system) = doc.body().and_then(|b| b.get("system")) {
            let mut acc = Acc {
                tokens: 0,
                text: 0,
                exact: true,
                notes: &mut notes,
            };
            self.anthropic_content(system, &mut acc)
                .map_err(|e| located(e, "system prompt", ".system"))?;
            out.system = acc.tokens + if acc.tokens > 0 { self.overhead() } else { 0 };
            exact &= acc.exact;
        }
        if let Some(instructions) = doc
            .body()
            .filter(|_| self.dialect == Dialect::Responses)
            .and_then(|b| b.get("instructions"))
            .filter(|v| !v.is_null())
        {
            // Instructions are a system message before the items.
            let m = serde_json::json!({"role": "developer", "content": instructions});
            let mt = self
                .message_in(&m, &mut notes, false)
                .map_err(|e| located(e, "instructions", ".instructions"))?;
            out.system += mt.total();
            exact &= mt.exact;
        }
        out.notes = notes;
        out.messages.reserve_exact(doc.messages().len());
        for (i, m) in doc.messages().iter().enumerate() {
            let mt = self
                .message_in(m, &mut out.notes, carrier == Some(i))
                .map_err(|e| located(e, &format!("message {i}"), &doc.message_path(i)))?;
            exact &= mt.exact;
            out.messages.push(mt);
        }
        out.exact = exact;
        Ok(out)
    }

    fn overhead(&self) -> usize {
        self.settings.message_tokens.max(0) as usize
    }

    /// Counts one message (content and overhead). Every field that carries text is counted
    /// whatever the dialect: a message written in another dialect's shape (a mixed document,
    /// or `--format` forcing the dialect) is never undercounted. The message's own fields are
    /// the chat formula's (role, name, content, refusal, tool_call_id, tool_calls,
    /// function_call), which both chat dialects share; each content part is measured by the
    /// dialect that knows its type ([`crate::dialect::Measure`]).
    pub fn message(&self, m: &Value, notes: &mut Notes) -> Result<MessageTokens> {
        self.message_in(m, notes, false)
    }

    /// [`Self::message`]; `carries_tools` for the system message that the namespace of
    /// function definitions is appended to: its content is followed by a newline, and its
    /// role and per-message framing are the namespace's (counted with the tools).
    fn message_in(
        &self,
        m: &Value,
        notes: &mut Notes,
        carries_tools: bool,
    ) -> Result<MessageTokens> {
        let mut acc = Acc {
            tokens: 0,
            text: 0,
            exact: self.dialect.exact_counts(),
            notes,
        };
        if let Some(item) = item_measure(m) {
            self.item(m, item, &mut acc)?;
            return Ok(MessageTokens {
                content: acc.tokens,
                text: 0,
                overhead: if matches!(item, ItemMeasure::Reference) {
                    0
                } else {
                    self.overhead()
                },
                exact: acc.exact,
            });
        }
        let mut overhead = if carries_tools {
            0
        } else {
            self.settings.message_tokens
        };
        if let Some(role) = m.field("role").and_then(Value::as_str) {
            if !carries_tools {
                acc.tokens += self.text(role)?;
            }
        }
        if let Some(name) = m.field("name").and_then(Value::as_str) {
            acc.tokens += self.text(name)?;
            overhead += self.settings.name_tokens;
        }
        match m.field("content") {
            None | Some(Value::Null) => acc.tokens += usize::from(carries_tools),
            Some(Value::String(s)) if carries_tools => {
                acc.text = self.text(&format!("{s}\n")).context(".content")?;
                acc.tokens += acc.text;
            }
            Some(Value::String(s)) => {
                acc.text = self.text(s).context(".content")?;
                acc.tokens += acc.text;
            }
            Some(Value::Array(parts)) => {
                for (k, p) in parts.iter().enumerate() {
                    self.part(p, &mut acc)
                        .with_context(|| format!(".content[{k}]"))?;
                }
                if carries_tools {
                    acc.tokens += 1;
                    acc.estimate(
                        "tool definitions: appending them to a system message of content parts is not verified against API counts",
                    );
                }
            }
            Some(other) => {
                acc.tokens += self.text(&other.to_string())?;
                acc.estimate("non-string content counted as its JSON text");
            }
        }
        if let Some(Value::String(r)) = m.field("refusal") {
            acc.tokens += self.text(r)?;
        }
        if let Some(id) = m.field("tool_call_id").and_then(Value::as_str) {
            acc.tokens += self.text(id)?;
        }
        if matches!(
            m.field("role").and_then(Value::as_str),
            Some("tool" | "function")
        ) {
            acc.estimate("tool results are counted with an estimated format");
        }
        if let Some(calls) = m.field("tool_calls").and_then(Value::as_array) {
            for (k, c) in calls.iter().enumerate() {
                let f = c.field("function").unwrap_or(&Value::Null);
                let name = f.field("name").and_then(Value::as_str);
                self.call(name, f.field("arguments"), true, &mut acc)
                    .with_context(|| format!(".tool_calls[{k}]"))?;
            }
        }
        if let Some(fc) = m.field("function_call").filter(|f| f.is_object()) {
            let name = fc.field("name").and_then(Value::as_str);
            self.call(name, fc.field("arguments"), true, &mut acc)
                .context(".function_call")?;
        }
        Ok(MessageTokens {
            content: acc.tokens,
            text: acc.text,
            overhead: overhead.max(0) as usize,
            exact: acc.exact,
        })
    }

    /// A Responses item other than a message, counted by the chat formula's analogue (no
    /// formula is published): the message framing (the caller's overhead), one token for what
    /// stands in a role's place, and the item's own text; an assistant message's tool call for a
    /// call, a tool message for an output. Reasoning and compaction carry encrypted content,
    /// estimated as Codex does (docs/counting.md).
    fn item(&self, m: &Value, item: ItemMeasure, acc: &mut Acc) -> Result<()> {
        acc.estimate("Responses items are counted with an estimated format");
        // One token in place of a role, for every item with content.
        acc.tokens += usize::from(!matches!(
            item,
            ItemMeasure::Reference | ItemMeasure::Control
        ));
        match item {
            ItemMeasure::Call {
                name,
                args,
                encoded,
            } => self.call(name, args, encoded, acc)?,
            ItemMeasure::Output { output, id } => {
                if let Some(id) = id {
                    acc.tokens += self.text(id)?;
                }
                match output {
                    Some(Value::String(s)) => acc.tokens += self.text(s).context(".output")?,
                    Some(Value::Array(parts)) => {
                        for (k, p) in parts.iter().enumerate() {
                            if p.field("type").is_some() {
                                self.part(p, acc).with_context(|| format!(".output[{k}]"))?;
                            } else {
                                // A shell call's output: stdout, stderr, outcome.
                                self.text_leaves(p, acc)?;
                            }
                        }
                    }
                    Some(p @ Value::Object(_)) => self.part(p, acc).context(".output")?,
                    Some(other) => acc.tokens += self.text(&other.to_string())?,
                    None => {}
                }
            }
            ItemMeasure::Reasoning {
                summary,
                content,
                encrypted,
            } => {
                for v in [summary, content].into_iter().flatten() {
                    self.text_leaves(v, acc)?;
                }
                if let Some(e) = encrypted {
                    acc.tokens += encrypted_tokens(e);
                    acc.estimate(ENCRYPTED_NOTE);
                }
            }
            ItemMeasure::Compaction(encrypted) => {
                acc.tokens += encrypted.map_or(0, encrypted_tokens);
                acc.estimate(ENCRYPTED_NOTE);
            }
            ItemMeasure::Hosted { image } => {
                match (image, m) {
                    (Some(data), Value::Object(o)) => {
                        for (k, v) in o {
                            if k != "result" && k != "type" {
                                self.text_leaves(v, acc)?;
                            }
                        }
                        let dims = image::base64_dimensions(data);
                        acc.tokens += self.image_tokens(dims, None, acc) as usize;
                    }
                    _ => self.text_leaves(m, acc)?,
                }
                acc.estimate("calls the provider runs are counted by their text");
            }
            ItemMeasure::Unknown(ty) => {
                self.text_leaves(m, acc)?;
                acc.notes.warnings.insert(format!(
                    "unknown item type {ty:?}: kept, counted by its text"
                ));
            }
            ItemMeasure::Reference => {
                acc.estimate(
                    "item_reference: the server holds the item; its size is unknown (counted as 0)",
                );
                acc.notes.warnings.insert(
                    "item_reference items are held by the server: counted as 0 tokens, their size is unknown".to_string(),
                );
            }
            ItemMeasure::Control => {}
        }
        Ok(())
    }

    /// A tool call: its framing, name and arguments.
    fn call(
        &self,
        name: Option<&str>,
        args: Option<&Value>,
        encoded: bool,
        acc: &mut Acc,
    ) -> Result<()> {
        acc.tokens += CALL_OVERHEAD;
        if let Some(n) = name {
            acc.tokens += self.text(n)?;
        }
        if let Some(args) = args {
            acc.tokens += self.args(args, encoded)?;
        }
        acc.estimate("tool calls are counted with an estimated format");
        Ok(())
    }

    /// The tokens of a call's arguments: a JSON text (`encoded`, OpenAI's `arguments`) as
    /// written, null as nothing; a JSON value (Anthropic's `input`) as its compact JSON text.
    pub fn args(&self, args: &Value, encoded: bool) -> Result<usize> {
        match args {
            Value::String(a) if encoded => self.text(a),
            Value::Null if encoded => Ok(0),
            other => self.text(&other.to_string()),
        }
    }

    /// One content part or block, in whichever dialect knows its type: every dialect's parts are
    /// counted in any document, so a mixed one is never undercounted.
    fn part(&self, p: &Value, acc: &mut Acc) -> Result<()> {
        let ty = p.field("type").and_then(Value::as_str).unwrap_or("");
        let Some((owner, part)) = find_part(ty) else {
            self.text_leaves(p, acc)?;
            let what = self.dialect.part_noun();
            if self.dialect.exact_counts() {
                acc.estimate(format!("unknown {what} type {ty:?} counted by its text"));
            }
            acc.notes.warnings.insert(format!(
                "unknown {what} type {ty:?}: kept, counted by its text"
            ));
            return Ok(());
        };
        match owner.measure(p, part) {
            Measure::Text(t) => {
                if let Some(t) = t {
                    acc.tokens += self.text(t)?;
                }
            }
            Measure::Image { data, detail } => {
                let dims = match data {
                    ImageData::Base64(d) => image::base64_dimensions(d),
                    ImageData::Url(u) => image::data_url_dimensions(u),
                    ImageData::Unknown => None,
                };
                acc.tokens += self.image_tokens(dims, detail, acc) as usize;
            }
            Measure::Call {
                name,
                args,
                encoded,
            } => self.call(name, args, encoded, acc)?,
            Measure::Result(content) => {
                acc.tokens += CALL_OVERHEAD;
                if let Some(c) = content {
                    self.anthropic_content(c, acc).context(".content")?;
                }
            }
            Measure::Opaque(data) => acc.tokens += data.len().div_ceil(4),
            Measure::ByText => {
                self.text_leaves(p, acc)?;
                if owner != self.dialect {
                    acc.estimate(format!(
                        "{} {ty:?} blocks are counted by their text",
                        owner.title()
                    ));
                }
            }
            Measure::Audio(data) => {
                // ~10 tokens a second; duration estimated from the payload at 128 kbit/s.
                acc.tokens += (data.len() * 3 / 4).div_ceil(1600);
                acc.estimate("audio is estimated at 10 tokens a second (128 kbit/s assumed)");
            }
            Measure::File(name) => {
                if let Some(n) = name {
                    acc.tokens += self.text(n)?;
                }
                acc.estimate("file parts: the file's content cannot be counted offline");
            }
        }
        Ok(())
    }

    /// Image tokens from known dimensions, or the default size as an estimate.
    fn image_tokens(&self, dims: Option<(u32, u32)>, detail: Option<&str>, acc: &mut Acc) -> u32 {
        let low = detail == Some("low");
        if !self.settings.image_known {
            acc.estimate(format!(
                "{} has no documented image formula: images priced as gpt-4o's",
                self.settings.model_name
            ));
        }
        let needs_size = !(low
            && matches!(
                self.settings.image,
                ImageRule::OpenAi(OpenAiImageScheme::Tiles { .. })
            ));
        let (w, h) = match dims {
            Some(d) => d,
            None => {
                if needs_size {
                    let (w, h) = self.settings.image_size;
                    acc.estimate(format!(
                        "images of unknown size counted as {w}x{h} (--image-size)"
                    ));
                }
                self.settings.image_size
            }
        };
        match self.settings.image {
            ImageRule::OpenAi(scheme) => image::openai_image_tokens(w, h, low, &scheme),
            ImageRule::Anthropic => image::anthropic_image_tokens(w, h),
        }
    }

    /// Counts every string in a value except binary payloads.
    fn text_leaves(&self, v: &Value, acc: &mut Acc) -> Result<()> {
        match v {
            Value::String(s) if !s.starts_with("data:") => acc.tokens += self.text(s)?,
            Value::Array(a) => {
                for x in a {
                    self.text_leaves(x, acc)?;
                }
            }
            Value::Object(o) => {
                for (k, x) in o {
                    if !BINARY_KEYS.contains(&k.as_str()) && k != "type" && k != "cache_control" {
                        self.text_leaves(x, acc)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Anthropic content: a string or blocks (the top-level `system`, a `tool_result`'s
    /// content). Always an estimate.
    fn anthropic_content(&self, c: &Value, acc: &mut Acc) -> Result<()> {
        acc.exact = false;
        match c {
            Value::String(s) => acc.tokens += self.text(s)?,
            Value::Array(blocks) => {
                for (k, b) in blocks.iter().enumerate() {
                    self.part(b, acc).with_context(|| format!("[{k}]"))?;
                }
            }
            Value::Null => {}
            other => acc.tokens += self.text(&other.to_string())?,
        }
        Ok(())
    }

    /// OpenAI tool and function definitions: the namespace the model reads (see [`tools`]),
    /// with its framing, and what `tool_choice`/`function_call` add. Returns whether there was
    /// a namespace (at least one function), which is then appended to the first system
    /// message (see [`Self::namespace_carrier`]).
    fn openai_tools(
        &self,
        tools: Option<&Value>,
        functions: Option<&Value>,
        choice: &OpenAiChoice,
        acc: &mut Acc,
    ) -> Result<bool> {
        let mut defs: Vec<&Value> = Vec::new();
        for t in tools.and_then(Value::as_array).into_iter().flatten() {
            match (t.field("type").and_then(Value::as_str), t.field("function")) {
                (Some("function") | None, Some(f)) => {
                    defs.push(f);
                    for key in t.as_object().into_iter().flat_map(|o| o.keys()) {
                        if key != "type" && key != "function" {
                            acc.estimate(format!(
                                "tool definitions: `{key}` beside a tool's `function` is not verified against API counts"
                            ));
                        }
                    }
                }
                (Some("function"), None) if t.field("name").is_some() => {
                    // The Responses API's flat shape: the function's fields on the tool.
                    defs.push(t);
                    acc.estimate(
                        "tool definitions: function tools in the Responses API's shape are not verified against API counts",
                    );
                }
                _ => {
                    acc.tokens += self.text(&t.to_string())?;
                    acc.estimate("non-function tools are counted as their JSON text");
                }
            }
        }
        defs.extend(functions.and_then(Value::as_array).into_iter().flatten());
        if defs.is_empty() {
            return Ok(false);
        }
        let rendered = tools::render(&defs);
        acc.tokens += self.text(&rendered.text)? + NAMESPACE_FRAMING;
        for note in rendered.notes {
            acc.estimate(note);
        }
        if self.settings.exact {
            let verified = self
                .settings
                .model
                .is_some_and(|m| TOOLS_VERIFIED_MODELS.contains(&m.name.as_str()));
            if !verified {
                acc.estimate(format!(
                    "tool definitions: the rendering is verified on gpt-3.5-turbo, gpt-4, gpt-4-turbo, gpt-4o and gpt-4o-mini, not on {}",
                    self.settings.model_name
                ));
            }
        }
        acc.tokens += self.choice_tokens(choice, acc)?;
        Ok(true)
    }

    /// What `tool_choice`, `function_call` and `parallel_tool_calls` add beside a namespace.
    fn choice_tokens(&self, c: &OpenAiChoice, acc: &mut Acc) -> Result<usize> {
        let mut n = 0;
        match c.tool_choice {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "auto" => {}
            Some(Value::String(s)) if s == "none" => n += 1,
            Some(v) => {
                let name = v
                    .field("function")
                    .and_then(|f| f.field("name"))
                    .and_then(Value::as_str)
                    .filter(|_| v.field("type").and_then(Value::as_str) == Some("function"));
                match name {
                    Some(name) => n += NAMED_TOOL_CHOICE + self.text(name)?,
                    None => {
                        // `required` and newer shapes: as much as a named choice, plus their
                        // text.
                        n += NAMED_TOOL_CHOICE + self.text(&v.to_string())?;
                        acc.estimate(format!(
                            "tool definitions: `tool_choice` {} is not verified against API counts",
                            v
                        ));
                    }
                }
            }
        }
        match c.function_call {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "auto" => {}
            Some(Value::String(s)) if s == "none" => n += 1,
            Some(v) => match v.field("name").and_then(Value::as_str) {
                Some(name) => n += NAMED_FUNCTION_CALL + self.text(name)?,
                None => {
                    n += NAMED_FUNCTION_CALL + self.text(&v.to_string())?;
                    acc.estimate(format!(
                        "tool definitions: `function_call` {v} is not verified against API counts"
                    ));
                }
            },
        }
        if matches!(c.parallel_tool_calls, Some(v) if v != &Value::Bool(true)) {
            acc.estimate(
                "tool definitions: `parallel_tool_calls` false is not verified against API counts",
            );
        }
        Ok(n)
    }

    /// The index of the message a namespace is appended to: the first system message. None
    /// when there is none (the namespace is then a system message of its own, which its
    /// framing already counts).
    fn namespace_carrier(&self, messages: &[Value], acc: &mut Acc) -> Option<usize> {
        fn role(m: &Value) -> Option<&str> {
            m.field("role").and_then(Value::as_str)
        }
        if messages.iter().any(|m| role(m) == Some("developer")) {
            acc.estimate(
                "tool definitions: where they go beside a developer message is not verified against API counts",
            );
        }
        messages.iter().position(|m| role(m) == Some("system"))
    }

    /// Anthropic's estimate: the tool-use system prompt once, then each tool's name,
    /// description and input schema. OpenAI-shaped definitions (`{"type": "function",
    /// "function": {...}}` and legacy `functions`) are counted as the Anthropic tools they are
    /// converted to, their `parameters` as the input schema.
    fn anthropic_tools(
        &self,
        tools: Option<&Value>,
        functions: Option<&Value>,
        acc: &mut Acc,
    ) -> Result<()> {
        let defs: Vec<&Value> = tools
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|t| t.field("function").filter(|f| f.is_object()).unwrap_or(t))
            .chain(functions.and_then(Value::as_array).into_iter().flatten())
            .collect();
        if defs.is_empty() {
            return Ok(());
        }
        acc.tokens += self.settings.tool_overhead as usize;
        for t in defs {
            acc.tokens += CALL_OVERHEAD;
            if let Some(n) = t.field("name").and_then(Value::as_str) {
                acc.tokens += self.text(n)?;
            }
            if let Some(d) = t.field("description").and_then(Value::as_str) {
                acc.tokens += self.text(d)?;
            }
            if let Some(s) = t.field("input_schema").or(t.field("parameters")) {
                acc.tokens += self.text(&s.to_string())?;
            }
        }
        acc.estimate("Anthropic tool definitions are estimated");
        Ok(())
    }
}
