//! The HTTP client for OpenAI-compatible `/chat/completions` endpoints, and the only module of ctx
//! that talks HTTP. One call of [`chat`] builds one `ureq::Agent` with a global timeout, posts the
//! request, retries 429, 5xx, timeouts and connection errors with capped exponential backoff
//! (honouring `Retry-After`), reads error bodies itself so the server's message reaches the user,
//! and accepts only a reply with non-empty text: an empty or malformed reply is an error, never a
//! summary. The API key never appears in any error text.

use std::fmt;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Where and how to call the model.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Base URL including the version path, e.g. `http://localhost:11434/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer KEY` when set.
    pub api_key: Option<String>,
    /// Global timeout of one attempt, connection to last byte of the body.
    pub timeout: Duration,
    /// How many more attempts after the first one, for retryable failures.
    pub retries: u32,
    /// Cap on every wait between attempts, `Retry-After` included.
    pub max_backoff: Duration,
}

/// One chat completion request.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub model: String,
    /// OpenAI-shaped messages, sent as they are.
    pub messages: Vec<Value>,
    pub max_tokens: u32,
}

/// A successful reply.
#[derive(Debug, Clone)]
pub struct ChatReply {
    /// `choices[0].message.content`, never empty after trimming.
    pub text: String,
    /// The model the server says answered, when it says.
    pub model: Option<String>,
    /// Attempts made, the successful one included.
    pub attempts: u32,
    /// Wall time of the whole call, retries and waits included.
    pub latency: Duration,
}

/// Why a call failed: one line, never containing the API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmError {
    pub message: String,
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LlmError {}

/// The first wait between attempts; it doubles each time up to `max_backoff`.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// How much of a server's error message is kept.
const MAX_SERVER_MESSAGE: usize = 200;

/// What one attempt came to.
enum Attempt {
    Done(ChatReply),
    /// Worth another attempt; `wait` is the server's `Retry-After`, if any.
    Retry {
        why: String,
        wait: Option<Duration>,
    },
    Fail(String),
}

/// Posts `req` to `{base_url}/chat/completions`, retrying as [`Endpoint`] says.
pub fn chat(endpoint: &Endpoint, req: &ChatRequest) -> Result<ChatReply, LlmError> {
    let url = format!(
        "{}/chat/completions",
        endpoint.base_url.trim_end_matches('/')
    );
    // Only `max_tokens`: every OpenAI-compatible server accepts it, while the newer
    // `max_completion_tokens` is rejected by some of them.
    let body = json!({
        "model": req.model,
        "messages": req.messages,
        "max_tokens": req.max_tokens,
    });
    let body = serde_json::to_vec(&body).map_err(|e| LlmError {
        message: format!("cannot encode the request: {e}"),
    })?;
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(endpoint.timeout))
        .http_status_as_error(false)
        .build();
    let agent: ureq::Agent = config.into();

    let started = Instant::now();
    let mut attempts = 0;
    let mut backoff = FIRST_BACKOFF;
    loop {
        attempts += 1;
        match attempt(&agent, endpoint, &url, &body) {
            Attempt::Done(mut reply) => {
                reply.attempts = attempts;
                reply.latency = started.elapsed();
                return Ok(reply);
            }
            Attempt::Retry { wait, .. } if attempts <= endpoint.retries => {
                thread::sleep(wait.unwrap_or(backoff).min(endpoint.max_backoff));
                backoff = backoff.saturating_mul(2);
            }
            Attempt::Retry { why, .. } | Attempt::Fail(why) => {
                return Err(failure(endpoint, &url, &why, attempts));
            }
        }
    }
}

/// One POST, classified.
fn attempt(agent: &ureq::Agent, endpoint: &Endpoint, url: &str, body: &[u8]) -> Attempt {
    let mut request = agent
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json");
    if let Some(key) = &endpoint.api_key {
        request = request.header("Authorization", format!("Bearer {key}"));
    }
    let response = match request.send(body) {
        Ok(response) => response,
        Err(e) => return transport_error(endpoint, &e),
    };
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let text = match response.into_body().read_to_string() {
        Ok(text) => text,
        Err(e) => return transport_error(endpoint, &e),
    };
    if !(200..300).contains(&status) {
        let why = format!("HTTP {status}: {}", server_message(&text));
        return if status == 429 || status >= 500 {
            Attempt::Retry {
                why,
                wait: retry_after,
            }
        } else {
            Attempt::Fail(why)
        };
    }
    match parse_reply(&text) {
        Ok(reply) => Attempt::Done(reply),
        Err(why) => Attempt::Fail(why),
    }
}

/// A failure before a whole response was read: timeouts and connection errors are retried.
fn transport_error(endpoint: &Endpoint, e: &ureq::Error) -> Attempt {
    let timed_out = match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => io.kind() == std::io::ErrorKind::TimedOut,
        _ => false,
    };
    if timed_out {
        return Attempt::Retry {
            why: format!("timeout ({:?})", endpoint.timeout),
            wait: None,
        };
    }
    match e {
        ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::Protocol(_) => {
            Attempt::Retry {
                why: format!("connection error: {e}"),
                wait: None,
            }
        }
        _ => Attempt::Fail(e.to_string()),
    }
}

