//! The conversation model every command works on: messages, units, turns, the task, pins.
//!
//! A *unit* is what commands keep or remove as a whole (SPEC §2): a tool exchange (an assistant
//! message with tool calls plus the results that answer it), a system/developer message, or any
//! other single message; a control item (a Responses `compaction_trigger`) is no unit of its own
//! but part of the unit before it. Pairing is positional: results answer the calls before them in
//! their exchange, never a global id map, because real traffic reuses call ids.
//! Each message is read by its dialect ([`crate::dialect`]), which also says where a tool
//! exchange ends. This module never changes messages; it also never counts tokens.

use std::collections::{HashMap, VecDeque};

use anyhow::{Result, bail};
use serde_json::Value;

pub use crate::dialect::{Call, CallRef, Message, Role};
use crate::dialect::{Dialect, Field};

/// What a unit is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitKind {
    /// An assistant message with tool calls and the results answering them.
    ToolExchange,
    /// A system or developer message.
    System,
    /// Any other single message.
    Single,
}

/// Messages that are kept or removed together: `messages[start..end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub kind: UnitKind,
    pub start: usize,
    pub end: usize,
}

impl Unit {
    /// The message indices of the unit.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.start..self.end
    }
}

/// Which messages must never be removed.
#[derive(Clone, Debug, Default)]
pub struct PinOptions {
    /// `--drop-system`: system/developer messages are not pinned.
    pub drop_system: bool,
    /// `--no-keep-task`: the task is not pinned.
    pub no_keep_task: bool,
    /// `--pin I,J`: indices into the input; negative counts from the end.
    pub pins: Vec<i64>,
}

/// A document's messages grouped into units and turns.
#[derive(Clone, Debug)]
pub struct Conversation {
    pub messages: Vec<Message>,
    pub units: Vec<Unit>,
    /// The first user message that is not only a tool-result carrier.
    pub task: Option<usize>,
    /// Messages that start a turn (user messages that are not only tool-result carriers).
    pub turns: Vec<usize>,
    /// The unit of the latest compaction item (Responses), when there is one: it stands for
    /// everything before it, which is removed first.
    pub compacted: Option<usize>,
}

impl Conversation {
    /// Builds the model of `messages` in `dialect`.
    pub fn new(messages: &[Value], dialect: Dialect) -> Conversation {
        let mut msgs: Vec<Message> = messages.iter().map(|m| dialect.read_message(m)).collect();
        // The latest compaction supersedes the earlier ones: only it must stay.
        let latest = msgs.iter().rposition(|m| m.compaction);
        for m in msgs.iter_mut().take(latest.unwrap_or(0)) {
            if m.compaction {
                m.fixed = false;
            }
        }
        let mut units: Vec<Unit> = Vec::new();
        let mut i = 0;
        // Control items before the first unit, which they join.
        let mut leading = 0;
        while i < msgs.len() {
            // A control item is no unit of its own: it joins the unit before it.
            if msgs[i].control {
                i += 1;
                match units.last_mut() {
                    Some(unit) => unit.end = i,
                    None => leading = i,
                }
                continue;
            }
            let start = i;
            // The latest compaction opens what the model reads, as a system prompt does.
            let kind = if msgs[i].role.is_system() || Some(i) == latest {
                i += 1;
                UnitKind::System
            } else if let Some(end) = dialect.exchange_end(&msgs, i) {
                i = end;
                UnitKind::ToolExchange
            } else {
                i += 1;
                UnitKind::Single
            };
            units.push(Unit {
                kind,
                start: if units.is_empty() { 0 } else { start },
                end: i,
            });
        }
        if units.is_empty() && leading > 0 {
            // Nothing but control items.
            units.push(Unit {
                kind: UnitKind::Single,
                start: 0,
                end: leading,
            });
        }
        for (u, unit) in units.iter().enumerate() {
            for m in unit.range() {
                msgs[m].unit = u;
            }
            if unit.kind == UnitKind::ToolExchange {
                pair_results(&mut msgs, unit.range());
                // A reference that outputs answer stands for a call the server holds: it goes
                // with them, as a call does, rather than pinning them.
                for m in unit.range() {
                    if msgs[m].reference {
                        msgs[m].fixed = false;
                    }
                }
            }
        }
        let turns: Vec<usize> = (0..msgs.len())
            .filter(|&i| msgs[i].role == Role::User && !msgs[i].only_results)
            .collect();
        Conversation {
            task: turns.first().copied(),
            turns,
            compacted: latest.map(|i| msgs[i].unit),
            messages: msgs,
            units,
        }
    }

