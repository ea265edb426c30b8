//! The dialects ctx reads: one module per API that alone knows its message format.
//!
//! A dialect module ([`openai`] for Chat Completions, [`anthropic`] for Messages, [`responses`]
//! for the Responses API) is one unit
//! struct implementing [`Rules`]; [`Dialect`] names the dialects and dispatches each question to
//! its module with a `match` (no trait objects on the hot paths). Everything else in ctx (the
//! document recogniser, the conversation model, the counter, check, prune, truncate, summarize,
//! fit) asks [`Dialect`] or the functions of this module, and never names a role, a part type or
//! a field of a message format itself. Places inside a document are RFC 6901 JSON pointers
//! ([`mod@pointer`]); jq-style paths are only how a pointer is shown.
//!
//! # What a dialect module provides
//!
//! Implement [`Rules`] (the trait's documentation lists every item):
//! - its names (`--format` value, title, provider) and its constants: the role a system message
//!   takes inside the messages and the body key of a system prompt outside them (a summary, a
//!   note and the summarizer's context follow them), whether ctx's counts for it are exact, what
//!   its parts are called, what `check` says of a result without an id;
//! - its part table, [`Rules::PARTS`] ([`Part`]): for each part or block type, what it is
//!   ([`Kind`]: text, image, tool call, tool result, reasoning, ...), whether it marks the dialect
//!   when a document is recognised ([`Marks`]), and whether its API accepts it in a message;
//!   [`Rules::measure`] and [`Rules::piece`] read a part of each kind (where its text, image,
//!   arguments or output live);
//! - where the structure that identifies it lives ([`Rules::mark_body`],
//!   [`Rules::mark_message`]);
//! - how to read one message ([`Rules::read_message`]: role, calls, results, each with the
//!   pointers of where it lives) and where a tool exchange that starts at a message ends
//!   ([`Rules::exchange_end`]); calls written outside the content ([`Rules::message_calls`]);
//! - where reasoning lives and how to drop it ([`Rules::has_reasoning`],
//!   [`Rules::drop_reasoning`]);
//! - how to build a plain text message (a summary, a note: [`Rules::text_message`]) and which
//!   texts `truncate --partial` may cut ([`Rules::text_locations`]);
//! - tool outputs that are neither a string nor parts (a Responses shell call's list of `stdout`,
//!   `stderr` and `outcome`): where their text is and how the run ended
//!   ([`Rules::output_fields`]), and the shape a cleared one keeps ([`Rules::cleared_output`],
//!   [`Rules::cleared_text`]); which call arguments `prune --clear-inputs` may empty is read with
//!   each call ([`Call::empty`]);
//! - what `check` finds that only it knows ([`Rules::role_problem`], [`Rules::check_calls`],
//!   [`Rules::check_part`], [`Rules::result_id_at`]).
//!
//! Defaults cover chat-shaped messages (`{"role", "content"}` with a string or a list of parts).
//! Registering a dialect is a variant of [`Dialect`] (its doc comment is its `--format` help), a
//! line in the `rules!` macro and an entry in [`Dialect::ALL`]; no operation changes. A dialect
//! whose messages are not all chat-shaped (the Responses API's `input` items, [`responses`])
//! also says which elements are messages ([`Rules::is_message`]), gives the readers a chat view
//! ([`Rules::chat_view`]), and has its non-message items measured by [`item_measure`];
//! [`crate::document::Document::parse`] knows where its body keeps them (`input`).

pub mod anthropic;
mod message;
pub mod openai;
pub mod pointer;
pub mod responses;

use std::borrow::Cow;

use serde_json::{Map, Value, json};

pub use message::{Call, CallRef, EmptyArgs, Message, Role, ToolResult};
pub use responses::{ItemMeasure, item_measure};

/// The API a document is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Dialect {
    /// OpenAI Chat Completions (and the many servers that speak it).
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses (`input` items; counts are estimates).
    Responses,
}

/// Runs `$body` with `$r` naming the [`Rules`] of `$dialect`: the one place each dialect is
/// registered.
macro_rules! rules {
    ($dialect:expr, $r:ident => $body:expr) => {
        match $dialect {
            Dialect::Openai => {
                use openai::Chat as $r;
                $body
            }
            Dialect::Anthropic => {
                use anthropic::Messages as $r;
                $body
            }
            Dialect::Responses => {
                use responses::Responses as $r;
                $body
            }
        }
    };
}

impl Dialect {
    /// Every dialect, in the order detection prefers them on a tie.
    pub const ALL: [Dialect; 3] = [Dialect::Openai, Dialect::Anthropic, Dialect::Responses];
    /// What a document without any dialect's structure is read as (plain text messages).
    pub const DEFAULT: Dialect = Dialect::Openai;

    fn index(self) -> usize {
        self as usize
    }

