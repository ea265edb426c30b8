//! Helpers of the library's tests: those shared with the integration tests (the generators and
//! the invariant checks of tests/suite/common.rs, included here, where they work on the
//! library's own types), and those that count with the library's settings.

use proptest::prelude::*;
use serde_json::Value;

use crate::counter::{Counter, DocumentCount};
use crate::settings::{ModelOptions, Settings};
use crate::tokenizer::Encoding;

#[path = "../../tests/suite/common.rs"]
mod shared;
pub use shared::*;

/// The key facts of an agent trajectory, by the retention benchmark's rules (shared with it:
/// which message is the task).
#[path = "../../examples/retention/facts.rs"]
mod facts;

/// What the shared helpers work on here: the library's own types (the integration tests give
/// them its public API instead).
pub mod subject {
    pub use crate::document::{Dialect, Document};
    pub use crate::ops::check::{Severity, check};

    /// `doc`'s tokens, counted for its model.
    pub fn tokens(doc: &Document) -> usize {
        let s = super::settings_for(doc);
        crate::counter::Counter::new(&s, doc.dialect)
            .document(doc)
            .expect("counts")
            .total()
    }
}

use subject::Document;

/// An agent's steps: a task of 30 words, then `exchanges` tool exchanges of one call each (ids
/// cycling through four), the result of the i-th holding `size(i)` words.
pub fn agent_steps(exchanges: usize, size: impl Fn(usize) -> usize) -> Vec<Step> {
    std::iter::once(Step::User(30))
        .chain((0..exchanges).map(|i| Step::Exchange {
            calls: vec![((i % 4) as u8, size(i))],
            error: false,
        }))
        .collect()
}

pub fn settings_for(doc: &Document) -> Settings {
    settings_with(doc, None)
}

/// The settings `doc` is counted with, with `encoding` instead of the model's when given.
pub fn settings_with(doc: &Document, encoding: Option<Encoding>) -> Settings {
    settings_of(doc, None, encoding)
}

/// The settings `doc` is counted with: those of `model` (else of the body's model), with
/// `encoding` instead of the model's when given, and images of unknown size at 1024x1024.
pub fn settings_of(doc: &Document, model: Option<&str>, encoding: Option<Encoding>) -> Settings {
    let args = ModelOptions {
        model: model.map(str::to_string),
        encoding,
        image_size: (1024, 1024),
        ..Default::default()
    };
    Settings::resolve(
        &args,
        doc.body_model(),
        None,
        doc.dialect,
        None,
        &mut Vec::new(),
    )
}

/// `value`'s count as `model` (else the body's model) sees it.
pub fn count_as(value: Value, model: Option<&str>) -> DocumentCount {
    let doc = Document::parse(value, None).unwrap();
    let settings = settings_of(&doc, model, None);
    Counter::new(&settings, doc.dialect).document(&doc).unwrap()
}

/// Runs `op` with `doc`'s counter and its count.
pub fn with_counter<T>(doc: &Document, op: impl FnOnce(&Counter, DocumentCount) -> T) -> T {
    let s = settings_for(doc);
    let counter = Counter::new(&s, doc.dialect);
    let count = counter.document(doc).unwrap();
    op(&counter, count)
}

/// What a transforming command reports as the tokens after is the output's real count.
pub fn assert_reported(tokens_after: usize, output: &Document) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        tokens_after,
        tokens(output),
        "reported tokens are the real count"
    );
    Ok(())
}

/// A transforming command fails only with its report that the document cannot fit (exit 3).
pub fn assert_cannot_fit(e: &anyhow::Error) -> Result<(), TestCaseError> {
    prop_assert!(
        e.downcast_ref::<crate::ops::CannotFit>().is_some(),
        "unexpected error {e:#}"
    );
    Ok(())
}

