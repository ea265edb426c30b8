//! What the conversions from an OpenAI Chat Completions document share: reading it once, the
//! same way for every provider. Its messages are [`Turn`]s (system, user, an assistant's text
//! and calls, tool results with the call each answers), a message's content parts are
//! [`Part`]s, its tool definitions [`ToolDef`]s and its `tool_choice` a [`ToolChoice`]. Each
//! provider's module writes these in its own shape, and says what its shape cannot hold.

use serde_json::{Map, Value, json};

use crate::document::Document;
use crate::settings::Settings;

/// One message of a chat document.
pub(super) enum Turn<'a> {
    /// A `system` or `developer` message: its role and content.
    System {
        role: &'a str,
        content: Option<&'a Value>,
    },
    /// A `user` message's content.
    User(Option<&'a Value>),
    /// An `assistant` message: its content, and its calls (`tool_calls`, then a legacy
    /// `function_call`).
    Assistant {
        content: Option<&'a Value>,
        calls: Vec<Call<'a>>,
    },
    /// A `tool` message, or a legacy `function` one.
    Result(ToolResult<'a>),
}

/// A tool call of an assistant message.
pub(super) struct Call<'a> {
    /// Its `function`: `name` and `arguments`.
    function: Option<&'a Value>,
    /// A `tool_calls` entry's `id`, or the index of the message of a legacy `function_call`
    /// (which has no id).
    id: CallId<'a>,
}

enum CallId<'a> {
    Given(Option<&'a Value>),
    Legacy(usize),
}

impl Call<'_> {
    /// The call's id as the other APIs carry it: its own (`""` when it has none), or
    /// `call_{i}` for the legacy function call of message `i`.
    pub(super) fn id(&self) -> Value {
        match self.id {
            CallId::Given(id) => id.cloned().unwrap_or(json!("")),
            CallId::Legacy(i) => json!(format!("call_{i}")),
        }
    }

    /// The id a tool result names the call by: its own, else null.
    fn named_by(&self) -> Value {
        match self.id {
            CallId::Given(id) => id.cloned().unwrap_or(Value::Null),
            CallId::Legacy(_) => Value::Null,
        }
    }

    fn function(&self, key: &str) -> Option<&Value> {
        self.function.and_then(|f| f.get(key))
    }

    /// The function's `name` as given (`""` when none).
    pub(super) fn name(&self) -> Value {
        self.function("name").cloned().unwrap_or(json!(""))
    }

    /// The function's name as text (`""` when none, or not text).
    pub(super) fn name_str(&self) -> &str {
        self.function("name").and_then(Value::as_str).unwrap_or("")
    }

    /// The `arguments` as given, the JSON text of an object (`"{}"` when none).
    pub(super) fn raw_arguments(&self) -> Value {
        self.function("arguments").cloned().unwrap_or(json!("{}"))
    }

    /// The `arguments` as the object the other APIs take (empty text is `{}`); `i` is the
    /// message's index, for the error.
    pub(super) fn arguments(&self, i: usize) -> Result<Value, String> {
        let v = match self.function("arguments").cloned().unwrap_or(Value::Null) {
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
}

/// A tool result, and the call it answers.
pub(super) struct ToolResult<'a> {
    /// The id of its call: a `tool` message's `tool_call_id` (`""` when none), or for a
    /// `function` message the id given to the latest legacy call ([`Call::id`]; `""` when none).
    pub(super) call_id: Value,
    /// The function's name: the message's `name`, else that of its call among the previous
    /// assistant message's (by `tool_call_id`, or the last one when it names none).
    pub(super) name: Option<String>,
    pub(super) content: Option<&'a Value>,
}

