//! `ctx prune`: shrink old tool traffic without removing messages (SPEC §4).
//!
//! Anthropic-style context editing for any provider: older tool results are replaced by a
//! placeholder that keeps the message, its id and what an engineer looks at first (the call, the
//! size, whether it failed, the first, last, error and test-outcome lines), huge results are
//! clipped middle-out, long values in old calls' arguments are cut to their start, and old
//! reasoning can be dropped. No message is removed and no pair is broken, so the output is as
//! valid as the input. With a budget, each step stops as soon as the document fits, oldest first.
//! [`prune`] is the one implementation; `fit`'s prune stages call it. Token counts of changed
//! messages are worked out from the counts the caller passes in, so a message is tokenized again
//! only where that cannot be avoided (a clipped or shortened message, once).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

use anyhow::{Result, bail};
use serde_json::{Map, Value, json};

use super::Dropped;
use crate::args::{short_form, shorten};
use crate::clip::{DEFAULT_PLACEHOLDER, Template, Var, clip_middle};
use crate::conversation::{CallRef, Conversation, PinOptions, Role};
use crate::counter::{Counter, DocumentCount, MessageTokens, Notes};
use crate::dialect::{Dialect, EmptyArgs, Ended, Piece, pieces, pointer, text_of};
use crate::document::Document;
use crate::excerpt::{Exit, MAX_PLACEHOLDER_TOKENS, placeholder};
use crate::tokenizer::Encoding;

/// The default `--min-saving`: a result is cleared only when that saves at least this many
/// tokens, counted against the placeholder's bound (80 tokens): a result under 280 tokens (a
/// short error, a test summary, a few lines of a file) is worth more to the next turn than what
/// clearing it would save.
pub const DEFAULT_MIN_SAVING: usize = 200;

/// The default `--keep`: the newest tool results kept verbatim.
pub const DEFAULT_KEEP: usize = 3;

/// `--thinking` choices: which reasoning (thinking, redacted_thinking, reasoning_content) is
/// dropped. Never from an unfinished tool loop, whose reasoning the API requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Thinking {
    /// None.
    Keep,
    /// That of older assistant turns.
    Old,
    /// That of every assistant turn.
    All,
}

impl Thinking {
    /// Every choice.
    #[cfg(feature = "cli")]
    pub(crate) const ALL: [Thinking; 3] = [Thinking::Keep, Thinking::Old, Thinking::All];

    /// The choice as `--thinking` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Thinking::Keep => "keep",
            Thinking::Old => "old",
            Thinking::All => "all",
        }
    }
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
    /// Resolved `--budget` in tokens: clearing, clipping and shortening go oldest first and
    /// stop as soon as the document is within it (reasoning is dropped regardless). The result
    /// may still be over it: the caller decides what that means.
    pub budget: Option<u64>,
    /// Never clear or clip a result in the conversation's newest unit (`fit` sets it, so the
    /// output the model just asked for survives). Shortening never touches that unit anyway.
    pub protect_newest_unit: bool,
    /// `--min-saving`: clear a result only when that saves at least this many tokens.
    pub min_saving: usize,
    /// `--shorten-args`: cut string values over this many tokens inside old calls' arguments.
    pub shorten_args: Option<usize>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            keep: DEFAULT_KEEP,
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
            budget: None,
            protect_newest_unit: false,
            min_saving: DEFAULT_MIN_SAVING,
            shorten_args: None,
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
    /// For each entry of `cleared`, the failure status its placeholder shows
    /// (`failed (exit code 1)`, `failed`, `exit code 0`), if any.
    pub cleared_status: Vec<Option<String>>,
    /// (message index, tokens before, tokens after) of clipped results.
    pub clipped: Vec<(usize, usize, usize)>,
    /// (message index, tokens before, tokens after) of messages whose calls' arguments were
    /// shortened.
    pub shortened: Vec<(usize, usize, usize)>,
    /// Messages whose reasoning was dropped.
    pub thinking: Vec<usize>,
    /// Of those, the ones removed as a whole (a Responses `reasoning` item), by index in the
    /// input: they are no longer in `doc`.
    pub removed: Vec<usize>,
    pub dropped: Vec<Dropped>,
    /// The new count of every changed message (the messages of `dropped`), in the same order,
    /// so that callers need not tokenize them again.
    pub recounted: Vec<MessageTokens>,
}

