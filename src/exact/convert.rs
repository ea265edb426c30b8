//! The request bodies: an Anthropic document's own, or an OpenAI Chat Completions document
//! converted to each provider's shape.

use serde_json::{Map, Value, json};

use crate::document::{Document, Field};
use crate::settings::Settings;

/// The tool definitions the counter uses: the body's `tools` and `functions`, else `--tools`'.
fn tool_lists(doc: &Document, settings: &Settings) -> (Option<Value>, Option<Value>) {
    let body = doc.body();
    let own = body.map(|b| (b.get("tools").cloned(), b.get("functions").cloned()));
    match (own, &settings.extra_tools) {
        (Some((t, f)), _) if t.is_some() || f.is_some() => (t, f),
        (_, Some(extra)) => match &**extra {
            Value::Array(_) => (Some((**extra).clone()), None),
            other => (other.get("tools").cloned(), other.get("functions").cloned()),
        },
        _ => (None, None),
    }
}

/// The Messages keys `count_tokens` takes; the others (`max_tokens`, `temperature`, `stream`,
/// `metadata`, `stop_sequences`, `top_p`, `top_k`, `service_tier`, ...) only shape the reply.
const ANTHROPIC_COUNT_KEYS: &[&str] = &[
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
pub(super) fn anthropic_body(
    doc: &Document,
    settings: &Settings,
    model: &str,
) -> Result<Value, String> {
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    match doc.body() {
        Some(b) => {
            for (k, v) in b {
                if ANTHROPIC_COUNT_KEYS.contains(&k.as_str()) {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        None => {
            // The Messages API takes no system-role message: a bare array's system messages
            // are its top-level `system`, as a body would carry them.
            let mut system = Vec::new();
            let mut messages = Vec::new();
            for (i, m) in doc.messages().iter().enumerate() {
                if matches!(role(m), "system" | "developer") {
                    let text = plain_text(m.get("content")).ok_or_else(|| {
                        format!("message {i}: a system message with other than text has no Anthropic equivalent")
                    })?;
                    system.push(json!({"type": "text", "text": text}));
                } else {
                    messages.push(m.clone());
                }
            }
            if !system.is_empty() {
                out.insert("system".into(), Value::Array(system));
            }
            out.insert("messages".into(), Value::Array(messages));
        }
    }
    if !out.contains_key("tools") {
        let (tools, functions) = tool_lists(doc, settings);
        let tools = anthropic_tools(tools.as_ref(), functions.as_ref())?;
        if !tools.is_empty() {
            out.insert("tools".into(), Value::Array(tools));
        }
    }
    Ok(Value::Object(out))
}

/// Tool definitions in Anthropic's shape: OpenAI function definitions (`tools` entries of type
/// `function`, legacy `functions`) converted, Anthropic ones kept.
fn anthropic_tools(tools: Option<&Value>, functions: Option<&Value>) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let function = |f: &Value| -> Result<Value, String> {
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a function definition has no name")?;
        let mut t = Map::new();
        t.insert("name".into(), json!(name));
        if let Some(d) = f.get("description") {
            t.insert("description".into(), d.clone());
        }
        let schema = f
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        t.insert("input_schema".into(), schema);
        Ok(Value::Object(t))
    };
    for t in tools.and_then(Value::as_array).into_iter().flatten() {
        match (t.get("type").and_then(Value::as_str), t.get("function")) {
            (Some("function"), Some(f)) => out.push(function(f)?),
            (_, None) => out.push(t.clone()),
            (kind, Some(_)) => {
                return Err(format!(
                    "a tool of type {} has no Anthropic equivalent",
                    kind.unwrap_or("?")
                ));
            }
        }
    }
    for f in functions.and_then(Value::as_array).into_iter().flatten() {
        out.push(function(f)?);
    }
    Ok(out)
}

/// The text of an OpenAI message's content: a string, or the `text` (and `refusal`) of its
/// parts; `None` when a part is something else (an image, audio, a file).
fn plain_text(content: Option<&Value>) -> Option<String> {
    match content {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = Vec::new();
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => text.push(p.get("text").and_then(Value::as_str)?),
                    Some("refusal") => text.push(p.get("refusal").and_then(Value::as_str)?),
                    _ => return None,
                }
            }
            Some(text.join("\n"))
        }
        Some(_) => None,
    }
}

