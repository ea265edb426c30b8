//! `ctx truncate` against the invariants of SPEC §2, over generated conversations and over
//! every file of the corpus (tests/corpus).

mod common;

use common::*;
use ctx::cmd::CannotFit;
use ctx::cmd::truncate::{Options, Strategy, Weights, truncate};
use ctx::conversation::{Conversation, PinOptions};
use ctx::counter::Counter;
use ctx::document::Document;
use proptest::prelude::*;
use serde_json::Value;

const NOTE: &str = "[{count} messages removed]";

fn is_note(m: &Value) -> bool {
    m.get("content")
        .and_then(Value::as_str)
        .is_some_and(|c| c.starts_with('[') && c.ends_with(" messages removed]"))
}

/// A cut message keeps its role and ids; only text changes.
fn is_cut(a: &Value, b: &Value) -> bool {
    a.get("role") == b.get("role")
        && a.get("tool_call_id") == b.get("tool_call_id")
        && a.get("tool_calls") == b.get("tool_calls")
        && a.as_object().map(|o| o.len()) == b.as_object().map(|o| o.len())
}

/// Runs truncate; `Ok(None)` when it reports that the document cannot fit.
fn run(doc: &Document, opts: &Options) -> Result<Option<Document>, TestCaseError> {
    let s = settings_for(doc);
    let counter = Counter::new(&s, doc.dialect);
    let count = counter.document(doc).unwrap();
    match truncate(doc.clone(), &counter, &count, opts) {
        Ok(t) => {
            prop_assert_eq!(
                t.tokens_after,
                tokens(&t.doc),
                "reported tokens are the real count"
            );
            Ok(Some(t.doc))
        }
        Err(e) => {
            prop_assert!(
                e.downcast_ref::<CannotFit>().is_some(),
                "unexpected error {e:#}"
            );
            Ok(None)
        }
    }
}

fn pinned_inputs(doc: &Document, pins: &PinOptions) -> Vec<usize> {
    let conv = Conversation::new(doc.messages(), doc.dialect);
    let p = conv.pinned_messages(pins).unwrap();
    (0..p.len()).filter(|&i| p[i]).collect()
}

fn check_all(doc: &Document, opts: &Options) -> Result<(), TestCaseError> {
    let before_errors = error_count(doc);
    let Some(out) = run(doc, opts)? else {
        return Ok(());
    };
    // I5.
    prop_assert!(tokens(&out) as u64 <= opts.budget || tokens(doc) as u64 <= opts.budget);
    // I1, I2, I4, I7.
    assert_invariants(doc, &out, &pinned_inputs(doc, &opts.pins), is_cut, is_note)?;
    // I3: no new structural errors.
    prop_assert!(
        error_count(&out) <= before_errors,
        "new errors: {:?}",
        ctx::cmd::check::check(&out)
    );
    // I6: idempotent.
    let again = run(&out, opts)?.expect("a fitted document fits again");
    prop_assert_eq!(again.value(), out.value());
    Ok(())
}

