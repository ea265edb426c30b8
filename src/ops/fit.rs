//! `ctx fit`: the staged pipeline that brings a document under its budget with the least loss
//! (SPEC §4).
//!
//! Stages run in order, each only while the document is still over budget: `prune`, `clip`,
//! `prune-all`, `summarize` (with `--summarize`), `truncate` and `partial` (with `--partial`).
//! Every stage calls the function behind its standalone command ([`super::prune::prune`],
//! [`super::summarize::summarize`], [`super::truncate::truncate`]); this file only chains them,
//! carries the per-message token counts from one stage to the next (a message is tokenized again
//! only when a stage rewrote it), and maps what each stage did back to input indices.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::prune::{self, Thinking};
use super::summarize::{self, Summarizer};
use super::truncate;
use super::{CannotFit, Dropped};
use crate::conversation::{Conversation, PinOptions, find_task, resolve_index};
use crate::counter::{Counter, DocumentCount, MessageTokens, Notes};
use crate::document::Document;

/// The args stage's default: string values over this many tokens in old calls' arguments are
/// cut to their start (a command line or a path stays whole; a heredoc's body does not).
pub const DEFAULT_SHORTEN_ARGS: usize = 64;

/// Tokens allowed for a summary message's header and framing when fit sizes what it keeps
/// verbatim beside a summary.
const SUMMARY_FRAME: usize = 32;

/// Tokens the clip stage takes beyond a document's excess, for the clip marker and framing.
const CLIP_MARGIN: usize = 16;

/// A stage of the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Prune,
    Clip,
    Args,
    Summarize,
    Truncate,
    PruneAll,
    TruncateAll,
    Partial,
}

impl Stage {
    /// Every stage, in the default order.
    pub const ALL: [Stage; 8] = [
        Stage::Prune,
        Stage::Clip,
        Stage::Args,
        Stage::Summarize,
        Stage::Truncate,
        Stage::PruneAll,
        Stage::TruncateAll,
        Stage::Partial,
    ];

    /// The stages run without `--stages`: every stage in the default order, but summarize only
    /// with `summarize` and partial only with `partial`.
    pub fn defaults(summarize: bool, partial: bool) -> Vec<Stage> {
        Stage::ALL
            .into_iter()
            .filter(|s| match s {
                Stage::Summarize => summarize,
                Stage::Partial => partial,
                _ => true,
            })
            .collect()
    }

    /// The stage's name as `--stages` and the report spell it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Prune => "prune",
            Stage::Clip => "clip",
            Stage::Args => "args",
            Stage::Summarize => "summarize",
            Stage::Truncate => "truncate",
            Stage::PruneAll => "prune-all",
            Stage::TruncateAll => "truncate-all",
            Stage::Partial => "partial",
        }
    }
}

/// Everything the stages need, resolved for one document.
#[derive(Clone, Debug)]
pub struct Options {
    pub budget: u64,
    /// The args stage: string values over this many tokens in old calls' arguments are cut.
    pub shorten_args: usize,
    pub trigger: u64,
    pub stages: Vec<Stage>,
    /// List what each stage cleared, clipped and removed in its report entry (for `--report`;
    /// without it the entries hold the stage and its token counts only).
    pub details: bool,
    pub prune: prune::Options,
    pub truncate: truncate::Options,
    pub summarize: summarize::Options,
}

impl Default for Options {
    /// `fit`'s defaults (no summarize or partial stage), with a budget and a trigger of 0.
    fn default() -> Options {
        Options {
            budget: 0,
            shorten_args: DEFAULT_SHORTEN_ARGS,
            trigger: 0,
            stages: Stage::defaults(false, false),
            details: false,
            prune: prune::Options::default(),
            truncate: truncate::Options::default(),
            summarize: summarize::Options::default(),
        }
    }
}

impl Options {
    /// These options for a document whose budget and trigger, in tokens, are these.
    pub fn for_budget(&self, budget: u64, trigger: u64) -> Options {
        let mut o = self.clone();
        o.budget = budget;
        o.trigger = trigger;
        o.truncate.budget = budget;
        o.summarize.budget = Some(budget);
        o
    }
}

