//! `crate::llm` against a scripted HTTP/1.1 server on 127.0.0.1 started by each test: no network.

use super::scripted;

use std::thread;
use std::time::Duration;

use crate::llm::{BaseUrl, ChatRequest, Endpoint, LlmError, chat};
use scripted::{Reply, Seen, Server, ok, rate_limited, redirect};
use serde_json::json;

/// The server's base URL, written with a trailing slash (ctx trims it).
fn url(server: &Server) -> BaseUrl {
    BaseUrl::parse(&format!("{}/", server.base())).unwrap()
}

fn endpoint(server: &Server, key: Option<&str>, retries: u32) -> Endpoint {
    Endpoint {
        base_url: url(server),
        api_key: key.map(str::to_string),
        timeout: Duration::from_millis(300),
        retries,
        max_backoff: Duration::from_millis(50),
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "gpt-test".into(),
        messages: vec![json!({"role": "user", "content": "summarize this"})],
        max_tokens: 500,
    }
}

fn fail(script: Vec<Reply>, retries: u32) -> (LlmError, Vec<Seen>) {
    let server = Server::start(script);
    let err = chat(&endpoint(&server, None, retries), &request()).unwrap_err();
    assert!(!err.message.contains('\n'), "one line: {err}");
    (err, server.seen())
}

/// A first attempt answered with `first` is retried (`retries` allowed), and the second reply
/// is the answer.
fn recovers_after(first: Reply, retries: u32, text: &str) {
    let server = Server::start(vec![first, ok(text)]);
    let reply = chat(&endpoint(&server, None, retries), &request()).unwrap();
    assert_eq!(reply.text, text);
    assert_eq!(reply.attempts, 2);
    assert_eq!(server.seen().len(), 2);
}

#[test]
fn success_posts_the_request_and_returns_the_text() {
    let server = Server::start(vec![ok("the summary")]);
    let reply = chat(&endpoint(&server, Some("sk-test-key"), 2), &request()).unwrap();
    assert_eq!(reply.text, "the summary");
    assert_eq!(reply.model.as_deref(), Some("served-model"));
    assert_eq!(reply.attempts, 1);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].header("authorization"), Some("Bearer sk-test-key"));
    assert!(
        seen[0]
            .header("content-type")
            .is_some_and(|c| c.starts_with("application/json"))
    );
    assert_eq!(
        seen[0].body,
        json!({
            "model": "gpt-test",
            "messages": [{"role": "user", "content": "summarize this"}],
            "max_tokens": 500,
        })
    );
}

#[test]
fn no_authorization_header_without_a_key() {
    let server = Server::start(vec![ok("fine")]);
    chat(&endpoint(&server, None, 0), &request()).unwrap();
    assert_eq!(server.seen()[0].header("authorization"), None);
}

#[test]
fn finish_reason_length_is_accepted() {
    let body =
        json!({"choices": [{"message": {"content": "cut short"}, "finish_reason": "length"}]});
    let server = Server::start(vec![Reply::Send(200, vec![], body.to_string())]);
    let reply = chat(&endpoint(&server, None, 0), &request()).unwrap();
    assert_eq!(reply.text, "cut short");
    assert_eq!(reply.model, None);
    assert!(reply.truncated, "finish_reason length is reported");
    let server = Server::start(vec![ok("whole")]);
    let reply = chat(&endpoint(&server, None, 0), &request()).unwrap();
    assert!(!reply.truncated);
}

#[test]
fn rate_limit_with_retry_after_is_retried() {
    let limited = rate_limited("0");
    recovers_after(limited, 2, "after the wait");
}

