//! `ctx count --exact` end to end: the built binary against a scripted HTTP server on 127.0.0.1
//! started by each test (tests/suite/scripted.rs; no network).
//!
//! For each provider a golden pins the request (method, path, headers with the key's value
//! replaced by `<KEY>`, body) and the output using the provider's count:
//! `tests/exact/<provider>.request.json` and `tests/exact/<provider>.stdout.json`. After an
//! intended change, re-bless them with
//!
//!   EXACT_BLESS=1 cargo test --test suite exact::
//!
//! and read the diff. The other tests are about what a user relies on: the estimate with a
//! warning when the provider gives no count (exit 4 under `--exact=required`), retries, keys
//! sent only where they belong and never printed, and no network at all without `--exact`.

use crate::isolated;
use crate::scripted;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use isolated::Run;
use scripted::{Reply, Seen, Server, closed_port, rate_limited, redirect};
use serde_json::{Map, Value, json};

const KEY: &str = "sk-ctx-exact-secret-0123456789";

impl Run {
    /// Asserts that `secret` is in none of the outputs (and in `extra`, e.g. a report file).
    fn assert_never_shows(&self, secret: &str, extra: &[&str]) {
        assert!(!self.stdout.contains(secret), "stdout: {}", self.stdout);
        assert!(!self.stderr.contains(secret), "stderr: {}", self.stderr);
        for e in extra {
            assert!(!e.contains(secret), "{e}");
        }
    }
}