/// What fitting did to one document.
pub struct Fitting {
    pub doc: Document,
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// False when the document was at or under the trigger.
    pub triggered: bool,
    /// One report object per stage run.
    pub stages: Vec<Value>,
    /// Originals of every removed or rewritten input message, by input index.
    pub dropped: Vec<Dropped>,
}

/// The document as it moves through the stages: its count, and where each message came from.
struct State {
    doc: Document,
    count: DocumentCount,
    /// Input index of each current message (None for a summary or a note made by a stage).
    origins: Vec<Option<usize>>,
    dropped: BTreeMap<usize, Dropped>,
    /// The document's structure as the last prune stage read it, while no other stage has
    /// changed the document since.
    structure: Option<prune::Structure>,
}

impl State {
    fn total(&self) -> usize {
        self.count.total()
    }

    /// The input index of current message `i`, as JSON (null for a message a stage made).
    fn input_index(&self, i: usize) -> Value {
        self.origins
            .get(i)
            .copied()
            .flatten()
            .map_or(Value::Null, Value::from)
    }

    /// Takes a stage's output. `origins` maps each new message to its index in the stage's
    /// input; messages in `dropped` were removed or rewritten, so only they (and new ones) are
    /// counted again.
    fn advance(
        &mut self,
        counter: &Counter,
        doc: Document,
        origins: Vec<Option<usize>>,
        dropped: Vec<Dropped>,
        recounted: &[MessageTokens],
    ) -> Result<()> {
        let mut changed = vec![false; self.count.messages.len()];
        for d in &dropped {
            changed[d.index] = true;
        }
        // Counts the stage already made of changed messages, by index in the stage's input.
        let mut known: Vec<Option<MessageTokens>> = Vec::new();
        if !recounted.is_empty() {
            known.resize(self.count.messages.len(), None);
            for (d, c) in dropped.iter().zip(recounted) {
                known[d.index] = Some(*c);
            }
        }
        let mut messages = Vec::with_capacity(origins.len());
        for (k, o) in origins.iter().enumerate() {
            messages.push(match o {
                Some(i) if !changed[*i] => self.count.messages[*i],
                Some(i) if known.get(*i).copied().flatten().is_some() => {
                    known[*i].expect("checked")
                }
                _ => counter.message(&doc.messages()[k], &mut Notes::default())?,
            });
        }
        for d in dropped {
            if let Some(input) = self.origins[d.index] {
                match self.dropped.get_mut(&input) {
                    // Already rewritten by an earlier stage: the original is kept, the reasons
                    // add up.
                    Some(first) => {
                        if !first.reason.split(',').any(|r| r == d.reason) {
                            first.reason = format!("{},{}", first.reason, d.reason);
                        }
                    }
                    None => {
                        self.dropped.insert(input, Dropped { index: input, ..d });
                    }
                }
            }
        }
        self.origins = origins
            .iter()
            .map(|o| o.and_then(|i| self.origins[i]))
            .collect();
        self.count.messages = messages;
        self.doc = doc;
        Ok(())
    }
}

/// The input's pinned messages by name (its task, `--pin`), followed through the stages by
/// their input indices: a message a stage inserts (a summary, a note) is never taken for the
/// task, and `--pin` keeps naming the input's messages after a stage removed some.
struct Carried {
    /// The input's task (pinned or not).
    task: Option<usize>,
    /// `--pin` messages, as input indices.
    pins: Vec<usize>,
    drop_system: bool,
    keep_task: bool,
}

impl Carried {
    fn new(doc: &Document, pins: &PinOptions) -> Result<Carried> {
        let n = doc.messages().len();
        Ok(Carried {
            task: find_task(doc.messages(), doc.dialect),
            pins: pins
                .pins
                .iter()
                .map(|&p| resolve_index(p, n))
                .collect::<Result<_>>()?,
            drop_system: pins.drop_system,
            keep_task: !pins.no_keep_task,
        })
    }

