//! `ctx truncate`: remove whole units until a document fits its budget (SPEC §4).
//!
//! Selection works on unit token costs computed once (each message is tokenized once), so it is
//! linear in the number of messages (n log n for `importance`). Pinned units (system/developer,
//! the task, `--pin`) and the newest unit are never removed; tool exchanges are removed whole, so
//! no result loses its call. Older copies of repeated messages go first (found by hashing, so
//! still linear); `importance` scores units with what they show ([`crate::signals`]) and puts
//! back what fits in the room the last removal left. `--partial` cuts text middle-out when whole
//! units cannot fit. [`truncate`] is the one implementation: `fit`'s truncate and partial stages
//! call it too, and [`Options`] has what fit needs beyond the command's flags (protected newest
//! exchanges, a best-effort result over budget).

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash, Hasher};

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CannotFit, Dropped};
use crate::clip::clip_middle;
use crate::conversation::{Conversation, PinOptions, Role, UnitKind};
use crate::counter::{Counter, DocumentCount, Notes};
use crate::dialect::pointer;
use crate::document::{Dialect, Document, Field};
use crate::signals::Signals;

/// The note's default text; `{count}` is the number of messages removed at that place.
pub const DEFAULT_NOTE: &str =
    "[ctx: {count} earlier messages were removed here to fit the context window]";

/// The default `--keep-first`: units kept at the start by `--strategy middle`.
pub const DEFAULT_KEEP_FIRST: usize = 2;

/// `--strategy` choices: which units go first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Strategy {
    /// The oldest (older copies of a message repeated later go before anything else).
    Oldest,
    /// Those in the middle, after the first few kept at the start.
    Middle,
    /// The least important by their scores (docs/strategies.md).
    Importance,
}

impl Strategy {
    /// Every choice.
    #[cfg(feature = "cli")]
    pub(crate) const ALL: [Strategy; 3] =
        [Strategy::Oldest, Strategy::Middle, Strategy::Importance];

    /// The choice as `--strategy` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Oldest => "oldest",
            Strategy::Middle => "middle",
            Strategy::Importance => "importance",
        }
    }
}

/// Importance scores (docs/strategies.md). `--weights` names them as their fields are named,
/// and lists them in this order.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
pub struct Weights {
    pub user: f64,
    pub exchange: f64,
    pub assistant: f64,
    pub system: f64,
    pub other: f64,
    /// Score of a short message (at most `short_tokens` content tokens), whatever its role.
    pub short: f64,
    pub short_tokens: f64,
    /// Score of a single message that also appears, identical, elsewhere in the document (a
    /// framework's nudge, a repeated reminder), whatever its role.
    pub repeat: f64,
    /// Added when a result reports an error (an error flag, a non-zero exit status, an error
    /// line).
    pub error: f64,
    /// Added when tests are run or a result reports a test outcome.
    pub test: f64,
    /// Added when a call edits or creates a file.
    pub edit: f64,
    /// Added in proportion to recency: 0 for the oldest unit, `recency` for the newest.
    pub recency: f64,
}

impl Default for Weights {
    fn default() -> Weights {
        Weights {
            user: 3.0,
            exchange: 2.0,
            assistant: 1.5,
            system: 2.5,
            other: 1.0,
            short: 0.5,
            short_tokens: 8.0,
            repeat: 0.25,
            error: 1.5,
            test: 1.5,
            edit: 1.5,
            recency: 2.0,
        }
    }
}

/// `--weights`: `key=value` pairs, each replacing the default score of the field it names.
#[cfg(feature = "cli")]
pub fn parse_weights(s: &str) -> Result<Weights, String> {
    let mut w = weight_map(Weights::default());
    for pair in s.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("'{pair}' is not key=value"))?;
        let v: f64 = v
            .trim()
            .parse()
            .map_err(|_| format!("'{pair}': not a number"))?;
        if !v.is_finite() {
            return Err(format!("'{pair}': not a finite number"));
        }
        let Some(slot) = w.get_mut(k.trim()) else {
            let keys: Vec<&str> = w.keys().map(String::as_str).collect();
            return Err(format!(
                "unknown weight '{}' ({})",
                k.trim(),
                keys.join(", ")
            ));
        };
        *slot = v.into();
    }
    serde_json::from_value(Value::Object(w)).map_err(|e| e.to_string())
}

/// The scores by their names, in the order of the fields.
#[cfg(feature = "cli")]
fn weight_map(w: Weights) -> serde_json::Map<String, Value> {
    match serde_json::to_value(w) {
        Ok(Value::Object(map)) => map,
        _ => unreachable!("finite scores serialize to an object"),
    }
}