/// The messages of `doc`, in order, each with its index; a role other than system, developer,
/// user, assistant, tool and function is an error saying that `api` has no equivalent.
pub(super) fn turns<'a>(
    doc: &'a Document,
    api: &'static str,
) -> impl Iterator<Item = Result<(usize, Turn<'a>), String>> + 'a {
    let mut pairing = Pairing::default();
    doc.messages().iter().enumerate().map(move |(i, m)| {
        let content = m.get("content");
        let turn = match role(m) {
            r @ ("system" | "developer") => Turn::System { role: r, content },
            "user" => Turn::User(content),
            "assistant" => {
                let calls = calls(i, m);
                pairing.calls(&calls);
                Turn::Assistant { content, calls }
            }
            r @ ("tool" | "function") => Turn::Result(pairing.result(r, m)),
            other => {
                return Err(format!(
                    "message {i}: role {other:?} has no {api} equivalent"
                ));
            }
        };
        Ok((i, turn))
    })
}

/// The messages of `doc` for an API that holds the system prompt apart from the messages
/// (Anthropic, Gemini), read in order: each system or developer message made into an entry of
/// the system prompt by `system`, every other turn added to the messages by `add` (which is
/// never given a system turn).
pub(super) fn system_apart<'a>(
    doc: &'a Document,
    api: &'static str,
    system: impl Fn(usize, Option<&'a Value>) -> Result<Value, String>,
    mut add: impl FnMut(&mut Vec<Value>, usize, Turn<'a>) -> Result<(), String>,
) -> Result<(Vec<Value>, Vec<Value>), String> {
    let mut prompt = Vec::new();
    let mut messages = Vec::new();
    for turn in turns(doc, api) {
        match turn? {
            (i, Turn::System { content, .. }) => prompt.push(system(i, content)?),
            (i, turn) => add(&mut messages, i, turn)?,
        }
    }
    Ok((prompt, messages))
}

/// What pairs a tool result with its call, as the messages are read.
#[derive(Default)]
struct Pairing {
    /// The id given to the latest legacy function call, for the `function` message answering it.
    legacy: Option<Value>,
    /// The previous assistant message's calls: the id a result names each by, and its name.
    previous: Vec<(Value, String)>,
}

impl Pairing {
    /// Notes an assistant message's calls.
    fn calls(&mut self, calls: &[Call]) {
        self.previous = calls
            .iter()
            .map(|c| (c.named_by(), c.name_str().to_string()))
            .collect();
        if let Some(c) = calls.iter().find(|c| matches!(c.id, CallId::Legacy(_))) {
            self.legacy = Some(c.id());
        }
    }

    /// Tool result `m` (role `role`: `tool` or `function`), with its call.
    fn result<'a>(&self, role: &str, m: &'a Value) -> ToolResult<'a> {
        let named = m.get("tool_call_id");
        let call_id = match role {
            "tool" => named.cloned().unwrap_or(json!("")),
            _ => self.legacy.clone().unwrap_or(json!("")),
        };
        let named = named.cloned().unwrap_or(Value::Null);
        let name = m.get("name").and_then(Value::as_str).map(str::to_string);
        let name = name.or_else(|| {
            self.previous
                .iter()
                .find(|(id, _)| !named.is_null() && *id == named)
                .or(self.previous.last().filter(|_| named.is_null()))
                .map(|(_, n)| n.clone())
        });
        ToolResult {
            call_id,
            name,
            content: m.get("content"),
        }
    }
}

/// The calls of assistant message `m` (index `i`).
fn calls(i: usize, m: &Value) -> Vec<Call<'_>> {
    let tool_calls = m.get("tool_calls").and_then(Value::as_array);
    let mut calls: Vec<Call> = tool_calls
        .into_iter()
        .flatten()
        .map(|c| Call {
            function: c.get("function"),
            id: CallId::Given(c.get("id")),
        })
        .collect();
    if let Some(f) = m.get("function_call") {
        calls.push(Call {
            function: Some(f),
            id: CallId::Legacy(i),
        });
    }
    calls
}

