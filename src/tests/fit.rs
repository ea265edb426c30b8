//! `ctx fit` against the invariants of SPEC §2 and its own promises (within budget or exit 3,
//! idempotent, the first stage that suffices is the one used, nothing lost), over generated
//! conversations and every file of the corpus (tests/corpus).

use proptest::prelude::*;
use serde_json::{Value, json};

use super::common::*;
use crate::conversation::{Conversation, PinOptions};
use crate::document::{Dialect, Document};
use crate::ops::fit::{Fitting, Options, Stage, fit};
use crate::ops::prune::Thinking;
use crate::ops::summarize::{DEFAULT_MAX_SUMMARY_TOKENS, OnError, Summarizer, SummaryRole};
use crate::ops::{CannotFit, prune, summarize, truncate};

const NOTE: &str = "[{count} messages removed]";

/// The extractive summarizer with fit's defaults, with `--summary-role user` when `user`.
fn extractive_as(user: bool) -> Summarizer {
    let role = if user {
        SummaryRole::User
    } else {
        SummaryRole::System
    };
    Summarizer::extractive(DEFAULT_MAX_SUMMARY_TOKENS, role, OnError::Fail)
}

fn options(budget: u64, trigger: u64, stages: Vec<Stage>, pins: PinOptions) -> Options {
    Options {
        budget,
        shorten_args: crate::ops::fit::DEFAULT_SHORTEN_ARGS,
        trigger,
        stages,
        details: true,
        prune: prune::Options {
            pins: pins.clone(),
            ..prune::Options::default()
        },
        truncate: truncate::Options {
            budget,
            pins: pins.clone(),
            ..truncate::Options::default()
        },
        summarize: summarize::Options {
            keep_recent: 6,
            after_messages: 0,
            over_tokens: 0,
            force: true,
            pins,
            budget: Some(budget),
            task: None,
        },
    }
}

/// Runs fit; `Ok(None)` when it reports that the document cannot fit.
fn run(doc: &Document, opts: &Options) -> Result<Option<Fitting>, TestCaseError> {
    run_as(doc, opts, false)
}

/// `run`, with user-role summaries when `user_summaries`.
fn run_as(
    doc: &Document,
    opts: &Options,
    user_summaries: bool,
) -> Result<Option<Fitting>, TestCaseError> {
    let summarizer = extractive_as(user_summaries);
    let fitted = with_counter(doc, |counter, count| {
        fit(doc.clone(), counter, count, opts, Some(&summarizer))
    });
    match fitted {
        Ok(f) => {
            assert_reported(f.tokens_after, &f.doc)?;
            Ok(Some(f))
        }
        Err(e) => {
            assert_cannot_fit(&e)?;
            Ok(None)
        }
    }
}

fn is_inserted(m: &Value) -> bool {
    m.get("content").and_then(Value::as_str).is_some_and(|c| {
        (c.starts_with("[ctx summary of ") && c != SPOOF_USER && c != SPOOF_RESULT)
            || (c.starts_with('[') && c.ends_with(" messages removed]"))
    })
}

fn pinned_inputs(doc: &Document, pins: &PinOptions) -> Vec<usize> {
    let conv = Conversation::new(doc.messages(), doc.dialect);
    let p = conv.pinned_messages(pins).unwrap();
    (0..p.len()).filter(|&i| p[i]).collect()
}

/// Every promise of fit on one document; returns whether it fitted.
fn check_all(doc: &Document, opts: &Options) -> Result<bool, TestCaseError> {
    check_all_as(doc, opts, false)
}