impl Pruning {
    /// The report's `cleared`, `clipped` and `shortened` lists, message indices written by
    /// `index` (the identity for `prune`; `fit` maps them back to its input).
    #[cfg(feature = "cli")]
    pub fn report_lists(&self, index: impl Fn(usize) -> Value) -> Map<String, Value> {
        let cleared = self
            .cleared
            .iter()
            .zip(&self.cleared_status)
            .map(|((i, tool, tokens), status)| {
                let mut e = json!({"index": index(*i), "tool": tool, "tokens": tokens});
                if let Some(s) = status {
                    e["status"] = json!(s);
                }
                e
            })
            .collect();
        let changed = |list: &[(usize, usize, usize)]| -> Value {
            list.iter()
                .map(|&(i, b, a)| json!({"index": index(i), "tokens_before": b, "tokens_after": a}))
                .collect()
        };
        let mut out = Map::new();
        out.insert("cleared".into(), cleared);
        out.insert("clipped".into(), changed(&self.clipped));
        out.insert("shortened".into(), changed(&self.shortened));
        out
    }
}

/// One tool result in the document.
struct ResultRef {
    message: usize,
    /// JSON pointer to the value holding the result's content (`/content` for a tool message,
    /// `/content/2/content` for an Anthropic block).
    pointer: String,
    tool: String,
    /// The call it answers.
    call: Option<CallRef>,
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
/// model, pins and tool results. Clearing, clipping and shortening leave that structure as it
/// was, so fit hands it from one prune stage to the next instead of reading it again.
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
        cleared_status: Vec::new(),
        clipped: Vec::new(),
        shortened: Vec::new(),
        thinking: Vec::new(),
        removed: Vec::new(),
        dropped: Vec::new(),
        recounted: Vec::new(),
    };
    if opts.trigger.is_some_and(|t| tokens_before as u64 <= t) {
        out.triggered = false;
        return Ok((out, structure));
    }
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
            let results = tool_results(&conv, &pinned);
            Structure {
                conv,
                pinned,
                results,
            }
        }
    };
    let mut pass = Pass {
        counter,
        count,
        opts,
        conv: &conv,
        pinned: &pinned,
        template: Template::parse(&opts.placeholder),
        enc: counter.settings.encoding,
        dialect,
        server_state: out.doc.server_state(),
        // Every changed message, with its original before the first change when it is needed
        // (for --dropped, or to undo step 1): copied only when a message is about to change.
        copy: opts.keep_originals || opts.clear_at_least.is_some(),
        messages: std::mem::take(out.doc.messages_mut()),
        reasons: BTreeMap::new(),
        originals: BTreeMap::new(),
        now: BTreeMap::new(),
        total: tokens_before,
        removed: Vec::new(),
    };

    // 1. Clear older results, oldest first.
    let eligible: Vec<&ResultRef> = results
        .iter()
        .filter(|r| !r.pinned && !opts.exclude_tools.contains(&r.tool))
        .filter(|r| opts.include_errors || !r.is_error)
        .filter(|r| !pass.is_placeholder(r))
        .collect();
    let (to_clear, kept) = eligible.split_at(eligible.len().saturating_sub(opts.keep));
    pass.clear(to_clear, &mut out)?;
    // 2. Clip results over --max-tool-tokens, kept ones included, oldest first.
    if let Some(max) = opts.max_tool_tokens {
        pass.clip(&results, max, &mut out)?;
    }
    // 3. Shorten long values in old calls' arguments, oldest first. The calls of the results
    // --keep keeps, the newest unit and pinned messages are left alone.
    if let Some(max) = opts.shorten_args {
        let protected: HashSet<CallRef> = kept.iter().filter_map(|r| r.call).collect();
        pass.shorten_args(&protected, max, &mut out)?;
    }
    // 4. Drop reasoning from older (or all) assistant turns, never from an unfinished loop.
    if opts.thinking != Thinking::Keep {
        pass.drop_thinking(&mut out)?;
    }
    pass.report(&mut out);
    let structure = out.thinking.is_empty().then_some(Structure {
        conv,
        pinned,
        results,
    });
    Ok((out, structure))
}