/// The role of message `m`.
pub(super) fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// A content part of a message.
pub(super) enum Part<'a> {
    /// A `text` part's `text`, or a `refusal` part's `refusal`, as given (`""` when none).
    Text(Value),
    /// An `image_url` part: its URL and `detail`.
    Image {
        url: &'a str,
        detail: Option<&'a Value>,
    },
    /// An `input_audio` part's `input_audio` (`data` and `format`).
    Audio(Option<&'a Value>),
    /// A `file` part's `file` (`file_data`, `file_id`, `filename`).
    File(Option<&'a Value>),
    /// A part of another type.
    Other(&'a str),
}

impl Part<'_> {
    /// The part's `type`, for messages.
    pub(super) fn kind(&self) -> &str {
        match self {
            Part::Text(_) => "text",
            Part::Image { .. } => "image_url",
            Part::Audio(_) => "input_audio",
            Part::File(_) => "file",
            Part::Other(kind) => kind,
        }
    }
}

/// Content part `p` of message `i`; an image without a URL is an error.
pub(super) fn part(i: usize, p: &Value) -> Result<Part<'_>, String> {
    Ok(match p.get("type").and_then(Value::as_str).unwrap_or("") {
        "text" => Part::Text(p.get("text").cloned().unwrap_or(json!(""))),
        "refusal" => Part::Text(p.get("refusal").cloned().unwrap_or(json!(""))),
        "image_url" => {
            // `{"url": ...}`, or a bare string as some servers accept.
            let u = p.get("image_url");
            let url = u.and_then(|u| u.get("url").and_then(Value::as_str).or_else(|| u.as_str()));
            Part::Image {
                url: url.ok_or(format!("message {i}: an image part has no URL"))?,
                detail: u.and_then(|u| u.get("detail")),
            }
        }
        "input_audio" => Part::Audio(p.get("input_audio")),
        "file" => Part::File(p.get("file")),
        other => Part::Other(other),
    })
}

/// A message's content as another API writes it: its text when it is not a list of parts,
/// else each part as `write` writes it (or why it cannot).
pub(super) enum Content {
    /// The content's text (`""` when there is none, or it is neither text nor parts).
    Text(String),
    /// The parts, written.
    Parts(Vec<Value>),
}

impl Content {
    /// The text as a JSON string, or the parts as an array.
    pub(super) fn into_value(self) -> Value {
        match self {
            Content::Text(text) => json!(text),
            Content::Parts(parts) => Value::Array(parts),
        }
    }
}

/// The content of message `i`, its parts written by `write`.
pub(super) fn content(
    i: usize,
    content: Option<&Value>,
    write: impl Fn(Part<'_>) -> Result<Value, String>,
) -> Result<Content, String> {
    let Some(Value::Array(parts)) = content else {
        return Ok(Content::Text(plain_text(content).unwrap_or_default()));
    };
    let parts = parts.iter().map(|p| write(part(i, p)?));
    Ok(Content::Parts(parts.collect::<Result<_, _>>()?))
}

/// The text of message `i`'s content where the target API takes only text: else the error
/// saying that `what` (`"a system message"`, `"a tool result"`) with other than text `fate`
/// (`"has no Gemini equivalent"`).
pub(super) fn text_only(
    i: usize,
    content: Option<&Value>,
    what: &str,
    fate: &str,
) -> Result<String, String> {
    plain_text(content).ok_or_else(|| format!("message {i}: {what} with other than text {fate}"))
}

/// The text of a message's content: a string, or the `text` (and `refusal`) of its parts;
/// `None` when a part is something else (an image, audio, a file).
pub(super) fn plain_text(content: Option<&Value>) -> Option<String> {
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
pub(super) fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (head, data) = rest.split_once(',')?;
    let media = head.strip_suffix(";base64")?;
    Some((media, data))
}

/// Appends tool result `item` to the last of `messages` when that is a user message of
/// results only (its `key` array, each `is_result`), else to a new user message: the APIs
/// that carry results in user turns take a run of them as one turn.
pub(super) fn push_result(
    messages: &mut Vec<Value>,
    key: &str,
    is_result: fn(&Value) -> bool,
    item: Value,
) {
    let carrier = messages.last_mut().filter(|m| {
        m["role"] == "user" && m[key].as_array().is_some_and(|c| c.iter().all(is_result))
    });
    match carrier {
        Some(m) => m[key].as_array_mut().expect("checked").push(item),
        None => messages.push(json!({"role": "user", key: [item]})),
    }
}

/// A tool definition.
pub(super) enum ToolDef<'a> {
    /// A function (a `tools` entry of type `function`, or a legacy `functions` entry): its
    /// definition (`name`, `description`, `parameters`, `strict`), and the `strict` beside it
    /// in its `tools` entry.
    Function {
        def: &'a Value,
        strict: Option<&'a Value>,
    },
    /// Another `tools` entry (or one of type `function` without a `function`): the entry and
    /// its `type`.
    Other {
        tool: &'a Value,
        kind: Option<&'a str>,
    },
}