/// What to truncate to and how.
#[derive(Clone, Debug)]
pub struct Options {
    pub budget: u64,
    pub keep_last: Option<usize>,
    pub strategy: Strategy,
    pub keep_first: usize,
    pub weights: Weights,
    pub partial: bool,
    pub note: Option<String>,
    pub pins: PinOptions,
    /// The newest N tool exchanges are never removed (pinned ones and the newest unit count
    /// among the N); 0 for the `truncate` command. `fit` protects its `--keep` newest exchanges
    /// while it removes old units, and then removes the rest with 0.
    pub protect_recent_exchanges: usize,
    /// When removing every removable unit (and, with `partial`, cutting) still leaves the
    /// document over budget, return that document instead of failing with [`CannotFit`]: its
    /// `tokens_after` is then over the budget, and a later stage takes the rest. Still fails
    /// when the output could not start with a user message (I7).
    pub best_effort: bool,
}

impl Default for Options {
    /// `truncate`'s defaults, with a budget of 0.
    fn default() -> Options {
        Options {
            budget: 0,
            keep_last: None,
            strategy: Strategy::Oldest,
            keep_first: DEFAULT_KEEP_FIRST,
            weights: Weights::default(),
            partial: false,
            note: None,
            pins: PinOptions::default(),
            protect_recent_exchanges: 0,
            best_effort: false,
        }
    }
}

/// The result of truncating one document.
#[derive(Debug)]
pub struct Truncation {
    /// The document with units removed (and text cut with --partial).
    pub doc: Document,
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// Input indices of removed messages.
    pub removed: Vec<usize>,
    /// Input indices of messages cut by --partial, with tokens before and after.
    pub partial: Vec<(usize, usize, usize)>,
    /// Notes inserted.
    pub notes: usize,
    /// Originals of removed and cut messages.
    pub dropped: Vec<Dropped>,
    /// For each output message, its index in the input (None for a note).
    pub origins: Vec<Option<usize>>,
}

/// Truncates `doc` (already counted as `count` by `counter`) to `opts.budget`.
pub fn truncate(
    doc: Document,
    counter: &Counter,
    count: &DocumentCount,
    opts: &Options,
) -> Result<Truncation> {
    truncate_with(doc, counter, count, opts, None)
}

/// `truncate`, with the conversation model of `doc` if the caller already has it (fit, after
/// its prune stages, which leave the structure as it was).
pub fn truncate_with(
    doc: Document,
    counter: &Counter,
    count: &DocumentCount,
    opts: &Options,
    conv: Option<Conversation>,
) -> Result<Truncation> {
    let tokens_before = count.total();
    let budget = opts.budget as usize;
    let conv = conv.unwrap_or_else(|| Conversation::new(doc.messages(), doc.dialect));
    let n = conv.units.len();
    let pinned = conv.pinned_units(&opts.pins)?;
    let protected = newest_exchanges(&conv, opts.protect_recent_exchanges);
    let removable: Vec<bool> = (0..n)
        .map(|u| !pinned[u] && !protected[u] && u + 1 != n)
        .collect();
    let note_matcher = opts.note.as_deref().map(NoteText::new);

    // --keep-last: the N newest non-system messages, rounded down to a unit boundary.
    let mut keep = vec![true; n];
    if let Some(limit) = opts.keep_last {
        let spared: Vec<bool> = (0..n).map(|u| pinned[u] || protected[u]).collect();
        keep_last(
            &conv,
            doc.messages(),
            limit,
            &spared,
            note_matcher.as_ref(),
            &mut keep,
        );
    }
    let mut sel = Selection::new(&conv, count, keep, pinned, budget);
    if sel.total <= budget && sel.keep.iter().all(|&k| k) {
        return Ok(Truncation {
            origins: (0..doc.messages().len()).map(Some).collect(),
            doc,
            tokens_before,
            tokens_after: tokens_before,
            removed: Vec::new(),
            partial: Vec::new(),
            notes: 0,
            dropped: Vec::new(),
        });
    }
    super::refuse_server_state(&doc, "truncating")?;

    // The order in which removable units go (see `removal_order`).
    let candidates: Vec<usize> = (0..n).filter(|&u| sel.keep[u] && removable[u]).collect();
    let order = removal_order(&conv, doc.messages(), count, opts, candidates);
    let first_is_user = first_non_system_is_user(&conv, &vec![true; n]);
    let notes_cost = |keep: &[bool]| -> Result<usize> {
        match &opts.note {
            None => Ok(0),
            Some(text) => gaps(&conv, keep, doc.dialect)
                .iter()
                .map(|g| note_message(doc.dialect, text, g.1))
                .map(|m| {
                    counter
                        .message(&m, &mut Notes::default())
                        .map(|t| t.total())
                })
                .sum(),
        }
    };
    let mut notes = sel
        .remove_in_order(&order, &removable, first_is_user, &notes_cost)?
        .ok_or_else(|| first_not_user(tokens_before, opts, &sel.forced))?;

    // `importance`: the last unit removed may have left room. Put back removed units that fit
    // in it, the most important first (not with notes, whose cost would change with each gap).
    if opts.strategy == Strategy::Importance && opts.note.is_none() && sel.total <= budget {
        sel.put_back_by_importance(&order, first_is_user);
    }

    // Best effort, over budget: the output must still start with a user message (I7), so put
    // back the nearest removed unit that starts with one, whatever it costs.
    if sel.total + notes > budget && opts.best_effort && first_is_user {
        while let Some(u) = sel.user_unit_before(sel.first_kept()) {
            if sel.first_is_user() {
                break;
            }
            sel.put_back(u);
        }
        notes = notes_cost(&sel.keep)?;
    }

    let dialect = doc.dialect;
    let mut doc = doc;
    let mut messages = std::mem::take(doc.messages_mut());
    let mut total = sel.total + notes;
    let partial = if total > budget && (opts.partial || !opts.best_effort) {
        cut_or_fail(
            &sel,
            counter,
            count,
            opts,
            dialect,
            &mut messages,
            &mut total,
        )?
    } else {
        Vec::new()
    };

    if first_is_user && !sel.first_is_user() {
        return Err(first_not_user(tokens_before, opts, &sel.forced));
    }

    // Assemble the output, with a note at each gap.
    let Assembled {
        out,
        removed,
        mut dropped,
        origins,
        notes,
    } = assemble(
        &conv,
        &sel.keep,
        &mut messages,
        opts.note.as_deref(),
        dialect,
    );
    let partial: Vec<(usize, usize, usize)> = partial
        .into_iter()
        .map(|(m, before, after, original)| {
            dropped.push(Dropped {
                index: m,
                reason: "partial".into(),
                message: original,
            });
            (m, before, after)
        })
        .collect();
    dropped.sort_by_key(|d| d.index);
    *doc.messages_mut() = out;
    Ok(Truncation {
        doc,
        tokens_before,
        tokens_after: total,
        removed,
        partial,
        notes,
        dropped,
        origins,
    })
}

