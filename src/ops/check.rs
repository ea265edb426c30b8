//! `ctx check`: structural validation of a conversation for its dialect.
//!
//! Reports errors (what the provider would reject: orphan results, unanswered calls, duplicate
//! ids in one exchange, results without ids, bad `arguments`, missing roles, tool calls or
//! results written in another dialect) and warnings (what is legal but unusual: unknown roles
//! and part types, ids reused by a later exchange, other structure of another dialect). It uses
//! the same positional pairing as every other command ([`crate::conversation`]); what only one
//! dialect knows (its roles, part types, call shapes) its module says ([`crate::dialect`]).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::conversation::{CallRef, Conversation, Role, UnitKind};
use crate::dialect::{Kind, Problem, find_part, kind, pointer};
use crate::document::{Document, missing_role_hint};
use crate::settings::Settings;

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

/// Every finding for a document, in message order (within a message, errors first, then in
/// the order the checks below run).
pub fn check(doc: &Document) -> Vec<Finding> {
    let convo = Conversation::new(doc.messages(), doc.dialect);
    let mut out = Vec::new();
    mixed_dialect(doc, &mut out);
    roles(doc, &convo, &mut out);
    contents(doc, &mut out);
    calls(doc, &mut out);
    call_ids(doc, &convo, &mut out);
    results(doc, &convo, &mut out);
    unanswered_calls(doc, &convo, &mut out);
    lone_reasoning(doc, &convo, &mut out);
    out.sort_by_key(|f| (f.index, f.severity));
    out
}

/// The finding for `problem`, found in message `i` at `base` (a pointer in the message).
fn found(doc: &Document, i: usize, base: &str, problem: Problem) -> Finding {
    Finding {
        severity: if problem.error {
            Severity::Error
        } else {
            Severity::Warning
        },
        code: problem.code,
        index: Some(i),
        path: format!(
            "{}{}",
            doc.message_path(i),
            pointer::to_path(&format!("{base}{}", problem.at))
        ),
        message: problem.message,
    }
}

fn error(code: &'static str, at: &str, message: String) -> Problem {
    Problem {
        error: true,
        code,
        at: at.to_string(),
        message,
    }
}

fn warning(code: &'static str, at: &str, message: String) -> Problem {
    Problem {
        error: false,
        ..error(code, at, message)
    }
}

/// Another dialect's structure: its tool calls and results cannot be paired (and no API accepts
/// them), an error; other structure is only unusual.
fn mixed_dialect(doc: &Document, out: &mut Vec<Finding>) {
    let Some(foreign) = doc.foreign_marker() else {
        return;
    };
    out.push(Finding {
        severity: if foreign.tool {
            Severity::Error
        } else {
            Severity::Warning
        },
        code: "mixed-dialect",
        index: foreign.marker.message(),
        path: pointer::to_path(&foreign.marker.at),
        message: format!(
            "{} {} in a document read as {}; no API accepts both",
            foreign.dialect.title(),
            if foreign.tool {
                "tool calls or results"
            } else {
                "structure"
            },
            doc.dialect.title()
        ),
    });
}

/// Missing and unknown roles, and roles the dialect does not take in its messages.
fn roles(doc: &Document, convo: &Conversation, out: &mut Vec<Finding>) {
    for (i, (m, info)) in doc.messages().iter().zip(&convo.messages).enumerate() {
        if !doc.dialect.is_message(m) {
            continue;
        }
        let problem = match &info.role {
            Role::Missing => Some(error(
                "missing-role",
                "",
                match m.get("role") {
                    None => format!("message has no `role`{}", missing_role_hint(m)),
                    Some(r) => format!("role must be a string, found {}", kind(r)),
                },
            )),
            Role::Other(r) => Some(warning(
                "unknown-role",
                "/role",
                format!("unknown role '{r}'"),
            )),
            r => doc.dialect.role_problem(r),
        };
        out.extend(problem.map(|p| found(doc, i, "", p)));
    }
}