#[test]
fn retry_after_is_capped_by_max_backoff() {
    let limited = Reply::Send(429, vec![("Retry-After", "3600")], "{}".into());
    let server = Server::start(vec![limited, ok("soon")]);
    let started = std::time::Instant::now();
    chat(&endpoint(&server, None, 1), &request()).unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn server_error_then_success() {
    recovers_after(Reply::Send(500, vec![], "oops".into()), 2, "second time");
}

#[test]
fn server_error_every_time_fails_after_all_attempts() {
    let script = (0..5)
        .map(|_| Reply::Send(500, vec![], r#"{"error":{"message":"boom"}}"#.into()))
        .collect();
    let (err, seen) = fail(script, 2);
    assert_eq!(seen.len(), 3);
    assert!(err.message.contains("HTTP 500"), "{err}");
    assert!(err.message.contains("after 3 attempts"), "{err}");
    assert!(err.message.contains("boom"), "{err}");
    assert!(err.message.contains("/v1/chat/completions"), "{err}");
}

#[test]
fn hang_past_the_timeout_then_success() {
    recovers_after(Reply::Hang(1000), 1, "woke up");
}

#[test]
fn hang_every_time_is_a_timeout() {
    let (err, seen) = fail(vec![Reply::Hang(1000), Reply::Hang(1000)], 1);
    assert_eq!(seen.len(), 2);
    assert!(err.message.contains("timeout"), "{err}");
    assert!(err.message.contains("after 2 attempts"), "{err}");
}

#[test]
fn closed_connection_is_retried() {
    recovers_after(Reply::Close, 1, "reconnected");
}

#[test]
fn malformed_json_is_an_error() {
    let (err, seen) = fail(vec![Reply::Send(200, vec![], "not json at all".into())], 2);
    assert_eq!(seen.len(), 1);
    assert!(err.message.contains("malformed reply"), "{err}");
}

#[test]
fn no_choices_is_an_error() {
    let (err, _) = fail(
        vec![Reply::Send(200, vec![], r#"{"choices":[]}"#.into())],
        0,
    );
    assert!(err.message.contains("malformed reply"), "{err}");
}

#[test]
fn empty_content_is_an_error_not_a_summary() {
    let (err, _) = fail(vec![ok("")], 0);
    assert!(err.message.contains("empty reply"), "{err}");
    let (err, _) = fail(vec![ok("  \n ")], 0);
    assert!(err.message.contains("empty reply"), "{err}");
}

#[test]
fn client_error_is_not_retried_and_shows_the_server_message() {
    let body =
        r#"{"error":{"message":"model 'gpt-test' does not exist","type":"invalid_request_error"}}"#;
    let (err, seen) = fail(vec![Reply::Send(400, vec![], body.into()), ok("never")], 3);
    assert_eq!(seen.len(), 1);
    assert!(err.message.contains("HTTP 400"), "{err}");
    assert!(
        err.message.contains("model 'gpt-test' does not exist"),
        "{err}"
    );
}

#[test]
fn long_server_messages_are_shortened() {
    let body = "x".repeat(5000);
    let (err, _) = fail(vec![Reply::Send(400, vec![], body)], 0);
    assert!(err.message.len() < 400, "{err}");
}

#[test]
fn connection_refused_is_an_error() {
    let port = scripted::closed_port();
    let endpoint = Endpoint {
        base_url: BaseUrl::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap(),
        api_key: None,
        timeout: Duration::from_millis(300),
        retries: 1,
        max_backoff: Duration::from_millis(10),
    };
    let err = chat(&endpoint, &request()).unwrap_err();
    assert!(err.message.contains("connection"), "{err}");
    assert!(err.message.contains("after 2 attempts"), "{err}");
}

#[test]
fn the_key_never_appears_in_errors() {
    let key = "sk-very-secret-0123456789";
    let echo = || Reply::Send(500, vec![], r#"{"error":{"message":"got {auth}"}}"#.into());
    let server = Server::start(vec![echo(), echo()]);
    let err = chat(&endpoint(&server, Some(key), 1), &request()).unwrap_err();
    assert!(err.message.contains("HTTP 500"), "{err}");
    assert!(!err.message.contains(key), "{err}");
    assert!(!format!("{err:?}").contains(key));
    // The echo really carried the key, so the scrubbing was tested.
    assert_eq!(
        server.seen()[0].header("authorization"),
        Some(format!("Bearer {key}").as_str())
    );
}

#[test]
fn the_query_string_of_the_base_url_stays_at_the_end() {
    let server = Server::start(vec![ok("azure")]);
    let mut e = endpoint(&server, None, 0);
    e.base_url = BaseUrl::parse(&format!(
        "http://127.0.0.1:{}/openai/deployments/d?api-version=2024-06-01",
        server.port
    ))
    .unwrap();
    chat(&e, &request()).unwrap();
    assert_eq!(
        server.seen()[0].path,
        "/openai/deployments/d/chat/completions?api-version=2024-06-01"
    );
}

#[test]
fn credentials_in_the_url_are_basic_auth_and_never_in_errors() {
    let echo = || Reply::Send(500, vec![], r#"{"error":{"message":"got {auth}"}}"#.into());
    let server = Server::start(vec![echo()]);
    let mut e = endpoint(&server, None, 0);
    e.base_url = BaseUrl::parse(&format!(
        "http://alice:s3cret-pass@127.0.0.1:{}/v1?api-key=k-0123456789",
        server.port
    ))
    .unwrap();
    let err = chat(&e, &request()).unwrap_err();
    let seen = server.seen();
    // "alice:s3cret-pass" in base64.
    assert_eq!(
        seen[0].header("authorization"),
        Some("Basic YWxpY2U6czNjcmV0LXBhc3M=")
    );
    assert_eq!(seen[0].path, "/v1/chat/completions?api-key=k-0123456789");
    assert!(err.message.contains("HTTP 500"), "{err}");
    for secret in [
        "alice",
        "s3cret",
        "YWxpY2U6czNjcmV0LXBhc3M=",
        "k-0123456789",
    ] {
        assert!(!err.message.contains(secret), "{secret}: {err}");
        assert!(!format!("{e:?}").contains(secret), "{secret}: {e:?}");
    }
    assert!(err.message.contains("[redacted]"), "{err}");
}

#[test]
fn redirects_are_not_followed() {
    let other = Server::start(vec![ok("stolen")]);
    let target = format!("{}/v1/chat/completions?key=abcdef", other.root());
    for status in [301, 302, 303, 307, 308] {
        let server = Server::start(vec![redirect(status, &target), ok("never")]);
        let err = chat(&endpoint(&server, Some("sk-redirected-key"), 2), &request()).unwrap_err();
        assert!(err.message.contains(&format!("HTTP {status}")), "{err}");
        assert!(err.message.contains("redirect"), "{err}");
        assert!(!err.message.contains("abcdef"), "{err}");
        assert_eq!(server.seen().len(), 1, "a redirect is not retried");
    }
    thread::sleep(Duration::from_millis(100));
    assert!(
        other.seen().is_empty(),
        "the redirect target received nothing"
    );
}

#[cfg(feature = "cli")]
#[test]
fn env_and_endpoint_debug_redact_keys_and_credentials() {
    let env = crate::cmd::Env {
        ctx_api_key: Some("sk-ctx-secret-1".into()),
        openai_api_key: Some("sk-openai-secret-2".into()),
        ctx_base_url: Some("http://u:url-secret-3@h/v1".into()),
        openai_base_url: Some("https://h/v1?key=url-secret-4".into()),
        ..Default::default()
    };
    let debug = format!("{env:?}");
    for secret in [
        "sk-ctx-secret-1",
        "sk-openai-secret-2",
        "url-secret-3",
        "url-secret-4",
    ] {
        assert!(!debug.contains(secret), "{debug}");
    }
    let server = Server::start(vec![]);
    let debug = format!("{:?}", endpoint(&server, Some("sk-endpoint-secret"), 0));
    assert!(!debug.contains("sk-endpoint-secret"), "{debug}");
}