/// One run of prune over a document's messages: what its steps read, and the state they share,
/// kept exact at every step so a budget stops each step at the right place.
struct Pass<'a> {
    counter: &'a Counter<'a>,
    count: &'a DocumentCount,
    opts: &'a Options,
    conv: &'a Conversation,
    pinned: &'a [bool],
    template: Template,
    enc: Encoding,
    dialect: Dialect,
    /// The body key of server-held state the document continues, if any.
    server_state: Option<&'static str>,
    /// Whether a changed message's original is kept (`--dropped`, `--clear-at-least`).
    copy: bool,
    messages: Vec<Value>,
    /// Why each changed message changed.
    reasons: BTreeMap<usize, Vec<&'static str>>,
    /// Every changed message, with its original before the first change when it is needed.
    originals: BTreeMap<usize, Option<Value>>,
    /// The count of every changed message as it is now: worked out without tokenizing whole
    /// messages again where the change is known.
    now: BTreeMap<usize, MessageTokens>,
    /// Messages that are reasoning and nothing else, removed as a whole, in order.
    removed: Vec<usize>,
    /// The document's total as it is now.
    total: usize,
}

impl Pass<'_> {
    /// Notes that message `m` is about to change (copying its original when needed).
    fn save(&mut self, m: usize) {
        let copy = self.copy;
        let messages = &self.messages;
        self.originals
            .entry(m)
            .or_insert_with(|| copy.then(|| messages[m].clone()));
    }

    /// Whether the document is still over its budget (always, without one).
    fn over(&self) -> bool {
        self.opts.budget.is_none_or(|b| self.total as u64 > b)
    }

    fn in_newest_unit(&self, m: usize) -> bool {
        self.conv.units.len().checked_sub(1) == Some(self.conv.messages[m].unit)
    }

    fn is_placeholder(&self, r: &ResultRef) -> bool {
        pointer::get(&self.messages[r.message], &r.pointer)
            .and_then(|v| self.dialect.cleared_text(v))
            .is_some_and(|t| self.template.matches(t))
    }

    /// Message `m`'s count as it is now.
    fn known(&self, m: usize) -> MessageTokens {
        self.now.get(&m).copied().unwrap_or(self.count.messages[m])
    }

    /// Step 1: clears `to_clear` oldest first while over budget, then undoes it all when it
    /// saved less than `--clear-at-least`.
    fn clear(&mut self, to_clear: &[&ResultRef], out: &mut Pruning) -> Result<()> {
        for r in to_clear {
            if !self.over() {
                break;
            }
            if self.opts.protect_newest_unit && self.in_newest_unit(r.message) {
                continue;
            }
            self.clear_result(r, out)?;
        }
        if !out.cleared.is_empty() {
            // Every message step 1 changed: the cleared results and the calls whose inputs it
            // cleared.
            let saved = out.tokens_before - self.total;
            if self.opts.clear_at_least.is_some_and(|min| saved < min) {
                // Not worth it: every message goes back to what it was.
                for (&m, original) in &self.originals {
                    self.messages[m] = original
                        .clone()
                        .expect("copied when --clear-at-least is set");
                }
                self.originals.clear();
                self.now.clear();
                self.total = out.tokens_before;
                out.cleared.clear();
                out.cleared_status.clear();
                out.triggered = false;
            } else {
                for &m in self.originals.keys() {
                    self.reasons.entry(m).or_default().push("cleared");
                }
            }
        }
        Ok(())
    }

    /// Replaces result `r` by its placeholder when that saves enough (and with
    /// `--clear-inputs`, its call's arguments by an empty value, where the API takes one).
    fn clear_result(&mut self, r: &ResultRef, out: &mut Pruning) -> Result<()> {
        let (counter, count, opts) = (self.counter, self.count, self.opts);
        let m = r.message;
        // The saving is measured against the placeholder's bound, not against how this
        // output's lines happen to render: the decision then only grows with the result's size,
        // so a result a run leaves (or clips, or whose call it shortens) is left by the next
        // run too (idempotence, SPEC §2 I6).
        let bound = opts.min_saving.saturating_add(MAX_PLACEHOLDER_TOKENS);
        // A result is part of its message: when the whole message is under the bound (its count
        // is known), the result is not tokenized to find out.
        if self.known(m).total() < bound {
            return Ok(());
        }
        // The message's string `content`, whose tokens counting the document found.
        let whole_message = r.pointer == "/content" && !self.now.contains_key(&m);
        let cost = match pointer::get(&self.messages[m], &r.pointer) {
            None => return Ok(()),
            // A whole tool message: its content's tokens are already known from counting the
            // document, so it is not tokenized a second time.
            Some(Value::String(_)) if whole_message => count.messages[m].text,
            Some(_) => value_cost(
                counter,
                pointer::get_mut(&mut self.messages[m], &r.pointer).expect("located"),
            )?,
        };
        if cost == 0 || cost < bound {
            return Ok(()); // Clearing cannot save enough.
        }
        let value = pointer::get(&self.messages[m], &r.pointer).expect("located");
        // A string or parts, or an output whose text is in fields of its own (a shell call's
        // stdout and stderr, whose outcome gives the exit status).
        let fields = self.dialect.output_fields(value);
        let text = match &fields {
            Some(f) => Cow::Owned(f.text(value)),
            None => text_of(value, None),
        };
        let exit = fields.and_then(|f| f.ended).map(|e| match e {
            Ended::Exit(n) => Exit::Code(n),
            Ended::Timeout => Exit::Timeout,
        });
        let args = r
            .call
            .filter(|_| self.template.has(Var::Args))
            .and_then(|c| pointer::get(&self.messages[c.message], &self.conv.call(c).args))
            .map(short_form)
            .unwrap_or_default();
        let p = placeholder(
            &self.template,
            self.enc,
            &r.tool,
            &args,
            &text,
            r.is_error,
            exit,
            cost,
        )?;
        // The placeholder in the shape the output must keep (a string, or a shell call's list),
        // and its tokens there.
        let mut cleared = self.dialect.cleared_output(value, p.text);
        let cleared_cost = if cleared.is_string() {
            p.tokens
        } else {
            value_cost(counter, &mut cleared)?
        };
        let saving = cost.saturating_sub(cleared_cost);
        if saving == 0
            || cost
                < opts
                    .min_saving
                    .saturating_add(cleared_cost.max(MAX_PLACEHOLDER_TOKENS))
        {
            return Ok(()); // Not worth what the output holds beyond its placeholder.
        }
        self.save(m);
        *pointer::get_mut(&mut self.messages[m], &r.pointer).expect("located") = cleared;
        // The message's count is additive over its parts, so its new count follows from the
        // old one and the placeholder's.
        let old = self.known(m);
        let text_tokens = if r.pointer == "/content" {
            cleared_cost
        } else {
            old.text
        };
        self.now.insert(
            m,
            MessageTokens {
                content: old.content - saving,
                text: text_tokens,
                ..old
            },
        );
        self.total -= saving;
        if opts.clear_inputs {
            if let Some(cref) = r.call {
                self.clear_input(cref)?;
            }
        }
        out.cleared.push((m, r.tool.clone(), cost));
        out.cleared_status.push(p.status);
        Ok(())
    }

    /// `--clear-inputs`: the arguments of call `cref` become the empty value its API takes
    /// there (`{}`, or `""` for free-form input); arguments the API requires (a Responses
    /// shell call's `action`, a patch's `operation`) are left as they are.
    fn clear_input(&mut self, cref: CallRef) -> Result<()> {
        let (c, call) = (&cref.message, self.conv.call(cref));
        let ptr = &call.args;
        let Some(kind) = call.empty else {
            return Ok(());
        };
        let empty = match (kind, pointer::get(&self.messages[*c], ptr)) {
            (EmptyArgs::Object, Some(Value::String(s))) if s != "{}" => {
                Some(Value::String("{}".into()))
            }
            (EmptyArgs::Object, Some(v)) if !v.is_string() && *v != json!({}) => Some(json!({})),
            (EmptyArgs::Text, Some(Value::String(s))) if !s.is_empty() => {
                Some(Value::String(String::new()))
            }
            _ => None,
        };
        if let Some(empty) = empty {
            self.save(*c);
            let args = pointer::get_mut(&mut self.messages[*c], ptr).expect("located");
            let before = self.counter.args(args, call.encoded)?;
            let after = self.counter.args(&empty, call.encoded)?;
            *args = empty;
            let old = self.known(*c);
            self.now.insert(
                *c,
                MessageTokens {
                    content: old.content + after - before,
                    ..old
                },
            );
            self.total = self.total + after - before;
        }
        Ok(())
    }

    /// Step 2: clips results over `max` tokens middle-out, oldest first, while over budget.
    fn clip(&mut self, results: &[ResultRef], max: usize, out: &mut Pruning) -> Result<()> {
        let (counter, enc) = (self.counter, self.enc);
        for r in results
            .iter()
            .filter(|r| !r.pinned && !self.opts.exclude_tools.contains(&r.tool))
        {
            if !self.over() {
                break;
            }
            if self.opts.protect_newest_unit && self.in_newest_unit(r.message) {
                continue;
            }
            if self.is_placeholder(r) {
                continue; // A placeholder is never clipped.
            }
            let m = r.message;
            let before = self.known(m);
            if !self.now.contains_key(&m) && before.content <= max {
                continue; // Its whole text is within the limit: no need to tokenize it again.
            }
            if pointer::get(&self.messages[m], &r.pointer).is_none() {
                continue;
            }
            let first_change = !self.originals.contains_key(&m);
            self.save(m);
            let mut changed = false;
            let value = pointer::get_mut(&mut self.messages[m], &r.pointer).expect("located");
            let fields = self.dialect.output_fields(value);
            match (value, fields) {
                // Texts in fields of their own (a shell call's stdout and stderr) share the
                // limit, and the output keeps its shape.
                (value, Some(fields)) => {
                    changed = clip_fields(counter, enc, value, &fields.texts, max)?;
                }
                (Value::String(s), None) => {
                    if let Some(c) = clip_middle(enc, s, max)? {
                        *s = c;
                        changed = true;
                    }
                }
                (Value::Array(blocks), None) => {
                    // The text parts share the limit.
                    let texts: Vec<usize> = pieces(blocks)
                        .enumerate()
                        .filter_map(|(i, (_, piece))| matches!(piece, Piece::Text(_)).then_some(i))
                        .collect();
                    let total: usize = texts
                        .iter()
                        .map(|&i| counter.text(blocks[i]["text"].as_str().unwrap_or("")))
                        .sum::<Result<usize>>()?;
                    if total > max {
                        let share = max / texts.len().max(1);
                        for &i in &texts {
                            let t = blocks[i]["text"].as_str().unwrap_or("").to_string();
                            if let Some(c) = clip_middle(enc, &t, share)? {
                                blocks[i]["text"] = Value::String(c);
                                changed = true;
                            }
                        }
                    }
                }
                _ => {}
            }
            if let Some((b, a)) = self.settle(m, changed, first_change, "clipped")? {
                out.clipped.push((m, b, a));
            }
        }
        Ok(())
    }

    /// Step 3: shortens long values in the arguments of old calls (not `protected` ones) to
    /// `max` tokens, oldest first, while over budget.
    fn shorten_args(
        &mut self,
        protected: &HashSet<CallRef>,
        max: usize,
        out: &mut Pruning,
    ) -> Result<()> {
        let (conv, opts, enc) = (self.conv, self.opts, self.enc);
        for (i, m) in conv.messages.iter().enumerate() {
            if !self.over() {
                break;
            }
            if m.calls.is_empty() || self.pinned[i] || self.in_newest_unit(i) {
                continue;
            }
            let first_change = !self.originals.contains_key(&i);
            self.save(i);
            let mut changed = false;
            for (k, call) in m.calls.iter().enumerate() {
                if call
                    .name
                    .as_ref()
                    .is_some_and(|n| opts.exclude_tools.contains(n))
                {
                    continue;
                }
                if protected.contains(&CallRef {
                    message: i,
                    call: k,
                }) {
                    continue;
                }
                if let Some(args) = pointer::get_mut(&mut self.messages[i], &call.args) {
                    changed |= shorten(args, enc, max)?;
                }
            }
            if let Some((b, a)) = self.settle(i, changed, first_change, "args")? {
                out.shortened.push((i, b, a));
            }
        }
        Ok(())
    }

    /// Step 4: drops reasoning from older (or all) assistant turns, never from an unfinished
    /// loop.
    fn drop_thinking(&mut self, out: &mut Pruning) -> Result<()> {
        let (conv, dialect) = (self.conv, self.dialect);
        let last_turn = conv.turns.last().copied().unwrap_or(0);
        let unfinished = conv.last_message().is_some_and(|i| {
            let m = &conv.messages[i];
            !m.results.is_empty() || (m.role == Role::Assistant && !m.calls.is_empty())
        });
        for (i, m) in conv.messages.iter().enumerate() {
            if m.role != Role::Assistant || self.pinned[i] {
                continue;
            }
            let old = i < last_turn;
            let protected = unfinished && i > last_turn;
            let drop = match self.opts.thinking {
                Thinking::Keep => false,
                Thinking::Old => old,
                Thinking::All => !protected,
            };
            if drop && dialect.has_reasoning(&self.messages[i]) && !self.tied_to_reasoning(i) {
                self.save(i);
                if dialect.drop_reasoning(&mut self.messages[i]) {
                    debug_assert!(!dialect.has_reasoning(&self.messages[i]));
                    self.recount(i)?;
                } else {
                    // An item that is reasoning and nothing else (the Responses API): it goes
                    // as a whole, never emptied (its encrypted content comes back unchanged or
                    // not at all).
                    if let Some(key) = self.server_state {
                        bail!(
                            "--thinking: the body continues a conversation the server holds (`{key}`), so ctx does not remove its items; drop --thinking, or send the whole conversation without `{key}`"
                        );
                    }
                    let before = self.now.get(&i).copied().unwrap_or(self.count.messages[i]);
                    self.total -= before.total();
                    self.now.insert(i, MessageTokens::default());
                    self.removed.push(i);
                }
                out.thinking.push(i);
                self.reasons.entry(i).or_default().push("thinking");
            }
        }
        Ok(())
    }

    /// Whether `i` is a reasoning item (Responses) that an item of its response names by its
    /// `id` (a call `fc_...`, a message `msg_...`): the API rejects such an item without the
    /// reasoning its response opened with ("provided without its required 'reasoning' item"),
    /// so that reasoning stays.
    fn tied_to_reasoning(&self, i: usize) -> bool {
        let conv = self.conv;
        if !conv.messages[i].reasoning {
            return false;
        }
        let unit = &conv.units[conv.messages[i].unit];
        (i + 1..unit.end)
            .take_while(|&k| !conv.messages[k].reasoning)
            .any(|k| {
                conv.messages[k].role == Role::Assistant
                    && self.messages[k].get("id").is_some_and(Value::is_string)
            })
    }

    /// After a step tried to change message `m`: when it changed, counts it again and notes
    /// `why`, returning its tokens before and after; else forgets the original saved for it by
    /// this step.
    fn settle(
        &mut self,
        m: usize,
        changed: bool,
        first_change: bool,
        why: &'static str,
    ) -> Result<Option<(usize, usize)>> {
        if changed {
            let counts = self.recount(m)?;
            self.reasons.entry(m).or_default().push(why);
            return Ok(Some(counts));
        }
        if first_change {
            self.originals.remove(&m);
        }
        Ok(None)
    }

    /// Counts message `m` again after a change (see [`recount`]).
    fn recount(&mut self, m: usize) -> Result<(usize, usize)> {
        recount(
            self.counter,
            &self.messages[m],
            m,
            self.count,
            &mut self.now,
            &mut self.total,
        )
    }

    /// Puts the messages back into `out`'s document, with the counts of the changed ones, the
    /// total, and the originals for `--dropped`.
    fn report(mut self, out: &mut Pruning) {
        for &m in self.reasons.keys() {
            let known = self.now[&m];
            debug_assert!(
                self.removed.contains(&m)
                    || Some(known)
                        == self
                            .counter
                            .message(&self.messages[m], &mut Notes::default())
                            .ok(),
                "message {m}"
            );
            out.recounted.push(known);
        }
        out.tokens_after = self.total;
        out.dropped = std::mem::take(&mut self.reasons)
            .into_iter()
            .map(|(m, why)| Dropped {
                index: m,
                reason: why.join(","),
                message: self.originals.remove(&m).flatten().unwrap_or(Value::Null),
            })
            .collect();
        for &i in self.removed.iter().rev() {
            self.messages.remove(i);
        }
        out.removed = self.removed;
        *out.doc.messages_mut() = self.messages;
    }
}