/// Content that is not a string, null or parts; parts without a type, of a type the dialect
/// does not take, or malformed for their type.
fn contents(doc: &Document, out: &mut Vec<Finding>) {
    for (i, m) in doc
        .messages()
        .iter()
        .enumerate()
        .filter(|(_, m)| doc.dialect.is_message(m))
    {
        match m.get("content") {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(Value::Array(parts)) => {
                for (k, p) in parts.iter().enumerate() {
                    let base = format!("/content/{k}");
                    out.extend(
                        part_problems(doc, p)
                            .into_iter()
                            .map(|problem| found(doc, i, &base, problem)),
                    );
                }
            }
            Some(other) => out.push(found(
                doc,
                i,
                "",
                error(
                    "invalid-content",
                    "/content",
                    format!(
                        "content must be a string, null or an array of parts, found {}",
                        kind(other)
                    ),
                ),
            )),
        }
    }
}

/// The problems of one content part.
fn part_problems(doc: &Document, p: &Value) -> Vec<Problem> {
    let Some(ty) = p.get("type").and_then(Value::as_str) else {
        return vec![error(
            "part-without-type",
            "",
            "content part has no type".into(),
        )];
    };
    let mut out = Vec::new();
    if !doc.dialect.part(ty).is_some_and(|part| part.accepted) {
        out.push(warning(
            "unknown-part-type",
            "",
            format!("unknown content part type '{ty}' (kept and counted by its text)"),
        ));
    }
    if let Some((owner, part)) = find_part(ty) {
        if part.kind == Kind::Audio && !Settings::accepts_audio(doc.body_model()) {
            out.push(warning(
                "audio-part",
                "",
                "input_audio parts are accepted only by audio models (gpt-4o-audio-preview, gpt-audio, ...)".into(),
            ));
        }
        out.extend(owner.check_part(p, part));
    }
    out
}

/// The dialect's checks of calls written outside the content (ids, names, arguments).
fn calls(doc: &Document, out: &mut Vec<Finding>) {
    let mut problems = Vec::new();
    for (i, m) in doc.messages().iter().enumerate() {
        doc.dialect.check_calls(m, &mut problems);
        out.extend(problems.drain(..).map(|p| found(doc, i, "", p)));
    }
}

/// Duplicate call ids within one message or one turn (Responses items: each call is an item of
/// its own), and ids reused by a later turn.
fn call_ids(doc: &Document, convo: &Conversation, out: &mut Vec<Finding>) {
    let mut first_use: HashMap<&str, usize> = HashMap::new();
    for (i, info) in convo.messages.iter().enumerate() {
        let mut seen: HashSet<&str> = HashSet::new();
        for c in &info.calls {
            let Some(id) = c.id.as_deref() else { continue };
            let twice = |where_: String| {
                error(
                    "duplicate-call-id",
                    &c.at,
                    format!("call id '{id}' is used twice in {where_}"),
                )
            };
            if !seen.insert(id) {
                out.push(found(doc, i, "", twice("one message".into())));
            }
            match first_use.get(id) {
                // One response's calls: the same unit, no output between them (after an output
                // the id answers positionally, as an id reused by a later response does).
                Some(&first)
                    if first != i
                        && convo.messages[first].unit == info.unit
                        && convo.messages[first..i]
                            .iter()
                            .all(|m| m.results.is_empty()) =>
                {
                    out.push(found(
                        doc,
                        i,
                        "",
                        twice(format!("one turn (first by message {first})")),
                    ))
                }
                Some(&first) if first != i => out.push(found(
                    doc,
                    i,
                    "",
                    warning(
                        "reused-call-id",
                        &c.at,
                        format!("call id '{id}' reused (first used by message {first})"),
                    ),
                )),
                Some(_) => {}
                None => {
                    first_use.insert(id, i);
                }
            }
        }
    }
}

