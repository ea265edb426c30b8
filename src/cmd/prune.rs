//! `ctx prune`: shrink old tool traffic without removing messages (SPEC §4).
//!
//! Anthropic-style context editing for any provider: older tool results are replaced by a
//! placeholder that keeps the message and its id, huge results are clipped middle-out, and old
//! reasoning can be dropped. No message is removed and no pair is broken, so the output is as
//! valid as the input. [`prune`] is the one implementation; `fit`'s prune stages call it.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::{Dropped, Env, InputArgs, Outcome, OutputArgs, PinArgs, SideArgs, prepare};
use crate::clip::{DEFAULT_PLACEHOLDER, Template, clip_middle};
use crate::conversation::{Conversation, PinOptions, Role};
use crate::counter::{Counter, DocumentCount, MessageTokens, Notes};
use crate::document::{Dialect, Document, Field};
use crate::input::Origin;
use crate::output::render;
use crate::settings::{Budget, ModelArgs, read_tools_file};

/// Clear old tool results (and optionally old reasoning), keeping every message and id.
///
/// The N most recent tool results stay verbatim; older ones become a placeholder naming the
/// tool and its size and telling the model it can call the tool again. Results of
/// --exclude-tools, error results (unless --include-errors), pinned messages and results already
/// cleared are left alone. Nothing is removed, so no tool call loses its result.
///
/// Example:
///   ctx prune --keep 5 --max-tool-tokens 2000 < agent.json | ctx count
///   ctx prune --trigger 80% --clear-at-least 5000 --exclude-tools memory < body.json
///
/// Exit codes: 0 ok; 2 bad input or flags.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    /// Most recent tool results kept verbatim (each result of a parallel call counts; results
    /// of excluded tools and error results do not).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub keep: usize,

    /// Placeholder text for cleared results; {tool}, {tokens} and {chars} are replaced.
    #[arg(long, value_name = "TEXT", default_value = DEFAULT_PLACEHOLDER)]
    pub placeholder: String,

    /// Do nothing unless the document is over N tokens or P% of the window (lowered, with a
    /// warning, to the window minus the reserve: the provider would reject a larger request).
    #[arg(long, value_name = "N|P%")]
    pub trigger: Option<Budget>,

    /// Tokens kept free for the reply: --trigger never goes above the window minus this
    /// (default: the body's max_tokens / max_completion_tokens, else 4096).
    #[arg(long, value_name = "N")]
    pub reserve: Option<u64>,

    /// Clear nothing unless at least N tokens would be cleared.
    #[arg(long, value_name = "N")]
    pub clear_at_least: Option<usize>,

    /// Never clear or clip the results of these tools.
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub exclude_tools: Vec<String>,

    /// Also replace the arguments of cleared calls with {}.
    #[arg(long)]
    pub clear_inputs: bool,

    /// Clip any tool result over N tokens middle-out (head and tail kept, a marker with the
    /// omitted count between), kept results included.
    #[arg(long, value_name = "N")]
    pub max_tool_tokens: Option<usize>,

    /// Drop reasoning (thinking, redacted_thinking, reasoning_content) from older assistant
    /// turns (`old`) or all of them (`all`); never from an unfinished tool loop.
    #[arg(long, value_enum, default_value = "keep")]
    pub thinking: Thinking,

    /// Clear error results too (Anthropic `is_error: true`).
    #[arg(long)]
    pub include_errors: bool,

    #[command(flatten)]
    pub pin: PinArgs,

    #[command(flatten)]
    pub side: SideArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// `--thinking` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Thinking {
    Keep,
    Old,
    All,
}

