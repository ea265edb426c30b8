//! The Gemini API's `countTokens` request, from an OpenAI Chat Completions document
//! ([`from_chat`]).

use serde_json::{Map, Value, json};

use super::chat::{self, Choice, Content, Part, ToolDef, Turn};
use crate::document::Document;
use crate::settings::Settings;

/// How the errors end that name what this conversion cannot write.
const UNCONVERTED: &str = "has no Gemini equivalent";

/// An OpenAI Chat Completions document as a Gemini `countTokens` request, counting the system
/// prompt and tools with it (`generateContentRequest`): system and developer messages become
/// `systemInstruction`; user and assistant turns `user` and `model` contents; tool calls
/// `functionCall` parts; tool results `functionResponse` parts (a JSON object result as it is,
/// anything else as `{"output": text}`) in one user content per run of results; function
/// definitions `functionDeclarations` with their JSON Schema as `parametersJsonSchema`;
/// `tool_choice` the function-calling mode.
pub(super) fn from_chat(doc: &Document, settings: &Settings, model: &str) -> Result<Value, String> {
    let (system, contents) = contents(doc)?;
    let mut req = Map::new();
    req.insert("model".into(), json!(format!("models/{model}")));
    req.insert("contents".into(), Value::Array(contents));
    if !system.is_empty() {
        req.insert("systemInstruction".into(), json!({"parts": system}));
    }
    let declarations = declarations(&chat::tool_defs(doc, settings))?;
    if !declarations.is_empty() {
        req.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
        if let Some(c) = calling_config(doc)? {
            req.insert("toolConfig".into(), json!({"functionCallingConfig": c}));
        }
    }
    Ok(json!({"generateContentRequest": req}))
}

/// The chat messages as `systemInstruction` parts and `contents`.
fn contents(doc: &Document) -> Result<(Vec<Value>, Vec<Value>), String> {
    let system = |i, content| {
        let text = chat::text_only(i, content, "a system message", UNCONVERTED)?;
        Ok(json!({"text": text}))
    };
    chat::system_apart(doc, "Gemini", system, |contents, i, turn| {
        match turn {
            Turn::System { .. } => unreachable!("system messages are the system instruction"),
            Turn::User(content) => {
                let parts = parts(i, content)?;
                if !parts.is_empty() {
                    contents.push(json!({"role": "user", "parts": parts}));
                }
            }
            Turn::Assistant { content, calls } => {
                let mut parts = parts(i, content)?;
                for c in &calls {
                    parts.push(
                        json!({"functionCall": {"name": c.name_str(), "args": c.arguments(i)?}}),
                    );
                }
                if !parts.is_empty() {
                    contents.push(json!({"role": "model", "parts": parts}));
                }
            }
            Turn::Result(r) => {
                let name = r.name.ok_or(format!(
                    "message {i}: a tool result whose call is not in the previous assistant message"
                ))?;
                let text = chat::text_only(i, r.content, "a tool result", UNCONVERTED)?;
                let response = match serde_json::from_str::<Value>(&text) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => json!({"output": text}),
                };
                let part = json!({"functionResponse": {"name": name, "response": response}});
                let is_result = |p: &Value| p.get("functionResponse").is_some();
                chat::push_result(contents, "parts", is_result, part);
            }
        }
        Ok(())
    })
}

/// Parts of a Gemini `Content` from an OpenAI message's content: text, and images, audio and
/// files given inline (`inlineData`). An image or file by URL cannot be: the Gemini API takes
/// only its own Files API's URIs.
fn parts(i: usize, content: Option<&Value>) -> Result<Vec<Value>, String> {
    Ok(match chat::content(i, content, |p| part(i, p))? {
        Content::Text(text) if text.is_empty() => Vec::new(),
        Content::Text(text) => vec![json!({"text": text})],
        Content::Parts(parts) => parts,
    })
}

/// Content part `p` of message `i` as a `Part`.
fn part(i: usize, p: Part) -> Result<Value, String> {
    let inline = |media: &str, data: &str| json!({"inlineData": {"mimeType": media, "data": data}});
    Ok(match p {
        Part::Text(text) => json!({"text": text}),
        Part::Image { url, .. } => {
            let (media, data) = chat::data_url(url).ok_or(format!(
                "message {i}: an image by URL cannot be sent to Gemini's count (only inline data: images)"
            ))?;
            inline(media, data)
        }
        Part::Audio(a) => {
            let data = a.and_then(|a| a.get("data")).and_then(Value::as_str);
            let format = a.and_then(|a| a.get("format")).and_then(Value::as_str);
            match (data, format) {
                (Some(d), Some(f)) => inline(&format!("audio/{f}"), d),
                _ => return Err(format!("message {i}: an audio part without data or format")),
            }
        }
        Part::File(file) => {
            let file_data = file
                .and_then(|f| f.get("file_data"))
                .and_then(Value::as_str)
                .and_then(chat::data_url);
            let (media, data) = file_data.ok_or(format!(
                "message {i}: a file by id cannot be sent to Gemini's count (only inline file_data)"
            ))?;
            inline(media, data)
        }
        Part::Other(other) => {
            return Err(format!("message {i}: a {other:?} part {UNCONVERTED}"));
        }
    })
}

/// Function definitions as `functionDeclarations`; other tools have no equivalent.
fn declarations(defs: &[ToolDef]) -> Result<Vec<Value>, String> {
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
    defs.iter()
        .map(|d| match d {
            ToolDef::Function { def, .. } => declare(def),
            ToolDef::Other { kind, .. } => Err(format!(
                "a tool of type {} {UNCONVERTED}",
                kind.unwrap_or("?")
            )),
        })
        .collect()
}

/// The chat `tool_choice` as a `functionCallingConfig`.
fn calling_config(doc: &Document) -> Result<Option<Value>, String> {
    Ok(chat::fixed_choice(doc, "Gemini")?.map(|c| match c {
        Choice::Auto => json!({"mode": "AUTO"}),
        Choice::None => json!({"mode": "NONE"}),
        Choice::Required => json!({"mode": "ANY"}),
        Choice::Function(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    }))
}

#[cfg(test)]
mod tests {
    use super::super::tests::doc;
    use crate::exact::{Provider, request};
    use serde_json::json;

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
}