/// Which units stay and what they cost: the state the removal loop, the I7 repair, the
/// importance put-back and best effort share and update.
struct Selection<'a> {
    conv: &'a Conversation,
    /// Each unit's tokens.
    unit_tokens: Vec<usize>,
    /// The units kept.
    keep: Vec<bool>,
    /// Units `--keep-last` removed: they stay removed, whatever I7 would like.
    forced: Vec<bool>,
    /// Pinned units.
    pinned: Vec<bool>,
    /// The document's tokens with only the kept units (the notes at the gaps not included).
    total: usize,
    budget: usize,
}

impl<'a> Selection<'a> {
    /// The units of `conv` with `keep` kept (what `--keep-last` left).
    fn new(
        conv: &'a Conversation,
        count: &DocumentCount,
        keep: Vec<bool>,
        pinned: Vec<bool>,
        budget: usize,
    ) -> Selection<'a> {
        let unit_tokens: Vec<usize> = conv
            .units
            .iter()
            .map(|u| u.range().map(|m| count.messages[m].total()).sum())
            .collect();
        let total = count.fixed()
            + (0..keep.len())
                .filter(|&u| keep[u])
                .map(|u| unit_tokens[u])
                .sum::<usize>();
        Selection {
            conv,
            forced: keep.iter().map(|k| !k).collect(),
            pinned,
            unit_tokens,
            keep,
            total,
            budget,
        }
    }

    fn drop(&mut self, u: usize) {
        if self.keep[u] {
            self.keep[u] = false;
            self.total -= self.unit_tokens[u];
        }
    }

    fn put_back(&mut self, u: usize) {
        if !self.keep[u] {
            self.keep[u] = true;
            self.total += self.unit_tokens[u];
        }
    }

    /// Whether putting unit `u` back keeps the document within the budget.
    fn fits(&self, u: usize) -> bool {
        self.total + self.unit_tokens[u] <= self.budget
    }

    /// The first kept unit that is not a system message.
    fn first_kept(&self) -> Option<usize> {
        (0..self.keep.len()).find(|&u| self.keep[u] && self.conv.units[u].kind != UnitKind::System)
    }

    /// Whether the first kept unit that is not a system message starts with a user message.
    fn first_is_user(&self) -> bool {
        first_non_system_is_user(self.conv, &self.keep)
    }

    /// The nearest removed unit before `first` (all of them when `None`) that starts with a
    /// user message and that `--keep-last` did not remove.
    fn user_unit_before(&self, first: Option<usize>) -> Option<usize> {
        (0..first.unwrap_or(self.keep.len()))
            .rev()
            .find(|&u| !self.keep[u] && !self.forced[u] && starts_with_user(self.conv, u))
    }

    /// Removes units in `order` while the document is over the budget, keeps the output
    /// starting with a user message when the input did (I7, by putting back a user unit that
    /// fits, or removing the first kept unit when it is `removable`), and removes one more unit
    /// while the notes at the gaps push it over. Returns the notes' cost, or `None` when I7
    /// cannot hold.
    fn remove_in_order(
        &mut self,
        order: &[usize],
        removable: &[bool],
        first_is_user: bool,
        notes_cost: &dyn Fn(&[bool]) -> Result<usize>,
    ) -> Result<Option<usize>> {
        let mut next = order.iter().copied();
        loop {
            while self.total > self.budget {
                match next.next() {
                    Some(u) => self.drop(u),
                    None => break,
                }
            }
            // Over budget, the cannot-fit or --partial path decides first.
            if first_is_user && self.total <= self.budget {
                while !self.first_is_user() {
                    let first = self.first_kept();
                    match (
                        self.user_unit_before(first).filter(|&u| self.fits(u)),
                        first,
                    ) {
                        (Some(u), _) => self.put_back(u),
                        (None, Some(f)) if removable[f] => self.drop(f),
                        _ => return Ok(None),
                    }
                }
            }
            let notes = notes_cost(&self.keep)?;
            if self.total + notes <= self.budget {
                return Ok(Some(notes));
            }
            match next.next() {
                Some(u) => self.drop(u),
                None => return Ok(Some(notes)),
            }
        }
    }

    /// `importance`: the last unit removed may have left room. Puts back removed units that
    /// fit in it, the most important first (`order` is the removal order, least important
    /// first). A unit that would come before the first kept one must start with a user message
    /// (I7, when `first_is_user`); one held back for that is tried again once a user message
    /// before it is back.
    fn put_back_by_importance(&mut self, order: &[usize], first_is_user: bool) {
        let conv = self.conv;
        let mut first = self.first_kept();
        // Held back: unit -> its rank in the order of importance.
        let mut held: BTreeMap<usize, usize> = BTreeMap::new();
        let put_back = |sel: &mut Selection, u: usize| {
            if sel.keep[u] || sel.forced[u] || !sel.fits(u) {
                return false;
            }
            sel.put_back(u);
            true
        };
        for (rank, &u) in order.iter().rev().enumerate() {
            let becomes_first =
                conv.units[u].kind != UnitKind::System && first.is_none_or(|f| u < f);
            if becomes_first && first_is_user && !starts_with_user(conv, u) {
                if !self.keep[u] {
                    held.insert(u, rank);
                }
                continue;
            }
            if put_back(self, u) && becomes_first {
                first = Some(u);
                let mut retry: Vec<(usize, usize)> = held
                    .split_off(&u)
                    .into_iter()
                    .map(|(h, r)| (r, h))
                    .collect();
                retry.sort_unstable();
                for (_, h) in retry {
                    put_back(self, h);
                }
            }
        }
    }
}

