//! `ctx fit` on the command line: where a summary and a note go with respect to the task, and
//! the summarize stage reading what earlier stages left. (The properties of fit's stages over
//! generated conversations and the corpus are the library's unit tests, src/tests/fit.rs.)

use crate::common::*;
use crate::isolated;

use ctx::Dialect;
use serde_json::{Value, json};

/// Runs the binary on `input`, isolated from the developer's environment; (exit code, stdout,
/// stderr).
fn ctx_cli(args: &[&str], input: &Value) -> (i32, String, String) {
    let r = isolated::run(args, &[], serde_json::to_vec(input).unwrap());
    (r.code, r.stdout, r.stderr)
}

fn greeting_then_task(dialect: Dialect) -> Value {
    let result = |i: usize| format!("output of step {i} {}", "lorem ipsum dolor ".repeat(20));
    let mut msgs = vec![
        json!({"role": "assistant", "content": "Hello! How can I help you today?"}),
        json!({"role": "user", "content": "Fix the failing test in src/parser.rs please."}),
    ];
    // (Compared, not matched: the public API's `Dialect` is non-exhaustive.)
    let openai = dialect == Dialect::Openai;
    for i in 0..8 {
        if openai {
            msgs.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{i}"),
                "type": "function", "function": {"name": "run", "arguments": format!("{{\"cmd\": \"step {i}\"}}")}}]}));
            msgs.push(
                json!({"role": "tool", "tool_call_id": format!("call_{i}"), "content": result(i)}),
            );
        } else {
            msgs.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("toolu_{i}"),
                "name": "run", "input": {"cmd": format!("step {i}")}}]}));
            msgs.push(json!({"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": format!("toolu_{i}"), "content": result(i)}]}));
        }
    }
    if openai {
        msgs.insert(
            0,
            json!({"role": "system", "content": "You are a coding agent."}),
        );
        json!({"model": "gpt-4o", "messages": msgs})
    } else {
        json!({"model": "claude-sonnet-4-5", "max_tokens": 1024,
            "system": "You are a coding agent.", "messages": msgs})
    }
}

/// `fit --summarize` with user-role summaries (Anthropic, or OpenAI with `--summary-role user`)
/// and a small budget kept the summary and dropped the task: the summary was placed before the
/// task, and the truncate stage took it for the task. The input's task now stays, verbatim, with
/// any summary after it, at every budget.
#[test]
fn fit_summarize_keeps_the_task_after_a_greeting() {
    for (dialect, extra) in [
        (Dialect::Anthropic, None),
        (Dialect::Openai, Some("--summary-role=user")),
        (Dialect::Openai, None),
    ] {
        let input = greeting_then_task(dialect);
        let task =
            json!({"role": "user", "content": "Fix the failing test in src/parser.rs please."});
        for budget in ["200", "250", "300", "120"] {
            let mut args = vec![
                "fit",
                "--budget",
                budget,
                "--summarize=extractive",
                "-q",
                "-c",
            ];
            args.extend(extra);
            let (code, stdout, stderr) = ctx_cli(&args, &input);
            assert_eq!(code, 0, "{dialect:?} {extra:?} at {budget}: {stderr}");
            let out: Value = serde_json::from_str(&stdout).unwrap();
            let msgs = out["messages"].as_array().unwrap();
            let at = msgs.iter().position(|m| *m == task);
            assert!(
                at.is_some(),
                "{dialect:?} {extra:?} at {budget}: the task was lost: {stdout}"
            );
            if let Some(s) = msgs.iter().position(is_summary) {
                assert!(
                    s > at.unwrap(),
                    "the summary comes before the task: {stdout}"
                );
            }
            let doc = parse(out.clone(), dialect);
            assert!(tokens(&doc) <= budget.parse().unwrap());
            assert_eq!(error_count(&doc), 0, "{stdout}");
            // A later run on the output still finds the task.
            let more = budget.parse::<u64>().unwrap() / 2;
            let mut args = vec![
                "fit",
                "--budget",
                &*more.to_string(),
                "--summarize=extractive",
                "-q",
                "-c",
            ]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
            args.extend(extra.map(String::from));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, again, _) = ctx_cli(&args, &out);
            if code == 0 {
                let again: Value = serde_json::from_str(&again).unwrap();
                assert!(
                    again["messages"].as_array().unwrap().contains(&task),
                    "{again}"
                );
            }
        }
    }
}