/// What to prune and how.
#[derive(Clone, Debug)]
pub struct Options {
    pub keep: usize,
    pub placeholder: String,
    /// Resolved `--trigger` in tokens.
    pub trigger: Option<u64>,
    pub clear_at_least: Option<usize>,
    pub exclude_tools: Vec<String>,
    pub clear_inputs: bool,
    pub max_tool_tokens: Option<usize>,
    pub thinking: Thinking,
    pub include_errors: bool,
    pub pins: PinOptions,
    /// Copy the original of every changed message into `Pruning::dropped` (for `--dropped`);
    /// without it their `message` is null and nothing is copied.
    pub keep_originals: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            keep: 3,
            placeholder: DEFAULT_PLACEHOLDER.to_string(),
            trigger: None,
            clear_at_least: None,
            exclude_tools: Vec::new(),
            clear_inputs: false,
            max_tool_tokens: None,
            thinking: Thinking::Keep,
            include_errors: false,
            pins: PinOptions::default(),
            keep_originals: true,
        }
    }
}

/// What pruning did to one document.
#[derive(Debug)]
pub struct Pruning {
    pub doc: Document,
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// False when `--trigger` or `--clear-at-least` held it back.
    pub triggered: bool,
    /// (message index, tool, tokens of the cleared result).
    pub cleared: Vec<(usize, String, usize)>,
    /// (message index, tokens before, tokens after) of clipped results.
    pub clipped: Vec<(usize, usize, usize)>,
    /// Messages whose reasoning was dropped.
    pub thinking: Vec<usize>,
    pub dropped: Vec<Dropped>,
    /// The new count of every changed message (the messages of `dropped`), in the same order,
    /// so that callers need not tokenize them again.
    pub recounted: Vec<MessageTokens>,
}

/// One tool result in the document.
struct ResultRef {
    message: usize,
    /// JSON pointer to the value holding the result's content (`/content` for a tool message,
    /// `/content/2/content` for an Anthropic block).
    pointer: String,
    tool: String,
    /// The call it answers: (message, pointer to the arguments/input).
    call_args: Option<(usize, String)>,
    is_error: bool,
    pinned: bool,
}

/// Prunes `doc` (already counted as `count`).
pub fn prune(
    doc: Document,
    counter: &Counter,
    count: &DocumentCount,
    opts: &Options,
) -> Result<Pruning> {
    prune_with(doc, counter, count, opts, None).map(|(pruning, _)| pruning)
}

/// What prune reads of a document's structure before changing anything: its conversation
/// model, pins and tool results. Clearing and clipping results leave that structure as it was,
/// so fit hands it from one prune stage to the next instead of reading it again.
pub struct Structure {
    conv: Conversation,
    pinned: Vec<bool>,
    results: Vec<ResultRef>,
}

impl Structure {
    /// The conversation model, for a later stage that needs it.
    pub fn into_conversation(self) -> Conversation {
        self.conv
    }
}

