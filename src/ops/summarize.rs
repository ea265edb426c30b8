//! `ctx summarize`: replace older messages with one summary message (SPEC §4).
//!
//! Chooses the range (every unpinned message older than `--keep-recent`, extended back to a unit
//! boundary so no pair is split), decides whether a trigger holds, gets the summary text from an
//! engine (an OpenAI-compatible endpoint through [`crate::llm`], the offline
//! [`crate::extractive`] digest, or `--summary-file`), and places it with a header that later
//! runs recognise, so a running summary is extended with only the newly aged-out messages.

use std::borrow::Cow;

use anyhow::{Result, anyhow, bail};
use serde_json::{Value, json};

use super::{Dropped, SummarizerFailed};
use crate::clip::{clip_middle, thousands};
use crate::conversation::{Conversation, PinOptions, Role};
use crate::counter::{Counter, DocumentCount, Notes};
use crate::dialect::{Dialect, Field, Piece, pieces, text_of, text_only};
use crate::document::Document;
use crate::excerpt::excerpt;
use crate::llm::{ChatRequest, Endpoint};
use crate::tokenizer::Encoding;

/// The summary header; `{n}` is the cumulative number of messages summarized.
const HEADER_PREFIX: &str = "[ctx summary of ";
const HEADER_SUFFIX: &str = " earlier messages]";

/// The smallest bound a summary's text is attempted in: below it no summary says anything (a
/// clip marker alone takes about 12 tokens), so no engine is asked.
const MIN_SUMMARY_TOKENS: usize = 16;

/// The default instructions sent to the summarizer: the sections of SPEC §4 (task and intent,
/// what was done, current state, errors and decisions, what remains), asking for the trail of
/// commands, files and test outcomes by name, since that is what summaries lose first.
#[cfg(feature = "cli")]
pub const DEFAULT_PROMPT: &str = "You summarize the earlier part of a conversation between a user and an AI assistant (which may use tools) so that the assistant can continue the work from your summary alone, without the original messages. Write a concise, factual summary with these sections:\n1. Task and intent: what the user asked for and why, with any constraints they set.\n2. What was done: in order, the actions taken and the commands run (each command as written), the files created or edited (each path), and the tests run with their outcomes (passed or failed, and which).\n3. Current state: where the work stands, with the file paths, identifiers and values it depends on.\n4. Errors and decisions: the errors seen (error messages and exit statuses as written) and whether they were resolved; the decisions made and why.\n5. What remains: the steps still to be done, the next one first.\nKeep file paths, commands, identifiers and error messages exactly as written. Do not invent anything. Do not address the user. Output only the summary.";

/// What the user message of a request opens with when there are pinned messages: they stay in
/// the conversation, so the summary must not repeat them, but they say what the task is.
const CONTEXT_HEADING: &str = "Context (kept verbatim in the conversation; do not summarize it, use it only to understand the messages below):";
/// Before the running summary in an update.
const SUMMARY_HEADING: &str = "Summary so far:";
/// Before the transcript in an update.
const NEW_MESSAGES_HEADING: &str = "New messages since the summary so far:";
/// Before the transcript of a first summary.
const TRANSCRIPT_HEADING: &str = "Conversation to summarize:";

/// The instruction of an update: the running summary is extended, never rewritten from scratch
/// (rewrites lose facts), and shortened only when it outgrows `bound` tokens.
fn update_instruction(source: &str, bound: usize) -> String {
    format!(
        "Update the summary so far with {source}; do not rewrite it from scratch. Keep every item in it that is still true, in its section; add the new facts (actions and commands, files created or edited, tests run and their outcomes, errors, decisions, the current state and what remains); change only what {source} change or make obsolete. Shorten the summary only if it would otherwise exceed {bound} tokens. Output the whole updated summary."
    )
}

/// The most tokens of one pinned message sent as context (clipped middle-out).
const CONTEXT_MESSAGE_TOKENS: usize = 1000;
/// The most tokens of all the context: pinned messages past it are counted, not sent.
const CONTEXT_TOKENS: usize = 3000;
/// The most tokens of a message's text in the transcript (clipped middle-out).
const TEXT_TOKENS: usize = 2000;
/// A tool output up to this many tokens is sent whole; a longer one is clipped middle-out to
/// [`RESULT_KEEP_TOKENS`], with its status and its error and test-outcome lines.
const RESULT_TOKENS: usize = 200;
/// What is kept of the two ends of a long tool output.
const RESULT_KEEP_TOKENS: usize = 150;
/// The most tokens of one value of a tool call's arguments (clipped middle-out: a command
/// starts the value and a script's end often says what it runs).
const ARG_TOKENS: usize = 80;
/// The most tokens of a tool call's arguments in all.
const CALL_TOKENS: usize = 300;
/// What a request's headings and instructions take besides the prompt, context, running
/// summary and transcript.
const FRAMING_TOKENS: usize = 300;

/// The warning for a summary the server cut short.
#[cfg(feature = "cli")]
pub const TRUNCATED_SUMMARY: &str = "the summarizer's reply was cut short at --max-summary-tokens (finish_reason: length); the summary may be incomplete";

/// The default `--keep-recent`: the newest messages that stay verbatim beside a summary.
pub const DEFAULT_KEEP_RECENT: usize = 6;

/// The default `--max-summary-tokens`: the longest summary text, in tokens.
pub const DEFAULT_MAX_SUMMARY_TOKENS: usize = 500;

/// `--summary-role` choices: the role of the summary message in OpenAI documents (Anthropic
/// documents always use `user`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SummaryRole {
    /// A system message (a user message where the conversation must open with one).
    System,
    /// A user message.
    User,
}

impl SummaryRole {
    /// Every choice.
    #[cfg(feature = "cli")]
    pub(crate) const ALL: [SummaryRole; 2] = [SummaryRole::System, SummaryRole::User];

