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
use crate::conversation::{Conversation, PinOptions};
use crate::counter::{Counter, DocumentCount, Notes};
use crate::document::{Dialect, Document};
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

    #[command(flatten)]
    pub summary: SummaryArgs,

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

/// How a summary is made and placed: the flags `summarize` shares with `fit`.
#[derive(clap::Args, Clone, Debug)]
pub struct SummaryArgs {
    /// At least the N newest messages stay verbatim (extended back to a unit boundary).
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub keep_recent: usize,

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

/// Where summaries come from, resolved once per run: the engine, its endpoint and prompt, or
/// the text of `--summary-file`. `summarize` and `fit`'s summarize stage share it.
pub struct Summarizer {
    engine: Engine,
    summary_text: Option<String>,
    endpoint: Option<Endpoint>,
    prompt: String,
    summary_model: Option<String>,
    max_summary_tokens: usize,
    summary_role: SummaryRole,
    on_error: OnError,
    /// Which engine `--engine auto` chose, for the user (see [`Summarizer::note`]).
    note: Option<String>,
    /// Whether the parts of a long LLM summary are counted out on stderr.
    progress: bool,
}

impl Summarizer {
    /// Resolves `engine` (auto picks llm only when ctx itself is configured for an endpoint,
    /// and [`Summarizer::note`] says which) and reads the prompt and summary files. Unless
    /// `quiet`, a long LLM summary counts its parts out on stderr when stderr is a terminal.
    pub fn new(
        args: &SummaryArgs,
        engine: Engine,
        env: &Env,
        quiet: bool,
        command: &str,
    ) -> Result<Summarizer> {
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
        let resolved = match engine {
            Engine::Auto if summary_text.is_some() => Engine::Extractive,
            Engine::Auto if configured => Engine::Llm,
            Engine::Auto => Engine::Extractive,
            other => other,
        };
        let note = (engine == Engine::Auto && summary_text.is_none()).then(|| match resolved {
            Engine::Llm => {
                format!("{command}: --engine auto chose llm (ctx is configured for an endpoint)")
            }
            _ => format!(
                "{command}: --engine auto chose extractive (no --base-url, CTX_BASE_URL or CTX_API_KEY)"
            ),
        });
        let endpoint = (resolved == Engine::Llm && summary_text.is_none()).then(|| Endpoint {
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
        Ok(Summarizer {
            engine: resolved,
            summary_text,
            endpoint,
            prompt,
            summary_model: args
                .summary_model
                .clone()
                .or_else(|| env.summary_model.clone()),
            max_summary_tokens: args.max_summary_tokens,
            summary_role: args.summary_role,
            on_error: args.on_error,
            note,
            progress: !quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        })
    }

    /// A note for the user about the run, such as which engine `--engine auto` chose, without
    /// the `ctx: ` prefix. The caller shows it once: on stderr, or in the report.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// `llm`, `extractive`, or `file` (`--summary-file`).
    pub fn engine_name(&self) -> &'static str {
        match self.engine {
            _ if self.summary_text.is_some() => "file",
            Engine::Llm => "llm",
            _ => "extractive",
        }
    }

    /// The summary text of `selected`, extending `previous` when there is one.
    fn text(
        &self,
        selected: &[Value],
        dialect: Dialect,
        previous: Option<&str>,
        model: &str,
        counter: &Counter,
    ) -> Result<String> {
        match (&self.summary_text, self.engine) {
            (Some(t), _) => Ok(t.clone()),
            (None, Engine::Llm) => self.llm_summary(selected, dialect, previous, model, counter),
            (None, _) => crate::extractive::summarize(
                selected,
                dialect,
                counter.settings.encoding,
                self.max_summary_tokens,
                previous,
            ),
        }
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
            .saturating_sub(self.max_summary_tokens + counter.text(&self.prompt)? + 200)
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
        let progress = self.progress && chunks.len() > 1;
        let call = |user: String| -> std::result::Result<String, crate::llm::LlmError> {
            let req = ChatRequest {
                model: model.to_string(),
                messages: vec![
                    json!({"role": "system", "content": self.prompt}),
                    json!({"role": "user", "content": user}),
                ],
                max_tokens: self.max_summary_tokens as u32,
            };
            crate::llm::chat(endpoint, &req).map(|r| r.text)
        };
        let mut parts = Vec::new();
        let n_chunks = chunks.len();
        for (k, chunk) in chunks.iter().enumerate() {
            if progress {
                crate::output::stderr_line(&format!(
                    "ctx: summarize: part {} of {}",
                    k + 1,
                    n_chunks
                ));
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
}

/// Chooses the range: every unpinned message older than the `keep_recent` newest (extended
/// back to a unit boundary), after the running summary if there is one.
pub fn plan(doc: &Document, count: &DocumentCount, opts: &Options) -> Result<Plan> {
    let msgs = doc.messages();
    let conv = Conversation::new(msgs, doc.dialect);
    let pinned = conv.pinned_messages(&opts.pins)?;
    let n = msgs.len();
    let previous = (0..n).find_map(|i| {
        message_text(&msgs[i])
            .and_then(summary_header)
            .map(|c| (i, c))
    });
    let boundary = if opts.keep_recent == 0 {
        n
    } else if n <= opts.keep_recent {
        0
    } else {
        conv.units[conv.messages[n - opts.keep_recent].unit].start
    };
    let range: Vec<usize> = (0..boundary)
        .filter(|&i| !pinned[i] && Some(i) != previous.map(|p| p.0))
        .filter(|&i| previous.is_none_or(|(s, _)| i > s))
        .collect();
    let since = previous.map_or(n, |(s, _)| n - s - 1);
    let triggered =
        opts.force || since >= opts.after_messages || count.total() as u64 > opts.over_tokens;
    let range_tokens = range.iter().map(|&i| count.messages[i].total()).sum();
    Ok(Plan {
        previous,
        range,
        range_tokens,
        triggered,
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
    /// The model asked, for the llm engine.
    pub model: Option<String>,
    pub latency_ms: u64,
    /// Originals of the summarized (or, on fallback, dropped) messages.
    pub dropped: Vec<Dropped>,
    /// For each output message, its index in the input (None for the new summary).
    pub origins: Vec<Option<usize>>,
}

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
        if self.plan.triggered && !self.plan.range.is_empty() {
            r["latency_ms"] = json!(self.latency_ms);
        }
        if let Some(m) = &self.model {
            r["model"] = json!(m);
        }
        r
    }
}

/// Summarizes `doc` (already counted as `count`) when a trigger holds: the one implementation
/// behind `ctx summarize` and `fit`'s summarize stage.
pub fn summarize(
    doc: Document,
    counter: &Counter,
    count: &DocumentCount,
    opts: &Options,
    s: &Summarizer,
) -> Result<Summarization> {
    let plan = plan(&doc, count, opts)?;
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
        model: None,
        latency_ms: 0,
        dropped: Vec::new(),
    };
    if !out.plan.triggered || out.plan.range.is_empty() {
        out.origins = (0..out.doc.messages().len()).map(Some).collect();
        return Ok(out);
    }
    let msgs = out.doc.messages();
    let previous = out.plan.previous;
    let prev_text = previous.and_then(|(i, _)| message_text(&msgs[i])).map(|t| {
        t.split_once('\n')
            .map_or("", |(_, rest)| rest)
            .trim()
            .to_string()
    });
    let covered = previous.map_or(0, |(_, c)| c) + out.plan.range.len();
    let started = std::time::Instant::now();
    let summary_model = s
        .summary_model
        .clone()
        .unwrap_or_else(|| counter.settings.model_name.clone());
    if s.endpoint.is_some() {
        out.model = Some(summary_model.clone());
    }
    let selected: Vec<Value> = out.plan.range.iter().map(|&i| msgs[i].clone()).collect();
    let text = match s.text(
        &selected,
        dialect,
        prev_text.as_deref(),
        &summary_model,
        counter,
    ) {
        Ok(t) => t,
        Err(e) => match s.on_error {
            OnError::Fail => {
                return Err(SummarizerFailed {
                    reason: format!("{e:#}"),
                }
                .into());
            }
            OnError::Passthrough => {
                out.fallback = Some("passthrough");
                out.error = Some(format!("{e:#}"));
                out.latency_ms = started.elapsed().as_millis() as u64;
                out.origins = (0..out.doc.messages().len()).map(Some).collect();
                return Ok(out);
            }
            OnError::Truncate => {
                out.fallback = Some("truncate");
                out.error = Some(format!("{e:#}"));
                String::new()
            }
        },
    };
    // Enforce the limit on whatever came back.
    let text = match clip_middle(counter.settings.encoding, &text, s.max_summary_tokens)? {
        Some(cut) => cut,
        None => text,
    };
    let mut summary = (!text.is_empty()).then(|| {
        let role = match (dialect, s.summary_role) {
            (Dialect::Anthropic, _) | (_, SummaryRole::User) => "user",
            (Dialect::Openai, SummaryRole::System) => "system",
        };
        json!({"role": role, "content": format!("{HEADER_PREFIX}{covered}{HEADER_SUFFIX}\n{text}")})
    });
    if summary.is_some() {
        out.covered = Some(covered);
    }

    // Placement: where the first removed message was.
    let mut removed = vec![false; msgs.len()];
    for &i in out.plan.range.iter().chain(previous.iter().map(|p| &p.0)) {
        removed[i] = true;
    }
    let first = removed.iter().position(|&r| r).expect("range is not empty");
    let input_first_user = first_role(msgs).as_deref() == Some("user");
    let originals = std::mem::take(out.doc.messages_mut());
    let mut kept = Vec::with_capacity(originals.len());
    let mut tokens_after = tokens_before;
    let reason = if out.fallback.is_some() {
        "truncated"
    } else {
        "summarized"
    };
    for (i, m) in originals.into_iter().enumerate() {
        if i == first {
            if let Some(s) = summary.take() {
                kept.push(s);
                out.origins.push(None);
            }
        }
        if removed[i] {
            tokens_after -= count.messages[i].total();
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
    // I7: when the task itself was summarized (--no-keep-task), a system summary would
    // leave the output opening with an assistant message; the summary speaks as the user.
    if input_first_user && first_role(&kept).as_deref() != Some("user") {
        if let Some(s) = kept
            .iter_mut()
            .find(|m| message_text(m).and_then(summary_header).is_some())
        {
            s["role"] = json!("user");
        }
    }
    if let Some(k) = out.origins.iter().position(Option::is_none) {
        tokens_after += counter.message(&kept[k], &mut Notes::default())?.total();
    }
    *out.doc.messages_mut() = kept;
    out.tokens_after = tokens_after;
    out.latency_ms = started.elapsed().as_millis() as u64;
    Ok(out)
}

/// Runs `summarize` over documents.
pub struct Runner<'a> {
    args: &'a Args,
    env: &'a Env,
    tools: Option<Arc<Value>>,
    summarizer: Summarizer,
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
        let summarizer = Summarizer::new(
            &args.summary,
            args.engine,
            env,
            args.output.quiet || args.side.report_to_stderr(),
            "summarize",
        )?;
        Ok(Runner {
            args,
            env,
            tools,
            summarizer,
        })
    }

    /// Notes about the whole run for the user (which engine `--engine auto` chose).
    pub fn notes(&self) -> Vec<String> {
        self.summarizer
            .note()
            .map(String::from)
            .into_iter()
            .collect()
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
        let over_tokens = match args.over_tokens {
            Some(b) => p.settings.budget_tokens(b)?,
            None => p
                .settings
                .default_budget(args.reserve, p.doc.body_max_tokens())
                .map_or(128_000, |b| b.min(128_000)),
        };
        let opts = Options {
            keep_recent: args.summary.keep_recent,
            after_messages: args.after_messages,
            over_tokens,
            force: args.force,
            pins: args.pin.pins(),
        };
        let mut warnings = p.warnings;
        warnings.extend(count.notes.warnings.iter().cloned());
        if args.dry_run {
            let plan = plan(&p.doc, &count, &opts)?;
            let report = json!({
                "command": "summarize",
                "triggered": plan.triggered,
                "engine": self.summarizer.engine_name(),
                "range": plan.range,
                "range_tokens": plan.range_tokens,
                "tokens_before": count.total(),
                "dry_run": true,
                "would_summarize": plan.triggered && !plan.range.is_empty(),
            });
            return Ok(Outcome {
                stdout: render(&report, args.output.compact),
                warnings,
                ..Outcome::default()
            });
        }
        let s = summarize(p.doc, &counter, &count, &opts, &self.summarizer)?;
        let report = s.report(self.summarizer.engine_name());
        Ok(Outcome {
            stdout: render(&s.doc.into_value(), args.output.compact),
            warnings,
            report: Some(report),
            dropped: s.dropped,
            code: 0,
        })
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
