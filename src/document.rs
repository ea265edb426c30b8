//! One input document: its shape (bare message array or request body) and its dialect.
//!
//! This module recognises what a JSON value is, refuses what ctx cannot handle with an error
//! naming the format, and gives the rest of the program the messages and body fields it needs.
//! It never changes the value: commands that rewrite messages do so through
//! [`Document::messages_mut`] and write [`Document::into_value`] back out, so every key ctx does
//! not transform is kept byte-for-byte in place and order.

use anyhow::{Result, bail};
use serde_json::{Map, Value, json};

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
    /// The body key holding the messages: `messages`, or a Responses body's `input`.
    key: &'static str,
    /// How a Responses body's `input` was written, to write it back the same way.
    input: Input,
    /// The Batch envelope the request body came in, if it came in one.
    batch: Option<Batch>,
}

/// The `custom_id` of a document that is an OpenAI Batch input line (`custom_id` and `body`), as
/// the context of its errors: `Batch line "req-7": cannot fit ...`, and the report line of a
/// failed document names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchLine(pub String);

impl BatchLine {
    /// The Batch line `raw` is, before it is parsed as a document.
    pub fn of(raw: &Value) -> Option<BatchLine> {
        let o = raw.as_object().filter(|o| o.contains_key("body"))?;
        o.get("custom_id")
            .and_then(Value::as_str)
            .map(|id| BatchLine(id.to_string()))
    }
}

impl std::fmt::Display for BatchLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Batch line {:?}", self.0)
    }
}

/// An OpenAI Batch input line, `{"custom_id", "method", "url", "body"}`: the request is its
/// `body`; the rest of the line is kept as it is.
#[derive(Clone, Debug)]
struct Batch {
    custom_id: Option<String>,
    url: Option<String>,
}

impl Batch {
    /// The envelope of `v`, when it is a Batch input line; an error naming a Batch output or
    /// error line, which holds a reply, not a request.
    fn of(v: &Value) -> Result<Option<Batch>> {
        let Value::Object(o) = v else {
            return Ok(None);
        };
        if !o.contains_key("custom_id") {
            return Ok(None);
        }
        let custom_id = o
            .get("custom_id")
            .and_then(Value::as_str)
            .map(str::to_string);
        match o.get("body") {
            Some(Value::Object(_)) => Ok(Some(Batch {
                custom_id,
                url: o.get("url").and_then(Value::as_str).map(str::to_string),
            })),
            Some(other) => bail!(
                "Batch line: `.body` must be a request body object, found {}",
                kind(other)
            ),
            None if o.contains_key("response") || o.contains_key("error") => bail!(
                "this is a Batch output line (`response.body` holds the provider's reply, not a request): ctx reads requests, such as the lines of the Batch input file"
            ),
            None => Ok(None),
        }
    }

    /// Refuses a line whose `url` names another endpoint than its body's shape.
    fn check_endpoint(&self, key: &str) -> Result<()> {
        let Some(url) = self.url.as_deref() else {
            return Ok(());
        };
        let path = url
            .split(['?', '#'])
            .next()
            .unwrap_or(url)
            .trim_end_matches('/');
        let expected = if key == INPUT {
            "/responses"
        } else {
            "/chat/completions"
        };
        if path.ends_with("/chat/completions") || path.ends_with("/responses") {
            if !path.ends_with(expected) {
                bail!(
                    "Batch line: the url is {url:?} but the body is a {} request",
                    if key == INPUT {
                        "Responses"
                    } else {
                        "Chat Completions or Messages"
                    }
                );
            }
            return Ok(());
        }
        bail!(
            "Batch line: the url is {url:?}; ctx reads /v1/chat/completions and /v1/responses requests"
        )
    }
}

const MESSAGES: &str = "messages";
const INPUT: &str = "input";

/// How a body's messages were written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Input {
    /// A list (every chat body, a Responses `input` list).
    List,
    /// A Responses `input` string: read as one user message, and written back as a string
    /// while it is still one.
    Text,
    /// No Responses `input` (a body continuing server-held state, or a stored prompt): read
    /// as no items, and written back without `input` while there are none.
    Absent,
}

/// The body keys that only a Responses body has (besides `input`): server-held state, a stored
/// prompt (an object; a completions `prompt` is a string), `instructions`.
fn is_responses_body(o: &Map<String, Value>) -> bool {
    o.contains_key(INPUT)
        || o.contains_key("previous_response_id")
        || o.contains_key("conversation")
        || o.contains_key("instructions")
        || o.get("prompt").is_some_and(Value::is_object)
}