/// Counts message `m` again after a change: updates its known count in `now` and the
/// document's `total`, and returns its tokens before and after.
fn recount(
    counter: &Counter,
    message: &Value,
    m: usize,
    count: &DocumentCount,
    now: &mut BTreeMap<usize, MessageTokens>,
    total: &mut usize,
) -> Result<(usize, usize)> {
    let before = now.get(&m).copied().unwrap_or(count.messages[m]);
    let after = counter.message(message, &mut Notes::default())?;
    *total = *total - before.total() + after.total();
    now.insert(m, after);
    Ok((before.total(), after.total()))
}

/// Clips the texts at `texts` (pointers in `value`) middle-out, sharing `max` tokens; true
/// when one changed.
fn clip_fields(
    counter: &Counter,
    enc: Encoding,
    value: &mut Value,
    texts: &[String],
    max: usize,
) -> Result<bool> {
    fn text<'a>(v: &'a Value, p: &str) -> &'a str {
        pointer::get(v, p).and_then(Value::as_str).unwrap_or("")
    }
    let total: usize = texts
        .iter()
        .map(|p| counter.text(text(value, p)))
        .sum::<Result<usize>>()?;
    if total <= max {
        return Ok(false);
    }
    let share = max / texts.len().max(1);
    let mut changed = false;
    for p in texts {
        if let Some(c) = clip_middle(enc, text(value, p), share)? {
            *pointer::get_mut(value, p).expect("located") = Value::String(c);
            changed = true;
        }
    }
    Ok(changed)
}

