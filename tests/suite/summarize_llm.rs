//! `ctx summarize --engine llm` end to end: the built binary against a scripted HTTP/1.1 server
//! on 127.0.0.1 started by each test (no network; the server is tests/suite/scripted.rs).

use crate::isolated;
use crate::scripted;

use std::thread;
use std::time::{Duration, Instant};

use isolated::Run;
use scripted::{Reply, Seen, Server, closed_port, ok, rate_limited, redirect};
use serde_json::{Value, json};

fn fail500(body: &str) -> Reply {
    Reply::Send(500, vec![], body.to_string())
}

const KEY: &str = "sk-ctx-test-secret-0123456789";

/// Runs the binary with `input` on stdin and no CTX_*/OPENAI_*/proxy variables, plus `env`.
fn ctx(args: &[&str], env: &[(&str, &str)], input: &str) -> Run {
    isolated::run(args, env, input)
}

/// `ctx summarize --engine llm --force` against `base` with short timeouts, plus `extra`.
fn summarize(base: &str, extra: &[&str], env: &[(&str, &str)], input: &str) -> Run {
    ctx(&summarize_args(base, extra), env, input)
}

/// The arguments of [`summarize`].
fn summarize_args<'a>(base: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "summarize",
        "--engine",
        "llm",
        "--force",
        "--base-url",
        base,
        "--timeout",
        "0.5",
        "--retries",
        "1",
    ];
    args.extend_from_slice(extra);
    args
}

/// `summarize --keep-recent 3` of `input` against `server`; the run succeeded.
fn summarized(server: &Server, input: &str) -> Run {
    let run = summarize(&server.base(), &["--keep-recent", "3"], &[], input);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    run
}

/// `summarize` of tests/data/agent_openai.json with `--keep-recent 3`, plus `extra`.
fn agent(base: &str, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let mut args = vec!["--keep-recent", "3"];
    args.extend_from_slice(extra);
    summarize(base, &args, env, &data("agent_openai.json"))
}

fn data(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn openai() -> Value {
    serde_json::from_str(&data("agent_openai.json")).unwrap()
}

fn header(n: usize) -> String {
    format!("[ctx summary of {n} earlier messages]")
}

/// The user content of a recorded summarizer request.
fn user_content(seen: &Seen) -> &str {
    seen.body["messages"][1]["content"].as_str().unwrap_or("")
}

/// The user content of the request `summarize ARGS` of `input` makes first, the run succeeding.
fn only_request(args: &[&str], input: &str) -> String {
    let server = Server::start(vec![ok("S")]);
    let run = summarize(&server.base(), args, &[], input);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    user_content(&server.seen()[0]).to_string()
}

/// Fails unless `text` holds each of `wanted`; the message shows `all`, the request's text.
fn assert_holds(text: &str, wanted: &[&str], all: &str) {
    for w in wanted {
        assert!(text.contains(w), "{w:?} missing: {all}");
    }
}

/// What opens a request's context: the pinned messages, not to be summarized.
const CONTEXT: &str = "Context (kept verbatim in the conversation; do not summarize it";

/// The context block of a request's user content (empty when there is none).
fn context_part(user: &str) -> &str {
    if user.starts_with(CONTEXT) {
        user.split("\n\n").next().unwrap_or("")
    } else {
        ""
    }
}

/// The transcript in a request's user content: the messages to summarize, without the
/// context, the summary so far and the instructions.
fn transcript_part(user: &str) -> &str {
    let start = [
        "Conversation to summarize:\n",
        "New messages since the summary so far:\n",
    ]
    .iter()
    .find_map(|h| user.find(h).map(|at| at + h.len()))
    .unwrap_or_else(|| panic!("no transcript in {user}"));
    let rest = &user[start..];
    &rest[..rest
        .find("\n\nUpdate the summary so far")
        .unwrap_or(rest.len())]
}

/// Asserts an exit 4 with nothing on stdout and exactly one `ctx: ... summarizer failed` line.
fn assert_failed(run: &Run) {
    assert_eq!(run.code, 4, "stderr: {}", run.stderr);
    assert_eq!(run.stdout, "", "nothing is written for a failed document");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one stderr line: {:?}", run.stderr);
    assert!(lines[0].starts_with("ctx: "), "{}", lines[0]);
    assert!(lines[0].contains("summarizer failed"), "{}", lines[0]);
}

#[test]
fn request_shape_model_max_tokens_prompt_transcript_and_key() {
    let server = Server::start(vec![ok("S1")]);
    let run = ctx(
        &[
            "summarize",
            "--force",
            "--keep-recent",
            "3",
            "--summary-model",
            "m1",
            "--max-summary-tokens",
            "123",
            "--base-url",
            &server.base(),
            "--timeout",
            "0.5",
            "--retries",
            "1",
        ],
        &[("CTX_API_KEY", "k1")],
        &data("agent_openai.json"),
    );
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let req = &seen[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer k1"));
    assert_eq!(req.body["model"], "m1");
    assert_eq!(req.body["max_tokens"], 123);
    let messages = req.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "system");
    let prompt = messages[0]["content"].as_str().unwrap();
    assert!(prompt.contains("summar"), "{prompt}");
    assert_eq!(messages[1]["role"], "user");
    let transcript = transcript_part(user_content(req));
    assert!(transcript.contains("[called read_file("), "{transcript}");
    assert!(transcript.contains("[run_tests #2]"), "{transcript}");
    // The pinned system message and the task are not in the transcript (they are context).
    assert!(
        !transcript.contains("You are a coding agent"),
        "{transcript}"
    );
    assert!(!run.stdout.contains("k1\""));

    // Without a key: no Authorization header at all.
    let server = Server::start(vec![ok("S2")]);
    let run = agent(&server.base(), &[], &[]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("authorization"), None);
}

#[test]
fn summary_placement_and_header_openai() {
    let server = Server::start(vec![ok("The agent read src/parser.rs and ran tests.")]);
    let input = openai();
    let run = summarized(&server, &input.to_string());
    let out = run.json();
    let out = out.as_array().unwrap();
    let inp = input.as_array().unwrap();
    assert_eq!(out.len(), 2 + 1 + 3);
    assert_eq!(out[0], inp[0]);
    assert_eq!(out[1], inp[1]);
    assert_eq!(out[2]["role"], "system");
    assert_eq!(
        out[2]["content"].as_str().unwrap(),
        format!("{}\nThe agent read src/parser.rs and ran tests.", header(8))
    );
    assert_eq!(&out[3..], &inp[inp.len() - 3..]);
}

#[test]
fn summary_placement_anthropic_keeps_body_keys() {
    let server = Server::start(vec![ok("Fetched reports 1 and 3; 2 locked.")]);
    let input: Value = serde_json::from_str(&data("agent_anthropic.json")).unwrap();
    let run = summarized(&server, &input.to_string());
    assert_eq!(server.seen().len(), 1);
    let out = run.json();
    for key in ["system", "model", "max_tokens"] {
        assert_eq!(out[key], input[key], "{key}");
    }
    let msgs = out["messages"].as_array().unwrap();
    let inp = input["messages"].as_array().unwrap();
    let summaries: Vec<&Value> = msgs
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|t| t.starts_with("[ctx summary of "))
        })
        .collect();
    assert_eq!(summaries.len(), 1, "{msgs:?}");
    assert_eq!(summaries[0]["role"], "user");
    assert!(
        summaries[0]["content"]
            .as_str()
            .unwrap()
            .ends_with("Fetched reports 1 and 3; 2 locked.")
    );
    assert_eq!(msgs[0], inp[0], "the task stays first");
    assert_eq!(&msgs[msgs.len() - 3..], &inp[inp.len() - 3..]);
}