/// A `data:` URL's media type and base64 payload.
fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (head, data) = rest.split_once(',')?;
    let media = head.strip_suffix(";base64")?;
    Some((media, data))
}

/// The URL of an `image_url` part (`{"url": ...}`, or a bare string as some servers accept).
fn image_url(p: &Value) -> Option<&str> {
    let u = p.get("image_url")?;
    u.get("url").and_then(Value::as_str).or_else(|| u.as_str())
}

/// A tool call's `arguments` as the object the other APIs take (empty text is `{}`).
fn arguments(i: usize, f: &Value) -> Result<Value, String> {
    let raw = f.get("arguments").cloned().unwrap_or(Value::Null);
    let v = match raw {
        Value::String(s) if s.trim().is_empty() => json!({}),
        Value::String(s) => serde_json::from_str(&s)
            .map_err(|_| format!("message {i}: tool call arguments are not JSON"))?,
        Value::Null => json!({}),
        other => other,
    };
    if v.is_object() {
        Ok(v)
    } else {
        Err(format!(
            "message {i}: tool call arguments are not a JSON object"
        ))
    }
}

/// The role of message `m`.
fn role(m: &Value) -> &str {
    m.field("role").and_then(Value::as_str).unwrap_or("")
}

/// An OpenAI Chat Completions document as an Anthropic Messages count request, as an
/// OpenAI-compatible gateway (OpenRouter, LiteLLM) sends it: system and developer messages
/// become the top-level `system`; tool calls `tool_use` blocks; tool results `tool_result`
/// blocks in a user message; images `image` blocks (inline or by URL); function definitions
/// Anthropic tools; `tool_choice` Anthropic's. Audio, files other than inline PDFs and tools
/// other than functions have no equivalent: the error says which.
pub(super) fn chat_to_anthropic(
    doc: &Document,
    settings: &Settings,
    model: &str,
) -> Result<Value, String> {
    let mut system: Vec<Value> = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    let mut legacy_call: Option<String> = None;
    let blocks = |i: usize, content: Option<&Value>| -> Result<Value, String> {
        let Some(Value::Array(parts)) = content else {
            return Ok(json!(plain_text(content).unwrap_or_default()));
        };
        let mut out = Vec::new();
        for p in parts {
            let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
            match kind {
                "text" => out.push(
                    json!({"type": "text", "text": p.get("text").cloned().unwrap_or(json!(""))}),
                ),
                "refusal" => out.push(
                    json!({"type": "text", "text": p.get("refusal").cloned().unwrap_or(json!(""))}),
                ),
                "image_url" => {
                    let url =
                        image_url(p).ok_or(format!("message {i}: an image part has no URL"))?;
                    out.push(match data_url(url) {
                        Some((media, data)) => json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}),
                        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
                    });
                }
                "file" => {
                    let file = p.get("file");
                    match file.and_then(|f| f.get("file_data")).and_then(Value::as_str).and_then(data_url) {
                        Some(("application/pdf", data)) => out.push(json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}})),
                        _ => return Err(format!("message {i}: a file part other than an inline PDF has no Anthropic equivalent")),
                    }
                }
                other => {
                    return Err(format!(
                        "message {i}: a {other:?} part has no Anthropic equivalent"
                    ));
                }
            }
        }
        Ok(Value::Array(out))
    };
    let push_result = |messages: &mut Vec<Value>, block: Value| {
        let carrier = messages.last_mut().filter(|m| {
            role(m) == "user"
                && m["content"].as_array().is_some_and(|c| {
                    c.iter()
                        .all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                })
        });
        match carrier {
            Some(m) => m["content"].as_array_mut().expect("checked").push(block),
            None => messages.push(json!({"role": "user", "content": [block]})),
        }
    };
    for (i, m) in doc.messages().iter().enumerate() {
        match role(m) {
            "system" | "developer" => {
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: a system message with other than text has no Anthropic equivalent"
                ))?;
                system.push(json!({"type": "text", "text": text}));
            }
            "user" => {
                messages.push(json!({"role": "user", "content": blocks(i, m.field("content"))?}))
            }
            "assistant" => {
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: an assistant message with other than text has no Anthropic equivalent"
                ))?;
                let mut out = Vec::new();
                if !text.is_empty() {
                    out.push(json!({"type": "text", "text": text}));
                }
                for c in m
                    .field("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let f = c.get("function").cloned().unwrap_or(json!({}));
                    out.push(json!({"type": "tool_use", "id": c.get("id").cloned().unwrap_or(json!("")),
                        "name": f.get("name").cloned().unwrap_or(json!("")), "input": arguments(i, &f)?}));
                }
                if let Some(f) = m.field("function_call") {
                    let id = format!("call_{i}");
                    out.push(json!({"type": "tool_use", "id": id, "name": f.get("name").cloned().unwrap_or(json!("")),
                        "input": arguments(i, f)?}));
                    legacy_call = Some(id);
                }
                if !out.is_empty() {
                    messages.push(json!({"role": "assistant", "content": out}));
                }
            }
            "tool" | "function" => {
                let id = if role(m) == "tool" {
                    m.field("tool_call_id").cloned().unwrap_or(json!(""))
                } else {
                    json!(legacy_call.clone().unwrap_or_default())
                };
                let block = json!({"type": "tool_result", "tool_use_id": id, "content": blocks(i, m.field("content"))?});
                push_result(&mut messages, block);
            }
            other => {
                return Err(format!(
                    "message {i}: role {other:?} has no Anthropic equivalent"
                ));
            }
        }
    }
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), Value::Array(messages));
    let (tools, functions) = tool_lists(doc, settings);
    let tools = anthropic_tools(tools.as_ref(), functions.as_ref())?;
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
        let body = doc.body();
        let choice = body.and_then(|b| b.get("tool_choice").or_else(|| b.get("function_call")));
        let mut choice = match choice {
            None => None,
            Some(Value::String(s)) => match s.as_str() {
                "auto" => Some(json!({"type": "auto"})),
                "none" => Some(json!({"type": "none"})),
                "required" => Some(json!({"type": "any"})),
                other => return Err(format!("tool_choice {other:?} has no Anthropic equivalent")),
            },
            Some(c) => {
                let name = c
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .or_else(|| c.get("name"))
                    .and_then(Value::as_str)
                    .ok_or("a tool_choice without a function name has no Anthropic equivalent")?;
                Some(json!({"type": "tool", "name": name}))
            }
        };
        if body.and_then(|b| b.get("parallel_tool_calls")) == Some(&json!(false)) {
            let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
            if c["type"] != "none" {
                c["disable_parallel_tool_use"] = json!(true);
            }
        }
        if let Some(c) = choice {
            out.insert("tool_choice".into(), c);
        }
    }
    Ok(Value::Object(out))
}

