//! Anthropic Messages.
//!
//! The system prompt is the body's top-level `system`; messages are `user` or `assistant`, and
//! a `content` is a string or a list of blocks. Tool calls are `tool_use` blocks of an assistant
//! message (with `input` as a JSON object), answered by `tool_result` blocks (naming their call
//! by `tool_use_id`, with an optional `content` and `is_error`) in the user message that
//! follows. The API merges consecutive messages of one role, so an exchange is a run of
//! assistant messages with calls and the run of user messages answering them. Tools the
//! provider runs (`server_tool_use`, `mcp_tool_use`) come with their results (`mcp_tool_result`,
//! `*_tool_result`) in the same message. Reasoning is `thinking` and `redacted_thinking` blocks.

use serde_json::{Map, Value};

use super::{
    Call, CallView, EmptyArgs, Field, ImageData, Kind, Loc, Mark, Marks, Measure, Message, Part,
    Piece, Problem, Role, Rules, ToolResult, drop_reasoning_field, has_reasoning_field, items,
    kind, mark_parts, owned, part_type, str_field,
};

/// The Messages rules.
pub struct Messages;

#[rustfmt::skip]
const PARTS: &[Part] = &[
    // type, what it is, whether it marks the dialect, whether the API takes it in a message
    Part::new("text", Kind::Text, Marks::No, true),
    Part::new("tool_use", Kind::Call, Marks::Tool, true),
    Part::new("tool_result", Kind::Result, Marks::Tool, true),
    Part::new("thinking", Kind::Thinking, Marks::Other, true),
    Part::new("redacted_thinking", Kind::RedactedThinking, Marks::Other, true),
    // OpenAI-compatible servers take `image` parts too: only one with a `source` is Anthropic's.
    Part::new("image", Kind::Image, Marks::OtherWith("source"), true),
    Part::new("document", Kind::ByText, Marks::Other, true),
    Part::new("search_result", Kind::ByText, Marks::Other, true),
    Part::new("container_upload", Kind::ByText, Marks::Other, true),
    Part::new("server_tool_use", Kind::ServerCall, Marks::Tool, true),
    Part::new("mcp_tool_use", Kind::ServerCall, Marks::Tool, true),
    Part::new("mcp_tool_result", Kind::ServerResult, Marks::Tool, true),
    // Only inside a `web_search_tool_result`'s content, never a message's own block: counted
    // as text, but a message holding one is unusual.
    Part::new("web_search_result", Kind::ByText, Marks::No, false),
];

/// Every `*_tool_result` block the table does not name (`web_search_tool_result`,
/// `code_execution_tool_result`, ...): a server tool's result, counted by its text.
const SERVER_TOOL_RESULT: Part = Part::new("*_tool_result", Kind::ByText, Marks::Tool, true);

impl Rules for Messages {
    const NAME: &'static str = "anthropic";
    const TITLE: &'static str = "Anthropic";
    const PROVIDER: &'static str = "anthropic";
    const PART_NOUN: &'static str = "content block";
    const EXACT_COUNTS: bool = false;
    const SYSTEM_ROLE: Option<&'static str> = None;
    const SYSTEM_KEY: Option<&'static str> = Some("system");
    const RESULT_WITHOUT_ID: &'static str = "tool_result without tool_use_id";
    const PARTS: &'static [Part] = PARTS;

