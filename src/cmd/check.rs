//! `ctx check`: structural validation of a conversation for its dialect.
//!
//! Reports errors (what the provider would reject: orphan results, unanswered calls, duplicate
//! ids in one exchange, results without ids, bad `arguments`, missing roles, tool calls or
//! results written in the other dialect) and warnings (what is legal but unusual: unknown roles
//! and part types, ids reused by a later exchange, other structure of the other dialect). It uses
//! the same positional pairing as every other command ([`crate::conversation`]).

use std::collections::{HashMap, HashSet};

#[cfg(feature = "cli")]
use anyhow::Result;
use serde_json::Value;
#[cfg(feature = "cli")]
use serde_json::json;

#[cfg(feature = "cli")]
use super::{Env, InputArgs, Outcome, OutputArgs};
use crate::conversation::{Conversation, Role, UnitKind};
use crate::document::{Dialect, Document, kind, missing_role_hint};
#[cfg(feature = "cli")]
use crate::input::Origin;
#[cfg(feature = "cli")]
use crate::output::render;
use crate::settings::Settings;

/// Validate the structure of each conversation.
///
/// Writes a JSON array of findings per document: severity (error or warning), a code, the
/// message index, a jq-style path and an explanation. Errors are what the provider would reject;
/// warnings are legal but unusual. A tool call in the final message is a loop in progress, not
/// an unanswered call.
///
/// Example:
///   ctx check session.json | jq '.[] | select(.severity == "error")'
///
/// Exit codes: 0 no errors (warnings allowed); 1 errors found; 2 bad input or flags.
#[cfg(feature = "cli")]
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    /// Accepted for compatibility and ignored: the dialect is read from the document's
    /// structure (--format forces it).
    #[arg(short = 'm', long, value_name = "NAME", hide = true)]
    pub model: Option<String>,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Severity {
    /// The API would reject the request (`check` exits 1).
    Error,
    /// The API accepts it, but something is likely wrong.
    Warning,
}

/// One problem found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// A stable identifier (`orphan-result`, `unanswered-call`, ...).
    pub code: &'static str,
    /// The message index, when the finding is about one message.
    pub index: Option<usize>,
    /// jq-style path of the offending value.
    pub path: String,
    /// What is wrong, in words.
    pub message: String,
}

#[cfg(feature = "cli")]
impl Finding {
    fn to_json(&self) -> Value {
        json!({
            "severity": match self.severity { Severity::Error => "error", Severity::Warning => "warning" },
            "code": self.code,
            "index": self.index,
            "path": self.path,
            "message": self.message,
        })
    }
}

/// Runs `check` over documents.
#[cfg(feature = "cli")]
pub struct Runner<'a> {
    args: &'a Args,
}

#[cfg(feature = "cli")]
impl<'a> Runner<'a> {
    /// A runner for these flags (nothing in the environment changes what check finds).
    pub fn new(args: &'a Args, _env: &'a Env) -> Runner<'a> {
        Runner { args }
    }

    /// Checks one document.
    pub fn process(&self, _origin: &Origin, value: Value) -> Result<Outcome> {
        let doc = Document::parse(value, self.args.input.format)?;
        let findings = check(&doc);
        let errors = findings.iter().any(|f| f.severity == Severity::Error);
        let list = Value::Array(findings.iter().map(Finding::to_json).collect());
        Ok(Outcome {
            stdout: render(&list, self.args.output.compact),
            code: if errors {
                super::Exit::CheckFailed
            } else {
                super::Exit::Success
            },
            warnings: Vec::new(),
            ..Outcome::default()
        })
    }
}

const OPENAI_ROLES: &[&str] = &[
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];
const OPENAI_PARTS: &[&str] = &["text", "image_url", "input_audio", "file", "refusal"];
const ANTHROPIC_BLOCKS: &[&str] = &[
    "text",
    "image",
    "document",
    "search_result",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
];