/// Parts of a Gemini `Content` from an OpenAI message's content: text, and images, audio and
/// files given inline (`inlineData`). An image or file by URL cannot be: the Gemini API takes
/// only its own Files API's URIs.
fn gemini_parts(i: usize, content: Option<&Value>) -> Result<Vec<Value>, String> {
    let Some(Value::Array(parts)) = content else {
        let text = plain_text(content).unwrap_or_default();
        return Ok(if text.is_empty() {
            Vec::new()
        } else {
            vec![json!({"text": text})]
        });
    };
    let mut out = Vec::new();
    for p in parts {
        let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
        let inline =
            |media: &str, data: &str| json!({"inlineData": {"mimeType": media, "data": data}});
        match kind {
            "text" => out.push(json!({"text": p.get("text").cloned().unwrap_or(json!(""))})),
            "refusal" => out.push(json!({"text": p.get("refusal").cloned().unwrap_or(json!(""))})),
            "image_url" => {
                let url = image_url(p).ok_or(format!("message {i}: an image part has no URL"))?;
                let (media, data) = data_url(url).ok_or(format!(
                    "message {i}: an image by URL cannot be sent to Gemini's count (only inline data: images)"
                ))?;
                out.push(inline(media, data));
            }
            "input_audio" => {
                let a = p.get("input_audio");
                let data = a.and_then(|a| a.get("data")).and_then(Value::as_str);
                let format = a.and_then(|a| a.get("format")).and_then(Value::as_str);
                match (data, format) {
                    (Some(d), Some(f)) => out.push(inline(&format!("audio/{f}"), d)),
                    _ => return Err(format!("message {i}: an audio part without data or format")),
                }
            }
            "file" => {
                let file_data = p
                    .get("file")
                    .and_then(|f| f.get("file_data"))
                    .and_then(Value::as_str)
                    .and_then(data_url);
                let (media, data) = file_data.ok_or(format!(
                    "message {i}: a file by id cannot be sent to Gemini's count (only inline file_data)"
                ))?;
                out.push(inline(media, data));
            }
            other => {
                return Err(format!(
                    "message {i}: a {other:?} part has no Gemini equivalent"
                ));
            }
        }
    }
    Ok(out)
}