    /// The choice as `--summary-role` spells it.
    pub fn name(self) -> &'static str {
        match self {
            SummaryRole::System => "system",
            SummaryRole::User => "user",
        }
    }
}

/// `--on-error` choices: what happens when the summarizer fails, or no summary fits where it
/// goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnError {
    /// The operation fails (the command line's exit 4).
    Fail,
    /// The messages that would have been summarized are removed instead.
    Truncate,
    /// The document is left unchanged.
    Passthrough,
}

impl OnError {
    /// Every choice.
    #[cfg(feature = "cli")]
    pub(crate) const ALL: [OnError; 3] = [OnError::Fail, OnError::Truncate, OnError::Passthrough];

    /// The choice as `--on-error` spells it.
    pub fn name(self) -> &'static str {
        match self {
            OnError::Fail => "fail",
            OnError::Truncate => "truncate",
            OnError::Passthrough => "passthrough",
        }
    }
}

/// Finds a summary made by ctx: the cumulative count in its header.
pub fn summary_header(text: &str) -> Option<usize> {
    let rest = text.strip_prefix(HEADER_PREFIX)?;
    let end = rest.find(HEADER_SUFFIX)?;
    rest[..end].parse().ok()
}

/// The text of a message shaped like a summary: string content, or content made only of text
/// parts (joined by line breaks). Anything else (images, tool blocks) is never a summary.
fn summary_text(m: &Value) -> Option<Cow<'_, str>> {
    m.field("content").and_then(text_only)
}

/// The body of a summary: its text after the header line.
fn summary_body(text: &str) -> &str {
    text.split_once('\n').map_or("", |(_, rest)| rest).trim()
}

/// ctx's running summary in a document, as (its index, messages it covers).
///
/// Only a message where ctx places summaries is one (SPEC §2): right after the leading pinned
/// messages (a system summary is itself pinned, so it may be among them), in the summary's role,
/// carrying no tool calls or results, and starting with the header. The task and `--pin`
/// messages are never a summary. Any other message whose text starts with the header (a tool
/// result, a later user turn) is an ordinary message.
fn find_previous(
    msgs: &[Value],
    conv: &Conversation,
    pinned: &[bool],
    named: &[bool],
    dialect: Dialect,
    role: SummaryRole,
) -> Option<(usize, usize)> {
    // Whether every message so far is a system message: where a summary takes the user role to
    // keep the conversation opening with a user message (I7).
    let mut only_system = true;
    let system_role = dialect.system_role().is_some();
    for (i, m) in conv.messages.iter().enumerate() {
        let role_ok = match &m.role {
            // The role ctx writes system summaries in (`system`; a Responses `developer`).
            r if r.is_system() => {
                system_role
                    && role == SummaryRole::System
                    && dialect.system_role() == Some(r.name())
            }
            Role::User => !system_role || role == SummaryRole::User || only_system,
            _ => false,
        };
        if role_ok && !named[i] && m.calls.is_empty() && m.results.is_empty() {
            if let Some(c) = summary_text(&msgs[i]).and_then(|t| summary_header(&t)) {
                return Some((i, c));
            }
        }
        if !pinned[i] {
            return None;
        }
        // (A compaction item opens the conversation as a system prompt does.)
        only_system &= m.role.is_system() || m.compaction;
    }
    None
}

/// Where summaries come from, resolved once per run: the engine, its endpoint and prompt, or
/// the text of `--summary-file`. `summarize` and `fit`'s summarize stage share it.
pub struct Summarizer {
    pub(crate) source: Source,
    pub(crate) summary_model: Option<String>,
    pub(crate) max_summary_tokens: usize,
    pub(crate) summary_role: SummaryRole,
    pub(crate) on_error: OnError,
    /// Which engine `--engine auto` chose, for the user (see `Summarizer::note`).
    #[cfg_attr(
        not(feature = "cli"),
        expect(dead_code, reason = "read by the command line: --engine auto's note")
    )]
    pub(crate) note: Option<String>,
}

/// Where a summary's text comes from.
pub(crate) enum Source {
    /// `--summary-file`'s text, whatever the engine.
    #[cfg_attr(
        not(feature = "cli"),
        expect(dead_code, reason = "made only from the command line's --summary-file")
    )]
    File(String),
    /// The offline extractive engine.
    Extractive,
    /// An OpenAI-compatible server.
    #[cfg_attr(
        not(feature = "cli"),
        expect(
            dead_code,
            reason = "made only from the command line's --engine and --base-url"
        )
    )]
    Llm(Box<Llm>),
}

/// The llm engine: its server and instructions.
pub(crate) struct Llm {
    pub(crate) endpoint: Endpoint,
    /// `$OPENAI_API_KEY` is set but not sent, the URL being neither OpenAI's nor
    /// `$OPENAI_BASE_URL`: said when the server refuses the request.
    pub(crate) openai_key_withheld: bool,
    /// The instructions (`--prompt-file`, else [`DEFAULT_PROMPT`], plus `--instructions`).
    pub(crate) prompt: String,
    /// Where the parts of a long summary are counted out (`Env::progress`, unless quiet).
    pub(crate) progress: Option<super::Progress>,
}

impl Summarizer {
    /// The offline extractive engine, summaries at most `max_summary_tokens` long (at least 1)
    /// in `summary_role`, failing as `on_error` says: a summarizer without flags or files, for
    /// the library's API.
    pub fn extractive(
        max_summary_tokens: usize,
        summary_role: SummaryRole,
        on_error: OnError,
    ) -> Summarizer {
        Summarizer {
            source: Source::Extractive,
            summary_model: None,
            max_summary_tokens: max_summary_tokens.max(1),
            summary_role,
            on_error,
            note: None,
        }
    }

