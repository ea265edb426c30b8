//! `ctx prune` against the invariants of SPEC §2, over generated conversations and over every
//! file of the corpus (tests/corpus).

use super::common;

use crate::clip::is_cut_marker;
use crate::clip::{DEFAULT_PLACEHOLDER, Template, is_clipped};
use crate::conversation::{Conversation, PinOptions};
use crate::document::{Dialect, Document};
use crate::ops::prune::{Options, Pruning, Thinking, prune};
use common::*;
use proptest::prelude::*;
use serde_json::Value;

fn run(doc: &Document, opts: &Options) -> Result<Document, TestCaseError> {
    Ok(run_full(doc, opts)?.doc)
}

/// Prune's defaults, keeping the `keep` newest results.
fn keeping(keep: usize) -> Options {
    Options {
        keep,
        ..Options::default()
    }
}

/// `value` in `dialect`, and what `--thinking all` makes of it.
fn with_all_thinking_dropped(value: Value, dialect: Dialect) -> (Document, Document) {
    let doc = parse(value, dialect);
    let opts = Options {
        thinking: Thinking::All,
        ..Options::default()
    };
    let out = run(&doc, &opts).unwrap();
    (doc, out)
}

fn run_full(doc: &Document, opts: &Options) -> Result<Pruning, TestCaseError> {
    let p = with_counter(doc, |counter, count| {
        prune(doc.clone(), counter, &count, opts)
    })
    .unwrap();
    assert_reported(p.tokens_after, &p.doc)?;
    prop_assert!(
        p.tokens_after <= p.tokens_before,
        "prune never grows a document"
    );
    Ok(p)
}

fn check_all(doc: &Document, opts: &Options) -> Result<(), TestCaseError> {
    let pruned = run_full(doc, opts)?;
    // Prune removes no message; only a Responses reasoning item goes whole with --thinking.
    for &i in &pruned.removed {
        prop_assert_eq!(doc.messages()[i]["type"].as_str(), Some("reasoning"));
        prop_assert!(pruned.thinking.contains(&i));
    }
    let out = pruned.doc;
    let doc = &{
        let mut d = doc.clone();
        for &i in pruned.removed.iter().rev() {
            d.messages_mut().remove(i);
        }
        d
    };
    prop_assert_eq!(
        out.messages().len(),
        doc.messages().len(),
        "prune removes no message"
    );
    for (a, b) in doc.messages().iter().zip(out.messages()) {
        // Prune keeps every message: only contents, arguments and reasoning change, never roles or ids.
        prop_assert!(same_ids(a, b), "{a} became {b}");
    }
    let conv = Conversation::new(doc.messages(), doc.dialect);
    let pinned = conv.pinned_messages(&opts.pins).unwrap();
    for (i, p) in pinned.iter().enumerate() {
        if *p {
            prop_assert_eq!(
                &doc.messages()[i],
                &out.messages()[i],
                "pinned message {} changed",
                i
            );
        }
    }
    assert_invariants(doc, &out, &[], same_ids, |_| false)?;
    prop_assert!(error_count(&out) <= error_count(doc));
    if let Some(max) = opts.max_tool_tokens {
        // Every clipped text is within the limit.
        let s = settings_for(&out);
        for m in out.messages() {
            let texts: Vec<&str> = match m.get("content") {
                Some(Value::String(t)) => vec![t.as_str()],
                _ => Vec::new(),
            };
            for t in texts {
                if is_clipped(t) {
                    prop_assert!(s.encoding.count(t) <= max);
                }
            }
        }
    }
    if opts.protect_newest_unit && opts.thinking == Thinking::Keep {
        if let Some(u) = conv.units.last() {
            for i in u.range() {
                prop_assert_eq!(
                    &doc.messages()[i],
                    &out.messages()[i],
                    "newest unit changed"
                );
            }
        }
    }
    if opts.shorten_args.is_some() {
        for (a, b) in doc.messages().iter().zip(out.messages()) {
            shortened_from(a, b)?;
        }
    }
    // Idempotence is a property of outputs (SPEC §2 I6). With a budget prune cannot reach, the
    // command exits 3 and writes nothing, and a second pass over the library's best effort may
    // still clear a result whose call the first pass shortened.
    if opts.budget.is_none_or(|b| tokens(&out) as u64 <= b) {
        let again = run(&out, opts)?;
        prop_assert_eq!(again.value(), out.value(), "prune is idempotent");
    }
    Ok(())
}