/// `--keep-last`: marks as not kept the units (not `spared`) older than the `limit` newest
/// non-system messages, rounded down to a unit boundary; the newest unit always counts.
fn keep_last(
    conv: &Conversation,
    messages: &[Value],
    limit: usize,
    spared: &[bool],
    note_matcher: Option<&NoteText>,
    keep: &mut [bool],
) {
    let n = conv.units.len();
    let newest = n.checked_sub(1);
    let mut seen = 0usize;
    let mut cut = false;
    for u in (0..n).rev() {
        if spared[u] {
            continue;
        }
        let c = conv.units[u]
            .range()
            .filter(|&m| !conv.messages[m].role.is_system() && !conv.messages[m].control)
            .filter(|&m| !is_note(&messages[m], note_matcher))
            .count();
        if Some(u) == newest {
            seen += c;
        } else if c > 0 && (cut || seen + c > limit) {
            keep[u] = false;
            cut = true;
        } else {
            seen += c;
        }
    }
}

/// The order in which the removable `candidates` go: what the latest compaction item stands for
/// first (oldest first); then, with `oldest` and `importance`, older copies of repeated
/// messages (oldest first); then the strategy's order.
fn removal_order(
    conv: &Conversation,
    messages: &[Value],
    count: &DocumentCount,
    opts: &Options,
    candidates: Vec<usize>,
) -> Vec<usize> {
    let n = conv.units.len();
    // What a compaction item stands for goes first, oldest first.
    let (superseded, candidates): (Vec<usize>, Vec<usize>) = candidates
        .into_iter()
        .partition(|&u| conv.compacted.is_some_and(|c| u < c));
    let repeats = (opts.strategy != Strategy::Middle).then(|| Repeats::find(conv, messages));
    let (older_copies, candidates): (Vec<usize>, Vec<usize>) = match &repeats {
        Some(r) => candidates.into_iter().partition(|&u| r.older_copy[u]),
        None => (Vec::new(), candidates),
    };
    let by_strategy: Vec<usize> = match opts.strategy {
        Strategy::Oldest => candidates,
        Strategy::Middle => {
            let k = opts.keep_first.min(candidates.len());
            candidates[k..]
                .iter()
                .chain(&candidates[..k])
                .copied()
                .collect()
        }
        Strategy::Importance => {
            let repeated = |u: usize| repeats.as_ref().is_some_and(|r| r.repeated[u]);
            let mut scored: Vec<(f64, usize)> = candidates
                .iter()
                .map(|&u| {
                    let unit = Scored {
                        signals: conv.units[u]
                            .range()
                            .map(|m| Signals::of_message(&messages[m]))
                            .fold(Signals::default(), Signals::or),
                        repeated: repeated(u),
                    };
                    (
                        importance(conv, u, n, &count.messages, &opts.weights, unit),
                        u,
                    )
                })
                .collect();
            scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            scored.into_iter().map(|(_, u)| u).collect()
        }
    };
    superseded
        .into_iter()
        .chain(older_copies)
        .chain(by_strategy)
        .collect()
}

