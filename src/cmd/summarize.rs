//! `ctx summarize`: replace older messages with one summary message (SPEC §4).
//!
//! Chooses the range (every unpinned message older than `--keep-recent`, extended back to a unit
//! boundary so no pair is split), decides whether a trigger holds, gets the summary text from an
//! engine (an OpenAI-compatible endpoint through [`crate::llm`], the offline
//! [`crate::extractive`] digest, or `--summary-file`), and places it with a header that later
//! runs recognise, so a running summary is extended with only the newly aged-out messages.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::{
    Dropped, Env, InputArgs, Outcome, OutputArgs, PinArgs, SideArgs, SummarizerFailed, prepare,
};
use crate::clip::clip_middle;
use crate::conversation::Conversation;
use crate::counter::Counter;
use crate::document::Dialect;
use crate::input::Origin;
use crate::llm::{ChatRequest, Endpoint};
use crate::output::render;
use crate::settings::{Budget, ModelArgs, read_tools_file};

/// The summary header; `{n}` is the cumulative number of messages summarized.
const HEADER_PREFIX: &str = "[ctx summary of ";
const HEADER_SUFFIX: &str = " earlier messages]";

/// The default instructions sent to the summarizer.
pub const DEFAULT_PROMPT: &str = "You summarize the earlier part of a conversation between a user and an AI assistant (which may use tools) so that the assistant can continue the work without the original messages. Write a concise, factual summary with these sections:\n1. Task and intent: what the user asked for and why.\n2. Done so far: the actions taken and tool calls made, with their outcomes.\n3. Current state: file paths, identifiers, values, errors seen and decisions made, exactly as written.\n4. Remaining: what is still to be done.\nDo not invent anything. Do not address the user. Output only the summary.";

/// Replace older messages with a summary (an LLM's, an offline digest, or your own text).
///
/// Every unpinned message older than the --keep-recent newest (extended back so no tool call
/// is separated from its result) is summarized into one message, placed after the pinned
/// messages that precede it. Its text starts with `[ctx summary of N earlier messages]`; a later
/// run extends that running summary with only the newly aged-out messages. Runs only when a
/// trigger holds (--after-messages, --over-tokens) or with --force.
///
/// The llm engine calls {base}/chat/completions of any OpenAI-compatible server: --base-url or
/// $CTX_BASE_URL, else $OPENAI_BASE_URL, else https://api.openai.com/v1; key from $CTX_API_KEY,
/// else $OPENAI_API_KEY. --engine auto uses llm only when ctx itself is configured for one
/// (--base-url, $CTX_BASE_URL or $CTX_API_KEY), else the offline extractive engine.
///
/// Example:
///   ctx summarize --engine extractive --keep-recent 8 --force < agent.json
///   CTX_BASE_URL=http://localhost:11434/v1 ctx summarize --summary-model llama3.1 < chat.json
///
/// Exit codes: 0 ok; 2 bad input or flags; 4 the summarizer failed after retries and
/// --on-error fail (nothing written for that document).
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    /// At least the N newest messages stay verbatim (extended back to a unit boundary).
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub keep_recent: usize,

    /// Summarize when at least N messages came since the last summary.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub after_messages: usize,

    /// Summarize when the document is over N tokens or P% of the window (default: the smaller
    /// of 128000 and the window minus the reserve).
    #[arg(long, value_name = "N|P%")]
    pub over_tokens: Option<Budget>,

    /// Tokens kept free for the reply, for the default --over-tokens (default: the body's
    /// max_tokens, else 4096).
    #[arg(long, value_name = "N")]
    pub reserve: Option<u64>,

    /// Summarize even when no trigger holds.
    #[arg(long)]
    pub force: bool,

    /// Where the summary comes from.
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: Engine,

    /// OpenAI-compatible base URL including the version path (http://localhost:11434/v1).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// Model that writes the summary (default: $CTX_SUMMARY_MODEL, else the conversation's).
    #[arg(long, value_name = "NAME")]
    pub summary_model: Option<String>,

    /// Longest summary, in tokens (sent as the request's max_tokens and enforced).
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub max_summary_tokens: usize,

    /// Seconds before a summarizer request is abandoned.
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0)]
    pub timeout: f64,

    /// Retries after a 429, a 5xx, a timeout or a refused connection.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub retries: u32,

    /// Text added to the default instructions.
    #[arg(long, value_name = "TEXT")]
    pub instructions: Option<String>,

    /// File whose text replaces the default instructions.
    #[arg(long, value_name = "FILE")]
    pub prompt_file: Option<PathBuf>,

    /// Role of the summary message for OpenAI conversations (Anthropic always uses user).
    #[arg(long, value_enum, default_value = "system")]
    pub summary_role: SummaryRole,

    /// Use this file's text as the summary instead of calling an engine.
    #[arg(long, value_name = "FILE")]
    pub summary_file: Option<PathBuf>,

    /// When the summarizer fails: exit 4 (fail), drop the range instead (truncate), or leave
    /// the document unchanged (passthrough).
    #[arg(long, value_enum, default_value = "fail")]
    pub on_error: OnError,

    /// Report what would be summarized (as JSON on stdout) without calling anything.
    #[arg(long)]
    pub dry_run: bool,

    #[command(flatten)]
    pub pin: PinArgs,

    #[command(flatten)]
    pub side: SideArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// `--engine` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    Auto,
    Llm,
    Extractive,
}