/// Every finding for a document, in message order.
pub fn check(doc: &Document) -> Vec<Finding> {
    let convo = Conversation::new(doc.messages(), doc.dialect);
    let msgs = doc.messages();
    let mut out = Vec::new();
    let at = |i: usize, rel: &str| format!("{}{rel}", doc.message_path(i));
    let last = msgs.len().saturating_sub(1);
    let mut first_use: HashMap<String, usize> = HashMap::new();
    if let Some((index, path, is_tool)) = doc.foreign_marker() {
        let (read_as, other) = (doc.dialect.title(), doc.dialect.other().title());
        out.push(Finding {
            // Tool calls and results in the other dialect cannot be paired (and no API accepts
            // them); other structure of the other dialect is only unusual.
            severity: if is_tool {
                Severity::Error
            } else {
                Severity::Warning
            },
            code: "mixed-dialect",
            index,
            path: path.to_string(),
            message: format!(
                "{other} {} in a document read as {read_as}; no API accepts both",
                if is_tool {
                    "tool calls or results"
                } else {
                    "structure"
                }
            ),
        });
    }

    for (i, (m, info)) in msgs.iter().zip(&convo.messages).enumerate() {
        let mut push = |severity, code, rel: &str, message: String| {
            out.push(Finding {
                severity,
                code,
                index: Some(i),
                path: at(i, rel),
                message,
            });
        };
        // Roles.
        match &info.role {
            Role::Missing => push(
                Severity::Error,
                "missing-role",
                "",
                match m.get("role") {
                    None => format!("message has no `role`{}", missing_role_hint(m)),
                    Some(r) => format!("role must be a string, found {}", kind(r)),
                },
            ),
            Role::Other(r) => push(
                Severity::Warning,
                "unknown-role",
                ".role",
                format!("unknown role '{r}'"),
            ),
            r if doc.dialect == Dialect::Anthropic
                && !matches!(r, Role::User | Role::Assistant) =>
            {
                if r.is_system() {
                    push(
                        Severity::Warning,
                        "system-in-messages",
                        ".role",
                        format!(
                            "role '{}' inside messages (Anthropic takes `system` at the top level)",
                            r.name()
                        ),
                    )
                } else {
                    push(
                        Severity::Warning,
                        "unknown-role",
                        ".role",
                        format!("role '{}' in an Anthropic conversation", r.name()),
                    )
                }
            }
            r if doc.dialect == Dialect::Openai && !OPENAI_ROLES.contains(&r.name()) => push(
                Severity::Warning,
                "unknown-role",
                ".role",
                format!("unknown role '{}'", r.name()),
            ),
            _ => {}
        }
        // Content and parts.
        match m.get("content") {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(Value::Array(parts)) => {
                for (k, p) in parts.iter().enumerate() {
                    let rel = format!(".content[{k}]");
                    let Some(ty) = p.get("type").and_then(Value::as_str) else {
                        push(
                            Severity::Error,
                            "part-without-type",
                            &rel,
                            "content part has no type".into(),
                        );
                        continue;
                    };
                    let known = match doc.dialect {
                        Dialect::Openai => OPENAI_PARTS.contains(&ty),
                        Dialect::Anthropic => {
                            ANTHROPIC_BLOCKS.contains(&ty) || ty.ends_with("_tool_result")
                        }
                    };
                    if !known {
                        push(
                            Severity::Warning,
                            "unknown-part-type",
                            &rel,
                            format!(
                                "unknown content part type '{ty}' (kept and counted by its text)"
                            ),
                        );
                    }
                    if ty == "input_audio" && !Settings::accepts_audio(doc.body_model()) {
                        push(
                            Severity::Warning,
                            "audio-part",
                            &rel,
                            "input_audio parts are accepted only by audio models (gpt-4o-audio-preview, gpt-audio, ...)".into(),
                        );
                    }
                    if ty == "image_url" {
                        let url = p
                            .get("image_url")
                            .and_then(|u| u.get("url").or(Some(u)))
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        if !(url.starts_with("http://")
                            || url.starts_with("https://")
                            || url.starts_with("data:"))
                        {
                            push(
                                Severity::Warning,
                                "image-url",
                                &format!("{rel}.image_url.url"),
                                "image url is neither http(s) nor a data: URL".into(),
                            );
                        }
                    }
                    if ty == "tool_use" {
                        match p.get("input") {
                            Some(Value::Object(_)) => {}
                            other => push(
                                Severity::Error,
                                "invalid-arguments",
                                &format!("{rel}.input"),
                                format!(
                                    "tool_use input must be a JSON object, found {}",
                                    other.map_or("nothing", kind)
                                ),
                            ),
                        }
                    }
                }
            }
            Some(other) => push(
                Severity::Error,
                "invalid-content",
                ".content",
                format!(
                    "content must be a string, null or an array of parts, found {}",
                    kind(other)
                ),
            ),
        }
        // Calls: ids and arguments.
        if doc.dialect == Dialect::Openai {
            if let Some(tc) = m.get("tool_calls").filter(|v| !v.is_null()) {
                if !tc.is_array() {
                    push(
                        Severity::Error,
                        "invalid-tool-calls",
                        ".tool_calls",
                        format!("tool_calls must be an array, found {}", kind(tc)),
                    );
                }
            }
            for (k, c) in m
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let rel = format!(".tool_calls[{k}]");
                if c.get("id").and_then(Value::as_str).is_none() {
                    push(
                        Severity::Error,
                        "missing-call-id",
                        &rel,
                        "tool call has no id".into(),
                    );
                }
                let f = c.get("function");
                if f.and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .is_none()
                {
                    push(
                        Severity::Error,
                        "missing-tool-name",
                        &format!("{rel}.function.name"),
                        "tool call has no function name".into(),
                    );
                }
                check_arguments(
                    f.and_then(|f| f.get("arguments")),
                    &format!("{rel}.function.arguments"),
                    &mut push,
                );
            }
            if let Some(fc) = m.get("function_call").filter(|f| f.is_object()) {
                check_arguments(fc.get("arguments"), ".function_call.arguments", &mut push);
            }
        }
        // Duplicate ids within one exchange, reuse across exchanges.
        let mut seen: HashSet<&str> = HashSet::new();
        for c in &info.calls {
            let Some(id) = c.id.as_deref() else { continue };
            if !seen.insert(id) {
                push(
                    Severity::Error,
                    "duplicate-call-id",
                    &c.path,
                    format!("call id '{id}' is used twice in one message"),
                );
            }
            match first_use.get(id) {
                Some(&first) if first != i => push(
                    Severity::Warning,
                    "reused-call-id",
                    &c.path,
                    format!("call id '{id}' reused (first used by message {first})"),
                ),
                Some(_) => {}
                None => {
                    first_use.insert(id.to_string(), i);
                }
            }
        }
        // Results: ids and pairing.
        let in_exchange = convo.units[info.unit].kind == UnitKind::ToolExchange;
        for r in &info.results {
            let rel = if r.path.is_empty() {
                String::new()
            } else {
                r.path.clone()
            };
            if r.id.is_none() && !r.legacy {
                let what = if doc.dialect == Dialect::Openai {
                    "tool message without tool_call_id"
                } else {
                    "tool_result without tool_use_id"
                };
                let hint = if m.get("tool_call_ids").is_some() {
                    " (`tool_call_ids` is not an API field)"
                } else {
                    ""
                };
                push(
                    Severity::Error,
                    "missing-result-id",
                    &rel,
                    format!("{what}{hint}"),
                );
                if !in_exchange {
                    push(
                        Severity::Error,
                        "orphan-result",
                        &rel,
                        "tool result does not follow an assistant message with tool calls".into(),
                    );
                }
                continue;
            }
            if r.answers.is_none() {
                let id =
                    r.id.as_deref()
                        .map_or("(legacy function)".to_string(), |s| format!("'{s}'"));
                let why = if in_exchange {
                    "matches no unanswered call of the preceding assistant message".to_string()
                } else {
                    "does not follow an assistant message with tool calls".to_string()
                };
                let rel = if doc.dialect == Dialect::Openai && !r.legacy {
                    format!("{rel}.tool_call_id")
                } else {
                    rel
                };
                push(
                    Severity::Error,
                    "orphan-result",
                    &rel,
                    format!("tool result {id} {why}"),
                );
            }
        }
    }
    // Unanswered calls (except in the final message: a loop in progress).
    for unit in convo
        .units
        .iter()
        .filter(|u| u.kind == UnitKind::ToolExchange)
    {
        let mut answered = HashSet::new();
        for m in unit.range() {
            for r in &convo.messages[m].results {
                if let Some(c) = r.answers {
                    answered.insert((c.message, c.call));
                }
            }
        }
        for m in unit.range() {
            if m == last {
                continue;
            }
            for (k, c) in convo.messages[m].calls.iter().enumerate() {
                if !answered.contains(&(m, k)) {
                    let name = c.name.as_deref().unwrap_or("?");
                    let id =
                        c.id.as_deref()
                            .map_or(String::new(), |id| format!(" '{id}'"));
                    out.push(Finding {
                        severity: Severity::Error,
                        code: "unanswered-call",
                        index: Some(m),
                        path: at(m, &c.path),
                        message: format!("tool call{id} ({name}) is never answered"),
                    });
                }
            }
        }
    }
    out.sort_by_key(|f| (f.index, f.severity));
    out
}

/// Errors for `arguments` that are not a JSON string holding a JSON object.
fn check_arguments(
    args: Option<&Value>,
    rel: &str,
    push: &mut impl FnMut(Severity, &'static str, &str, String),
) {
    match args {
        None => push(
            Severity::Error,
            "invalid-arguments",
            rel,
            "tool call has no arguments".into(),
        ),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(_)) => {}
            Ok(Value::String(_)) => push(
                Severity::Error,
                "invalid-arguments",
                rel,
                "arguments decode to a string, not an object (double-encoded?)".into(),
            ),
            Ok(other) => push(
                Severity::Error,
                "invalid-arguments",
                rel,
                format!("arguments decode to {}, not an object", kind(&other)),
            ),
            Err(e) => push(
                Severity::Error,
                "invalid-arguments",
                rel,
                format!("arguments are not valid JSON: {e}"),
            ),
        },
        Some(other) => push(
            Severity::Error,
            "invalid-arguments",
            rel,
            format!("arguments must be a JSON string, found {}", kind(other)),
        ),
    }
}