/// With a budget that leaves room for it, the summary is made, placed right after the task (the
/// greeting before the task is summarized with the exchanges), and the task still opens the
/// conversation.
#[test]
fn fit_summarize_places_the_summary_after_the_task() {
    let input = greeting_then_task(Dialect::Anthropic);
    let (code, stdout, stderr) = ctx_cli(
        &[
            "fit",
            "--budget",
            "300",
            "--summarize=extractive",
            "-c",
            "--report",
            "-",
        ],
        &input,
    );
    assert_eq!(code, 0, "{stderr}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    let msgs = out["messages"].as_array().unwrap();
    assert_eq!(
        msgs[0], input["messages"][1],
        "the task opens the conversation"
    );
    assert!(is_summary(&msgs[1]), "{stdout}");
    assert_eq!(msgs[1]["role"], "user");
    let report = stderr
        .lines()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap();
    assert_eq!(report["stopped_at"], "summarize", "{report}");
}

/// A note in the user role (Anthropic) is never put before the task: where the removed messages
/// came before it (an assistant greeting), the note follows the task, so a later run still takes
/// the task for the task and keeps it.
#[test]
fn a_note_never_comes_before_the_task() {
    let input = greeting_then_task(Dialect::Anthropic);
    let task = input["messages"][1].clone();
    let (code, stdout, stderr) = ctx_cli(&["fit", "--budget", "300", "--note", "-q", "-c"], &input);
    assert_eq!(code, 0, "{stderr}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    let msgs = out["messages"].as_array().unwrap();
    assert_eq!(msgs[0], task, "{stdout}");
    assert!(
        msgs[1]["content"]
            .as_str()
            .is_some_and(|t| t.starts_with("[ctx: ")),
        "{stdout}"
    );
    // The agent goes on; the next compaction keeps the task.
    let mut next = out.clone();
    let more = greeting_then_task(Dialect::Anthropic)["messages"]
        .as_array()
        .unwrap()[2..6]
        .to_vec();
    next["messages"]
        .as_array_mut()
        .unwrap()
        .extend(more.into_iter().map(|mut m| {
            if let Some(blocks) = m["content"].as_array_mut() {
                for b in blocks {
                    for k in ["id", "tool_use_id"] {
                        if let Some(id) = b[k].as_str().map(|s| format!("{s}_next")) {
                            b[k] = json!(id);
                        }
                    }
                }
            }
            m
        }));
    let (code, stdout, stderr) = ctx_cli(&["fit", "--budget", "250", "--note", "-q", "-c"], &next);
    assert_eq!(code, 0, "{stderr}");
    let again: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        again["messages"].as_array().unwrap().contains(&task),
        "{stdout}"
    );
    assert_eq!(error_count(&parse(again, Dialect::Anthropic)), 0);
}

/// fit's summarize stage reads the messages as the agent saw them, not what earlier stages
/// left of them: the test command at the end of a long script whose arguments the args stage
/// shortened (keeping their start) is still in the summary's trail.
#[test]
fn fit_summarizes_the_original_messages_not_what_earlier_stages_left() {
    let filler = |tag: &str| -> String {
        (0..25)
            .map(|k| format!("{tag} line {k}: collecting module_{k}.py ... ok\n"))
            .collect()
    };
    let wanted = "python -m pytest tests/test_settings_loader.py";
    let body: String = (0..60)
        .map(|k| format!("SETTING_{k} = os.environ.get('APP_SETTING_{k}', 'default-{k}')\n"))
        .collect();
    let script = format!("cat > /srv/app/settings.py <<'EOF'\n{body}EOF\n{wanted}");
    let mut messages = vec![
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "user", "content": "Make the build pass."}),
    ];
    for k in 0..30 {
        let id = format!("call_{k}");
        let command = if k == 0 {
            script.clone()
        } else {
            format!("make step{k}")
        };
        let arguments = json!({ "command": command }).to_string();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "bash", "arguments": arguments}}
        ]}));
        messages.push(
            json!({"role": "tool", "tool_call_id": id, "content": filler(&format!("step{k}"))}),
        );
    }
    messages.push(json!({"role": "assistant", "content": "Next I will fix the settings."}));
    let input = json!({"model": "gpt-4o", "messages": messages});
    // Shortened, the script's arguments no longer show the test command.
    let (code, pruned, stderr) = ctx_cli(&["prune", "--keep", "0", "--shorten-args", "64"], &input);
    assert_eq!(code, 0, "{stderr}");
    let pruned: Value = serde_json::from_str(&pruned).unwrap();
    let shortened = pruned["messages"][2]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert!(!shortened.contains(wanted), "{shortened}");

    let (code, stdout, stderr) = ctx_cli(
        &[
            "fit",
            "--budget",
            "2000",
            "--summarize=extractive",
            "--report",
            "-",
        ],
        &input,
    );
    assert_eq!(code, 0, "{stderr}");
    let report = stderr
        .lines()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap();
    let stages: Vec<&str> = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert!(
        stages.contains(&"args") && stages.contains(&"summarize"),
        "{report}"
    );
    let out: Value = serde_json::from_str(&stdout).unwrap();
    let summary = out["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| is_summary(m))
        .unwrap_or_else(|| panic!("no summary: {stdout}"));
    let text = summary["content"].as_str().unwrap();
    assert!(text.contains(wanted), "{text}");
    assert!(text.contains("/srv/app/settings.py"), "{text}");
}
