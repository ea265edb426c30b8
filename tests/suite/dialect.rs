//! Reading documents right and keeping requests acceptable, through the binary: the dialect
//! comes from structure (never the model name) and every part is counted; an Anthropic body
//! without a model is counted as Claude; messages without a role are input errors; budgets and
//! triggers never exceed the window minus the reserve (SPEC §1, §3).

use crate::common;
use crate::isolated;

use std::process::Command;

use common::{corpus_files, read_json};
use serde_json::{Value, json};

/// Runs `ctx ARGS` with `stdin`, in an empty environment: (exit code, stdout, stderr).
fn ctx(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ctx"));
    let out = isolated::output(cmd.args(args).env_clear(), stdin);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// `ctx count ARGS --output total` of `doc`.
fn total(doc: &Value, args: &[&str]) -> u64 {
    let mut all = vec!["count", "--output", "total", "-q"];
    all.extend_from_slice(args);
    let (code, out, err) = ctx(&all, &doc.to_string());
    assert_eq!(code, 0, "count {args:?}: {err}");
    out.trim().parse().unwrap()
}

/// The tokens of what a run of fit or truncate wrote, as `count MEASURE` counts them; `None`
/// when the document could not fit (exit 3). Any other exit fails the test, named `what`.
fn fitted(run: (i32, String, String), measure: &[&str], what: &str) -> Option<u64> {
    let (code, out, err) = run;
    match code {
        0 => Some(total(&serde_json::from_str(&out).unwrap(), measure)),
        3 => None,
        _ => panic!("{what}: exit {code}: {err}"),
    }
}

fn report(doc: &Value, args: &[&str]) -> Value {
    let mut all = vec!["count", "-c"];
    all.extend_from_slice(args);
    let (code, out, err) = ctx(&all, &doc.to_string());
    assert_eq!(code, 0, "count {args:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

const WEATHER_ARGS: &str =
    r#"{"location": "Paris, France", "unit": "celsius", "days": 5, "hourly": true}"#;

/// An OpenAI Chat Completions body for a Claude model, as OpenRouter and LiteLLM take it.
fn openai_body_for_claude() -> Value {
    json!({
        "model": "claude-sonnet-4",
        "max_tokens": 1024,
        "tools": [{"type": "function", "function": {
            "name": "get_weather",
            "description": "Get the weather forecast for a place",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}
        }}],
        "messages": [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "What is the weather in Paris this week?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_abc123", "type": "function",
                 "function": {"name": "get_weather", "arguments": WEATHER_ARGS}}
            ]},
            {"role": "tool", "tool_call_id": "call_abc123",
             "content": "{\"forecast\": [\"sun\", \"rain\", \"sun\", \"cloud\", \"sun\"]}"}
        ]
    })
}

/// The same conversation as an Anthropic Messages body.
fn anthropic_body_for_claude() -> Value {
    json!({
        "model": "claude-sonnet-4",
        "max_tokens": 1024,
        "system": "You are a weather bot.",
        "tools": [{
            "name": "get_weather",
            "description": "Get the weather forecast for a place",
            "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}
        }],
        "messages": [
            {"role": "user", "content": "What is the weather in Paris this week?"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_abc123", "name": "get_weather",
                 "input": serde_json::from_str::<Value>(WEATHER_ARGS).unwrap()}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_abc123",
                 "content": "{\"forecast\": [\"sun\", \"rain\", \"sun\", \"cloud\", \"sun\"]}"}
            ]}
        ]
    })
}

/// OpenRouter and LiteLLM users send OpenAI-shaped bodies with Claude model names: an OpenAI
/// document counted with Claude's estimate, its tool calls and tool definitions included.
#[test]
fn an_openai_body_for_a_claude_model_counts_its_tool_calls() {
    let openai = openai_body_for_claude();
    let r = report(&openai, &["--per-message"]);
    assert_eq!(r["format"], "openai", "{r}");
    assert_eq!(r["model"], "claude-sonnet-4");
    assert_eq!(r["exact"], false);
    // The call's arguments alone are 20-odd tokens: the assistant message holds all of them.
    let args_tokens = {
        let (_, out, _) = ctx(
            &["count", "--output", "total", "-q", "-m", "claude-sonnet-4"],
            &json!([{"role": "user", "content": WEATHER_ARGS}]).to_string(),
        );
        out.trim().parse::<u64>().unwrap() - 3 - 3 - 1 // framing, priming, the role
    };
    let assistant = r["per_message"][2]["tokens"].as_u64().unwrap();
    assert!(
        assistant >= args_tokens + 3,
        "the tool call is counted as {assistant} tokens, its arguments alone are {args_tokens}"
    );
    // Claude's tool-use system prompt applies whatever shape the definitions arrive in.
    assert!(r["breakdown"]["tools"].as_u64().unwrap() > 346, "{r}");
    // Not less than the same conversation written the Anthropic way.
    let anthropic = anthropic_body_for_claude();
    assert_eq!(report(&anthropic, &[])["format"], "anthropic");
    let (a, o) = (total(&anthropic, &[]), total(&openai, &[]));
    assert!(o >= a, "OpenAI-shaped {o} < Anthropic-shaped {a}");
}