/// `prune`, reusing `structure` if an earlier prune of this same document (with the same pins)
/// returned it. Returns the structure again when it is still valid for the pruned document
/// (it is not once reasoning blocks were dropped, which moves content blocks).
pub fn prune_with(
    doc: Document,
    counter: &Counter,
    count: &DocumentCount,
    opts: &Options,
    structure: Option<Structure>,
) -> Result<(Pruning, Option<Structure>)> {
    let tokens_before = count.total();
    let mut out = Pruning {
        doc,
        tokens_before,
        tokens_after: tokens_before,
        triggered: true,
        cleared: Vec::new(),
        clipped: Vec::new(),
        thinking: Vec::new(),
        dropped: Vec::new(),
        recounted: Vec::new(),
    };
    if opts.trigger.is_some_and(|t| tokens_before as u64 <= t) {
        out.triggered = false;
        return Ok((out, structure));
    }
    let template = Template::parse(&opts.placeholder);
    let dialect = out.doc.dialect;
    let Structure {
        conv,
        pinned,
        results,
    } = match structure {
        Some(s) => s,
        None => {
            let conv = Conversation::new(out.doc.messages(), dialect);
            let pinned = conv.pinned_messages(&opts.pins)?;
            let results = tool_results(&conv, out.doc.messages(), dialect, &pinned);
            Structure {
                conv,
                pinned,
                results,
            }
        }
    };
    let mut messages = std::mem::take(out.doc.messages_mut());
    let mut reasons: BTreeMap<usize, Vec<&'static str>> = BTreeMap::new();
    // Every changed message, with its original before the first change when it is needed
    // (for --dropped, or to undo step 1): copied only when a message is about to change.
    let copy = opts.keep_originals || opts.clear_at_least.is_some();
    let mut originals: BTreeMap<usize, Option<Value>> = BTreeMap::new();
    // New counts of cleared tool messages, worked out without tokenizing them again.
    let mut recount: BTreeMap<usize, MessageTokens> = BTreeMap::new();
    let save = |originals: &mut BTreeMap<usize, Option<Value>>, messages: &[Value], m: usize| {
        originals
            .entry(m)
            .or_insert_with(|| copy.then(|| messages[m].clone()));
    };

    // 1. Clear older results.
    let eligible: Vec<&ResultRef> = results
        .iter()
        .filter(|r| !r.pinned && !opts.exclude_tools.contains(&r.tool))
        .filter(|r| opts.include_errors || !r.is_error)
        .filter(|r| {
            !content_text(&messages[r.message], &r.pointer).is_some_and(|t| template.matches(t))
        })
        .collect();
    let to_clear = &eligible[..eligible.len().saturating_sub(opts.keep)];
    let mut cleared = Vec::new();
    for r in to_clear {
        let Some(value) = at(&messages[r.message], &r.pointer) else {
            continue;
        };
        let whole_message = r.pointer == "/content" && value.is_string();
        let (tokens, chars) = match value {
            // A whole tool message: its content's tokens are already known from counting the
            // document, so it is not tokenized a second time.
            Value::String(text) if whole_message => {
                (count.messages[r.message].text, text.chars().count())
            }
            _ => {
                let text = text_of(value);
                (counter.text(&text)?, text.chars().count())
            }
        };
        let placeholder = template.render(&r.tool, tokens, chars);
        if has_media(value) {
            // Images and documents cost tokens too: compare the whole message both ways.
            let before = counter.message(&messages[r.message], &mut Notes::default())?;
            let first_change = !originals.contains_key(&r.message);
            save(&mut originals, &messages, r.message);
            let old = std::mem::replace(
                at_mut(&mut messages[r.message], &r.pointer).expect("located"),
                Value::String(placeholder),
            );
            let after = counter.message(&messages[r.message], &mut Notes::default())?;
            if after.total() >= before.total() {
                *at_mut(&mut messages[r.message], &r.pointer).expect("located") = old;
                if first_change {
                    originals.remove(&r.message);
                }
                continue; // Clearing would not save anything.
            }
        } else {
            let placeholder_tokens = counter.text(&placeholder)?;
            if placeholder_tokens >= tokens {
                continue; // Clearing would not save anything.
            }
            if whole_message {
                // The message's count is additive over its fields, so its new count follows
                // from the old one without tokenizing it again.
                let old = count.messages[r.message];
                let content = old.content - tokens + placeholder_tokens;
                let text = placeholder_tokens;
                recount.insert(
                    r.message,
                    MessageTokens {
                        content,
                        text,
                        ..old
                    },
                );
            }
            save(&mut originals, &messages, r.message);
            *at_mut(&mut messages[r.message], &r.pointer).expect("located") =
                Value::String(placeholder);
        }
        if opts.clear_inputs {
            if let Some((m, p)) = &r.call_args {
                if at(&messages[*m], p).is_some() {
                    save(&mut originals, &messages, *m);
                }
                if let Some(args) = at_mut(&mut messages[*m], p) {
                    *args = if args.is_string() {
                        Value::String("{}".into())
                    } else {
                        json!({})
                    };
                }
            }
        }
        cleared.push((r.message, r.tool.clone(), tokens));
    }
    if !cleared.is_empty() {
        // Every message step 1 changed: the cleared results and the calls whose inputs it
        // cleared.
        let touched: Vec<usize> = originals.keys().copied().collect();
        let worth_it = match opts.clear_at_least {
            None => true,
            Some(min) => {
                let mut before = 0;
                let mut after = 0;
                for &m in &touched {
                    before += count.messages[m].total();
                    after += counter
                        .message(&messages[m], &mut Notes::default())?
                        .total();
                }
                before.saturating_sub(after) >= min
            }
        };
        if worth_it {
            for &m in &touched {
                reasons.entry(m).or_default().push("cleared");
            }
            out.cleared = cleared;
        } else {
            // Not worth it: every message goes back to what it was.
            for (&m, original) in &originals {
                messages[m] = original
                    .clone()
                    .expect("copied when --clear-at-least is set");
            }
            out.triggered = false;
        }
    }

    // 2. Clip results over --max-tool-tokens, kept ones included.
    if let Some(max) = opts.max_tool_tokens {
        for r in results
            .iter()
            .filter(|r| !r.pinned && !opts.exclude_tools.contains(&r.tool))
        {
            if content_text(&messages[r.message], &r.pointer).is_some_and(|t| template.matches(t)) {
                continue; // A placeholder is never clipped.
            }
            let unchanged = !reasons.contains_key(&r.message);
            if unchanged && count.messages[r.message].content <= max {
                continue; // Its whole text is within the limit: no need to tokenize it again.
            }
            let before = if unchanged {
                count.messages[r.message].total()
            } else {
                counter
                    .message(&messages[r.message], &mut Notes::default())?
                    .total()
            };
            let mut changed = false;
            if at(&messages[r.message], &r.pointer).is_none() {
                continue;
            }
            save(&mut originals, &messages, r.message);
            let value = at_mut(&mut messages[r.message], &r.pointer).expect("located");
            match value {
                Value::String(s) => {
                    if let Some(c) = clip_middle(counter.settings.encoding, s, max)? {
                        *s = c;
                        changed = true;
                    }
                }
                Value::Array(blocks) => {
                    let texts: Vec<usize> = (0..blocks.len())
                        .filter(|&i| blocks[i].field("text").is_some_and(Value::is_string))
                        .collect();
                    let total: usize = texts
                        .iter()
                        .map(|&i| counter.text(blocks[i]["text"].as_str().unwrap_or("")))
                        .sum::<Result<usize>>()?;
                    if total > max {
                        let share = max / texts.len().max(1);
                        for &i in &texts {
                            let t = blocks[i]["text"].as_str().unwrap_or("").to_string();
                            if let Some(c) = clip_middle(counter.settings.encoding, &t, share)? {
                                blocks[i]["text"] = Value::String(c);
                                changed = true;
                            }
                        }
                    }
                }
                _ => {}
            }
            if changed {
                let after = counter
                    .message(&messages[r.message], &mut Notes::default())?
                    .total();
                out.clipped.push((r.message, before, after));
                reasons.entry(r.message).or_default().push("clipped");
            }
        }
    }

    // 3. Drop reasoning from older (or all) assistant turns, never from an unfinished loop.
    if opts.thinking != Thinking::Keep {
        let last_turn = conv.turns.last().copied().unwrap_or(0);
        let unfinished = conv.messages.last().is_some_and(|m| {
            !m.results.is_empty() || (m.role == Role::Assistant && !m.calls.is_empty())
        });
        for (i, m) in conv.messages.iter().enumerate() {
            if m.role != Role::Assistant || pinned[i] {
                continue;
            }
            let old = i < last_turn;
            let protected = unfinished && i > last_turn;
            let drop = match opts.thinking {
                Thinking::Keep => false,
                Thinking::Old => old,
                Thinking::All => !protected,
            };
            if drop && has_reasoning(&messages[i], dialect) {
                save(&mut originals, &messages, i);
                drop_reasoning(&mut messages[i], dialect);
                debug_assert!(!has_reasoning(&messages[i], dialect));
                out.thinking.push(i);
                reasons.entry(i).or_default().push("thinking");
            }
        }
    }

    let mut total = tokens_before;
    for (&m, why) in &reasons {
        let now = match recount.get(&m) {
            Some(&known) if why.as_slice() == ["cleared"] => {
                debug_assert_eq!(
                    Some(known),
                    counter.message(&messages[m], &mut Notes::default()).ok(),
                    "message {m}"
                );
                known
            }
            _ => counter.message(&messages[m], &mut Notes::default())?,
        };
        total = total - count.messages[m].total() + now.total();
        out.recounted.push(now);
    }
    out.tokens_after = total;
    out.dropped = reasons
        .into_iter()
        .map(|(m, why)| Dropped {
            index: m,
            reason: why.join(","),
            message: originals.remove(&m).flatten().unwrap_or(Value::Null),
        })
        .collect();
    *out.doc.messages_mut() = messages;
    let structure = out.thinking.is_empty().then_some(Structure {
        conv,
        pinned,
        results,
    });
    Ok((out, structure))
}