    /// The pins of a stage's input, whose messages came from the input's `origins`, and where
    /// the input's task is among them.
    fn at(&self, origins: &[Option<usize>]) -> (PinOptions, Option<usize>) {
        let pos = |j: usize| origins.iter().position(|&o| o == Some(j));
        let task = self.task.and_then(pos);
        let mut pins: Vec<i64> = self
            .pins
            .iter()
            .filter_map(|&j| pos(j))
            .map(|i| i as i64)
            .collect();
        if let (true, Some(t)) = (self.keep_task, task) {
            pins.push(t as i64);
        }
        let pins = PinOptions {
            drop_system: self.drop_system,
            no_keep_task: true,
            pins,
        };
        (pins, task)
    }
}

/// Runs the stages on `doc` (already counted as `count`) until it fits `opts.budget`.
pub fn fit(
    doc: Document,
    counter: &Counter,
    count: DocumentCount,
    opts: &Options,
    summarizer: Option<&Summarizer>,
) -> Result<Fitting> {
    let tokens_before = count.total();
    let n = doc.messages().len();
    if tokens_before as u64 <= opts.trigger {
        return Ok(Fitting {
            doc,
            tokens_before,
            tokens_after: tokens_before,
            triggered: false,
            stages: Vec::new(),
            dropped: Vec::new(),
        });
    }
    let budget = opts.budget as usize;
    let carried = Carried::new(&doc, &opts.prune.pins)?;
    let mut st = State {
        doc,
        count,
        origins: (0..n).map(Some).collect(),
        dropped: BTreeMap::new(),
        structure: None,
    };
    let cx = Ctx {
        counter,
        opts,
        summarizer,
        budget,
    };
    let mut stages = Vec::new();
    // Why the last stage that could not reach the budget failed.
    let mut cannot: Option<String> = None;
    for (k, &stage) in opts.stages.iter().enumerate() {
        if st.total() <= budget {
            break;
        }
        let before = st.total();
        // Only truncate can fail and let a later stage go on from the same document, so only
        // then, and only when a stage follows, is the document copied. The truncate stage that
        // a truncate-all follows removes what it can instead of failing (best effort), which
        // cannot fail while the task is pinned (the output then starts with it, I7).
        let best_effort =
            stage == Stage::Truncate && opts.stages[k + 1..].contains(&Stage::TruncateAll);
        let may_fail = match stage {
            Stage::Truncate => !best_effort || opts.prune.pins.no_keep_task,
            Stage::TruncateAll | Stage::Partial => true,
            _ => false,
        };
        let doc = if may_fail && k + 1 < opts.stages.len() {
            st.doc.clone()
        } else {
            std::mem::replace(&mut st.doc, Document::placeholder())
        };
        let mut report = json!({"stage": stage.name(), "tokens_before": before});
        let (pins, task) = carried.at(&st.origins);
        match stage {
            Stage::Clip
                if st
                    .count
                    .messages
                    .iter()
                    .all(|m| m.content <= (budget / 4).max(1)) =>
            {
                // No message is over the clip limit, so no result is: clipping would change
                // nothing, and is not worth a pass over the conversation.
                st.doc = doc;
                report["cleared"] = json!([]);
                report["clipped"] = json!([]);
            }
            Stage::Prune | Stage::Clip | Stage::Args | Stage::PruneAll => {
                prune_stage(&cx, k, stage, doc, pins, &mut st, &mut report)?;
            }
            Stage::Summarize => {
                st.structure = None;
                let Some(s) = summarizer else {
                    bail!("the summarize stage needs a summarizer");
                };
                summarize_stage(&cx, s, doc, pins, task, &mut st, &mut report)?;
            }
            Stage::Truncate | Stage::TruncateAll | Stage::Partial => {
                let why = truncate_stage(&cx, stage, best_effort, doc, pins, &mut st, &mut report)?;
                if why.is_some() {
                    cannot = why;
                }
            }
        }
        report["tokens_after"] = json!(st.total());
        stages.push(report);
    }
    let tokens_after = st.total();
    if tokens_after > budget {
        let ran: Vec<&str> = stages.iter().filter_map(|s| s["stage"].as_str()).collect();
        let reason = match cannot {
            Some(r) => format!("after {}: {r}", ran.join(", ")),
            None => format!(
                "after {} the document still needs {tokens_after} tokens (add truncate to --stages, or raise the budget)",
                if ran.is_empty() {
                    "no stage".to_string()
                } else {
                    ran.join(", ")
                }
            ),
        };
        return Err(CannotFit {
            reason,
            tokens_before,
            budget: opts.budget,
        }
        .into());
    }
    Ok(Fitting {
        doc: st.doc,
        tokens_before,
        tokens_after,
        triggered: true,
        stages,
        dropped: st.dropped.into_values().collect(),
    })
}

