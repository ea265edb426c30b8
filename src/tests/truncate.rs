//! `ctx truncate` against the invariants of SPEC §2, over generated conversations and over
//! every file of the corpus (tests/corpus).

use super::common;

use crate::conversation::{Conversation, PinOptions, UnitKind};
use crate::counter::Counter;
use crate::document::{Dialect, Document};
use crate::ops::CannotFit;
use crate::ops::truncate::{Options, Strategy, Truncation, Weights, truncate};
use common::*;
use proptest::prelude::*;
use serde_json::{Value, json};

const NOTE: &str = "[{count} messages removed]";

fn is_note(m: &Value) -> bool {
    m.get("content")
        .and_then(Value::as_str)
        .is_some_and(|c| c.starts_with('[') && c.ends_with(" messages removed]"))
}

/// A cut message keeps its role and ids; only text changes, and it shows the cut (a marker, or
/// text cut to nothing).
fn is_cut(a: &Value, b: &Value) -> bool {
    let shown = b.to_string();
    a.get("role") == b.get("role")
        && a.get("tool_call_id") == b.get("tool_call_id")
        && a.get("tool_calls") == b.get("tool_calls")
        && a.as_object().map(|o| o.len()) == b.as_object().map(|o| o.len())
        && (shown.contains("omitted by ctx") || shown.contains("[...]") || shown.contains("\"\""))
}

/// Runs truncate; `Ok(None)` when it reports that the document cannot fit.
fn run_full(doc: &Document, opts: &Options) -> Result<Option<Truncation>, TestCaseError> {
    match with_counter(doc, |counter, count| {
        truncate(doc.clone(), counter, &count, opts)
    }) {
        Ok(t) => {
            assert_reported(t.tokens_after, &t.doc)?;
            Ok(Some(t))
        }
        Err(e) => {
            assert_cannot_fit(&e)?;
            prop_assert!(
                !opts.best_effort || first_is_user(doc),
                "best effort fails only on I7: {e:#}"
            );
            Ok(None)
        }
    }
}

fn run(doc: &Document, opts: &Options) -> Result<Option<Document>, TestCaseError> {
    Ok(run_full(doc, opts)?.map(|t| t.doc))
}

fn first_is_user(doc: &Document) -> bool {
    doc.messages()
        .iter()
        .find(|m| {
            !matches!(
                m.get("role").and_then(Value::as_str),
                Some("system" | "developer")
            )
        })
        .is_some_and(|m| m.get("role").and_then(Value::as_str) == Some("user"))
}

fn pinned_inputs(doc: &Document, pins: &PinOptions) -> Vec<usize> {
    let conv = Conversation::new(doc.messages(), doc.dialect);
    let p = conv.pinned_messages(pins).unwrap();
    (0..p.len()).filter(|&i| p[i]).collect()
}

/// The input messages of the newest `k` tool exchanges.
fn protected_inputs(doc: &Document, k: usize) -> Vec<usize> {
    let conv = Conversation::new(doc.messages(), doc.dialect);
    conv.units
        .iter()
        .rev()
        .filter(|u| u.kind == UnitKind::ToolExchange)
        .take(k)
        .flat_map(|u| u.range())
        .collect()
}