#[test]
fn running_summary_is_extended_with_only_new_messages() {
    let server = Server::start(vec![ok("FIRST-SUMMARY-TEXT"), ok("SECOND-SUMMARY-TEXT")]);
    let first = summarized(&server, &data("agent_openai.json"));
    let mut doc = first.json();
    let msgs = doc.as_array_mut().unwrap();
    assert_eq!(msgs.len(), 6);
    let call = |id: &str, name: &str, args: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": args}}]})
    };
    let result =
        |id: &str, text: &str| json!({"role": "tool", "tool_call_id": id, "content": text});
    msgs.extend([
        json!({"role": "user", "content": "Now also fix the lexer in src/lexer.rs."}),
        call("call_06", "read_file", r#"{"path": "src/lexer.rs"}"#),
        result("call_06", "[read_file #6] fn lex() { loop { break; } }"),
        call("call_07", "run_tests", r#"{"filter": "lexer"}"#),
        result("call_07", "[run_tests #7] 4 passed"),
        json!({"role": "assistant", "content": "The lexer is fixed too."}),
    ]);
    let second = summarized(&server, &doc.to_string());
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    let user = user_content(&seen[1]);
    // The running summary, with the instruction to update it rather than rewrite it.
    let update = [
        "Summary so far:\nFIRST-SUMMARY-TEXT\n",
        "Update the summary so far with the new messages; do not rewrite it",
        "Keep every item in it that is still true",
    ];
    assert_holds(user, &update, user);
    // Newly aged out: the last exchange of the first run, its answer, and the new turn.
    let transcript = transcript_part(user);
    assert!(transcript.contains("[run_tests #5]"), "{user}");
    assert!(transcript.contains("src/lexer.rs"), "{user}");
    // Summarized before: never sent again (the task is pinned: it is context, not transcript).
    assert!(!transcript.contains("src/parser.rs"), "{user}");
    for old in ["[read_file #1]", "[grep #3]", "call_01", "fn parse_header"] {
        assert!(!user.contains(old), "{old} sent again: {user}");
    }
    // The header of the first summary is not sent as if it were a message.
    assert!(!user.contains("[ctx summary of"), "{user}");

    let out = second.json();
    let out = out.as_array().unwrap();
    let summaries = summaries(out);
    assert_eq!(summaries.len(), 1, "{out:?}");
    // 8 from the first run, plus call_05, its result, the answer, the user turn, call_06 and
    // its result.
    assert_eq!(
        summaries[0],
        format!("{}\nSECOND-SUMMARY-TEXT", header(8 + 6))
    );
    assert_eq!(out.len(), 2 + 1 + 3);
    assert_eq!(out[2]["role"], "system");
}

/// A conversation of about 30,000 tokens: a system prompt, the task, `summary` (a running
/// summary) when given, twenty long turns, and three short ones.
fn long_essay(summary: Option<&str>) -> String {
    let words = |seed: usize| -> String {
        (0..1500)
            .map(|i| ["alpha", "beta", "gamma", "delta", "omega"][(i + seed) % 5])
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut msgs = vec![
        json!({"role": "system", "content": "You are a helpful assistant."}),
        json!({"role": "user", "content": "Write a long essay, part by part."}),
    ];
    if let Some(summary) = summary {
        msgs.push(json!({"role": "system", "content": summary}));
    }
    for k in 0..10 {
        msgs.push(json!({"role": "assistant", "content": words(k)}));
        msgs.push(json!({"role": "user", "content": words(k + 1)}));
    }
    msgs.push(json!({"role": "assistant", "content": "Done."}));
    msgs.push(json!({"role": "user", "content": "Thanks."}));
    msgs.push(json!({"role": "assistant", "content": "You are welcome."}));
    Value::Array(msgs).to_string()
}

/// `summarize --keep-recent 3 --summary-model gpt-4` of `input` against a server that answers
/// request k with `PARTIAL-k`: the run, which succeeded, and the requests.
fn chunked(input: &str) -> (Run, Vec<Seen>) {
    let script = (0..20).map(|k| ok(&format!("PARTIAL-{k}"))).collect();
    let server = Server::start(script);
    let run = summarize(
        &server.base(),
        &["--keep-recent", "3", "--summary-model", "gpt-4"],
        &[],
        input,
    );
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    (run, server.seen())
}

/// The summaries among the messages: their texts, header included.
fn summaries(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .filter(|t| t.starts_with("[ctx summary of "))
        .collect()
}

/// Runs `ctx args` with stderr on a terminal (a pseudo-terminal made by util-linux `script`)
/// and stdin from `input`; returns the exit code and what reached the terminal, or `None` when
/// `script` is not there to make one.
fn with_stderr_on_a_terminal(
    args: &[&str],
    env: &[(&str, &str)],
    input: &str,
) -> Option<(i32, String)> {
    use std::process::{Command, Stdio};
    let mut probe = Command::new("script");
    probe
        .args(["-qec", "true", "/dev/null"])
        .stdin(Stdio::null());
    if !probe.output().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no util-linux `script` to give ctx a terminal");
        return None;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "tty-{}-{}",
        std::process::id(),
        args.join("-").len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("input.json");
    std::fs::write(&file, input).unwrap();
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let mut line = vec![quote(env!("CARGO_BIN_EXE_ctx"))];
    line.extend(args.iter().map(|a| quote(a)));
    let line = format!(
        "{} < {} > {}",
        line.join(" "),
        quote(&file.to_string_lossy()),
        quote(&dir.join("stdout").to_string_lossy())
    );
    let mut cmd = Command::new("script");
    isolated::isolate(&mut cmd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    Some((out.status.code().unwrap_or(-1), text))
}

/// A long summary is counted out part by part on a terminal, and never with `-q`, nor where
/// stderr carries the report as JSON Lines (`--report -`, of summarize and of fit).
#[test]
fn progress_is_shown_on_a_terminal_but_not_with_quiet_or_a_report_on_stderr() {
    let input = long_essay(None);
    let server = Server::start((0..40).map(|_| ok("PARTIAL")).collect());
    let base = server.base();
    let summarize = |extra: &[&str]| {
        let mut args = summarize_args(&base, &["--keep-recent", "3", "--summary-model", "gpt-4"]);
        args.extend_from_slice(extra);
        let (code, stderr) = with_stderr_on_a_terminal(&args, &[], &input)?;
        assert_eq!(code, 0, "{stderr}");
        Some(stderr)
    };
    let Some(shown) = summarize(&[]) else {
        return;
    };
    assert!(shown.contains("ctx: summarize: part 1 of "), "{shown}");
    let quiet = summarize(&["-q"]).unwrap();
    assert!(!quiet.contains("part 1 of"), "{quiet}");
    let fit_report = [
        "fit",
        "--summarize",
        "--report",
        "-",
        "--budget",
        "2000",
        "--keep-recent",
        "3",
        "--summary-model",
        "gpt-4",
    ];
    for report in [
        summarize(&["--report", "-"]).unwrap(),
        with_stderr_on_a_terminal(&fit_report, &[("CTX_BASE_URL", &base)], &input)
            .unwrap()
            .1,
    ] {
        assert!(!report.contains("part 1 of"), "{report}");
        for line in report.lines().filter(|l| !l.starts_with("ctx: ")) {
            assert!(
                serde_json::from_str::<Value>(line).is_ok(),
                "stderr is JSON Lines: {report}"
            );
        }
    }
}

/// A dry run never calls the server: `fit --dry-run --summarize` whose auto engine would be the
/// llm one (a base URL in the environment) is refused as `--summarize=llm` is, and no request is
/// made.
#[test]
fn a_dry_run_never_calls_the_server() {
    let input = long_essay(None);
    let server = Server::start((0..40).map(|_| ok("PARTIAL")).collect());
    let base = server.base();
    for summarize in ["--summarize", "--summarize=auto", "--summarize=llm"] {
        let run = ctx(
            &[
                "fit",
                summarize,
                "--dry-run",
                "--budget",
                "2000",
                "--keep-recent",
                "3",
            ],
            &[("CTX_BASE_URL", &base)],
            &input,
        );
        assert_eq!(run.code, 2, "{summarize}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{summarize}");
        assert!(run.stderr.contains("--dry-run"), "{}", run.stderr);
        assert!(
            run.stderr.contains("--summarize=extractive"),
            "{}",
            run.stderr
        );
    }
    assert!(server.seen().is_empty(), "a dry run called the server");
    // Without a server to choose, auto previews with the extractive engine.
    let run = ctx(
        &[
            "fit",
            "--summarize",
            "--dry-run",
            "--budget",
            "2000",
            "--keep-recent",
            "3",
            "-q",
        ],
        &[],
        &input,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn large_range_is_chunked_then_combined() {
    let input = long_essay(None);

    let dry = summarize(
        "http://127.0.0.1:9/v1",
        &["--keep-recent", "3", "--dry-run"],
        &[],
        &input,
    );
    assert_eq!(dry.code, 0, "stderr: {}", dry.stderr);
    let range_tokens = dry.json()["range_tokens"].as_u64().unwrap();
    assert!((25_000..40_000).contains(&range_tokens), "{range_tokens}");

    let (run, seen) = chunked(&input);
    assert!(seen.len() >= 4, "{} requests", seen.len());
    let parts = seen.len() - 1;
    assert!(
        user_content(&seen[0]).contains(&format!("\n\nPart 1 of {parts} ")),
        "{}",
        &user_content(&seen[0])[..400]
    );
    for req in &seen {
        assert_eq!(req.body["model"], "gpt-4");
    }
    let last = user_content(&seen[parts]);
    assert!(last.contains("Combine these partial summaries"), "{last}");
    for k in 0..parts {
        assert!(last.contains(&format!("PARTIAL-{k}")), "{last}");
    }
    let out = run.json();
    let out = out.as_array().unwrap();
    assert_eq!(
        summaries(out),
        vec![format!("{}\nPARTIAL-{parts}", header(20)).as_str()]
    );
    assert_eq!(out.len(), 2 + 1 + 3);
}

#[test]
fn the_pinned_system_prompt_and_task_go_as_context_not_to_summarize() {
    const SYSTEM: &str = "You are a coding agent. Use the tools to inspect and fix the repository.";
    const TASK: &str = "The tests in src/parser.rs fail since yesterday. Find out why and fix it.";
    // The task pinned, outside the range: context, marked as not to be summarized.
    let openai = data("agent_openai.json");
    let user = only_request(&["--keep-recent", "3"], &openai);
    let (system, task) = (format!("system: {SYSTEM}"), format!("user: {TASK}"));
    assert_holds(context_part(&user), &[&system, &task], &user);
    let transcript = transcript_part(&user);
    assert!(!transcript.contains(TASK), "{user}");
    assert!(transcript.contains("[called read_file("), "{user}");

    // The task in the range (--no-keep-task): in the transcript, where it is summarized.
    let user = only_request(&["--keep-recent", "3", "--no-keep-task"], &openai);
    let context = context_part(&user);
    assert!(context.contains(&system), "{user}");
    assert!(!context.contains(TASK), "{user}");
    assert!(
        transcript_part(&user).starts_with(&format!("{task}\n")),
        "{user}"
    );

    // Anthropic: the body's system prompt and the pinned task.
    let user = only_request(&["--keep-recent", "3"], &data("agent_anthropic.json"));
    let context = [
        "system: You are a research agent.",
        "user: Summarise the three newest reports in the archive.",
    ];
    assert_holds(context_part(&user), &context, &user);
    // A result flagged as an error says so; thinking and signatures are never sent.
    let transcript = [
        "[called fetch_report(",
        "[tool result] [error] Error: report 2 is locked.",
    ];
    assert_holds(transcript_part(&user), &transcript, &user);
    for secret in ["I need report", "c2lnbmF0dXJl", "signature"] {
        assert!(!user.contains(secret), "{secret} sent: {user}");
    }
}

#[test]
fn the_prompt_asks_for_each_section() {
    let server = Server::start(vec![ok("S"), ok("S"), ok("S")]);
    let run = agent(&server.base(), &[], &[]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let extra = agent(&server.base(), &["--instructions", "EXTRA-RULE"], &[]);
    assert_eq!(extra.code, 0, "stderr: {}", extra.stderr);
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("summarize-llm-prompt.txt");
    std::fs::write(&file, "MY-OWN-PROMPT").unwrap();
    let own = agent(
        &server.base(),
        &["--prompt-file", file.to_str().unwrap()],
        &[],
    );
    assert_eq!(own.code, 0, "stderr: {}", own.stderr);
    let seen = server.seen();
    let prompt = |k: usize| seen[k].body["messages"][0]["content"].as_str().unwrap();
    let default = prompt(0);
    for section in [
        "Task and intent",
        "What was done",
        "the commands run (each command as written)",
        "the files created or edited",
        "the tests run with their outcomes",
        "Current state",
        "file paths",
        "Errors and decisions",
        "exit statuses",
        "What remains",
    ] {
        assert!(
            default.contains(section),
            "{section} not asked for: {default}"
        );
    }
    // --instructions adds to it; --prompt-file replaces it (the context still goes).
    assert_eq!(prompt(1), format!("{default}\n\nEXTRA-RULE"));
    assert_eq!(prompt(2), "MY-OWN-PROMPT");
    assert!(user_content(&seen[2]).starts_with(CONTEXT));
}

/// A shell output of thousands of tokens: an exception in the middle, the exit status at the end.
fn long_failing_output() -> String {
    let mut lines: Vec<String> = (0..400)
        .map(|k| format!("collecting module_{k} from src/pkg/module_{k}.py"))
        .collect();
    lines.push("Traceback (most recent call last):".into());
    lines.push("  File \"src/parser.py\", line 7, in parse_header".into());
    lines.push("ValueError: header line 7 is empty".into());
    lines.extend((400..800).map(|k| format!("cleaning module_{k} from build/pkg/module_{k}")));
    lines.push("[The command completed with exit code 2.]".into());
    lines.join("\n")
}

/// A long script: the command comes first.
fn long_script() -> String {
    let body: Vec<String> = (0..300).map(|k| format!("check_case({k})")).collect();
    format!(
        "cat > /tmp/repro.py << 'EOF'\n{}\nEOF\npython /tmp/repro.py",
        body.join("\n")
    )
}

#[test]
fn long_tool_outputs_are_shortened_keeping_status_and_error_lines() {
    let output = long_failing_output();
    let script = long_script();
    let openai = json!([
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the parser."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "bash", "arguments": json!({"command": script}).to_string()}}]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
        {"role": "assistant", "content": "The header parser fails on empty lines."},
        {"role": "user", "content": "Go on."},
    ]);
    let anthropic = json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [
        {"role": "user", "content": "Fix the parser."},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "SECRET-THOUGHT", "signature": "SIG-0123"},
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": script}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
            "content": [{"type": "text", "text": output}], "is_error": true}]},
        {"role": "assistant", "content": "The header parser fails on empty lines."},
        {"role": "user", "content": "Go on."},
    ]});
    assert!(count_tokens(&json!([{"role": "tool", "content": output}]).to_string()) > 5000);
    for (doc, status) in [
        (openai.to_string(), "failed (exit code 2)"),
        (anthropic.to_string(), "failed (exit code 2)"),
    ] {
        let user = only_request(&["--keep-recent", "1"], &doc);
        let transcript = transcript_part(&user);
        // Shortened: a few hundred tokens, not thousands.
        assert!(
            transcript.len() < 3000,
            "{} chars: {transcript}",
            transcript.len()
        );
        assert!(!transcript.contains("module_300 "), "{transcript}");
        // What matters survives: the status, the exception, the ends.
        assert!(transcript.contains(status), "{transcript}");
        assert!(
            transcript.contains("ValueError: header line 7 is empty"),
            "{transcript}"
        );
        assert!(transcript.contains("collecting module_0 "), "{transcript}");
        // The call: the command visible, the script shortened.
        assert!(
            transcript.contains(r#"[called bash({"command":"cat > /tmp/repro.py << 'EOF'"#),
            "{transcript}"
        );
        assert!(transcript.contains("python /tmp/repro.py"), "{transcript}");
        assert!(!transcript.contains("check_case(150)"), "{transcript}");
        assert!(!transcript.contains("SECRET-THOUGHT"), "{transcript}");
        assert!(!transcript.contains("SIG-0123"), "{transcript}");
    }
}

#[test]
fn a_chunked_update_passes_the_previous_summary_to_the_combining_request() {
    let summary = format!("{}\nPREVIOUS-SUMMARY-TEXT", header(5));
    let input = long_essay(Some(&summary));

    let (run, seen) = chunked(&input);
    assert!(seen.len() >= 3, "{} requests", seen.len());
    let parts = seen.len() - 1;
    for req in &seen {
        // The running summary is never context (it is what is updated).
        let context = context_part(user_content(req));
        assert!(context.contains("Write a long essay"), "{context}");
        assert!(!context.contains("PREVIOUS-SUMMARY-TEXT"), "{context}");
    }
    let last = user_content(&seen[parts]);
    assert!(
        last.contains("Summary so far:\nPREVIOUS-SUMMARY-TEXT\n"),
        "{last}"
    );
    assert!(
        last.contains("Update the summary so far with these partial summaries; do not rewrite it"),
        "{last}"
    );
    for k in 0..parts {
        assert!(last.contains(&format!("PARTIAL-{k}")), "{last}");
    }
    let out = run.json();
    assert_eq!(
        summaries(out.as_array().unwrap()),
        vec![format!("{}\nPARTIAL-{parts}", header(5 + 20)).as_str()]
    );
}

/// A first attempt answered with `first` is retried, and the second reply is the summary.
fn recovers_after(first: Reply, summary: &str) {
    let server = Server::start(vec![first, ok(summary)]);
    let run = agent(&server.base(), &[], &[]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(server.seen().len(), 2);
    assert!(run.stdout.contains(summary));
}

/// A server that answers from `script` fails the document with exit 4; the run and the
/// requests the server saw.
fn fails_with(script: Vec<Reply>) -> (Run, Vec<Seen>) {
    let server = Server::start(script);
    let run = agent(&server.base(), &[], &[]);
    assert_failed(&run);
    (run, server.seen())
}

#[test]
fn rate_limit_then_success() {
    let limited = rate_limited("0");
    recovers_after(limited, "after the wait");
}

#[test]
fn server_error_then_success() {
    recovers_after(fail500("oops"), "second time");
}

#[test]
fn closed_connection_then_success() {
    recovers_after(Reply::Close, "reconnected");
}

#[test]
fn server_error_twice_fails_with_exit_4() {
    let (_, seen) = fails_with(vec![fail500("boom"), fail500("boom"), ok("never")]);
    assert_eq!(seen.len(), 2);
}

#[test]
fn hang_past_the_timeout_fails_with_exit_4() {
    let started = Instant::now();
    fails_with(vec![Reply::Hang(3000), Reply::Hang(3000)]);
    assert!(
        started.elapsed() < Duration::from_millis(2900),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn malformed_json_fails_with_exit_4() {
    let bad = || Reply::Send(200, vec![], "not json at all".into());
    fails_with(vec![bad(), bad()]);
}

#[test]
fn empty_choices_fails_with_exit_4() {
    let none = || Reply::Send(200, vec![], r#"{"choices":[]}"#.into());
    let (run, _) = fails_with(vec![none(), none()]);
    assert!(!run.stdout.contains("ctx summary"));
}

#[test]
fn empty_content_is_a_failure_not_a_summary() {
    fails_with(vec![ok("  "), ok("  ")]);
}

#[test]
fn connection_refused_fails_with_exit_4() {
    let base = format!("http://127.0.0.1:{}/v1", closed_port());
    let run = agent(&base, &[], &[]);
    assert_failed(&run);
}

#[test]
fn the_key_never_appears_in_stderr() {
    let echo = || fail500(r#"{"error":{"message":"got {auth}"}}"#);
    let server = Server::start(vec![echo(), echo()]);
    let run = agent(&server.base(), &["--report", "-"], &[("CTX_API_KEY", KEY)]);
    assert_eq!(run.code, 4, "stderr: {}", run.stderr);
    run.assert_stderr_has("summarizer failed");
    assert!(!run.stderr.contains(KEY), "{}", run.stderr);
    assert!(!run.stdout.contains(KEY), "{}", run.stdout);
    // The echo really carried the key, so the scrubbing was tested.
    let bearer = format!("Bearer {KEY}");
    assert_eq!(
        server.seen()[0].header("authorization"),
        Some(bearer.as_str())
    );
}

/// `ctx fit --budget BUDGET --summarize=llm` of tests/data/fit_agent.json against `base`, with a
/// short timeout and no retry, plus `extra`.
fn fit_llm(base: &str, budget: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "fit",
        "--budget",
        budget,
        "--summarize=llm",
        "--base-url",
        base,
        "--timeout",
        "0.5",
        "--retries",
        "0",
    ];
    args.extend_from_slice(extra);
    ctx(&args, &[], &data("fit_agent.json"))
}

/// The summarize stage of fit's report.
fn summarize_stage(report: &Value) -> &Value {
    report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "summarize")
        .unwrap()
}

/// The report line (JSON) among the stderr lines.
fn report(stderr: &str) -> Value {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.is_object())
        .unwrap_or_else(|| panic!("no report in {stderr}"))
}

/// `summarize --keep-recent 3 --on-error FALLBACK --report -` of the OpenAI agent against a
/// server that fails every attempt: the run, which succeeded, and the input.
fn on_error(fallback: &str) -> (Run, Value) {
    let server = Server::start(vec![fail500("boom"), fail500("boom")]);
    let input = openai();
    let args = [
        "--keep-recent",
        "3",
        "--on-error",
        fallback,
        "--report",
        "-",
    ];
    let run = summarize(&server.base(), &args, &[], &input.to_string());
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    (run, input)
}

#[test]
fn on_error_truncate_drops_the_range() {
    let (run, input) = on_error("truncate");
    let out = run.json();
    let msgs = out.as_array().unwrap();
    let inp = input.as_array().unwrap();
    assert_eq!(msgs.len(), 2 + 3, "{msgs:?}");
    assert_eq!(msgs[..2], inp[..2]);
    assert_eq!(msgs[2..], inp[inp.len() - 3..]);
    assert!(!run.stdout.contains("[ctx summary of"));
    let rep = report(&run.stderr);
    assert_eq!(rep["fallback"], "truncate", "{rep}");
    assert!(!rep["error"].as_str().unwrap_or("").is_empty(), "{rep}");

    let check = ctx(&["check"], &[], &run.stdout);
    let findings: Vec<Value> = serde_json::from_str(&check.stdout).unwrap();
    let errors = findings.iter().filter(|f| f["severity"] == "error");
    assert_eq!(errors.count(), 0, "{findings:?}");
    assert_eq!(check.code, 0);
}

#[test]
fn on_error_passthrough_leaves_the_document() {
    let (run, input) = on_error("passthrough");
    assert_eq!(run.json(), input);
    assert_eq!(report(&run.stderr)["fallback"], "passthrough");
}

#[test]
fn dry_run_makes_no_request() {
    let server = Server::start(vec![ok("never")]);
    let run = agent(&server.base(), &["--dry-run"], &[("CTX_API_KEY", KEY)]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let rep = run.json();
    assert!(rep.is_object(), "{rep}");
    assert_eq!(rep["would_summarize"], true);
    assert_eq!(rep["range"], json!([2, 3, 4, 5, 6, 7, 8, 9]));
    thread::sleep(Duration::from_millis(100));
    assert!(server.seen().is_empty());
}

/// A reply of about `tokens` tokens, with a first and a last line a clip keeps.
fn long_reply(tokens: usize) -> String {
    let mut text = String::from("Task: fix the parser.\n");
    for i in 0..tokens / 10 {
        text.push_str(&format!("- step {i} read a file and ran the tests\n"));
    }
    text.push_str("Remaining: run the whole suite.");
    text
}

/// The count of `doc` as `ctx count` makes it.
fn count_tokens(doc: &str) -> u64 {
    let run = ctx(&["count"], &[], doc);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()["tokens"].as_u64().unwrap()
}

/// A summary is never larger than what it replaces, whatever --max-summary-tokens allows: a
/// 100k-token reply is clipped middle-out (its first and last lines kept) to fit, and the request
/// asked for no more than that bound.
#[test]
fn a_long_reply_is_clipped_to_what_it_replaces() {
    let reply = long_reply(100_000);
    let server = Server::start(vec![ok(&reply)]);
    let input = data("agent_openai.json");
    let run = agent(
        &server.base(),
        &["--max-summary-tokens", "100000", "--report", "-"],
        &[],
    );
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let rep = report(&run.stderr);
    assert_eq!(rep["clipped"], true, "{rep}");
    let range_tokens = rep["range_tokens"].as_u64().unwrap();
    assert!(range_tokens < 5_000, "{rep}");
    // The request asked for at most what the summary may hold.
    let asked = server.seen()[0].body["max_tokens"].as_u64().unwrap();
    assert!(asked < range_tokens, "asked for {asked}");
    let out = run.json();
    let summary = out[2]["content"].as_str().unwrap();
    assert!(
        summary.starts_with(&format!("{}\nTask: fix the parser.\n", header(8))),
        "{summary}"
    );
    assert!(
        summary.ends_with("Remaining: run the whole suite."),
        "{summary}"
    );
    assert!(summary.contains(" tokens omitted by ctx ...]"), "{summary}");
    let before = count_tokens(&input);
    let after = count_tokens(&run.stdout);
    assert!(after <= before, "{after} > {before}");
    assert_eq!(rep["tokens_after"].as_u64(), Some(after));

    // --max-summary-tokens bounds the text too.
    let server = Server::start(vec![ok(&reply)]);
    let run = agent(&server.base(), &["--max-summary-tokens", "60"], &[]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(server.seen()[0].body["max_tokens"], 60);
    let summary = run.json()[2]["content"].as_str().unwrap().to_string();
    let body = summary.split_once('\n').unwrap().1;
    let text_tokens = ctx(
        &["count"],
        &[],
        &json!([{"role": "user", "content": body}]).to_string(),
    );
    // The text (60) plus the message framing that `count` adds.
    assert!(
        text_tokens.json()["tokens"].as_u64().unwrap() <= 60 + 10,
        "{summary}"
    );
}

/// `fit --summarize=llm` with a reply longer than the budget leaves failed with exit 3 where
/// plain `fit` succeeds (the clipped summary, a pinned system message, did not fit). The summary
/// is now bounded by what the kept messages leave of the budget; when that is too little for any
/// summary, the stage does nothing (without calling the endpoint) and fit goes on.
#[test]
fn fit_with_a_long_llm_reply_succeeds_where_plain_fit_does() {
    let input = data("fit_agent.json");
    for budget in ["400", "300", "200"] {
        let plain = ctx(&["fit", "--budget", budget, "-c"], &[], &input);
        assert_eq!(plain.code, 0, "plain fit at {budget}: {}", plain.stderr);
        let server = Server::start(vec![ok(&long_reply(3000))]);
        let run = fit_llm(&server.base(), budget, &["-c", "--report", "-"]);
        assert_eq!(
            run.code, 0,
            "fit --summarize=llm at {budget}: {}",
            run.stderr
        );
        assert!(count_tokens(&run.stdout) <= budget.parse().unwrap());
        let rep = report(&run.stderr);
        let stage = summarize_stage(&rep);
        if stage.get("skipped").is_some() {
            assert_eq!(stage["summarized"], json!([]), "{stage}");
            assert_ne!(rep["stopped_at"], "summarize", "{rep}");
        } else {
            assert_eq!(stage["clipped"], true, "{stage}");
            assert_eq!(rep["stopped_at"], "summarize", "{rep}");
            assert!(run.stdout.contains(" tokens omitted by ctx ...]"));
        }
    }
}

mod invariants {
    use super::*;
    use crate::common::cases;
    use crate::summarize::case;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(cases(16))]

        /// With the llm engine against the test server, summarize keeps SPEC §2's invariants.
        #[test]
        fn llm_summaries_keep_the_invariants(case in case(1..8)) {
            let server = Server::start((0..8).map(|_| ok("Summary: the agent read files and ran tests.")).collect());
            let run = case.run(&summarize_args(&server.base(), &[]));
            if run.code == 4 && run.stderr.contains("a summary must be smaller than") {
                // No summary is smaller than the few tokens it would replace: --on-error fail.
                prop_assert!(server.seen().is_empty(), "the endpoint was called for nothing");
                return Ok(());
            }
            prop_assert_eq!(run.code, 0, "{}", run.stderr);
            case.check(&run.stdout)?;
        }
    }
}

/// `fit --summarize=llm`: the summarize stage is summarize's own code, calling the endpoint once
/// when the prune stages are not enough, and failing with exit 4 when the endpoint does.
#[test]
fn fit_summarize_stage_calls_the_endpoint() {
    let server = Server::start(vec![ok(
        "Spaces were rejected as units; the fix skips them.",
    )]);
    let run = fit_llm(&server.base(), "400", &["-c", "--report", "-"]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(server.seen().len(), 1, "one summarizer call");
    let out = run.json();
    let summary = out["messages"][2]["content"].as_str().unwrap();
    // The stage keeps verbatim the recent messages that fit beside a summary of at most a
    // quarter of the budget (an LLM is called once, so its size is not tried out first).
    assert!(summary.starts_with(&header(9)), "{summary}");
    assert!(summary.ends_with("the fix skips them."), "{summary}");
    let report: Value = serde_json::from_str(run.stderr.lines().last().unwrap()).unwrap();
    assert_eq!(report["stopped_at"], "summarize");
    assert_eq!(report["stages"][3]["engine"], "llm");

    let down = format!("http://127.0.0.1:{}/v1", closed_port());
    assert_failed(&fit_llm(&down, "400", &[]));
    // With --on-error truncate the stage drops the range and the pipeline goes on.
    let run = fit_llm(&down, "400", &["--on-error", "truncate", "-q"]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
}

/// The Authorization header the server saw on its only request.
fn auth_seen(base: Option<&str>, env: &[(&str, &str)]) -> Option<String> {
    let server = Server::start(vec![ok("S")]);
    let url = server.base();
    let mut env: Vec<(&str, &str)> = env.to_vec();
    let mut args = vec![
        "summarize",
        "--engine",
        "llm",
        "--force",
        "--keep-recent",
        "3",
    ];
    match base {
        Some("flag") => args.extend(["--base-url", &url]),
        Some(var) => env.push((var, &url)),
        None => {}
    }
    let run = ctx(&args, &env, &data("agent_openai.json"));
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(!run.stderr.contains(KEY), "{}", run.stderr);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    seen[0].header("authorization").map(str::to_string)
}

#[test]
fn openai_api_key_goes_only_to_openai_base_url() {
    let openai_key = [("OPENAI_API_KEY", KEY)];
    let bearer = Some(format!("Bearer {KEY}"));
    // A stray OpenAI key never goes to a server named by --base-url or CTX_BASE_URL.
    assert_eq!(auth_seen(Some("flag"), &openai_key), None);
    assert_eq!(auth_seen(Some("CTX_BASE_URL"), &openai_key), None);
    // It goes where OPENAI_BASE_URL points, the server it was set for.
    assert_eq!(auth_seen(Some("OPENAI_BASE_URL"), &openai_key), bearer);
    // CTX_API_KEY goes to whatever ctx is configured for.
    assert_eq!(auth_seen(Some("flag"), &[("CTX_API_KEY", KEY)]), bearer);
    assert_eq!(
        auth_seen(
            Some("CTX_BASE_URL"),
            &[("CTX_API_KEY", KEY), ("OPENAI_API_KEY", "other")]
        ),
        bearer
    );
    // And --base-url beats OPENAI_BASE_URL, so the key stays home.
    let decoy = Server::start(vec![]);
    let decoy_url = decoy.base();
    assert_eq!(
        auth_seen(
            Some("flag"),
            &[("OPENAI_API_KEY", KEY), ("OPENAI_BASE_URL", &decoy_url)]
        ),
        None
    );
    assert!(decoy.seen().is_empty());
}

#[test]
fn a_refusal_for_want_of_a_withheld_key_says_why() {
    let refuse = || Reply::Send(401, vec![], r#"{"error":{"message":"no key"}}"#.into());
    let server = Server::start(vec![refuse()]);
    let run = agent(&server.base(), &[], &[("OPENAI_API_KEY", KEY)]);
    assert_failed(&run);
    run.assert_stderr_has("HTTP 401");
    run.assert_stderr_has("set CTX_API_KEY");
    assert!(!run.stderr.contains(KEY), "{}", run.stderr);
}

#[test]
fn base_url_query_string_stays_a_query_string() {
    let server = Server::start(vec![ok("azure summary")]);
    let base = format!(
        "{}/openai/deployments/d?api-version=2024-06-01",
        server.root()
    );
    let run = agent(&base, &[], &[]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(
        server.seen()[0].path,
        "/openai/deployments/d/chat/completions?api-version=2024-06-01"
    );
}

#[test]
fn credentials_in_the_base_url_are_never_printed() {
    const PASSWORD: &str = "url-password-4242";
    const QUERY_KEY: &str = "query-key-8383";
    let echo = || fail500(r#"{"error":{"message":"got {auth}"}}"#);
    let server = Server::start(vec![echo(), echo()]);
    let with_secrets = |port: u16| {
        format!("http://alice:{PASSWORD}@127.0.0.1:{port}/v1?api-version=1&api-key={QUERY_KEY}")
    };
    let assert_clean = |run: &Run| {
        for secret in [PASSWORD, QUERY_KEY, "alice", "YWxpY2U6"] {
            assert!(!run.stderr.contains(secret), "{secret}: {}", run.stderr);
            assert!(!run.stdout.contains(secret), "{secret}: {}", run.stdout);
        }
    };
    // A failure reported in the error and, with --on-error, in the report.
    let base = with_secrets(server.port);
    let run = agent(&base, &["--on-error", "truncate", "--report", "-"], &[]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let rep = report(&run.stderr);
    let error = rep["error"].as_str().unwrap();
    assert!(error.contains("http://[redacted]@127.0.0.1"), "{error}");
    assert!(error.contains("api-key=[redacted]"), "{error}");
    assert_clean(&run);
    // The credentials went as Basic auth and the query string as it was written.
    let seen = server.seen();
    assert!(
        seen[0]
            .header("authorization")
            .unwrap()
            .starts_with("Basic "),
        "{seen:?}"
    );
    assert!(seen[0].path.ends_with(&format!("api-key={QUERY_KEY}")));
    // Connection refused, exit 4.
    let run = agent(&with_secrets(closed_port()), &[], &[]);
    assert_failed(&run);
    assert_clean(&run);
    // --dry-run.
    let run = agent(&base, &["--dry-run"], &[]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_clean(&run);
    // A URL ctx cannot use is a usage error that does not repeat it.
    for bad in [
        format!("alice:{PASSWORD}@127.0.0.1/v1"),
        format!("ftp://alice:{PASSWORD}@127.0.0.1/v1"),
        format!("http://alice:{PASSWORD}@127.0.0.1:port/v1?api-key={QUERY_KEY}"),
    ] {
        // A usage error naming where the URL came from.
        let refused = |run: Run, place: &str| {
            assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
            let start = format!("ctx: {place}: ");
            assert!(run.stderr.starts_with(&start), "{}", run.stderr);
            assert_clean(&run);
        };
        refused(
            summarize(&bad, &[], &[], &data("agent_openai.json")),
            "--base-url",
        );
        let llm = ["summarize", "--engine", "llm", "--force"];
        let from_env = [("CTX_BASE_URL", bad.as_str())];
        refused(
            ctx(&llm, &from_env, &data("agent_openai.json")),
            "CTX_BASE_URL",
        );
    }
    // Credentials in the URL and a key would both be the Authorization header.
    let run = summarize(
        &base,
        &[],
        &[("CTX_API_KEY", KEY)],
        &data("agent_openai.json"),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    run.assert_stderr_has("use one");
    assert_clean(&run);
    assert!(!run.stderr.contains(KEY));
}

#[test]
fn redirects_to_another_server_are_not_followed() {
    let other = Server::start(vec![ok("stolen"), ok("stolen")]);
    let target = format!("http://127.0.0.1:{}/v1/chat/completions", other.port);
    let server = Server::start(vec![redirect(307, &target), redirect(307, &target)]);
    let run = agent(&server.base(), &[], &[("CTX_API_KEY", KEY)]);
    assert_failed(&run);
    run.assert_stderr_has("HTTP 307");
    run.assert_stderr_has("does not follow redirects");
    thread::sleep(Duration::from_millis(100));
    assert!(other.seen().is_empty(), "the other server received nothing");
    assert_eq!(server.seen().len(), 1);
}

fn cut_short(text: &str) -> Reply {
    let body = json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}],
    });
    Reply::Send(200, vec![], body.to_string())
}

#[test]
fn a_summary_cut_short_by_the_server_is_reported() {
    let server = Server::start(vec![cut_short("The agent read src/parser.rs and")]);
    let run = agent(&server.base(), &["--report", "-"], &[]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(
        report(&run.stderr)["summary_truncated"],
        true,
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("ctx: warning: document 0: the summarizer's reply was cut short"),
        "{}",
        run.stderr
    );
    // A whole reply says nothing of the kind.
    let server = Server::start(vec![ok("The agent read src/parser.rs.")]);
    let run = agent(&server.base(), &["--report", "-"], &[]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(report(&run.stderr).get("summary_truncated").is_none());
    assert!(!run.stderr.contains("cut short"), "{}", run.stderr);
    // fit's summarize stage records it too.
    let server = Server::start(vec![cut_short("Spaces were rejected as")]);
    let run = fit_llm(&server.base(), "400", &["-c", "--report", "-"]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let rep = report(&run.stderr);
    let stage = summarize_stage(&rep);
    assert_eq!(stage["summary_truncated"], true, "{rep}");
    run.assert_stderr_has("cut short");
}

#[test]
fn timeouts_and_retries_out_of_range_are_usage_errors() {
    let input = data("agent_openai.json");
    for bad in [
        "1e20", "1e300", "-1", "0", "-0", "NaN", "inf", "86401", "soon",
    ] {
        for command in [["summarize", "--engine=llm"], ["fit", "--summarize=llm"]] {
            let run = ctx(&[command[0], command[1], "--timeout", bad], &[], &input);
            assert_eq!(run.code, 2, "{command:?} --timeout {bad}: {}", run.stderr);
            run.assert_stderr_has("--timeout");
            assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        }
    }
    let run = ctx(
        &["summarize", "--engine", "llm", "--timeout", "-inf"],
        &[],
        &input,
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    for bad in ["101", "4294967295", "99999999999999999999", "-1"] {
        let run = ctx(&["summarize", "--retries", bad], &[], &input);
        assert_eq!(run.code, 2, "--retries {bad}: {}", run.stderr);
        run.assert_stderr_has("--retries");
    }
    // The largest allowed values work.
    let server = Server::start(vec![ok("S")]);
    let base = server.base();
    let run = ctx(
        &[
            "summarize",
            "--engine",
            "llm",
            "--force",
            "--base-url",
            &base,
            "--timeout",
            "86400",
            "--retries",
            "100",
        ],
        &[],
        &input,
    );
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
}

#[test]
fn a_huge_max_summary_tokens_does_not_overflow_the_request() {
    let server = Server::start(vec![ok("S")]);
    let run = agent(
        &server.base(),
        &["--max-summary-tokens", "18446744073709551615"],
        &[],
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert_ne!(run.code, 101, "{}", run.stderr);
    // The request asks for the summary's bound: what the summarized messages hold (a few
    // hundred tokens here), not a wrapped-around u64.
    for seen in server.seen() {
        let max = seen.body["max_tokens"].as_u64().unwrap();
        assert!((16..=10_000).contains(&max), "max_tokens {max}");
    }
}