/// Every tool result, in order, with the tool it belongs to and the call it answers.
fn tool_results(
    conv: &Conversation,
    messages: &[Value],
    dialect: Dialect,
    pinned: &[bool],
) -> Vec<ResultRef> {
    let mut out = Vec::new();
    for (i, m) in conv.messages.iter().enumerate() {
        for r in &m.results {
            let pointer = if r.path.is_empty() {
                "/content".to_string()
            } else {
                format!("{}/content", path_to_pointer(&r.path))
            };
            let call = r.answers.map(|c| (c, conv.call(c)));
            let tool = r
                .name
                .clone()
                .or_else(|| call.and_then(|(_, c)| c.name.clone()))
                .unwrap_or_else(|| "unknown".to_string());
            let call_args = call.map(|(c, call)| {
                let base = path_to_pointer(&call.path);
                let p = match dialect {
                    Dialect::Openai if call.legacy => format!("{base}/arguments"),
                    Dialect::Openai => format!("{base}/function/arguments"),
                    Dialect::Anthropic => format!("{base}/input"),
                };
                (c.message, p)
            });
            if at(&messages[i], &pointer).is_none() && dialect == Dialect::Anthropic {
                continue; // A tool_result without content: nothing to clear.
            }
            out.push(ResultRef {
                message: i,
                pointer,
                tool,
                call_args,
                is_error: r.is_error,
                pinned: pinned[i],
            });
        }
    }
    out
}