/// Through truncate, the undercount became outputs over budget: over the corpus, an OpenAI
/// document truncated for a Claude model stays within the budget as count measures it.
#[test]
fn truncate_for_a_claude_model_stays_within_budget_over_the_corpus() {
    let mut checked = 0;
    for path in corpus_files() {
        let doc = read_json(&path);
        let anthropic = path.components().any(|c| c.as_os_str() == "anthropic");
        // The OpenAI files are measured as OpenAI documents whatever ctx detects.
        let measure: &[&str] = if anthropic {
            &["-m", "claude-sonnet-4"]
        } else {
            &["-m", "claude-sonnet-4", "--format", "openai"]
        };
        let before = total(&doc, measure);
        for share in [0.8, 0.5, 0.25] {
            let budget = ((before as f64 * share) as u64).to_string();
            let run = ctx(
                &[
                    "truncate",
                    "-q",
                    "-c",
                    "-m",
                    "claude-sonnet-4",
                    "--budget",
                    &budget,
                ],
                &doc.to_string(),
            );
            let what = format!("{} at {share}", path.display());
            if let Some(after) = fitted(run, measure, &what) {
                assert!(
                    after <= budget.parse().unwrap(),
                    "{what}: {after} tokens after truncating to {budget}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "only {checked} outputs checked");
}

/// SPEC §3: without a model anywhere, an Anthropic document is counted and windowed as the
/// current Claude Sonnet, and the report says so.
#[test]
fn an_anthropic_body_without_a_model_is_counted_as_claude() {
    let body = json!({"max_tokens": 1024, "system": "Be brief.", "messages": [
        {"role": "user", "content": "Hello"}
    ]});
    let r = report(&body, &[]);
    assert_eq!(r["format"], "anthropic");
    assert_eq!(r["model"], "claude-sonnet-4");
    assert_eq!(r["encoding"], "cl100k_base");
    assert_eq!(r["context_window"], 200_000);
    // A plain OpenAI array still defaults to gpt-4o, and a model named anywhere wins.
    let r = report(&json!([{"role": "user", "content": "Hello"}]), &[]);
    assert_eq!(
        (r["model"].as_str(), r["format"].as_str()),
        (Some("gpt-4o"), Some("openai"))
    );
    let r = report(&body, &["-m", "gpt-4.1"]);
    assert_eq!(r["model"], "gpt-4.1");
    // The window is Claude's: 150k tokens fit the default budget of truncate.
    let (code, _, err) = ctx(&["truncate", "--budget", "150000", "-q"], &body.to_string());
    assert_eq!(code, 0, "{err}");
}

/// A message without `role` is an input error naming its index and path, with a hint for
/// ShareGPT; `ctx check` lists it as an error finding.
#[test]
fn messages_without_a_role_are_input_errors() {
    let sharegpt = json!([
        {"from": "human", "value": "What is 2+2?"},
        {"from": "gpt", "value": "4"}
    ]);
    let commands: [&[&str]; 6] = [
        &["count"],
        &["prune"],
        &["truncate", "--budget", "100"],
        &["summarize", "--engine", "extractive", "--force"],
        &["fit", "--budget", "100"],
        &["count", "--output", "total"],
    ];
    for args in commands {
        let (code, out, err) = ctx(args, &sharegpt.to_string());
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(
            err.contains(
                "message 0 (.[0]) has no `role`; this looks like ShareGPT (`from`/`value`)"
            ) && err.contains("jq"),
            "{args:?}: {err}"
        );
    }
    let body = json!({"messages": [{"role": "user", "content": "a"}, {"content": "b"}]});
    let (code, _, err) = ctx(&["count"], &body.to_string());
    assert_eq!(code, 2);
    assert!(
        err.contains("message 1 (.messages[1]) has no `role`"),
        "{err}"
    );
    assert!(!err.contains("ShareGPT"), "{err}");
    let (code, _, err) = ctx(&["fit"], &json!([{"role": 7, "content": "x"}]).to_string());
    assert_eq!(code, 2);
    assert!(
        err.contains("message 0 (.[0].role): `role` must be a string"),
        "{err}"
    );
    // check reports it and still writes its findings.
    let (code, out, _) = ctx(&["check", "-c"], &sharegpt.to_string());
    assert_eq!(code, 1);
    let findings: Value = serde_json::from_str(&out).unwrap();
    let missing: Vec<&Value> = findings
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "missing-role")
        .collect();
    assert_eq!(missing.len(), 2, "{findings}");
    assert_eq!(missing[0]["severity"], "error");
    assert_eq!(missing[0]["path"], ".[0]");
    assert!(missing[0]["message"].as_str().unwrap().contains("ShareGPT"));
}

/// Tool calls in both dialects' shapes: counted whole (with a warning), reported by check, and
/// refused by the commands that rewrite messages, which could not pair them safely.
#[test]
fn documents_mixing_both_tool_formats_are_counted_but_not_rewritten() {
    let mut mixed = anthropic_body_for_claude();
    let openai = openai_body_for_claude();
    let extra: Vec<Value> = openai["messages"].as_array().unwrap()[2..].to_vec();
    mixed["messages"].as_array_mut().unwrap().extend(extra);
    let (code, out, err) = ctx(&["count", "-c"], &mixed.to_string());
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("no API accepts both"), "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["format"], "anthropic");
    // Every part is counted: more than the Anthropic part alone by at least the OpenAI call.
    let anthropic_alone = total(&anthropic_body_for_claude(), &[]);
    assert!(
        r["tokens"].as_u64().unwrap() >= anthropic_alone + 20,
        "{r} vs {anthropic_alone}"
    );
    for args in [
        &["prune"][..],
        &["truncate", "--budget", "100000"],
        &["summarize", "--engine", "extractive", "--force"],
        &["fit", "--budget", "100000"],
    ] {
        let (code, out, err) = ctx(args, &mixed.to_string());
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty());
        assert!(
            err.contains(".messages[1].content[0]") && err.contains(".messages[3].tool_calls"),
            "{args:?}: {err}"
        );
    }
    let (code, out, _) = ctx(&["check", "-c"], &mixed.to_string());
    assert_eq!(code, 1);
    let findings: Value = serde_json::from_str(&out).unwrap();
    assert!(
        findings
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "mixed-dialect"
                && f["severity"] == "error"
                && f["path"] == ".messages[3].tool_calls"),
        "{findings}"
    );
}

/// The commands that write requests never aim above the window minus the reserve: fit and
/// truncate outputs plus the reserve fit the window, over the corpus, whatever --budget and
/// --trigger say (SPEC §3).
#[test]
fn fit_and_truncate_outputs_leave_room_for_the_reply() {
    let mut checked = 0;
    for path in corpus_files() {
        let doc = read_json(&path);
        if path.components().any(|c| c.as_os_str() == "irregular") {
            continue;
        }
        let tokens = total(&doc, &["-m", "gpt-4o"]);
        let window = (tokens * 3 / 4).max(2000);
        for reserve in [window / 4, window / 10] {
            let (w, r) = (window.to_string(), reserve.to_string());
            let base = [
                "-q",
                "-c",
                "-m",
                "gpt-4o",
                "--context-window",
                &w,
                "--reserve",
                &r,
            ];
            let runs: [&[&str]; 3] = [
                &["fit", "--budget", "90%", "--trigger", "100%"],
                &["fit", "--budget", "100%"],
                &["truncate", "--budget", "100%", "--partial"],
            ];
            for run in runs {
                let args: Vec<&str> = run.iter().chain(&base).copied().collect();
                let what = format!("{} {run:?}", path.display());
                let out = ctx(&args, &doc.to_string());
                if let Some(after) = fitted(out, &["-m", "gpt-4o"], &what) {
                    assert!(
                        after + reserve <= window,
                        "{what}: {after} tokens + {reserve} reserved > the {window}-token window"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 40, "only {checked} outputs checked");
}

/// The warning says what was lowered, to what, and why; the trigger may meet the budget.
#[test]
fn a_budget_over_the_window_minus_the_reserve_is_lowered_with_a_warning() {
    let body = json!({"model": "gpt-4o", "max_tokens": 16384, "messages": [
        {"role": "user", "content": "hi"}
    ]});
    let (code, _, err) = ctx(
        &[
            "fit",
            "--budget",
            "70%",
            "--trigger",
            "95%",
            "--report",
            "-",
        ],
        &body.to_string(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning: document 0: --trigger 95% (121600 tokens) is over what the 128000-token window of gpt-4o holds with 16384 tokens kept for the reply (the body's max_tokens): lowered to 111616"),
        "{err}"
    );
    let report: Value = err
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("a report line");
    assert_eq!(
        (report["budget"].as_u64(), report["trigger"].as_u64()),
        (Some(89600), Some(111616))
    );
    // Both lowered: they meet, which is fine.
    let (code, _, err) = ctx(
        &[
            "fit",
            "--budget",
            "99%",
            "--trigger",
            "100%",
            "--report",
            "-",
        ],
        &body.to_string(),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("lowered to 111616").count(), 2, "{err}");
    // Given below the budget, the trigger is still a usage error.
    let (code, _, err) = ctx(
        &["fit", "--budget", "99%", "--trigger", "98%"],
        &body.to_string(),
    );
    assert_eq!(code, 2, "{err}");
    // A reserve that leaves nothing of the window.
    let (code, _, err) = ctx(
        &["truncate", "--budget", "100", "--reserve", "128000"],
        &body.to_string(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("leaves nothing of the 128000-token window"),
        "{err}"
    );
    // count only warns, and a window of 0 is a usage error.
    let (code, _, err) = ctx(&["count", "--budget", "300000"], &body.to_string());
    assert_eq!(code, 0);
    assert!(
        err.contains("--budget 300000 is over the 128000-token window of gpt-4o"),
        "{err}"
    );
    let (code, out, err) = ctx(&["count", "--context-window", "0"], &body.to_string());
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    // Unknown windows: nothing to lower to.
    let (code, _, err) = ctx(
        &["truncate", "--budget", "5000000", "-m", "my-model"],
        &body.to_string(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("lowered"), "{err}");
}

/// Through the library: a Batch line holding a Responses body is fitted inside its envelope,
/// a turn (reasoning, call, output) stays whole, and a body continuing server-held state is
/// refused as an input error rather than cut.
#[test]
fn the_library_fits_a_batch_line_of_responses_items() {
    let mut body = read_json(std::path::Path::new("tests/data/responses_agent.json"));
    body["model"] = json!("gpt-5");
    let line =
        json!({"custom_id": "job-7", "method": "POST", "url": "/v1/responses", "body": body});
    let doc = ctx::Document::parse(line.clone(), None).unwrap();
    assert_eq!(doc.dialect(), ctx::Dialect::Responses);
    assert_eq!(doc.custom_id(), Some("job-7"));
    assert_eq!(doc.server_state(), None);
    let out = ctx::fit(doc, &ctx::FitOptions::new(1500)).unwrap();
    assert!(out.tokens_after <= 1500, "{}", out.tokens_after);
    let v = out.document.into_value();
    assert_eq!(v["custom_id"], "job-7");
    assert_eq!(v["url"], "/v1/responses");
    let items = v["body"]["input"].as_array().unwrap();
    assert!(items.len() < line["body"]["input"].as_array().unwrap().len());
    // Every reasoning item kept is followed by its call; every call kept has its output.
    for (i, m) in items.iter().enumerate() {
        if m["type"] == "reasoning" {
            assert_eq!(items[i + 1]["type"], "function_call", "{i}");
        }
        if m["type"] == "function_call" {
            assert!(
                items
                    .iter()
                    .any(|o| o["type"] == "function_call_output" && o["call_id"] == m["call_id"]),
                "{i}"
            );
        }
    }
    let chained = json!({"model": "gpt-5", "previous_response_id": "resp_1",
        "input": line["body"]["input"].clone()});
    let e = ctx::fit(chained, &ctx::FitOptions::new(500)).unwrap_err();
    assert_eq!(e.kind(), ctx::ErrorKind::Input);
    assert!(e.to_string().contains("previous_response_id"), "{e}");
}