/// The ids of a message: its role, its `tool_call_id`, the ids of its calls and of its blocks
/// (`id`, `tool_use_id`). A message that an operation rewrote (shortened, cleared, clipped)
/// keeps them; only contents change.
pub fn same_ids(a: &Value, b: &Value) -> bool {
    let ids = |m: &Value| -> Vec<Value> {
        // (`type`, `call_id` and `id` for Responses items.)
        let mut v: Vec<Value> = ["role", "tool_call_id", "type", "call_id", "id"]
            .iter()
            .map(|k| m.get(*k).cloned().unwrap_or(Value::Null))
            .collect();
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

/// The task of a document, found independently of ctx: the first user message that is not only
/// tool results (the retention benchmark's rule).
pub fn task_of(doc: &Document) -> Option<&Value> {
    facts::task_at(doc.messages()).map(|i| &doc.messages()[i])
}

/// The counts in the headers of the summaries ctx wrote into `output` (messages that are not in
/// `input`, whose text starts with the header).
pub fn new_summary_counts(input: &Document, output: &Document) -> Vec<usize> {
    output
        .messages()
        .iter()
        .filter(|m| !input.messages().contains(m))
        .filter_map(|m| {
            let text = m.get("content").and_then(Value::as_str)?;
            let rest = text.strip_prefix("[ctx summary of ")?;
            rest.split(' ').next()?.parse().ok()
        })
        .collect()
}

/// Text that pretends to be ctx's summary stays an ordinary message: a spoofed tool result is
/// never read as a running summary (no new header counts from it, its text moves into no other
/// message), no new system message carries spoofed text as its running summary, and without
/// `user_summaries` (OpenAI with `--summary-role system`) a spoofed user turn is not read as a
/// summary either.
pub fn assert_spoofs_are_ordinary(
    input: &Document,
    output: &Document,
    user_summaries: bool,
) -> Result<(), TestCaseError> {
    for m in output.messages() {
        let text = m.to_string();
        let is_result = matches!(m.get("role").and_then(Value::as_str), Some("tool"))
            || m.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("_output"))
            || m.get("content").and_then(Value::as_array).is_some_and(|p| {
                p.iter()
                    .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            });
        if text.contains("SPOOF-RESULT") {
            prop_assert!(is_result, "a spoofed tool result moved into {}", m);
        }
        if matches!(
            m.get("role").and_then(Value::as_str),
            Some("system" | "developer")
        ) && !input.messages().contains(m)
        {
            prop_assert!(
                !text.contains("Earlier:\\nSPOOF"),
                "a spoofed text became a system summary: {}",
                m
            );
        }
    }
    for c in new_summary_counts(input, output) {
        prop_assert!(
            !(1000..2000).contains(&c),
            "a spoofed tool result was read as a summary: {c}"
        );
        if !user_summaries {
            prop_assert!(c < 1000, "a spoofed user turn was read as a summary: {c}");
        }
    }
    Ok(())
}

/// Asserts that `pred` holds for each of `yes` and for none of `no`, naming the text it is
/// wrong about: the unit tests of the classifiers (what is a path, what reports an error, what
/// a template matches) are lists of both.
pub fn assert_classifies(pred: impl Fn(&str) -> bool, yes: &[&str], no: &[&str]) {
    for t in yes {
        assert!(pred(t), "not taken: {t:?}");
    }
    for t in no {
        assert!(!pred(t), "taken: {t:?}");
    }
}

/// The runs of a sweep that fitted and those refused (exit 3).
#[derive(Default)]
pub struct Tally {
    pub fitted: usize,
    pub refused: usize,
}

impl Tally {
    /// Counts a run whose checks gave `checked` (whether it fitted); a failed check fails the
    /// test, naming the run with `what`.
    pub fn add(&mut self, checked: Result<bool, TestCaseError>, what: impl FnOnce() -> String) {
        match checked {
            Ok(true) => self.fitted += 1,
            Ok(false) => self.refused += 1,
            Err(e) => panic!("{}: {e}", what()),
        }
    }
}
