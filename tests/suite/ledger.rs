//! Golden ledgers: what `ctx summarize --engine extractive` writes for the repository's long
//! agent trajectories (SPEC §4 `ctx summarize`), read as the engineer who must carry on the work.
//!
//! Each case runs the built binary,
//!
//!   ctx summarize --engine extractive --force --keep-recent N --max-summary-tokens M FILE
//!
//! and compares the summary message's text with `tests/ledger/<name>.txt`. After an intended
//! change, re-bless them with
//!
//!   LEDGER_BLESS=1 cargo test --test suite ledger::
//!
//! and read the diff. The update test runs summarize twice, the second time on the first's
//! output with a smaller `--keep-recent`, and checks that the running ledger keeps what it held.

use crate::isolated;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// (golden name, trajectory, --keep-recent, --max-summary-tokens)
const CASES: &[(&str, &str, usize, usize)] = &[
    // A shell agent whose results carry `<returncode>` (mini-swe-agent, function calling).
    (
        "miniswe_pvlib_shell_returncode",
        "tests/corpus/miniswe_deepseek_pvlib1154_toolcall_returncode.json",
        6,
        1200,
    ),
    // A function-calling agent: OpenHands' `execute_bash` and `str_replace_editor`.
    (
        "openhands_django_function_calling",
        "tests/corpus/openhands_claude35_django11087_fc_request.json",
        6,
        1200,
    ),
    // The same kind of agent as an Anthropic body (tool_use / tool_result blocks).
    (
        "openhands_django_anthropic",
        "tests/corpus/anthropic/openhands_claude35_django11149_as_anthropic.json",
        6,
        1000,
    ),
    // Text-only ReAct agents: SWE-agent's commands and mini-swe-agent's fenced bash blocks.
    (
        "sweagent_pydicom_text_react",
        "tests/corpus/sweagent_gpt4_pydicom_text_with_demo.json",
        4,
        800,
    ),
    (
        "miniswe_issue_text_react",
        "tests/corpus/miniswe_github_issue_text_react.json",
        2,
        600,
    ),
    // A shell agent nudged six times by its framework ("No tool calls found").
    (
        "shell_agent_nudges",
        "tests/data/truncate_shell_agent_nudges.json",
        2,
        500,
    ),
];

/// Runs ctx with `args` on `input`, returns its output document.
fn run(args: &[&str], input: &[u8]) -> Value {
    let out = isolated::output(isolated::command().args(args), input);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn summarize(input: &[u8], keep_recent: usize, max_tokens: usize) -> Value {
    let keep = keep_recent.to_string();
    let max = max_tokens.to_string();
    run(
        &[
            "summarize",
            "--engine",
            "extractive",
            "--force",
            "--keep-recent",
            &keep,
            "--max-summary-tokens",
            &max,
            "-q",
        ],
        input,
    )
}

fn messages(doc: &Value) -> &[Value] {
    match doc {
        Value::Array(a) => a,
        other => other["messages"].as_array().unwrap(),
    }
}

/// The summary message's text: the one message that starts with ctx's header.
fn summary(doc: &Value) -> String {
    let found: Vec<&str> = messages(doc)
        .iter()
        .filter_map(|m| m["content"].as_str())
        .filter(|t| t.starts_with("[ctx summary of "))
        .collect();
    assert_eq!(found.len(), 1, "one summary: {doc}");
    found[0].to_string()
}

fn golden_path(name: &str) -> PathBuf {
    Path::new("tests/ledger").join(format!("{name}.txt"))
}

#[test]
fn golden_ledgers() {
    let bless = std::env::var_os("LEDGER_BLESS").is_some_and(|v| !v.is_empty());
    let mut failed = Vec::new();
    for &(name, file, keep, max) in CASES {
        let input = std::fs::read(file).unwrap();
        let text = summary(&summarize(&input, keep, max)) + "\n";
        let path = golden_path(name);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("{}: missing; run LEDGER_BLESS=1", path.display()));
        if want != text {
            failed.push(format!(
                "{}:\n--- expected\n{want}\n--- got\n{text}",
                path.display()
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "ledgers changed (LEDGER_BLESS=1 cargo test --test suite ledger:: re-blesses):\n{}",
        failed.join("\n")
    );
}

/// The sections of a ledger: (header, items or text lines).
fn sections(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines().skip(1) {
        if let Some(item) = line.strip_prefix("- ") {
            out.last_mut().unwrap().1.push(item.to_string());
        } else if let Some((header, rest)) = line.split_once(':') {
            if !line.starts_with("> ") {
                out.push((header.to_string(), Vec::new()));
                if !rest.trim().is_empty() {
                    out.last_mut().unwrap().1.push(rest.trim().to_string());
                }
            }
        }
    }
    out
}

/// `text ×3` → (`text`, 3).
fn counted(item: &str) -> (&str, usize) {
    match item.rsplit_once(" ×") {
        Some((t, n)) if n.parse::<usize>().is_ok() => (t, n.parse().unwrap()),
        _ => (item, 1),
    }
}

/// A second run, on the output of a first with a smaller --keep-recent, merges the newly
/// aged-out messages into the running ledger: every item of the first is still there (its
/// count at least as high), the new ones are added, the task is kept, and the header counts
/// every message summarized so far.
#[test]
fn an_update_keeps_the_first_ledger_and_adds_the_new_items() {
    for file in [
        "tests/corpus/miniswe_deepseek_pvlib1154_toolcall_returncode.json",
        "tests/corpus/openhands_claude35_django11087_fc_request.json",
        "tests/corpus/sweagent_gpt4_pydicom_text_with_demo.json",
    ] {
        let input = std::fs::read(file).unwrap();
        let n = messages(&serde_json::from_slice(&input).unwrap()).len();
        let first_doc = summarize(&input, n / 2, 6000);
        let first = summary(&first_doc);
        let second_doc = summarize(&serde_json::to_vec(&first_doc).unwrap(), 4, 6000);
        let second = summary(&second_doc);
        let count = |t: &str| ctx::cmd::summarize::summary_header(t).unwrap();
        assert!(count(&second) > count(&first), "{file}: {first}\n{second}");
        let (before, after) = (sections(&first), sections(&second));
        let mut grew = false;
        for (header, items) in &before {
            if matches!(header.as_str(), "Latest state" | "Remaining") {
                continue; // the newer statement replaces the older
            }
            let now = &after
                .iter()
                .find(|(h, _)| h == header)
                .unwrap_or_else(|| panic!("{file}: {header} lost:\n{second}"))
                .1;
            for item in items {
                let (text, n) = counted(item);
                let kept = now.iter().map(|i| counted(i)).find(|(t, _)| *t == text);
                assert!(
                    kept.is_some_and(|(_, m)| m >= n),
                    "{file}: {header}: {item} lost:\n{first}\n---\n{second}"
                );
            }
            grew |= now.len() > items.len();
        }
        assert!(grew, "{file}: nothing new:\n{first}\n---\n{second}");
        // Run again with the same flags: nothing new to summarize, nothing changes.
        let again = summarize(&serde_json::to_vec(&second_doc).unwrap(), 4, 6000);
        assert_eq!(again, second_doc, "{file}");
    }
}