    /// The dialect's name as ctx prints it (and `--format` takes it).
    pub fn name(self) -> &'static str {
        rules!(self, R => R::NAME)
    }

    /// The dialect's name in a sentence.
    pub fn title(self) -> &'static str {
        rules!(self, R => R::TITLE)
    }

    /// The provider whose API this is, as the model table names it (`openai`, `anthropic`).
    pub fn provider(self) -> &'static str {
        rules!(self, R => R::PROVIDER)
    }

    /// What one element of a message's content is called (`content part`, `content block`).
    pub fn part_noun(self) -> &'static str {
        rules!(self, R => R::PART_NOUN)
    }

    /// Whether ctx reproduces the provider's counts for this dialect (with an exact model).
    pub fn exact_counts(self) -> bool {
        rules!(self, R => R::EXACT_COUNTS)
    }

    /// The role of a system message inside the messages, when the dialect has one.
    pub fn system_role(self) -> Option<&'static str> {
        rules!(self, R => R::SYSTEM_ROLE)
    }

    /// The body key of a system prompt kept outside the messages, when the dialect has one.
    pub fn system_key(self) -> Option<&'static str> {
        rules!(self, R => R::SYSTEM_KEY)
    }

    /// The role of a note or summary that ctx adds: the system role where the dialect has one
    /// inside the messages, else `user`.
    pub fn note_role(self) -> &'static str {
        self.system_role().unwrap_or("user")
    }

    /// What `check` calls a tool result without the id of its call.
    pub fn result_without_id(self) -> &'static str {
        rules!(self, R => R::RESULT_WITHOUT_ID)
    }

    /// This dialect's entry for a part or block type.
    #[inline]
    pub fn part(self, ty: &str) -> Option<&'static Part> {
        rules!(self, R => R::part(ty))
    }

    /// Reads one message.
    pub fn read_message(self, m: &Value) -> Message {
        rules!(self, R => R::read_message(m))
    }

    /// The end of the tool exchange that starts at message `i`, if one does.
    pub fn exchange_end(self, msgs: &[Message], i: usize) -> Option<usize> {
        rules!(self, R => R::exchange_end(msgs, i))
    }

    /// True when [`Dialect::drop_reasoning`] would change `m`.
    pub fn has_reasoning(self, m: &Value) -> bool {
        rules!(self, R => R::has_reasoning(m))
    }

    /// Removes reasoning from an assistant message; false when there was none to remove.
    pub fn drop_reasoning(self, m: &mut Value) -> bool {
        rules!(self, R => R::drop_reasoning(m))
    }

    /// A plain text message in `role`.
    pub fn text_message(self, role: &str, text: &str) -> Value {
        rules!(self, R => R::text_message(role, text))
    }

    /// Pointers to the texts `truncate --partial` may cut in a message, and whether each is a
    /// tool result's.
    pub fn text_locations(self, m: &Value) -> Vec<(String, bool)> {
        rules!(self, R => R::text_locations(m))
    }

    /// What the reader of a part of kind `part` counts (see [`Measure`]).
    pub fn measure<'a>(self, p: &'a Value, part: &Part) -> Measure<'a> {
        rules!(self, R => R::measure(p, part))
    }

    /// What a part of kind `part` holds (see [`Piece`]).
    pub fn piece<'a>(self, p: &'a Value, part: &Part) -> Piece<'a> {
        rules!(self, R => R::piece(p, part))
    }

    /// The tool calls a message makes outside its content parts.
    pub fn message_calls<'a>(self, m: &'a Value, out: &mut Vec<CallView<'a>>) {
        rules!(self, R => R::message_calls(m, out))
    }

    /// A role that is known but not accepted inside this dialect's messages.
    pub fn role_problem(self, role: &Role) -> Option<Problem> {
        rules!(self, R => R::role_problem(role))
    }

    /// Problems of the tool calls written outside the content.
    pub fn check_calls(self, m: &Value, out: &mut Vec<Problem>) {
        rules!(self, R => R::check_calls(m, out))
    }

    /// A problem of one part, of kind `part`, in this dialect's shape.
    pub fn check_part(self, p: &Value, part: &Part) -> Option<Problem> {
        rules!(self, R => R::check_part(p, part))
    }

    /// Whether an element of the messages is a message (with a role and content), not another
    /// kind of item (a Responses call, output, reasoning, ...).
    pub fn is_message(self, m: &Value) -> bool {
        rules!(self, R => R::is_message(m))
    }

    /// The messages as chat messages, one for one, when they are of another shape (see
    /// [`Rules::chat_view`]).
    pub fn chat_view(self, messages: &[Value]) -> Option<Vec<Value>> {
        rules!(self, R => R::chat_view(messages))
    }

    /// Where `check` points at a result whose id matches no call.
    pub fn result_id_at(self, r: &ToolResult) -> String {
        rules!(self, R => R::result_id_at(r))
    }

    /// A tool output whose text is held in fields of its own (see [`Rules::output_fields`]).
    pub fn output_fields(self, output: &Value) -> Option<OutputFields> {
        rules!(self, R => R::output_fields(output))
    }

    /// `output` cleared to `text`, in the shape its API requires (see
    /// [`Rules::cleared_output`]).
    pub fn cleared_output(self, output: &Value, text: String) -> Value {
        rules!(self, R => R::cleared_output(output, text))
    }

    /// The text of an output that may be a cleared one (see [`Rules::cleared_text`]).
    pub fn cleared_text(self, output: &Value) -> Option<&str> {
        rules!(self, R => R::cleared_text(output))
    }

    fn mark_body(self, body: &Map<String, Value>, mark: &mut dyn FnMut(Mark, Loc)) {
        rules!(self, R => R::mark_body(body, mark))
    }

    fn mark_message(self, m: &Value, mark: &mut dyn FnMut(Mark, Loc)) {
        rules!(self, R => R::mark_message(m, mark))
    }
}

