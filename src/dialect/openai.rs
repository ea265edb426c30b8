//! OpenAI Chat Completions (and the many servers that speak it).
//!
//! Messages have a `role` (`system`, `developer`, `user`, `assistant`, `tool`, `function`) and a
//! `content` that is a string or a list of parts (`text`, `image_url`, `input_audio`, `file`,
//! `refusal`). Tool calls are written outside the content, in an assistant message's
//! `tool_calls` (or the legacy `function_call`), with `arguments` as a JSON text; each result is
//! a message of its own in the `tool` role (legacy: `function`) naming its call by
//! `tool_call_id`. An exchange is an assistant message with calls and the tool messages that
//! follow it. Reasoning, where a server returns it, is the message's `reasoning_content`.

use serde_json::{Map, Value};

use super::{
    Call, CallView, EmptyArgs, Field, ImageData, Kind, Loc, Mark, Marks, Measure, Message, Part,
    Piece, Problem, Role, Rules, ToolResult, drop_reasoning_field, has_reasoning_field, items,
    kind, mark_parts, owned, str_field,
};

/// The Chat Completions rules.
pub struct Chat;

#[rustfmt::skip]
const PARTS: &[Part] = &[
    // type, what it is, whether it marks the dialect, whether the API takes it in a message
    Part::new("text", Kind::Text, Marks::No, true),
    Part::new("image_url", Kind::Image, Marks::Other, true),
    Part::new("input_audio", Kind::Audio, Marks::Other, true),
    Part::new("file", Kind::File, Marks::Other, true),
    Part::new("refusal", Kind::Refusal, Marks::No, true),
    // The Responses API's text part, which some clients send in chat messages: counted and read
    // as text, though Chat Completions does not take it.
    Part::new("input_text", Kind::Text, Marks::No, false),
];

impl Rules for Chat {
    const NAME: &'static str = "openai";
    const TITLE: &'static str = "OpenAI";
    const PROVIDER: &'static str = "openai";
    const PART_NOUN: &'static str = "content part";
    const EXACT_COUNTS: bool = true;
    const SYSTEM_ROLE: Option<&'static str> = Some("system");
    const SYSTEM_KEY: Option<&'static str> = None;
    const RESULT_WITHOUT_ID: &'static str = "tool message without tool_call_id";
    const PARTS: &'static [Part] = PARTS;

    fn mark_body(body: &Map<String, Value>, mark: &mut dyn FnMut(Mark, Loc)) {
        if body.get("functions").is_some_and(Value::is_array) {
            mark(Mark::Other, Loc::Key("functions"));
        }
        for (k, t) in items(body.get("tools")) {
            // A definition with an `input_schema` is Anthropic's whatever else it has.
            if t.field("input_schema").is_none()
                && t.field("function").is_some_and(Value::is_object)
            {
                mark(Mark::Other, Loc::Item("tools", k));
            }
        }
    }

    fn mark_message(m: &Value, mark: &mut dyn FnMut(Mark, Loc)) {
        if m.field("tool_calls").is_some_and(|c| !c.is_null()) {
            mark(Mark::Tool, Loc::Key("tool_calls"));
        }
        if m.field("function_call").is_some_and(Value::is_object) {
            mark(Mark::Tool, Loc::Key("function_call"));
        }
        if matches!(str_field(m, "role"), Some("tool" | "function")) {
            mark(Mark::Tool, Loc::Key("role"));
        }
        if m.field("tool_call_id").is_some_and(|c| !c.is_null()) {
            mark(Mark::Tool, Loc::Key("tool_call_id"));
        }
        mark_parts(super::Dialect::Openai, m, mark);
    }

    fn read_message(m: &Value) -> Message {
        let role = Role::parse(m.field("role"));
        let mut calls = Vec::new();
        let mut results = Vec::new();
        if role == Role::Assistant {
            if let Some(tc) = m.field("tool_calls").and_then(Value::as_array) {
                for (k, c) in tc.iter().enumerate() {
                    calls.push(Call {
                        id: owned(c, "id"),
                        name: c.field("function").and_then(|f| owned(f, "name")),
                        at: format!("/tool_calls/{k}"),
                        args: format!("/tool_calls/{k}/function/arguments"),
                        encoded: true,
                        legacy: false,
                        empty: Some(EmptyArgs::Object),
                    });
                }
            }
            if let Some(fc) = m.field("function_call").filter(|f| f.is_object()) {
                calls.push(Call {
                    id: None,
                    name: owned(fc, "name"),
                    at: "/function_call".to_string(),
                    args: "/function_call/arguments".to_string(),
                    encoded: true,
                    legacy: true,
                    empty: Some(EmptyArgs::Object),
                });
            }
        }
        let is_result = matches!(role, Role::Tool | Role::Function);
        if is_result {
            results.push(ToolResult {
                id: owned(m, "tool_call_id"),
                name: owned(m, "name"),
                at: String::new(),
                content: Some("/content".to_string()),
                is_error: false,
                legacy: role == Role::Function,
                answers: None,
            });
        }
        Message {
            // A tool message is its result and nothing else.
            only_results: is_result,
            calls,
            results,
            ..Message::new(role)
        }
    }