/// Checks a 2xx body: JSON with a non-empty `choices[0].message.content` string.
fn parse_reply(text: &str) -> Result<ChatReply, String> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("malformed reply: not JSON ({e}): {}", shorten(text)))?;
    let content = value
        .get("choices")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("message"))
        .and_then(|m| m.get("content"));
    let content = match content {
        Some(Value::String(s)) => s,
        Some(Value::Null) | None if value.get("choices").is_some_and(|c| c.get(0).is_some()) => {
            return Err("empty reply: no content in choices[0].message".to_string());
        }
        _ => {
            return Err(format!(
                "malformed reply: no choices[0].message.content: {}",
                shorten(text)
            ));
        }
    };
    if content.trim().is_empty() {
        return Err("empty reply".to_string());
    }
    Ok(ChatReply {
        text: content.clone(),
        model: value
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string),
        attempts: 0,
        latency: Duration::ZERO,
    })
}

/// The useful part of an error body: `error.message`, `error` or `message` when it is JSON,
/// else the body itself, on one line and shortened.
fn server_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        v.get("error")
            .and_then(|e| e.get("message").or(Some(e)))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
    });
    let text = found.unwrap_or(body);
    if text.trim().is_empty() {
        "(empty body)".to_string()
    } else {
        shorten(text)
    }
}

/// Whitespace collapsed to single spaces and cut to about [`MAX_SERVER_MESSAGE`] characters.
fn shorten(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(MAX_SERVER_MESSAGE) {
        Some((at, _)) => format!("{}...", &one_line[..at]),
        None => one_line,
    }
}

/// The final error: what the last attempt did and how many attempts there were, key scrubbed.
fn failure(endpoint: &Endpoint, url: &str, why: &str, attempts: u32) -> LlmError {
    let mut message = if attempts > 1 {
        format!("POST {url}: {why} after {attempts} attempts")
    } else {
        format!("POST {url}: {why}")
    };
    if let Some(key) = endpoint.api_key.as_deref().filter(|k| !k.is_empty()) {
        message = message.replace(key, "[redacted]");
        // A shortened message may end in a prefix of the key.
        for len in (4..key.len()).rev() {
            if let Some(prefix) = key.get(..len)
                && let Some(stripped) = message.strip_suffix(&format!("{prefix}..."))
            {
                message = format!("{stripped}[redacted]...");
                break;
            }
        }
    }
    LlmError { message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(key: Option<&str>) -> Endpoint {
        Endpoint {
            base_url: "http://x/v1".into(),
            api_key: key.map(str::to_string),
            timeout: Duration::from_secs(1),
            retries: 0,
            max_backoff: Duration::ZERO,
        }
    }

    #[test]
    fn parse_reply_accepts_content_and_model() {
        let r = parse_reply(
            r#"{"model":"m","choices":[{"message":{"content":"hi"},"finish_reason":"length"}]}"#,
        )
        .unwrap();
        assert_eq!(r.text, "hi");
        assert_eq!(r.model.as_deref(), Some("m"));
    }

    #[test]
    fn parse_reply_rejects_empty_and_malformed() {
        assert!(
            parse_reply("nope")
                .unwrap_err()
                .starts_with("malformed reply")
        );
        assert!(
            parse_reply(r#"{"choices":[]}"#)
                .unwrap_err()
                .starts_with("malformed reply")
        );
        assert!(
            parse_reply(r#"{"choices":[{"message":{"content":" \n"}}]}"#)
                .unwrap_err()
                .starts_with("empty reply")
        );
        assert!(
            parse_reply(r#"{"choices":[{"message":{"content":null}}]}"#)
                .unwrap_err()
                .starts_with("empty reply")
        );
        assert!(
            parse_reply(r#"{"choices":[{"message":{"content":5}}]}"#)
                .unwrap_err()
                .starts_with("malformed reply")
        );
    }

    #[test]
    fn server_message_prefers_error_message_and_is_short() {
        assert_eq!(
            server_message(r#"{"error":{"message":"bad  model\n x"}}"#),
            "bad model x"
        );
        assert_eq!(server_message(r#"{"error":"nope"}"#), "nope");
        assert_eq!(server_message(""), "(empty body)");
        let long = "é".repeat(500);
        assert_eq!(
            server_message(&long).chars().count(),
            MAX_SERVER_MESSAGE + 3
        );
    }

    #[test]
    fn failure_scrubs_the_key_even_when_cut() {
        let e = failure(
            &endpoint(Some("sk-secret-123")),
            "u",
            "HTTP 500: Bearer sk-secret-123",
            1,
        );
        assert!(!e.message.contains("sk-secret"), "{e}");
        let e = failure(
            &endpoint(Some("sk-secret-123")),
            "u",
            "HTTP 500: Bearer sk-secr...",
            1,
        );
        assert!(!e.message.contains("sk-secr"), "{e}");
        assert_eq!(
            failure(&endpoint(None), "u", "x", 3).message,
            "POST u: x after 3 attempts"
        );
    }
}