/// The tool definitions the counter uses, `tools` then `functions`: the body's, else
/// `--tools`'.
pub(super) fn tool_defs<'a>(doc: &'a Document, settings: &'a Settings) -> Vec<ToolDef<'a>> {
    let own = doc.body().map(|b| (b.get("tools"), b.get("functions")));
    let (tools, functions) = match (own, settings.extra_tools.as_deref()) {
        (Some((t, f)), _) if t.is_some() || f.is_some() => (t, f),
        (_, Some(extra @ Value::Array(_))) => (Some(extra), None),
        (_, Some(extra)) => (extra.get("tools"), extra.get("functions")),
        _ => (None, None),
    };
    let list = |v: Option<&'a Value>| v.and_then(Value::as_array).into_iter().flatten();
    let tools = list(tools).map(|t| {
        let kind = t.get("type").and_then(Value::as_str);
        match (kind, t.get("function")) {
            (Some("function"), Some(def)) => ToolDef::Function {
                def,
                strict: t.get("strict"),
            },
            (kind, _) => ToolDef::Other { tool: t, kind },
        }
    });
    let functions = list(functions).map(|def| ToolDef::Function { def, strict: None });
    tools.chain(functions).collect()
}

/// The body's `tool_choice` (else its legacy `function_call`).
pub(super) enum ToolChoice<'a> {
    /// A mode: `auto`, `none`, `required` (or another).
    Mode(&'a str),
    /// A function (`{"type": "function", "function": {"name": ...}}`, or `{"name": ...}`): its
    /// name, if it has one.
    Function(Option<&'a Value>),
}

/// The `tool_choice` of a chat body (else its legacy `function_call`), if any.
pub(super) fn tool_choice(body: &Map<String, Value>) -> Option<ToolChoice<'_>> {
    let choice = body
        .get("tool_choice")
        .or_else(|| body.get("function_call"))?;
    Some(match choice {
        Value::String(s) => ToolChoice::Mode(s),
        c => {
            let function = c.get("function").and_then(|f| f.get("name"));
            ToolChoice::Function(function.or_else(|| c.get("name")))
        }
    })
}

/// A tool choice as the APIs with fixed modes (Anthropic, Gemini) take it.
pub(super) enum Choice<'a> {
    Auto,
    None,
    Required,
    /// This function.
    Function(&'a str),
}

/// The tool choice of `doc`'s body, if any, among `auto`, `none`, `required` and a function
/// named by text; another is an error saying that `api` has no equivalent.
pub(super) fn fixed_choice<'a>(doc: &'a Document, api: &str) -> Result<Option<Choice<'a>>, String> {
    Ok(Some(match doc.body().and_then(tool_choice) {
        None => return Ok(None),
        Some(ToolChoice::Mode("auto")) => Choice::Auto,
        Some(ToolChoice::Mode("none")) => Choice::None,
        Some(ToolChoice::Mode("required")) => Choice::Required,
        Some(ToolChoice::Mode(other)) => {
            return Err(format!("tool_choice {other:?} has no {api} equivalent"));
        }
        Some(ToolChoice::Function(name)) => {
            Choice::Function(name.and_then(Value::as_str).ok_or_else(|| {
                format!("a tool_choice without a function name has no {api} equivalent")
            })?)
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::super::tests::doc;
    use crate::exact::{Provider, request};
    use serde_json::json;

    #[test]
    fn conversions_that_cannot_be_faithful_say_why() {
        let audio = json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}]});
        let url_image = json!({"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://x.example/a.png"}}]}]});
        let bad_args = json!({"model": "gemini-2.5-flash", "messages": [{"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]});
        for (v, provider, why) in [
            (audio, Provider::Anthropic, "input_audio"),
            (url_image, Provider::Gemini, "image by URL"),
            (bad_args, Provider::Gemini, "not a JSON object"),
        ] {
            let (d, s) = doc(v);
            assert!(request(provider, &d, &s).unwrap_err().contains(why));
        }
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
