//! `ctx fit` against the invariants of SPEC §2 and its own promises (within budget or exit 3,
//! idempotent, the first stage that suffices is the one used, nothing lost), over generated
//! conversations and every file of the shared corpus.

mod common;

use clap::Parser;
use common::*;
use ctx::cmd::fit::{Fitting, Options, Stage, fit};
use ctx::cmd::prune::Thinking;
use ctx::cmd::summarize::{Engine, Summarizer, SummaryArgs};
use ctx::cmd::{CannotFit, Env, prune, summarize, truncate};
use ctx::conversation::{Conversation, PinOptions};
use ctx::counter::Counter;
use ctx::document::{Dialect, Document};
use proptest::prelude::*;
use serde_json::{Value, json};

const NOTE: &str = "[{count} messages removed]";

#[derive(Parser)]
struct Defaults {
    #[command(flatten)]
    summary: SummaryArgs,
}

fn extractive() -> Summarizer {
    let args = Defaults::parse_from(["fit"]).summary;
    Summarizer::new(&args, Engine::Extractive, &Env::default(), true, "fit").unwrap()
}

const ALL: [Stage; 6] = [
    Stage::Prune,
    Stage::Clip,
    Stage::PruneAll,
    Stage::Summarize,
    Stage::Truncate,
    Stage::Partial,
];

fn options(budget: u64, trigger: u64, stages: Vec<Stage>, pins: PinOptions) -> Options {
    Options {
        budget,
        trigger,
        stages,
        details: true,
        prune: prune::Options {
            pins: pins.clone(),
            ..prune::Options::default()
        },
        truncate: truncate::Options {
            budget,
            keep_last: None,
            strategy: truncate::Strategy::Oldest,
            keep_first: 2,
            weights: truncate::Weights::default(),
            partial: false,
            note: None,
            pins: pins.clone(),
            protect_recent_exchanges: 0,
            best_effort: false,
        },
        summarize: summarize::Options {
            keep_recent: 6,
            after_messages: 0,
            over_tokens: 0,
            force: true,
            pins,
        },
    }
}