/// What a dialect module provides (see the module documentation). Implemented by one unit
/// struct per dialect; only [`Dialect`] calls it.
pub trait Rules {
    /// The `--format` value and the name in reports.
    const NAME: &'static str;
    /// The name in a sentence.
    const TITLE: &'static str;
    /// The provider, as the model table names it.
    const PROVIDER: &'static str;
    /// What one element of a message's content is called.
    const PART_NOUN: &'static str;
    /// Whether ctx reproduces the provider's counts (with an exact model).
    const EXACT_COUNTS: bool;
    /// The role of a system message inside the messages, if any.
    const SYSTEM_ROLE: Option<&'static str>;
    /// The body key of a system prompt outside the messages, if any.
    const SYSTEM_KEY: Option<&'static str>;
    /// What `check` calls a tool result without an id.
    const RESULT_WITHOUT_ID: &'static str;
    /// Every part or block type the dialect knows.
    const PARTS: &'static [Part];

    /// The entry of a part type (a table lookup; a dialect with type families overrides it).
    #[inline]
    fn part(ty: &str) -> Option<&'static Part> {
        Self::PARTS.iter().find(|p| p.ty == ty)
    }

    /// Calls `mark` for each body key that shows the dialect (pointers from the body).
    fn mark_body(body: &Map<String, Value>, mark: &mut dyn FnMut(Mark, Loc));

    /// Calls `mark` for each place in a message that shows the dialect (pointers from the
    /// message), parts included ([`mark_parts`] does it from the part table).
    fn mark_message(m: &Value, mark: &mut dyn FnMut(Mark, Loc));

    /// Reads one message: role, calls, results (`unit` is left 0).
    fn read_message(m: &Value) -> Message;

    /// The end (exclusive) of the tool exchange that starts at message `i`, if one does: the
    /// messages kept or removed together with `i` (not for system messages, which are units of
    /// their own).
    fn exchange_end(msgs: &[Message], i: usize) -> Option<usize>;

    /// The tool calls a message makes outside its content parts, in order.
    fn message_calls<'a>(m: &'a Value, out: &mut Vec<CallView<'a>>);

    /// What the counter counts of a part of this dialect.
    fn measure<'a>(p: &'a Value, part: &Part) -> Measure<'a>;

    /// What a part of this dialect holds, for the readers of text, calls and results.
    fn piece<'a>(p: &'a Value, part: &Part) -> Piece<'a>;

    /// True when [`Rules::drop_reasoning`] would change the message.
    fn has_reasoning(m: &Value) -> bool;

    /// Removes reasoning from an assistant message (never all of its content); false when there
    /// was none to remove.
    fn drop_reasoning(m: &mut Value) -> bool;

    /// A plain text message (a summary, a note).
    fn text_message(role: &str, text: &str) -> Value {
        json!({"role": role, "content": text})
    }

    /// Pointers to the texts `truncate --partial` may cut, and whether each is a tool result's.
    /// Never arguments, reasoning, signatures or images.
    fn text_locations(m: &Value) -> Vec<(String, bool)> {
        chat_text_locations(m)
    }

    /// A known role the dialect does not accept inside its messages.
    fn role_problem(_role: &Role) -> Option<Problem> {
        None
    }

    /// Problems of the calls written outside the content (ids, names, arguments).
    fn check_calls(_m: &Value, _out: &mut Vec<Problem>) {}

    /// A problem of one part of this dialect, pointer relative to the part.
    fn check_part(_p: &Value, _part: &Part) -> Option<Problem> {
        None
    }

    /// Where `check` points at a result whose id matches no call (pointer in the message).
    fn result_id_at(r: &ToolResult) -> String;

    /// A tool output (the value at a result's `content`) whose text is held in fields of its
    /// own rather than in a string or content parts: where those texts are, and how the run
    /// ended when its structure says so. `None` (the default) for a string or parts.
    fn output_fields(_output: &Value) -> Option<OutputFields> {
        None
    }

    /// What `prune` writes in place of a tool output it clears: `text` in the shape the API
    /// requires of that output (the default: the string itself, which a string or a list of
    /// parts may become). It must be what [`Rules::cleared_text`] reads back.
    fn cleared_output(_output: &Value, text: String) -> Value {
        Value::String(text)
    }

    /// The text of an output in the shape [`Rules::cleared_output`] writes (a string, by
    /// default), so that a cleared output is known as one; `None` for any other output.
    fn cleared_text(output: &Value) -> Option<&str> {
        output.as_str()
    }

    /// Whether an element of the messages is a message (with a role and content).
    fn is_message(_m: &Value) -> bool {
        true
    }

    /// The messages as Chat Completions messages, one for one, for the readers that summarize
    /// a conversation, when they are of another shape (`None`: they are chat messages).
    fn chat_view(_messages: &[Value]) -> Option<Vec<Value>> {
        None
    }
}

