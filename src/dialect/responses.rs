//! The OpenAI Responses API (`/v1/responses`, and the servers that speak it: vLLM, llama.cpp).
//!
//! A body's conversation is `input`: a string (one user message) or a list of *items*. The
//! system prompt is the body's `instructions`. Items are messages (`{"role", "content"}`, with
//! `type: "message"` or no type; roles `user`, `assistant`, `system`, `developer`; content a
//! string or parts `input_text`, `output_text`, `input_image`, `input_file`, `refusal`), and
//! everything else is an item of its own, told by its `type`:
//! - calls the client runs (`function_call`, `custom_tool_call`, `local_shell_call`,
//!   `shell_call`, `apply_patch_call`, `computer_call`, `tool_search_call`, `program`,
//!   `mcp_approval_request`), each answered by an output item naming it by `call_id`
//!   (`function_call_output`, ...; `mcp_approval_response` by `approval_request_id`). Clients
//!   answer some calls with another output type than their own (Codex answers
//!   `local_shell_call` with `function_call_output`, OpenAI's cookbook a `custom_tool_call`
//!   too), so any output answers any call of its id;
//! - calls the provider runs (`web_search_call`, `file_search_call`, `code_interpreter_call`,
//!   `image_generation_call`, `mcp_call`, `mcp_list_tools`): their results are inside them;
//! - `reasoning` (with `encrypted_content` that must come back unchanged): part of the turn of
//!   the calls or message that follow it;
//! - `compaction` (an opaque summary of everything before it, `compaction_summary` in older
//!   Codex histories), `item_reference` (an item the server holds; `type` may be missing),
//!   `compaction_trigger` (a control item that must stay last). ctx keeps these as they are.
//!
//! Each item is one message of ctx's conversation model. An exchange is one assistant turn: the
//! run of model items (assistant messages, reasoning, calls) and the outputs that follow it, so
//! parallel calls and their reasoning stay together.

use serde_json::{Map, Value, json};

use super::{
    Call, CallView, Field, ImageData, Kind, Loc, Mark, Marks, Measure, Message, Part, Piece,
    Problem, Role, Rules, ToolResult, items, kind, mark_parts, owned, str_field,
};

/// The Responses rules.
pub struct Responses;

#[rustfmt::skip]
const PARTS: &[Part] = &[
    // type, what it is, whether it marks the dialect, whether the API takes it in a message
    Part::new("input_text", Kind::Text, Marks::No, true),
    Part::new("output_text", Kind::Text, Marks::Other, true),
    Part::new("refusal", Kind::Refusal, Marks::No, true),
    Part::new("input_image", Kind::Image, Marks::Other, true),
    Part::new("input_file", Kind::File, Marks::Other, true),
    // Only inside other items: a computer call's screenshot output, a reasoning item's texts.
    Part::new("computer_screenshot", Kind::Image, Marks::No, false),
    Part::new("summary_text", Kind::Text, Marks::No, false),
    Part::new("reasoning_text", Kind::Text, Marks::No, false),
];

/// What an item that is not a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemKind {
    /// A call the client runs; its arguments (or input, action, code) at `args`, a JSON text in
    /// a string when `encoded`. `id` is the field naming it (`call_id`, or `id`).
    Call {
        args: &'static str,
        encoded: bool,
        id: &'static str,
    },
    /// The output of a client call, naming it by `id`; its output at `out` (`/output`).
    Output { id: &'static str, out: &'static str },
    /// A call the provider runs, its results inside it.
    Hosted,
    /// Reasoning.
    Reasoning,
    /// An opaque summary of everything before it.
    Compaction,
    /// An item held by the server.
    Reference,
    /// A control item with no content (`compaction_trigger`: must be the last item).
    Control,
}

/// One item type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    pub ty: &'static str,
    pub kind: ItemKind,
}

const fn call(ty: &'static str, args: &'static str, encoded: bool) -> Item {
    Item {
        ty,
        kind: ItemKind::Call {
            args,
            encoded,
            id: "call_id",
        },
    }
}