/// An OpenAI Chat Completions document as a Gemini `countTokens` request, counting the system
/// prompt and tools with it (`generateContentRequest`): system and developer messages become
/// `systemInstruction`; user and assistant turns `user` and `model` contents; tool calls
/// `functionCall` parts; tool results `functionResponse` parts (a JSON object result as it is,
/// anything else as `{"output": text}`) in one user content per run of results; function
/// definitions `functionDeclarations` with their JSON Schema as `parametersJsonSchema`;
/// `tool_choice` the function-calling mode.
pub(super) fn chat_to_gemini(
    doc: &Document,
    settings: &Settings,
    model: &str,
) -> Result<Value, String> {
    let mut system: Vec<Value> = Vec::new();
    let mut contents: Vec<Value> = Vec::new();
    // The names of the calls of the nearest assistant message, by id: results pair with them.
    let mut calls: Vec<(Value, String)> = Vec::new();
    for (i, m) in doc.messages().iter().enumerate() {
        match role(m) {
            "system" | "developer" => {
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: a system message with other than text has no Gemini equivalent"
                ))?;
                system.push(json!({"text": text}));
            }
            "user" => {
                let parts = gemini_parts(i, m.field("content"))?;
                if !parts.is_empty() {
                    contents.push(json!({"role": "user", "parts": parts}));
                }
            }
            "assistant" => {
                let mut parts = gemini_parts(i, m.field("content"))?;
                calls.clear();
                for c in m
                    .field("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let f = c.get("function").cloned().unwrap_or(json!({}));
                    let name = f
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    calls.push((c.get("id").cloned().unwrap_or(Value::Null), name.clone()));
                    parts.push(json!({"functionCall": {"name": name, "args": arguments(i, &f)?}}));
                }
                if let Some(f) = m.field("function_call") {
                    let name = f
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    calls.push((Value::Null, name.clone()));
                    parts.push(json!({"functionCall": {"name": name, "args": arguments(i, f)?}}));
                }
                if !parts.is_empty() {
                    contents.push(json!({"role": "model", "parts": parts}));
                }
            }
            "tool" | "function" => {
                let id = m.field("tool_call_id").cloned().unwrap_or(Value::Null);
                let name = m
                    .field("name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| {
                        calls
                            .iter()
                            .find(|(cid, _)| !id.is_null() && *cid == id)
                            .or(calls.last().filter(|_| id.is_null()))
                            .map(|(_, n)| n.clone())
                    })
                    .ok_or(format!(
                        "message {i}: a tool result whose call is not in the previous assistant message"
                    ))?;
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: a tool result with other than text has no Gemini equivalent"
                ))?;
                let response = match serde_json::from_str::<Value>(&text) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => json!({"output": text}),
                };
                let part = json!({"functionResponse": {"name": name, "response": response}});
                let carrier = contents.last_mut().filter(|c| {
                    c["role"] == "user"
                        && c["parts"]
                            .as_array()
                            .is_some_and(|p| p.iter().all(|p| p.get("functionResponse").is_some()))
                });
                match carrier {
                    Some(c) => c["parts"].as_array_mut().expect("checked").push(part),
                    None => contents.push(json!({"role": "user", "parts": [part]})),
                }
            }
            other => {
                return Err(format!(
                    "message {i}: role {other:?} has no Gemini equivalent"
                ));
            }
        }
    }
    let mut req = Map::new();
    req.insert("model".into(), json!(format!("models/{model}")));
    req.insert("contents".into(), Value::Array(contents));
    if !system.is_empty() {
        req.insert("systemInstruction".into(), json!({"parts": system}));
    }
    let (tools, functions) = tool_lists(doc, settings);
    let mut declarations = Vec::new();
    let declare = |f: &Value| -> Result<Value, String> {
        let mut d = Map::new();
        d.insert(
            "name".into(),
            f.get("name")
                .cloned()
                .ok_or("a function definition has no name")?,
        );
        if let Some(desc) = f.get("description") {
            d.insert("description".into(), desc.clone());
        }
        if let Some(p) = f.get("parameters") {
            d.insert("parametersJsonSchema".into(), p.clone());
        }
        Ok(Value::Object(d))
    };
    for t in tools
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match (t.get("type").and_then(Value::as_str), t.get("function")) {
            (Some("function"), Some(f)) => declarations.push(declare(f)?),
            (kind, _) => {
                return Err(format!(
                    "a tool of type {} has no Gemini equivalent",
                    kind.unwrap_or("?")
                ));
            }
        }
    }
    for f in functions
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        declarations.push(declare(f)?);
    }
    if !declarations.is_empty() {
        req.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
        let body = doc.body();
        let choice = body.and_then(|b| b.get("tool_choice").or_else(|| b.get("function_call")));
        let config = match choice {
            None => None,
            Some(Value::String(s)) => match s.as_str() {
                "auto" => Some(json!({"mode": "AUTO"})),
                "none" => Some(json!({"mode": "NONE"})),
                "required" => Some(json!({"mode": "ANY"})),
                other => return Err(format!("tool_choice {other:?} has no Gemini equivalent")),
            },
            Some(c) => {
                let name = c
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .or_else(|| c.get("name"))
                    .and_then(Value::as_str)
                    .ok_or("a tool_choice without a function name has no Gemini equivalent")?;
                Some(json!({"mode": "ANY", "allowedFunctionNames": [name]}))
            }
        };
        if let Some(c) = config {
            req.insert("toolConfig".into(), json!({"functionCallingConfig": c}));
        }
    }
    Ok(json!({"generateContentRequest": req}))
}