    /// A note for the user about the run, such as which engine `--engine auto` chose, without
    /// the `ctx: ` prefix. The caller shows it once: on stderr, or in the report.
    #[cfg(feature = "cli")]
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// `llm`, `extractive`, or `file` (`--summary-file`).
    /// The most tokens a summary's text may take (`--max-summary-tokens`).
    pub fn max_summary_tokens(&self) -> usize {
        self.max_summary_tokens
    }

    pub fn engine_name(&self) -> &'static str {
        match self.source {
            Source::File(_) => "file",
            Source::Llm(_) => "llm",
            Source::Extractive => "extractive",
        }
    }

    /// Whether summaries come from a server.
    pub(crate) fn is_llm(&self) -> bool {
        matches!(self.source, Source::Llm(_))
    }

    /// The summary text of `selected`, extending `previous` when there is one, asked for in at
    /// most `max_tokens` (the caller clips whatever comes back), and whether the server cut it
    /// short (`finish_reason: "length"`). `task` says where the conversation's task is: among
    /// `selected`, kept in the conversation, or nowhere; `context` the pinned messages that stay
    /// before the summary ([`Plan::context`]).
    #[allow(clippy::too_many_arguments)]
    fn text(
        &self,
        selected: &[Value],
        dialect: Dialect,
        previous: Option<&str>,
        model: &str,
        counter: &Counter,
        max_tokens: usize,
        task: crate::extractive::Task,
        context: &[&Value],
    ) -> Result<(String, bool)> {
        // The readers read chat messages: other shapes are read through their chat view.
        let view = dialect.chat_view(selected);
        let selected = view.as_deref().unwrap_or(selected);
        match &self.source {
            Source::File(t) => Ok((t.clone(), false)),
            Source::Llm(llm) => llm.summary(
                selected, context, dialect, previous, model, counter, max_tokens,
            ),
            Source::Extractive => crate::extractive::summarize(
                selected,
                counter.settings.encoding,
                max_tokens,
                previous,
                task,
            )
            .map(|t| (t, false)),
        }
    }
}

impl Llm {
    /// The LLM engine, and whether any reply was cut short by the server.
    ///
    /// One request holds the instructions (`--prompt-file`, else [`DEFAULT_PROMPT`], plus
    /// `--instructions`) as its system message, and as its user message the pinned `context`
    /// marked as not to be summarized, the running summary (`previous`) with the instruction to
    /// update it rather than rewrite it, and the transcript of `selected` (see
    /// [`transcript_line`]). A transcript longer than the summarizer's window is sent in parts,
    /// each summarized on its own, then one request combines the parts (updating `previous`
    /// when there is one).
    #[allow(clippy::too_many_arguments)]
    fn summary(
        &self,
        selected: &[Value],
        context: &[&Value],
        dialect: Dialect,
        previous: Option<&str>,
        model: &str,
        counter: &Counter,
        max_tokens: usize,
    ) -> Result<(String, bool)> {
        // One client for all the calls of this summary (its parts, then combining them), so
        // that they share a connection.
        let client = crate::llm::Client::new(self.endpoint.clone());
        let context = context_block(context, dialect, counter)?;
        let window = crate::models::lookup(model).map_or(128_000, |m| m.context_window) as usize;
        let fixed = [
            max_tokens,
            counter.text(&self.prompt)?,
            counter.text(&context)?,
            previous.map_or(Ok(0), |p| counter.text(p))?,
            FRAMING_TOKENS,
        ]
        .iter()
        .fold(0usize, |a, &b| a.saturating_add(b));
        let room = window.saturating_sub(fixed).max(1000);
        let lines: Vec<String> = selected
            .iter()
            .map(|m| transcript_line(m, dialect, counter, TEXT_TOKENS))
            .collect::<Result<_>>()?;
        // Chunk the transcript so each request fits the summarizer's window.
        let mut chunks: Vec<Vec<String>> = Vec::new();
        let mut current: Vec<String> = Vec::new();
        let mut current_tokens = 0;
        for line in lines {
            let t = counter.text(&line)?;
            if current_tokens + t > room && !current.is_empty() {
                chunks.push(std::mem::take(&mut current));
                current_tokens = 0;
            }
            current.push(line);
            current_tokens += t;
        }
        if !current.is_empty() {
            chunks.push(current);
        }
        let progress = self.progress.as_ref().filter(|_| chunks.len() > 1);
        let cut_short = std::cell::Cell::new(false);
        let call = |body: String| -> std::result::Result<String, crate::llm::LlmError> {
            let user = if context.is_empty() {
                body
            } else {
                format!("{context}\n\n{body}")
            };
            let req = ChatRequest {
                model: model.to_string(),
                messages: vec![
                    json!({"role": "system", "content": self.prompt}),
                    json!({"role": "user", "content": user}),
                ],
                max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX),
            };
            let reply = client.chat(&req).map_err(|e| self.explain(e))?;
            if reply.truncated {
                cut_short.set(true);
            }
            Ok(reply.text)
        };
        let mut parts = Vec::new();
        let n_chunks = chunks.len();
        for (k, chunk) in chunks.iter().enumerate() {
            if let Some(progress) = progress {
                progress(&format!("summarize: part {} of {}", k + 1, n_chunks));
            }
            // If the server says the request is still too long for its context, the oldest
            // half of what is left is dropped and the call retried.
            let mut from = 0;
            loop {
                let text = chunk[from..].join("\n");
                let body = match (previous, n_chunks) {
                    (Some(prev), 1) => format!(
                        "{SUMMARY_HEADING}\n{prev}\n\n{NEW_MESSAGES_HEADING}\n{text}\n\n{}",
                        update_instruction("the new messages", max_tokens)
                    ),
                    (None, 1) => format!("{TRANSCRIPT_HEADING}\n{text}"),
                    (Some(_), _) => format!(
                        "Part {} of {n_chunks} of the new messages since the summary so far (summarize this part on its own):\n{text}",
                        k + 1
                    ),
                    (None, _) => format!(
                        "Part {} of {n_chunks} of the conversation to summarize:\n{text}",
                        k + 1
                    ),
                };
                match call(body) {
                    Ok(t) => {
                        parts.push(t);
                        break;
                    }
                    Err(e) if is_overflow(&e.message) && chunk.len() - from > 1 => {
                        from += (chunk.len() - from) / 2;
                    }
                    Err(e) => bail!("{e}"),
                }
            }
        }
        if parts.len() == 1 {
            return Ok((parts.remove(0), cut_short.get()));
        }
        let mut listed = String::new();
        for (k, part) in parts.iter().enumerate() {
            listed.push_str(&format!("Part {}:\n{}\n\n", k + 1, part.trim()));
        }
        let combined = match previous {
            Some(prev) => format!(
                "{SUMMARY_HEADING}\n{prev}\n\nSummaries of the new messages since the summary so far, part by part, in order:\n\n{listed}{}",
                update_instruction("these partial summaries", max_tokens)
            ),
            None => format!(
                "Combine these partial summaries, in order, into one summary with the same sections: keep every fact (commands, files, test outcomes, errors, decisions); where a later part changes a fact, keep the later one.\n\n{}",
                listed.trim_end()
            ),
        };
        let text = call(combined).map_err(|e| anyhow!("{e}"))?;
        Ok((text, cut_short.get()))
    }

    /// A failed call's error, with the reason when the server refused it for want of a key that
    /// was held back.
    fn explain(&self, mut e: crate::llm::LlmError) -> crate::llm::LlmError {
        if self.openai_key_withheld && matches!(e.status, Some(401 | 403)) {
            e.message.push_str(
                " (OPENAI_API_KEY is sent only to api.openai.com and OPENAI_BASE_URL; set CTX_API_KEY for this server)",
            );
        }
        e
    }
}

