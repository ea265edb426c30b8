//! Anthropic's `count_tokens` request: an Anthropic Messages document's own body without the
//! generation fields ([`body`]), or an OpenAI Chat Completions document converted
//! ([`from_chat`]).

use serde_json::{Map, Value, json};

use super::chat::{self, Choice, Part, ToolDef, Turn};
use crate::document::Document;
use crate::settings::Settings;

/// How the errors end that name what this conversion cannot write.
const UNCONVERTED: &str = "has no Anthropic equivalent";

/// The Messages keys `count_tokens` takes; the others (`max_tokens`, `temperature`, `stream`,
/// `metadata`, `stop_sequences`, `top_p`, `top_k`, `service_tier`, ...) only shape the reply.
const COUNT_KEYS: &[&str] = &[
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",
    "mcp_servers",
    "context_management",
];

/// An Anthropic document's count request: its body without the generation fields.
pub(super) fn body(doc: &Document, settings: &Settings, model: &str) -> Result<Value, String> {
    let mut out = super::counted_fields(model, doc.body(), COUNT_KEYS);
    if doc.body().is_none() {
        // The Messages API takes no system-role message: a bare array's system messages are its
        // top-level `system`, as a body would carry them.
        let mut system = Vec::new();
        let mut messages = Vec::new();
        for (i, m) in doc.messages().iter().enumerate() {
            if matches!(chat::role(m), "system" | "developer") {
                system.push(system_block(i, m.get("content"))?);
            } else {
                messages.push(m.clone());
            }
        }
        if !system.is_empty() {
            out.insert("system".into(), Value::Array(system));
        }
        out.insert("messages".into(), Value::Array(messages));
    }
    if !out.contains_key("tools") {
        let tools = tools(&chat::tool_defs(doc, settings))?;
        if !tools.is_empty() {
            out.insert("tools".into(), Value::Array(tools));
        }
    }
    Ok(Value::Object(out))
}

/// An OpenAI Chat Completions document as an Anthropic Messages count request, as an
/// OpenAI-compatible gateway (OpenRouter, LiteLLM) sends it: system and developer messages
/// become the top-level `system`; tool calls `tool_use` blocks; tool results `tool_result`
/// blocks in a user message; images `image` blocks (inline or by URL); function definitions
/// Anthropic tools; `tool_choice` Anthropic's. Audio, files other than inline PDFs and tools
/// other than functions have no equivalent: the error says which.
pub(super) fn from_chat(doc: &Document, settings: &Settings, model: &str) -> Result<Value, String> {
    let (system, messages) = messages(doc)?;
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), Value::Array(messages));
    let tools = tools(&chat::tool_defs(doc, settings))?;
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
        if let Some(c) = tool_choice(doc)? {
            out.insert("tool_choice".into(), c);
        }
    }
    Ok(Value::Object(out))
}

/// The chat messages as the top-level `system` blocks and the Messages `messages`.
fn messages(doc: &Document) -> Result<(Vec<Value>, Vec<Value>), String> {
    chat::system_apart(doc, "Anthropic", system_block, |messages, i, turn| {
        match turn {
            Turn::System { .. } => unreachable!("system messages are the system prompt"),
            Turn::User(content) => {
                messages.push(json!({"role": "user", "content": blocks(i, content)?}))
            }
            Turn::Assistant { content, calls } => {
                let text = chat::text_only(i, content, "an assistant message", UNCONVERTED)?;
                let mut out = Vec::new();
                if !text.is_empty() {
                    out.push(json!({"type": "text", "text": text}));
                }
                for c in &calls {
                    out.push(json!({"type": "tool_use", "id": c.id(), "name": c.name(),
                        "input": c.arguments(i)?}));
                }
                if !out.is_empty() {
                    messages.push(json!({"role": "assistant", "content": out}));
                }
            }
            Turn::Result(r) => {
                let block = json!({"type": "tool_result", "tool_use_id": r.call_id,
                    "content": blocks(i, r.content)?});
                let is_result =
                    |b: &Value| b.get("type").and_then(Value::as_str) == Some("tool_result");
                chat::push_result(messages, "content", is_result, block);
            }
        }
        Ok(())
    })
}

/// The `system` text block of system message `i`.
fn system_block(i: usize, content: Option<&Value>) -> Result<Value, String> {
    let text = chat::text_only(i, content, "a system message", UNCONVERTED)?;
    Ok(json!({"type": "text", "text": text}))
}

/// A user message's or tool result's content: a string as it is, parts as content blocks.
fn blocks(i: usize, content: Option<&Value>) -> Result<Value, String> {
    Ok(chat::content(i, content, |p| block(i, p))?.into_value())
}

/// Content part `p` of message `i` as a content block: images inline or by URL, files only as
/// inline PDFs.
fn block(i: usize, p: Part) -> Result<Value, String> {
    Ok(match p {
        Part::Text(text) => json!({"type": "text", "text": text}),
        Part::Image { url, .. } => match chat::data_url(url) {
            Some((media, data)) => {
                json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})
            }
            None => json!({"type": "image", "source": {"type": "url", "url": url}}),
        },
        Part::File(file) => {
            let data = file
                .and_then(|f| f.get("file_data"))
                .and_then(Value::as_str);
            match data.and_then(chat::data_url) {
                Some(("application/pdf", data)) => {
                    json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}})
                }
                _ => {
                    return Err(format!(
                        "message {i}: a file part other than an inline PDF {UNCONVERTED}"
                    ));
                }
            }
        }
        other @ (Part::Audio(_) | Part::Other(_)) => {
            return Err(format!(
                "message {i}: a {:?} part {UNCONVERTED}",
                other.kind()
            ));
        }
    })
}

