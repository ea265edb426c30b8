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
//!   `compaction_trigger` (a control item that must stay last, no unit of its own). ctx keeps
//!   these as they are.
//!
//! Each item is one message of ctx's conversation model. An exchange is one assistant turn: the
//! run of model items (assistant messages, reasoning, calls) and the outputs that follow it, so
//! parallel calls and their reasoning stay together. After a reasoning item (which starts a
//! model response) the model's calls that follow its outputs, up to the next reasoning item, are
//! the same response's (clients write parallel calls each followed by its output): they stay in
//! the exchange. A control item joins the unit before it ([`crate::conversation`]).

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::{
    Call, CallView, EmptyArgs, Ended, Field, ImageData, Kind, Loc, Mark, Marks, Measure, Message,
    OutputFields, Part, Piece, Problem, Role, Rules, ToolResult, kind, mark_parts, owned,
    str_field,
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
    /// a string when `encoded`. `id` is the field naming it (`call_id`, or `id`). `empty` is
    /// what `prune --clear-inputs` may write over the arguments, `None` where the API requires
    /// what they hold (an action, an operation, code).
    Call {
        args: &'static str,
        encoded: bool,
        id: &'static str,
        empty: Option<EmptyArgs>,
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

const fn call(
    ty: &'static str,
    args: &'static str,
    encoded: bool,
    empty: Option<EmptyArgs>,
) -> Item {
    Item {
        ty,
        kind: ItemKind::Call {
            args,
            encoded,
            id: "call_id",
            empty,
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
    // type, where its arguments are, whether they are a JSON text, what --clear-inputs may write
    call("function_call", "/arguments", true, Some(EmptyArgs::Object)),
    call("custom_tool_call", "/input", true, Some(EmptyArgs::Text)),
    call("local_shell_call", "/action", false, None),
    call("shell_call", "/action", false, None),
    call("apply_patch_call", "/operation", false, None),
    call("computer_call", "/action", false, None),
    call("tool_search_call", "/arguments", false, None),
    call("program", "/code", true, None),
    Item { ty: "mcp_approval_request", kind: ItemKind::Call { args: "/arguments", encoded: true, id: "id", empty: None } },
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

/// Items as Chat Completions messages, one for one (so that indices stay valid), for the
/// readers that summarize a conversation: each run of model items becomes one assistant message
/// at its first item (the texts of its messages, the calls of its client calls as `tool_calls`),
/// its other items empty objects; an output a `tool` message with its text; messages stay as
/// they are; anything else an empty object (reasoning, compaction, references: nothing to read).
pub fn chat_view(items: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    // The index of the assistant message of the turn being read.
    let mut turn: Option<usize> = None;
    for m in items {
        let ty = item_type(m);
        let model = match ty {
            ItemType::Message => str_field(m, "role") == Some("assistant"),
            ItemType::Known(item) => matches!(
                item.kind,
                ItemKind::Call { .. } | ItemKind::Hosted | ItemKind::Reasoning
            ),
            _ => false,
        };
        if !model {
            turn = None;
            out.push(match ty {
                ItemType::Message => m.clone(),
                ItemType::Known(Item {
                    kind: ItemKind::Output { id, out: key },
                    ..
                }) => json!({
                    "role": "tool",
                    "tool_call_id": m.field(id),
                    "content": output_text(m.field(&key[1..]).unwrap_or(&Value::Null)),
                }),
                _ => json!({}),
            });
            continue;
        }
        let at = match turn {
            Some(at) => {
                out.push(json!({}));
                at
            }
            None => {
                out.push(json!({"role": "assistant", "content": "", "tool_calls": []}));
                *turn.insert(out.len() - 1)
            }
        };
        let mut calls = Vec::new();
        Responses::message_calls(m, &mut calls);
        let calls = calls.iter().filter(|c| !c.server).map(|c| {
            let args = match c.args {
                Some(Value::String(s)) if c.encoded => s.clone(),
                Some(v) => v.to_string(),
                None => String::new(),
            };
            json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": args}})
        });
        let merged = &mut out[at];
        if let Some(list) = merged["tool_calls"].as_array_mut() {
            list.extend(calls);
        }
        if ty == ItemType::Message {
            let text = super::text_of(m.field("content").unwrap_or(&Value::Null), None);
            if !text.is_empty() {
                let joined = match merged["content"].as_str() {
                    Some("") | None => text.into_owned(),
                    Some(before) => format!("{before}\n{text}"),
                };
                merged["content"] = Value::String(joined);
            }
        }
    }
    out
}

/// The output of a client call (a string, or parts), by its item.
fn output_of(m: &Value) -> Option<&Value> {
    m.field("output")
}

/// The text of a client call's output: a string, its text parts, or a shell call's `stdout`
/// and `stderr`, joined by line breaks.
fn output_text(output: &Value) -> Cow<'_, str> {
    match Responses::output_fields(output) {
        Some(fields) => Cow::Owned(fields.text(output)),
        None => super::text_of(output, None),
    }
}

/// The entries of a shell call's output (`shell_call_output.output`): objects of `stdout`,
/// `stderr` and `outcome`, without a `type` (the counter reads them by the same shape); `None`
/// for any other value.
fn shell_entries(output: &Value) -> Option<&[Value]> {
    let entries = output.as_array()?;
    let entry = |e: &Value| {
        e.is_object()
            && e.field("type").is_none()
            && ["stdout", "stderr", "outcome"]
                .iter()
                .any(|k| e.field(k).is_some())
    };
    (!entries.is_empty() && entries.iter().all(entry)).then_some(entries.as_slice())
}

/// How a shell call's command ended, by its entry's `outcome` (`{"type": "exit", "exit_code":
/// 1}`, `{"type": "timeout"}`).
fn shell_ended(entry: &Value) -> Option<Ended> {
    let outcome = entry.field("outcome")?;
    match str_field(outcome, "type") {
        Some("timeout") => Some(Ended::Timeout),
        Some("exit") | None => outcome
            .field("exit_code")
            .and_then(Value::as_i64)
            .map(Ended::Exit),
        Some(_) => None,
    }
}

/// The entry that says how a shell call ended, and how: the first that failed (a timeout, a
/// non-zero exit), else the last that says.
fn shell_outcome(entries: &[Value]) -> Option<(usize, Ended)> {
    let ended = entries
        .iter()
        .enumerate()
        .filter_map(|(k, e)| shell_ended(e).map(|x| (k, x)));
    let mut last = None;
    for (k, x) in ended {
        if x != Ended::Exit(0) {
            return Some((k, x));
        }
        last = Some((k, x));
    }
    last
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
                ItemKind::Call {
                    args,
                    encoded,
                    id,
                    empty,
                } => msg.calls.push(Call {
                    id: owned(m, id),
                    name: owned(m, "name").or_else(|| Some(item.ty.to_string())),
                    at: String::new(),
                    args: args.to_string(),
                    encoded,
                    legacy: false,
                    empty,
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
                ItemKind::Hosted => msg.joins = true,
                ItemKind::Reasoning => {
                    msg.joins = true;
                    msg.reasoning = true;
                }
                ItemKind::Compaction => {
                    msg.role = Role::Other(item.ty.to_string());
                    msg.fixed = true;
                    msg.compaction = true;
                }
                ItemKind::Reference => {
                    msg.role = Role::Other(item.ty.to_string());
                    msg.fixed = true;
                    msg.reference = true;
                }
                ItemKind::Control => {
                    msg.role = Role::Other(item.ty.to_string());
                    msg.control = true;
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
        // An item reference may stand for a call the server holds (clients replay
        // `item_reference` and then the call's output): the outputs after it stay with it.
        let model = |m: &Message| m.role == Role::Assistant || m.reference;
        let plain = |run: &[Message]| run.iter().all(|m| m.calls.is_empty() && !m.joins);
        if !model(&msgs[i]) {
            return None;
        }
        // The model's items of one turn: assistant messages, reasoning, calls of either kind.
        let mut j = i;
        while j < msgs.len() && model(&msgs[j]) {
            j += 1;
        }
        // A run of plain assistant messages is no exchange: each is a unit of its own. So is
        // a run of references no output follows.
        let answered_reference = msgs[i..j].iter().any(|m| m.reference)
            && msgs.get(j).is_some_and(|m| m.role == Role::Tool);
        if plain(&msgs[i..j]) && !answered_reference {
            return None;
        }
        let outputs = |mut k: usize| {
            while k < msgs.len() && msgs[k].role == Role::Tool {
                k += 1;
            }
            k
        };
        let mut k = outputs(j);
        // A reasoning item starts a model response (every response of a reasoning model opens
        // with one), and clients write a response's parallel calls each followed by its output:
        // the model's items after the outputs are the same response's until the next reasoning
        // item (or an item that is not the model's), and the API rejects them without its
        // reasoning. A run of them with a call stays in the unit with its outputs; a run of
        // plain assistant messages after the last outputs (the answer) stays units of its own,
        // as elsewhere. Without reasoning nothing says where a response starts, and each run of
        // calls is a unit of its own.
        if msgs[i..j].iter().any(|m| m.reasoning) {
            let same_response = |m: &Message| model(m) && !m.reasoning;
            loop {
                let mut e = k;
                while e < msgs.len() && same_response(&msgs[e]) {
                    e += 1;
                }
                if plain(&msgs[k..e]) {
                    break;
                }
                k = outputs(e);
            }
        }
        Some(k)
    }

    fn message_calls<'a>(m: &'a Value, out: &mut Vec<CallView<'a>>) {
        let ItemType::Known(item) = item_type(m) else {
            return;
        };
        match item.kind {
            ItemKind::Call {
                args, encoded, id, ..
            } => out.push(CallView {
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

    fn chat_view(items: &[Value]) -> Option<Vec<Value>> {
        Some(chat_view(items))
    }

    /// A shell call's output: its entries' `stdout` and `stderr`, and the outcome of the first
    /// that failed (else of the last).
    fn output_fields(output: &Value) -> Option<OutputFields> {
        let entries = shell_entries(output)?;
        let mut texts = Vec::new();
        for (k, e) in entries.iter().enumerate() {
            for key in ["stdout", "stderr"] {
                if str_field(e, key).is_some_and(|t| !t.is_empty()) {
                    texts.push(format!("/{k}/{key}"));
                }
            }
        }
        Some(OutputFields {
            texts,
            ended: shell_outcome(entries).map(|(_, x)| x),
        })
    }

    /// A shell call's output stays a list (the API requires one): one entry, the text as its
    /// `stdout`, an empty `stderr`, and the `outcome` (and any other field) of the entry that
    /// says how it ended. Every other output ctx clears takes a string (`output`,
    /// `program_output.result`, `mcp_approval_response.reason`) and becomes the text.
    fn cleared_output(output: &Value, text: String) -> Value {
        let Some(entries) = shell_entries(output) else {
            return Value::String(text);
        };
        let k = shell_outcome(entries).map_or(entries.len() - 1, |(k, _)| k);
        let mut entry = entries[k].clone();
        entry["stdout"] = Value::String(text);
        entry["stderr"] = Value::String(String::new());
        Value::Array(vec![entry])
    }

    fn cleared_text(output: &Value) -> Option<&str> {
        match shell_entries(output) {
            Some([entry]) if str_field(entry, "stderr").is_none_or(str::is_empty) => {
                str_field(entry, "stdout")
            }
            Some(_) => None,
            None => output.as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Conversation, UnitKind};
    use crate::dialect::Dialect;

    fn items() -> Vec<Value> {
        vec![
            json!({"type": "message", "role": "developer", "content": "be brief"}),
            json!({"role": "user", "content": [{"type": "input_text", "text": "fix it"}]}),
            json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"}),
            json!({"type": "function_call", "call_id": "a", "name": "read", "arguments": "{\"path\":\"x.rs\"}"}),
            json!({"type": "custom_tool_call", "call_id": "b", "name": "apply_patch", "input": "*** Begin Patch"}),
            json!({"type": "function_call_output", "call_id": "a", "output": "fn main() {}"}),
            json!({"type": "custom_tool_call_output", "call_id": "b", "output": [{"type": "input_text", "text": "done"}]}),
            json!({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed x.rs."}]}),
            json!({"type": "compaction", "encrypted_content": "gAAAA"}),
            json!({"id": "msg_1"}),
            json!({"type": "hologram", "beam": "on"}),
        ]
    }

    /// Parallel calls, their outputs and the reasoning before them are one unit, and so are the
    /// hosted call and the message after the outputs (no reasoning item starts another
    /// response); compaction, references and unknown items are kept.
    #[test]
    fn a_turn_is_its_reasoning_calls_and_outputs() {
        let conv = Conversation::new(&items(), Dialect::Responses);
        let units: Vec<(UnitKind, usize, usize)> = conv
            .units
            .iter()
            .map(|u| (u.kind, u.start, u.end))
            .collect();
        assert_eq!(
            units,
            [
                (UnitKind::System, 0, 1),
                (UnitKind::Single, 1, 2),
                (UnitKind::ToolExchange, 2, 9),
                (UnitKind::System, 9, 10),
                (UnitKind::Single, 10, 11),
                (UnitKind::Single, 11, 12),
            ]
        );
        let results: Vec<_> = conv.messages[5..7]
            .iter()
            .map(|m| m.results[0].answers.map(|c| c.message))
            .collect();
        assert_eq!(results, [Some(3), Some(4)]);
        let pinned = conv.pinned_units(&Default::default()).unwrap();
        assert_eq!(pinned, [true, true, false, true, true, true]);
        assert_eq!(conv.compacted, Some(3));
    }

    fn units_of(items: &[Value]) -> Vec<(UnitKind, usize, usize)> {
        Conversation::new(items, Dialect::Responses)
            .units
            .iter()
            .map(|u| (u.kind, u.start, u.end))
            .collect()
    }

    fn user(text: &str) -> Value {
        json!({"role": "user", "content": text})
    }

    fn reasoning(id: &str) -> Value {
        json!({"type": "reasoning", "id": id, "summary": [], "encrypted_content": "gAAAA"})
    }

    fn fc(id: &str) -> Value {
        json!({"type": "function_call", "call_id": id, "name": "get_weather", "arguments": "{}"})
    }

    fn out(id: &str) -> Value {
        json!({"type": "function_call_output", "call_id": id, "output": "18C"})
    }

    fn said(text: &str) -> Value {
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
    }

    /// A reasoning model's response whose parallel calls the client wrote each followed by its
    /// output (as the SDKs' agent loops do) is one unit with its reasoning: the API rejects a
    /// call sent without the reasoning item of its response. A message between them is the
    /// response's too; plain messages after the last outputs (the answer) are units of their own.
    #[test]
    fn interleaved_parallel_calls_after_reasoning_are_one_unit() {
        let items = [
            user("Weather in Paris, Rome and Oslo?"),
            reasoning("rs_1"),
            fc("call_1"),
            out("call_1"),
            fc("call_2"),
            out("call_2"),
            said("One more."),
            fc("call_3"),
            out("call_3"),
            said("Paris 16C, Rome 18C, Oslo 4C."),
            user("Thanks."),
        ];
        use UnitKind::*;
        assert_eq!(
            units_of(&items),
            [
                (Single, 0, 1),
                (ToolExchange, 1, 9),
                (Single, 9, 10),
                (Single, 10, 11)
            ]
        );
        let conv = Conversation::new(&items, Dialect::Responses);
        let answers: Vec<_> = [3, 5, 8]
            .iter()
            .map(|&m| conv.messages[m].results[0].answers.map(|c| c.message))
            .collect();
        assert_eq!(answers, [Some(2), Some(4), Some(7)]);
        // The readers see each call in an assistant message before its output.
        let view = chat_view(&items);
        let call = |m: usize| view[m]["tool_calls"][0]["id"].clone();
        assert_eq!([call(1), call(4), call(6)], ["call_1", "call_2", "call_3"]);
        assert_eq!(view[6]["content"], "One more.");
        let answered: Vec<&Value> = [3, 5, 8]
            .iter()
            .map(|&m| &view[m]["tool_call_id"])
            .collect();
        assert_eq!(answered, ["call_1", "call_2", "call_3"]);
        // Written the other way ([rs, fc1, fc2, out1, out2]) it was one unit already.
        let grouped = [
            user("Weather in Paris and Rome?"),
            reasoning("rs_1"),
            fc("call_1"),
            fc("call_2"),
            out("call_1"),
            out("call_2"),
        ];
        assert_eq!(units_of(&grouped), [(Single, 0, 1), (ToolExchange, 1, 6)]);
    }

    /// Without reasoning items nothing says where a response starts: each call and the outputs
    /// after it stay a unit of their own (truncation keeps its granularity).
    #[test]
    fn without_reasoning_each_call_and_its_outputs_are_a_unit() {
        let items = [
            user("Weather in Paris and Rome?"),
            fc("call_1"),
            out("call_1"),
            fc("call_2"),
            out("call_2"),
            said("Paris 16C, Rome 18C."),
        ];
        use UnitKind::*;
        assert_eq!(
            units_of(&items),
            [
                (Single, 0, 1),
                (ToolExchange, 1, 3),
                (ToolExchange, 3, 5),
                (Single, 5, 6)
            ]
        );
    }

    /// Clients replay a call the server holds as an `item_reference` followed by the call's
    /// output: the output answers it (no orphan for check), and the two are one tool exchange,
    /// removed only together and not pinned; a reference no output follows stays pinned.
    #[test]
    fn outputs_after_an_item_reference_go_with_it() {
        use crate::conversation::{Conversation, PinOptions};
        let reference = |id: &str| json!({"type": "item_reference", "id": id});
        let items = [
            user("task"),
            reference("fc_1"),
            out("call_1"),
            reference("msg_1"),
            user("next"),
        ];
        use UnitKind::*;
        assert_eq!(
            units_of(&items),
            [
                (Single, 0, 1),
                (ToolExchange, 1, 3),
                (Single, 3, 4),
                (Single, 4, 5)
            ]
        );
        let conv = Conversation::new(&items, Dialect::Responses);
        let pinned = conv.pinned_units(&PinOptions::default()).unwrap();
        assert_eq!(pinned, [true, false, true, false]);
        let check = |v: Value| -> Vec<&'static str> {
            crate::ops::check::check(&crate::document::Document::parse(v, None).unwrap())
                .iter()
                .map(|f| f.code)
                .collect()
        };
        assert!(check(json!({"input": items})).is_empty());
        // Reasoning followed by a reference: the reference may be the item it led to.
        let reasoned = json!({"input": [user("task"), reasoning("rs_1"), reference("fc_1"),
            out("call_1")]});
        assert!(check(reasoned).is_empty());
    }

    /// A reasoning item starts the next response, and so the next unit; so does a message
    /// that is not the model's.
    #[test]
    fn a_reasoning_item_or_a_message_not_the_models_starts_a_new_unit() {
        let items = [
            user("Weather in Paris and Rome?"),
            reasoning("rs_1"),
            fc("call_1"),
            out("call_1"),
            reasoning("rs_2"),
            fc("call_2"),
            out("call_2"),
            reasoning("rs_3"),
            said("Paris 16C, Rome 18C."),
        ];
        use UnitKind::*;
        assert_eq!(
            units_of(&items),
            [
                (Single, 0, 1),
                (ToolExchange, 1, 4),
                (ToolExchange, 4, 7),
                (ToolExchange, 7, 9)
            ]
        );
        let items = [
            user("Weather in Paris and Rome?"),
            reasoning("rs_1"),
            fc("call_1"),
            out("call_1"),
            json!({"type": "message", "role": "developer", "content": "be brief"}),
            fc("call_2"),
            out("call_2"),
        ];
        assert_eq!(
            units_of(&items),
            [
                (Single, 0, 1),
                (ToolExchange, 1, 4),
                (System, 4, 5),
                (ToolExchange, 5, 7)
            ]
        );
    }

    /// A control item is no unit of its own: it belongs to the unit before it (at the start, the
    /// one after), is kept (pinned by itself, without pinning its unit) and is not the newest
    /// message.
    #[test]
    fn a_control_item_joins_the_unit_before_it() {
        let trigger = json!({"type": "compaction_trigger"});
        let items = [
            user("Fix the bug."),
            fc("a"),
            out("a"),
            said("All tests pass now."),
            trigger.clone(),
        ];
        use UnitKind::*;
        assert_eq!(
            units_of(&items),
            [(Single, 0, 1), (ToolExchange, 1, 3), (Single, 3, 5)]
        );
        let conv = Conversation::new(&items, Dialect::Responses);
        let pins = Default::default();
        assert_eq!(conv.pinned_units(&pins).unwrap(), [true, false, false]);
        assert_eq!(
            conv.pinned_messages(&pins).unwrap(),
            [true, false, false, false, true]
        );
        assert_eq!(conv.recent_start(1), 3);
        assert_eq!(conv.recent_start(2), 1);
        assert_eq!(conv.last_message(), Some(3));
        let items = [trigger.clone(), user("Fix the bug."), said("Done.")];
        assert_eq!(units_of(&items), [(Single, 0, 2), (Single, 2, 3)]);
        let items = [trigger.clone()];
        let conv = Conversation::new(&items, Dialect::Responses);
        assert_eq!(units_of(&items), [(Single, 0, 1)]);
        assert_eq!(conv.pinned_units(&Default::default()).unwrap(), [true]);
        assert_eq!(conv.last_message(), None);
    }

    #[test]
    fn items_are_typed_with_or_without_type() {
        let all = items();
        let kinds: Vec<String> = all
            .iter()
            .map(|m| match item_type(m) {
                ItemType::Message => "message".into(),
                ItemType::Known(i) => i.ty.into(),
                ItemType::Unknown(t) => format!("unknown {t}"),
                ItemType::Untyped => "untyped".into(),
            })
            .collect();
        assert_eq!(kinds[10], "item_reference");
        assert_eq!(kinds[11], "unknown hologram");
        assert_eq!(item_type(&json!({"content": "x"})), ItemType::Untyped);
        let server = json!({"type": "tool_search_call", "execution": "server", "arguments": {}});
        assert!(matches!(
            item_type(&server),
            ItemType::Known(Item {
                kind: ItemKind::Hosted,
                ..
            })
        ));
    }

    /// The readers see a turn as one assistant message with its calls, at the turn's first item.
    #[test]
    fn the_chat_view_keeps_indices_and_merges_a_turn() {
        let all = items();
        let view = chat_view(&all);
        assert_eq!(view.len(), all.len());
        assert_eq!(view[2]["role"], "assistant");
        let calls: Vec<&str> = view[2]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(calls, ["read", "apply_patch"]);
        assert_eq!(
            view[2]["tool_calls"][0]["function"]["arguments"],
            "{\"path\":\"x.rs\"}"
        );
        assert_eq!(view[3], json!({}));
        assert_eq!(
            view[5],
            json!({"role": "tool", "tool_call_id": "a", "content": "fn main() {}"})
        );
        assert_eq!(view[6]["content"], "done");
        assert_eq!(view[7]["content"], "Fixed x.rs.");
        assert_eq!(view[9], json!({}));
    }

    /// A reasoning item is dropped whole by the operations, never emptied in place.
    #[test]
    fn reasoning_is_an_item_of_its_own() {
        let mut r = items()[2].clone();
        assert!(Responses::has_reasoning(&r));
        assert!(!Responses::drop_reasoning(&mut r));
        assert_eq!(r, items()[2]);
        assert_eq!(
            Responses::text_message("developer", "s"),
            json!({"type": "message", "role": "developer", "content": "s"})
        );
    }

    /// `check` finds what the API rejects in items: reasoning alone, an output without its
    /// call, a call never answered; an output answering a call the server holds is fine.
    #[test]
    fn check_reads_items() {
        use crate::document::Document;
        use crate::ops::check::check;
        let codes = |v: Value| -> Vec<&'static str> {
            check(&Document::parse(v, None).unwrap())
                .iter()
                .map(|f| f.code)
                .collect()
        };
        let lone = json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"},
            {"role": "user", "content": "still there?"}
        ]});
        assert_eq!(codes(lone), ["reasoning-without-item"]);
        let orphan = json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call_output", "call_id": "a", "output": "x"},
            {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
            {"role": "user", "content": "and?"}
        ]});
        assert_eq!(codes(orphan), ["orphan-result", "unanswered-call"]);
        let chained = json!({"previous_response_id": "resp_1", "input": [
            {"type": "function_call_output", "call_id": "a", "output": "x"}
        ]});
        assert!(codes(chained).is_empty());
        // Parallel calls at the end are a loop in progress, answered or not.
        let open = json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"}
        ]});
        assert!(codes(open).is_empty());
        // Interleaved with their outputs, and before a control item, too.
        let open = json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "x"},
            {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
            {"type": "compaction_trigger"}
        ]});
        assert!(codes(open).is_empty());
        // An output before the call of its id answers no call.
        let early = json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "b", "output": "x"},
            {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "y"},
            {"role": "user", "content": "and?"}
        ]});
        assert_eq!(codes(early), ["orphan-result", "unanswered-call"]);
    }

    /// A shell call's output is a list of `stdout`, `stderr` and `outcome`: its text is in those
    /// fields, the first failed command says how it ended, and a cleared one stays a list (one
    /// entry, that outcome kept) that reads back as its placeholder.
    #[test]
    fn a_shell_output_is_read_and_cleared_in_its_shape() {
        let output = json!([
            {"stdout": "ok\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
            {"stdout": "", "stderr": "boom\n", "outcome": {"type": "exit", "exit_code": 2}, "created_by": "u"},
            {"stdout": "late\n", "stderr": "", "outcome": {"type": "timeout"}}
        ]);
        let fields = Responses::output_fields(&output).unwrap();
        assert_eq!(fields.texts, ["/0/stdout", "/1/stderr", "/2/stdout"]);
        assert_eq!(fields.ended, Some(Ended::Exit(2)));
        assert_eq!(fields.text(&output), "ok\n\nboom\n\nlate\n");
        let cleared = Responses::cleared_output(&output, "[gone]".into());
        assert_eq!(
            cleared,
            json!([{"stdout": "[gone]", "stderr": "", "outcome": {"type": "exit", "exit_code": 2}, "created_by": "u"}])
        );
        assert_eq!(Responses::cleared_text(&cleared), Some("[gone]"));
        assert_eq!(Responses::cleared_text(&output), None);
        let timeout = json!([{"stdout": "x", "stderr": "", "outcome": {"type": "timeout"}}]);
        assert_eq!(
            Responses::output_fields(&timeout).unwrap().ended,
            Some(Ended::Timeout)
        );
        let passed = json!([{"stdout": "a", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
            {"stdout": "b", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]);
        assert_eq!(
            Responses::cleared_output(&passed, "p".into())[0]["stdout"],
            "p"
        );
        // Strings and content parts are no shell output: they are cleared to the string.
        for other in [
            json!("text"),
            json!([{"type": "input_text", "text": "t"}]),
            json!([]),
        ] {
            assert_eq!(Responses::output_fields(&other), None);
            assert_eq!(Responses::cleared_output(&other, "p".into()), json!("p"));
        }
        assert_eq!(Responses::cleared_text(&json!("p")), Some("p"));
        // The readers see a shell output's text.
        let items = [
            json!({"type": "shell_call", "call_id": "s", "action": {"commands": ["ls"]}}),
            json!({"type": "shell_call_output", "call_id": "s", "output": output}),
        ];
        assert_eq!(chat_view(&items)[1]["content"], "ok\n\nboom\n\nlate\n");
    }

    /// `prune --clear-inputs` empties only what the API lets be empty: a function call's
    /// arguments (`{}`) and a custom tool call's free-form input (`""`), never an action, an
    /// operation or code.
    #[test]
    fn only_free_arguments_may_be_emptied() {
        let empty = |m: Value| Responses::read_message(&m).calls[0].empty;
        assert_eq!(
            empty(json!({"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"})),
            Some(EmptyArgs::Object)
        );
        assert_eq!(
            empty(json!({"type": "custom_tool_call", "call_id": "a", "name": "f", "input": "x"})),
            Some(EmptyArgs::Text)
        );
        for ty in [
            "local_shell_call",
            "shell_call",
            "apply_patch_call",
            "computer_call",
            "tool_search_call",
            "program",
            "mcp_approval_request",
        ] {
            assert_eq!(
                empty(json!({"type": ty, "call_id": "a", "id": "a"})),
                None,
                "{ty}"
            );
        }
    }
}
