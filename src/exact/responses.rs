//! An OpenAI Chat Completions document in the Responses API's shape, as OpenAI's
//! `POST /v1/responses/input_tokens` takes it ([`from_chat`]): the messages as Responses input
//! items ([`input_items`]), the function definitions as Responses tools ([`tools`]), and the
//! request options that change the count ([`options`]).
//!
//! The mapping, part by part:
//!
//! | Chat Completions | Responses |
//! | --- | --- |
//! | `system`, `developer`, `user` message | a message item with the same role; text as it is, parts as `input_text` / `input_image` / `input_file` |
//! | `assistant` message's text | an `assistant` message item (none when the text is empty) |
//! | `tool_calls` entry, legacy `function_call` | a `function_call` item (`call_id` the call's `id`; `call_{i}` for the legacy call of message `i`), its `arguments` text as it is |
//! | `tool` message, legacy `function` message | a `function_call_output` item with its call's `call_id` |
//! | `tools` of type `function`, legacy `functions` | flat `{"type": "function", "name", "description", "parameters", "strict"}` tools |
//! | `tool_choice` (else `function_call`) | a mode as it is, a function as `{"type": "function", "name"}` |
//! | `parallel_tool_calls` | as it is |
//! | `reasoning_effort` | `reasoning.effort` |
//! | `response_format` | `text.format` (a `json_schema` one flattened) |
//!
//! Audio parts, assistant or tool messages with other than text, and tools other than functions
//! are not converted: the error says which.

use serde_json::{Map, Value, json};

use super::chat::{self, Part, ToolChoice, ToolDef, Turn};
use crate::document::Document;
use crate::settings::Settings;

/// How the errors end that name what this conversion cannot write.
const UNCONVERTED: &str = "is not converted for the Responses count";

/// A Chat Completions document as a Responses `input_tokens` request body for `model`:
/// `{"model", "input", "tools", "tool_choice", "parallel_tool_calls", "reasoning", "text"}`,
/// each but the first two only when the document has it.
pub(crate) fn from_chat(doc: &Document, settings: &Settings, model: &str) -> Result<Value, String> {
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    out.insert("input".into(), Value::Array(input_items(doc)?));
    let tools = tools(&chat::tool_defs(doc, settings))?;
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
    }
    if let Some(body) = doc.body() {
        options(body, &mut out)?;
    }
    Ok(Value::Object(out))
}

/// The body fields `POST /v1/responses/input_tokens` takes, of a Responses body.
const COUNTED_FIELDS: &[&str] = &[
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "previous_response_id",
    "conversation",
    "reasoning",
    "text",
    "truncation",
];

/// A Responses document as its own `input_tokens` request for `model`: the fields that change
/// the count, as they are (server-held state included: the provider counts it).
pub(crate) fn body(doc: &Document, _settings: &Settings, model: &str) -> Result<Value, String> {
    let mut out = super::counted_fields(model, doc.body(), COUNTED_FIELDS);
    // The items as read (a string `input` as its one message, a missing one as none).
    out.insert("input".into(), Value::Array(doc.messages().to_vec()));
    Ok(Value::Object(out))
}

/// The messages of a Chat Completions document as Responses input items, in order: message
/// items in place (system and developer ones keep their role), tool calls `function_call` items
/// and tool results `function_call_output` items with the same call id.
pub(crate) fn input_items(doc: &Document) -> Result<Vec<Value>, String> {
    let mut items = Vec::new();
    for turn in chat::turns(doc, "Responses") {
        let (i, turn) = turn?;
        match turn {
            Turn::System { role, content } => {
                items.push(json!({"role": role, "content": content_parts(i, content)?}))
            }
            Turn::User(content) => {
                items.push(json!({"role": "user", "content": content_parts(i, content)?}))
            }
            Turn::Assistant { content, calls } => {
                let text = chat::text_only(i, content, "an assistant message", UNCONVERTED)?;
                if !text.is_empty() {
                    items.push(json!({"role": "assistant", "content": text}));
                }
                for c in &calls {
                    items.push(json!({"type": "function_call", "call_id": c.id(),
                        "name": c.name(), "arguments": c.raw_arguments()}));
                }
            }
            Turn::Result(r) => {
                let text = chat::text_only(i, r.content, "a tool result", UNCONVERTED)?;
                items.push(
                    json!({"type": "function_call_output", "call_id": r.call_id, "output": text}),
                );
            }
        }
    }
    Ok(items)
}

/// A message's content as a Responses message item's: a string as it is, parts as `input_text`
/// (text and refusals), `input_image` (with its `detail`, `auto` when none) and `input_file`.
fn content_parts(i: usize, content: Option<&Value>) -> Result<Value, String> {
    Ok(chat::content(i, content, |p| content_part(i, p))?.into_value())
}