/// Runs the binary with `input` on stdin, in an environment without the developer's
/// variables, plus `env`.
fn ctx(args: &[&str], env: &[(&str, &str)], input: &str) -> Run {
    isolated::run(args, env, input)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// A Claude document (an Anthropic Messages body with thinking, tool use and results).
fn claude() -> String {
    read("tests/data/agent_anthropic.json")
}

/// A Gemini document, OpenAI-shaped (system, an inline image, a tool call and its result).
fn gemini() -> String {
    read("tests/exact/gemini.input.json")
}

/// An OpenAI document ctx can only estimate (a file part, a tool call and its result).
fn openai() -> String {
    read("tests/exact/openai.input.json")
}

/// What each provider's count endpoint answers with `n`.
fn ok(provider: &str, n: u64) -> Reply {
    let body = match provider {
        "anthropic" => json!({"input_tokens": n}),
        "gemini" => {
            json!({"totalTokens": n, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": n}]})
        }
        _ => json!({"object": "response.input_tokens", "input_tokens": n}),
    };
    Reply::Send(200, vec![], body.to_string())
}

/// Each provider's: (document, the variable naming its base URL for its SDK (the key goes
/// there), its key variable, ctx's own base URL variable, the flag, the base URL for `server`).
struct Case {
    name: &'static str,
    input: fn() -> String,
    sdk_var: &'static str,
    key_var: &'static str,
    ctx_var: &'static str,
    flag: &'static str,
    base: fn(&Server) -> String,
}

const CASES: &[Case] = &[
    Case {
        name: "anthropic",
        input: claude,
        sdk_var: "ANTHROPIC_BASE_URL",
        key_var: "ANTHROPIC_API_KEY",
        ctx_var: "CTX_ANTHROPIC_BASE_URL",
        flag: "--anthropic-base-url",
        base: Server::root,
    },
    Case {
        name: "gemini",
        input: gemini,
        sdk_var: "GOOGLE_GEMINI_BASE_URL",
        key_var: "GEMINI_API_KEY",
        ctx_var: "CTX_GEMINI_BASE_URL",
        flag: "--gemini-base-url",
        base: Server::root,
    },
    Case {
        name: "openai",
        input: openai,
        sdk_var: "OPENAI_BASE_URL",
        key_var: "OPENAI_API_KEY",
        ctx_var: "CTX_OPENAI_BASE_URL",
        flag: "--openai-base-url",
        base: Server::base,
    },
];

/// `ctx count --exact ARGS` with the case's key and its SDK variable naming `server`.
fn exact(case: &Case, server: &Server, args: &[&str]) -> Run {
    let base = (case.base)(server);
    let mut all = vec!["count", "--exact", "--timeout", "2", "--retries", "1"];
    all.extend_from_slice(args);
    ctx(
        &all,
        &[(case.sdk_var, &base), (case.key_var, KEY)],
        &(case.input)(),
    )
}

/// A request as the golden shows it: the headers ctx chose (the transport's own, which vary
/// with the port and the HTTP library, left out), the key's value replaced by `<KEY>`.
fn shown(seen: &Seen) -> Value {
    let mut headers = Map::new();
    for (name, value) in &seen.headers {
        if matches!(
            name.as_str(),
            "host" | "user-agent" | "content-length" | "accept-encoding" | "connection"
        ) {
            continue;
        }
        headers.insert(name.clone(), json!(value.replace(KEY, "<KEY>")));
    }
    json!({"method": seen.method, "path": seen.path, "headers": headers, "body": seen.body})
}

/// Compares `actual` with the golden file, or writes it with `EXACT_BLESS=1`.
fn golden(name: &str, actual: &Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/exact/{name}"));
    let text = format!("{}\n", serde_json::to_string_pretty(actual).unwrap());
    if std::env::var_os("EXACT_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!("no golden {name}: run EXACT_BLESS=1 cargo test --test suite exact::")
    });
    assert_eq!(
        text, want,
        "{name} differs (re-bless with EXACT_BLESS=1 if intended)"
    );
}

#[test]
fn each_providers_request_and_the_output_using_its_count() {
    for case in CASES {
        let server = Server::start(vec![ok(case.name, 1234)]);
        let run = exact(case, &server, &[]);
        assert_eq!(run.code, 0, "{}: {}", case.name, run.stderr);
        assert_eq!(run.stderr, "", "{}: no warning", case.name);
        let seen = server.seen();
        assert_eq!(seen.len(), 1, "{}: one request", case.name);
        golden(&format!("{}.request.json", case.name), &shown(&seen[0]));
        let out = run.json();
        golden(&format!("{}.stdout.json", case.name), &out);
        assert_eq!(out["tokens"], 1234, "{}", case.name);
        assert_eq!(out["exact"], true, "{}", case.name);
        assert_eq!(out["source"], case.name, "{}", case.name);
        // The estimate stays beside it, and the breakdown adds up to the estimate.
        let estimate = ctx(&["count"], &[], &(case.input)()).json();
        assert_eq!(out["estimated_total"], estimate["tokens"], "{}", case.name);
        assert_eq!(out["breakdown"], estimate["breakdown"], "{}", case.name);
        assert!(out.get("estimated").is_none(), "{}", case.name);
        run.assert_never_shows(KEY, &[]);
    }
}

#[test]
fn the_key_goes_in_each_providers_own_header() {
    let keys: Vec<(&str, Option<String>)> = CASES
        .iter()
        .map(|case| {
            let server = Server::start(vec![ok(case.name, 5)]);
            let run = exact(case, &server, &[]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            let seen = &server.seen()[0];
            let header: Option<String> = match case.name {
                "anthropic" => seen.header("x-api-key"),
                "gemini" => seen.header("x-goog-api-key"),
                _ => seen
                    .header("authorization")
                    .and_then(|a| a.strip_prefix("Bearer ")),
            }
            .map(str::to_string);
            // Only there: not in the URL, not in another header.
            assert!(!seen.path.contains(KEY), "{}", seen.path);
            let elsewhere = seen.headers.iter().filter(|(_, v)| v.contains(KEY)).count();
            assert_eq!(elsewhere, 1, "{}: {:?}", case.name, seen.headers);
            (case.name, header)
        })
        .collect();
    assert!(
        keys.iter().all(|(_, k)| k.as_deref() == Some(KEY)),
        "{keys:?}"
    );
}

#[test]
fn no_count_falls_back_to_the_estimate_with_a_warning() {
    for case in CASES {
        // The server refuses, echoing the key it was sent.
        let refuse = || {
            Reply::Send(
                401,
                vec![],
                r#"{"error":{"message":"invalid key {key}"}}"#.into(),
            )
        };
        let server = Server::start(vec![refuse()]);
        let dir = scratch(&format!("fallback-{}", case.name));
        let report = dir.join("report.jsonl");
        let run = exact(case, &server, &["--report", report.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{}: {}", case.name, run.stderr);
        assert_eq!(server.seen().len(), 1, "a 401 is not retried");
        let estimate = ctx(&["count"], &[], &(case.input)()).json();
        let out = run.json();
        assert_eq!(out["tokens"], estimate["tokens"], "{}", case.name);
        assert_eq!(out["exact"], false);
        assert_eq!(out["source"], "ctx");
        assert!(
            out["fallback"].as_str().unwrap().contains("HTTP 401"),
            "{out}"
        );
        assert!(out.get("estimated_total").is_none());
        // One warning line, naming the document and the reason.
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{}", run.stderr);
        assert!(
            lines[0].starts_with("ctx: warning: document 0: --exact: no count from the provider"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains(&format!("{}: ", case.name)),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("HTTP 401: invalid key"), "{}", lines[0]);
        let report = std::fs::read_to_string(&report).unwrap();
        let line: Value = serde_json::from_str(report.trim()).unwrap();
        assert_eq!(line["source"], "ctx");
        assert_eq!(line["exact"], false);
        assert!(line["fallback"].as_str().unwrap().contains("HTTP 401"));
        // The echo really carried the key, so its scrubbing was tested.
        assert_eq!(server.seen()[0].key(), Some(KEY));
        run.assert_never_shows(KEY, &[&report]);
    }
}

#[test]
fn required_exits_4_and_writes_nothing_for_that_document() {
    for case in CASES {
        let boom = || Reply::Send(500, vec![], r#"{"error":{"message":"boom {key}"}}"#.into());
        let server = Server::start(vec![boom(), boom()]);
        let run = ctx(
            &[
                "count",
                "--exact=required",
                "--timeout",
                "2",
                "--retries",
                "1",
                "--report",
                "-",
            ],
            &[(case.sdk_var, &(case.base)(&server)), (case.key_var, KEY)],
            &(case.input)(),
        );
        assert_eq!(run.code, 4, "{}: {}", case.name, run.stderr);
        assert_eq!(run.stdout, "", "nothing is written for a failed document");
        assert_eq!(server.seen().len(), 2, "one retry after a 500");
        let (errors, reports): (Vec<&str>, Vec<&str>) =
            run.stderr.lines().partition(|l| l.starts_with("ctx: "));
        assert_eq!(errors.len(), 1, "{}", run.stderr);
        assert!(
            errors[0].starts_with("ctx: document 0: --exact=required: no count from the provider"),
            "{}",
            errors[0]
        );
        assert!(errors[0].contains("HTTP 500: boom"), "{}", errors[0]);
        assert!(errors[0].contains("after 2 attempts"), "{}", errors[0]);
        let line: Value = serde_json::from_str(reports[0]).unwrap();
        assert_eq!(line["exit"], 4);
        run.assert_never_shows(KEY, &[]);
    }
}

#[test]
fn required_with_a_count_succeeds_and_a_batch_keeps_going_after_a_failure() {
    let case = &CASES[0];
    let server = Server::start(vec![
        ok("anthropic", 77),
        Reply::Send(400, vec![], r#"{"error":{"message":"bad"}}"#.into()),
        ok("anthropic", 99),
    ]);
    let doc: Value = serde_json::from_str(&claude()).unwrap();
    let batch = format!("{}\n{}\n{}\n", doc, doc, doc);
    let run = ctx(
        &[
            "count",
            "--exact=required",
            "-c",
            "-j",
            "1",
            "--output",
            "total",
        ],
        &[(case.sdk_var, &server.root()), (case.key_var, KEY)],
        &batch,
    );
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert_eq!(run.stdout, "77\n99\n");
    assert!(
        run.stderr.starts_with("ctx: document 1: --exact=required"),
        "{}",
        run.stderr
    );
}

#[test]
fn rate_limits_are_retried_after_retry_after() {
    for case in CASES {
        let limited = rate_limited("1");
        let server = Server::start(vec![limited, ok(case.name, 321)]);
        let started = Instant::now();
        let run = exact(case, &server, &[]);
        assert_eq!(run.code, 0, "{}: {}", case.name, run.stderr);
        assert_eq!(run.json()["tokens"], 321);
        assert_eq!(server.seen().len(), 2);
        // The second attempt waited for the server's Retry-After (a lower bound only).
        assert!(
            started.elapsed() >= Duration::from_millis(950),
            "{:?}",
            started.elapsed()
        );
    }
    // --retries bounds the attempts.
    let case = &CASES[0];
    let busy = || Reply::Send(503, vec![("Retry-After", "0")], "{}".into());
    let server = Server::start(vec![busy(), busy(), busy(), busy()]);
    let run = ctx(
        &["count", "--exact", "--retries", "2"],
        &[(case.sdk_var, &server.root()), (case.key_var, KEY)],
        &claude(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.seen().len(), 3);
    run.assert_stderr_has("after 3 attempts");
}

#[test]
fn a_hang_past_the_timeout_falls_back() {
    let case = &CASES[0];
    let server = Server::start(vec![Reply::Hang(3000)]);
    let started = Instant::now();
    let run = ctx(
        &["count", "--exact", "--timeout", "0.3", "--retries", "0"],
        &[(case.sdk_var, &server.root()), (case.key_var, KEY)],
        &claude(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_stderr_has("timeout");
    assert!(started.elapsed() < Duration::from_millis(2900));
}

#[test]
fn malformed_replies_and_refused_connections_fall_back() {
    for (reply, why) in [
        (
            Reply::Send(200, vec![], "not json".into()),
            "malformed reply",
        ),
        (
            Reply::Send(200, vec![], r#"{"tokens": 5}"#.into()),
            "no whole number `input_tokens`",
        ),
    ] {
        let server = Server::start(vec![reply]);
        let run = exact(&CASES[0], &server, &[]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.assert_stderr_has(why);
        assert_eq!(run.json()["source"], "ctx");
    }
    let down = format!("http://127.0.0.1:{}", closed_port());
    let run = ctx(
        &[
            "count",
            "--exact",
            "--retries",
            "0",
            "--anthropic-base-url",
            &down,
        ],
        &[],
        &claude(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_stderr_has("connection error");
}

/// The key the server saw, when ctx reached it named by `how` (a flag, or a variable).
fn key_seen(case: &Case, how: &str) -> Option<String> {
    let server = Server::start(vec![ok(case.name, 5)]);
    let base = (case.base)(&server);
    let mut args = vec!["count", "--exact"];
    let mut env: Vec<(&str, &str)> = vec![(case.key_var, KEY)];
    if how == "flag" {
        args.extend([case.flag, &base]);
    } else {
        env.push((how, &base));
    }
    let run = ctx(&args, &env, &(case.input)());
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_never_shows(KEY, &[]);
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "{}: {}", case.name, run.stderr);
    seen[0].key().map(str::to_string)
}

#[test]
fn keys_are_never_sent_to_a_base_url_they_were_not_set_for() {
    for case in CASES {
        // A flag or ctx's own variable names a server: the provider's key stays home.
        assert_eq!(key_seen(case, "flag"), None, "{}", case.name);
        assert_eq!(key_seen(case, case.ctx_var), None, "{}", case.name);
        // The provider's own variable names the server it was set for: the key goes there.
        assert_eq!(
            key_seen(case, case.sdk_var).as_deref(),
            Some(KEY),
            "{}",
            case.name
        );
        // A flag beats the provider's variable, and the key does not follow it.
        let decoy = Server::start(vec![]);
        let server = Server::start(vec![ok(case.name, 5)]);
        let run = ctx(
            &["count", "--exact", case.flag, &(case.base)(&server)],
            &[(case.sdk_var, &(case.base)(&decoy)), (case.key_var, KEY)],
            &(case.input)(),
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(decoy.seen().is_empty());
        assert_eq!(server.seen()[0].key(), None, "{}", case.name);
    }
    // GOOGLE_API_KEY, which Google's SDK prefers to GEMINI_API_KEY, goes the same way.
    let server = Server::start(vec![ok("gemini", 5)]);
    let run = ctx(
        &["count", "--exact"],
        &[
            ("GOOGLE_GEMINI_BASE_URL", &server.root()),
            ("GOOGLE_API_KEY", KEY),
            ("GEMINI_API_KEY", "other-key"),
        ],
        &gemini(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.seen()[0].header("x-goog-api-key"), Some(KEY));
}

#[test]
fn a_refusal_for_want_of_a_withheld_key_says_why() {
    let case = &CASES[0];
    let server = Server::start(vec![Reply::Send(
        401,
        vec![],
        r#"{"type":"error","error":{"type":"authentication_error","message":"x-api-key header is required"}}"#.into(),
    )]);
    let run = ctx(
        &["count", "--exact", "--anthropic-base-url", &server.root()],
        &[(case.key_var, KEY)],
        &claude(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_stderr_has("x-api-key header is required");
    run.assert_stderr_has(
        "ANTHROPIC_API_KEY is sent only to https://api.anthropic.com and to ANTHROPIC_BASE_URL",
    );
    run.assert_never_shows(KEY, &[]);
}

#[test]
fn no_key_for_a_providers_own_api_asks_nothing() {
    for (input, var) in [
        (claude(), "ANTHROPIC_API_KEY"),
        (gemini(), "GOOGLE_API_KEY or GEMINI_API_KEY"),
        (openai(), "OPENAI_API_KEY"),
    ] {
        let run = ctx(&["count", "--exact"], &[], &input);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stderr.contains(&format!("(set {var})")),
            "{}",
            run.stderr
        );
        assert_eq!(run.json()["source"], "ctx");
    }
}

#[test]
fn credentials_in_a_base_url_are_basic_auth_and_never_printed() {
    let server = Server::start(vec![Reply::Send(500, vec![], "{}".into())]);
    let base = format!("http://proxy-user:pw-secret-4321@127.0.0.1:{}", server.port);
    let run = ctx(
        &["count", "--exact", "--retries", "0", "--report", "-"],
        &[("ANTHROPIC_BASE_URL", &base), ("ANTHROPIC_API_KEY", KEY)],
        &claude(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let seen = &server.seen()[0];
    assert!(seen.header("authorization").unwrap().starts_with("Basic "));
    assert_eq!(seen.header("x-api-key"), Some(KEY));
    run.assert_stderr_has("http://[redacted]@127.0.0.1");
    run.assert_never_shows("pw-secret-4321", &[]);
    run.assert_never_shows(KEY, &[]);
    // A bad base URL is a usage error that does not repeat it.
    let run = ctx(
        &["count", "--exact"],
        &[("ANTHROPIC_BASE_URL", "user:pw-secret-4321@host/v1")],
        &claude(),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.starts_with("ctx: ANTHROPIC_BASE_URL: "),
        "{}",
        run.stderr
    );
    run.assert_never_shows("pw-secret-4321", &[]);
}

#[test]
fn redirects_are_not_followed() {
    let elsewhere = Server::start(vec![ok("anthropic", 1)]);
    let target = format!("{}/v1/messages/count_tokens", elsewhere.root());
    let server = Server::start(vec![redirect(307, &target)]);
    let run = exact(&CASES[0], &server, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_stderr_has("does not follow redirects");
    assert!(elsewhere.seen().is_empty(), "the redirect was followed");
}

#[test]
fn nothing_touches_the_network_without_exact() {
    let server = Server::start(vec![]);
    let live = server.root();
    let down = format!("http://127.0.0.1:{}", closed_port());
    for base in [live.as_str(), down.as_str(), "not a url"] {
        let env = [
            ("ANTHROPIC_BASE_URL", base),
            ("CTX_ANTHROPIC_BASE_URL", base),
            ("GOOGLE_GEMINI_BASE_URL", base),
            ("CTX_GEMINI_BASE_URL", base),
            ("OPENAI_BASE_URL", base),
            ("CTX_OPENAI_BASE_URL", base),
            ("ANTHROPIC_API_KEY", KEY),
            ("GEMINI_API_KEY", KEY),
            ("OPENAI_API_KEY", KEY),
        ];
        for input in [claude(), gemini(), openai()] {
            let quiet = ctx(&["count"], &[], &input);
            for extra in [&[][..], &["--exact=off"][..]] {
                let mut args = vec!["count"];
                args.extend_from_slice(extra);
                let run = ctx(&args, &env, &input);
                assert_eq!(run.code, 0, "{}", run.stderr);
                assert_eq!(run.stdout, quiet.stdout, "the output does not change");
                assert_eq!(run.stderr, quiet.stderr);
                assert!(run.json().get("source").is_none());
            }
        }
    }
    assert!(
        server.seen().is_empty(),
        "a request was sent without --exact"
    );
}

#[test]
fn documents_counted_exactly_offline_ask_nothing() {
    let server = Server::start(vec![]);
    let run = ctx(
        &["count", "--exact=required"],
        &[("OPENAI_BASE_URL", &server.base()), ("OPENAI_API_KEY", KEY)],
        &read("tests/data/cookbook_chat.json"),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    assert_eq!(out["exact"], true);
    assert_eq!(out["source"], "ctx");
    assert!(server.seen().is_empty());
}

#[test]
fn documents_no_provider_counts_fall_back_or_fail() {
    let llama = r#"{"model": "llama3.1:8b", "messages": [{"role": "user", "content": "hi"}]}"#;
    let run = ctx(&["count", "--exact"], &[], llama);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_stderr_has("no provider counting endpoint");
    let run = ctx(&["count", "--exact=required"], &[], llama);
    assert_eq!(run.code, 4, "{}", run.stderr);
    // A conversion that cannot be faithful asks nothing: an image by URL for Gemini.
    let server = Server::start(vec![]);
    let doc = json!({"model": "gemini-2.5-pro", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]});
    let run = ctx(
        &["count", "--exact"],
        &[
            ("GOOGLE_GEMINI_BASE_URL", &server.root()),
            ("GEMINI_API_KEY", KEY),
        ],
        &doc.to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_stderr_has("an image by URL cannot be sent");
    assert!(server.seen().is_empty());
}

#[test]
fn the_budget_gate_uses_the_providers_count() {
    let case = &CASES[0];
    let estimate = ctx(&["count"], &[], &claude()).json()["tokens"]
        .as_u64()
        .unwrap();
    let server = Server::start(vec![ok("anthropic", estimate + 100)]);
    let budget = (estimate + 50).to_string();
    let run = ctx(
        &["count", "--exact", "--budget", &budget, "--output", "table"],
        &[(case.sdk_var, &server.root()), (case.key_var, KEY)],
        &claude(),
    );
    assert_eq!(
        run.code, 1,
        "over the budget by the provider's count: {}",
        run.stderr
    );
    assert!(
        run.stdout.contains("exact: counted by anthropic"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains(&format!("estimate   {estimate} (ctx's own count")),
        "{}",
        run.stdout
    );
}

#[test]
fn a_batch_keeps_its_order_with_parallel_requests() {
    // The server's count is the length of the first message's text, so that each answer
    // belongs to its document whatever order the requests come in.
    let respond = || {
        Reply::Respond(Box::new(|seen: &Seen| {
            let text = seen.body["messages"][0]["content"].as_str().unwrap_or("");
            (200, json!({"input_tokens": text.len()}).to_string())
        }))
    };
    let texts = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff"];
    let server = Server::start(texts.iter().map(|_| respond()).collect());
    let batch: String = texts
        .iter()
        .map(|t| {
            json!({"model": "claude-haiku-4-5", "system": "s", "messages": [{"role": "user", "content": t}]})
                .to_string()
                + "\n"
        })
        .collect();
    let run = ctx(
        &["count", "--exact", "-j", "3", "--output", "total"],
        &[
            ("ANTHROPIC_BASE_URL", &server.root()),
            ("ANTHROPIC_API_KEY", KEY),
        ],
        &batch,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "1\n2\n3\n4\n5\n6\n");
    assert_eq!(server.seen().len(), texts.len(), "one request per document");
}

/// A fresh directory under the target directory.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("exact-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn an_implicit_ctx_toml_cannot_turn_exact_on_or_name_a_provider() {
    let cwd = scratch("implicit");
    let home = scratch("implicit-home");
    let server = Server::start(vec![]);
    let url = server.root();
    // `ctx count --profile p ARGS` of the Anthropic agent against `base`, in `cwd`, whose
    // ctx.toml holds `[profile.p]` with `profile`.
    let count_in = |profile: &str, base: &str, args: &[&str]| {
        std::fs::write(cwd.join("ctx.toml"), format!("[profile.p]\n{profile}\n")).unwrap();
        isolated::command()
            .current_dir(&cwd)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", &home)
            .env("ANTHROPIC_BASE_URL", base)
            .env("ANTHROPIC_API_KEY", KEY)
            .args(["count", "--profile", "p"])
            .args(args)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agent_anthropic.json"))
            .output()
            .unwrap()
    };
    let run_in = |profile: &str, args: &[&str]| count_in(profile, &url, args);
    for (line, key) in [
        ("exact = true", "exact"),
        ("exact = \"required\"", "exact"),
        ("exact = \"fallback\"", "exact"),
        (
            &*format!("anthropic_base_url = \"{url}\""),
            "anthropic_base_url",
        ),
        (&*format!("gemini-base-url = \"{url}\""), "gemini-base-url"),
        (&*format!("openai_base_url = \"{url}\""), "openai_base_url"),
    ] {
        let out = run_in(line, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{line}: {err}");
        assert!(
            err.contains(&format!("[profile.p] {key}: not honoured")),
            "{line}: {err}"
        );
    }
    // `off`, and thresholds, are fine; and --exact=off beats a trusted profile's `exact`.
    let out = run_in("exact = \"off\"\ntimeout = 5", &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        server.seen().is_empty(),
        "an implicit profile reached the server"
    );
    // Named with --config, the same file is honoured.
    let trusted = Server::start(vec![ok("anthropic", 42)]);
    let named = ["--config", "ctx.toml"];
    let out = count_in(
        "exact = true",
        &trusted.root(),
        &[&named[..], &["--output", "total"]].concat(),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "42\n");
    let out = count_in(
        "exact = true",
        &trusted.root(),
        &[&named[..], &["--exact=off", "-q"]].concat(),
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(trusted.seen().len(), 1, "--exact=off asked nothing");
}

/// A Responses body goes to OpenAI's `responses/input_tokens` as it is: its items, instructions,
/// tools and reasoning, without the fields that only shape the reply (`store`, `stream`,
/// `max_output_tokens`); a chained body's server state goes too, so the provider counts it.
#[test]
fn a_responses_body_is_counted_by_openai_as_it_is() {
    let input = read("tests/exact/responses.input.json");
    let server = Server::start(vec![ok("openai", 321)]);
    let env = [
        ("OPENAI_BASE_URL", server.base()),
        ("OPENAI_API_KEY", KEY.to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = ctx(
        &["count", "--exact", "--timeout", "2", "--retries", "1"],
        &env,
        &input,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    assert_eq!(
        (out["tokens"].as_u64(), out["source"].as_str()),
        (Some(321), Some("openai"))
    );
    let seen = server.seen();
    golden("responses.request.json", &shown(&seen[0]));
    let mut chained: Value = serde_json::from_str(&input).unwrap();
    chained["previous_response_id"] = json!("resp_1");
    let server = Server::start(vec![ok("openai", 999)]);
    let env = [
        ("OPENAI_BASE_URL", server.base()),
        ("OPENAI_API_KEY", KEY.to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = ctx(&["count", "--exact"], &env, &chained.to_string());
    assert_eq!(run.json()["tokens"], 999, "{}", run.stderr);
    assert_eq!(server.seen()[0].body["previous_response_id"], "resp_1");
    run.assert_never_shows(KEY, &[]);
}