/// What to summarize and when.
#[derive(Clone, Debug)]
pub struct Options {
    /// At least this many newest messages stay verbatim.
    pub keep_recent: usize,
    /// Trigger: at least this many messages since the last summary.
    pub after_messages: usize,
    /// Trigger: the document is over this many tokens.
    pub over_tokens: u64,
    /// Summarize whatever the triggers say.
    pub force: bool,
    pub pins: PinOptions,
    /// fit's budget: the summary must also fit in what the kept messages leave of it. When it
    /// cannot, nothing is summarized (`skipped`), whatever `--on-error` says, so fit goes on
    /// with its later stages as if this one had done nothing.
    pub budget: Option<u64>,
    /// Where the conversation's task is, when the caller carries it from its own input (fit):
    /// `Some(None)` when it is not among the messages. `None`: the first user message that is
    /// not only tool results.
    pub task: Option<Option<usize>>,
}

impl Default for Options {
    /// Summarize now, whatever the triggers say (`--force`), keeping the default
    /// `--keep-recent`: what `fit`'s summarize stage and the library's `summarize` do.
    fn default() -> Options {
        Options {
            keep_recent: DEFAULT_KEEP_RECENT,
            after_messages: 0,
            over_tokens: 0,
            force: true,
            pins: PinOptions::default(),
            budget: None,
            task: None,
        }
    }
}

/// Which messages a run would summarize, and whether a trigger holds.
#[derive(Debug)]
pub struct Plan {
    /// The running summary found in the document: (its index, messages it covers).
    pub previous: Option<(usize, usize)>,
    /// Indices of the messages to summarize (the running summary excluded).
    pub range: Vec<usize>,
    /// Their tokens.
    pub range_tokens: usize,
    pub triggered: bool,
    /// Where the summary goes: before this message (the message count: at the end).
    pub at: usize,
    /// The conversation's task, and whether it is pinned.
    pub task: Option<(usize, bool)>,
    /// The pinned messages that stay before the summary (system prompt, a pinned task, `--pin`
    /// messages; never the running summary), in order: what the llm engine sends as context
    /// that is not to be summarized.
    pub context: Vec<usize>,
}

/// Chooses the range: every unpinned message older than the `keep_recent` newest (extended
/// back to a unit boundary), after the running summary if there is one, and where the summary
/// goes: after the pinned messages that precede the range, before the first kept message.
///
/// A summary never comes before the pinned task (a later run would take a user-role summary for
/// the task): when the task is among the kept messages, the range lies wholly before it and
/// nothing is summarized.
pub fn plan(
    doc: &Document,
    count: &DocumentCount,
    opts: &Options,
    role: SummaryRole,
) -> Result<Plan> {
    let msgs = doc.messages();
    let conv = Conversation::new(msgs, doc.dialect);
    let pinned = conv.pinned_messages(&opts.pins)?;
    // The task and --pin messages, pinned by name rather than by role.
    let named = conv.pinned_messages(&PinOptions {
        drop_system: true,
        ..opts.pins.clone()
    })?;
    let n = msgs.len();
    let previous = find_previous(msgs, &conv, &pinned, &named, doc.dialect, role);
    let boundary = conv.recent_start(opts.keep_recent);
    // Only pinned messages come before a running summary, so the range starts after it.
    let mut range: Vec<usize> = (previous.map_or(0, |(s, _)| s + 1)..boundary)
        .filter(|&i| !pinned[i])
        .collect();
    let task = match opts.task {
        Some(t) => t,
        None => conv.task,
    }
    .map(|t| (t, named[t]));
    // A pinned task among the kept messages would come after the summary.
    if task.is_some_and(|(t, pinned)| pinned && t >= boundary) {
        range.clear();
    }
    let mut removed = vec![false; n];
    for &i in range.iter().chain(previous.iter().map(|p| &p.0)) {
        removed[i] = true;
    }
    let first = previous
        .map(|p| p.0)
        .into_iter()
        .chain(range.first().copied())
        .min();
    let at = first.map_or(boundary, |f| {
        (f..boundary)
            .find(|&i| !removed[i] && !pinned[i])
            .unwrap_or(boundary)
    });
    let since = previous.map_or(n, |(s, _)| n - s - 1);
    let triggered =
        opts.force || since >= opts.after_messages || count.total() as u64 > opts.over_tokens;
    let range_tokens = range.iter().map(|&i| count.messages[i].total()).sum();
    let context = (0..at).filter(|&i| pinned[i] && !removed[i]).collect();
    Ok(Plan {
        previous,
        range,
        range_tokens,
        triggered,
        at,
        task,
        context,
    })
}