const fn output(ty: &'static str) -> Item {
    Item {
        ty,
        kind: ItemKind::Output {
            id: "call_id",
            out: "/output",
        },
    }
}

const fn other(ty: &'static str, kind: ItemKind) -> Item {
    Item { ty, kind }
}

/// Every item type ctx knows besides messages.
#[rustfmt::skip]
pub const ITEMS: &[Item] = &[
    call("function_call", "/arguments", true),
    call("custom_tool_call", "/input", true),
    call("local_shell_call", "/action", false),
    call("shell_call", "/action", false),
    call("apply_patch_call", "/operation", false),
    call("computer_call", "/action", false),
    call("tool_search_call", "/arguments", false),
    call("program", "/code", true),
    Item { ty: "mcp_approval_request", kind: ItemKind::Call { args: "/arguments", encoded: true, id: "id" } },
    output("function_call_output"),
    output("custom_tool_call_output"),
    output("local_shell_call_output"),
    output("shell_call_output"),
    output("apply_patch_call_output"),
    output("computer_call_output"),
    output("tool_search_output"),
    Item { ty: "program_output", kind: ItemKind::Output { id: "call_id", out: "/result" } },
    Item { ty: "mcp_approval_response", kind: ItemKind::Output { id: "approval_request_id", out: "/reason" } },
    other("web_search_call", ItemKind::Hosted),
    other("file_search_call", ItemKind::Hosted),
    other("code_interpreter_call", ItemKind::Hosted),
    other("image_generation_call", ItemKind::Hosted),
    other("mcp_call", ItemKind::Hosted),
    other("mcp_list_tools", ItemKind::Hosted),
    other("reasoning", ItemKind::Reasoning),
    other("compaction", ItemKind::Compaction),
    other("compaction_summary", ItemKind::Compaction),
    other("item_reference", ItemKind::Reference),
    other("compaction_trigger", ItemKind::Control),
];

/// A `tool_search_call` the server runs.
const HOSTED_TOOL_SEARCH: Item = other("tool_search_call", ItemKind::Hosted);

/// An `item_reference`, which may be written without its type.
const REFERENCE: Item = other("item_reference", ItemKind::Reference);

/// What one element of `input` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemType<'a> {
    /// A message (`type: "message"`, or no type and a `role`).
    Message,
    /// A known item.
    Known(&'static Item),
    /// An item type ctx does not know (kept as it is, counted by its text).
    Unknown(&'a str),
    /// Neither a type nor a role.
    Untyped,
}

/// What an element of `input` is.
pub fn item_type(m: &Value) -> ItemType<'_> {
    match str_field(m, "type") {
        Some("message") => ItemType::Message,
        // A tool search the server runs has no output to wait for.
        Some("tool_search_call") if str_field(m, "execution") == Some("server") => {
            ItemType::Known(&HOSTED_TOOL_SEARCH)
        }
        Some(ty) => match ITEMS.iter().find(|i| i.ty == ty) {
            Some(item) => ItemType::Known(item),
            None => ItemType::Unknown(ty),
        },
        None if m.field("role").is_some() => ItemType::Message,
        // `{"id": "msg_..."}` alone is an item reference: its `type` is optional.
        None if m.field("id").is_some() => ItemType::Known(&REFERENCE),
        None => ItemType::Untyped,
    }
}