/// `--summary-role` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SummaryRole {
    System,
    User,
}

/// `--on-error` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnError {
    Fail,
    Truncate,
    Passthrough,
}

/// Finds a summary made by ctx: the cumulative count in its header.
pub fn summary_header(text: &str) -> Option<usize> {
    let rest = text.strip_prefix(HEADER_PREFIX)?;
    let end = rest.find(HEADER_SUFFIX)?;
    rest[..end].parse().ok()
}

fn message_text(m: &Value) -> Option<&str> {
    match m.get("content") {
        Some(Value::String(s)) => Some(s),
        Some(Value::Array(parts)) => parts
            .first()
            .and_then(|p| p.get("text"))
            .and_then(Value::as_str),
        _ => None,
    }
}

/// Runs `summarize` over documents.
pub struct Runner<'a> {
    args: &'a Args,
    env: &'a Env,
    tools: Option<Arc<Value>>,
    prompt: String,
    summary_text: Option<String>,
    engine: Engine,
    endpoint: Option<Endpoint>,
}

impl<'a> Runner<'a> {
    /// Resolves the engine and reads the files the run shares.
    pub fn new(args: &'a Args, env: &'a Env) -> Result<Runner<'a>> {
        let tools = args
            .model
            .tools
            .as_deref()
            .map(read_tools_file)
            .transpose()?;
        let mut prompt = match &args.prompt_file {
            Some(p) => std::fs::read_to_string(p)
                .with_context(|| format!("--prompt-file {}: cannot read", p.display()))?,
            None => DEFAULT_PROMPT.to_string(),
        };
        if let Some(extra) = &args.instructions {
            prompt.push_str("\n\n");
            prompt.push_str(extra);
        }
        let summary_text = match &args.summary_file {
            Some(p) => {
                let t = std::fs::read_to_string(p)
                    .with_context(|| format!("--summary-file {}: cannot read", p.display()))?;
                if t.trim().is_empty() {
                    bail!("--summary-file {}: the file is empty", p.display());
                }
                Some(t.trim().to_string())
            }
            None => None,
        };
        if args.max_summary_tokens == 0 {
            bail!("--max-summary-tokens must be at least 1");
        }
        if !(args.timeout > 0.0 && args.timeout.is_finite()) {
            bail!("--timeout must be a positive number of seconds");
        }
        let configured =
            args.base_url.is_some() || env.ctx_base_url.is_some() || env.ctx_api_key.is_some();
        let engine = match args.engine {
            Engine::Auto if summary_text.is_some() => Engine::Extractive,
            Engine::Auto if configured => Engine::Llm,
            Engine::Auto => Engine::Extractive,
            other => other,
        };
        if args.engine == Engine::Auto && summary_text.is_none() && !args.output.quiet {
            eprintln_note(match engine {
                Engine::Llm => {
                    "ctx: summarize: --engine auto chose llm (ctx is configured for an endpoint)"
                }
                _ => {
                    "ctx: summarize: --engine auto chose extractive (no --base-url, CTX_BASE_URL or CTX_API_KEY)"
                }
            });
        }
        let endpoint = (engine == Engine::Llm && summary_text.is_none()).then(|| Endpoint {
            base_url: args
                .base_url
                .clone()
                .or_else(|| env.ctx_base_url.clone())
                .or_else(|| env.openai_base_url.clone())
                .unwrap_or_else(|| "https://api.openai.com/v1".to_string()),
            api_key: env
                .ctx_api_key
                .clone()
                .or_else(|| env.openai_api_key.clone()),
            timeout: Duration::from_secs_f64(args.timeout),
            retries: args.retries,
            max_backoff: Duration::from_secs(30),
        });
        Ok(Runner {
            args,
            env,
            tools,
            prompt,
            summary_text,
            engine,
            endpoint,
        })
    }

    /// Summarizes one document.
    pub fn process(&self, _origin: &Origin, value: Value) -> Result<Outcome> {
        let args = self.args;
        let p = prepare(
            value,
            &args.input,
            &args.model,
            self.env,
            self.tools.clone(),
        )?;
        let counter = Counter::new(&p.settings, p.doc.dialect);
        let count = counter.document(&p.doc)?;
        let tokens_before = count.total();
        let dialect = p.doc.dialect;
        let msgs = p.doc.messages();
        let conv = Conversation::new(msgs, dialect);
        let pinned = conv.pinned_messages(&args.pin.pins())?;
        let n = msgs.len();

        // The running summary, if any, and how many messages it covers.
        let previous = (0..n).find_map(|i| {
            message_text(&msgs[i])
                .and_then(summary_header)
                .map(|c| (i, c))
        });
        // The boundary: the N newest messages, extended back to a unit boundary.
        let boundary = if args.keep_recent == 0 {
            n
        } else if n <= args.keep_recent {
            0
        } else {
            conv.units[conv.messages[n - args.keep_recent].unit].start
        };
        let range: Vec<usize> = (0..boundary)
            .filter(|&i| !pinned[i] && Some(i) != previous.map(|p| p.0))
            .filter(|&i| previous.is_none_or(|(s, _)| i > s))
            .collect();
        let since = previous.map_or(n, |(s, _)| n - s - 1);
        let over = match args.over_tokens {
            Some(b) => p.settings.budget_tokens(b)?,
            None => p
                .settings
                .default_budget(args.reserve, p.doc.body_max_tokens())
                .map_or(128_000, |b| b.min(128_000)),
        };
        let triggered = args.force || since >= args.after_messages || tokens_before as u64 > over;
        let range_tokens: usize = range.iter().map(|&i| count.messages[i].total()).sum();
        let mut report = json!({
            "command": "summarize",
            "triggered": triggered,
            "engine": match self.engine { Engine::Llm => "llm", _ if self.summary_text.is_some() => "file", _ => "extractive" },
            "range": range,
            "range_tokens": range_tokens,
            "tokens_before": tokens_before,
        });
        let mut warnings = p.warnings;
        warnings.extend(count.notes.warnings.iter().cloned());
        if args.dry_run {
            report["dry_run"] = json!(true);
            report["would_summarize"] = json!(triggered && !range.is_empty());
            return Ok(Outcome {
                stdout: render(&report, args.output.compact),
                warnings,
                ..Outcome::default()
            });
        }
        if !triggered || range.is_empty() {
            report["tokens_after"] = json!(tokens_before);
            return Ok(Outcome {
                stdout: render(p.doc.value(), args.output.compact),
                warnings,
                report: Some(report),
                ..Outcome::default()
            });
        }

        let prev_text = previous.and_then(|(s, _)| message_text(&msgs[s])).map(|t| {
            t.split_once('\n')
                .map_or("", |(_, rest)| rest)
                .trim()
                .to_string()
        });
        let covered = previous.map_or(0, |(_, c)| c) + range.len();
        let started = std::time::Instant::now();
        let summary_model = args
            .summary_model
            .clone()
            .or_else(|| self.env.summary_model.clone())
            .unwrap_or_else(|| p.settings.model_name.clone());
        let selected: Vec<Value> = range.iter().map(|&i| msgs[i].clone()).collect();
        let text: Result<String> = match (&self.summary_text, self.engine) {
            (Some(t), _) => Ok(t.clone()),
            (None, Engine::Llm) => self.llm_summary(
                &selected,
                dialect,
                prev_text.as_deref(),
                &summary_model,
                &counter,
            ),
            (None, _) => crate::extractive::summarize(
                &selected,
                dialect,
                p.settings.encoding,
                args.max_summary_tokens,
                prev_text.as_deref(),
            ),
        };
        let text = match text {
            Ok(t) => t,
            Err(e) => match args.on_error {
                OnError::Fail => {
                    return Err(SummarizerFailed {
                        reason: format!("{e:#}"),
                    }
                    .into());
                }
                OnError::Passthrough => {
                    report["fallback"] = json!("passthrough");
                    report["error"] = json!(format!("{e:#}"));
                    report["tokens_after"] = json!(tokens_before);
                    return Ok(Outcome {
                        stdout: render(p.doc.value(), args.output.compact),
                        warnings,
                        report: Some(report),
                        ..Outcome::default()
                    });
                }
                OnError::Truncate => {
                    report["fallback"] = json!("truncate");
                    report["error"] = json!(format!("{e:#}"));
                    String::new()
                }
            },
        };
        // Enforce the limit on whatever came back.
        let text = match clip_middle(p.settings.encoding, &text, args.max_summary_tokens)? {
            Some(cut) => cut,
            None => text,
        };
        let summary = if text.is_empty() {
            None
        } else {
            let role = match (dialect, args.summary_role) {
                (Dialect::Anthropic, _) | (_, SummaryRole::User) => "user",
                (Dialect::Openai, SummaryRole::System) => "system",
            };
            Some(
                json!({"role": role, "content": format!("{HEADER_PREFIX}{covered}{HEADER_SUFFIX}\n{text}")}),
            )
        };

        // Placement: where the first removed message was.
        let removed: Vec<usize> = range.iter().copied().chain(previous.map(|p| p.0)).collect();
        let first = *removed.iter().min().expect("range is not empty");
        let mut doc = p.doc;
        let input_first_user = first_role(doc.messages()).as_deref() == Some("user");
        let originals = std::mem::take(doc.messages_mut());
        let mut out = Vec::with_capacity(originals.len());
        let mut dropped = Vec::new();
        let mut summary = summary;
        for (i, m) in originals.into_iter().enumerate() {
            if i == first {
                if let Some(s) = summary.take() {
                    out.push(s);
                }
            }
            if removed.contains(&i) {
                let reason = if report.get("fallback").is_some() {
                    "truncated"
                } else {
                    "summarized"
                };
                dropped.push(Dropped {
                    index: i,
                    reason: reason.into(),
                    message: m,
                });
            } else {
                out.push(m);
            }
        }
        // I7: when the task itself was summarized (--no-keep-task), a system summary would
        // leave the output opening with an assistant message; the summary speaks as the user.
        if input_first_user && first_role(&out).as_deref() != Some("user") {
            if let Some(s) = out
                .iter_mut()
                .find(|m| message_text(m).and_then(summary_header).is_some())
            {
                s["role"] = json!("user");
            }
        }
        *doc.messages_mut() = out;
        let after = counter.document(&doc)?.total();
        report["tokens_after"] = json!(after);
        if report.get("fallback").is_none() {
            report["messages_covered"] = json!(covered);
        }
        report["latency_ms"] = json!(started.elapsed().as_millis() as u64);
        if self.endpoint.is_some() && self.summary_text.is_none() {
            report["model"] = json!(summary_model);
        }
        Ok(Outcome {
            stdout: render(&doc.into_value(), args.output.compact),
            warnings,
            report: Some(report),
            dropped,
            code: 0,
        })
    }

    /// The LLM engine: a transcript of the range, chunked when it exceeds the summarizer's
    /// window, then combined.
    fn llm_summary(
        &self,
        selected: &[Value],
        dialect: Dialect,
        previous: Option<&str>,
        model: &str,
        counter: &Counter,
    ) -> Result<String> {
        let endpoint = self.endpoint.as_ref().expect("llm engine has an endpoint");
        let window = crate::models::lookup(model).map_or(128_000, |m| m.context_window) as usize;
        let room = window
            .saturating_sub(self.args.max_summary_tokens + counter.text(&self.prompt)? + 200)
            .max(1000);
        let lines: Vec<String> = selected
            .iter()
            .map(|m| transcript_line(m, dialect, counter))
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
        let progress = chunks.len() > 1 && std::io::IsTerminal::is_terminal(&std::io::stderr());
        let call = |user: String| -> std::result::Result<String, crate::llm::LlmError> {
            let req = ChatRequest {
                model: model.to_string(),
                messages: vec![
                    json!({"role": "system", "content": self.prompt}),
                    json!({"role": "user", "content": user}),
                ],
                max_tokens: self.args.max_summary_tokens as u32,
            };
            crate::llm::chat(endpoint, &req).map(|r| r.text)
        };
        let mut parts = Vec::new();
        let n_chunks = chunks.len();
        for (k, chunk) in chunks.iter().enumerate() {
            if progress {
                eprintln_note(&format!("ctx: summarize: part {} of {}", k + 1, n_chunks));
            }
            // If the server says the request is still too long for its context, the oldest
            // half of what is left is dropped and the call retried.
            let mut from = 0;
            loop {
                let text = chunk[from..].join("\n");
                let user = match (previous, n_chunks) {
                    (Some(prev), 1) => format!(
                        "Extend this summary with the new messages below. Keep what still matters.\n\nSummary so far:\n{prev}\n\nNew messages:\n{text}"
                    ),
                    (_, 1) => format!("Conversation to summarize:\n{text}"),
                    _ => format!(
                        "Part {} of {n_chunks} of the conversation to summarize:\n{text}",
                        k + 1
                    ),
                };
                match call(user) {
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
            return Ok(parts.remove(0));
        }
        let mut combined =
            String::from("Combine these partial summaries, in order, into one summary.\n\n");
        if let Some(prev) = previous {
            combined.push_str(&format!("Summary of what came before them:\n{prev}\n\n"));
        }
        for (k, part) in parts.iter().enumerate() {
            combined.push_str(&format!("Part {}:\n{part}\n\n", k + 1));
        }
        call(combined).map_err(|e| anyhow::anyhow!("{e}"))
    }
}

/// The role of the first non-system message.
fn first_role(ms: &[Value]) -> Option<String> {
    ms.iter()
        .map(|m| m.get("role").and_then(Value::as_str).unwrap_or(""))
        .find(|r| !matches!(*r, "system" | "developer"))
        .map(str::to_string)
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

fn eprintln_note(s: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{s}");
}

/// One message as a transcript line: role, text, tool calls by name, long results shortened.
fn transcript_line(m: &Value, dialect: Dialect, counter: &Counter) -> Result<String> {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
    let mut parts: Vec<String> = Vec::new();
    let mut push_text = |t: &str, limit: usize| -> Result<()> {
        let t = match clip_middle(counter.settings.encoding, t, limit)? {
            Some(c) => c,
            None => t.to_string(),
        };
        if !t.trim().is_empty() {
            parts.push(t);
        }
        Ok(())
    };
    let is_result = matches!(role, "tool" | "function");
    let limit = if is_result { 200 } else { 2000 };
    match m.get("content") {
        Some(Value::String(s)) => push_text(s, limit)?,
        Some(Value::Array(blocks)) => {
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        push_text(b.get("text").and_then(Value::as_str).unwrap_or(""), limit)?
                    }
                    Some("tool_use") if dialect == Dialect::Anthropic => {
                        let name = b.get("name").and_then(Value::as_str).unwrap_or("?");
                        let input = b.get("input").map(Value::to_string).unwrap_or_default();
                        push_text(&format!("[called {name}({input})]"), 100)?;
                    }
                    Some("tool_result") => {
                        let c = b.get("content").map(|c| match c {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        });
                        push_text(&format!("[tool result] {}", c.unwrap_or_default()), 200)?;
                    }
                    Some("image" | "image_url") => push_text("[image]", 10)?,
                    _ => {}
                }
            }
        }
        _ => {}
    }
    for c in m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let f = c.get("function").unwrap_or(&Value::Null);
        let name = f.get("name").and_then(Value::as_str).unwrap_or("?");
        let a = f.get("arguments").and_then(Value::as_str).unwrap_or("");
        push_text(&format!("[called {name}({a})]"), 100)?;
    }
    if let Some(fc) = m.get("function_call").filter(|f| f.is_object()) {
        let name = fc.get("name").and_then(Value::as_str).unwrap_or("?");
        let a = fc.get("arguments").and_then(Value::as_str).unwrap_or("");
        push_text(&format!("[called {name}({a})]"), 100)?;
    }
    Ok(format!("{role}: {}", parts.join(" ")))
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
    fn headers_are_recognised() {
        assert_eq!(
            summary_header("[ctx summary of 12 earlier messages]\nTask: x"),
            Some(12)
        );
        assert_eq!(summary_header("[ctx summary of x earlier messages]"), None);
        assert_eq!(summary_header("hello"), None);
    }
}