    fn exchange_end(msgs: &[Message], i: usize) -> Option<usize> {
        if msgs[i].role != Role::Assistant || msgs[i].calls.is_empty() {
            return None;
        }
        let mut end = i + 1;
        while end < msgs.len() && matches!(msgs[end].role, Role::Tool | Role::Function) {
            end += 1;
        }
        Some(end)
    }

    fn message_calls<'a>(m: &'a Value, out: &mut Vec<CallView<'a>>) {
        for c in m
            .field("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c.is_object())
        {
            let f = c.field("function");
            out.push(CallView {
                id: str_field(c, "id"),
                name: f.and_then(|f| str_field(f, "name")),
                args: f.and_then(|f| f.field("arguments")),
                encoded: true,
                server: false,
            });
        }
        if let Some(f) = m.field("function_call").filter(|f| f.is_object()) {
            out.push(CallView {
                id: None,
                name: str_field(f, "name"),
                args: f.field("arguments"),
                encoded: true,
                server: false,
            });
        }
    }

    fn measure<'a>(p: &'a Value, part: &Part) -> Measure<'a> {
        match part.kind {
            Kind::Text => Measure::Text(str_field(p, "text")),
            Kind::Refusal => Measure::Text(str_field(p, "refusal")),
            Kind::Image => {
                let (url, detail) = image_url(p);
                Measure::Image {
                    data: ImageData::Url(url),
                    detail,
                }
            }
            Kind::Audio => Measure::Audio(
                p.field("input_audio")
                    .and_then(|a| str_field(a, "data"))
                    .unwrap_or(""),
            ),
            Kind::File => Measure::File(p.field("file").and_then(|f| str_field(f, "filename"))),
            _ => Measure::ByText,
        }
    }

    fn piece<'a>(p: &'a Value, part: &Part) -> Piece<'a> {
        match part.kind {
            Kind::Text => str_field(p, "text").map_or(Piece::Other, Piece::Text),
            Kind::Image => Piece::Image,
            _ => Piece::Other,
        }
    }

    fn has_reasoning(m: &Value) -> bool {
        has_reasoning_field(m)
    }

    fn drop_reasoning(m: &mut Value) -> bool {
        drop_reasoning_field(m)
    }

    fn check_calls(m: &Value, out: &mut Vec<Problem>) {
        let error = |code, at: String, message: String| Problem {
            error: true,
            code,
            at,
            message,
        };
        if let Some(tc) = m.field("tool_calls").filter(|v| !v.is_null()) {
            if !tc.is_array() {
                out.push(error(
                    "invalid-tool-calls",
                    "/tool_calls".into(),
                    format!("tool_calls must be an array, found {}", kind(tc)),
                ));
            }
        }
        for (k, c) in items(m.field("tool_calls")) {
            let at = format!("/tool_calls/{k}");
            if str_field(c, "id").is_none() {
                out.push(error(
                    "missing-call-id",
                    at.clone(),
                    "tool call has no id".into(),
                ));
            }
            let f = c.field("function");
            if f.and_then(|f| str_field(f, "name")).is_none() {
                out.push(error(
                    "missing-tool-name",
                    format!("{at}/function/name"),
                    "tool call has no function name".into(),
                ));
            }
            out.extend(check_arguments(
                f.and_then(|f| f.field("arguments")),
                format!("{at}/function/arguments"),
            ));
        }
        if let Some(fc) = m.field("function_call").filter(|f| f.is_object()) {
            out.extend(check_arguments(
                fc.field("arguments"),
                "/function_call/arguments".into(),
            ));
        }
    }

    fn check_part(p: &Value, part: &Part) -> Option<Problem> {
        if part.kind != Kind::Image {
            return None;
        }
        let url = p
            .field("image_url")
            .and_then(|u| u.field("url").or(Some(u)))
            .and_then(Value::as_str)
            .unwrap_or("");
        let fetchable =
            url.starts_with("http://") || url.starts_with("https://") || url.starts_with("data:");
        (!fetchable).then(|| Problem {
            error: false,
            code: "image-url",
            at: "/image_url/url".into(),
            message: "image url is neither http(s) nor a data: URL".into(),
        })
    }

    fn result_id_at(r: &ToolResult) -> String {
        if r.legacy {
            r.at.clone()
        } else {
            format!("{}/tool_call_id", r.at)
        }
    }
}

/// An `image_url` part's URL (empty when missing) and detail.
fn image_url(p: &Value) -> (&str, Option<&str>) {
    match p.field("image_url").unwrap_or(&Value::Null) {
        Value::String(u) => (u.as_str(), None),
        iu => (str_field(iu, "url").unwrap_or(""), str_field(iu, "detail")),
    }
}

/// The problem of `arguments` that are not a JSON string holding a JSON object, if any.
pub(super) fn check_arguments(args: Option<&Value>, at: String) -> Option<Problem> {
    let message = match args {
        None => "tool call has no arguments".to_string(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(_)) => return None,
            Ok(Value::String(_)) => {
                "arguments decode to a string, not an object (double-encoded?)".to_string()
            }
            Ok(other) => format!("arguments decode to {}, not an object", kind(&other)),
            Err(e) => format!("arguments are not valid JSON: {e}"),
        },
        Some(other) => format!("arguments must be a JSON string, found {}", kind(other)),
    };
    Some(Problem {
        error: true,
        code: "invalid-arguments",
        at,
        message,
    })
}