/// `.content[2]` → `/content/2`.
fn path_to_pointer(path: &str) -> String {
    let mut pointer = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            '[' | '.' if pointer.ends_with('/') => {}
            '[' | '.' => pointer.push('/'),
            ']' => {}
            c => pointer.push(c),
        }
    }
    pointer
}

/// Follows a pointer made by `path_to_pointer`: fixed key names and indices, never escaped, so
/// unlike `Value::pointer` nothing is allocated on the way.
fn at<'a>(v: &'a Value, pointer: &str) -> Option<&'a Value> {
    pointer.split('/').skip(1).try_fold(v, |v, key| match v {
        Value::Object(map) => map.get(key),
        Value::Array(items) => items.get(key.parse::<usize>().ok()?),
        _ => None,
    })
}

/// `at`, for changing the value.
fn at_mut<'a>(v: &'a mut Value, pointer: &str) -> Option<&'a mut Value> {
    pointer.split('/').skip(1).try_fold(v, |v, key| match v {
        Value::Object(map) => map.get_mut(key),
        Value::Array(items) => items.get_mut(key.parse::<usize>().ok()?),
        _ => None,
    })
}

/// The text of a result's content (a string, or the text blocks of a block list).
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.field("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn content_text<'a>(m: &'a Value, pointer: &str) -> Option<&'a str> {
    at(m, pointer).and_then(Value::as_str)
}

fn has_media(v: &Value) -> bool {
    v.as_array().is_some_and(|b| {
        b.iter()
            .any(|x| x.field("type").and_then(Value::as_str) != Some("text"))
    })
}