    /// For each unit, whether it must be kept.
    pub fn pinned_units(&self, opts: &PinOptions) -> Result<Vec<bool>> {
        let mut pinned: Vec<bool> = self
            .units
            .iter()
            .map(|u| {
                let msgs = &self.messages[u.range()];
                (u.kind == UnitKind::System && !opts.drop_system)
                    || msgs.iter().any(|m| m.fixed)
                    || msgs.iter().all(|m| m.control)
            })
            .collect();
        if let (Some(task), false) = (self.task, opts.no_keep_task) {
            pinned[self.messages[task].unit] = true;
        }
        for &p in &opts.pins {
            let i = resolve_index(p, self.messages.len())?;
            pinned[self.messages[i].unit] = true;
        }
        Ok(pinned)
    }

    /// For each message, whether it must be kept: its unit is pinned, or it is a control item
    /// (kept where it is, without pinning the unit it belongs to).
    pub fn pinned_messages(&self, opts: &PinOptions) -> Result<Vec<bool>> {
        let units = self.pinned_units(opts)?;
        Ok(self
            .messages
            .iter()
            .map(|m| units[m.unit] || m.control)
            .collect())
    }

    /// The newest message that is not a control item: what the model answers next.
    pub fn last_message(&self) -> Option<usize> {
        self.messages.iter().rposition(|m| !m.control)
    }

    /// Where the `k` newest messages start, extended back to the start of their unit, counting
    /// no control item among them: 0 when there are no more than `k`, the end for `k` = 0.
    pub fn recent_start(&self, k: usize) -> usize {
        let n = self.messages.len();
        if k == 0 {
            return n;
        }
        let mut seen = 0;
        for i in (0..n).rev() {
            if self.messages[i].control {
                continue;
            }
            seen += 1;
            if seen == k {
                return self.units[self.messages[i].unit].start;
            }
        }
        0
    }

    /// The call a result answers.
    pub fn call(&self, r: CallRef) -> &Call {
        &self.messages[r.message].calls[r.call]
    }

    /// The tool names a message involves: the tools it calls, or the tools whose results it
    /// carries (from the result's own `name`, else from the call it answers).
    #[cfg(feature = "cli")]
    pub fn tool_names(&self, i: usize) -> Vec<String> {
        let m = &self.messages[i];
        let mut names: Vec<String> = m.calls.iter().filter_map(|c| c.name.clone()).collect();
        for r in &m.results {
            let name = r
                .name
                .clone()
                .or_else(|| r.answers.and_then(|c| self.call(c).name.clone()));
            if let Some(n) = name {
                names.push(n);
            }
        }
        names
    }
}

/// The task of `messages`: the first user message that is not only a tool-result carrier, found
/// without modelling the whole conversation (it is usually near the start).
pub fn find_task(messages: &[Value], dialect: Dialect) -> Option<usize> {
    messages.iter().position(|m| {
        Role::parse(m.field("role")) == Role::User && !dialect.read_message(m).only_results
    })
}

/// Resolves `--pin` style indices: negative counts from the end.
pub fn resolve_index(p: i64, len: usize) -> Result<usize> {
    let i = if p < 0 { len as i64 + p } else { p };
    if i < 0 || i >= len as i64 {
        bail!("--pin {p}: no such message (the document has {len})");
    }
    Ok(i as usize)
}