/// Every string value in `b`'s call arguments is `a`'s, or `a`'s start followed by a cut marker
/// (or the bare marker); arguments that were valid JSON still are.
fn shortened_from(a: &Value, b: &Value) -> Result<(), TestCaseError> {
    fn args(m: &Value) -> Vec<Value> {
        let mut out = Vec::new();
        for c in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.push(c["function"]["arguments"].clone());
        }
        if let Some(fc) = m.get("function_call") {
            out.push(fc["arguments"].clone());
        }
        for block in m
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                out.push(block["input"].clone());
            }
        }
        out
    }
    fn parsed(v: &Value) -> Option<Value> {
        match v {
            Value::String(s) => serde_json::from_str(s).ok(),
            other => Some(other.clone()),
        }
    }
    fn same_but_cut(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::String(x), Value::String(y)) => {
                x == y
                    || is_cut_marker(y)
                    || y.rfind("… [ctx: ").is_some_and(|k| x.starts_with(&y[..k]))
            }
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_but_cut(p, q))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.keys().eq(y.keys()) && x.values().zip(y.values()).all(|(p, q)| same_but_cut(p, q))
            }
            (x, y) => x == y,
        }
    }
    for (x, y) in args(a).iter().zip(args(b)) {
        if x == &y || y == Value::String("{}".into()) || y == serde_json::json!({}) {
            continue;
        }
        let (Some(px), Some(py)) = (parsed(x), parsed(&y)) else {
            prop_assert!(false, "arguments {} are no longer valid JSON: {}", x, y);
            unreachable!()
        };
        prop_assert!(same_but_cut(&px, &py), "{} shortened to {}", px, py);
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(96))]

    #[test]
    fn prune_keeps_every_invariant(
        (value, dialect) in document(),
        keep in 0usize..6,
        clear_at_least in proptest::option::weighted(0.2, 0usize..400),
        exclude in proptest::bool::weighted(0.3),
        clear_inputs in proptest::bool::ANY,
        max_tool_tokens in proptest::option::weighted(0.4, 5usize..80),
        thinking in prop_oneof![Just(Thinking::Keep), Just(Thinking::Old), Just(Thinking::All)],
        include_errors in proptest::bool::ANY,
        trigger_share in proptest::option::weighted(0.2, 0.0f64..1.5),
        drop_system in proptest::bool::weighted(0.2),
        budget_share in proptest::option::weighted(0.4, 0.2f64..1.1),
        min_saving in prop_oneof![Just(0usize), Just(30), Just(200)],
        shorten_args in proptest::option::weighted(0.4, 1usize..20),
        protect_newest_unit in proptest::bool::ANY,
    ) {
        let doc = parse(value, dialect);
        let total = tokens(&doc);
        let opts = Options {
            keep,
            placeholder: DEFAULT_PLACEHOLDER.to_string(),
            trigger: trigger_share.map(|s| (total as f64 * s) as u64),
            clear_at_least,
            exclude_tools: if exclude { vec!["tool_1".into()] } else { Vec::new() },
            clear_inputs,
            max_tool_tokens,
            thinking,
            include_errors,
            pins: PinOptions { drop_system, no_keep_task: false, pins: Vec::new() },
            keep_originals: true,
            budget: budget_share.map(|s| (total as f64 * s) as u64),
            protect_newest_unit,
            min_saving,
            shorten_args,
        };
        check_all(&doc, &opts)?;
    }

    /// With a budget, clearing stops as soon as the document fits: the newest result cleared
    /// was needed (restoring it puts the document over the budget), and no result that would
    /// save enough is left uncleared while it is over.
    #[test]
    fn a_budget_clears_only_what_is_needed(
        (value, dialect) in document(),
        keep in 0usize..4,
        share in 0.3f64..1.0,
        min_saving in prop_oneof![Just(0usize), Just(30)],
    ) {
        let doc = parse(value, dialect);
        let total = tokens(&doc);
        let budget = (total as f64 * share) as u64;
        let opts = Options { keep, budget: Some(budget), min_saving, ..Options::default() };
        let p = run_full(&doc, &opts)?;
        if let Some(&(newest, _, _)) = p.cleared.last() {
            let mut restored = p.doc.clone();
            restored.messages_mut()[newest] = doc.messages()[newest].clone();
            prop_assert!(
                tokens(&restored) as u64 > budget,
                "message {} was cleared though the document fit without it", newest
            );
        }
        let full = run_full(&doc, &Options { keep, min_saving, ..Options::default() })?;
        if p.tokens_after as u64 > budget {
            prop_assert_eq!(&p.cleared, &full.cleared, "over budget, yet not everything cleared");
        } else {
            prop_assert!(p.cleared.len() <= full.cleared.len());
            prop_assert_eq!(&p.cleared[..], &full.cleared[..p.cleared.len()], "oldest first");
        }
    }

    #[test]
    fn the_newest_results_are_kept_verbatim(
        (value, dialect) in document(),
        keep in 0usize..6,
    ) {
        let doc = parse(value, dialect);
        let opts = Options { keep, min_saving: 0, ..Options::default() };
        let out = run(&doc, &opts)?;
        let template = Template::parse(DEFAULT_PLACEHOLDER);
        // Results in order: (message, is placeholder now).
        let conv = Conversation::new(out.messages(), out.dialect);
        let mut cleared = Vec::new();
        for (i, m) in conv.messages.iter().enumerate() {
            for r in &m.results {
                let content = r.content.as_deref().and_then(|p| out.messages()[i].pointer(p)).cloned();
                let is_placeholder = content.as_ref().and_then(Value::as_str).is_some_and(|t| template.matches(t));
                if !r.is_error {
                    cleared.push(is_placeholder);
                }
            }
        }
        let n = cleared.len();
        for (k, c) in cleared.iter().enumerate() {
            if k + keep >= n {
                prop_assert!(!c, "result {} of {} cleared with --keep {}", k, n, keep);
            }
        }
    }
}