fn check_all(doc: &Document, opts: &Options) -> Result<(), TestCaseError> {
    let before_errors = error_count(doc);
    let Some(t) = run_full(doc, opts)? else {
        return Ok(());
    };
    let out = t.doc;
    // I5, or with best_effort: over the budget only when every unit it may remove is gone
    // (except a unit that starts with a user message, put back for I7).
    if opts.best_effort && tokens(&out) as u64 > opts.budget && tokens(doc) as u64 > opts.budget {
        let conv = Conversation::new(doc.messages(), doc.dialect);
        let keep: Vec<usize> = pinned_inputs(doc, &opts.pins)
            .into_iter()
            .chain(protected_inputs(doc, opts.protect_recent_exchanges))
            .chain(conv.units.last().map(|u| u.range()).into_iter().flatten())
            .collect();
        let kept: Vec<usize> = (0..doc.messages().len())
            .filter(|m| !t.removed.contains(m))
            .collect();
        let readded = kept.iter().filter(|m| !keep.contains(m)).count();
        prop_assert!(
            opts.partial || opts.note.is_some() || readded <= 1,
            "best effort kept {kept:?} beyond {keep:?}"
        );
    } else {
        prop_assert!(tokens(&out) as u64 <= opts.budget || tokens(doc) as u64 <= opts.budget);
    }
    // I1, I2, I7.
    assert_invariants(doc, &out, &[], is_cut, is_note)?;
    // I4, protected exchanges too, through the origin of each output message (identical
    // messages make matching by value ambiguous).
    prop_assert_eq!(t.origins.len(), out.messages().len());
    for (m, origin) in out.messages().iter().zip(&t.origins) {
        match origin {
            Some(i) => prop_assert!(doc.messages()[*i] == *m || is_cut(&doc.messages()[*i], m)),
            None => prop_assert!(is_note(m)),
        }
    }
    // The newest unit ends the output: nothing (a note) comes after the message the model
    // answers.
    if let Some(u) = Conversation::new(doc.messages(), doc.dialect).units.last() {
        let tail: Vec<Option<usize>> = u.range().map(Some).collect();
        prop_assert!(
            t.origins.ends_with(&tail),
            "the output does not end with the newest unit: {:?}",
            t.origins
        );
    }
    let mut must_keep = pinned_inputs(doc, &opts.pins);
    must_keep.extend(protected_inputs(doc, opts.protect_recent_exchanges));
    for i in must_keep {
        prop_assert!(t.origins.contains(&Some(i)), "message {} was removed", i);
    }
    // I3: no new structural errors.
    prop_assert!(
        error_count(&out) <= before_errors,
        "new errors: {:?}",
        crate::ops::check::check(&out)
    );
    // I6: idempotent (a best-effort output over the budget has not been fitted).
    if tokens(&out) as u64 <= opts.budget {
        let again = run(&out, opts)?.expect("a fitted document fits again");
        prop_assert_eq!(again.value(), out.value());
    }
    Ok(())
}

/// Identical messages inserted into a generated conversation: (where, as a share of its length;
/// which message; how many copies in a row).
type Repeats = Vec<(f64, u8, usize)>;

fn repeats() -> impl proptest::strategy::Strategy<Value = Repeats> {
    proptest::collection::vec((0.0f64..1.0, 0u8..3, 1usize..4), 0..6)
}