/// Over budget with every removable unit removed: without `--partial`, fails saying what must
/// be kept; with it, cuts the largest texts of the kept unpinned units, tool results first,
/// middle-out, and fails if even that leaves `total` over the budget (unless best effort).
/// Returns (message, tokens before, tokens after, original) for each message cut.
fn cut_or_fail(
    sel: &Selection,
    counter: &Counter,
    count: &DocumentCount,
    opts: &Options,
    dialect: Dialect,
    messages: &mut [Value],
    total: &mut usize,
) -> Result<Vec<(usize, usize, usize, Value)>> {
    let tokens_before = count.total();
    if !opts.partial {
        return Err(cannot_fit(
            tokens_before,
            opts.budget,
            format!(
                "{} (try --partial, --drop-system, --no-keep-task or a larger budget)",
                must_keep(sel, count, *total - sel.total)
            ),
        ));
    }
    let cuttable: Vec<usize> = (0..sel.keep.len())
        .filter(|&u| sel.keep[u] && !sel.pinned[u])
        .flat_map(|u| sel.conv.units[u].range())
        .collect();
    let partial = cut_partial(
        dialect, counter, count, &cuttable, sel.budget, messages, total,
    )?;
    if *total > sel.budget && !opts.best_effort {
        return Err(cannot_fit(
            tokens_before,
            opts.budget,
            format!(
                "even with --partial the document needs {total} tokens (pinned messages, tool-call arguments, thinking and images are never cut; try --drop-system, --no-keep-task or a larger budget)"
            ),
        ));
    }
    Ok(partial)
}

/// `--partial`: cuts the largest texts of messages `cuttable`, tool results first,
/// middle-out, until `total` is within `budget`. Returns (message, tokens before, tokens after,
/// original) for each message cut.
fn cut_partial(
    dialect: Dialect,
    counter: &Counter,
    count: &DocumentCount,
    cuttable: &[usize],
    budget: usize,
    messages: &mut [Value],
    total: &mut usize,
) -> Result<Vec<(usize, usize, usize, Value)>> {
    let mut partial: Vec<(usize, usize, usize, Value)> = Vec::new();
    let mut texts = Vec::new();
    for &m in cuttable {
        for (pointer, is_result) in dialect.text_locations(&messages[m]) {
            let len = pointer::get(&messages[m], &pointer)
                .and_then(Value::as_str)
                .map_or(0, str::len);
            texts.push((is_result, len, m, pointer));
        }
    }
    texts.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    for (_, _, m, pointer) in texts {
        // A cut rarely lands exactly (the message's framing); a few passes settle it.
        for _ in 0..4 {
            if *total <= budget {
                break;
            }
            let Some(text) = pointer::get(&messages[m], &pointer).and_then(Value::as_str) else {
                break;
            };
            let text_tokens = counter.text(text)?;
            let target = text_tokens.saturating_sub(*total - budget);
            let Some(cut) = clip_middle(counter.settings.encoding, text, target)? else {
                break;
            };
            let prev = partial.iter().position(|p| p.0 == m);
            if prev.is_none() {
                partial.push((
                    m,
                    count.messages[m].total(),
                    count.messages[m].total(),
                    messages[m].clone(),
                ));
            }
            let i = prev.unwrap_or(partial.len() - 1);
            *pointer::get_mut(&mut messages[m], &pointer).expect("located above") =
                Value::String(cut);
            let after = counter
                .message(&messages[m], &mut Notes::default())?
                .total();
            *total = *total + after - partial[i].2;
            partial[i].2 = after;
        }
    }
    Ok(partial)
}

/// Truncate's output messages and what was removed.
struct Assembled {
    out: Vec<Value>,
    removed: Vec<usize>,
    dropped: Vec<Dropped>,
    origins: Vec<Option<usize>>,
    notes: usize,
}

/// The kept units' messages in order, with a note at each gap (with `note`); the others are
/// removed. Takes the messages out of `messages`.
fn assemble(
    conv: &Conversation,
    keep: &[bool],
    messages: &mut [Value],
    note: Option<&str>,
    dialect: Dialect,
) -> Assembled {
    let mut out = Vec::with_capacity(messages.len());
    let mut removed = Vec::new();
    let mut dropped = Vec::new();
    let mut origins = Vec::with_capacity(messages.len());
    let mut notes = 0;
    let mut places = match note {
        Some(_) => gaps(conv, keep, dialect),
        None => Vec::new(),
    }
    .into_iter()
    .peekable();
    // Each unit, then the end.
    let units = conv.units.iter().map(Some).chain(std::iter::once(None));
    for (u, unit) in units.enumerate() {
        if let (Some(&(at, gap)), Some(text)) = (places.peek(), note) {
            if at == u {
                out.push(note_message(dialect, text, gap));
                origins.push(None);
                notes += 1;
                places.next();
            }
        }
        let Some(unit) = unit else {
            break;
        };
        if keep[u] {
            out.extend(unit.range().map(|m| std::mem::take(&mut messages[m])));
            origins.extend(unit.range().map(Some));
        } else {
            for m in unit.range() {
                removed.push(m);
                let message = std::mem::take(&mut messages[m]);
                dropped.push(Dropped {
                    index: m,
                    reason: "truncated".into(),
                    message,
                });
            }
        }
    }
    Assembled {
        out,
        removed,
        dropped,
        origins,
        notes,
    }
}

