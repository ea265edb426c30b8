//! `ctx summarize` with the offline engines (extractive, --summary-file) against the
//! invariants of SPEC §2, over generated conversations and the corpus (tests/corpus), through the
//! binary. (The llm engine is tested against a local server in tests/llm.rs.)

mod common;
mod isolated;

use std::io::Write;
use std::process::Stdio;

use common::*;
use ctx::document::Document;
use proptest::prelude::*;
use serde_json::Value;

fn ctx(args: &[&str], stdin: &Value) -> (i32, String, String) {
    let mut child = isolated::command()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = serde_json::to_vec(stdin).unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let w = std::thread::spawn(move || pipe.write_all(&input));
    let out = child.wait_with_output().unwrap();
    w.join().unwrap().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn is_summary(m: &Value) -> bool {
    m.get("content")
        .and_then(Value::as_str)
        .is_some_and(|t| t.starts_with("[ctx summary of "))
}

fn check_summarized(
    input: &Document,
    out: &Document,
    keep_recent: usize,
) -> Result<(), TestCaseError> {
    assert_invariants(input, out, &[], |_, _| false, is_summary)?;
    prop_assert!(error_count(out) <= error_count(input));
    let summaries = out.messages().iter().filter(|m| is_summary(m)).count();
    prop_assert!(summaries <= 1);
    // The newest messages are verbatim.
    let n = input.messages().len();
    let k = keep_recent.min(n);
    let m = out.messages().len();
    prop_assert!(m >= k);
    prop_assert_eq!(&input.messages()[n - k..], &out.messages()[m - k..]);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn extractive_summaries_keep_the_invariants(
        (value, dialect) in document(),
        keep_recent in 0usize..8,
        no_keep_task in proptest::bool::weighted(0.3),
    ) {
        let input = parse(value.clone(), dialect);
        let k = keep_recent.to_string();
        let fmt = match dialect { ctx::document::Dialect::Openai => "openai", _ => "anthropic" };
        let mut args = vec!["summarize", "--engine", "extractive", "--force", "--keep-recent", &k, "--format", fmt, "-c", "-q"];
        if no_keep_task {
            args.push("--no-keep-task");
        }
        let (code, stdout, stderr) = ctx(&args, &value);
        prop_assert_eq!(code, 0, "{}", stderr);
        let out = parse(serde_json::from_str(&stdout).unwrap(), dialect);
        check_summarized(&input, &out, keep_recent)?;
        // A second run with the same flags finds nothing new to summarize.
        let again_value: Value = serde_json::from_str(&stdout).unwrap();
        let (code, again, _) = ctx(&args, &again_value);
        prop_assert_eq!(code, 0);
        prop_assert_eq!(again.trim(), stdout.trim());
    }
}

#[test]
fn corpus_files_summarize_offline_and_stay_valid() {
    for path in corpus_files() {
        let value = read_json(&path);
        let input =
            Document::parse(value.clone(), None, ctx::settings::Settings::is_claude).unwrap();
        let (code, stdout, stderr) = ctx(
            &[
                "summarize",
                "--engine",
                "extractive",
                "--force",
                "--keep-recent",
                "4",
                "-q",
            ],
            &value,
        );
        assert_eq!(code, 0, "{}: {stderr}", path.display());
        let out = Document::parse(
            serde_json::from_str(&stdout).unwrap(),
            Some(input.dialect),
            ctx::settings::Settings::is_claude,
        )
        .unwrap();
        if let Err(e) = check_summarized(&input, &out, 4) {
            panic!("{}: {e}", path.display());
        }
    }
}

#[test]
fn a_summary_file_is_placed_with_a_header_and_extended_later() {
    let dir = std::env::temp_dir().join(format!("ctx-summary-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("summary.txt");
    std::fs::write(&file, "The user wants the parser fixed.\n").unwrap();
    let input = read_json(std::path::Path::new("tests/data/agent_openai.json"));
    let f = file.to_str().unwrap();
    let (code, stdout, stderr) = ctx(
        &[
            "summarize",
            "--summary-file",
            f,
            "--force",
            "--keep-recent",
            "3",
        ],
        &input,
    );
    assert_eq!(code, 0, "{stderr}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    let msgs = out.as_array().unwrap();
    // system, task, summary, then the 3 newest (the last exchange's result, ... extended to a unit).
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(msgs[1]["role"], "user");
    assert_eq!(msgs[2]["role"], "system");
    let text = msgs[2]["content"].as_str().unwrap();
    assert!(text.starts_with("[ctx summary of "), "{text}");
    assert!(text.contains("The user wants the parser fixed."));
    let covered = ctx::cmd::summarize::summary_header(text).unwrap();
    // Everything but the system prompt, the task and the 3 newest messages.
    assert_eq!(covered + 2 + 3, input.as_array().unwrap().len(), "{text}");
    // Below every trigger nothing happens.
    let (code, same, _) = ctx(&["summarize", "--summary-file", f], &out);
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Value>(&same).unwrap(), out);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn engine_auto_never_uses_a_stray_openai_key() {
    let input = read_json(std::path::Path::new("tests/data/agent_openai.json"));
    let mut child = isolated::command()
        .args([
            "summarize",
            "--force",
            "--keep-recent",
            "2",
            "--report",
            "-",
        ])
        .env("OPENAI_API_KEY", "sk-test-should-never-be-used")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(&input).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("chose extractive"), "{stderr}");
    assert!(stderr.contains("\"engine\":\"extractive\""), "{stderr}");
    assert!(!stderr.contains("sk-test"), "{stderr}");
}