/// Removes reasoning from an assistant message; false when there was none (or removing it
/// would leave the message empty).
/// True when `drop_reasoning` would change `m`.
fn has_reasoning(m: &Value, dialect: Dialect) -> bool {
    if m.field("reasoning_content").is_some() {
        return true;
    }
    dialect == Dialect::Anthropic
        && m.field("content")
            .and_then(Value::as_array)
            .is_some_and(|blocks| {
                let is_reasoning = |b: &Value| {
                    matches!(
                        b.field("type").and_then(Value::as_str),
                        Some("thinking" | "redacted_thinking")
                    )
                };
                blocks.iter().any(is_reasoning) && !blocks.iter().all(is_reasoning)
            })
}

fn drop_reasoning(m: &mut Value, dialect: Dialect) -> bool {
    let mut changed = false;
    if let Some(obj) = m.as_object_mut() {
        if obj.shift_remove("reasoning_content").is_some() {
            changed = true;
        }
    }
    if dialect == Dialect::Anthropic {
        if let Some(Value::Array(blocks)) = m.get_mut("content") {
            let is_reasoning = |b: &Value| {
                matches!(
                    b.field("type").and_then(Value::as_str),
                    Some("thinking" | "redacted_thinking")
                )
            };
            if blocks.iter().any(is_reasoning) && !blocks.iter().all(is_reasoning) {
                blocks.retain(|b| !is_reasoning(b));
                changed = true;
            }
        }
    }
    changed
}

/// Runs `prune` over documents.
pub struct Runner<'a> {
    args: &'a Args,
    env: &'a Env,
    tools: Option<Arc<Value>>,
}

impl<'a> Runner<'a> {
    /// Reads what the run shares.
    pub fn new(args: &'a Args, env: &'a Env) -> Result<Runner<'a>> {
        let tools = args
            .model
            .tools
            .as_deref()
            .map(|p| read_tools_file(p, args.input.max_input_size))
            .transpose()?;
        if args.max_tool_tokens == Some(0) {
            bail!("--max-tool-tokens must be at least 1");
        }
        Ok(Runner { args, env, tools })
    }

    /// Prunes one document.
    pub fn process(&self, _origin: &Origin, value: Value) -> Result<Outcome> {
        let mut p = prepare(
            value,
            &self.args.input,
            &self.args.model,
            self.env,
            self.tools.clone(),
        )?;
        let trigger = self
            .args
            .trigger
            .map(|t| p.request_tokens("--trigger", t, self.args.reserve))
            .transpose()?;
        let counter = Counter::new(&p.settings, p.doc.dialect);
        let count = counter.document(&p.doc)?;
        let opts = Options {
            keep: self.args.keep,
            placeholder: self.args.placeholder.clone(),
            trigger,
            clear_at_least: self.args.clear_at_least,
            exclude_tools: self.args.exclude_tools.clone(),
            clear_inputs: self.args.clear_inputs,
            max_tool_tokens: self.args.max_tool_tokens,
            thinking: self.args.thinking,
            include_errors: self.args.include_errors,
            pins: self.args.pin.pins(),
            keep_originals: self.args.side.dropped.is_some(),
        };
        let r = prune(p.doc, &counter, &count, &opts)?;
        let report = json!({
            "command": "prune",
            "triggered": r.triggered,
            "tokens_before": r.tokens_before,
            "tokens_after": r.tokens_after,
            "cleared": r.cleared.iter().map(|(i, t, n)| json!({"index": i, "tool": t, "tokens": n})).collect::<Vec<_>>(),
            "clipped": r.clipped.iter().map(|&(i, b, a)| json!({"index": i, "tokens_before": b, "tokens_after": a})).collect::<Vec<_>>(),
            "thinking": r.thinking,
        });
        let mut warnings = p.warnings;
        warnings.extend(count.notes.warnings.iter().cloned());
        Ok(Outcome {
            stdout: render(&r.doc.into_value(), self.args.output.compact),
            code: 0,
            warnings,
            report: Some(report),
            dropped: r.dropped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_pointers() {
        assert_eq!(path_to_pointer(".content[2]"), "/content/2");
        assert_eq!(path_to_pointer(".tool_calls[0]"), "/tool_calls/0");
        assert_eq!(path_to_pointer(".function_call"), "/function_call");
    }
}
