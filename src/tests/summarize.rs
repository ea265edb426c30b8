//! `summarize` with the extractive engine against the invariants of SPEC §2 and its promises
//! about the range, the task and text that pretends to be a summary, over generated
//! conversations. (`ctx summarize` itself, over the same conversations, the corpus and with
//! --summary-file, is tested through the binary in tests/suite/summarize.rs.)

use proptest::prelude::*;
use serde_json::Value;

use super::common::*;
use crate::conversation::{Conversation, PinOptions};
use crate::document::{Dialect, Document};
use crate::ops::SummarizerFailed;
use crate::ops::summarize::{
    DEFAULT_MAX_SUMMARY_TOKENS, OnError, Options, Summarizer, SummaryRole, summarize,
};

/// What `ctx summarize --engine extractive --force --keep-recent KEEP_RECENT` makes of `doc`,
/// with `--no-keep-task`, `--summary-role user` and `--on-error` as given.
fn run(
    doc: &Document,
    keep_recent: usize,
    no_keep_task: bool,
    user_role: bool,
    on_error: OnError,
) -> anyhow::Result<Document> {
    let role = if user_role {
        SummaryRole::User
    } else {
        SummaryRole::System
    };
    let summarizer = Summarizer::extractive(DEFAULT_MAX_SUMMARY_TOKENS, role, on_error);
    let opts = Options {
        keep_recent,
        after_messages: 30,
        over_tokens: 128_000,
        force: true,
        pins: PinOptions {
            no_keep_task,
            ..PinOptions::default()
        },
        budget: None,
        task: None,
    };
    with_counter(doc, |counter, count| {
        summarize(doc.clone(), counter, &count, &opts, &summarizer, &[]).map(|s| s.doc)
    })
}

/// Checks what summarize promises about the task, the range and spoofed headers on one run.
fn check_range_and_task(
    input: &Document,
    out: &Document,
    keep_recent: usize,
    no_keep_task: bool,
    user_summaries: bool,
) -> Result<(), TestCaseError> {
    assert_spoofs_are_ordinary(input, out, user_summaries)?;
    let task = task_of(input).expect("generated documents have a task");
    let summary_at = out.messages().iter().position(is_summary);
    if !no_keep_task {
        // The input's task is in the output verbatim, and a summary comes after it (a later run
        // would take a user summary before it for the task).
        let at = out.messages().iter().position(|m| m == task);
        prop_assert!(at.is_some(), "the task was lost");
        if let (Some(s), Some(t)) = (summary_at, at) {
            prop_assert!(s > t, "the summary comes before the task");
        }
    }
    // Every unpinned message before the kept ones is summarized (one summary in their place),
    // or nothing is when there is none, or when the pinned task is among the kept messages.
    let msgs = input.messages();
    let n = msgs.len();
    let conv = Conversation::new(msgs, input.dialect);
    let pins = PinOptions {
        no_keep_task,
        ..PinOptions::default()
    };
    let pinned = conv.pinned_messages(&pins).unwrap();
    let boundary = match keep_recent {
        0 => n,
        k if n <= k => 0,
        k => conv.units[conv.messages[n - k].unit].start,
    };
    let unpinned = (0..boundary).filter(|&i| !pinned[i]).count();
    if out.value() == input.value() {
        let t = msgs.iter().position(|m| m == task).unwrap();
        let task_kept = !no_keep_task && t >= boundary;
        // A user turn in the summary's place and role that starts with the header is taken for
        // the running summary (SPEC §2): with nothing after it to add, nothing changes.
        let only_a_running_summary = user_summaries
            && unpinned == 1
            && (0..boundary).any(|i| !pinned[i] && msgs[i]["content"] == SPOOF_USER);
        prop_assert!(
            unpinned == 0 || task_kept || only_a_running_summary,
            "{} messages before the kept ones were not summarized",
            unpinned
        );
    } else {
        prop_assert_eq!(
            out.messages().len(),
            n - unpinned + usize::from(summary_at.is_some()),
            "every unpinned message before the kept ones is summarized"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(48))]

    #[test]
    fn extractive_summaries_keep_the_invariants(case in summarize_case()) {
        let SummarizeCase { dialect, keep_recent, no_keep_task, user_role, .. } = case;
        let through_library = |value: &Value, passthrough: bool| {
            let on_error = if passthrough { OnError::Passthrough } else { OnError::Fail };
            match run(&parse(value.clone(), dialect), keep_recent, no_keep_task, user_role, on_error) {
                Ok(out) => Ok(Ok(out.value().clone())),
                Err(e) => {
                    prop_assert!(e.downcast_ref::<SummarizerFailed>().is_some(), "{:#}", e);
                    Ok(Err(format!("{e:#}")))
                }
            }
        };
        let Some((input, out)) = check_extractive_summary(&case, Value::clone, through_library)? else {
            return Ok(());
        };
        let user_summaries = user_role || dialect == Dialect::Anthropic;
        check_range_and_task(&input, &out, keep_recent, no_keep_task, user_summaries)?;
    }
}

/// The ledger of a Responses session is the ledger of the same session in Chat Completions: the
/// reader sees each turn's calls and outputs through the dialect's chat view (the files, commands,
/// tests and errors of `fit_agent.json`, which `responses_agent.json` holds as Responses items).
#[test]
fn a_responses_session_is_summarized_as_its_chat_twin() {
    let summary = |file: &str, dialect: Dialect| -> String {
        let doc = Document::parse(read_json(std::path::Path::new(file)), Some(dialect)).unwrap();
        let out = run(&doc, 4, false, false, OnError::Fail).unwrap();
        let text = out
            .messages()
            .iter()
            .find_map(|m| {
                m["content"]
                    .as_str()
                    .filter(|t| t.starts_with("[ctx summary of "))
            })
            .expect("a summary")
            .to_string();
        // The header counts messages, and a Responses turn has more items.
        text.split_once('\n').unwrap().1.to_string()
    };
    let chat = summary("tests/data/fit_agent.json", Dialect::Openai);
    let responses = summary("tests/data/responses_agent.json", Dialect::Responses);
    assert!(
        chat.contains("Actions:\n- read_file(app/durations.py)"),
        "{chat}"
    );
    assert!(chat.contains("Errors:\n- E       ValueError"), "{chat}");
    assert_eq!(responses, chat);
}

/// A control item at the end (`compaction_trigger`) is no recent message: `--keep-recent 1`
/// keeps the model's answer before it verbatim, and the trigger stays last.
#[test]
fn a_trailing_control_item_is_not_a_recent_message() {
    let log: String = (0..40)
        .map(|k| format!("tests/test_app.py::test_case_{k:03} PASSED\n"))
        .collect();
    let value = serde_json::json!({"model": "gpt-5", "input": [
        {"role": "user", "content": "Fix the bug."},
        {"type": "function_call", "call_id": "a", "name": "bash", "arguments": "{\"cmd\":\"pytest\"}"},
        {"type": "function_call_output", "call_id": "a", "output": log},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "All tests pass now."}]},
        {"type": "compaction_trigger"}]});
    let doc = parse(value, Dialect::Responses);
    let out = run(&doc, 1, false, false, OnError::Fail).unwrap();
    let msgs = out.messages();
    assert!(msgs.iter().any(is_summary), "{msgs:?}");
    assert_eq!(msgs[msgs.len() - 2..], doc.messages()[3..], "{msgs:?}");
}
