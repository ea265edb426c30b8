//! One input document: its shape (bare message array or request body) and its dialect.
//!
//! This module recognises what a JSON value is, refuses what ctx cannot handle with an error
//! naming the format, and gives the rest of the program the messages and body fields it needs.
//! It never changes the value: commands that rewrite messages do so through
//! [`Document::messages_mut`] and write [`Document::into_value`] back out, so every key ctx does
//! not transform is kept byte-for-byte in place and order.

use anyhow::{Result, bail};
use serde_json::{Map, Value};

/// Where the messages live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A bare JSON array of messages.
    Array,
    /// A request body object with a `messages` array.
    Body,
}

/// The API a document is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Dialect {
    /// OpenAI Chat Completions (and the many servers that speak it).
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

impl Dialect {
    /// The dialect's name as ctx prints it.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Openai => "openai",
            Dialect::Anthropic => "anthropic",
        }
    }

    /// The other dialect.
    pub fn other(self) -> Dialect {
        match self {
            Dialect::Openai => Dialect::Anthropic,
            Dialect::Anthropic => Dialect::Openai,
        }
    }

    /// The dialect's name in a sentence.
    pub fn title(self) -> &'static str {
        match self {
            Dialect::Openai => "OpenAI",
            Dialect::Anthropic => "Anthropic",
        }
    }
}

/// A recognised document.
#[derive(Clone, Debug)]
pub struct Document {
    root: Value,
    /// Array or body.
    pub shape: Shape,
    /// OpenAI or Anthropic.
    pub dialect: Dialect,
    /// The first structural marker of each dialect, as read when the document was recognised.
    markers: Markers,
}

/// Anthropic content block types that make a document Anthropic (besides `image` with a
/// `source`). Tool blocks are listed apart, in [`ANTHROPIC_TOOL_BLOCKS`].
const ANTHROPIC_BLOCKS: &[&str] = &[
    "thinking",
    "redacted_thinking",
    "document",
    "search_result",
    "container_upload",
];

/// Anthropic blocks that carry tool calls or results (and any `*_tool_result`).
const ANTHROPIC_TOOL_BLOCKS: &[&str] = &[
    "tool_use",
    "tool_result",
    "server_tool_use",
    "mcp_tool_use",
    "mcp_tool_result",
];

/// OpenAI content part types that make a document OpenAI.
const OPENAI_PARTS: &[&str] = &["image_url", "input_audio", "file"];

/// Where a document first shows each dialect's structure (jq-style paths). Tool markers (calls
/// and results) are kept apart from the others: they decide how calls pair with results, so a
/// document whose tool markers belong to the other dialect cannot be rewritten safely.
#[derive(Clone, Debug, Default)]
struct Markers {
    openai_tool: Option<Marker>,
    anthropic_tool: Option<Marker>,
    openai_other: Option<Marker>,
    anthropic_other: Option<Marker>,
}

/// One structural marker: where it is, and its place in the document (0 for body keys, else
/// the message index + 1).
#[derive(Clone, Debug)]
struct Marker {
    order: usize,
    path: String,
}

impl Markers {
    /// The first tool marker and first other marker of `dialect`, as paths.
    fn of(&self, dialect: Dialect) -> (Option<&str>, Option<&str>) {
        let (tool, other) = match dialect {
            Dialect::Openai => (&self.openai_tool, &self.openai_other),
            Dialect::Anthropic => (&self.anthropic_tool, &self.anthropic_other),
        };
        (
            tool.as_ref().map(|m| m.path.as_str()),
            other.as_ref().map(|m| m.path.as_str()),
        )
    }
}

impl Document {
    /// An empty message array: what is left in a place a document was moved out of.
    pub fn placeholder() -> Document {
        Document {
            root: Value::Array(Vec::new()),
            shape: Shape::Array,
            dialect: Dialect::Openai,
            markers: Markers::default(),
        }
    }