#[test]
fn keeping_more_results_than_there_are_is_the_identity() {
    for (path, value, doc) in corpus() {
        let opts = Options {
            keep: 10_000,
            ..Options::default()
        };
        let p = with_counter(&doc, |counter, count| {
            prune(doc.clone(), counter, &count, &opts)
        });
        let p = p.unwrap();
        assert_eq!(p.doc.into_value(), value, "{}", path.display());
    }
}

#[test]
fn every_corpus_file_through_prune_options() {
    for (path, _, doc) in corpus() {
        for keep in [0, 1, 3] {
            let total = tokens(&doc) as u64;
            for (thinking, max, budget, shorten_args, min_saving) in [
                (Thinking::Keep, None, None, None, 200),
                (Thinking::Old, Some(200), None, Some(50), 0),
                (Thinking::All, Some(20), None, None, 200),
                (Thinking::Keep, None, Some(total * 2 / 3), Some(30), 30),
                (Thinking::Keep, Some(100), Some(total / 3), Some(10), 0),
            ] {
                let opts = Options {
                    keep,
                    clear_inputs: keep == 0,
                    max_tool_tokens: max,
                    thinking,
                    budget,
                    shorten_args,
                    min_saving,
                    protect_newest_unit: budget.is_some(),
                    ..Options::default()
                };
                if let Err(e) = check_all(&doc, &opts) {
                    panic!(
                        "{} keep={keep} {thinking:?} {max:?} {budget:?} {shorten_args:?}: {e}",
                        path.display()
                    );
                }
            }
        }
    }
}

#[test]
fn anthropic_reasoning_of_an_unfinished_tool_loop_is_kept() {
    let value: Value = serde_json::from_str(
        r#"{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "old plan", "signature": "s1"}, {"type": "text", "text": "done"}]},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "plan", "signature": "s2"},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]}]}"#,
    )
    .unwrap();
    let (doc, out) = with_all_thinking_dropped(value, Dialect::Anthropic);
    assert_eq!(
        out.messages()[1]["content"].as_array().unwrap().len(),
        1,
        "old reasoning dropped"
    );
    assert_eq!(
        out.messages()[3],
        doc.messages()[3],
        "the unfinished loop keeps its thinking"
    );
}

/// Found by the property test: clearing a result that holds a tiny image replaced a 1-token image
/// with a longer placeholder, and the document grew.
#[test]
fn clearing_a_result_with_a_tiny_image_never_grows_the_document() {
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAYAAABytg0kAAAAEklEQVR4nGP4z8DwHwyBDAYGAD9MBfuqUA4AAAAASUVORK5CYII=";
    let value = serde_json::json!({
        "model": "claude-sonnet-4-5", "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "look at the file"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "shot", "input": {"q": "x"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                    {"type": "text", "text": "ok"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]}]},
            {"role": "assistant", "content": "done"}
        ]
    });
    let doc = parse(value, Dialect::Anthropic);
    let opts = Options {
        keep: 0,
        min_saving: 0,
        ..Options::default()
    };
    let out = run(&doc, &opts).unwrap();
    assert_eq!(out.value(), doc.value(), "nothing worth clearing");
}