/// Pairs every result in an exchange with the first unanswered call of the same id before it
/// (legacy `function` results with the first unanswered legacy call before them).
fn pair_results(msgs: &mut [Message], range: std::ops::Range<usize>) {
    let mut open: HashMap<Option<String>, VecDeque<CallRef>> = HashMap::new();
    let mut legacy_open: VecDeque<CallRef> = VecDeque::new();
    for m in range {
        if msgs[m].role == Role::Assistant {
            for (c, call) in msgs[m].calls.iter().enumerate() {
                let r = CallRef {
                    message: m,
                    call: c,
                };
                if call.legacy {
                    legacy_open.push_back(r);
                } else {
                    open.entry(call.id.clone()).or_default().push_back(r);
                }
            }
        }
        for r in &mut msgs[m].results {
            r.answers = if r.legacy {
                legacy_open.pop_front()
            } else if r.id.is_some() {
                open.get_mut(&r.id).and_then(VecDeque::pop_front)
            } else {
                None
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn kinds(c: &Conversation) -> Vec<(UnitKind, usize, usize)> {
        c.units.iter().map(|u| (u.kind, u.start, u.end)).collect()
    }

    #[test]
    fn groups_openai_exchanges_positionally_with_reused_ids() {
        let msgs = json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "content": "2"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "h", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "3"},
            {"role": "assistant", "content": "done"}
        ]);
        let c = Conversation::new(msgs.as_array().unwrap(), Dialect::Openai);
        use UnitKind::*;
        assert_eq!(
            kinds(&c),
            vec![
                (System, 0, 1),
                (Single, 1, 2),
                (ToolExchange, 2, 5),
                (ToolExchange, 5, 7),
                (Single, 7, 8)
            ]
        );
        assert_eq!(c.task, Some(1));
        // The reused id "a" pairs with the call of its own exchange, not the first one.
        assert_eq!(
            c.messages[6].results[0].answers,
            Some(CallRef {
                message: 5,
                call: 0
            })
        );
        #[cfg(feature = "cli")]
        assert_eq!(c.tool_names(6), vec!["h"]);
        #[cfg(feature = "cli")]
        assert_eq!(c.tool_names(4), vec!["g"]);
    }

    #[test]
    fn anthropic_results_pair_with_the_merged_assistant_run() {
        let msgs = json!([
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": [{"type": "text", "text": "let me look"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]},
            {"role": "user", "content": "and then?"}
        ]);
        let c = Conversation::new(msgs.as_array().unwrap(), Dialect::Anthropic);
        use UnitKind::*;
        assert_eq!(
            kinds(&c),
            vec![(Single, 0, 1), (ToolExchange, 1, 4), (Single, 4, 5)]
        );
        assert_eq!(c.turns, vec![0, 4]);
        assert_eq!(
            find_task(msgs.as_array().unwrap(), Dialect::Anthropic),
            Some(0)
        );
        // A result carrier is never the task.
        assert_eq!(
            find_task(&msgs.as_array().unwrap()[1..], Dialect::Anthropic),
            Some(3)
        );
        assert!(c.messages[3].only_results);
        assert_eq!(
            c.messages[3].results[0].answers,
            Some(CallRef {
                message: 2,
                call: 0
            })
        );
    }

    #[test]
    fn legacy_function_calls_pair_with_function_messages() {
        let msgs = json!([
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{}"}},
            {"role": "function", "name": "f", "content": "r"},
            {"role": "assistant", "content": null, "function_call": {"name": "Finish", "arguments": "{}"}}
        ]);
        let c = Conversation::new(msgs.as_array().unwrap(), Dialect::Openai);
        assert_eq!(c.units.len(), 3);
        assert_eq!(c.units[1].range(), 1..3);
        assert_eq!(
            c.messages[2].results[0].answers,
            Some(CallRef {
                message: 1,
                call: 0
            })
        );
        assert_eq!(c.units[2].kind, UnitKind::ToolExchange);
    }

    #[test]
    fn pins_system_task_and_named_units() {
        let msgs = json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "b"},
            {"role": "assistant", "content": "c"}
        ]);
        let c = Conversation::new(msgs.as_array().unwrap(), Dialect::Openai);
        let p = c.pinned_units(&PinOptions::default()).unwrap();
        assert_eq!(p, vec![true, true, false, false, false]);
        let p = c
            .pinned_units(&PinOptions {
                drop_system: true,
                no_keep_task: true,
                pins: vec![-1, 2],
            })
            .unwrap();
        assert_eq!(p, vec![false, false, true, false, true]);
        assert!(
            c.pinned_units(&PinOptions {
                pins: vec![5],
                ..Default::default()
            })
            .is_err()
        );
        assert!(
            c.pinned_units(&PinOptions {
                pins: vec![-6],
                ..Default::default()
            })
            .is_err()
        );
    }

    /// One generated step of an OpenAI conversation.
    #[derive(Clone, Debug)]
    enum Step {
        System,
        User,
        Assistant,
        /// An exchange with `calls` parallel calls (ids drawn from a small pool, so they repeat
        /// across exchanges), answered by `answered` of them.
        Exchange {
            calls: usize,
            answered: usize,
            ids: Vec<u8>,
        },
        Orphan,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            1 => Just(Step::System),
            3 => Just(Step::User),
            3 => Just(Step::Assistant),
            4 => (1usize..4, 0usize..4, proptest::collection::vec(0u8..3, 4))
                .prop_map(|(calls, answered, ids)| Step::Exchange { calls, answered: answered.min(calls), ids }),
            1 => Just(Step::Orphan),
        ]
    }

    fn build(steps: &[Step]) -> (Vec<Value>, Vec<(usize, usize)>) {
        let mut msgs = Vec::new();
        let mut exchanges: Vec<(usize, usize)> = Vec::new();
        for s in steps {
            let in_exchange = exchanges.last().is_some_and(|e| e.1 == msgs.len());
            match s {
                Step::System => msgs.push(json!({"role": "system", "content": "s"})),
                Step::User => msgs.push(json!({"role": "user", "content": "u"})),
                Step::Assistant => msgs.push(json!({"role": "assistant", "content": "a"})),
                Step::Orphan => {
                    msgs.push(json!({"role": "tool", "tool_call_id": "x", "content": "o"}));
                    // A stray result right after an exchange is absorbed by it (positional).
                    if in_exchange {
                        exchanges.last_mut().expect("checked").1 = msgs.len();
                    }
                }
                Step::Exchange {
                    calls,
                    answered,
                    ids,
                } => {
                    let start = msgs.len();
                    let tc: Vec<Value> = (0..*calls)
                        .map(|k| {
                            json!({"id": format!("call_{}", ids[k]), "type": "function",
                                        "function": {"name": format!("t{k}"), "arguments": "{}"}})
                        })
                        .collect();
                    msgs.push(json!({"role": "assistant", "content": null, "tool_calls": tc}));
                    for id in &ids[..*answered] {
                        msgs.push(json!({"role": "tool", "tool_call_id": format!("call_{id}"), "content": "r"}));
                    }
                    exchanges.push((start, msgs.len()));
                }
            }
        }
        (msgs, exchanges)
    }

    proptest! {
        #[test]
        fn units_partition_messages_and_keep_exchanges_whole(steps in proptest::collection::vec(step(), 0..40)) {
            let (msgs, exchanges) = build(&steps);
            let c = Conversation::new(&msgs, Dialect::Openai);
            // Units cover every message exactly once, in order.
            let mut next = 0;
            for (u, unit) in c.units.iter().enumerate() {
                prop_assert_eq!(unit.start, next);
                prop_assert!(unit.end > unit.start);
                for m in unit.range() { prop_assert_eq!(c.messages[m].unit, u); }
                next = unit.end;
            }
            prop_assert_eq!(next, msgs.len());
            // Every generated exchange is exactly one unit, and every result in it answers a call
            // of that very exchange (positional pairing even when ids repeat across exchanges).
            for (start, end) in exchanges {
                let unit = c.units[c.messages[start].unit];
                prop_assert_eq!((unit.kind, unit.start, unit.end), (UnitKind::ToolExchange, start, end));
                for m in start + 1..end {
                    let r = &c.messages[m].results[0];
                    if r.id.as_deref() == Some("x") {
                        prop_assert_eq!(r.answers, None);
                        continue;
                    }
                    let call = r.answers.expect("answered");
                    prop_assert_eq!(call.message, start);
                    prop_assert_eq!(&c.call(call).id, &r.id);
                }
            }
            // System messages are their own units; tool messages never start a non-orphan unit.
            for (i, m) in c.messages.iter().enumerate() {
                if m.role.is_system() {
                    let u = c.units[m.unit];
                    prop_assert_eq!((u.kind, u.start, u.end), (UnitKind::System, i, i + 1));
                }
            }
            // The task is the first user message.
            prop_assert_eq!(c.task, c.messages.iter().position(|m| m.role == Role::User));
            prop_assert_eq!(c.task, find_task(&msgs, Dialect::Openai));
        }
    }
}