/// The tokens a content value adds to its message (text, blocks, images), as the counter
/// counts it there. The value is lent to a one-field message for the count and put back.
fn value_cost(counter: &Counter, v: &mut Value) -> Result<usize> {
    let mut wrapper = Map::new();
    wrapper.insert("content".into(), std::mem::take(v));
    let wrapper = Value::Object(wrapper);
    let counted = counter.message(&wrapper, &mut Notes::default());
    if let Value::Object(mut map) = wrapper {
        *v = map.shift_remove("content").unwrap_or_default();
    }
    Ok(counted?.content)
}

/// Every tool result that holds an output, in order, with the tool it belongs to and the call
/// it answers.
fn tool_results(conv: &Conversation, pinned: &[bool]) -> Vec<ResultRef> {
    let mut out = Vec::new();
    for (i, m) in conv.messages.iter().enumerate() {
        for r in &m.results {
            let Some(pointer) = r.content.clone() else {
                continue; // Nothing to clear.
            };
            let tool = r
                .name
                .clone()
                .or_else(|| r.answers.and_then(|c| conv.call(c).name.clone()))
                .unwrap_or_else(|| "unknown".to_string());
            out.push(ResultRef {
                message: i,
                pointer,
                tool,
                call: r.answers,
                is_error: r.is_error,
                pinned: pinned[i],
            });
        }
    }
    out
}