/// What the counter counts of an item that is not a message (see [`item_measure`]).
#[derive(Clone, Copy, Debug)]
pub enum ItemMeasure<'a> {
    /// A client call: its name (the item type when it has none) and arguments.
    Call {
        name: Option<&'a str>,
        args: Option<&'a Value>,
        encoded: bool,
    },
    /// A call's output: its `output` (a string, parts, or one part) and the `call_id`.
    Output {
        output: Option<&'a Value>,
        id: Option<&'a str>,
    },
    /// Reasoning: its summary and content texts, and its encrypted content.
    Reasoning {
        summary: Option<&'a Value>,
        content: Option<&'a Value>,
        encrypted: Option<&'a str>,
    },
    /// An opaque compaction: its encrypted content.
    Compaction(Option<&'a str>),
    /// An item the server holds, whose size ctx cannot know.
    Reference,
    /// A control item without content.
    Control,
    /// A call the provider ran, counted by the text of its strings; an image it made, base64.
    Hosted { image: Option<&'a str> },
    /// An item of a type ctx does not know, counted by the text of its strings.
    Unknown(&'a str),
}

/// What the counter counts of an element of `input` that is not a message, in any document
/// (a Responses item in a chat document is counted too, never skipped); `None` for a message.
#[inline]
pub fn item_measure(m: &Value) -> Option<ItemMeasure<'_>> {
    let item = match item_type(m) {
        ItemType::Message | ItemType::Untyped => return None,
        ItemType::Unknown(ty) => return Some(ItemMeasure::Unknown(ty)),
        ItemType::Known(item) => item,
    };
    Some(match item.kind {
        ItemKind::Call { args, encoded, .. } => ItemMeasure::Call {
            name: str_field(m, "name").or(Some(item.ty)),
            args: m.field(&args[1..]),
            encoded,
        },
        ItemKind::Output { id, out } => ItemMeasure::Output {
            output: m.field(&out[1..]),
            id: str_field(m, id),
        },
        ItemKind::Reasoning => ItemMeasure::Reasoning {
            summary: m.field("summary"),
            content: m.field("content"),
            encrypted: str_field(m, "encrypted_content"),
        },
        ItemKind::Compaction => ItemMeasure::Compaction(str_field(m, "encrypted_content")),
        ItemKind::Reference => ItemMeasure::Reference,
        ItemKind::Control => ItemMeasure::Control,
        ItemKind::Hosted => ItemMeasure::Hosted {
            image: (item.ty == "image_generation_call")
                .then(|| str_field(m, "result"))
                .flatten(),
        },
    })
}

/// The output of a client call (a string, or parts), by its item.
fn output_of(m: &Value) -> Option<&Value> {
    m.field("output")
}

impl Rules for Responses {
    const NAME: &'static str = "responses";
    const TITLE: &'static str = "OpenAI Responses";
    const PROVIDER: &'static str = "openai";
    const PART_NOUN: &'static str = "content part";
    const EXACT_COUNTS: bool = false;
    const SYSTEM_ROLE: Option<&'static str> = Some("developer");
    const SYSTEM_KEY: Option<&'static str> = Some("instructions");
    const RESULT_WITHOUT_ID: &'static str = "output item without call_id";
    const PARTS: &'static [Part] = PARTS;

    fn mark_body(body: &Map<String, Value>, mark: &mut dyn FnMut(Mark, Loc)) {
        for key in [
            "input",
            "instructions",
            "previous_response_id",
            "conversation",
        ] {
            if body.contains_key(key) {
                mark(Mark::Other, Loc::Key(key));
                return;
            }
        }
    }

    fn mark_message(m: &Value, mark: &mut dyn FnMut(Mark, Loc)) {
        match item_type(m) {
            ItemType::Known(item) => {
                let tool = matches!(item.kind, ItemKind::Call { .. } | ItemKind::Output { .. });
                mark(
                    if tool { Mark::Tool } else { Mark::Other },
                    Loc::Key("type"),
                );
            }
            ItemType::Message if str_field(m, "type") == Some("message") => {
                mark(Mark::Other, Loc::Key("type"));
            }
            _ => {}
        }
        mark_parts(super::Dialect::Responses, m, mark);
    }

    fn read_message(m: &Value) -> Message {
        let mut msg = Message::new(Role::Assistant);
        match item_type(m) {
            ItemType::Message => msg.role = Role::parse(m.field("role")),
            ItemType::Known(item) => match item.kind {
                ItemKind::Call { args, encoded, id } => msg.calls.push(Call {
                    id: owned(m, id),
                    name: owned(m, "name").or_else(|| Some(item.ty.to_string())),
                    at: String::new(),
                    args: args.to_string(),
                    encoded,
                    legacy: false,
                }),
                ItemKind::Output { id, out } => {
                    msg.role = Role::Tool;
                    // A `local_shell_call_output` names its call by `id` in the SDK's types.
                    let id = owned(m, id).or_else(|| {
                        (item.ty == "local_shell_call_output")
                            .then(|| owned(m, "id"))
                            .flatten()
                    });
                    msg.results.push(ToolResult {
                        id,
                        name: owned(m, "name"),
                        at: String::new(),
                        // A screenshot is the only thing a computer call's output may be: there
                        // is nothing to clear.
                        content: m
                            .field(&out[1..])
                            .filter(|_| item.ty != "computer_call_output")
                            .map(|_| out.to_string()),
                        is_error: str_field(m, "status") == Some("failed"),
                        legacy: false,
                        answers: None,
                    });
                    msg.only_results = true;
                }
                ItemKind::Hosted | ItemKind::Reasoning => msg.joins = true,
                ItemKind::Compaction => {
                    msg.role = Role::Other(item.ty.to_string());
                    msg.fixed = true;
                    msg.compaction = true;
                }
                ItemKind::Reference | ItemKind::Control => {
                    msg.role = Role::Other(item.ty.to_string());
                    msg.fixed = true;
                }
            },
            ItemType::Unknown(ty) => {
                msg.role = Role::Other(ty.to_string());
                msg.fixed = true;
            }
            ItemType::Untyped => {
                msg.role = Role::Missing;
                msg.fixed = true;
            }
        }
        msg
    }

    fn exchange_end(msgs: &[Message], i: usize) -> Option<usize> {
        let model = |m: &Message| m.role == Role::Assistant;
        if !model(&msgs[i]) {
            return None;
        }
        // The model's items of one turn: assistant messages, reasoning, calls of either kind.
        let mut j = i;
        while j < msgs.len() && model(&msgs[j]) {
            j += 1;
        }
        // A run of plain assistant messages is no exchange: each is a unit of its own.
        if msgs[i..j].iter().all(|m| m.calls.is_empty() && !m.joins) {
            return None;
        }
        let mut k = j;
        while k < msgs.len() && msgs[k].role == Role::Tool {
            k += 1;
        }
        Some(k)
    }

    fn message_calls<'a>(m: &'a Value, out: &mut Vec<CallView<'a>>) {
        let ItemType::Known(item) = item_type(m) else {
            return;
        };
        match item.kind {
            ItemKind::Call { args, encoded, id } => out.push(CallView {
                id: str_field(m, id),
                name: str_field(m, "name").or(Some(item.ty)),
                args: m.field(&args[1..]),
                encoded,
                server: false,
            }),
            ItemKind::Hosted => out.push(CallView {
                id: str_field(m, "id"),
                name: str_field(m, "name").or(Some(item.ty.trim_end_matches("_call"))),
                args: m
                    .field("action")
                    .or(m.field("arguments"))
                    .or(m.field("queries"))
                    .or(m.field("code")),
                encoded: m.field("arguments").is_some_and(Value::is_string),
                server: true,
            }),
            _ => {}
        }
    }

    fn measure<'a>(p: &'a Value, part: &Part) -> Measure<'a> {
        match part.kind {
            Kind::Text => Measure::Text(str_field(p, "text")),
            Kind::Refusal => Measure::Text(str_field(p, "refusal")),
            Kind::Image => Measure::Image {
                data: match str_field(p, "image_url") {
                    Some(url) => ImageData::Url(url),
                    None => ImageData::Unknown,
                },
                detail: str_field(p, "detail"),
            },
            Kind::File => Measure::File(str_field(p, "filename")),
            _ => Measure::ByText,
        }
    }

    fn piece<'a>(p: &'a Value, part: &Part) -> Piece<'a> {
        match part.kind {
            Kind::Text => str_field(p, "text").map_or(Piece::Other, Piece::Text),
            Kind::Refusal => str_field(p, "refusal").map_or(Piece::Other, Piece::Text),
            Kind::Image => Piece::Image,
            _ => Piece::Other,
        }
    }

    fn has_reasoning(m: &Value) -> bool {
        matches!(
            item_type(m),
            ItemType::Known(Item {
                kind: ItemKind::Reasoning,
                ..
            })
        )
    }

    /// A reasoning item is dropped as a whole item, never emptied in place (its encrypted
    /// content must come back unchanged or not at all): the operations remove it.
    fn drop_reasoning(_m: &mut Value) -> bool {
        false
    }

    fn text_message(role: &str, text: &str) -> Value {
        json!({"type": "message", "role": role, "content": text})
    }

    fn text_locations(m: &Value) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        let (key, result) = match item_type(m) {
            ItemType::Message => ("content", false),
            ItemType::Known(Item {
                kind: ItemKind::Output { out, .. },
                ..
            }) => (&out[1..], true),
            _ => return out,
        };
        match m.field(key) {
            Some(Value::String(_)) => out.push((format!("/{key}"), result)),
            Some(Value::Array(parts)) => {
                for (k, p) in parts.iter().enumerate() {
                    if matches!(super::part_type(p), Some("input_text" | "output_text"))
                        && p.field("text").is_some_and(Value::is_string)
                    {
                        out.push((format!("/{key}/{k}/text"), result));
                    }
                }
            }
            _ => {}
        }
        out
    }

    fn role_problem(role: &Role) -> Option<Problem> {
        matches!(role, Role::Tool | Role::Function).then(|| Problem {
            error: true,
            code: "invalid-role",
            at: "/role".into(),
            message: format!(
                "role {:?} is not a Responses API message role: tool results are function_call_output items",
                role.name()
            ),
        })
    }

    fn check_calls(m: &Value, out: &mut Vec<Problem>) {
        let item = match item_type(m) {
            ItemType::Known(item) => item,
            ItemType::Unknown(ty) => {
                out.push(Problem {
                    error: false,
                    code: "unknown-item-type",
                    at: "/type".into(),
                    message: format!("unknown item type '{ty}' (kept and counted by its text)"),
                });
                return;
            }
            _ => return,
        };
        let error = |code, at: &str, message: String| Problem {
            error: true,
            code,
            at: at.into(),
            message,
        };
        match item.kind {
            ItemKind::Call { id, .. } => {
                if str_field(m, id).is_none() {
                    out.push(error(
                        "missing-call-id",
                        &format!("/{id}"),
                        format!("{} has no {id}", item.ty),
                    ));
                }
                if item.ty == "function_call" {
                    if str_field(m, "name").is_none() {
                        out.push(error(
                            "missing-tool-name",
                            "/name",
                            "function_call has no name".into(),
                        ));
                    }
                    out.extend(super::openai::check_arguments(
                        m.field("arguments"),
                        "/arguments".into(),
                    ));
                }
            }
            ItemKind::Output { out: key, .. }
                if m.field(&key[1..]).is_none() && item.ty != "mcp_approval_response" =>
            {
                out.push(error(
                    "missing-output",
                    key,
                    format!("{} has no {}", item.ty, &key[1..]),
                ));
            }
            _ => {}
        }
        if let Some(Value::Array(parts)) = output_of(m) {
            for (k, p) in parts.iter().enumerate() {
                if !p.is_object() {
                    out.push(error(
                        "invalid-output",
                        &format!("/output/{k}"),
                        format!("an output part must be an object, found {}", kind(p)),
                    ));
                }
            }
        }
        let _ = items;
    }

    fn check_part(p: &Value, part: &Part) -> Option<Problem> {
        if part.kind != Kind::Image {
            return None;
        }
        if p.field("file_id").is_some() {
            return None;
        }
        let url = str_field(p, "image_url").unwrap_or("");
        let fetchable =
            url.starts_with("http://") || url.starts_with("https://") || url.starts_with("data:");
        (!fetchable).then(|| Problem {
            error: false,
            code: "image-url",
            at: "/image_url".into(),
            message: "image_url is neither http(s) nor a data: URL (nor is there a file_id)".into(),
        })
    }

    fn result_id_at(r: &ToolResult) -> String {
        format!("{}/call_id", r.at)
    }

    /// Only messages have roles (an element with neither a type nor a role is taken for a
    /// message without one).
    fn is_message(m: &Value) -> bool {
        matches!(item_type(m), ItemType::Message | ItemType::Untyped)
    }
}