fn openai(messages: Value) -> Document {
    parse(messages, Dialect::Openai)
}

fn exchange(id: u32, tool: &str, args: Value, output: &str) -> [Value; 2] {
    [
        serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{id}"),
            "type": "function", "function": {"name": tool, "arguments": args.to_string()}}]}),
        serde_json::json!({"role": "tool", "tool_call_id": format!("call_{id}"), "content": output}),
    ]
}

fn conversation(exchanges: Vec<[Value; 2]>) -> Document {
    let mut messages = vec![serde_json::json!({"role": "user", "content": "fix the failing test"})];
    messages.extend(exchanges.into_iter().flatten());
    openai(Value::Array(messages))
}

fn long_output(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("src/module_{i}.py:{i}: def helper_{i}(value): return value * {i}\n"))
        .collect()
}

/// Found on agent trajectories: 40-token results such as a syntax error were replaced by a
/// 30-token placeholder, which saved nothing and lost the line the agent needed.
#[test]
fn a_short_error_is_never_replaced_by_a_placeholder() {
    let syntax =
        "  File \"x.py\", line 1\n    print(1\n         ^\nSyntaxError: '(' was never closed";
    let doc = conversation(vec![
        exchange(
            1,
            "bash",
            serde_json::json!({"command": "python x.py"}),
            syntax,
        ),
        exchange(
            2,
            "bash",
            serde_json::json!({"command": "pytest"}),
            "bash: pytest: command not found",
        ),
        exchange(
            3,
            "bash",
            serde_json::json!({"command": "cat big.log"}),
            &long_output(60),
        ),
        exchange(4, "bash", serde_json::json!({"command": "ls"}), "a.py"),
    ]);
    let p = run_full(&doc, &keeping(0)).unwrap();
    let cleared: Vec<usize> = p.cleared.iter().map(|c| c.0).collect();
    assert_eq!(cleared, [6], "only the large result is cleared");
    assert_eq!(p.doc.messages()[2]["content"], syntax);
    let placeholder = p.doc.messages()[6]["content"].as_str().unwrap();
    assert!(
        placeholder.starts_with("[ctx: cleared output of bash(cat big.log): "),
        "{placeholder}"
    );
    // With no minimum, clearing still has to save something.
    let p = run_full(
        &doc,
        &Options {
            min_saving: 0,
            ..keeping(0)
        },
    )
    .unwrap();
    assert!(
        !p.cleared.iter().any(|c| c.0 == 8),
        "a 2-token result is never cleared"
    );
}

/// Found on agent trajectories: a loop that fits every turn cleared the result the model had
/// just asked for, so it never saw it.
#[test]
fn the_newest_unit_keeps_its_results_when_protected() {
    let doc = conversation(vec![
        exchange(
            1,
            "bash",
            serde_json::json!({"command": "cat a.log"}),
            &long_output(60),
        ),
        exchange(
            2,
            "bash",
            serde_json::json!({"command": "cat b.log"}),
            &long_output(70),
        ),
    ]);
    let opts = Options {
        keep: 0,
        protect_newest_unit: true,
        max_tool_tokens: Some(50),
        ..Options::default()
    };
    let p = run_full(&doc, &opts).unwrap();
    assert_eq!(p.cleared.iter().map(|c| c.0).collect::<Vec<_>>(), [2]);
    assert!(p.clipped.is_empty());
    assert_eq!(
        p.doc.messages()[4],
        doc.messages()[4],
        "the newest result is verbatim"
    );
    let unprotected = run_full(
        &doc,
        &Options {
            protect_newest_unit: false,
            ..opts
        },
    )
    .unwrap();
    assert_eq!(unprotected.cleared.len(), 2);
}