/// The output would not start with a user message (I7) and nothing can fix that.
fn first_not_user(tokens_before: usize, opts: &Options, forced: &[bool]) -> anyhow::Error {
    let why = if forced.iter().any(|&f| f) {
        "--keep-last removes every user message before the newest unit, and the output must start with a user message (raise --keep-last, or keep the task pinned)"
    } else {
        "the output must start with a user message and no user message fits before the newest unit (keep the task pinned, or raise the budget)"
    };
    cannot_fit(tokens_before, opts.budget, why.to_string())
}

fn cannot_fit(tokens_before: usize, budget: u64, reason: String) -> anyhow::Error {
    CannotFit {
        reason,
        tokens_before,
        budget,
    }
    .into()
}

/// Explains what must be kept and what it costs.
fn must_keep(sel: &Selection, count: &DocumentCount, notes: usize) -> String {
    let (conv, keep, pinned, unit_tokens) = (sel.conv, &sel.keep, &sel.pinned, &sel.unit_tokens);
    let n = conv.units.len();
    let system: usize = (0..n)
        .filter(|&u| pinned[u] && conv.units[u].kind == UnitKind::System)
        .map(|u| unit_tokens[u])
        .sum::<usize>()
        + count.system;
    let other_pinned: usize = (0..n)
        .filter(|&u| pinned[u] && conv.units[u].kind != UnitKind::System)
        .map(|u| unit_tokens[u])
        .sum();
    let newest = if n > 0 && !pinned[n - 1] {
        unit_tokens[n - 1]
    } else {
        0
    };
    let kept: usize = (0..n)
        .filter(|&u| keep[u])
        .map(|u| unit_tokens[u])
        .sum::<usize>()
        + count.fixed()
        + notes;
    let notes = if notes > 0 {
        format!(", notes {notes}")
    } else {
        String::new()
    };
    format!(
        "what must be kept needs {kept} tokens: system {system}, task and --pin {other_pinned}, newest unit {newest}, tool definitions {}, reply priming {}{notes}",
        count.tools, count.priming
    )
}

/// Whether unit `u` starts with a user message that is not only tool results.
fn starts_with_user(conv: &Conversation, u: usize) -> bool {
    let m = &conv.messages[conv.units[u].start];
    m.role == Role::User && !m.only_results
}

/// Whether the first kept non-system unit starts with a user message (false when every kept
/// unit is a system message).
fn first_non_system_is_user(conv: &Conversation, keep: &[bool]) -> bool {
    (0..conv.units.len())
        .find(|&u| keep[u] && conv.units[u].kind != UnitKind::System)
        .is_some_and(|u| starts_with_user(conv, u))
}

/// What a unit's importance reads besides its kind and size.
#[derive(Clone, Copy, Debug, Default)]
struct Scored {
    signals: Signals,
    /// A single message that appears, identical, elsewhere in the document.
    repeated: bool,
}

/// Importance of a unit (higher is kept longer): a base for its kind, plus a bonus for each
/// signal it shows (error, test, edit), plus recency.
fn importance(
    conv: &Conversation,
    u: usize,
    n: usize,
    messages: &[crate::counter::MessageTokens],
    w: &Weights,
    s: Scored,
) -> f64 {
    let unit = conv.units[u];
    let content: usize = unit.range().map(|m| messages[m].content).sum();
    let base = match unit.kind {
        UnitKind::ToolExchange => w.exchange,
        UnitKind::System if s.repeated => w.repeat,
        UnitKind::System => w.system,
        UnitKind::Single if s.repeated => w.repeat,
        UnitKind::Single if (content as f64) <= w.short_tokens => w.short,
        UnitKind::Single => match conv.messages[unit.start].role {
            Role::User => w.user,
            Role::Assistant => w.assistant,
            _ => w.other,
        },
    };
    let signals = [
        (s.signals.error, w.error),
        (s.signals.test, w.test),
        (s.signals.edit, w.edit),
    ]
    .iter()
    .filter(|(shown, _)| *shown)
    .map(|(_, bonus)| bonus)
    .sum::<f64>();
    let recency = if n > 1 {
        u as f64 / (n - 1) as f64
    } else {
        1.0
    };
    base + signals + w.recency * recency
}

/// The newest `k` tool exchanges (pinned ones and the newest unit among them).
fn newest_exchanges(conv: &Conversation, k: usize) -> Vec<bool> {
    let mut out = vec![false; conv.units.len()];
    for (u, _) in conv
        .units
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, unit)| unit.kind == UnitKind::ToolExchange)
        .take(k)
    {
        out[u] = true;
    }
    out
}

