//! Golden CLI tests: each `tests/cmd/<command>-<scenario>.toml` runs `ctx` with its arguments
//! and `.stdin`, and compares stdout, stderr and the exit code with the files beside it.
//! Re-bless after an intended change with
//! `TRYCMD=overwrite cargo test --test suite -- --exact cli::golden`, then review the diff like
//! any other. trycmd normalises `\` to `/` in the files it writes (it treats them
//! as Windows path separators), so escaped quotes in JSON appear as `/"` in `.stdout` files.
//!
//! The cases run with every `CTX_*`, `OPENAI_*`, `ANTHROPIC_*`, `GEMINI_*`, `GOOGLE_*` and proxy
//! variable blanked and `HOME` and `XDG_CONFIG_HOME` at an empty directory, so a developer's
//! shell or `~/.config/ctx/ctx.toml` cannot change their outcome. The tests after the golden ones are about the process boundary
//! (stderr, the files ctx writes, the README's recipes), which golden files cannot express.

use crate::isolated;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

#[test]
fn golden() {
    let cases = trycmd::TestCases::new();
    for (name, value) in isolated::blanked_vars() {
        cases.env(name, value);
    }
    cases.case("tests/cmd/*.toml");
}

/// The golden cases pass whatever the developer has exported: they are run again, in a child
/// test process whose environment selects another model, a profile from a user config that
/// would change every budget, an endpoint and keys.
#[test]
fn golden_cases_ignore_the_developers_environment() {
    let home = scratch("hostile-home");
    std::fs::create_dir_all(home.join(".config/ctx")).unwrap();
    let profile = "[profile.x]\nbudget = 10\nmodel = \"claude-sonnet-4\"\n";
    std::fs::write(home.join(".config/ctx/ctx.toml"), profile).unwrap();
    std::fs::write(home.join("ctx.toml"), profile).unwrap();
    // The test's name in this binary: its module path without the crate.
    let golden = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::golden"),
        None => "golden".to_string(),
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .args([golden.as_str(), "--exact", "--quiet"])
        .env("CTX_MODEL", "claude-sonnet-4")
        .env("CTX_PROFILE", "x")
        .env("CTX_BASE_URL", "http://127.0.0.1:9/v1")
        .env("CTX_API_KEY", "sk-ctx-hostile")
        .env("CTX_SUMMARY_MODEL", "gpt-4o-mini")
        .env("OPENAI_API_KEY", "sk-hostile")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("ANTHROPIC_API_KEY", "sk-ant-hostile")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .env("GEMINI_API_KEY", "gemini-hostile")
        .env("CTX_ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", &home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "golden cases changed with the environment:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A filter that matches nothing also succeeds: the golden cases really ran.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(" 1 passed;"),
        "{golden} did not run: {stdout}"
    );
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A fresh directory under the target directory.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `ctx ARGS` in `cwd` with `input` on stdin.
fn ctx_in(cwd: &Path, args: &[&str], input: &[u8]) -> Output {
    isolated::output(isolated::command().args(args).current_dir(cwd), input)
}

fn data(name: &str) -> Vec<u8> {
    std::fs::read(Path::new("tests/data").join(name)).unwrap()
}

/// `copies` copies of a JSON file as JSON Lines.
fn lines_of(name: &str, copies: usize) -> Vec<u8> {
    let v: Value = serde_json::from_slice(&data(name)).unwrap();
    let line = serde_json::to_string(&v).unwrap() + "\n";
    line.repeat(copies).into_bytes()
}

// ---------------------------------------------------------------------------------------------
// Inputs are never written
// ---------------------------------------------------------------------------------------------

/// `--report a.json a.json` used to empty the input before reading it, and `--dropped a.json
/// a.json` appended to it. A sidecar that is an input, by whatever name (`./a.json`, a
/// symlink, a hard link, stdin redirected from it), is a usage error and nothing is written.
#[test]
fn a_sidecar_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = scratch("sidecar-is-input");
    let original = data("fit_agent.json");
    let other = data("agent_openai.json");
    let reset = || {
        for f in ["a.json", "b.json", "link.json", "hard.json"] {
            let _ = std::fs::remove_file(dir.join(f));
        }
        std::fs::write(dir.join("a.json"), &original).unwrap();
        std::fs::write(dir.join("b.json"), &other).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("a.json", dir.join("link.json")).unwrap();
        std::fs::hard_link(dir.join("a.json"), dir.join("hard.json")).unwrap();
    };
    let mut cases: Vec<(Vec<&str>, bool)> = vec![
        (vec!["prune", "--report", "a.json", "a.json"], false),
        (vec!["prune", "--dropped", "a.json", "a.json"], false),
        (vec!["truncate", "--report", "./a.json", "a.json"], false),
        (
            vec!["fit", "--dropped", "hard.json", "b.json", "a.json"],
            false,
        ),
        (
            vec!["summarize", "--report", "b.json", "a.json", "b.json"],
            false,
        ),
        (vec!["prune", "--report", "a.json"], true),
        (vec!["fit", "--dropped", "a.json", "b.json", "-"], true),
    ];
    if cfg!(unix) {
        cases.push((vec!["prune", "--report", "link.json", "a.json"], false));
    }
    for (args, stdin_from_a) in cases {
        reset();
        let input = if stdin_from_a {
            // Stdin is the file itself, as with `ctx prune --report a.json < a.json`.
            std::fs::File::open(dir.join("a.json")).unwrap().into()
        } else {
            Stdio::null()
        };
        let out = isolated::command()
            .args(&args)
            .current_dir(&dir)
            .stdin(input)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: wrote output");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("ctx: --") && stderr.contains("inputs are never written"),
            "{args:?}: {stderr}"
        );
        assert_eq!(
            std::fs::read(dir.join("a.json")).unwrap(),
            original,
            "{args:?}"
        );
        assert_eq!(
            std::fs::read(dir.join("b.json")).unwrap(),
            other,
            "{args:?}"
        );
    }
    // Another path is fine, and so is a sidecar beside an input read from stdin.
    reset();
    let out = ctx_in(&dir, &["prune", "--report", "r.json", "a.json"], b"");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        std::fs::read(dir.join("r.json"))
            .unwrap()
            .starts_with(b"{\"file\":\"a.json\"")
    );
    let out = ctx_in(&dir, &["prune", "--report", "b.json"], &original);
    assert_eq!(out.status.code(), Some(0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--report` and `--dropped` naming one file would write over each other; by whatever name
/// (`./r.json`, an existing file or one still to be made), that is a usage error and nothing is
/// written.
#[test]
fn report_and_dropped_may_not_name_the_same_file() {
    let dir = scratch("report-is-dropped");
    std::fs::write(dir.join("a.json"), data("fit_agent.json")).unwrap();
    for existing in [false, true] {
        let _ = std::fs::remove_file(dir.join("r.json"));
        if existing {
            std::fs::write(dir.join("r.json"), b"keep").unwrap();
        }
        for (report, dropped) in [("r.json", "r.json"), ("r.json", "./r.json")] {
            let args = [
                "fit",
                "--budget",
                "500",
                "--report",
                report,
                "--dropped",
                dropped,
                "a.json",
            ];
            let out = ctx_in(&dir, &args, b"");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(out.stdout.is_empty(), "{args:?}");
            assert!(
                stderr.starts_with("ctx: --report and --dropped name the same file"),
                "{args:?}: {stderr}"
            );
            assert_eq!(
                std::fs::read(dir.join("r.json")).ok(),
                existing.then(|| b"keep".to_vec()),
                "{args:?}"
            );
        }
    }
    let out = ctx_in(
        &dir,
        &[
            "fit",
            "--budget",
            "500",
            "--report",
            "r.json",
            "--dropped",
            "d.json",
            "a.json",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(0));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------------
// A closed stderr
// ---------------------------------------------------------------------------------------------

/// Runs `ctx ARGS` in tests/data with stderr a pipe whose read end is already closed (`2>&1 |
/// true`, `--report - 2>&1 >/dev/null | head -1`). Returns the exit code and stdout.
fn with_closed_stderr(args: &[&str], input: &[u8]) -> (Option<i32>, String) {
    let mut child = isolated::spawn(isolated::command().args(args).current_dir("tests/data"));
    // The only read end: from now on every write to ctx's stderr fails with EPIPE.
    drop(child.stderr.take());
    let out = isolated::feed(child, input);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `eprintln!` panics when stderr is a closed pipe: `ctx count --budget nope 2>&1 | true` and
/// `ctx fit --report - ... 2>&1 >/dev/null | head -1` exited 101. Every line for stderr (usage
/// errors, document errors, warnings, notes, `--report -`, `--dropped -`) now ends as quietly
/// as a closed stdout, with the exit code the run would have had.
#[test]
fn a_closed_stderr_ends_quietly() {
    let agent = lines_of("fit_agent.json", 3);
    let cases: &[(&[&str], &[u8], i32)] = &[
        (&["count", "--budget", "nope"], b"[]", 2),
        (&["count", "--no-such-flag"], b"[]", 2),
        (
            &["fit", "--report", "nope/r.json", "fit_agent.json"],
            b"",
            2,
        ),
        (&["count"], b"[{\"role\": \"user\", \"content\": 1", 2),
        (&["count", "missing.json"], b"", 2),
        (&["count", "-m", "my-local-model", "-c"], &agent, 0),
        (&["fit", "--report", "-", "-c"], &agent, 0),
        (
            &["fit", "--budget", "2000", "--dropped", "-", "-c"],
            &agent,
            0,
        ),
        (&["summarize", "--force", "-c"], &agent, 0),
        (&["fit", "--budget", "100", "-c"], &agent, 3),
    ];
    for (args, input, code) in cases {
        let (got, stdout) = with_closed_stderr(args, input);
        assert_eq!(got, Some(*code), "ctx {args:?}");
        if *code == 0 {
            // The documents are all written: the run went on without its stderr.
            assert_eq!(stdout.lines().count(), 3, "ctx {args:?}: {stdout}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// `--report -` is JSON Lines
// ---------------------------------------------------------------------------------------------

/// The README's `--report - ... 2>&1 >/dev/null | jq` broke as soon as ctx printed a note
/// (`--engine auto chose extractive`): with `--report -` a note is in the first report line
/// (`notices`), so every stderr line of a run without errors or warnings is JSON; `-q`
/// silences notes.
#[test]
fn report_on_stderr_is_json_lines_with_the_notes_inside() {
    let two = lines_of("fit_agent.json", 2);
    let note = "--engine auto chose extractive";
    for args in [
        &["summarize", "--force", "--report", "-", "-c"][..],
        &["summarize", "--report", "-", "-c"][..],
        &[
            "fit",
            "--budget",
            "400",
            "--summarize",
            "--report",
            "-",
            "-c",
        ][..],
        &[
            "fit",
            "--budget",
            "400",
            "--summarize",
            "--dropped",
            "-",
            "--report",
            "-",
        ][..],
    ] {
        let out = ctx_in(Path::new("."), args, &two);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        let lines: Vec<Value> = stderr
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: {e}: {l}")))
            .collect();
        let reports: Vec<&Value> = lines
            .iter()
            .filter(|l| l.get("command").is_some())
            .collect();
        assert_eq!(reports.len(), 2, "{args:?}: {stderr}");
        let notices = &reports[0]["notices"];
        assert!(
            notices[0].as_str().is_some_and(|n| n.contains(note)),
            "{args:?}: {stderr}"
        );
        assert_eq!(notices.as_array().unwrap().len(), 1, "{args:?}");
        assert!(reports[1].get("notices").is_none(), "told once: {stderr}");
        let quiet: Vec<&str> = args.iter().copied().chain(["-q"]).collect();
        let out = ctx_in(Path::new("."), &quiet, &two);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            !stderr.contains("notices") && !stderr.contains(note),
            "{stderr}"
        );
        assert_eq!(stderr.lines().count(), lines.len(), "{stderr}");
    }
    // With the report in a file, the note stays a line on stderr.
    let dir = scratch("report-file-note");
    let out = ctx_in(&dir, &["summarize", "--report", "r.json"], &two);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr,
        "ctx: summarize: --engine auto chose extractive (no --base-url, CTX_BASE_URL or CTX_API_KEY)\n"
    );
    assert!(
        !std::fs::read_to_string(dir.join("r.json"))
            .unwrap()
            .contains("notices")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A warning names its file and document, and is said for every document it applies to
/// (it used to be said once per run, naming neither).
#[test]
fn warnings_name_the_document_each_time() {
    let dir = scratch("warnings");
    std::fs::write(dir.join("a.jsonl"), lines_of("cookbook_chat.json", 2)).unwrap();
    let out = ctx_in(
        &dir,
        &[
            "count",
            "-m",
            "my-local-model",
            "--output",
            "total",
            "a.jsonl",
            "-",
        ],
        &data("cookbook_chat.json"),
    );
    assert_eq!(out.status.code(), Some(0));
    let w = "unknown model \"my-local-model\": counting with o200k_base as an estimate; \
             pass --context-window N to give it a window";
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "ctx: warning: a.jsonl: document 0: {w}\n\
             ctx: warning: a.jsonl: document 1: {w}\n\
             ctx: warning: document 0: {w}\n"
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------------
// The README
// ---------------------------------------------------------------------------------------------

/// The shell of the README's CI recipe (the `run: |` block of the workflow), dedented.
fn readme_ci_script() -> String {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let start = readme
        .find("        run: |\n")
        .expect("the README has the CI recipe");
    let body = &readme[start + "        run: |\n".len()..];
    let end = body.find("```").unwrap();
    body[..end]
        .lines()
        .map(|l| l.strip_prefix("          ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The README's CI recipe reported a missing file or invalid JSON (exit 2) as "tokens over the
/// budget". Run as GitHub runs it (`bash -eo pipefail`), it tells the three apart.
#[test]
fn readme_ci_recipe_tells_errors_from_over_budget() {
    let dir = scratch("ci-recipe");
    let prompts = dir.join("prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    std::fs::write(prompts.join("ok.json"), data("cookbook_chat.json")).unwrap();
    let big = json!([{"role": "user", "content": "lorem ipsum ".repeat(4000)}]);
    std::fs::write(prompts.join("big.json"), big.to_string()).unwrap();
    std::fs::write(prompts.join("broken.json"), "[{\"role\": \"user\",").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("gone.json", prompts.join("missing.json")).unwrap();
    let script = dir.join("ci.sh");
    std::fs::write(&script, readme_ci_script()).unwrap();
    let runner_temp = dir.join("runner-temp");
    std::fs::create_dir_all(&runner_temp).unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_ctx")).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut bash = Command::new("bash");
    isolated::isolate(&mut bash);
    let out = bash
        .args(["--noprofile", "--norc", "-eo", "pipefail"])
        .arg(&script)
        .current_dir(&dir)
        .env("PATH", path)
        .env("RUNNER_TEMP", &runner_temp)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    let error_for = |file: &str| {
        let prefix = format!("::error file={file}::");
        lines
            .iter()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("{stdout}"))
    };
    let over = lines
        .iter()
        .find_map(|l| l.strip_prefix("::error file=prompts/big.json::"))
        .and_then(|l| l.strip_suffix(" tokens, over the 6000-token budget"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(over.parse::<u64>().unwrap() > 6000, "{stdout}");
    let broken = error_for("prompts/broken.json");
    assert!(
        broken.contains("could not count it (exit 2): ctx: prompts/broken.json"),
        "{broken}"
    );
    if cfg!(unix) {
        let missing = error_for("prompts/missing.json");
        assert!(
            missing.contains("could not count it (exit 2): ctx: "),
            "{missing}"
        );
    }
    assert!(!stdout.contains("ok.json"), "{stdout}");
    assert!(!stdout.contains("broken.json::0 tokens") && !stdout.contains(":: tokens"));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------------
// A long Chinese conversation from the corpus
// ---------------------------------------------------------------------------------------------

/// The corpus has no long Chinese conversation of its own (the ShareGPT ones are left out for
/// their licence): its Chinese glaive conversation, chained 30 times (360 messages, ids made
/// unique), goes through every transforming command and stays valid and within budget.
#[test]
fn a_long_chinese_conversation_through_every_transforming_command() {
    let text = std::fs::read_to_string("tests/corpus/glaive_zh_toolcall_multiturn.json").unwrap();
    let one: Vec<Value> = serde_json::from_str(&text).unwrap();
    let mut messages = Vec::new();
    for k in 0..30 {
        for m in &one {
            let mut m = m.clone();
            if let Some(calls) = m.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for c in calls {
                    c["id"] = json!(format!("{}_{k}", c["id"].as_str().unwrap()));
                }
            }
            if let Some(id) = m.get("tool_call_id").and_then(Value::as_str) {
                m["tool_call_id"] = json!(format!("{id}_{k}"));
            }
            messages.push(m);
        }
    }
    assert_eq!(messages.len(), 360);
    let input = serde_json::to_vec(&json!({"model": "gpt-4o", "messages": messages})).unwrap();
    let here = Path::new(".");
    let total = |doc: &[u8]| -> u64 {
        let out = ctx_in(here, &["count", "--output", "total"], doc);
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = total(&input);
    assert!(before > 8000, "{before}");
    for (args, budget) in [
        (&["truncate", "--budget", "2000"][..], 2000),
        (
            &["truncate", "--strategy", "importance", "--budget", "3000"][..],
            3000,
        ),
        (&["fit", "--budget", "1500"][..], 1500),
        (
            &["fit", "--budget", "2500", "--summarize=extractive"][..],
            2500,
        ),
        (
            &["summarize", "--engine", "extractive", "--force"][..],
            before,
        ),
        (&["prune"][..], before),
    ] {
        let out = ctx_in(here, args, &input);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(total(&out.stdout) <= budget, "{args:?}");
        let task = &doc["messages"][0];
        assert_eq!(task, &one[0], "{args:?}: the task is kept first");
        let check = ctx_in(here, &["check"], &out.stdout);
        assert_eq!(
            check.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&check.stdout)
        );
    }
}