/// A tool output that starts like a placeholder but holds far more than one can is an ordinary
/// result: it is cleared (or clipped) like any other, never taken for one already cleared.
#[test]
fn output_dressed_as_a_placeholder_is_still_cleared_and_clipped() {
    let spoof = format!(
        "[ctx: cleared output of x(): 5 tokens]\n{}",
        long_output(80)
    );
    let doc = conversation(vec![
        exchange(
            1,
            "bash",
            serde_json::json!({"command": "cat spoof.txt"}),
            &spoof,
        ),
        exchange(2, "bash", serde_json::json!({"command": "ls"}), "a.py"),
    ]);
    let p = run_full(&doc, &keeping(1)).unwrap();
    assert_eq!(p.cleared.iter().map(|c| c.0).collect::<Vec<_>>(), [2]);
    let p = run_full(
        &doc,
        &Options {
            max_tool_tokens: Some(100),
            ..keeping(5)
        },
    )
    .unwrap();
    assert_eq!(p.clipped.iter().map(|c| c.0).collect::<Vec<_>>(), [2]);
}

#[test]
fn shortened_arguments_are_recorded_with_their_originals() {
    let script = format!("cat <<'EOF' > fix.py\n{}EOF", long_output(40));
    let doc = conversation(vec![
        exchange(1, "bash", serde_json::json!({"command": script}), "ok"),
        exchange(2, "bash", serde_json::json!({"command": script}), "ok"),
    ]);
    let opts = Options {
        keep: 1,
        shorten_args: Some(30),
        ..Options::default()
    };
    let p = run_full(&doc, &opts).unwrap();
    assert_eq!(p.shortened.len(), 1, "the kept result's call is left whole");
    let (index, before, after) = p.shortened[0];
    assert_eq!(index, 1);
    assert!(after < before);
    assert_eq!(p.dropped.len(), 1);
    assert_eq!(p.dropped[0].reason, "args");
    assert_eq!(p.dropped[0].message, doc.messages()[1]);
    let args = p.doc.messages()[1]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    let parsed: Value = serde_json::from_str(args).expect("valid JSON");
    assert!(
        parsed["command"]
            .as_str()
            .unwrap()
            .starts_with("cat <<'EOF' > fix.py\nsrc/module_0.py")
    );
    assert_eq!(p.doc.messages()[3], doc.messages()[3]);
    // With a budget, shortening stops as soon as the document fits.
    let total = tokens(&doc) as u64;
    let p = run_full(
        &doc,
        &Options {
            keep: 0,
            budget: Some(total - 1),
            ..opts
        },
    )
    .unwrap();
    assert_eq!(p.shortened.len(), 1);
    assert_eq!(p.shortened[0].0, 1, "oldest first");
}

/// A Responses tool loop still running (its last call answered, a control item after it) keeps
/// its reasoning: the API rejects its calls without it.
#[test]
fn responses_reasoning_of_an_unfinished_loop_before_a_control_item_is_kept() {
    let value: Value = serde_json::from_str(
        r#"{"model": "gpt-5", "input": [
        {"role": "user", "content": "task"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA1"},
        {"type": "message", "role": "assistant", "content": "done"},
        {"role": "user", "content": "next"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA2"},
        {"type": "function_call", "call_id": "a", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "a.txt"},
        {"type": "compaction_trigger"}]}"#,
    )
    .unwrap();
    let (doc, out) = with_all_thinking_dropped(value, Dialect::Responses);
    let mut kept: Vec<&Value> = doc.messages().iter().collect();
    kept.remove(1);
    assert_eq!(
        out.messages().iter().collect::<Vec<_>>(),
        kept,
        "the old reasoning goes, the unfinished loop keeps its own"
    );
}

fn responses(path: &str) -> Document {
    let value = read_json(std::path::Path::new(path));
    parse(value, Dialect::Responses)
}