/// What summarizing did to one document.
#[derive(Debug)]
pub struct Summarization {
    pub doc: Document,
    pub plan: Plan,
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// Cumulative messages covered by the summary written (None when nothing was written).
    pub covered: Option<usize>,
    /// `truncate` or `passthrough` when the engine failed and `--on-error` chose a fallback.
    pub fallback: Option<&'static str>,
    /// The engine's error behind a fallback.
    pub error: Option<String>,
    /// Why no summary could fit fit's budget (the document is unchanged).
    pub skipped: Option<String>,
    /// The summary was clipped to its bound.
    pub clipped: bool,
    /// The summary message's tokens (0 when none was written).
    pub summary_tokens: usize,
    /// The model asked, for the llm engine.
    pub model: Option<String>,
    /// The server cut the summary short (`finish_reason: "length"`).
    pub summary_truncated: bool,
    pub latency_ms: u64,
    /// Originals of the summarized (or, on fallback, dropped) messages.
    pub dropped: Vec<Dropped>,
    /// For each output message, its index in the input (None for the new summary).
    pub origins: Vec<Option<usize>>,
}

#[cfg(feature = "cli")]
impl Summarization {
    /// The `--report` fields.
    pub fn report(&self, engine: &str) -> Value {
        let mut r = json!({
            "command": "summarize",
            "triggered": self.plan.triggered,
            "engine": engine,
            "range": self.plan.range,
            "range_tokens": self.plan.range_tokens,
            "tokens_before": self.tokens_before,
        });
        if let Some(f) = self.fallback {
            r["fallback"] = json!(f);
            r["error"] = json!(self.error);
        }
        r["tokens_after"] = json!(self.tokens_after);
        if let Some(c) = self.covered {
            r["messages_covered"] = json!(c);
        }
        if self.clipped {
            r["clipped"] = json!(true);
        }
        if self.plan.triggered && !self.plan.range.is_empty() {
            r["latency_ms"] = json!(self.latency_ms);
        }
        if let Some(m) = &self.model {
            r["model"] = json!(m);
        }
        if self.summary_truncated {
            r["summary_truncated"] = json!(true);
        }
        r
    }

    /// The warning for a summary the server cut short, if it was.
    pub fn truncation_warning(&self) -> Option<String> {
        self.summary_truncated
            .then(|| TRUNCATED_SUMMARY.to_string())
    }
}

/// Why a summary was not made.
enum Failure {
    /// The engine failed.
    Engine(anyhow::Error),
    /// No summary fits its bound: not even the header, or a clip that keeps nothing.
    NoRoom(String),
}

/// Whether a (clipped) summary text keeps anything of what the engine wrote: not empty, not a
/// bare clip marker.
fn says_something(text: &str) -> bool {
    let head = text.split("[... ").next().unwrap_or("");
    !head.trim().is_empty() && text.trim() != "[...]"
}

/// `text` clipped middle-out so that `make(text)` counts at most `room` tokens, starting from a
/// bound of `max` tokens for the text, and whether it was clipped; None when no clip that fits
/// keeps anything of it. Middle-out keeps both the start of a summary (its task and first
/// headings) and its end (the latest state and what remains): the middle, the history of what
/// was done, is what a continuation needs least.
fn bound_summary(
    counter: &Counter,
    text: &str,
    max: usize,
    room: usize,
    make: &dyn Fn(&str) -> Value,
) -> Result<Option<(String, bool)>> {
    let text = text.trim();
    let enc = counter.settings.encoding;
    let mut max = max;
    // A cut rarely lands exactly (the header joins the text); a few passes settle it.
    for _ in 0..4 {
        let (cut, clipped) = match clip_middle(enc, text, max)? {
            Some(c) => (c, true),
            None => (text.to_string(), false),
        };
        if !says_something(&cut) {
            break;
        }
        let tokens = counter.message(&make(&cut), &mut Notes::default())?.total();
        if tokens <= room {
            return Ok(Some((cut, clipped)));
        }
        max = max.saturating_sub(tokens - room);
        if max == 0 {
            break;
        }
    }
    Ok(None)
}