    /// Recognises `value`. `format` forces the dialect; otherwise it is read from the
    /// document's structure (never from the model name, which only chooses the counter):
    ///
    /// - tool calls and results decide first, since they decide how calls pair with results:
    ///   `tool_calls`, `function_call`, role `tool`/`function` or `tool_call_id` make it OpenAI;
    ///   `tool_use`, `tool_result` and the other tool blocks make it Anthropic; when both kinds
    ///   are present (no API accepts that) the first in message order decides;
    /// - else a top-level `system`, Anthropic blocks (`thinking`, `document`, `image` with a
    ///   `source`, ...) or Anthropic tool definitions (`input_schema`) make it Anthropic;
    /// - else OpenAI (plain text messages are OpenAI).
    pub fn parse(value: Value, format: Option<Dialect>) -> Result<Document> {
        let shape = match &value {
            Value::Array(_) => Shape::Array,
            Value::Object(o) => match o.get("messages") {
                Some(Value::Array(_)) => Shape::Body,
                Some(other) => bail!(
                    "`.messages` must be an array of messages, found {}",
                    kind(other)
                ),
                None if o.contains_key("input") => bail!(
                    "this looks like an OpenAI Responses API body (`input`), which is not supported yet; send Chat Completions `messages`"
                ),
                None if o.contains_key("contents") => bail!(
                    "this looks like a Gemini body (`contents`), which is not supported yet; send OpenAI or Anthropic `messages`"
                ),
                None if o.contains_key("prompt") => bail!(
                    "this looks like a legacy completions body (`prompt`), which is not supported; send chat `messages`"
                ),
                None => bail!(
                    "expected an array of messages or a request body with `messages`, found an object without `messages`"
                ),
            },
            other => bail!(
                "expected an array of messages or a request body with `messages`, found {}",
                kind(other)
            ),
        };
        let mut doc = Document {
            root: value,
            shape,
            dialect: Dialect::Openai,
            markers: Markers::default(),
        };
        for (i, m) in doc.messages().iter().enumerate() {
            if !m.is_object() {
                bail!(
                    "message {i} ({}): a message must be an object, found {}",
                    doc.message_path(i),
                    kind(m)
                );
            }
        }
        doc.markers = doc.find_markers();
        doc.dialect = match format {
            Some(d) => d,
            None => doc.detect_dialect(),
        };
        Ok(doc)
    }

    fn detect_dialect(&self) -> Dialect {
        let m = &self.markers;
        match (&m.openai_tool, &m.anthropic_tool) {
            (Some(o), Some(a)) if a.order < o.order => Dialect::Anthropic,
            (Some(_), _) => Dialect::Openai,
            (None, Some(_)) => Dialect::Anthropic,
            (None, None) if m.anthropic_other.is_some() => Dialect::Anthropic,
            (None, None) => Dialect::Openai,
        }
    }

