//! One message as its dialect reads it: its role, the tool calls it makes and the tool results
//! it carries, each with the JSON pointers (relative to the message) of where it lives.
//! [`crate::conversation`] groups messages into units and pairs results with calls.

use serde_json::Value;

/// A message's role as ctx understands it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
    Function,
    /// A role ctx does not know; kept as written.
    Other(String),
    /// No `role` key, or one that is not a string.
    Missing,
}

impl Role {
    /// The role of a message's `role` value.
    pub fn parse(v: Option<&Value>) -> Role {
        match v.and_then(Value::as_str) {
            Some("system") => Role::System,
            Some("developer") => Role::Developer,
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("tool") => Role::Tool,
            Some("function") => Role::Function,
            Some(other) => Role::Other(other.to_string()),
            None => Role::Missing,
        }
    }

    /// The role's name as written (`"?"` when missing).
    pub fn name(&self) -> &str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Function => "function",
            Role::Other(s) => s,
            Role::Missing => "?",
        }
    }

    /// System and developer messages.
    pub fn is_system(&self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

/// A tool call made by an assistant message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The call id (`None` for legacy `function_call`, or when missing).
    pub id: Option<String>,
    /// The tool's name.
    pub name: Option<String>,
    /// Pointer to the call inside its message (`/tool_calls/0`, `/content/2`, `/function_call`).
    pub at: String,
    /// Pointer to its arguments inside its message (`/tool_calls/0/function/arguments`,
    /// `/content/2/input`); the value may be missing.
    pub args: String,
    /// The arguments are a JSON text in a string (OpenAI `arguments`), not a JSON value
    /// (Anthropic `input`): what they cost and how they read depends on it.
    pub encoded: bool,
    /// A legacy `function_call`.
    pub legacy: bool,
    /// What `prune --clear-inputs` may write over its arguments; `None` when its API requires
    /// what they hold (a Responses shell call's `action`, a patch's `operation`, a program's
    /// `code`).
    pub empty: Option<EmptyArgs>,
}

/// An empty value a call's API takes in place of its arguments (`prune --clear-inputs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmptyArgs {
    /// An empty JSON object in the arguments' own shape: the JSON text `{}` in a string (OpenAI
    /// `arguments`), `{}` itself otherwise (Anthropic `input`).
    Object,
    /// An empty string: free-form input (a Responses `custom_tool_call`'s `input`).
    Text,
}

/// Where a call is: message index and position in that message's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallRef {
    pub message: usize,
    pub call: usize,
}

/// A tool result carried by a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    /// The id of the call it answers (`tool_call_id` / `tool_use_id`), if given.
    pub id: Option<String>,
    /// A tool name written on the result itself (OpenAI `name`), if any.
    pub name: Option<String>,
    /// Pointer to the result inside its message (`""` for a whole `tool` message,
    /// `/content/2` for a block).
    pub at: String,
    /// Pointer to the value holding its output (`/content`, `/content/2/content`); `None` when
    /// the result has none (an Anthropic `tool_result` without `content`).
    pub content: Option<String>,
    /// Anthropic `is_error: true`.
    pub is_error: bool,
    /// A legacy `function` message.
    pub legacy: bool,
    /// The call this result answers, found positionally within its exchange (set by the
    /// conversation model).
    pub answers: Option<CallRef>,
}

/// One message, as the model sees it.
#[derive(Clone, Debug)]
pub struct Message {
    pub role: Role,
    pub calls: Vec<Call>,
    pub results: Vec<ToolResult>,
    /// True when the message carries tool results and nothing else.
    pub only_results: bool,
    /// An item that belongs to the turn of the items around it and is never a unit alone when
    /// the turn has more (a Responses `reasoning` item, a call the provider runs).
    pub joins: bool,
    /// An item ctx keeps as it is: opaque, or of an unknown effect when removed (a Responses
    /// `compaction`, `item_reference`, or an item type ctx does not know). Its unit is pinned.
    pub fixed: bool,
    /// A Responses `compaction` item: it stands for everything before it.
    pub compaction: bool,
    /// A Responses `reasoning` item: every response of a reasoning model starts with one, so it
    /// says where a model response starts (the calls after it, interleaved with their outputs,
    /// are its own until the next one).
    pub reasoning: bool,
    /// A control item without content (a Responses `compaction_trigger`, which must be last): no
    /// unit of its own (it belongs to the unit before it, at the start to the one after), pinned
    /// by itself without pinning that unit (it goes only with a unit that is removed whole), and
    /// not a message of the conversation for "the newest" or "the recent" messages.
    pub control: bool,
    /// A Responses `item_reference`: an item the server holds, a call among them. Outputs right
    /// after it may answer it: they make one tool exchange with it, which is not pinned (the
    /// reference goes only with them); a reference no output follows is `fixed`.
    pub reference: bool,
    /// Index of the unit holding this message (set by the conversation model; 0 as read).
    pub unit: usize,
}

impl Message {
    /// A message in `role` with nothing read yet.
    pub fn new(role: Role) -> Message {
        Message {
            role,
            calls: Vec::new(),
            results: Vec::new(),
            only_results: false,
            joins: false,
            fixed: false,
            compaction: false,
            reasoning: false,
            control: false,
            reference: false,
            unit: 0,
        }
    }
}