/// Summarizes `doc` (already counted as `count`) when a trigger holds: the one implementation
/// behind `ctx summarize` and `fit`'s summarize stage.
///
/// Size: the summary message is at most what it replaces (the range and the running summary),
/// within fit's budget at most what the kept messages leave of it, and its text at most
/// `--max-summary-tokens`. A longer text is clipped middle-out; when no summary fits (not even
/// its header, or a clip that keeps nothing), the document follows `--on-error` (fit: nothing is
/// summarized and the pipeline goes on).
///
/// The engine reads `originals[i]` in place of message `i` where it is given: fit passes the
/// input's messages that an earlier stage rewrote (a cleared result's original output), so a
/// summary is made from what the agent saw, not from placeholders.
// About 150 lines: the bound, the engine call and the fallbacks share the summary's frame, room
// and `--on-error`; its other steps are the functions below.
pub fn summarize(
    doc: Document,
    counter: &Counter,
    count: &DocumentCount,
    opts: &Options,
    s: &Summarizer,
    originals: &[Option<&Value>],
) -> Result<Summarization> {
    let plan = plan(&doc, count, opts, s.summary_role)?;
    let tokens_before = count.total();
    let dialect = doc.dialect;
    let mut out = Summarization {
        origins: Vec::new(),
        doc,
        plan,
        tokens_before,
        tokens_after: tokens_before,
        covered: None,
        fallback: None,
        error: None,
        skipped: None,
        clipped: false,
        summary_tokens: 0,
        model: None,
        summary_truncated: false,
        latency_ms: 0,
        dropped: Vec::new(),
    };
    let unchanged = |mut out: Summarization| {
        out.origins = (0..out.doc.messages().len()).map(Some).collect();
        out
    };
    if !out.plan.triggered || out.plan.range.is_empty() {
        return Ok(unchanged(out));
    }
    super::refuse_server_state(&out.doc, "summarizing")?;
    let msgs = out.doc.messages();
    let n = msgs.len();
    let previous = out.plan.previous;
    let prev_text = previous
        .and_then(|(i, _)| summary_text(&msgs[i]))
        .map(|t| summary_body(&t).to_string());
    let covered = previous
        .map_or(0, |(_, c)| c)
        .saturating_add(out.plan.range.len());
    let mut removed = vec![false; n];
    for &i in out.plan.range.iter().chain(previous.iter().map(|p| &p.0)) {
        removed[i] = true;
    }
    let at = out.plan.at;

    let role = summary_role(dialect, s.summary_role, msgs, previous, &removed, at);
    let header = format!("{HEADER_PREFIX}{covered}{HEADER_SUFFIX}");
    let make = |text: &str| dialect.text_message(role, &format!("{header}\n{text}"));

    // The bound: what it replaces, what fit's budget leaves, --max-summary-tokens.
    let replaced = out.plan.range_tokens + previous.map_or(0, |(i, _)| count.messages[i].total());
    let room = match opts.budget {
        Some(b) => replaced.min((b as usize).saturating_sub(tokens_before - replaced)),
        None => replaced,
    };
    let frame = counter.message(&make(""), &mut Notes::default())?.total();
    let bound = s.max_summary_tokens.min(room.saturating_sub(frame));

    let started = std::time::Instant::now();
    let summary_model = s
        .summary_model
        .clone()
        .unwrap_or_else(|| counter.settings.model_name.clone());
    let no_room = || {
        Failure::NoRoom(if room < replaced {
            format!(
                "the budget leaves {room} tokens for a summary, too few for one that says anything (its header needs {frame})"
            )
        } else {
            format!(
                "a summary must be smaller than the {} messages it replaces ({replaced} tokens), too few for one that says anything (its header needs {frame})",
                out.plan.range.len() + usize::from(previous.is_some())
            )
        })
    };
    let made = if bound < MIN_SUMMARY_TOKENS.min(s.max_summary_tokens) {
        Err(no_room())
    } else {
        if s.is_llm() {
            out.model = Some(summary_model.clone());
        }
        let selected = read_range(&out.plan.range, msgs, originals);
        // The pinned messages before the summary, after a system prompt kept outside them.
        let body_system = dialect
            .system_key()
            .and_then(|k| out.doc.body()?.get(k))
            .map(|sys| json!({"role": "system", "content": sys}));
        let context: Vec<&Value> = body_system
            .iter()
            .chain(out.plan.context.iter().map(|&i| &msgs[i]))
            .collect();
        match s.text(
            &selected,
            dialect,
            prev_text.as_deref(),
            &summary_model,
            counter,
            bound,
            engine_task(&out.plan),
            &context,
        ) {
            Ok((t, cut_short)) => {
                out.summary_truncated = cut_short;
                bound_summary(counter, &t, bound, room, &make)?.ok_or_else(no_room)
            }
            Err(e) => Err(Failure::Engine(e)),
        }
    };
    let summary = match made {
        Ok((text, clipped)) => {
            out.clipped = clipped;
            Some(make(&text))
        }
        Err(Failure::NoRoom(reason)) if opts.budget.is_some() => {
            out.skipped = Some(reason);
            return Ok(unchanged(out));
        }
        Err(f) => {
            let reason = match f {
                Failure::Engine(e) => format!("{e:#}"),
                Failure::NoRoom(r) => r,
            };
            out.latency_ms = started.elapsed().as_millis() as u64;
            match s.on_error {
                OnError::Fail => return Err(SummarizerFailed { reason }.into()),
                OnError::Passthrough => {
                    out.fallback = Some("passthrough");
                    out.error = Some(reason);
                    return Ok(unchanged(out));
                }
                OnError::Truncate => {
                    out.fallback = Some("truncate");
                    out.error = Some(reason);
                    None
                }
            }
        }
    };
    let summary_tokens = match &summary {
        Some(m) => {
            out.covered = Some(covered);
            counter.message(m, &mut Notes::default())?.total()
        }
        None => 0,
    };

    place(&mut out, summary, &removed, at);
    out.tokens_after = tokens_before - replaced + summary_tokens;
    out.summary_tokens = summary_tokens;
    out.latency_ms = started.elapsed().as_millis() as u64;
    Ok(out)
}

/// The summary's role: the configured one, never above a running summary's (text that came as
/// a user message is never promoted to system), and user where it opens the conversation in
/// place of a summarized user message (I7).
fn summary_role(
    dialect: Dialect,
    configured: SummaryRole,
    msgs: &[Value],
    previous: Option<(usize, usize)>,
    removed: &[bool],
    at: usize,
) -> &'static str {
    let n = msgs.len();
    let role_of = |m: &Value| role_in_place(dialect, m);
    let user = Role::User.name();
    let mut role = match (dialect.system_role(), configured) {
        (None, _) | (_, SummaryRole::User) => user,
        (Some(system), SummaryRole::System) => system,
    };
    if previous.is_some_and(|(i, _)| role_of(&msgs[i]) == Role::User) {
        role = user;
    }
    if role != user && first_role(dialect, msgs) == Some(Role::User) {
        let first_kept = (0..n).find(|&i| !removed[i] && !role_of(&msgs[i]).is_system());
        let opens = first_kept.is_none_or(|k| k >= at);
        let kept_user = first_kept.is_some_and(|k| role_of(&msgs[k]) == Role::User);
        if opens && !kept_user {
            role = user;
        }
    }
    role
}