/// Puts a Responses body's `input` in list form, saying how it was written.
fn take_input(o: &mut Map<String, Value>) -> Result<Input> {
    match o.get_mut(INPUT) {
        Some(Value::Array(_)) => Ok(Input::List),
        Some(v @ Value::String(_)) => {
            let text = v.take();
            *v = Value::Array(vec![json!({"role": "user", "content": text})]);
            Ok(Input::Text)
        }
        None => {
            o.insert(INPUT.to_string(), Value::Array(Vec::new()));
            Ok(Input::Absent)
        }
        Some(other) => bail!(
            "`.input` must be a string or an array of items, found {}",
            kind(other)
        ),
    }
}

impl Document {
    /// An empty message array: what is left in a place a document was moved out of.
    pub fn placeholder() -> Document {
        Document {
            root: Value::Array(Vec::new()),
            shape: Shape::Array,
            dialect: Dialect::DEFAULT,
            markers: Markers::default(),
            key: MESSAGES,
            input: Input::List,
            batch: None,
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
    pub fn parse(mut value: Value, format: Option<Dialect>) -> Result<Document> {
        let batch = Batch::of(&value)?;
        let request = match &batch {
            Some(_) => &mut value["body"],
            None => &mut value,
        };
        let (shape, key, input) = match request {
            Value::Array(_) => (Shape::Array, MESSAGES, Input::List),
            Value::Object(o) => match o.get("messages") {
                Some(Value::Array(_)) => (Shape::Body, MESSAGES, Input::List),
                Some(other) => bail!(
                    "`.messages` must be an array of messages, found {}",
                    kind(other)
                ),
                None if is_responses_body(o) => (Shape::Body, INPUT, take_input(o)?),
                None if o.contains_key("contents") => bail!(
                    "this looks like a Gemini body (`contents`), which is not supported yet; send OpenAI or Anthropic `messages`"
                ),
                None if o.contains_key("prompt") => bail!(
                    "this looks like a legacy completions body (`prompt`), which is not supported; send chat `messages`"
                ),
                None => bail!(
                    "expected an array of messages or a request body with `messages` or `input`, found an object with neither"
                ),
            },
            other => bail!(
                "expected an array of messages or a request body with `messages` or `input`, found {}",
                kind(other)
            ),
        };
        if let Some(b) = &batch {
            b.check_endpoint(key)?;
        }
        match (key, format) {
            (INPUT, Some(d)) if d != Dialect::Responses => bail!(
                "--format {}: this is an OpenAI Responses body (`input`), not {}; leave --format out or pass --format responses",
                d.name(),
                d.title()
            ),
            (MESSAGES, Some(Dialect::Responses)) if shape == Shape::Body => {
                bail!("--format responses: a Responses body has `input`, not `messages`")
            }
            _ => {}
        }
        let mut doc = Document {
            root: value,
            shape,
            dialect: Dialect::DEFAULT,
            markers: Markers::default(),
            key,
            input,
            batch,
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
            None if key == INPUT => Dialect::Responses,
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
            if !self.dialect.is_message(m) {
                continue;
            }
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
    /// The request: the document, or the body of its Batch line.
    fn request(&self) -> &Value {
        match self.batch {
            Some(_) => &self.root["body"],
            None => &self.root,
        }
    }

    fn request_mut(&mut self) -> &mut Value {
        match self.batch {
            Some(_) => &mut self.root["body"],
            None => &mut self.root,
        }
    }

    /// The `custom_id` of the Batch line the document came in, if it came in one.
    pub fn custom_id(&self) -> Option<&str> {
        self.batch.as_ref()?.custom_id.as_deref()
    }

    /// The messages.
    pub fn messages(&self) -> &[Value] {
        match self.request() {
            Value::Array(a) => a,
            Value::Object(o) => o[self.key].as_array().map(Vec::as_slice).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// The messages, for commands that rewrite them.
    pub fn messages_mut(&mut self) -> &mut Vec<Value> {
        let key = self.key;
        match self.request_mut() {
            Value::Array(a) => a,
            Value::Object(o) => match o.get_mut(key) {
                Some(Value::Array(a)) => a,
                _ => unreachable!("checked in Document::parse"),
            },
            _ => unreachable!("checked in Document::parse"),
        }
    }

    /// The request body, when the document is one.
    pub fn body(&self) -> Option<&Map<String, Value>> {
        match self.request() {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The body's `model`, if any.
    pub fn body_model(&self) -> Option<&str> {
        self.body()?.get("model")?.as_str()
    }

    /// The body's output limit (`max_completion_tokens`, else `max_tokens`; a Responses
    /// body's `max_output_tokens`), if any, with where it is (`the body's max_tokens`).
    pub fn body_max_tokens(&self) -> Option<(u64, &'static str)> {
        let b = self.body()?;
        [
            ("max_completion_tokens", "the body's max_completion_tokens"),
            ("max_tokens", "the body's max_tokens"),
            ("max_output_tokens", "the body's max_output_tokens"),
        ]
        .iter()
        .find_map(|&(k, source)| Some((b.get(k)?.as_u64()?, source)))
    }

    /// The body key naming conversation state the server holds, when the document continues
    /// it: a Responses body's `previous_response_id` or `conversation`. Its `input` is then
    /// only the newest items: what ctx counts is not all the model reads, and dropping items
    /// cannot shrink what the server holds.
    pub fn server_state(&self) -> Option<&'static str> {
        let b = self.body().filter(|_| self.key == INPUT)?;
        ["previous_response_id", "conversation"]
            .into_iter()
            .find(|k| b.get(*k).is_some_and(|v| !v.is_null()))
    }

    /// The pointer to message `i`: `/messages/i` in a body, `/i` in an array, under `/body`
    /// in a Batch line.
    pub fn message_pointer(&self, i: usize) -> String {
        let batch = if self.batch.is_some() { "/body" } else { "" };
        match self.shape {
            Shape::Array => format!("/{i}"),
            Shape::Body => format!("{batch}/{}/{i}", self.key),
        }
    }

    /// The jq-style path of message `i`, as users see it: `.messages[i]` in a body, `.[i]` in
    /// an array.
    pub fn message_path(&self, i: usize) -> String {
        let batch = if self.batch.is_some() { ".body" } else { "" };
        match self.shape {
            Shape::Array => format!(".[{i}]"),
            Shape::Body => format!("{batch}.{}[{i}]", self.key),
        }
    }

    /// The document as JSON, for writing out: a Responses `input` written as a string, or
    /// left out, is written back so while the items allow it.
    pub fn into_value(mut self) -> Value {
        let form = self.input;
        if let Value::Object(o) = self.request_mut() {
            match (form, o.get_mut(INPUT)) {
                (Input::Text, Some(input)) => {
                    if let Some(text) = lone_user_text(input) {
                        *input = Value::String(text);
                    }
                }
                (Input::Absent, Some(Value::Array(items))) if items.is_empty() => {
                    o.shift_remove(INPUT);
                }
                _ => {}
            }
        }
        self.root
    }

    /// The document as JSON.
    pub fn value(&self) -> &Value {
        &self.root
    }
}

/// The text of an `input` that is one user message of string content and nothing else.
fn lone_user_text(input: &mut Value) -> Option<String> {
    let [Value::Object(m)] = input.as_array_mut()?.as_mut_slice() else {
        return None;
    };
    if m.len() != 2 || m.get("role").and_then(Value::as_str) != Some("user") {
        return None;
    }
    match m.get_mut("content") {
        Some(Value::String(s)) => Some(std::mem::take(s)),
        _ => None,
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

    /// The reserve's default comes from the body's output limit, named by its key in messages
    /// (`the reserve (130000 tokens, the body's max_output_tokens) leaves nothing ...`).
    #[test]
    fn the_output_limit_is_named_by_its_key() {
        let limit = |body: Value| parse(body).unwrap().body_max_tokens();
        let msgs = json!([{"role": "user", "content": "hi"}]);
        assert_eq!(
            limit(json!({"messages": msgs, "max_tokens": 5, "max_completion_tokens": 7})),
            Some((7, "the body's max_completion_tokens"))
        );
        assert_eq!(
            limit(json!({"messages": msgs, "max_tokens": 5})),
            Some((5, "the body's max_tokens"))
        );
        assert_eq!(
            limit(json!({"input": "hi", "max_output_tokens": 9})),
            Some((9, "the body's max_output_tokens"))
        );
        assert_eq!(limit(json!({"input": "hi"})), None);
        assert_eq!(limit(msgs), None);
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

    /// A Responses body is read from `input` whichever way it is written, and written back the
    /// same way while its items allow it.
    #[test]
    fn responses_bodies_keep_their_input_form() {
        let d =
            parse(json!({"model": "o4-mini", "input": "tell me a joke", "store": false})).unwrap();
        assert_eq!((d.shape, d.dialect), (Shape::Body, Dialect::Responses));
        assert_eq!(
            d.messages(),
            [json!({"role": "user", "content": "tell me a joke"})]
        );
        assert_eq!(d.message_path(0), ".input[0]");
        assert_eq!(
            d.into_value(),
            json!({"model": "o4-mini", "input": "tell me a joke", "store": false})
        );
        // A string input that became more than one item stays a list.
        let mut d = parse(json!({"input": "q"})).unwrap();
        d.messages_mut().insert(
            0,
            json!({"type": "message", "role": "developer", "content": "s"}),
        );
        assert!(d.into_value()["input"].is_array());
        // No input at all (a chained body): no items, and none written back.
        let body = json!({"previous_response_id": "resp_1", "instructions": "be brief"});
        let d = parse(body.clone()).unwrap();
        assert_eq!(d.dialect, Dialect::Responses);
        assert!(d.messages().is_empty());
        assert_eq!(d.server_state(), Some("previous_response_id"));
        assert_eq!(d.into_value(), body);
        // A stored prompt is a Responses body; a completions prompt is not.
        assert!(parse(json!({"prompt": {"id": "pmpt_1"}})).is_ok());
        assert!(parse(json!({"prompt": "once upon"})).is_err());
        // --format cannot contradict the body's key.
        let e = Document::parse(json!({"input": []}), Some(Dialect::Openai)).unwrap_err();
        assert!(e.to_string().contains("--format openai"), "{e}");
        let e = Document::parse(json!({"messages": []}), Some(Dialect::Responses)).unwrap_err();
        assert!(e.to_string().contains("`input`, not `messages`"), "{e}");
    }

    /// A bare array is Responses input when its items say so; plain messages stay chat.
    #[test]
    fn bare_arrays_of_items_are_responses_input() {
        let d = parse(json!([
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "ok"}
        ]))
        .unwrap();
        assert_eq!(d.dialect, Dialect::Responses);
        d.require_roles().unwrap();
        let d = parse(json!([{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "hi"}]}]))
        .unwrap();
        assert_eq!(d.dialect, Dialect::Responses);
        let d = parse(json!([{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]))
            .unwrap();
        assert_eq!(d.dialect, Dialect::Openai);
        // An element that is neither an item nor a message needs a role.
        let d = parse(json!({"input": [{"content": "x"}]})).unwrap();
        assert!(d.require_roles().is_err());
    }

    /// A Batch input line's request is its body: read, pointed into and written back inside the
    /// envelope; a url naming another endpoint, and an output line, are refused.
    #[test]
    fn batch_lines_are_read_through_their_body() {
        let line = json!({"custom_id": "r-1", "method": "POST", "url": "/v1/responses",
            "body": {"model": "gpt-5", "input": "hi"}});
        let d = parse(line.clone()).unwrap();
        assert_eq!(d.dialect, Dialect::Responses);
        assert_eq!(d.custom_id(), Some("r-1"));
        assert_eq!(d.body_model(), Some("gpt-5"));
        assert_eq!(d.message_path(0), ".body.input[0]");
        assert_eq!(
            pointer::get(d.value(), &d.message_pointer(0)),
            Some(&d.messages()[0])
        );
        assert_eq!(d.into_value(), line);
        // Azure writes the url without /v1; lines without a url are read by their body.
        let azure = json!({"custom_id": "t", "method": "POST", "url": "/chat/completions",
            "body": {"messages": [{"role": "user", "content": "hi"}]}});
        assert_eq!(parse(azure).unwrap().dialect, Dialect::Openai);
        assert!(parse(json!({"custom_id": "t", "body": {"input": []}})).is_ok());
        let e =
            parse(json!({"custom_id": "t", "url": "/v1/chat/completions", "body": {"input": "x"}}))
                .unwrap_err()
                .to_string();
        assert!(
            e.contains("the url is \"/v1/chat/completions\" but the body is a Responses request"),
            "{e}"
        );
        // A body with `instructions` and no `input` is a Responses request too.
        let e = parse(json!({"custom_id": "t", "url": "/v1/chat/completions",
            "body": {"model": "gpt-5", "instructions": "be brief"}}))
        .unwrap_err()
        .to_string();
        assert!(e.ends_with("but the body is a Responses request"), "{e}");
        let e = parse(json!({"custom_id": "t", "url": "/v1/embeddings", "body": {"input": "x"}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/v1/embeddings"), "{e}");
        let e = parse(
            json!({"id": "batch_req_1", "custom_id": "t", "response": {"status_code": 200,
            "body": {}}, "error": null}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("Batch output line"), "{e}");
    }

    #[test]
    fn names_unsupported_formats() {
        let e = parse(json!({"model": "gpt-4.1", "input": 3}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`.input` must be a string or an array"), "{e}");
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