    fn find_markers(&self) -> Markers {
        let mut m = Markers::default();
        let first = |slot: &mut Option<Marker>, order: usize, path: String| {
            if slot.is_none() {
                *slot = Some(Marker { order, path });
            }
        };
        if let Some(body) = self.body() {
            if body.contains_key("system") {
                first(&mut m.anthropic_other, 0, ".system".into());
            }
            if body.get("functions").is_some_and(Value::is_array) {
                first(&mut m.openai_other, 0, ".functions".into());
            }
            for (k, t) in body
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                if t.field("input_schema").is_some() {
                    first(&mut m.anthropic_other, 0, format!(".tools[{k}]"));
                } else if t.field("function").is_some_and(Value::is_object) {
                    first(&mut m.openai_other, 0, format!(".tools[{k}]"));
                }
            }
        }
        for (i, msg) in self.messages().iter().enumerate() {
            let at = |rel: &str| format!("{}{rel}", self.message_path(i));
            if msg.field("tool_calls").is_some_and(|c| !c.is_null()) {
                first(&mut m.openai_tool, i + 1, at(".tool_calls"));
            }
            if msg.field("function_call").is_some_and(Value::is_object) {
                first(&mut m.openai_tool, i + 1, at(".function_call"));
            }
            if matches!(
                msg.field("role").and_then(Value::as_str),
                Some("tool" | "function")
            ) {
                first(&mut m.openai_tool, i + 1, at(".role"));
            }
            if msg.field("tool_call_id").is_some_and(|c| !c.is_null()) {
                first(&mut m.openai_tool, i + 1, at(".tool_call_id"));
            }
            for (k, p) in msg
                .field("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let Some(ty) = p.field("type").and_then(Value::as_str) else {
                    continue;
                };
                let path = || at(&format!(".content[{k}]"));
                if ANTHROPIC_TOOL_BLOCKS.contains(&ty) || ty.ends_with("_tool_result") {
                    first(&mut m.anthropic_tool, i + 1, path());
                } else if ANTHROPIC_BLOCKS.contains(&ty)
                    || (ty == "image" && p.field("source").is_some())
                {
                    first(&mut m.anthropic_other, i + 1, path());
                } else if OPENAI_PARTS.contains(&ty) {
                    first(&mut m.openai_other, i + 1, path());
                }
            }
        }
        m
    }

    /// The first marker of the other dialect's structure, if any: the index of its message
    /// (`None` for a body key), its path, and whether it is a tool call or result (which no
    /// rewriting command accepts).
    pub fn foreign_marker(&self) -> Option<(Option<usize>, &str, bool)> {
        let (tool, other) = match self.dialect.other() {
            Dialect::Openai => (&self.markers.openai_tool, &self.markers.openai_other),
            Dialect::Anthropic => (&self.markers.anthropic_tool, &self.markers.anthropic_other),
        };
        let (m, is_tool) = match (tool, other) {
            (Some(m), _) => (m, true),
            (None, Some(m)) => (m, false),
            (None, None) => return None,
        };
        Some((m.order.checked_sub(1), m.path.as_str(), is_tool))
    }

    /// When the document also carries the other dialect's structure (no API accepts such a
    /// document as it is): a warning naming the first marker of each. Counting counts every
    /// part of either kind, so this is only a warning for `count`.
    pub fn mixed_dialects(&self) -> Option<String> {
        let other = self.dialect.other();
        let (own_tool, own_other) = self.markers.of(self.dialect);
        let (foreign_tool, foreign_other) = self.markers.of(other);
        let foreign = foreign_tool.or(foreign_other)?;
        let own = match own_tool.or(own_other) {
            Some(p) => format!(" ({p})"),
            None => String::new(),
        };
        Some(format!(
            "the document is read as {}{own} but also has {} structure ({foreign}); no API accepts both as they are",
            self.dialect.title(),
            other.title()
        ))
    }

    /// Refuses a document whose tool calls or results are written in the other dialect than the
    /// one it is read as (mixed, or contradicted by `--format`): calls and results could not be
    /// paired, and removing or rewriting messages could leave orphans.
    pub fn require_one_tool_format(&self) -> Result<()> {
        let (read_as, other) = (self.dialect.title(), self.dialect.other().title());
        let Some(foreign) = self.markers.of(self.dialect.other()).0 else {
            return Ok(());
        };
        let what = match self.markers.of(self.dialect).0 {
            Some(own) => format!(
                "the document mixes {read_as} tool calls or results ({own}) with {other} ones ({foreign})"
            ),
            None => format!(
                "the document is read as {read_as} (--format) but its tool calls or results are {other} ({foreign})"
            ),
        };
        bail!(
            "{what}: ctx cannot pair them safely, so it does not rewrite the document; convert it to one dialect"
        )
    }

    /// Refuses messages without a string `role` (count and every command that rewrites messages
    /// need one; `ctx check` reports them instead), with a hint for ShareGPT-style messages.
    pub fn require_roles(&self) -> Result<()> {
        for (i, m) in self.messages().iter().enumerate() {
            let path = self.message_path(i);
            match m.field("role") {
                Some(Value::String(_)) => {}
                Some(other) => bail!(
                    "message {i} ({path}.role): `role` must be a string, found {}",
                    kind(other)
                ),
                None => bail!("message {i} ({path}) has no `role`{}", missing_role_hint(m)),
            }
        }
        Ok(())
    }
    /// The messages.
    pub fn messages(&self) -> &[Value] {
        match &self.root {
            Value::Array(a) => a,
            Value::Object(o) => o["messages"].as_array().map(Vec::as_slice).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// The messages, for commands that rewrite them.
    pub fn messages_mut(&mut self) -> &mut Vec<Value> {
        match &mut self.root {
            Value::Array(a) => a,
            Value::Object(o) => match o.get_mut("messages") {
                Some(Value::Array(a)) => a,
                _ => unreachable!("checked in Document::parse"),
            },
            _ => unreachable!("checked in Document::parse"),
        }
    }

    /// The request body, when the document is one.
    pub fn body(&self) -> Option<&Map<String, Value>> {
        match &self.root {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The body's `model`, if any.
    pub fn body_model(&self) -> Option<&str> {
        self.body()?.get("model")?.as_str()
    }

    /// The body's output limit (`max_completion_tokens`, else `max_tokens`), if any.
    pub fn body_max_tokens(&self) -> Option<u64> {
        let b = self.body()?;
        b.get("max_completion_tokens")
            .and_then(Value::as_u64)
            .or_else(|| b.get("max_tokens").and_then(Value::as_u64))
    }

    /// The jq-style path of message `i`: `.messages[i]` in a body, `.[i]` in an array.
    pub fn message_path(&self, i: usize) -> String {
        match self.shape {
            Shape::Array => format!(".[{i}]"),
            Shape::Body => format!(".messages[{i}]"),
        }
    }

    /// The document as JSON, for writing out.
    pub fn into_value(self) -> Value {
        self.root
    }

    /// The document as JSON.
    pub fn value(&self) -> &Value {
        &self.root
    }
}

/// The hint for a message without `role`: how to convert ShareGPT (`from`/`value`) messages.
pub fn missing_role_hint(m: &Value) -> &'static str {
    if m.field("from").is_some() && m.field("value").is_some() {
        "; this looks like ShareGPT (`from`/`value`): convert it to `role`/`content`, e.g. with jq 'map({role: ({human: \"user\", gpt: \"assistant\", system: \"system\"}[.from] // .from), content: .value})'"
    } else {
        "; every message needs a `role` (`system`, `user`, `assistant`, ...)"
    }
}

/// A JSON value's kind, for error messages.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Looking up an object's field by name, faster than `Value::get` for the small objects chat
/// messages are made of: with ctx's JSON maps (insertion-ordered, SipHash-keyed), comparing a
/// few keys costs less than hashing the one asked for.
pub trait Field {
    /// The value of field `key`, if `self` is an object that has it (as `Value::get`).
    fn field(&self, key: &str) -> Option<&Value>;
}

impl Field for Value {
    #[inline]
    fn field(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(map) if map.len() <= 8 => {
                map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
            }
            Value::Object(map) => map.get(key),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Document> {
        Document::parse(v, None)
    }

    #[test]
    fn detects_shapes_and_dialects() {
        let d = parse(json!([{"role": "user", "content": "hi"}])).unwrap();
        assert_eq!((d.shape, d.dialect), (Shape::Array, Dialect::Openai));
        let d = parse(json!({"system": "s", "messages": []})).unwrap();
        assert_eq!((d.shape, d.dialect), (Shape::Body, Dialect::Anthropic));
        let d = parse(
            json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}]),
        )
        .unwrap();
        assert_eq!(d.dialect, Dialect::Anthropic);
        let d = parse(json!([{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
        ]}]))
        .unwrap();
        assert_eq!(d.dialect, Dialect::Anthropic);
        let d =
            parse(json!({"tools": [{"name": "f", "input_schema": {}}], "messages": []})).unwrap();
        assert_eq!(d.dialect, Dialect::Anthropic);
        let d = Document::parse(
            json!({"system": "s", "messages": []}),
            Some(Dialect::Openai),
        )
        .unwrap();
        assert_eq!(d.dialect, Dialect::Openai);
    }

    /// OpenRouter and LiteLLM take OpenAI-shaped bodies for Claude models: the model name never
    /// makes a document Anthropic.
    #[test]
    fn claude_model_names_do_not_decide_the_dialect() {
        let d = parse(json!({"model": "claude-sonnet-4", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "c", "content": "ok"}
        ]}))
        .unwrap();
        assert_eq!(d.dialect, Dialect::Openai);
        assert!(d.mixed_dialects().is_none());
        d.require_one_tool_format().unwrap();
        let d = parse(json!({"model": "anthropic/claude-3-5-haiku", "messages": []})).unwrap();
        assert_eq!(d.dialect, Dialect::Openai);
    }

    #[test]
    fn tool_markers_decide_mixed_documents_and_block_rewriting() {
        // A top-level system with OpenAI tool calls: the calls decide (they decide pairing).
        let d = parse(json!({"system": "s", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "ok"}
        ]}))
        .unwrap();
        assert_eq!(d.dialect, Dialect::Openai);
        let w = d.mixed_dialects().unwrap();
        assert!(
            w.contains(".messages[1].tool_calls") && w.contains(".system"),
            "{w}"
        );
        d.require_one_tool_format().unwrap();
        // Tool markers of both kinds: the first decides; rewriting is refused.
        let d = parse(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]},
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "ok"}
        ]))
        .unwrap();
        assert_eq!(d.dialect, Dialect::Anthropic);
        let e = d.require_one_tool_format().unwrap_err().to_string();
        assert!(
            e.contains(".[1].content[0]") && e.contains(".[3].tool_calls"),
            "{e}"
        );
        // --format contradicting the tool markers: refused too.
        let d = Document::parse(
            json!([{"role": "assistant", "tool_calls": [{"id": "c"}]}]),
            Some(Dialect::Anthropic),
        )
        .unwrap();
        let e = d.require_one_tool_format().unwrap_err().to_string();
        assert!(e.contains("(--format)"), "{e}");
    }

    #[test]
    fn messages_without_a_role_are_refused_with_a_hint() {
        let d = parse(json!([{"from": "human", "value": "hi"}])).unwrap();
        let e = d.require_roles().unwrap_err().to_string();
        assert!(
            e.starts_with("message 0 (.[0]) has no `role`; this looks like ShareGPT"),
            "{e}"
        );
        let d = parse(json!({"messages": [{"role": "user"}, {"content": "x"}]})).unwrap();
        let e = d.require_roles().unwrap_err().to_string();
        assert!(
            e.starts_with("message 1 (.messages[1]) has no `role`"),
            "{e}"
        );
        let d = parse(json!([{"role": 3}])).unwrap();
        let e = d.require_roles().unwrap_err().to_string();
        assert!(e.contains("must be a string, found a number"), "{e}");
    }

    #[test]
    fn names_unsupported_formats() {
        let e = parse(json!({"model": "gpt-4.1", "input": "hi"}))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Responses API") && e.contains("not supported yet"),
            "{e}"
        );
        let e = parse(json!({"contents": []})).unwrap_err().to_string();
        assert!(e.contains("Gemini"), "{e}");
        let e = parse(json!(42)).unwrap_err().to_string();
        assert!(e.contains("found a number"), "{e}");
        let e = parse(json!([{"role": "user"}, "oops"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("message 1 (.[1])"), "{e}");
    }
}