/// Found on a Responses body: a cleared `shell_call_output` became a string (the API requires
/// its list of `stdout`, `stderr` and `outcome`), and its placeholder lost the exit status and
/// every line of the output, which lives in `stdout` and `stderr`, not in content parts.
#[test]
fn a_cleared_shell_call_output_keeps_its_shape_and_status() {
    let doc = responses("tests/data/responses/prune_shell_output.json");
    let p = run_full(&doc, &keeping(0)).unwrap();
    let cleared: Vec<usize> = p.cleared.iter().map(|c| c.0).collect();
    assert_eq!(cleared, [2, 4]);
    assert_eq!(
        p.cleared_status,
        [
            Some("failed (exit code 1)".to_string()),
            Some("failed (timed out)".to_string())
        ]
    );
    let template = Template::parse(DEFAULT_PLACEHOLDER);
    // One entry: the placeholder as its stdout, an empty stderr, the original outcome.
    let output = &p.doc.messages()[2]["output"];
    let entries = output.as_array().expect("still a list");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["stderr"], "");
    assert_eq!(
        entries[0]["outcome"],
        serde_json::json!({"type": "exit", "exit_code": 1})
    );
    let text = entries[0]["stdout"].as_str().unwrap();
    assert!(template.matches(text), "{text}");
    assert!(
        text.starts_with("[ctx: cleared output of shell_call(")
            && text.contains("tokens, failed (exit code 1)]"),
        "{text}"
    );
    assert!(
        text.contains("FAILED tests/test_io.py::test_read_header - KeyError: 'id'"),
        "the error line is kept: {text}"
    );
    assert!(
        text.contains("1 failed, 116 passed in 2.31s"),
        "the test outcome is kept: {text}"
    );
    // The text of stderr is read too, and a timeout is a failure.
    let entries = p.doc.messages()[4]["output"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        entries[0]["outcome"],
        serde_json::json!({"type": "timeout"})
    );
    let text = entries[0]["stdout"].as_str().unwrap();
    assert!(text.contains("failed (timed out)]"), "{text}");
    assert!(text.contains("Compiling crate_0 v0.0.0"), "{text}");
    assert!(text.contains("Compiling crate_89 v0.8.4"), "{text}");
    // Every other field of the item is kept, and a second prune changes nothing (I6).
    for i in [2, 4] {
        let (a, b) = (&doc.messages()[i], &p.doc.messages()[i]);
        let keys = |m: &Value| m.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(a), keys(b));
        for k in ["type", "id", "call_id", "status"] {
            assert_eq!(a[k], b[k]);
        }
    }
    let again = run(&p.doc, &keeping(0)).unwrap();
    assert_eq!(again.value(), p.doc.value(), "prune is idempotent");
}

/// `--max-tool-tokens` clips a shell call's `stdout` and `stderr` in place (it left them
/// whole before), and the list keeps its shape.
#[test]
fn a_shell_call_output_is_clipped_in_place() {
    let doc = responses("tests/data/responses/prune_shell_output.json");
    let opts = Options {
        max_tool_tokens: Some(60),
        ..keeping(5)
    };
    let p = run_full(&doc, &opts).unwrap();
    assert_eq!(p.clipped.iter().map(|c| c.0).collect::<Vec<_>>(), [2, 4]);
    let s = settings_for(&p.doc);
    for i in [2, 4] {
        let (a, b) = (&doc.messages()[i]["output"], &p.doc.messages()[i]["output"]);
        assert_eq!(a.as_array().unwrap().len(), b.as_array().unwrap().len());
        assert_eq!(a[0]["outcome"], b[0]["outcome"]);
        let texts: usize = ["stdout", "stderr"]
            .iter()
            .map(|k| s.encoding.count(b[0][k].as_str().unwrap()))
            .sum();
        assert!(texts <= 60, "{b}");
    }
    let again = run(&p.doc, &opts).unwrap();
    assert_eq!(again.value(), p.doc.value(), "prune is idempotent");
}

/// Found on a Responses body: `--clear-inputs` wrote `{}` over a `local_shell_call`'s and a
/// `shell_call`'s `action`, an `apply_patch_call`'s `operation` and a `program`'s `code`, which
/// the API requires. Only a `function_call`'s `arguments` (`"{}"`) and a `custom_tool_call`'s
/// free-form `input` (`""`) are emptied.
#[test]
fn clear_inputs_empties_only_what_the_api_lets_be_empty() {
    let doc = responses("tests/data/responses/prune_clear_inputs.json");
    let opts = Options {
        clear_inputs: true,
        ..keeping(0)
    };
    let p = run_full(&doc, &opts).unwrap();
    let cleared: Vec<usize> = p.cleared.iter().map(|c| c.0).collect();
    assert_eq!(cleared, [2, 4, 6, 8, 10, 12]);
    let (a, b) = (doc.messages(), p.doc.messages());
    for (i, key) in [(1, "action"), (3, "action"), (5, "operation"), (11, "code")] {
        assert_eq!(a[i], b[i], "{key} is kept");
    }
    assert_eq!(b[7]["arguments"], "{}");
    assert_eq!(b[9]["input"], "");
    // The changed calls are recorded as cleared, the others are not.
    let changed: Vec<usize> = p.dropped.iter().map(|d| d.index).collect();
    assert_eq!(changed, [2, 4, 6, 7, 8, 9, 10, 12]);
    let again = run(&p.doc, &opts).unwrap();
    assert_eq!(again.value(), p.doc.value(), "prune is idempotent");
}