/// Where the task is, for the engine: in the range (its position there), kept, or nowhere.
fn engine_task(plan: &Plan) -> crate::extractive::Task {
    let task_in_range = plan
        .task
        .and_then(|(t, _)| plan.range.iter().position(|&i| i == t));
    match (task_in_range, plan.task) {
        (Some(k), _) => crate::extractive::Task::InRange(k),
        (None, Some(_)) => crate::extractive::Task::Kept,
        (None, None) => crate::extractive::Task::None,
    }
}

/// The messages of `range`, each read from `originals` where given.
fn read_range(range: &[usize], msgs: &[Value], originals: &[Option<&Value>]) -> Vec<Value> {
    range
        .iter()
        .map(|&i| {
            originals
                .get(i)
                .copied()
                .flatten()
                .unwrap_or(&msgs[i])
                .clone()
        })
        .collect()
}

/// Puts `summary` in place at message `at` and removes the `removed` messages (for
/// `--dropped`), recording where each output message came from.
fn place(out: &mut Summarization, mut summary: Option<Value>, removed: &[bool], at: usize) {
    let originals = std::mem::take(out.doc.messages_mut());
    let mut kept = Vec::with_capacity(originals.len() + 1);
    let reason = if out.fallback.is_some() {
        "truncated"
    } else {
        "summarized"
    };
    for (i, m) in originals.into_iter().enumerate() {
        if i == at {
            if let Some(s) = summary.take() {
                kept.push(s);
                out.origins.push(None);
            }
        }
        if removed[i] {
            out.dropped.push(Dropped {
                index: i,
                reason: reason.into(),
                message: m,
            });
        } else {
            kept.push(m);
            out.origins.push(Some(i));
        }
    }
    if let Some(s) = summary {
        kept.push(s);
        out.origins.push(None);
    }
    *out.doc.messages_mut() = kept;
}

/// The role of the first non-system message.
fn first_role(dialect: Dialect, ms: &[Value]) -> Option<Role> {
    ms.iter()
        .map(|m| role_in_place(dialect, m))
        .find(|r| !r.is_system())
}

/// The role a message plays where it stands: its own, but a compaction item's is the system
/// prompt's (it opens what the model reads), and an item without a role (a Responses call,
/// reasoning) is the assistant's or the tool's, as its dialect reads it.
fn role_in_place(dialect: Dialect, m: &Value) -> Role {
    let read = dialect.read_message(m);
    if read.compaction {
        Role::System
    } else {
        read.role
    }
}

/// Whether a server error says the request is longer than the model's context.
fn is_overflow(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("context_length_exceeded")
        || m.contains("maximum context length")
        || m.contains("context length")
        || m.contains("too many tokens")
        || m.contains("prompt is too long")
        || m.contains("exceeds the context")
}

/// The pinned messages sent as context, under [`CONTEXT_HEADING`]: each as a transcript line
/// of at most about [`CONTEXT_MESSAGE_TOKENS`], the whole within [`CONTEXT_TOKENS`] (the
/// messages past it are counted, not sent). Empty when there are none.
fn context_block(context: &[&Value], dialect: Dialect, counter: &Counter) -> Result<String> {
    if context.is_empty() {
        return Ok(String::new());
    }
    let mut block = String::from(CONTEXT_HEADING);
    let mut total = 0;
    for (k, m) in context.iter().enumerate() {
        let line = transcript_line(m, dialect, counter, CONTEXT_MESSAGE_TOKENS)?;
        let tokens = counter.text(&line)?;
        if total + tokens > CONTEXT_TOKENS && k > 0 {
            block.push_str(&format!(
                "\n[{} more pinned messages not shown]",
                context.len() - k
            ));
            break;
        }
        total += tokens;
        block.push('\n');
        block.push_str(&line);
    }
    Ok(block)
}