/// Runs fit; `Ok(None)` when it reports that the document cannot fit.
fn run(doc: &Document, opts: &Options) -> Result<Option<Fitting>, TestCaseError> {
    let s = settings_for(doc);
    let counter = Counter::new(&s, doc.dialect);
    let count = counter.document(doc).unwrap();
    let summarizer = extractive();
    match fit(doc.clone(), &counter, count, opts, Some(&summarizer)) {
        Ok(f) => {
            prop_assert_eq!(
                f.tokens_after,
                tokens(&f.doc),
                "reported tokens are the real count"
            );
            Ok(Some(f))
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

fn is_inserted(m: &Value) -> bool {
    m.get("content").and_then(Value::as_str).is_some_and(|c| {
        c.starts_with("[ctx summary of ")
            || (c.starts_with('[') && c.ends_with(" messages removed]"))
    })
}

/// A rewritten message keeps its role, its ids and its keys; contents change.
fn rewritten(a: &Value, b: &Value) -> bool {
    let ids = |m: &Value| -> Vec<Value> {
        let mut v = vec![
            m.get("role").cloned().unwrap_or(Value::Null),
            m.get("tool_call_id").cloned().unwrap_or(Value::Null),
        ];
        for c in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            v.push(c.get("id").cloned().unwrap_or(Value::Null));
        }
        for b in m
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for k in ["id", "tool_use_id"] {
                if let Some(x) = b.get(k) {
                    v.push(x.clone());
                }
            }
        }
        v
    };
    ids(a) == ids(b)
}

fn pinned_inputs(doc: &Document, pins: &PinOptions) -> Vec<usize> {
    let conv = Conversation::new(doc.messages(), doc.dialect);
    let p = conv.pinned_messages(pins).unwrap();
    (0..p.len()).filter(|&i| p[i]).collect()
}

/// Every promise of fit on one document; returns whether it fitted.
fn check_all(doc: &Document, opts: &Options) -> Result<bool, TestCaseError> {
    let before = tokens(doc);
    let Some(f) = run(doc, opts)? else {
        prop_assert!(
            before as u64 > opts.trigger,
            "a document under its trigger failed"
        );
        return Ok(false);
    };
    let out = &f.doc;
    if before as u64 <= opts.trigger {
        // At or under the trigger: untouched.
        prop_assert!(!f.triggered);
        prop_assert_eq!(out.value(), doc.value());
        return Ok(true);
    }
    // I5.
    prop_assert!(
        tokens(out) as u64 <= opts.budget,
        "{} tokens over the budget {}",
        tokens(out),
        opts.budget
    );
    // I1, I2, I4, I7.
    assert_invariants(
        doc,
        out,
        &pinned_inputs(doc, &opts.prune.pins),
        rewritten,
        is_inserted,
    )?;
    // I3: no new structural errors.
    prop_assert!(
        error_count(out) <= error_count(doc),
        "new errors: {:?}",
        ctx::cmd::check::check(out)
    );
    // The first stage that suffices is the last one run: every earlier one left it over budget.
    let stages = &f.stages;
    for s in &stages[..stages.len().saturating_sub(1)] {
        prop_assert!(
            s["tokens_after"].as_u64().unwrap() > opts.budget,
            "a stage after {} ran although the document fitted",
            s["stage"]
        );
    }
    // When only prune stages ran (whatever the order of --stages), no message is removed.
    let only_pruned = !stages.is_empty()
        && stages
            .iter()
            .all(|s| matches!(s["stage"].as_str(), Some("prune" | "clip" | "prune-all")));
    if only_pruned {
        prop_assert_eq!(
            out.messages().len(),
            doc.messages().len(),
            "pruning alone keeps every message"
        );
    }
    // Nothing is lost: every input message is in the output unchanged, or in --dropped with
    // its original text.
    let dropped: std::collections::BTreeMap<usize, &Value> =
        f.dropped.iter().map(|d| (d.index, &d.message)).collect();
    for (i, m) in doc.messages().iter().enumerate() {
        match dropped.get(&i) {
            Some(orig) => prop_assert_eq!(*orig, m, "dropped message {} is the original", i),
            None => prop_assert!(
                out.messages().contains(m),
                "input message {} is neither kept nor dropped",
                i
            ),
        }
    }
    // I6: fit of fit is fit.
    let again = run(out, opts)?.expect("a fitted document fits again");
    prop_assert_eq!(again.doc.value(), out.value(), "fit is idempotent");
    Ok(true)
}

fn stages() -> impl proptest::strategy::Strategy<Value = Vec<Stage>> {
    prop_oneof![
        3 => (proptest::bool::ANY, proptest::bool::ANY).prop_map(|(summarize, partial)| {
            ALL.into_iter()
                .filter(|s| match s {
                    Stage::Summarize => summarize,
                    Stage::Partial => partial,
                    _ => true,
                })
                .collect()
        }),
        1 => Just(ALL.to_vec()).prop_shuffle().prop_flat_map(|v| {
            let n = v.len();
            (Just(v), 1..=n).prop_map(|(v, k)| v[..k].to_vec())
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 80, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fit_keeps_every_invariant(
        (value, dialect) in document(),
        share in 0.05f64..1.2,
        trigger_extra in prop_oneof![Just(0.0f64), 0.0f64..0.5],
        stages in stages(),
        note in proptest::bool::weighted(0.3),
        clear_inputs in proptest::bool::weighted(0.3),
        drop_system in proptest::bool::weighted(0.2),
        no_keep_task in proptest::bool::weighted(0.2),
        thinking in proptest::sample::select(vec![Thinking::Keep, Thinking::Old, Thinking::All]),
    ) {
        let doc = parse(value, dialect);
        let total = tokens(&doc) as f64;
        let budget = (total * share) as u64;
        let trigger = budget + (total * trigger_extra) as u64;
        let pins = PinOptions { drop_system, no_keep_task, pins: Vec::new() };
        let mut opts = options(budget, trigger, stages, pins);
        opts.truncate.note = note.then(|| NOTE.to_string());
        opts.prune.clear_inputs = clear_inputs;
        opts.prune.thinking = thinking;
        check_all(&doc, &opts)?;
    }
}

/// An agent transcript whose tool results are large: a budget a little under its size is
/// reached by the prune stage alone, and every message is still there.
#[test]
fn a_document_that_only_needs_pruning_keeps_all_its_messages() {
    for dialect in [Dialect::Openai, Dialect::Anthropic] {
        let steps: Vec<Step> = std::iter::once(Step::User(30))
            .chain((0..12).map(|i| Step::Exchange {
                calls: vec![((i % 4) as u8, 400)],
                error: false,
            }))
            .collect();
        let doc = parse(Value::Array(build(dialect, &steps, false)), dialect);
        let total = tokens(&doc) as u64;
        let budget = total * 9 / 10;
        let opts = options(budget, budget, ALL.to_vec(), PinOptions::default());
        let f = run(&doc, &opts).unwrap().expect("fits");
        assert_eq!(f.stages.len(), 1, "{:?}", f.stages);
        assert_eq!(f.stages[0]["stage"], "prune");
        assert_eq!(f.doc.messages().len(), doc.messages().len());
        assert!(f.tokens_after as u64 <= budget);
        assert!(check_all(&doc, &opts).unwrap());
    }
}

/// A loop that calls fit on every turn with a trigger above the budget compacts once, down to
/// the budget, and then passes the conversation through until it grows past the trigger.
#[test]
fn a_trigger_above_the_budget_compacts_once() {
    let steps: Vec<Step> = std::iter::once(Step::User(30))
        .chain((0..40).map(|i| Step::Exchange {
            calls: vec![((i % 4) as u8, 120)],
            error: false,
        }))
        .collect();
    let mut conversation = build(Dialect::Openai, &steps, false);
    let full = parse(Value::Array(conversation.clone()), Dialect::Openai);
    let total = tokens(&full) as u64;
    let (budget, trigger) = (total / 3, total / 2);
    let mut opts = options(budget, trigger, ALL.to_vec(), PinOptions::default());
    opts.stages.retain(|s| *s != Stage::Summarize);
    // Grow the conversation turn by turn, fitting before each "API call".
    let mut compactions = 0;
    let mut current: Vec<Value> = Vec::new();
    for m in conversation.drain(..) {
        current.push(m);
        let doc = parse(Value::Array(current.clone()), Dialect::Openai);
        let f = run(&doc, &opts).unwrap().expect("fits");
        if f.triggered {
            compactions += 1;
            assert!(f.tokens_after as u64 <= budget);
        } else {
            assert_eq!(f.doc.value(), doc.value());
            assert!(tokens(&doc) as u64 <= trigger);
        }
        current = f.doc.messages().to_vec();
    }
    // Each compaction frees at least trigger - budget tokens, so there are few of them.
    assert!(compactions >= 1);
    assert!(
        compactions as u64 <= 1 + total / (trigger - budget),
        "{compactions} compactions"
    );
}

#[test]
fn stages_that_cannot_reach_the_budget_fail_with_the_reason() {
    let steps: Vec<Step> = std::iter::once(Step::User(30))
        .chain((0..6).map(|i| Step::Exchange {
            calls: vec![((i % 4) as u8, 100)],
            error: false,
        }))
        .collect();
    let doc = parse(
        Value::Array(build(Dialect::Openai, &steps, false)),
        Dialect::Openai,
    );
    let s = settings_for(&doc);
    let counter = Counter::new(&s, doc.dialect);
    let opts = options(
        50,
        50,
        vec![Stage::Prune, Stage::PruneAll],
        PinOptions::default(),
    );
    let err = fit(
        doc.clone(),
        &counter,
        counter.document(&doc).unwrap(),
        &opts,
        None,
    )
    .err()
    .expect("cannot fit");
    let cf = err.downcast_ref::<CannotFit>().expect("exit 3");
    assert!(
        cf.reason.contains("after prune, prune-all"),
        "{}",
        cf.reason
    );
}

#[test]
fn every_corpus_file_at_90_50_and_10_percent() {
    let mut fitted = 0;
    let mut refused = 0;
    for path in corpus_files() {
        let value = read_json(&path);
        let doc = Document::parse(value, None, ctx::settings::Settings::is_claude).unwrap();
        let total = tokens(&doc);
        for share in [0.9, 0.5, 0.1] {
            let budget = (total as f64 * share) as u64;
            for stages in [
                vec![Stage::Prune, Stage::Clip, Stage::PruneAll, Stage::Truncate],
                ALL.to_vec(),
            ] {
                let opts = options(budget, budget, stages.clone(), PinOptions::default());
                match check_all(&doc, &opts) {
                    Ok(true) => fitted += 1,
                    Ok(false) => refused += 1,
                    Err(e) => panic!("{} at {share} {stages:?}: {e}", path.display()),
                }
            }
        }
    }
    assert!(fitted > refused, "fitted {fitted}, refused {refused}");
}

/// `--dropped` keeps the original of a message that two stages changed (cleared, then
/// removed), once, with both reasons.
#[test]
fn a_message_changed_by_two_stages_is_dropped_once_as_the_original() {
    let big = "log line\n".repeat(300);
    let doc = parse(
        json!([
            {"role": "user", "content": "fix the build"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "build", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": big},
            {"role": "assistant", "content": "The build fails in step 3; looking at the config next."},
            {"role": "user", "content": "go on"},
            {"role": "assistant", "content": "Done: the config had a typo."}
        ]),
        Dialect::Openai,
    );
    let opts = options(40, 40, ALL.to_vec(), PinOptions::default());
    let mut opts = opts;
    opts.prune.keep = 0;
    opts.stages = vec![Stage::Prune, Stage::Truncate];
    let f = run(&doc, &opts).unwrap().expect("fits");
    let d: Vec<_> = f.dropped.iter().filter(|d| d.index == 2).collect();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].reason, "cleared,truncated");
    assert_eq!(d[0].message, doc.messages()[2]);
}