/// Inserts runs of identical messages (a framework's nudge, an assistant's filler, a copy of
/// the task) where a single message may stand: after the task, never inside a tool exchange.
fn with_repeats(value: Value, dialect: Dialect, repeats: &Repeats) -> Value {
    let mut value = value;
    let messages = match &mut value {
        Value::Array(m) => m,
        Value::Object(o) => {
            let key = if o.contains_key("input") {
                "input"
            } else {
                "messages"
            };
            o[key].as_array_mut().unwrap()
        }
        _ => unreachable!(),
    };
    // A Responses item of the model's turn (a call, reasoning, a hosted call) or an output.
    fn item(m: &Value) -> Option<&str> {
        m.get("type")
            .and_then(Value::as_str)
            .filter(|t| *t != "message")
    }
    let role = |m: &Value| {
        m.get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let calls = |m: &Value| {
        item(m).is_some_and(|t| !t.ends_with("_output") && t != "compaction")
            || m.get("tool_calls").is_some()
            || m.get("content").and_then(Value::as_array).is_some_and(|b| {
                b.iter()
                    .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            })
    };
    let results = |m: &Value| {
        item(m).is_some_and(|t| t.ends_with("_output"))
            || matches!(role(m).as_str(), "tool" | "function")
            || m.get("content").and_then(Value::as_array).is_some_and(|b| {
                b.iter()
                    .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            })
    };
    let Some(task) = messages
        .iter()
        .position(|m| role(m) == "user" && !results(m))
    else {
        return value;
    };
    let task_copy = messages[task].clone();
    for &(at, which, copies) in repeats {
        let slots: Vec<usize> = (task + 1..=messages.len())
            .filter(|&i| {
                !calls(&messages[i - 1]) && (i == messages.len() || !results(&messages[i]))
            })
            .collect();
        let Some(&i) = slots.get((at * slots.len() as f64) as usize) else {
            continue;
        };
        let m = match which {
            0 => {
                json!({"role": "user", "content": "No tool calls found in the response. Every response MUST include at least one tool call."})
            }
            1 => json!({"role": "assistant", "content": "I will continue with the next step."}),
            _ => task_copy.clone(),
        };
        for _ in 0..copies {
            messages.insert(i, m.clone());
        }
    }
    let _ = dialect;
    value
}

/// The document `value` and a budget of `share` of its tokens.
fn with_share(value: Value, dialect: Dialect, share: f64) -> (Document, u64) {
    let doc = parse(value, dialect);
    let budget = ((tokens(&doc) as f64) * share) as u64;
    (doc, budget)
}

/// A generated conversation with runs of repeated messages, and a budget of a share of its
/// tokens drawn from `share`.
fn budgeted(
    share: std::ops::Range<f64>,
) -> impl proptest::strategy::Strategy<Value = (Document, u64)> {
    proptest::strategy::Strategy::prop_map(
        (document(), repeats(), share),
        |((value, dialect), repeats, share)| {
            with_share(with_repeats(value, dialect, &repeats), dialect, share)
        },
    )
}

fn strategy() -> impl proptest::strategy::Strategy<Value = Strategy> {
    prop_oneof![
        Just(Strategy::Oldest),
        Just(Strategy::Middle),
        Just(Strategy::Importance)
    ]
}

proptest! {
    #![proptest_config(cases(96))]

    #[test]
    fn truncate_keeps_every_invariant(
        (doc, budget) in budgeted(0.05..1.2),
        strategy in strategy(),
        keep_last in proptest::option::weighted(0.3, 0usize..12),
        keep_first in 0usize..4,
        partial in proptest::bool::ANY,
        note in proptest::bool::weighted(0.3),
        drop_system in proptest::bool::weighted(0.2),
        no_keep_task in proptest::bool::weighted(0.2),
        protect in prop_oneof![3 => Just(0usize), 2 => 1usize..4],
        best_effort in proptest::bool::weighted(0.3),
    ) {
        let opts = Options {
            budget,
            keep_last,
            strategy,
            keep_first,
            weights: Weights::default(),
            partial,
            note: note.then(|| NOTE.to_string()),
            pins: PinOptions { drop_system, no_keep_task, pins: Vec::new() },
            protect_recent_exchanges: protect,
            best_effort,
        };
        check_all(&doc, &opts)?;
    }

    /// `oldest` removes older copies of repeated messages first, then the oldest units, and
    /// stops as soon as the document fits: what it removes is the shortest prefix of that order
    /// that fits.
    #[test]
    fn oldest_removes_repeats_first_and_only_as_many_units_as_needed(
        (doc, budget) in budgeted(0.3..1.0),
        protect in 0usize..3,
    ) {
        let opts = Options {
            budget,
            protect_recent_exchanges: protect,
            ..Options::default()
        };
        let Some(t) = run_full(&doc, &opts)? else { return Ok(()) };
        let (order, unit_tokens, conv) = oldest_order(&doc, protect);
        let removed: Vec<usize> = (0..conv.units.len())
            .filter(|&u| t.removed.contains(&conv.units[u].start))
            .collect();
        let prefix = &order[..removed.len()];
        let mut sorted = prefix.to_vec();
        sorted.sort();
        prop_assert_eq!(&sorted, &removed, "removed units are a prefix of {:?}", order);
        if let Some(&last) = prefix.last() {
            prop_assert!(t.tokens_after + unit_tokens[last] > opts.budget as usize, "one unit too many");
        }
    }

    /// `importance` leaves no room a removed unit would fit in (unless putting it back would
    /// make the output start with something other than a user message).
    #[test]
    fn importance_uses_the_budget(
        (doc, budget) in budgeted(0.2..1.0),
        protect in 0usize..3,
    ) {
        let opts = Options {
            budget,
            strategy: Strategy::Importance,
            protect_recent_exchanges: protect,
            pins: PinOptions { no_keep_task: true, ..PinOptions::default() },
            ..Options::default()
        };
        let Some(t) = run_full(&doc, &opts)? else { return Ok(()) };
        let (_, unit_tokens, conv) = oldest_order(&doc, protect);
        let kept = |u: usize| !t.removed.contains(&conv.units[u].start);
        let first = (0..conv.units.len()).find(|&u| kept(u) && conv.units[u].kind != UnitKind::System);
        for u in (0..conv.units.len()).filter(|&u| !kept(u)) {
            let start = &doc.messages()[conv.units[u].start];
            let opens_with_user = start.get("role").and_then(Value::as_str) == Some("user")
                && !conv.messages[conv.units[u].start].only_results;
            let becomes_first = conv.units[u].kind != UnitKind::System && first.is_none_or(|f| u < f);
            prop_assert!(
                t.tokens_after + unit_tokens[u] > opts.budget as usize
                    || (becomes_first && first_is_user(&doc) && !opens_with_user),
                "unit {} ({} tokens) fits in {} - {}", u, unit_tokens[u], opts.budget, t.tokens_after
            );
        }
    }

    /// An agent transcript (one user message, many exchanges) fits any budget that holds its
    /// pinned messages and newest unit.
    #[test]
    fn agent_transcripts_truncate_to_any_feasible_budget(
        exchanges in proptest::collection::vec((proptest::collection::vec((0u8..4, 1usize..300), 1..3), Just(false)), 5..60),
        dialect in prop_oneof![Just(crate::document::Dialect::Openai), Just(crate::document::Dialect::Anthropic)],
        share in 0.0f64..1.0,
    ) {
        let steps: Vec<Step> = std::iter::once(Step::User(20))
            .chain(exchanges.into_iter().map(|(calls, error)| Step::Exchange { calls, error }))
            .collect();
        let doc = parse(Value::Array(build(dialect, &steps, false)), dialect);
        let conv = Conversation::new(doc.messages(), doc.dialect);
        let s = settings_for(&doc);
        let count = Counter::new(&s, doc.dialect).document(&doc).unwrap();
        let last = conv.units.last().unwrap();
        let task: usize = count.messages[0].total();
        let newest: usize = last.range().map(|m| count.messages[m].total()).sum();
        let minimum = count.fixed() + task + newest;
        let total = count.total();
        let budget = minimum + ((total - minimum) as f64 * share) as usize;
        let opts = Options { budget: budget as u64, keep_first: 0, ..Options::default() };
        let out = run(&doc, &opts)?;
        prop_assert!(out.is_some(), "budget {budget} holds the minimum {minimum} but truncate failed");
        check_all(&doc, &opts)?;
    }
}

/// The order `oldest` removes units in (older copies of repeated messages, oldest first, then
/// the other units oldest first; never pinned, protected or newest), with unit token costs.
fn oldest_order(doc: &Document, protect: usize) -> (Vec<usize>, Vec<usize>, Conversation) {
    let conv = Conversation::new(doc.messages(), doc.dialect);
    let s = settings_for(doc);
    let count = Counter::new(&s, doc.dialect).document(doc).unwrap();
    let unit_tokens: Vec<usize> = conv
        .units
        .iter()
        .map(|u| u.range().map(|m| count.messages[m].total()).sum())
        .collect();
    let pinned = conv.pinned_units(&PinOptions::default()).unwrap();
    let n = conv.units.len();
    let protected: Vec<usize> = (0..n)
        .rev()
        .filter(|&u| conv.units[u].kind == UnitKind::ToolExchange)
        .take(protect)
        .collect();
    let key = |u: usize| {
        let unit = conv.units[u];
        let m = &doc.messages()[unit.start];
        (unit.kind != UnitKind::ToolExchange && unit.end == unit.start + 1)
            .then(|| {
                m.get("content")
                    .filter(|c| !c.is_null())
                    .map(|c| (m.get("role").cloned(), m.get("name").cloned(), c.clone()))
            })
            .flatten()
    };
    let candidates: Vec<usize> = (0..n)
        .filter(|&u| !pinned[u] && !protected.contains(&u) && u + 1 != n)
        .collect();
    // What the latest compaction item stands for goes first.
    let (mut order, candidates): (Vec<usize>, Vec<usize>) = candidates
        .into_iter()
        .partition(|&u| conv.compacted.is_some_and(|c| u < c));
    let older_copy =
        |u: usize| key(u).is_some_and(|k| (u + 1..n).any(|v| key(v) == Some(k.clone())));
    let (copies, rest): (Vec<usize>, Vec<usize>) =
        candidates.into_iter().partition(|&u| older_copy(u));
    order.extend(copies);
    order.extend(rest);
    (order, unit_tokens, conv)
}

const NUDGES: &str = "tests/data/truncate_shell_agent_nudges.json";

fn nudges() -> Document {
    Document::parse(read_json(std::path::Path::new(NUDGES)), None).unwrap()
}

fn truncated(doc: &Document, opts: &Options) -> Truncation {
    with_counter(doc, |counter, count| {
        truncate(doc.clone(), counter, &count, opts)
    })
    .unwrap()
}

/// The six identical "No tool calls found" nudges of a shell agent are messages 5, 9, 13, 15,
/// 19 and 23: the older copies go before anything else, the newest stays, and only as many go
/// as the budget needs.
#[test]
fn older_copies_of_repeated_messages_go_first() {
    let doc = nudges();
    let t = truncated(
        &doc,
        &Options {
            budget: 1500,
            ..Options::default()
        },
    );
    assert_eq!(t.removed, vec![5, 9, 13]);
    let t = truncated(
        &doc,
        &Options {
            budget: 1400,
            ..Options::default()
        },
    );
    assert_eq!(t.removed, vec![2, 3, 5, 9, 13, 15, 19]);
    // `middle` keeps its order: the units after the first two go first.
    let middle = Options {
        budget: 1500,
        strategy: Strategy::Middle,
        ..Options::default()
    };
    assert_eq!(truncated(&doc, &middle).removed, vec![5, 6, 7]);
}

/// On the same trajectory, `importance` keeps the failing test run (messages 10-11, a KeyError
/// and `1 failed`) and the edit (20-21), and drops the nudges.
#[test]
fn the_exchange_with_the_error_outlives_boilerplate_nudges() {
    let doc = nudges();
    for budget in [1200, 1000, 800] {
        let t = truncated(
            &doc,
            &Options {
                budget,
                strategy: Strategy::Importance,
                ..Options::default()
            },
        );
        for m in [10, 11, 20, 21] {
            assert!(
                !t.removed.contains(&m),
                "{budget}: {m} removed: {:?}",
                t.removed
            );
        }
        for m in [5, 9, 13, 15, 19] {
            assert!(
                t.removed.contains(&m),
                "{budget}: {m} kept: {:?}",
                t.removed
            );
        }
        assert!(
            t.tokens_after as u64 * 100 >= budget * 95,
            "{budget}: {}",
            t.tokens_after
        );
    }
    // With the old scores (no signals, repeats scored as user messages) the error went first.
    let flat = Weights {
        repeat: 3.0,
        error: 0.0,
        test: 0.0,
        edit: 0.0,
        ..Weights::default()
    };
    let t = truncated(
        &doc,
        &Options {
            budget: 1000,
            strategy: Strategy::Importance,
            weights: flat,
            ..Options::default()
        },
    );
    assert!(t.removed.contains(&10), "{:?}", t.removed);
}

/// `protect_recent_exchanges` keeps the newest exchanges whatever the budget asks: fit's "remove
/// old units, never the newest --keep exchanges". With `best_effort` the document comes back
/// over budget instead of failing, for the next stage to finish.
#[test]
fn the_newest_exchanges_can_be_protected() {
    let doc = nudges();
    // Exchanges: 2-3, 6-7, 10-11, 16-17, 20-21, 24-25, 26-27 (the newest unit).
    let opts = Options {
        budget: 600,
        ..Options::default()
    };
    let t = truncated(&doc, &opts);
    assert!(t.removed.contains(&20) && t.removed.contains(&21));
    let protect = Options {
        protect_recent_exchanges: 3,
        ..opts.clone()
    };
    let err = with_counter(&doc, |counter, count| {
        truncate(doc.clone(), counter, &count, &protect)
    })
    .unwrap_err();
    assert!(err.downcast_ref::<CannotFit>().is_some());
    let t = truncated(
        &doc,
        &Options {
            best_effort: true,
            ..protect.clone()
        },
    );
    assert!(t.tokens_after > 600);
    let kept: Vec<usize> = (0..28).filter(|m| !t.removed.contains(m)).collect();
    assert_eq!(kept, vec![0, 1, 20, 21, 24, 25, 26, 27]);
    // Within budget, protection changes only what is protected.
    let t = truncated(
        &doc,
        &Options {
            budget: 1300,
            ..protect
        },
    );
    assert!(t.tokens_after <= 1300);
    assert!((20..28).all(|m| !t.removed.contains(&m)));
}

/// An Anthropic note never comes before the first kept user turn (a later run would take it for
/// the task); when that turn is the newest unit, the removed messages get no note rather than
/// one after the newest unit, where it would be the message the model answers.
#[test]
fn no_note_after_the_newest_unit() {
    let doc = Document::parse(
        json!([
            {"role": "user", "content": "first request, long enough to be worth removing ".repeat(4)},
            {"role": "user", "content": "second request, long enough to be worth removing ".repeat(4)},
            {"role": "user", "content": "the newest request"}
        ]),
        Some(Dialect::Anthropic),
    )
    .unwrap();
    let newest = doc.messages()[2].clone();
    let opts = Options {
        budget: 30,
        note: Some(NOTE.into()),
        pins: PinOptions {
            no_keep_task: true,
            ..PinOptions::default()
        },
        ..Options::default()
    };
    let t = truncated(&doc, &opts);
    assert_eq!(t.doc.messages(), &[newest], "{:?}", t.doc.messages());
    assert_eq!(t.removed, vec![0, 1]);
}

#[test]
fn a_budget_larger_than_the_input_is_the_identity() {
    for (path, value, doc) in corpus() {
        let opts = Options {
            budget: tokens(&doc) as u64 + 1,
            partial: true,
            note: Some(NOTE.into()),
            ..Options::default()
        };
        let t = truncated(&doc, &opts);
        assert_eq!(t.doc.into_value(), value, "{}", path.display());
    }
}

#[test]
fn every_corpus_file_through_every_strategy_at_several_budgets() {
    let mut tally = Tally::default();
    for (path, _, doc) in corpus() {
        let total = tokens(&doc);
        for share in [0.9, 0.5, 0.25, 0.1] {
            for strategy in [Strategy::Oldest, Strategy::Middle, Strategy::Importance] {
                // As the command runs, with --partial, and as fit's unit removal runs.
                for (partial, protect, best_effort) in
                    [(false, 0, false), (true, 0, false), (false, 3, true)]
                {
                    let opts = Options {
                        budget: (total as f64 * share) as u64,
                        strategy,
                        partial,
                        protect_recent_exchanges: protect,
                        best_effort,
                        ..Options::default()
                    };
                    let checked = (|| -> Result<bool, TestCaseError> {
                        check_all(&doc, &opts)?;
                        Ok(run(&doc, &opts)?.is_some())
                    })();
                    tally.add(checked, || {
                        let file = path.display();
                        format!(
                            "{file} at {share} {strategy:?} partial={partial} protect={protect}"
                        )
                    });
                }
            }
        }
    }
    // The sweep must exercise truncation, not only refusals. At a tenth or a quarter of a short
    // conversation's tokens most runs cannot fit (its pinned messages and newest unit are
    // more), and most corpus conversations are short: at least a third of all runs fit.
    let Tally { fitted, refused } = tally;
    assert!(fitted * 2 > refused, "fitted {fitted}, refused {refused}");
}

/// One user message and 300 tool exchanges: every budget from the minimum (pinned messages plus
/// the newest unit) up to the whole document fits, in both dialects.
#[test]
fn an_agent_transcript_with_hundreds_of_exchanges_fits_any_feasible_budget() {
    for dialect in [
        crate::document::Dialect::Openai,
        crate::document::Dialect::Anthropic,
    ] {
        let steps: Vec<Step> = std::iter::once(Step::System)
            .chain(agent_steps(300, |i| 20 + (i * 37) % 150))
            .collect();
        let doc = parse(Value::Array(build(dialect, &steps, false)), dialect);
        let conv = Conversation::new(doc.messages(), doc.dialect);
        let s = settings_for(&doc);
        let count = Counter::new(&s, doc.dialect).document(&doc).unwrap();
        let pinned = conv.pinned_units(&PinOptions::default()).unwrap();
        let unit_tokens = |u: usize| -> usize {
            conv.units[u]
                .range()
                .map(|m| count.messages[m].total())
                .sum()
        };
        let n = conv.units.len();
        let minimum = count.fixed()
            + (0..n)
                .filter(|&u| pinned[u] || u == n - 1)
                .map(unit_tokens)
                .sum::<usize>();
        let total = count.total();
        for budget in [minimum, minimum + 1, minimum + 500, total / 2, total - 1] {
            let opts = Options {
                budget: budget as u64,
                keep_first: 0,
                ..Options::default()
            };
            let out = truncate(doc.clone(), &Counter::new(&s, doc.dialect), &count, &opts)
                .unwrap_or_else(|e| {
                    panic!("{dialect:?} budget {budget} (minimum {minimum}): {e:#}")
                });
            assert!(out.tokens_after <= budget);
            assert_eq!(out.tokens_after, tokens(&out.doc));
            assert_eq!(
                error_count(&out.doc),
                0,
                "{:?}",
                crate::ops::check::check(&out.doc)
            );
        }
        let below = Options {
            budget: minimum as u64 - 1,
            keep_first: 0,
            ..Options::default()
        };
        let err =
            truncate(doc.clone(), &Counter::new(&s, doc.dialect), &count, &below).unwrap_err();
        assert!(err.downcast_ref::<CannotFit>().is_some());
    }
}