/// What every stage reads.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    counter: &'a Counter<'a>,
    opts: &'a Options,
    summarizer: Option<&'a Summarizer>,
    budget: usize,
}

/// A prune stage (prune, clip, args, prune-all), the `k`th of the run: takes only what the
/// budget needs, oldest first, and never touches the newest unit.
fn prune_stage(
    cx: &Ctx,
    k: usize,
    stage: Stage,
    doc: Document,
    pins: PinOptions,
    st: &mut State,
    report: &mut Value,
) -> Result<()> {
    let Ctx {
        counter,
        opts,
        summarizer,
        budget,
    } = *cx;
    // Each prune stage takes only what the budget needs, oldest first, and never
    // touches the newest unit (the output the model just asked for).
    let mut o = opts.prune.clone();
    o.pins = pins;
    o.budget = Some(opts.budget);
    o.protect_newest_unit = true;
    o.max_tool_tokens = None;
    o.shorten_args = None;
    // A later summarize stage reads the originals of what this one rewrites.
    o.keep_originals |= summarizer.is_some() && opts.stages[k + 1..].contains(&Stage::Summarize);
    // Clipping, too, takes only what is needed: the largest result first loses just
    // the excess (never keeping more than the clip limit would), and only if the
    // document is still over does every oversized result go down to the limit.
    let limit = (budget / 4).max(1);
    let mut limits = vec![limit];
    match stage {
        Stage::Clip => {
            o.keep = usize::MAX;
            o.thinking = Thinking::Keep;
            // Passes marked 0 work out their limit from what is still over.
            limits = vec![0, 0, limit];
        }
        Stage::Args => {
            // Nothing is cleared: only the arguments of calls older than the
            // --keep newest results are shortened.
            o.min_saving = usize::MAX;
            o.thinking = Thinking::Keep;
            o.shorten_args = Some(opts.shorten_args);
        }
        Stage::PruneAll => {
            o.keep = 0;
            o.thinking = Thinking::Keep;
            // The next stage removes whole exchanges: a placeholder that keeps the call and
            // its status is less loss than that, whatever clearing saves.
            o.min_saving = 1;
        }
        _ => {}
    }
    let mut doc = Some(doc);
    let (mut cleared, mut clipped, mut shortened) = (Vec::new(), Vec::new(), Vec::new());
    for (pass, max) in limits.into_iter().enumerate() {
        if pass > 0 && st.total() <= budget {
            break;
        }
        if stage == Stage::Clip {
            let max = if max == 0 {
                // The largest result loses the excess (and a little for the
                // marker and framing), but never keeps more than the limit allows.
                let excess = st.total().saturating_sub(budget) + CLIP_MARGIN;
                let largest = st.count.messages.iter().map(|m| m.content).max();
                largest
                    .map_or(limit, |l| l.saturating_sub(excess))
                    .max(limit)
            } else {
                max
            };
            o.max_tool_tokens = Some(max);
        }
        let d = doc
            .take()
            .unwrap_or_else(|| std::mem::replace(&mut st.doc, Document::placeholder()));
        let (r, kept) = prune::prune_with(d, counter, &st.count, &o, st.structure.take())?;
        st.structure = kept;
        if opts.details {
            cleared.extend(
                r.cleared
                    .iter()
                    .map(|(i, t, k)| json!({"index": st.input_index(*i), "tool": t, "tokens": k})),
            );
            clipped.extend(r.clipped.iter().map(|&(i, b, a)| json!({"index": st.input_index(i), "tokens_before": b, "tokens_after": a})));
            shortened.extend(r.shortened.iter().map(|&(i, b, a)| json!({"index": st.input_index(i), "tokens_before": b, "tokens_after": a})));
        }
        if !r.thinking.is_empty() {
            report["thinking"] = r.thinking.iter().map(|&i| st.input_index(i)).collect();
        }
        // Reasoning items removed as a whole are not in the stage's output.
        let origins = (0..r.doc.messages().len() + r.removed.len())
            .filter(|i| !r.removed.contains(i))
            .map(Some)
            .collect();
        st.advance(counter, r.doc, origins, r.dropped, &r.recounted)?;
    }
    if opts.details {
        report["cleared"] = json!(cleared);
        report["clipped"] = json!(clipped);
        if stage == Stage::Args {
            report["shortened"] = json!(shortened);
        }
    }
    Ok(())
}