/// Units of one message that appear more than once, identical, in the document: same role,
/// same `name` and the same `content` JSON (other fields, such as ids or timestamps a
/// transcript may carry, are not compared). Tool exchanges never count: removing an older copy
/// never splits a call from its result. Messages are hashed, so this is linear in the document.
struct Repeats {
    /// A newer unit holds the same message.
    older_copy: Vec<bool>,
    /// The message appears more than once (its newest copy included).
    repeated: Vec<bool>,
}

impl Repeats {
    fn find(conv: &Conversation, messages: &[Value]) -> Repeats {
        let n = conv.units.len();
        let mut older_copy = vec![false; n];
        let mut repeated = vec![false; n];
        let hasher = std::collections::hash_map::RandomState::new();
        // For each hash, the newest unit of each distinct message with that hash.
        let mut newest: HashMap<u64, Vec<usize>> = HashMap::new();
        let key_of = |u: usize| {
            let unit = conv.units[u];
            (unit.kind != UnitKind::ToolExchange && unit.end == unit.start + 1)
                .then(|| repeat_key(&messages[unit.start]))
                .flatten()
        };
        for u in (0..n).rev() {
            let Some(key) = key_of(u) else { continue };
            let mut h = hasher.build_hasher();
            key.0.hash(&mut h);
            if let Some(name) = key.1 {
                hash_value(name, &mut h);
            }
            hash_value(key.2, &mut h);
            let same = newest.entry(h.finish()).or_default();
            match same.iter().find(|&&r| key_of(r) == Some(key)) {
                Some(&r) => {
                    older_copy[u] = true;
                    repeated[u] = true;
                    repeated[r] = true;
                }
                None => same.push(u),
            }
        }
        Repeats {
            older_copy,
            repeated,
        }
    }
}

/// What makes two messages the same: role, `name`, `content` (a message without content is
/// never a repeat).
fn repeat_key(m: &Value) -> Option<(&str, Option<&Value>, &Value)> {
    let content = m.field("content").filter(|c| !c.is_null())?;
    let role = m.field("role").and_then(Value::as_str)?;
    Some((role, m.field("name"), content))
}

/// Hashes a JSON value (equal values hash equally; objects in their key order, so the same
/// object written in another order is simply not recognised as a repeat).
fn hash_value(v: &Value, h: &mut impl Hasher) {
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => {
            h.write_u8(1);
            b.hash(h);
        }
        Value::Number(x) => {
            h.write_u8(2);
            x.to_string().hash(h);
        }
        Value::String(s) => {
            h.write_u8(3);
            s.hash(h);
        }
        Value::Array(items) => {
            h.write_u8(4);
            h.write_usize(items.len());
            items.iter().for_each(|i| hash_value(i, h));
        }
        Value::Object(map) => {
            h.write_u8(5);
            h.write_usize(map.len());
            for (k, x) in map {
                k.hash(h);
                hash_value(x, h);
            }
        }
    }
}

/// Where notes go: (the kept unit a note comes before, or the unit count for the end; messages
/// removed). A note goes where a run of units was removed, except that a note in the user role
/// (a dialect without a system role in its messages) never comes before the first kept user
/// turn: a later run would take it for the task. The runs before that turn are counted in the first note after it; when that turn is
/// the last unit kept, they get no note: a note after the newest unit would be the last message,
/// the one the model answers.
fn gaps(conv: &Conversation, keep: &[bool], dialect: Dialect) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut gap = 0;
    let first_turn = (dialect.note_role() == Role::User.name())
        .then(|| (0..conv.units.len()).find(|&u| keep[u] && starts_with_user(conv, u)))
        .flatten();
    for (u, unit) in conv.units.iter().enumerate() {
        if keep[u] {
            if gap > 0 && first_turn.is_none_or(|t| u > t) {
                out.push((u, gap));
                gap = 0;
            }
        } else {
            gap += unit.end - unit.start;
        }
    }
    // The newest unit is always kept, so a run still open here was held back from before the
    // first user turn, and that turn is the last unit: no note.
    out
}

/// The text of the note from `--note` and `--note-text TEXT` (which implies `--note`), or
/// `None` when no note is asked for; an empty text is a usage error.
#[cfg(feature = "cli")]
pub fn note_text(note: bool, text: Option<&str>) -> Result<Option<String>> {
    match text {
        Some("") => {
            anyhow::bail!("--note-text needs a text (or --note alone for the default note)")
        }
        Some(t) => Ok(Some(t.to_string())),
        None => Ok(note.then(|| DEFAULT_NOTE.to_string())),
    }
}

/// The note message for a gap of `count` messages.
fn note_message(dialect: Dialect, text: &str, count: usize) -> Value {
    dialect.text_message(
        dialect.note_role(),
        &text.replace("{count}", &count.to_string()),
    )
}

/// Recognises notes made from a `--note` text (so `--keep-last` does not count them).
struct NoteText {
    parts: Vec<String>,
}

impl NoteText {
    fn new(text: &str) -> NoteText {
        NoteText {
            parts: text.split("{count}").map(str::to_string).collect(),
        }
    }