    #[inline]
    fn part(ty: &str) -> Option<&'static Part> {
        PARTS
            .iter()
            .find(|p| p.ty == ty)
            .or_else(|| ty.ends_with("_tool_result").then_some(&SERVER_TOOL_RESULT))
    }

    fn mark_body(body: &Map<String, Value>, mark: &mut dyn FnMut(Mark, Loc)) {
        if body.contains_key("system") {
            mark(Mark::Other, Loc::Key("system"));
        }
        for (k, t) in items(body.get("tools")) {
            if t.field("input_schema").is_some() {
                mark(Mark::Other, Loc::Item("tools", k));
            }
        }
    }

    fn mark_message(m: &Value, mark: &mut dyn FnMut(Mark, Loc)) {
        mark_parts(super::Dialect::Anthropic, m, mark);
    }

    fn read_message(m: &Value) -> Message {
        let role = Role::parse(m.field("role"));
        let mut calls = Vec::new();
        let mut results = Vec::new();
        let mut other_content = false;
        if let Some(blocks) = m.field("content").and_then(Value::as_array) {
            for (k, b) in blocks.iter().enumerate() {
                match part_type(b) {
                    Some("tool_use") if role == Role::Assistant => calls.push(Call {
                        id: owned(b, "id"),
                        name: owned(b, "name"),
                        at: format!("/content/{k}"),
                        args: format!("/content/{k}/input"),
                        encoded: false,
                        legacy: false,
                        empty: Some(EmptyArgs::Object),
                    }),
                    Some("tool_result") => results.push(ToolResult {
                        id: owned(b, "tool_use_id"),
                        name: None,
                        at: format!("/content/{k}"),
                        content: b.field("content").map(|_| format!("/content/{k}/content")),
                        is_error: b
                            .field("is_error")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                        legacy: false,
                        answers: None,
                    }),
                    _ => other_content = true,
                }
            }
        } else {
            other_content = true;
        }
        Message {
            only_results: !results.is_empty() && !other_content,
            calls,
            results,
            ..Message::new(role)
        }
    }

    fn exchange_end(msgs: &[Message], i: usize) -> Option<usize> {
        if msgs[i].role != Role::Assistant {
            return None;
        }
        // The API merges consecutive same-role messages, so a run of assistant messages is one
        // turn, and so is the run of user messages answering it.
        let mut j = i;
        while j < msgs.len() && msgs[j].role == Role::Assistant {
            j += 1;
        }
        if msgs[i..j].iter().all(|m| m.calls.is_empty()) {
            return None;
        }
        let mut k = j;
        let mut last_carrier = None;
        while k < msgs.len() && msgs[k].role == Role::User {
            if !msgs[k].results.is_empty() {
                last_carrier = Some(k);
            }
            k += 1;
        }
        Some(last_carrier.map_or(j, |c| c + 1))
    }

    fn message_calls<'a>(_m: &'a Value, _out: &mut Vec<CallView<'a>>) {
        // Every call is a block of the content.
    }

    fn measure<'a>(p: &'a Value, part: &Part) -> Measure<'a> {
        match part.kind {
            Kind::Text => Measure::Text(str_field(p, "text")),
            Kind::Thinking => Measure::Text(str_field(p, "thinking")),
            Kind::RedactedThinking => Measure::Opaque(str_field(p, "data").unwrap_or("")),
            Kind::Image => {
                let src = p.field("source").unwrap_or(&Value::Null);
                let data = match str_field(src, "type") {
                    Some("base64") => {
                        str_field(src, "data").map_or(ImageData::Unknown, ImageData::Base64)
                    }
                    _ => ImageData::Unknown,
                };
                Measure::Image { data, detail: None }
            }
            Kind::Call | Kind::ServerCall => Measure::Call {
                name: str_field(p, "name"),
                args: p.field("input"),
                encoded: false,
            },
            Kind::Result | Kind::ServerResult => Measure::Result(p.field("content")),
            _ => Measure::ByText,
        }
    }

    fn piece<'a>(p: &'a Value, part: &Part) -> Piece<'a> {
        match part.kind {
            Kind::Text => str_field(p, "text").map_or(Piece::Other, Piece::Text),
            Kind::Image => Piece::Image,
            Kind::Call | Kind::ServerCall => Piece::Call(CallView {
                id: str_field(p, "id"),
                name: str_field(p, "name"),
                args: p.field("input"),
                encoded: false,
                server: part.kind == Kind::ServerCall,
            }),
            Kind::Result => Piece::Result {
                id: str_field(p, "tool_use_id"),
                content: p.field("content"),
                is_error: p.field("is_error").and_then(Value::as_bool) == Some(true),
            },
            k if k.is_reasoning() => Piece::Reasoning,
            _ => Piece::Other,
        }
    }

    fn has_reasoning(m: &Value) -> bool {
        has_reasoning_field(m)
            || m.field("content")
                .and_then(Value::as_array)
                .is_some_and(|blocks| droppable(blocks))
    }

    fn drop_reasoning(m: &mut Value) -> bool {
        let mut changed = drop_reasoning_field(m);
        if let Some(Value::Array(blocks)) = m.get_mut("content") {
            if droppable(blocks) {
                blocks.retain(|b| !is_reasoning(b));
                changed = true;
            }
        }
        changed
    }

    fn role_problem(role: &Role) -> Option<Problem> {
        if matches!(role, Role::User | Role::Assistant) {
            return None;
        }
        let (code, message) = if role.is_system() {
            (
                "system-in-messages",
                format!(
                    "role '{}' inside messages (Anthropic takes `system` at the top level)",
                    role.name()
                ),
            )
        } else {
            (
                "unknown-role",
                format!("role '{}' in an Anthropic conversation", role.name()),
            )
        };
        Some(Problem {
            error: false,
            code,
            at: "/role".into(),
            message,
        })
    }

    fn check_part(p: &Value, part: &Part) -> Option<Problem> {
        if part.kind != Kind::Call {
            return None;
        }
        match p.field("input") {
            Some(Value::Object(_)) => None,
            other => Some(Problem {
                error: true,
                code: "invalid-arguments",
                at: "/input".into(),
                message: format!(
                    "{} input must be a JSON object, found {}",
                    part.ty,
                    other.map_or("nothing", kind)
                ),
            }),
        }
    }

    fn result_id_at(r: &ToolResult) -> String {
        r.at.clone()
    }
}

/// A reasoning block.
fn is_reasoning(b: &Value) -> bool {
    part_type(b)
        .and_then(Messages::part)
        .is_some_and(|p| p.kind.is_reasoning())
}

/// Reasoning blocks that may go: some, beside other content (a message is never emptied).
fn droppable(blocks: &[Value]) -> bool {
    blocks.iter().any(is_reasoning) && !blocks.iter().all(is_reasoning)
}