/// One part or block type of a dialect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// The `type` value.
    pub ty: &'static str,
    pub kind: Kind,
    /// Whether it shows the dialect when a document is recognised.
    pub marks: Marks,
    /// Whether the dialect's API takes it in a message's content (`check` warns on the
    /// others): a type may be known, and counted, without being accepted there (a block that
    /// only occurs nested in another, a part of another API that clients send).
    pub accepted: bool,
}

impl Part {
    /// A table entry.
    pub const fn new(ty: &'static str, kind: Kind, marks: Marks, accepted: bool) -> Part {
        Part {
            ty,
            kind,
            marks,
            accepted,
        }
    }
}

/// What a part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Text the model reads.
    Text,
    /// A refusal's text.
    Refusal,
    /// An image given by its data or location.
    Image,
    /// Audio.
    Audio,
    /// A file, whose content cannot be read offline.
    File,
    /// A tool call the client runs and answers with a result.
    Call,
    /// A tool call the provider runs (its result comes with it).
    ServerCall,
    /// A tool result the client wrote.
    Result,
    /// A tool result the provider wrote.
    ServerResult,
    /// Reasoning text.
    Thinking,
    /// Reasoning the provider keeps encrypted.
    RedactedThinking,
    /// Anything else the model reads, counted by the text of its strings.
    ByText,
}

impl Kind {
    /// Reasoning of either form.
    pub fn is_reasoning(self) -> bool {
        matches!(self, Kind::Thinking | Kind::RedactedThinking)
    }
}

/// Whether a part type shows its dialect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marks {
    No,
    /// A tool call or result: decides the dialect, since it decides how calls pair.
    Tool,
    /// Other structure of the dialect.
    Other,
    /// Other structure, when the part has this field.
    OtherWith(&'static str),
}

/// The kind of marker found (see [`Markers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    Tool,
    Other,
}

/// Where a marker is, below the body or the message: `/key` or `/key/index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    Key(&'static str),
    Item(&'static str, usize),
}

impl Loc {
    fn pointer(self) -> String {
        match self {
            Loc::Key(k) => format!("/{k}"),
            Loc::Item(k, i) => format!("/{k}/{i}"),
        }
    }
}

