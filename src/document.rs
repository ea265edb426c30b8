//! One input document: its shape (bare message array or request body) and its dialect.
//!
//! This module recognises what a JSON value is, refuses what ctx cannot handle with an error
//! naming the format, and gives the rest of the program the messages and body fields it needs.
//! It never changes the value: commands that rewrite messages do so through
//! [`Document::messages_mut`] and write [`Document::into_value`] back out, so every key ctx does
//! not transform is kept byte-for-byte in place and order.

use anyhow::{Result, bail};
use serde_json::{Map, Value};

pub use crate::dialect::{Dialect, Field, kind};
use crate::dialect::{Foreign, Markers, pointer};

/// Where the messages live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A bare JSON array of messages.
    Array,
    /// A request body object with a `messages` array.
    Body,
}

/// A recognised document.
#[derive(Clone, Debug)]
pub struct Document {
    root: Value,
    /// Array or body.
    pub shape: Shape,
    /// The API it is written for.
    pub dialect: Dialect,
    /// The first structural marker of each dialect, as read when the document was recognised.
    markers: Markers,
}

impl Document {
    /// An empty message array: what is left in a place a document was moved out of.
    pub fn placeholder() -> Document {
        Document {
            root: Value::Array(Vec::new()),
            shape: Shape::Array,
            dialect: Dialect::DEFAULT,
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
            dialect: Dialect::DEFAULT,
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

    fn find_markers(&self) -> Markers {
        Markers::find(self.body(), self.messages(), |i| self.message_pointer(i))
    }

    fn detect_dialect(&self) -> Dialect {
        self.markers.detect()
    }

    /// The first marker of another dialect's structure, if any: a tool call or result when
    /// there is one (which no rewriting command accepts), else any. Its pointer is in the
    /// document; [`pointer::to_path`] shows it.
    pub fn foreign_marker(&self) -> Option<Foreign<'_>> {
        self.markers.foreign(self.dialect)
    }

    /// When the document also carries another dialect's structure (no API accepts such a
    /// document as it is): a warning naming the first marker of each. Counting counts every
    /// part of either kind, so this is only a warning for `count`.
    pub fn mixed_dialects(&self) -> Option<String> {
        let foreign = self.foreign_marker()?;
        let own = match self
            .markers
            .tool(self.dialect)
            .or(self.markers.other(self.dialect))
        {
            Some(m) => format!(" ({})", pointer::to_path(&m.at)),
            None => String::new(),
        };
        Some(format!(
            "the document is read as {}{own} but also has {} structure ({}); no API accepts both as they are",
            self.dialect.title(),
            foreign.dialect.title(),
            pointer::to_path(&foreign.marker.at)
        ))
    }

    /// Refuses a document whose tool calls or results are written in another dialect than the
    /// one it is read as (mixed, or contradicted by `--format`): calls and results could not be
    /// paired, and removing or rewriting messages could leave orphans.
    pub fn require_one_tool_format(&self) -> Result<()> {
        let Some((other, foreign)) = self.markers.foreign_tool(self.dialect) else {
            return Ok(());
        };
        let (read_as, other) = (self.dialect.title(), other.title());
        let foreign = pointer::to_path(&foreign.at);
        let what = match self.markers.tool(self.dialect) {
            Some(own) => format!(
                "the document mixes {read_as} tool calls or results ({}) with {other} ones ({foreign})",
                pointer::to_path(&own.at)
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

    /// The pointer to message `i`: `/messages/i` in a body, `/i` in an array.
    pub fn message_pointer(&self, i: usize) -> String {
        match self.shape {
            Shape::Array => format!("/{i}"),
            Shape::Body => format!("/messages/{i}"),
        }
    }

    /// The jq-style path of message `i`, as users see it: `.messages[i]` in a body, `.[i]` in
    /// an array.
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