    fn matches(&self, s: &str) -> bool {
        let Some(mut rest) = s.strip_prefix(self.parts[0].as_str()) else {
            return false;
        };
        for part in &self.parts[1..] {
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                return false;
            }
            rest = &rest[digits..];
            match rest.strip_prefix(part.as_str()) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest.is_empty()
    }
}

fn is_note(m: &Value, matcher: Option<&NoteText>) -> bool {
    match (matcher, m.field("content").and_then(Value::as_str)) {
        (Some(t), Some(c)) => t.matches(c),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[cfg(feature = "cli")]
    #[test]
    fn weights_parse_and_reject_unknown_keys() {
        let w = parse_weights("user=5, recency=0").unwrap();
        assert_eq!((w.user, w.recency, w.exchange), (5.0, 0.0, 2.0));
        let w = parse_weights("repeat=0.1,error=3,test=2,edit=1").unwrap();
        assert_eq!((w.repeat, w.error, w.test, w.edit), (0.1, 3.0, 2.0, 1.0));
        let err = parse_weights("color=1").unwrap_err();
        for key in weight_map(Weights::default()).keys() {
            assert!(err.contains(key), "{err} lists {key}");
            assert!(parse_weights(&format!("{key}=1")).is_ok(), "{key}");
        }
        assert!(parse_weights("user").is_err());
        assert!(parse_weights("user=NaN").is_err());
        // Scores come through as given, to the last bit.
        let w = parse_weights("user=0.1,short_tokens=1e300,recency=-2.5e-7,other=-0").unwrap();
        assert_eq!((w.user, w.short_tokens, w.recency), (0.1, 1e300, -2.5e-7));
        assert!(w.other == 0.0 && w.other.is_sign_negative());
        assert_eq!(
            parse_weights("colour=1").unwrap_err(),
            "unknown weight 'colour' (user, exchange, assistant, system, other, short, \
             short_tokens, repeat, error, test, edit, recency)"
        );
    }

    #[test]
    fn default_scores_rank_errors_tests_and_edits_above_boilerplate() {
        let w = Weights::default();
        for signal in [w.error, w.test, w.edit] {
            assert!(w.exchange + signal > w.user);
        }
        assert!(w.repeat < w.short && w.short < w.other);
    }

    fn conv(messages: &[Value]) -> Conversation {
        Conversation::new(messages, Dialect::Openai)
    }

    #[test]
    fn repeats_are_the_same_role_name_and_content() {
        let nudge = "No tool calls found in the response.";
        let call = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]});
        let result = json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt"});
        let messages = vec![
            json!({"role": "user", "content": "task"}),
            json!({"role": "user", "content": nudge}),
            call.clone(),
            result.clone(),
            json!({"role": "user", "content": nudge, "id": "m4"}),
            json!({"role": "user", "content": nudge, "name": "bot"}),
            json!({"role": "assistant", "content": nudge}),
            call,
            result,
            json!({"role": "assistant", "content": null}),
            json!({"role": "assistant", "content": null}),
            json!({"role": "user", "content": nudge, "id": "m11"}),
        ];
        let c = conv(&messages);
        let r = Repeats::find(&c, &messages);
        let unit = |m: usize| c.messages[m].unit;
        let older: Vec<usize> = (0..messages.len())
            .filter(|&m| c.units[unit(m)].start == m && r.older_copy[unit(m)])
            .collect();
        // Ids are not compared, a different `name` or role is another message, an exchange is
        // never a repeat, a message without content never is.
        assert_eq!(older, vec![1, 4]);
        assert!(r.repeated[unit(11)] && !r.repeated[unit(5)] && !r.repeated[unit(6)]);
        assert!(!r.repeated[unit(2)] && !r.repeated[unit(10)]);
    }

    #[test]
    fn the_newest_exchanges_are_counted_from_the_end() {
        let exchange = |id: &str| {
            [
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}),
                json!({"role": "tool", "tool_call_id": id, "content": "ok"}),
            ]
        };
        let mut messages = vec![json!({"role": "user", "content": "task"})];
        messages.extend(exchange("a"));
        messages.push(json!({"role": "assistant", "content": "between"}));
        messages.extend(exchange("b"));
        messages.extend(exchange("c"));
        messages.push(json!({"role": "assistant", "content": "done"}));
        let c = conv(&messages);
        assert_eq!(
            newest_exchanges(&c, 2),
            vec![false, false, false, true, true, false]
        );
        assert_eq!(newest_exchanges(&c, 0), vec![false; 6]);
        assert_eq!(newest_exchanges(&c, 9).iter().filter(|&&p| p).count(), 3);
    }

    #[test]
    fn notes_are_recognised() {
        let t = NoteText::new(DEFAULT_NOTE);
        assert!(t.matches(&DEFAULT_NOTE.replace("{count}", "12")));
        assert!(!t.matches(&DEFAULT_NOTE.replace("{count}", "")));
        assert!(!t.matches("hello"));
        let plain = NoteText::new("(trimmed)");
        assert!(plain.matches("(trimmed)"));
    }
}