/// What the counter counts of a part (read by the part's dialect).
#[derive(Clone, Copy, Debug)]
pub enum Measure<'a> {
    /// A text (none when the field is missing).
    Text(Option<&'a str>),
    /// An image, from its data when ctx can read it.
    Image {
        data: ImageData<'a>,
        detail: Option<&'a str>,
    },
    /// Audio data, base64.
    Audio(&'a str),
    /// A file, by its name.
    File(Option<&'a str>),
    /// A tool call's name and arguments.
    Call {
        name: Option<&'a str>,
        args: Option<&'a Value>,
        encoded: bool,
    },
    /// A tool result's output (a string or parts).
    Result(Option<&'a Value>),
    /// Opaque data, estimated from its length.
    Opaque(&'a str),
    /// Counted by the text of its strings.
    ByText,
}

/// Where an image's bytes are.
#[derive(Clone, Copy, Debug)]
pub enum ImageData<'a> {
    /// Base64 bytes.
    Base64(&'a str),
    /// A URL, perhaps a `data:` URL.
    Url(&'a str),
    /// Elsewhere (a file id, a remote source ctx does not read).
    Unknown,
}

/// A tool output whose text is held in fields of its own (a Responses `shell_call_output`: a
/// list of `stdout`, `stderr` and `outcome`), as [`Rules::output_fields`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputFields {
    /// Pointers, relative to the output, of the strings that hold its text, in order.
    pub texts: Vec<String>,
    /// How the run ended, when the output's structure says so.
    pub ended: Option<Ended>,
}

impl OutputFields {
    /// The output's text: its texts joined by line breaks.
    pub fn text(&self, output: &Value) -> String {
        self.texts
            .iter()
            .filter_map(|p| pointer::get(output, p).and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// How a tool's run ended, as an output's structure says it (a shell call's `outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this status.
    Exit(i64),
    /// It ran out of time.
    Timeout,
}

/// What a part holds, for the readers of text, calls and results (summaries, signals,
/// placeholders).
#[derive(Clone, Copy, Debug)]
pub enum Piece<'a> {
    /// A text part's text.
    Text(&'a str),
    /// An image.
    Image,
    /// A tool call written as a part.
    Call(CallView<'a>),
    /// A tool result the client wrote, as a part.
    Result {
        id: Option<&'a str>,
        content: Option<&'a Value>,
        is_error: bool,
    },
    /// Reasoning.
    Reasoning,
    /// Anything else.
    Other,
}

/// A tool call as the readers see it.
#[derive(Clone, Copy, Debug)]
pub struct CallView<'a> {
    pub id: Option<&'a str>,
    pub name: Option<&'a str>,
    pub args: Option<&'a Value>,
    /// The arguments are a JSON text in a string.
    pub encoded: bool,
    /// The provider runs it.
    pub server: bool,
}

/// Something `check` reports that a dialect module found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// An error (the provider would reject it), else a warning.
    pub error: bool,
    pub code: &'static str,
    /// Pointer, relative to what was checked.
    pub at: String,
    pub message: String,
}

/// The dialect and entry of a part type, in whichever dialect knows it (first in
/// [`Dialect::ALL`] order): the counter and the readers of text take every dialect's parts in
/// any document, so that nothing is undercounted or missed.
#[inline]
pub fn find_part(ty: &str) -> Option<(Dialect, &'static Part)> {
    Dialect::ALL
        .into_iter()
        .find_map(|d| d.part(ty).map(|p| (d, p)))
}

/// A part's type.
#[inline]
pub fn part_type(p: &Value) -> Option<&str> {
    p.field("type").and_then(Value::as_str)
}

/// What each element of a content list holds, with the element. A part of a type no dialect
/// knows is read as text when it has a string `text` (it is counted by its text, too).
pub fn pieces(parts: &[Value]) -> impl Iterator<Item = (&Value, Piece<'_>)> {
    parts.iter().map(|p| {
        let piece = match part_type(p).and_then(find_part) {
            Some((d, part)) => d.piece(p, part),
            None => str_field(p, "text").map_or(Piece::Other, Piece::Text),
        };
        (p, piece)
    })
}

/// The text of a content value: a string, or its text parts joined by line breaks (images as
/// `image` when given, other parts left out); empty for null, the JSON text of anything else.
pub fn text_of<'a>(content: &'a Value, image: Option<&'a str>) -> Cow<'a, str> {
    match content {
        Value::String(s) => Cow::Borrowed(s),
        Value::Array(parts) => Cow::Owned(
            pieces(parts)
                .filter_map(|(_, piece)| match piece {
                    Piece::Text(t) => Some(t),
                    Piece::Image => image,
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Value::Null => Cow::Borrowed(""),
        other => Cow::Owned(other.to_string()),
    }
}

/// The text of a content value made only of text: a string, or a non-empty list of text parts
/// (joined by line breaks); `None` for anything else.
pub fn text_only(content: &Value) -> Option<Cow<'_, str>> {
    match content {
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Array(parts) if !parts.is_empty() => {
            let texts: Option<Vec<&str>> = pieces(parts)
                .map(|(_, piece)| match piece {
                    Piece::Text(t) => Some(t),
                    _ => None,
                })
                .collect();
            texts.map(|t| Cow::Owned(t.join("\n")))
        }
        _ => None,
    }
}

/// Every tool call a message makes outside its content, in any dialect's shape.
pub fn message_calls(m: &Value) -> Vec<CallView<'_>> {
    let mut out = Vec::new();
    for d in Dialect::ALL {
        d.message_calls(m, &mut out);
    }
    out
}

/// Every tool call a message makes, in any dialect's shape: those outside the content, then
/// those among its parts.
pub fn calls(m: &Value) -> Vec<CallView<'_>> {
    let mut out = message_calls(m);
    if let Some(parts) = m.field("content").and_then(Value::as_array) {
        out.extend(pieces(parts).filter_map(|(_, piece)| match piece {
            Piece::Call(c) => Some(c),
            _ => None,
        }));
    }
    out
}

/// The field holding a chat message's reasoning text (DeepSeek, vLLM, OpenRouter):
/// dropped with reasoning in any dialect.
pub const REASONING_FIELD: &str = "reasoning_content";

/// Whether a message has a [`REASONING_FIELD`].
pub fn has_reasoning_field(m: &Value) -> bool {
    m.field(REASONING_FIELD).is_some()
}

/// Removes a message's [`REASONING_FIELD`]; false when it had none.
pub fn drop_reasoning_field(m: &mut Value) -> bool {
    m.as_object_mut()
        .is_some_and(|obj| obj.shift_remove(REASONING_FIELD).is_some())
}

/// Calls `mark` for each part of a chat message's `content` that `dialect`'s table marks.
pub fn mark_parts(dialect: Dialect, m: &Value, mark: &mut dyn FnMut(Mark, Loc)) {
    for (k, p) in items(m.field("content")) {
        let Some(part) = part_type(p).and_then(|ty| dialect.part(ty)) else {
            continue;
        };
        let kind = match part.marks {
            Marks::No => continue,
            Marks::Tool => Mark::Tool,
            Marks::Other => Mark::Other,
            Marks::OtherWith(field) if p.field(field).is_some() => Mark::Other,
            Marks::OtherWith(_) => continue,
        };
        mark(kind, Loc::Item("content", k));
    }
}

/// [`Rules::text_locations`] for chat messages: a string `content`, text parts, and the texts of
/// `tool_result` blocks' output.
fn chat_text_locations(m: &Value) -> Vec<(String, bool)> {
    let is_result_msg = matches!(Role::parse(m.field("role")), Role::Tool | Role::Function);
    let mut out = Vec::new();
    match m.field("content") {
        Some(Value::String(_)) => out.push(("/content".to_string(), is_result_msg)),
        Some(Value::Array(parts)) => {
            for (k, (_, piece)) in pieces(parts).enumerate() {
                match piece {
                    Piece::Text(_) => out.push((format!("/content/{k}/text"), is_result_msg)),
                    Piece::Result {
                        content: Some(Value::String(_)),
                        ..
                    } => out.push((format!("/content/{k}/content"), true)),
                    Piece::Result {
                        content: Some(Value::Array(blocks)),
                        ..
                    } => {
                        for (j, (_, piece)) in pieces(blocks).enumerate() {
                            if let Piece::Text(_) = piece {
                                out.push((format!("/content/{k}/content/{j}/text"), true));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    out
}

/// Where a document first shows each dialect's structure: body keys, then messages in order.
/// Tool markers (calls and results) are kept apart from the others: they decide how calls pair
/// with results, so a document whose tool markers belong to another dialect cannot be
/// rewritten safely.
#[derive(Clone, Debug, Default)]
pub struct Markers {
    slots: [Slots; Dialect::ALL.len()],
}

#[derive(Clone, Debug, Default)]
struct Slots {
    tool: Option<Marker>,
    other: Option<Marker>,
}

/// One structural marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    /// Its place in the document: 0 for body keys, else the message index + 1.
    pub order: usize,
    /// Pointer to it in the document.
    pub at: String,
}

impl Marker {
    /// The index of its message (`None` for a body key).
    pub fn message(&self) -> Option<usize> {
        self.order.checked_sub(1)
    }
}

/// A marker of another dialect than the one a document is read as.
#[derive(Clone, Copy, Debug)]
pub struct Foreign<'a> {
    pub dialect: Dialect,
    pub marker: &'a Marker,
    /// A tool call or result.
    pub tool: bool,
}

impl Markers {
    /// The markers of a document: its body (when it is one) and its messages, whose pointers
    /// `message_pointer` gives.
    pub fn find(
        body: Option<&Map<String, Value>>,
        messages: &[Value],
        message_pointer: impl Fn(usize) -> String,
    ) -> Markers {
        let mut out = Markers::default();
        fn first(slot: &mut Option<Marker>, order: usize, at: impl FnOnce() -> String) {
            if slot.is_none() {
                *slot = Some(Marker { order, at: at() });
            }
        }
        for d in Dialect::ALL {
            let slots = &mut out.slots[d.index()];
            if let Some(body) = body {
                d.mark_body(body, &mut |mark, loc| {
                    let slot = match mark {
                        Mark::Tool => &mut slots.tool,
                        Mark::Other => &mut slots.other,
                    };
                    first(slot, 0, || loc.pointer());
                });
            }
            for (i, m) in messages.iter().enumerate() {
                if slots.tool.is_some() && slots.other.is_some() {
                    break;
                }
                d.mark_message(m, &mut |mark, loc| {
                    let slot = match mark {
                        Mark::Tool => &mut slots.tool,
                        Mark::Other => &mut slots.other,
                    };
                    first(slot, i + 1, || {
                        format!("{}{}", message_pointer(i), loc.pointer())
                    });
                });
            }
        }
        out
    }

    /// The first tool marker of `d`.
    pub fn tool(&self, d: Dialect) -> Option<&Marker> {
        self.slots[d.index()].tool.as_ref()
    }

    /// The first other marker of `d`.
    pub fn other(&self, d: Dialect) -> Option<&Marker> {
        self.slots[d.index()].other.as_ref()
    }

    /// The dialect the markers show: tool calls and results decide first (the earliest, when
    /// dialects are mixed, which no API accepts); else another dialect's structure than the
    /// default's; else the default (plain text messages).
    pub fn detect(&self) -> Dialect {
        let tool = Dialect::ALL
            .into_iter()
            .filter_map(|d| self.tool(d).map(|m| (m.order, d)))
            .min_by_key(|&(order, _)| order);
        match tool {
            Some((_, d)) => d,
            None => Dialect::ALL
                .into_iter()
                .find(|&d| d != Dialect::DEFAULT && self.other(d).is_some())
                .unwrap_or(Dialect::DEFAULT),
        }
    }

    /// The first tool marker of a dialect other than `d`.
    pub fn foreign_tool(&self, d: Dialect) -> Option<(Dialect, &Marker)> {
        Dialect::ALL
            .into_iter()
            .filter(|&o| o != d)
            .filter_map(|o| self.tool(o).map(|m| (o, m)))
            .min_by_key(|(_, m)| m.order)
    }

    /// The first marker of a dialect other than `d`: a tool marker if there is one, else any.
    pub fn foreign(&self, d: Dialect) -> Option<Foreign<'_>> {
        if let Some((dialect, marker)) = self.foreign_tool(d) {
            return Some(Foreign {
                dialect,
                marker,
                tool: true,
            });
        }
        Dialect::ALL
            .into_iter()
            .filter(|&o| o != d)
            .filter_map(|o| self.other(o).map(|m| (o, m)))
            .min_by_key(|(_, m)| m.order)
            .map(|(dialect, marker)| Foreign {
                dialect,
                marker,
                tool: false,
            })
    }
}

/// Looking up an object's field by name, faster than `Value::get` for the small objects chat
/// messages are made of: with ctx's JSON maps (insertion-ordered, SipHash-keyed), comparing a
/// few keys costs less than hashing the one asked for.
pub trait Field {
    /// The value of field `key`, if `self` is an object that has it (as `Value::get`).
    fn field(&self, key: &str) -> Option<&Value>;
}

impl Field for Value {
    #[inline]
    fn field(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(map) if map.len() <= 8 => {
                map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
            }
            Value::Object(map) => map.get(key),
            _ => None,
        }
    }
}

/// A JSON value's kind, for error messages.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The elements of an array, with their indices (none when it is missing or not an array).
fn items(v: Option<&Value>) -> impl Iterator<Item = (usize, &Value)> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

/// A string field of a value.
#[inline]
fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.field(key).and_then(Value::as_str)
}

/// A string field as an owned id or name.
#[inline]
fn owned(v: &Value, key: &str) -> Option<String> {
    str_field(v, key).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANTHROPIC: Dialect = Dialect::Anthropic;
    const OPENAI: Dialect = Dialect::Openai;

    fn marks(d: Dialect, ty: &str) -> Option<Marks> {
        d.part(ty).map(|p| p.marks)
    }

    /// Each dialect's `--format` value is its name, and registration covers every variant.
    #[cfg(feature = "cli")]
    #[test]
    fn names_are_the_format_values() {
        for d in Dialect::ALL {
            let parsed = <Dialect as clap::ValueEnum>::from_str(d.name(), false);
            assert_eq!(parsed, Ok(d));
        }
        assert_eq!(
            <Dialect as clap::ValueEnum>::value_variants().len(),
            Dialect::ALL.len()
        );
    }

    /// The one part table serves what detection, check and counting each took from a list of
    /// their own.
    #[test]
    fn the_part_tables_hold_what_each_reader_needs() {
        // Detection: tool blocks decide; other structure marks.
        for ty in [
            "tool_use",
            "tool_result",
            "server_tool_use",
            "mcp_tool_use",
            "mcp_tool_result",
            "web_search_tool_result",
            "code_execution_tool_result",
        ] {
            assert_eq!(marks(ANTHROPIC, ty), Some(Marks::Tool), "{ty}");
        }
        for ty in [
            "thinking",
            "redacted_thinking",
            "document",
            "search_result",
            "container_upload",
        ] {
            assert_eq!(marks(ANTHROPIC, ty), Some(Marks::Other), "{ty}");
        }
        assert_eq!(marks(ANTHROPIC, "image"), Some(Marks::OtherWith("source")));
        for ty in ["image_url", "input_audio", "file"] {
            assert_eq!(marks(OPENAI, ty), Some(Marks::Other), "{ty}");
        }
        for (d, ty) in [
            (OPENAI, "text"),
            (OPENAI, "refusal"),
            (ANTHROPIC, "text"),
            (ANTHROPIC, "web_search_result"),
        ] {
            assert_eq!(marks(d, ty), Some(Marks::No), "{ty}");
        }
        // Check: the types each API takes in a message.
        let accepted = |d: Dialect| -> Vec<&str> {
            let mut v: Vec<&str> = rules!(d, R => R::PARTS)
                .iter()
                .filter(|p| p.accepted)
                .map(|p| p.ty)
                .collect();
            v.sort_unstable();
            v
        };
        assert_eq!(
            accepted(OPENAI),
            ["file", "image_url", "input_audio", "refusal", "text"]
        );
        assert_eq!(
            accepted(ANTHROPIC),
            [
                "container_upload",
                "document",
                "image",
                "mcp_tool_result",
                "mcp_tool_use",
                "redacted_thinking",
                "search_result",
                "server_tool_use",
                "text",
                "thinking",
                "tool_result",
                "tool_use"
            ]
        );
        assert!(
            ANTHROPIC
                .part("bash_code_execution_tool_result")
                .is_some_and(|p| p.accepted)
        );
        assert!(OPENAI.part("input_text").is_some_and(|p| !p.accepted));
        // Counting: what is counted by its text without a warning.
        for ty in [
            "document",
            "search_result",
            "container_upload",
            "web_search_result",
            "web_fetch_tool_result",
        ] {
            assert_eq!(
                find_part(ty).map(|(_, p)| p.kind),
                Some(Kind::ByText),
                "{ty}"
            );
        }
        assert!(find_part("hologram").is_none());
        assert!(find_part("").is_none());
    }

    #[test]
    fn text_is_read_from_text_parts() {
        let content = json!([
            {"type": "text", "text": "a"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            {"type": "thinking", "thinking": "hidden"},
            {"type": "text", "text": "b"}
        ]);
        assert_eq!(text_of(&content, None), "a\nb");
        assert_eq!(text_of(&content, Some("[image]")), "a\n[image]\nb");
        assert_eq!(text_of(&json!("s"), None), "s");
        assert_eq!(text_of(&Value::Null, None), "");
        assert_eq!(text_only(&content), None);
        assert_eq!(
            text_only(&json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]))
                .as_deref(),
            Some("a\nb")
        );
        assert_eq!(text_only(&json!([])), None);
        // A part no dialect knows is read by its text, as it is counted; a bare string is no part.
        let odd = json!([{"type": "output_text", "text": "c"}, {"text": "d"}, "e", 7]);
        assert_eq!(text_of(&odd, None), "c\nd");
    }

    #[test]
    fn calls_are_read_in_either_shape() {
        let m = json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "ls", "input": {"dir": "."}},
            {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}
        ], "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}, 3]});
        let seen: Vec<(Option<&str>, bool, bool)> = calls(&m)
            .iter()
            .map(|c| (c.name, c.encoded, c.server))
            .collect();
        assert_eq!(
            seen,
            [
                (Some("f"), true, false),
                (Some("ls"), false, false),
                (Some("web_search"), false, true)
            ]
        );
    }

    #[test]
    fn reasoning_is_dropped_but_never_all_of_a_message() {
        let mut m = json!({"role": "assistant", "reasoning_content": "r", "content": [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "redacted_thinking", "data": "d"},
            {"type": "text", "text": "answer"}
        ]});
        assert!(OPENAI.has_reasoning(&m) && ANTHROPIC.has_reasoning(&m));
        assert!(ANTHROPIC.drop_reasoning(&mut m));
        assert_eq!(
            m,
            json!({"role": "assistant", "content": [{"type": "text", "text": "answer"}]})
        );
        assert!(!ANTHROPIC.has_reasoning(&m) && !ANTHROPIC.drop_reasoning(&mut m));
        let only = json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]});
        assert!(!ANTHROPIC.has_reasoning(&only));
    }

    #[test]
    fn messages_are_read_with_pointers() {
        let m = json!({"role": "assistant", "tool_calls": [
            {"id": "c", "function": {"name": "f", "arguments": "{}"}}]});
        let read = OPENAI.read_message(&m);
        assert_eq!(read.calls[0].at, "/tool_calls/0");
        assert_eq!(read.calls[0].args, "/tool_calls/0/function/arguments");
        let m = json!({"role": "user", "content": [
            {"type": "text", "text": "and"},
            {"type": "tool_result", "tool_use_id": "t", "content": "out"},
            {"type": "tool_result", "tool_use_id": "u"}]});
        let read = ANTHROPIC.read_message(&m);
        assert_eq!(read.results[0].at, "/content/1");
        assert_eq!(
            read.results[0].content.as_deref(),
            Some("/content/1/content")
        );
        assert_eq!(read.results[1].content, None);
        assert!(!read.only_results);
        assert_eq!(
            pointer::get(&m, read.results[0].content.as_deref().unwrap()),
            Some(&json!("out"))
        );
    }

    #[test]
    fn notes_take_the_system_role_where_there_is_one() {
        assert_eq!(
            OPENAI.text_message(OPENAI.note_role(), "n"),
            json!({"role": "system", "content": "n"})
        );
        assert_eq!(ANTHROPIC.note_role(), "user");
        assert_eq!(ANTHROPIC.system_key(), Some("system"));
    }
}