/// Results without ids, and results that answer no call of their exchange.
fn results(doc: &Document, convo: &Conversation, out: &mut Vec<Finding>) {
    // In a body continuing server-held state, a result outside any exchange answers a call the
    // server holds.
    let server_calls = doc.server_state().is_some();
    for (i, (m, info)) in doc.messages().iter().zip(&convo.messages).enumerate() {
        let unit = &convo.units[info.unit];
        let in_exchange = unit.kind == UnitKind::ToolExchange;
        // An output after an item reference may answer the call it stands for.
        let referenced = unit.range().any(|k| convo.messages[k].reference);
        for r in &info.results {
            if r.id.is_none() && !r.legacy {
                let hint = if m.get("tool_call_ids").is_some() {
                    " (`tool_call_ids` is not an API field)"
                } else {
                    ""
                };
                let what = doc.dialect.result_without_id();
                out.push(found(
                    doc,
                    i,
                    "",
                    error("missing-result-id", &r.at, format!("{what}{hint}")),
                ));
                if !in_exchange {
                    out.push(found(
                        doc,
                        i,
                        "",
                        error(
                            "orphan-result",
                            &r.at,
                            "tool result does not follow an assistant message with tool calls"
                                .into(),
                        ),
                    ));
                }
                continue;
            }
            if r.answers.is_none() && !referenced && (in_exchange || !server_calls) {
                let id =
                    r.id.as_deref()
                        .map_or("(legacy function)".to_string(), |s| format!("'{s}'"));
                let why = if in_exchange {
                    "matches no unanswered call of the preceding assistant message"
                } else {
                    "does not follow an assistant message with tool calls"
                };
                out.push(found(
                    doc,
                    i,
                    "",
                    error(
                        "orphan-result",
                        &doc.dialect.result_id_at(r),
                        format!("tool result {id} {why}"),
                    ),
                ));
            }
        }
    }
}

/// Reasoning written as an item of its own (the Responses API) that is not followed by an item
/// of its turn (a call, an assistant message): the API takes reasoning only with the item it
/// led to, and rejects it alone.
fn lone_reasoning(doc: &Document, convo: &Conversation, out: &mut Vec<Finding>) {
    let msgs = doc.messages();
    for (i, m) in convo.messages.iter().enumerate() {
        if !m.joins || !doc.dialect.has_reasoning(&msgs[i]) {
            continue;
        }
        let followed = convo
            .messages
            .get(i + 1)
            .is_some_and(|next| next.role == Role::Assistant || next.reference);
        if !followed {
            out.push(found(
                doc,
                i,
                "",
                error(
                    "reasoning-without-item",
                    "",
                    "reasoning is not followed by the call or message it led to; the API rejects reasoning alone".into(),
                ),
            ));
        }
    }
}

/// Calls no result answers, except in the final message (a loop in progress).
fn unanswered_calls(doc: &Document, convo: &Conversation, out: &mut Vec<Finding>) {
    // The calls after the last result of the document are the loop in progress (one message
    // in a chat dialect, one item a call in the Responses API); control items after them
    // (a Responses `compaction_trigger`) are no messages of the conversation.
    let end = convo.last_message().map_or(0, |i| i + 1);
    let last = convo.messages[..end]
        .iter()
        .rposition(|m| !m.results.is_empty() || m.calls.is_empty())
        .map_or(0, |i| i + 1)
        .min(end.saturating_sub(1));
    for unit in convo
        .units
        .iter()
        .filter(|u| u.kind == UnitKind::ToolExchange)
    {
        let mut answered = HashSet::new();
        for m in unit.range() {
            for r in &convo.messages[m].results {
                if let Some(c) = r.answers {
                    answered.insert(c);
                }
            }
        }
        for m in unit.range() {
            if m >= last {
                continue;
            }
            for (k, c) in convo.messages[m].calls.iter().enumerate() {
                if !answered.contains(&CallRef {
                    message: m,
                    call: k,
                }) {
                    let name = c.name.as_deref().unwrap_or("?");
                    let id =
                        c.id.as_deref()
                            .map_or(String::new(), |id| format!(" '{id}'"));
                    out.push(found(
                        doc,
                        m,
                        "",
                        error(
                            "unanswered-call",
                            &c.at,
                            format!("tool call{id} ({name}) is never answered"),
                        ),
                    ));
                }
            }
        }
    }
}