/// An OpenAI Chat Completions document as a Responses API `input_tokens` request: messages
/// become input items in place (system and developer ones keep their role), user parts
/// `input_text`/`input_image`/`input_file`, tool calls `function_call` items and tool results
/// `function_call_output` items with the same call id, function definitions flat Responses
/// tools; `tool_choice`, `parallel_tool_calls`, `reasoning_effort` and `response_format` are
/// carried over in the Responses shape. Audio parts and tools other than functions have no
/// equivalent: the error says which.
pub(super) fn chat_to_responses(
    doc: &Document,
    settings: &Settings,
    model: &str,
) -> Result<Value, String> {
    let mut input: Vec<Value> = Vec::new();
    let mut legacy_call: Option<String> = None;
    let user_content = |i: usize, content: Option<&Value>| -> Result<Value, String> {
        let Some(Value::Array(parts)) = content else {
            return Ok(json!(plain_text(content).unwrap_or_default()));
        };
        let mut out = Vec::new();
        for p in parts {
            let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
            match kind {
                "text" => out.push(json!({"type": "input_text", "text": p.get("text").cloned().unwrap_or(json!(""))})),
                "refusal" => out.push(json!({"type": "input_text", "text": p.get("refusal").cloned().unwrap_or(json!(""))})),
                "image_url" => {
                    let url = image_url(p).ok_or(format!("message {i}: an image part has no URL"))?;
                    let detail = p
                        .get("image_url")
                        .and_then(|u| u.get("detail"))
                        .cloned()
                        .unwrap_or(json!("auto"));
                    out.push(json!({"type": "input_image", "image_url": url, "detail": detail}));
                }
                "file" => {
                    let f = p.get("file").cloned().unwrap_or(json!({}));
                    let mut item = Map::new();
                    item.insert("type".into(), json!("input_file"));
                    for k in ["file_id", "file_data", "filename"] {
                        if let Some(v) = f.get(k) {
                            item.insert(k.into(), v.clone());
                        }
                    }
                    out.push(Value::Object(item));
                }
                other => {
                    return Err(format!(
                        "message {i}: a {other:?} part is not converted for the Responses count"
                    ));
                }
            }
        }
        Ok(Value::Array(out))
    };
    for (i, m) in doc.messages().iter().enumerate() {
        let r = role(m);
        match r {
            "system" | "developer" | "user" => {
                input.push(json!({"role": r, "content": user_content(i, m.field("content"))?}))
            }
            "assistant" => {
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: an assistant message with other than text is not converted for the Responses count"
                ))?;
                if !text.is_empty() {
                    input.push(json!({"role": "assistant", "content": text}));
                }
                for c in m
                    .field("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let f = c.get("function").cloned().unwrap_or(json!({}));
                    input.push(json!({"type": "function_call", "call_id": c.get("id").cloned().unwrap_or(json!("")),
                        "name": f.get("name").cloned().unwrap_or(json!("")),
                        "arguments": f.get("arguments").cloned().unwrap_or(json!("{}"))}));
                }
                if let Some(f) = m.field("function_call") {
                    let id = format!("call_{i}");
                    input.push(json!({"type": "function_call", "call_id": id,
                        "name": f.get("name").cloned().unwrap_or(json!("")),
                        "arguments": f.get("arguments").cloned().unwrap_or(json!("{}"))}));
                    legacy_call = Some(id);
                }
            }
            "tool" | "function" => {
                let id = if r == "tool" {
                    m.field("tool_call_id").cloned().unwrap_or(json!(""))
                } else {
                    json!(legacy_call.clone().unwrap_or_default())
                };
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: a tool result with other than text is not converted for the Responses count"
                ))?;
                input.push(json!({"type": "function_call_output", "call_id": id, "output": text}));
            }
            other => {
                return Err(format!(
                    "message {i}: role {other:?} has no Responses equivalent"
                ));
            }
        }
    }
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    out.insert("input".into(), Value::Array(input));
    let (tools, functions) = tool_lists(doc, settings);
    let flat = |f: &Value, strict: Option<&Value>| -> Value {
        let mut t = Map::new();
        t.insert("type".into(), json!("function"));
        for k in ["name", "description", "parameters"] {
            if let Some(v) = f.get(k) {
                t.insert(k.into(), v.clone());
            }
        }
        if let Some(s) = strict.or_else(|| f.get("strict")) {
            t.insert("strict".into(), s.clone());
        }
        Value::Object(t)
    };
    let mut list = Vec::new();
    for t in tools
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match (t.get("type").and_then(Value::as_str), t.get("function")) {
            (Some("function"), Some(f)) => list.push(flat(f, t.get("strict"))),
            (kind, _) => {
                return Err(format!(
                    "a tool of type {} is not converted for the Responses count",
                    kind.unwrap_or("?")
                ));
            }
        }
    }
    for f in functions
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        list.push(flat(f, None));
    }
    if !list.is_empty() {
        out.insert("tools".into(), Value::Array(list));
    }
    if let Some(b) = doc.body() {
        match b.get("tool_choice").or_else(|| b.get("function_call")) {
            None => {}
            Some(Value::String(s)) => {
                out.insert("tool_choice".into(), json!(s));
            }
            Some(c) => {
                let name = c
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .or_else(|| c.get("name"))
                    .cloned()
                    .ok_or("a tool_choice without a function name is not converted")?;
                out.insert(
                    "tool_choice".into(),
                    json!({"type": "function", "name": name}),
                );
            }
        }
        if let Some(p) = b.get("parallel_tool_calls") {
            out.insert("parallel_tool_calls".into(), p.clone());
        }
        if let Some(e) = b.get("reasoning_effort") {
            out.insert("reasoning".into(), json!({"effort": e}));
        }
        if let Some(rf) = b.get("response_format") {
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
    }
    Ok(Value::Object(out))
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

    #[test]
    fn conversions_that_cannot_be_faithful_say_why() {
        let audio = json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}]});
        let (d, s) = doc(audio);
        assert!(
            request(Provider::Anthropic, &d, &s)
                .unwrap_err()
                .contains("input_audio")
        );
        let url_image = json!({"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://x.example/a.png"}}]}]});
        let (d, s) = doc(url_image);
        assert!(
            request(Provider::Gemini, &d, &s)
                .unwrap_err()
                .contains("image by URL")
        );
        let bad_args = json!({"model": "gemini-2.5-flash", "messages": [{"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]});
        let (d, s) = doc(bad_args);
        assert!(
            request(Provider::Gemini, &d, &s)
                .unwrap_err()
                .contains("not a JSON object")
        );
    }

    #[test]
    fn chat_documents_convert_to_gemini() {
        let (d, s) = doc(
            json!({"model": "gemini-2.5-flash", "tool_choice": {"type": "function", "function": {"name": "get"}},
            "tools": [{"type": "function", "function": {"name": "get", "description": "d", "parameters": {"type": "object", "additionalProperties": false}}}],
            "messages": [
                {"role": "developer", "content": "sys"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "let me look", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"q\":1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 20}"},
                {"role": "user", "content": [{"type": "text", "text": "and?"}, {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}}]},
                {"role": "assistant", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "get", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c2", "content": "plain text"}]}),
        );
        let r = request(Provider::Gemini, &d, &s).unwrap();
        assert_eq!(r.path, "v1beta/models/gemini-2.5-flash:countTokens");
        assert_eq!(
            r.body,
            json!({"generateContentRequest": {
                "model": "models/gemini-2.5-flash",
                "contents": [
                    {"role": "user", "parts": [{"text": "hi"}]},
                    {"role": "model", "parts": [{"text": "let me look"}, {"functionCall": {"name": "get", "args": {"q": 1}}}]},
                    {"role": "user", "parts": [{"functionResponse": {"name": "get", "response": {"temp": 20}}}]},
                    {"role": "user", "parts": [{"text": "and?"}, {"inlineData": {"mimeType": "audio/wav", "data": "UklG"}}]},
                    {"role": "model", "parts": [{"functionCall": {"name": "get", "args": {}}}]},
                    {"role": "user", "parts": [{"functionResponse": {"name": "get", "response": {"output": "plain text"}}}]}],
                "systemInstruction": {"parts": [{"text": "sys"}]},
                "tools": [{"functionDeclarations": [{"name": "get", "description": "d", "parametersJsonSchema": {"type": "object", "additionalProperties": false}}]}],
                "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get"]}}}})
        );
    }

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

    #[test]
    fn legacy_function_calls_pair_with_their_results() {
        let (d, s) = doc(
            json!({"model": "gpt-5", "functions": [{"name": "f", "parameters": {"type": "object"}}],
            "function_call": {"name": "f"},
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{}"}},
                {"role": "function", "name": "f", "content": "42"}]}),
        );
        let r = request(Provider::Openai, &d, &s).unwrap();
        assert_eq!(r.body["input"][1]["call_id"], "call_1");
        assert_eq!(r.body["input"][2]["call_id"], "call_1");
        assert_eq!(
            r.body["tool_choice"],
            json!({"type": "function", "name": "f"})
        );
        let r = request(Provider::Anthropic, &d, &s).unwrap();
        assert_eq!(r.body["messages"][2]["content"][0]["tool_use_id"], "call_1");
        assert_eq!(r.body["tool_choice"], json!({"type": "tool", "name": "f"}));
    }
}
