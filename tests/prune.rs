//! `ctx prune` against the invariants of SPEC §2, over generated conversations and over every
//! file of the corpus (tests/corpus).

mod common;

use common::*;
use ctx::clip::{DEFAULT_PLACEHOLDER, Template, is_clipped};
use ctx::cmd::prune::{Options, Thinking, prune};
use ctx::conversation::{Conversation, PinOptions};
use ctx::counter::Counter;
use ctx::document::{Dialect, Document};
use proptest::prelude::*;
use serde_json::Value;

fn run(doc: &Document, opts: &Options) -> Result<Document, TestCaseError> {
    let s = settings_for(doc);
    let counter = Counter::new(&s, doc.dialect);
    let count = counter.document(doc).unwrap();
    let p = prune(doc.clone(), &counter, &count, opts).unwrap();
    prop_assert_eq!(
        p.tokens_after,
        tokens(&p.doc),
        "reported tokens are the real count"
    );
    prop_assert!(
        p.tokens_after <= p.tokens_before,
        "prune never grows a document"
    );
    Ok(p.doc)
}

/// Prune keeps every message: only contents, arguments and reasoning change, never roles or ids.
fn same_skeleton(a: &Value, b: &Value) -> bool {
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

fn check_all(doc: &Document, opts: &Options) -> Result<(), TestCaseError> {
    let out = run(doc, opts)?;
    prop_assert_eq!(
        out.messages().len(),
        doc.messages().len(),
        "prune removes no message"
    );
    for (a, b) in doc.messages().iter().zip(out.messages()) {
        prop_assert!(same_skeleton(a, b), "{a} became {b}");
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
    assert_invariants(doc, &out, &[], same_skeleton, |_| false)?;
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
                    prop_assert!(s.encoding.count(t).unwrap() <= max);
                }
            }
        }
    }
    let again = run(&out, opts)?;
    prop_assert_eq!(again.value(), out.value(), "prune is idempotent");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

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
        };
        check_all(&doc, &opts)?;
    }

    #[test]
    fn the_newest_results_are_kept_verbatim(
        (value, dialect) in document(),
        keep in 0usize..6,
    ) {
        let doc = parse(value, dialect);
        let opts = Options { keep, ..Options::default() };
        let out = run(&doc, &opts)?;
        let template = Template::parse(DEFAULT_PLACEHOLDER);
        // Results in order: (message, is placeholder now).
        let conv = Conversation::new(out.messages(), out.dialect);
        let mut cleared = Vec::new();
        for (i, m) in conv.messages.iter().enumerate() {
            for r in &m.results {
                let content = if r.path.is_empty() {
                    out.messages()[i].get("content").cloned()
                } else {
                    let k: usize = r.path.trim_start_matches(".content[").trim_end_matches(']').parse().unwrap();
                    out.messages()[i]["content"][k].get("content").cloned()
                };
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
    for path in corpus_files() {
        let value = read_json(&path);
        let doc = Document::parse(value.clone(), None).unwrap();
        let opts = Options {
            keep: 10_000,
            ..Options::default()
        };
        let s = settings_for(&doc);
        let counter = Counter::new(&s, doc.dialect);
        let count = counter.document(&doc).unwrap();
        let p = prune(doc, &counter, &count, &opts).unwrap();
        assert_eq!(p.doc.into_value(), value, "{}", path.display());
    }
}

#[test]
fn every_corpus_file_through_prune_options() {
    for path in corpus_files() {
        let value = read_json(&path);
        let doc = Document::parse(value, None).unwrap();
        for keep in [0, 1, 3] {
            for (thinking, max) in [
                (Thinking::Keep, None),
                (Thinking::Old, Some(200)),
                (Thinking::All, Some(20)),
            ] {
                let opts = Options {
                    keep,
                    clear_inputs: keep == 0,
                    max_tool_tokens: max,
                    thinking,
                    ..Options::default()
                };
                if let Err(e) = check_all(&doc, &opts) {
                    panic!("{} keep={keep} {thinking:?} {max:?}: {e}", path.display());
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
    let doc = parse(value, Dialect::Anthropic);
    let out = run(
        &doc,
        &Options {
            thinking: Thinking::All,
            ..Options::default()
        },
    )
    .unwrap();
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
        ..Options::default()
    };
    let out = run(&doc, &opts).unwrap();
    assert_eq!(out.value(), doc.value(), "nothing worth clearing");
}