/// Content part `p` of message `i` as a Responses input part.
fn content_part(i: usize, p: Part) -> Result<Value, String> {
    Ok(match p {
        Part::Text(text) => json!({"type": "input_text", "text": text}),
        Part::Image { url, detail } => {
            let detail = detail.cloned().unwrap_or(json!("auto"));
            json!({"type": "input_image", "image_url": url, "detail": detail})
        }
        Part::File(file) => {
            let mut item = Map::new();
            item.insert("type".into(), json!("input_file"));
            for k in ["file_id", "file_data", "filename"] {
                if let Some(v) = file.and_then(|f| f.get(k)) {
                    item.insert(k.into(), v.clone());
                }
            }
            Value::Object(item)
        }
        other @ (Part::Audio(_) | Part::Other(_)) => {
            return Err(format!(
                "message {i}: a {:?} part {UNCONVERTED}",
                other.kind()
            ));
        }
    })
}

/// Function definitions as flat Responses tools (`strict` from the `tools` entry, else from the
/// definition); other tools are not converted.
fn tools(defs: &[ToolDef]) -> Result<Vec<Value>, String> {
    defs.iter()
        .map(|d| match d {
            ToolDef::Function { def, strict } => {
                let mut t = Map::new();
                t.insert("type".into(), json!("function"));
                for k in ["name", "description", "parameters"] {
                    if let Some(v) = def.get(k) {
                        t.insert(k.into(), v.clone());
                    }
                }
                if let Some(s) = strict.or_else(|| def.get("strict")) {
                    t.insert("strict".into(), s.clone());
                }
                Ok(Value::Object(t))
            }
            ToolDef::Other { kind, .. } => Err(format!(
                "a tool of type {} {UNCONVERTED}",
                kind.unwrap_or("?")
            )),
        })
        .collect()
}

/// Adds to `out` the Chat Completions `body`'s options that change the count, in the
/// Responses shape: `tool_choice`, `parallel_tool_calls`, `reasoning` (from
/// `reasoning_effort`) and `text.format` (from `response_format`).
fn options(body: &Map<String, Value>, out: &mut Map<String, Value>) -> Result<(), String> {
    match chat::tool_choice(body) {
        None => {}
        Some(ToolChoice::Mode(s)) => {
            out.insert("tool_choice".into(), json!(s));
        }
        Some(ToolChoice::Function(name)) => {
            let name = name
                .cloned()
                .ok_or("a tool_choice without a function name is not converted")?;
            out.insert(
                "tool_choice".into(),
                json!({"type": "function", "name": name}),
            );
        }
    }
    if let Some(p) = body.get("parallel_tool_calls") {
        out.insert("parallel_tool_calls".into(), p.clone());
    }
    if let Some(e) = body.get("reasoning_effort") {
        out.insert("reasoning".into(), json!({"effort": e}));
    }
    if let Some(rf) = body.get("response_format") {
        let format = match rf.get("type").and_then(Value::as_str) {
            Some("json_schema") => {
                let mut f = Map::new();
                f.insert("type".into(), json!("json_schema"));
                if let Some(Value::Object(s)) = rf.get("json_schema") {
                    for (k, v) in s {
                        f.insert(k.clone(), v.clone());
                    }
                }
                Value::Object(f)
            }
            _ => rf.clone(),
        };
        out.insert("text".into(), json!({"format": format}));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::doc;
    use crate::exact::{Provider, request};
    use serde_json::json;

    #[test]
    fn chat_documents_convert_to_responses_input() {
        let (d, s) = doc(
            json!({"model": "gpt-5", "reasoning_effort": "low", "parallel_tool_calls": true,
            "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}, "strict": true}}],
            "tool_choice": {"type": "function", "function": {"name": "get"}},
            "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": true}},
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "https://x.example/a.png", "detail": "low"}}]},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r1"},
                {"role": "assistant", "content": "done"}]}),
        );
        let r = request(Provider::Openai, &d, &s).unwrap();
        assert_eq!(r.path, "responses/input_tokens");
        assert_eq!(
            r.body,
            json!({"model": "gpt-5",
                "input": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": [{"type": "input_text", "text": "look"},
                        {"type": "input_image", "image_url": "https://x.example/a.png", "detail": "low"}]},
                    {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "c1", "output": "r1"},
                    {"role": "assistant", "content": "done"}],
                "tools": [{"type": "function", "name": "get", "parameters": {"type": "object"}, "strict": true}],
                "tool_choice": {"type": "function", "name": "get"},
                "parallel_tool_calls": true,
                "reasoning": {"effort": "low"},
                "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": true}}})
        );
    }
}