/// Tool definitions in Anthropic's shape: OpenAI function definitions converted, Anthropic ones
/// (no `function`) kept.
fn tools(defs: &[ToolDef]) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for d in defs {
        match d {
            ToolDef::Function { def, .. } => {
                let name = def
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or("a function definition has no name")?;
                let mut t = Map::new();
                t.insert("name".into(), json!(name));
                if let Some(d) = def.get("description") {
                    t.insert("description".into(), d.clone());
                }
                let schema = def
                    .get("parameters")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                t.insert("input_schema".into(), schema);
                out.push(Value::Object(t));
            }
            ToolDef::Other { tool, .. } if tool.get("function").is_none() => {
                out.push((*tool).clone())
            }
            ToolDef::Other { kind, .. } => {
                return Err(format!(
                    "a tool of type {} {UNCONVERTED}",
                    kind.unwrap_or("?")
                ));
            }
        }
    }
    Ok(out)
}

/// The chat `tool_choice` in Anthropic's shape, with `parallel_tool_calls: false` as
/// `disable_parallel_tool_use`.
fn tool_choice(doc: &Document) -> Result<Option<Value>, String> {
    let mut choice = chat::fixed_choice(doc, "Anthropic")?.map(|c| match c {
        Choice::Auto => json!({"type": "auto"}),
        Choice::None => json!({"type": "none"}),
        Choice::Required => json!({"type": "any"}),
        Choice::Function(name) => json!({"type": "tool", "name": name}),
    });
    if doc.body().and_then(|b| b.get("parallel_tool_calls")) == Some(&json!(false)) {
        let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
        if c["type"] != "none" {
            c["disable_parallel_tool_use"] = json!(true);
        }
    }
    Ok(choice)
}

#[cfg(test)]
mod tests {
    use super::super::tests::doc;
    use crate::exact::{Provider, request};
    use serde_json::json;

    #[test]
    fn anthropic_bodies_lose_the_generation_fields_only() {
        let (d, s) = doc(
            json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "temperature": 0.2,
            "stream": true, "metadata": {"user_id": "u"}, "system": "be brief",
            "tools": [{"name": "t", "input_schema": {"type": "object"}}], "tool_choice": {"type": "auto"},
            "thinking": {"type": "enabled", "budget_tokens": 2000},
            "messages": [{"role": "user", "content": "hi"}]}),
        );
        let r = request(Provider::Anthropic, &d, &s).unwrap();
        assert_eq!(r.path, "v1/messages/count_tokens");
        assert_eq!(
            r.body,
            json!({"model": "claude-sonnet-4-5", "system": "be brief",
                "tools": [{"name": "t", "input_schema": {"type": "object"}}], "tool_choice": {"type": "auto"},
                "thinking": {"type": "enabled", "budget_tokens": 2000},
                "messages": [{"role": "user", "content": "hi"}]})
        );
        // The keys keep the body's order but for the model, which comes first.
        let keys: Vec<&String> = r.body.as_object().unwrap().keys().collect();
        assert_eq!(keys[0], "model");
    }

    #[test]
    fn a_bare_arrays_system_messages_become_the_top_level_system() {
        let (d, s) = doc(json!([
            {"role": "system", "content": [{"type": "text", "text": "be brief"}]},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
        ]));
        let r = request(Provider::Anthropic, &d, &s).unwrap();
        assert_eq!(
            r.body["system"],
            json!([{"type": "text", "text": "be brief"}])
        );
        let messages = r.body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert!(messages.iter().all(|m| m["role"] != "system"), "{}", r.body);
    }

    #[test]
    fn chat_documents_convert_to_anthropic_like_a_gateway_would() {
        let (d, s) = doc(
            json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "parallel_tool_calls": false,
            "tools": [{"type": "function", "function": {"name": "get", "description": "d", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}],
            "tool_choice": "required",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "image_url", "image_url": {"url": "https://x.example/a.png"}}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"q\":\"a\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "get", "arguments": ""}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r1"},
                {"role": "tool", "tool_call_id": "c2", "content": "r2"},
                {"role": "assistant", "content": "done"}]}),
        );
        let r = request(Provider::Anthropic, &d, &s).unwrap();
        assert_eq!(
            r.body,
            json!({"model": "claude-sonnet-4-5",
                "system": [{"type": "text", "text": "sys"}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "look"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                        {"type": "image", "source": {"type": "url", "url": "https://x.example/a.png"}}]},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "c1", "name": "get", "input": {"q": "a"}},
                        {"type": "tool_use", "id": "c2", "name": "get", "input": {}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "c1", "content": "r1"},
                        {"type": "tool_result", "tool_use_id": "c2", "content": "r2"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": "done"}]}],
                "tools": [{"name": "get", "description": "d", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
                "tool_choice": {"type": "any", "disable_parallel_tool_use": true}})
        );
    }
}