fn strategy() -> impl proptest::strategy::Strategy<Value = Strategy> {
    prop_oneof![
        Just(Strategy::Oldest),
        Just(Strategy::Middle),
        Just(Strategy::Importance)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn truncate_keeps_every_invariant(
        (value, dialect) in document(),
        share in 0.05f64..1.2,
        strategy in strategy(),
        keep_last in proptest::option::weighted(0.3, 0usize..12),
        keep_first in 0usize..4,
        partial in proptest::bool::ANY,
        note in proptest::bool::weighted(0.3),
        drop_system in proptest::bool::weighted(0.2),
        no_keep_task in proptest::bool::weighted(0.2),
    ) {
        let doc = parse(value, dialect);
        let total = tokens(&doc);
        let opts = Options {
            budget: ((total as f64) * share) as u64,
            keep_last,
            strategy,
            keep_first,
            weights: Weights::default(),
            partial,
            note: note.then(|| NOTE.to_string()),
            pins: PinOptions { drop_system, no_keep_task, pins: Vec::new() },
        };
        check_all(&doc, &opts)?;
    }

    /// An agent transcript (one user message, many exchanges) fits any budget that holds its
    /// pinned messages and newest unit.
    #[test]
    fn agent_transcripts_truncate_to_any_feasible_budget(
        exchanges in proptest::collection::vec((proptest::collection::vec((0u8..4, 1usize..300), 1..3), Just(false)), 5..60),
        dialect in prop_oneof![Just(ctx::document::Dialect::Openai), Just(ctx::document::Dialect::Anthropic)],
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
        let opts = Options {
            budget: budget as u64, keep_last: None, strategy: Strategy::Oldest, keep_first: 0,
            weights: Weights::default(), partial: false, note: None, pins: PinOptions::default(),
        };
        let out = run(&doc, &opts)?;
        prop_assert!(out.is_some(), "budget {budget} holds the minimum {minimum} but truncate failed");
        check_all(&doc, &opts)?;
    }
}

#[test]
fn a_budget_larger_than_the_input_is_the_identity() {
    for path in corpus_files() {
        let value = read_json(&path);
        let doc = Document::parse(value.clone(), None).unwrap();
        let opts = Options {
            budget: tokens(&doc) as u64 + 1,
            keep_last: None,
            strategy: Strategy::Oldest,
            keep_first: 2,
            weights: Weights::default(),
            partial: true,
            note: Some(NOTE.into()),
            pins: PinOptions::default(),
        };
        let s = settings_for(&doc);
        let counter = Counter::new(&s, doc.dialect);
        let count = counter.document(&doc).unwrap();
        let t = truncate(doc, &counter, &count, &opts).unwrap();
        assert_eq!(t.doc.into_value(), value, "{}", path.display());
    }
}

#[test]
fn every_corpus_file_through_every_strategy_at_several_budgets() {
    let mut fitted = 0;
    let mut refused = 0;
    for path in corpus_files() {
        let value = read_json(&path);
        let doc = Document::parse(value, None).unwrap();
        let total = tokens(&doc);
        for share in [0.9, 0.5, 0.25, 0.1] {
            for strategy in [Strategy::Oldest, Strategy::Middle, Strategy::Importance] {
                for partial in [false, true] {
                    let opts = Options {
                        budget: (total as f64 * share) as u64,
                        keep_last: None,
                        strategy,
                        keep_first: 2,
                        weights: Weights::default(),
                        partial,
                        note: None,
                        pins: PinOptions::default(),
                    };
                    let r = (|| -> Result<bool, TestCaseError> {
                        check_all(&doc, &opts)?;
                        Ok(run(&doc, &opts)?.is_some())
                    })();
                    match r {
                        Ok(true) => fitted += 1,
                        Ok(false) => refused += 1,
                        Err(e) => panic!(
                            "{} at {share} {strategy:?} partial={partial}: {e}",
                            path.display()
                        ),
                    }
                }
            }
        }
    }
    // The sweep must exercise truncation, not only refusals. At a tenth or a quarter of a short
    // conversation's tokens most runs cannot fit (its pinned messages and newest unit are
    // more), and most corpus conversations are short: at least a third of all runs fit.
    assert!(fitted * 2 > refused, "fitted {fitted}, refused {refused}");
}

/// One user message and 300 tool exchanges: every budget from the minimum (pinned messages plus
/// the newest unit) up to the whole document fits, in both dialects.
#[test]
fn an_agent_transcript_with_hundreds_of_exchanges_fits_any_feasible_budget() {
    for dialect in [
        ctx::document::Dialect::Openai,
        ctx::document::Dialect::Anthropic,
    ] {
        let steps: Vec<Step> = std::iter::once(Step::System)
            .chain(std::iter::once(Step::User(30)))
            .chain((0..300).map(|i| Step::Exchange {
                calls: vec![((i % 4) as u8, 20 + (i * 37) % 150)],
                error: false,
            }))
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
                keep_last: None,
                strategy: Strategy::Oldest,
                keep_first: 0,
                weights: Weights::default(),
                partial: false,
                note: None,
                pins: PinOptions::default(),
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
                ctx::cmd::check::check(&out.doc)
            );
        }
        let below = Options {
            budget: minimum as u64 - 1,
            keep_last: None,
            strategy: Strategy::Oldest,
            keep_first: 0,
            weights: Weights::default(),
            partial: false,
            note: None,
            pins: PinOptions::default(),
        };
        let err =
            truncate(doc.clone(), &Counter::new(&s, doc.dialect), &count, &below).unwrap_err();
        assert!(err.downcast_ref::<CannotFit>().is_some());
    }
}