/// One message as a transcript line: its role, its text clipped middle-out to `text_limit`
/// tokens, its tool calls with their arguments shortened ([`call_text`]) and its tool results
/// shortened to what matters ([`result_text`]), as `dialect` writes them. Reasoning and
/// signatures are never sent.
fn transcript_line(
    m: &Value,
    dialect: Dialect,
    counter: &Counter,
    text_limit: usize,
) -> Result<String> {
    let enc = counter.settings.encoding;
    let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
    let mut parts: Vec<String> = Vec::new();
    let mut push = |t: String| {
        if !t.trim().is_empty() {
            parts.push(t);
        }
    };
    let clip = |t: &str| -> Result<String> {
        Ok(clip_middle(enc, t, text_limit)?.unwrap_or_else(|| t.to_string()))
    };
    if matches!(Role::parse(m.field("role")), Role::Tool | Role::Function) {
        // A tool message: its text (string or text parts) is the output.
        let text = m.field("content").map(content_text).unwrap_or_default();
        push(result_text(enc, &text, false)?);
    } else {
        match m.field("content") {
            Some(Value::String(s)) => push(clip(s)?),
            Some(Value::Array(blocks)) => {
                for (_, piece) in pieces(blocks) {
                    match piece {
                        Piece::Text(t) => push(clip(t)?),
                        Piece::Call(c) if !c.server => push(call_text(
                            enc,
                            c.name.unwrap_or("?"),
                            c.args.unwrap_or(&Value::Null),
                        )?),
                        Piece::Result {
                            content, is_error, ..
                        } => {
                            let text = content.map(content_text).unwrap_or_default();
                            push(format!(
                                "[tool result] {}",
                                result_text(enc, &text, is_error)?
                            ));
                        }
                        Piece::Image => push("[image]".to_string()),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let mut calls = Vec::new();
    dialect.message_calls(m, &mut calls);
    for c in calls {
        let name = c.name.unwrap_or("?");
        let args = match c.args {
            // Arguments are a JSON text; one that does not parse is shown as text.
            Some(Value::String(a)) if c.encoded => {
                serde_json::from_str(a).unwrap_or_else(|_| Value::String(a.clone()))
            }
            Some(other) => other.clone(),
            None => Value::Null,
        };
        push(call_text(enc, name, &args)?);
    }
    Ok(format!("{role}: {}", parts.join(" ")))
}

/// The text of a tool result's content: a string, or its text parts joined by line breaks
/// (images as `[image]`).
fn content_text(content: &Value) -> String {
    text_of(content, Some("[image]")).into_owned()
}

/// A tool call as `[called name(arguments)]`: each value of the arguments clipped middle-out to
/// [`ARG_TOKENS`] (a long script or patch keeps its start, where the command is, and its end),
/// short values such as paths whole, the whole within [`CALL_TOKENS`].
fn call_text(enc: Encoding, name: &str, args: &Value) -> Result<String> {
    let clip = |t: &str, max: usize| -> Result<String> {
        Ok(clip_middle(enc, t, max)?.unwrap_or_else(|| t.to_string()))
    };
    let shown = match args {
        Value::Object(map) => {
            let mut short = serde_json::Map::new();
            for (k, v) in map {
                let v = match v {
                    Value::String(s) => Value::String(clip(s, ARG_TOKENS)?),
                    other => {
                        let t = other.to_string();
                        match clip_middle(enc, &t, ARG_TOKENS)? {
                            Some(c) => Value::String(c),
                            None => other.clone(),
                        }
                    }
                };
                short.insert(k.clone(), v);
            }
            Value::Object(short).to_string()
        }
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    Ok(format!("[called {name}({})]", clip(&shown, CALL_TOKENS)?))
}

/// A tool output as sent to the summarizer. Up to [`RESULT_TOKENS`] it is sent whole (marked
/// `[error]` when the result says it failed). A longer one opens with its size and status (a
/// non-zero exit status written in it, or its error flag), keeps its two ends clipped
/// middle-out, and adds the error and test-outcome lines of the part left out, so what an
/// engineer looks at first survives the shortening.
fn result_text(enc: Encoding, text: &str, is_error: bool) -> Result<String> {
    let text = text.trim();
    let tokens = enc.count(text);
    if tokens <= RESULT_TOKENS {
        return Ok(if is_error {
            format!("[error] {text}")
        } else {
            text.to_string()
        });
    }
    let kept = clip_middle(enc, text, RESULT_KEEP_TOKENS)?.unwrap_or_else(|| text.to_string());
    let ex = excerpt(text, is_error);
    let status = ex.status.map(|s| format!(", {s}")).unwrap_or_default();
    let mut out = format!(
        "[output of {} tokens{status}, shortened]\n{kept}",
        thousands(tokens)
    );
    let left_out: Vec<&str> = ex
        .salient
        .iter()
        .map(String::as_str)
        .filter(|l| !kept.contains(l.trim_end_matches('…')))
        .collect();
    if !left_out.is_empty() {
        out.push_str("\n[error and test-outcome lines of the part left out:]\n");
        out.push_str(&left_out.join("\n"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_errors_are_recognised() {
        assert!(is_overflow(
            "HTTP 400: This model's maximum context length is 8192 tokens"
        ));
        assert!(is_overflow("HTTP 400: context_length_exceeded"));
        assert!(!is_overflow("HTTP 500: boom"));
    }

    #[test]
    fn short_tool_outputs_are_sent_whole_long_ones_keep_status_and_error_lines() {
        let enc = Encoding::O200kBase;
        assert_eq!(result_text(enc, " 3 passed \n", false).unwrap(), "3 passed");
        assert_eq!(
            result_text(enc, "no such report", true).unwrap(),
            "[error] no such report"
        );
        let mut lines: Vec<String> = (0..300).map(|k| format!("step {k} done")).collect();
        lines.insert(150, "error: cannot open src/lib.rs".into());
        lines.push("exit code 127".into());
        let out = result_text(enc, &lines.join("\n"), false).unwrap();
        assert!(
            out.starts_with("[output of 1,")
                && out.contains(", failed (exit code 127), shortened]"),
            "{out}"
        );
        assert!(out.contains("\nstep 0 done\n"), "{out}");
        assert!(out.ends_with("error: cannot open src/lib.rs"), "{out}");
        assert!(!out.contains("step 150 done"), "{out}");
        assert!(enc.count(&out) < RESULT_TOKENS + 60, "{out}");
    }

    #[test]
    fn call_arguments_keep_each_key_and_the_start_of_long_values() {
        let enc = Encoding::O200kBase;
        let patch = format!("--- a/src/x.rs\n{}", "+ line\n".repeat(500));
        let args = json!({"path": "src/x.rs", "patch": patch, "n": [1, 2]});
        let out = call_text(enc, "apply_patch", &args).unwrap();
        assert!(
            out.starts_with(
                r#"[called apply_patch({"path":"src/x.rs","patch":"--- a/src/x.rs\n+ line"#
            ),
            "{out}"
        );
        assert!(out.ends_with(r#"","n":[1,2]})]"#), "{out}");
        assert!(enc.count(&out) <= ARG_TOKENS + 30, "{out}");
        // Arguments that are not JSON are shown as text.
        assert_eq!(
            call_text(enc, "f", &Value::String("not json".into())).unwrap(),
            "[called f(not json)]"
        );
    }

    #[test]
    fn headers_are_recognised() {
        assert_eq!(
            summary_header("[ctx summary of 12 earlier messages]\nTask: x"),
            Some(12)
        );
        assert_eq!(summary_header("[ctx summary of x earlier messages]"), None);
        assert_eq!(summary_header("hello"), None);
    }
}