/// `check_all`, with user-role summaries when `user_summaries`.
fn check_all_as(
    doc: &Document,
    opts: &Options,
    user_summaries: bool,
) -> Result<bool, TestCaseError> {
    let before = tokens(doc);
    let Some(f) = run_as(doc, opts, user_summaries)? else {
        prop_assert!(
            before as u64 > opts.trigger,
            "a document under its trigger failed"
        );
        // A summary never turns a run that fits without it into exit 3.
        if opts.stages.contains(&Stage::Summarize) {
            let mut plain = clone_options(opts);
            plain.stages.retain(|&s| s != Stage::Summarize);
            prop_assert!(
                run_as(doc, &plain, user_summaries)?.is_none(),
                "fits without the summarize stage, exit 3 with it"
            );
        }
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
        same_ids,
        is_inserted,
    )?;
    // The input's task is in the output verbatim, before any summary (so a later run finds it).
    if let (Some(task), false) = (task_of(doc), opts.prune.pins.no_keep_task) {
        let at = out.messages().iter().position(|m| m == task);
        prop_assert!(at.is_some(), "the task was lost");
        if let Some(s) = out.messages().iter().position(is_inserted) {
            prop_assert!(
                !is_summary(&out.messages()[s]) || s > at.unwrap(),
                "the summary comes before the task"
            );
        }
    }
    assert_spoofs_are_ordinary(
        doc,
        out,
        user_summaries || doc.dialect == Dialect::Anthropic,
    )?;
    // I3: no new structural errors.
    prop_assert!(
        error_count(out) <= error_count(doc),
        "new errors: {:?}",
        crate::ops::check::check(out)
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
        && stages.iter().all(|s| {
            matches!(
                s["stage"].as_str(),
                Some("prune" | "clip" | "args" | "prune-all")
            )
        });
    if only_pruned {
        // (But a Responses reasoning item, which --thinking removes whole.)
        let reasoning = |d: &Document| {
            d.messages()
                .iter()
                .filter(|m| m["type"] == "reasoning")
                .count()
        };
        prop_assert_eq!(
            out.messages().len() + reasoning(doc) - reasoning(out),
            doc.messages().len(),
            "pruning alone keeps every message"
        );
    }
    // No stage before partial touches the newest unit (the output the model just asked for):
    // it ends the output unchanged.
    let partial_ran = stages.iter().any(|s| s["stage"] == "partial");
    if !partial_ran && opts.prune.thinking == Thinking::Keep {
        let conv = Conversation::new(doc.messages(), doc.dialect);
        if let Some(u) = conv.units.last() {
            let newest = &doc.messages()[u.range()];
            let n = out.messages().len();
            prop_assert!(
                n >= newest.len() && &out.messages()[n - newest.len()..] == newest,
                "the newest unit was changed"
            );
        }
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
    let again = run_as(out, opts, user_summaries)?.expect("a fitted document fits again");
    prop_assert_eq!(again.doc.value(), out.value(), "fit is idempotent");
    // A later run with a smaller budget (a loop compacting again) still finds the task: no
    // summary or note a stage inserted is taken for it.
    if let (Some(task), false) = (task_of(doc), opts.prune.pins.no_keep_task) {
        let mut smaller = clone_options(opts);
        smaller.budget = opts.budget * 3 / 4;
        smaller.trigger = smaller.budget;
        smaller.truncate.budget = smaller.budget;
        if let Some(later) = run_as(out, &smaller, user_summaries)? {
            prop_assert!(
                later.doc.messages().contains(task),
                "a later run lost the task"
            );
        }
    }
    Ok(true)
}

fn clone_options(o: &Options) -> Options {
    Options {
        budget: o.budget,
        shorten_args: o.shorten_args,
        trigger: o.trigger,
        stages: o.stages.clone(),
        details: o.details,
        prune: o.prune.clone(),
        truncate: o.truncate.clone(),
        summarize: o.summarize.clone(),
    }
}

fn stages() -> impl proptest::strategy::Strategy<Value = Vec<Stage>> {
    prop_oneof![
        3 => (proptest::bool::ANY, proptest::bool::ANY).prop_map(|(summarize, partial)| {
            Stage::ALL.into_iter()
                .filter(|s| match s {
                    Stage::Summarize => summarize,
                    Stage::Partial => partial,
                    _ => true,
                })
                .collect()
        }),
        1 => Just(Stage::ALL.to_vec()).prop_shuffle().prop_flat_map(|v| {
            let n = v.len();
            (Just(v), 1..=n).prop_map(|(v, k)| v[..k].to_vec())
        }),
    ]
}

proptest! {
    #![proptest_config(cases(120))]

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
        user_summaries in proptest::bool::weighted(0.3),
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
        check_all_as(&doc, &opts, user_summaries)?;
    }
}

/// An agent transcript whose tool results are large: a budget a little under its size is
/// reached by the prune stage alone, and every message is still there.
#[test]
fn a_document_that_only_needs_pruning_keeps_all_its_messages() {
    for dialect in [Dialect::Openai, Dialect::Anthropic] {
        let steps = agent_steps(12, |_| 400);
        let doc = parse(Value::Array(build(dialect, &steps, false)), dialect);
        let total = tokens(&doc) as u64;
        let budget = total * 9 / 10;
        let opts = options(budget, budget, Stage::ALL.to_vec(), PinOptions::default());
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
    let steps = agent_steps(40, |_| 120);
    let mut conversation = build(Dialect::Openai, &steps, false);
    let full = parse(Value::Array(conversation.clone()), Dialect::Openai);
    let total = tokens(&full) as u64;
    let (budget, trigger) = (total / 3, total / 2);
    let mut opts = options(budget, trigger, Stage::ALL.to_vec(), PinOptions::default());
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
    let steps = agent_steps(6, |_| 100);
    let doc = parse(
        Value::Array(build(Dialect::Openai, &steps, false)),
        Dialect::Openai,
    );
    let opts = options(
        50,
        50,
        vec![Stage::Prune, Stage::PruneAll],
        PinOptions::default(),
    );
    let err = with_counter(&doc, |counter, count| {
        fit(doc.clone(), counter, count, &opts, None)
    })
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
    let mut tally = Tally::default();
    for (path, _, doc) in corpus() {
        let total = tokens(&doc);
        for share in [0.9, 0.5, 0.1] {
            let budget = (total as f64 * share) as u64;
            for stages in [
                vec![Stage::Prune, Stage::Clip, Stage::PruneAll, Stage::Truncate],
                Stage::ALL.to_vec(),
            ] {
                let opts = options(budget, budget, stages.clone(), PinOptions::default());
                tally.add(check_all(&doc, &opts), || {
                    format!("{} at {share} {stages:?}", path.display())
                });
            }
        }
    }
    let Tally { fitted, refused } = tally;
    assert!(fitted > refused, "fitted {fitted}, refused {refused}");
}

/// The corpus's Chat Completions conversations written as Responses bodies (as `count --exact`
/// writes them for OpenAI: message items, `function_call` and `function_call_output` items):
/// fit keeps every promise on them as on the originals.
#[test]
fn every_corpus_conversation_as_responses_items() {
    let mut tally = Tally::default();
    let mut converted = 0;
    for (path, _, doc) in corpus() {
        if doc.dialect != Dialect::Openai {
            continue;
        }
        let Ok(items) = crate::exact::responses::input_items(&doc) else {
            continue;
        };
        let doc = parse(
            json!({"model": "gpt-4o", "store": false, "input": items}),
            Dialect::Responses,
        );
        converted += 1;
        let total = tokens(&doc);
        for share in [0.9, 0.5, 0.1] {
            let budget = (total as f64 * share) as u64;
            let opts = options(budget, budget, Stage::ALL.to_vec(), PinOptions::default());
            tally.add(check_all(&doc, &opts), || {
                format!("{} as Responses at {share}", path.display())
            });
        }
    }
    assert!(
        converted >= 20,
        "{converted} corpus conversations converted"
    );
    let Tally { fitted, refused } = tally;
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
    let opts = options(40, 40, Stage::ALL.to_vec(), PinOptions::default());
    let mut opts = opts;
    opts.prune.keep = 0;
    opts.stages = vec![Stage::Prune, Stage::Truncate];
    let f = run(&doc, &opts).unwrap().expect("fits");
    let d: Vec<_> = f.dropped.iter().filter(|d| d.index == 2).collect();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].reason, "cleared,truncated");
    assert_eq!(d[0].message, doc.messages()[2]);
}
