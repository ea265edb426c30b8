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
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
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
}

/// A recognised document.
#[derive(Clone, Debug)]
pub struct Document {
    root: Value,
    /// Array or body.
    pub shape: Shape,
    /// OpenAI or Anthropic.
    pub dialect: Dialect,
}

/// Anthropic-only content block types; any of them makes a document Anthropic.
const ANTHROPIC_BLOCKS: &[&str] = &[
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "document",
    "search_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
];

impl Document {
    /// An empty message array: what is left in a place a document was moved out of.
    pub fn placeholder() -> Document {
        Document {
            root: Value::Array(Vec::new()),
            shape: Shape::Array,
            dialect: Dialect::Openai,
        }
    }

    /// Recognises `value`. `format` forces the dialect; `model_is_claude` says whether the model
    /// that will be used (flag, body or environment) is a Claude model.
    pub fn parse(
        value: Value,
        format: Option<Dialect>,
        model_hint: impl Fn(Option<&str>) -> bool,
    ) -> Result<Document> {
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
        doc.dialect = match format {
            Some(d) => d,
            None => doc.detect_dialect(model_hint),
        };
        Ok(doc)
    }

    fn detect_dialect(&self, model_is_claude: impl Fn(Option<&str>) -> bool) -> Dialect {
        if let Some(body) = self.body() {
            if body.contains_key("system") {
                return Dialect::Anthropic;
            }
        }
        let has_anthropic_block = self.messages().iter().any(|m| {
            m.get("content")
                .and_then(Value::as_array)
                .is_some_and(|parts| {
                    parts.iter().any(|p| {
                        p.get("type").and_then(Value::as_str).is_some_and(|t| {
                            ANTHROPIC_BLOCKS.contains(&t) || t.ends_with("_tool_result")
                        }) || (p.get("type").and_then(Value::as_str) == Some("image")
                            && p.get("source").is_some())
                    })
                })
        });
        if has_anthropic_block || model_is_claude(self.body_model()) {
            Dialect::Anthropic
        } else {
            Dialect::Openai
        }
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
        Document::parse(v, None, |m| m.is_some_and(|m| m.starts_with("claude")))
    }

    #[test]
    fn detects_shapes_and_dialects() {
        let d = parse(json!([{"role": "user", "content": "hi"}])).unwrap();
        assert_eq!((d.shape, d.dialect), (Shape::Array, Dialect::Openai));
        let d = parse(json!({"system": "s", "messages": []})).unwrap();
        assert_eq!((d.shape, d.dialect), (Shape::Body, Dialect::Anthropic));
        let d = parse(json!({"model": "claude-sonnet-4", "messages": []})).unwrap();
        assert_eq!(d.dialect, Dialect::Anthropic);
        let d = parse(
            json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}]),
        )
        .unwrap();
        assert_eq!(d.dialect, Dialect::Anthropic);
        let d = Document::parse(
            json!({"system": "s", "messages": []}),
            Some(Dialect::Openai),
            |_| false,
        )
        .unwrap();
        assert_eq!(d.dialect, Dialect::Openai);
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