/// The summarize stage: the oldest units become one summary, read from the original messages,
/// keeping verbatim as many recent units as leave the summary its room.
fn summarize_stage(
    cx: &Ctx,
    s: &Summarizer,
    doc: Document,
    pins: PinOptions,
    task: Option<usize>,
    st: &mut State,
    report: &mut Value,
) -> Result<()> {
    let (counter, opts, budget) = (cx.counter, cx.opts, cx.budget);
    let mut o = opts.summarize.clone();
    o.force = true;
    o.pins = pins;
    o.task = Some(task);
    o.budget = Some(opts.budget);
    // Only as much as needed: keep verbatim as many recent messages as the budget
    // leaves room for beside the pinned ones and a summary at its bound.
    let conv = Conversation::new(doc.messages(), doc.dialect);
    let pinned = conv.pinned_messages(&o.pins)?;
    let pinned_tokens: usize = (0..pinned.len())
        .filter(|&i| pinned[i])
        .map(|i| st.count.messages[i].total())
        .sum();
    // The summary is bounded by --max-summary-tokens and by what the kept messages
    // leave; a quarter of the budget is room enough for one that says something.
    let summary_room = s.max_summary_tokens().min(budget / 4);
    let room =
        budget.saturating_sub(st.count.fixed() + pinned_tokens + summary_room + SUMMARY_FRAME);
    let mut used = 0;
    let mut recent = 0;
    for i in (0..pinned.len()).rev() {
        // A control item is no recent message (and is kept anyway).
        if conv.messages[i].control {
            continue;
        }
        let t = st.count.messages[i].total();
        if !pinned[i] {
            if used + t > room {
                break;
            }
            used += t;
        }
        recent += 1;
    }
    o.keep_recent = recent.max(1);
    // The summary reads the input's messages, not what earlier stages left of them
    // (a cleared result's placeholder, shortened arguments).
    let originals: Vec<Option<&Value>> = st
        .origins
        .iter()
        .map(|o| o.and_then(|j| st.dropped.get(&j)).map(|d| &d.message))
        .map(|m| m.filter(|m| !m.is_null()))
        .collect();
    // An offline engine costs little: find the most recent messages that can stay
    // verbatim beside the summary (fewer summarized messages, a larger output), by
    // bisection from the estimate up. The summary keeps its room: the kept messages
    // must leave it `summary_room`, or its whole size when it says everything in
    // less. A summary squeezed below that to make way for one more verbatim message
    // loses more (the trail of the whole range) than the message brings.
    if s.engine_name() != "llm" {
        let fits = |k: usize| -> Result<bool> {
            let mut t = o.clone();
            t.keep_recent = k;
            // The summary as the engine writes it when the budget does not bound it.
            t.budget = Some(u64::MAX);
            let r = summarize::summarize(doc.clone(), counter, &st.count, &t, s, &originals)?;
            if r.skipped.is_some() || r.fallback.is_some() || r.covered.is_none() {
                return Ok(false);
            }
            let kept = r.tokens_after - r.summary_tokens;
            Ok(kept + r.summary_tokens.min(summary_room) <= budget)
        };
        let (mut lo, mut hi) = (o.keep_recent, pinned.len());
        if lo < hi && fits(lo)? {
            // The estimate is usually close: gallop up from it (1, 2, 4, ... more
            // messages) to bracket the answer, then bisect, so a long document
            // costs a few summaries rather than one per halving of its length.
            let mut step = 1;
            while lo + step < hi {
                if fits(lo + step)? {
                    lo += step;
                    step *= 2;
                } else {
                    hi = lo + step;
                    break;
                }
            }
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if fits(mid)? {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            o.keep_recent = lo;
        }
    }
    let r = summarize::summarize(doc, counter, &st.count, &o, s, &originals)?;
    report["engine"] = json!(s.engine_name());
    if let Some(why) = &r.skipped {
        report["skipped"] = json!(why);
    }
    if r.clipped {
        report["clipped"] = json!(true);
    }
    report["summarized"] = if r.skipped.is_some() || r.fallback == Some("passthrough") {
        json!([])
    } else {
        r.plan.range.iter().map(|&i| st.input_index(i)).collect()
    };
    if let Some(c) = r.covered {
        report["messages_covered"] = json!(c);
    }
    if let Some(f) = r.fallback {
        report["fallback"] = json!(f);
        report["error"] = json!(r.error);
    }
    if let Some(m) = &r.model {
        report["model"] = json!(m);
    }
    if r.summary_truncated {
        report["summary_truncated"] = json!(true);
    }
    st.advance(counter, r.doc, r.origins, r.dropped, &[])?;
    Ok(())
}

/// A truncate stage (truncate, truncate-all, partial). Returns why the document cannot fit,
/// when it cannot (a later stage may still go on from the same document).
fn truncate_stage(
    cx: &Ctx,
    stage: Stage,
    best_effort: bool,
    doc: Document,
    pins: PinOptions,
    st: &mut State,
    report: &mut Value,
) -> Result<Option<String>> {
    let (counter, opts, budget) = (cx.counter, cx.opts, cx.budget);
    // The prune stages' conversation model still describes the document; a stage
    // after truncate reads it again.
    let conv = st.structure.take().map(prune::Structure::into_conversation);
    let mut o = opts.truncate.clone();
    o.pins = pins;
    o.partial = stage == Stage::Partial;
    if best_effort {
        // Old units go, but not the newest --keep tool exchanges: when that is not
        // enough, every other unit goes and the later stages take the rest. (With
        // no truncate-all after it, truncate removes whatever it must itself.)
        o.protect_recent_exchanges = opts.prune.keep;
        o.best_effort = true;
    }
    match truncate::truncate_with(doc, counter, &st.count, &o, conv) {
        Ok(r) => {
            if opts.details {
                report["removed"] = r.removed.iter().map(|&i| st.input_index(i)).collect();
            }
            report["partial"] = r
                .partial
                .iter()
                .map(|&(i, b, a)| json!({"index": st.input_index(i), "tokens_before": b, "tokens_after": a}))
                .collect();
            report["notes"] = json!(r.notes);
            if r.tokens_after > budget {
                report["short_of_budget"] = json!(true);
            }
            st.advance(counter, r.doc, r.origins, r.dropped, &[])?;
        }
        Err(e) => match e.downcast::<CannotFit>() {
            Ok(cf) => {
                report["cannot_fit"] = json!(cf.reason);
                return Ok(Some(cf.reason));
            }
            Err(e) => return Err(e),
        },
    }
    Ok(None)
}
