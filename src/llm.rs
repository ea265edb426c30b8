//! The HTTP client of ctx, and the only module that talks HTTP: JSON POSTs to the summarizer's
//! OpenAI-compatible `/chat/completions` endpoint ([`chat`]) and to the providers' token-counting
//! endpoints (`count --exact`, through [`post`]). A [`Client`] holds one `ureq::Agent` with a
//! global timeout, whose connections its calls share; a call posts the request, retries 429,
//! 5xx, timeouts and connection errors with capped exponential backoff (honouring
//! `Retry-After`, in seconds or as an HTTP date), reads error bodies itself so the server's
//! message reaches the user, and accepts only a reply its caller can read: an empty or malformed
//! reply is an error, never a result. The API key never appears in any error text.
//!
//! It also owns the base URL ([`BaseUrl`]): checked once, the request's path put before its
//! query string, credentials written into it (`user:password@`) sent as HTTP Basic auth, and
//! printed only with those credentials and every query value but `api-version` redacted.
//! Redirects are never followed: a 3xx reply is an error that names where it pointed (redacted),
//! since following one would carry the conversation, and maybe the key, to another server.

use std::fmt;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// What replaces a secret wherever one would be printed.
const REDACTED: &str = "[redacted]";

/// The only query parameter whose value is printed: Azure's `api-version`, never a secret.
const SHOWN_QUERY_PARAMS: &[&str] = &["api-version"];

/// A base URL as given (a flag, a profile or the environment), not yet checked. It may hold
/// credentials, so its `Debug` never shows it; [`BaseUrl::parse`] checks it.
#[cfg(feature = "cli")]
#[derive(Clone, Default, PartialEq, Eq)]
pub struct UrlArg(pub String);

#[cfg(feature = "cli")]
impl From<String> for UrlArg {
    fn from(s: String) -> UrlArg {
        UrlArg(s)
    }
}

#[cfg(feature = "cli")]
impl fmt::Debug for UrlArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match BaseUrl::parse(&self.0) {
            Ok(url) => write!(f, "UrlArg({url})"),
            Err(_) => write!(f, "UrlArg({REDACTED})"),
        }
    }
}

/// A checked `http(s)://` base URL including the version path, e.g. `http://localhost:11434/v1`
/// or `https://x.openai.azure.com/openai/deployments/d?api-version=2024-06-01`. `Display` and
/// `Debug` show it with its credentials and secret-looking query values redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct BaseUrl {
    /// `http` or `https`, lower case.
    scheme: String,
    /// `host[:port]` as written, without credentials.
    host: String,
    /// The path, without trailing slashes (`/v1`, or empty).
    path: String,
    /// The query string without its `?`, when there is one.
    query: Option<String>,
    /// `user:password@`, percent-decoded, when the URL holds credentials.
    credentials: Option<(String, String)>,
    /// The credentials as written, to scrub from error text.
    raw_credentials: Option<String>,
}

impl BaseUrl {
    /// Checks `text`. The error never repeats `text`, which may hold credentials.
    pub fn parse(text: &str) -> Result<BaseUrl, String> {
        let text = text.trim();
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(
                "expected an http:// or https:// URL, e.g. http://localhost:11434/v1".to_string(),
            );
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err("expected an http:// or https:// URL (the scheme is neither)".to_string());
        }
        // Everything after '#' stays on the client; ctx has no use for it.
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let (rest, query) = match rest.split_once('?') {
            Some((before, q)) => (before, (!q.is_empty()).then(|| q.to_string())),
            None => (rest, None),
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        let (raw_credentials, host) = match authority.rsplit_once('@') {
            Some((userinfo, host)) => ((!userinfo.is_empty()).then(|| userinfo.to_string()), host),
            None => (None, authority),
        };
        if host.is_empty() {
            return Err("the URL has no host".to_string());
        }
        let bad = |c: char| c.is_whitespace() || c.is_control() || "\\\"<>^`{|}".contains(c);
        if host.chars().any(bad) || path.chars().any(bad) {
            return Err("the URL holds spaces or characters a URL cannot hold".to_string());
        }
        // `host:port`, or `[v6 address]:port`.
        let port = match host.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((_, "")) => None,
                Some((_, after)) => Some(after.strip_prefix(':').unwrap_or("x")),
                None => return Err("the URL's [address] is not closed".to_string()),
            },
            None => host.rsplit_once(':').map(|(_, p)| p),
        };
        if port.is_some_and(|p| !p.is_empty() && p.parse::<u16>().is_err()) {
            return Err("the URL's port is not a number from 0 to 65535".to_string());
        }
        let credentials = raw_credentials.as_deref().map(|u| {
            let (user, password) = u.split_once(':').unwrap_or((u, ""));
            (percent_decode(user), percent_decode(password))
        });
        Ok(BaseUrl {
            scheme,
            host: host.to_string(),
            path: path.trim_end_matches('/').to_string(),
            query,
            credentials,
            raw_credentials,
        })
    }

    /// The URL of `tail` (e.g. `chat/completions`) under this base, its query string kept at
    /// the end; never with the credentials, which go in a header.
    pub fn join(&self, tail: &str) -> String {
        self.render(Some(tail), false)
    }

    /// [`BaseUrl::join`] as it may be printed: credentials and secret query values redacted.
    pub fn shown(&self, tail: &str) -> String {
        self.render(Some(tail), true)
    }

    fn render(&self, tail: Option<&str>, redacted: bool) -> String {
        let mut url = format!("{}://", self.scheme);
        if redacted && self.credentials.is_some() {
            url.push_str(REDACTED);
            url.push('@');
        }
        url.push_str(&self.host);
        url.push_str(&self.path);
        if let Some(tail) = tail {
            url.push('/');
            url.push_str(tail);
        }
        if let Some(q) = &self.query {
            url.push('?');
            url.push_str(&if redacted { redact_query(q) } else { q.clone() });
        }
        url
    }

    /// Whether this is OpenAI's own API (`https://api.openai.com`), where `OPENAI_API_KEY` may
    /// go whatever named the URL.
    #[cfg(feature = "cli")]
    pub fn is_openai(&self) -> bool {
        self.is_https_host("api.openai.com")
    }

    /// Whether this URL is `https://{host}` (any path, port 443 or none): a provider's own API,
    /// where that provider's key may go whatever named the URL.
    #[cfg(feature = "cli")]
    pub fn is_https_host(&self, host: &str) -> bool {
        let mine = self.host.to_ascii_lowercase();
        self.scheme == "https"
            && (mine == host || mine.strip_suffix(":443").is_some_and(|h| h == host))
    }

    /// Whether the URL holds credentials (`user:password@`).
    #[cfg(feature = "cli")]
    pub fn has_credentials(&self) -> bool {
        self.credentials.is_some()
    }

    /// The `Authorization` value for the URL's credentials: HTTP Basic auth.
    fn basic_auth(&self) -> Option<String> {
        self.credentials.as_ref().map(|(user, password)| {
            use base64::Engine as _;
            let pair = format!("{user}:{password}");
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        })
    }

    /// Texts that must not appear in anything printed: the credentials (as written, decoded and
    /// as the Basic auth value) and every query value that is not shown, as written and decoded.
    fn secrets(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(raw) = &self.raw_credentials {
            out.push(raw.clone());
        }
        if let Some((user, password)) = &self.credentials {
            out.push(format!("{user}:{password}"));
            out.push(password.clone());
            out.extend(self.basic_auth());
        }
        for (name, value) in self.query_pairs() {
            if !shown_param(name) {
                out.push(value.to_string());
                out.push(percent_decode(value));
            }
        }
        out
    }

    /// The query's `name=value` pairs (a pair without `=` is all value).
    fn query_pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.query
            .as_deref()
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').unwrap_or(("", p)))
    }
}

/// Whether a query parameter's value may be printed.
fn shown_param(name: &str) -> bool {
    SHOWN_QUERY_PARAMS
        .iter()
        .any(|s| s.eq_ignore_ascii_case(name))
}

/// A query string with every value but those of [`SHOWN_QUERY_PARAMS`] redacted.
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if shown_param(name) || value.is_empty() => pair.to_string(),
            Some((name, _)) => format!("{name}={REDACTED}"),
            None if pair.is_empty() => String::new(),
            None => REDACTED.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

impl fmt::Display for BaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(None, true))
    }
}

impl fmt::Debug for BaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BaseUrl({self})")
    }
}

/// `%XX` escapes decoded (invalid ones kept as written); not `+`, which userinfo keeps.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where and how to call the model. `Debug` redacts the key and the URL's credentials.
#[derive(Clone)]
pub struct Endpoint {
    /// Base URL including the version path, e.g. `http://localhost:11434/v1`.
    pub base_url: BaseUrl,
    /// Sent as `Authorization: Bearer KEY` when set.
    pub api_key: Option<String>,
    /// Global timeout of one attempt, connection to last byte of the body.
    pub timeout: Duration,
    /// How many more attempts after the first one, for retryable failures.
    pub retries: u32,
    /// Cap on every wait between attempts, `Retry-After` included.
    pub max_backoff: Duration,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("max_backoff", &self.max_backoff)
            .finish()
    }
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
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "read by the client's tests; no command shows it")
    )]
    pub model: Option<String>,
    /// Attempts made, the successful one included.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "read by the client's tests; no command shows it")
    )]
    pub attempts: u32,
    /// The server cut the reply short at `max_tokens` (`finish_reason: "length"`).
    pub truncated: bool,
}

/// Why a call failed: one line, never containing the API key or the URL's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmError {
    pub message: String,
    /// The HTTP status of the last reply, when there was one.
    pub status: Option<u16>,
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
enum Attempt<T> {
    Done(T),
    /// Worth another attempt; `wait` is the server's `Retry-After`, if any.
    Retry {
        why: String,
        wait: Option<Duration>,
        status: Option<u16>,
    },
    Fail {
        why: String,
        status: Option<u16>,
    },
}

/// How an endpoint's API key is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyHeader {
    /// `Authorization: Bearer KEY` (OpenAI and the servers compatible with it).
    Bearer,
    /// The key as the whole value of this header (`x-api-key`, `x-goog-api-key`).
    #[cfg_attr(
        not(feature = "cli"),
        expect(dead_code, reason = "made only by count --exact's providers")
    )]
    Named(&'static str),
}

/// One JSON POST under an endpoint's base URL.
#[derive(Debug, Clone, Copy)]
pub struct Post<'a> {
    /// The path under the base URL: `chat/completions`, `v1/messages/count_tokens`.
    pub path: &'a str,
    /// How the endpoint's key is sent.
    pub key_header: KeyHeader,
    /// Other headers, such as `anthropic-version` (never a secret: they may be printed).
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a Value,
}

/// A reply [`post`] read, with what it took.
#[derive(Debug, Clone)]
pub struct Replied<T> {
    /// What the caller's parser made of the 2xx body.
    pub value: T,
    /// Attempts made, the successful one included.
    pub attempts: u32,
}

/// Posts `req` to `{base_url}/chat/completions`, retrying as [`Endpoint`] says. One call, one
/// connection: calls that follow one another should share a [`Client`]. (The summarizer keeps
/// a [`Client`]; this is for tests.)
#[cfg(test)]
pub fn chat(endpoint: &Endpoint, req: &ChatRequest) -> Result<ChatReply, LlmError> {
    Client::new(endpoint.clone()).chat(req)
}

/// [`Client::post`] through a client of its own.
#[cfg(feature = "cli")]
pub fn post<T>(
    endpoint: &Endpoint,
    req: &Post<'_>,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Replied<T>, LlmError> {
    Client::new(endpoint.clone()).post(req, parse)
}

/// An endpoint and the HTTP agent its calls share: the calls of one client reuse its open
/// connections (keep-alive) rather than each opening its own, as a summary sent in parts and
/// then combined makes several calls in a row.
pub struct Client {
    endpoint: Endpoint,
    agent: ureq::Agent,
}

impl Client {
    pub fn new(endpoint: Endpoint) -> Client {
        // No redirects: following one would send the conversation (and the key) wherever the
        // server points; a 3xx reply is reported instead.
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(endpoint.timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .build();
        Client {
            endpoint,
            agent: config.into(),
        }
    }

    /// Posts `req` to `{base_url}/chat/completions`, retrying as [`Endpoint`] says.
    pub fn chat(&self, req: &ChatRequest) -> Result<ChatReply, LlmError> {
        // Only `max_tokens`: every OpenAI-compatible server accepts it, while the newer
        // `max_completion_tokens` is rejected by some of them.
        let body = json!({
            "model": req.model,
            "messages": req.messages,
            "max_tokens": req.max_tokens,
        });
        let post_req = Post {
            path: "chat/completions",
            key_header: KeyHeader::Bearer,
            headers: &[],
            body: &body,
        };
        let replied = self.post(&post_req, parse_reply)?;
        Ok(ChatReply {
            attempts: replied.attempts,
            ..replied.value
        })
    }

    /// Posts `req` under the endpoint's base URL, retrying 429, 5xx, timeouts and connection
    /// errors as [`Endpoint`] says, and reads a 2xx body with `parse` (whose error, like every
    /// other, ends the call: a reply the caller cannot read is not retried).
    pub fn post<T>(
        &self,
        req: &Post<'_>,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Replied<T>, LlmError> {
        let endpoint = &self.endpoint;
        let url = endpoint.base_url.join(req.path);
        let body = serde_json::to_vec(req.body).map_err(|e| LlmError {
            message: format!("cannot encode the request: {e}"),
            status: None,
        })?;
        let mut attempts: u32 = 0;
        let mut backoff = FIRST_BACKOFF;
        loop {
            attempts = attempts.saturating_add(1);
            match attempt(&self.agent, endpoint, req, &url, &body, &parse) {
                Attempt::Done(value) => {
                    return Ok(Replied { value, attempts });
                }
                Attempt::Retry { wait, .. } if attempts <= endpoint.retries => {
                    thread::sleep(wait.unwrap_or(backoff).min(endpoint.max_backoff));
                    backoff = backoff.saturating_mul(2);
                }
                Attempt::Retry { why, status, .. } | Attempt::Fail { why, status } => {
                    return Err(failure(endpoint, req.path, &why, status, attempts));
                }
            }
        }
    }
}

/// One POST, classified.
fn attempt<T>(
    agent: &ureq::Agent,
    endpoint: &Endpoint,
    req: &Post<'_>,
    url: &str,
    body: &[u8],
    parse: &impl Fn(&str) -> Result<T, String>,
) -> Attempt<T> {
    let mut request = agent
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json");
    for (name, value) in req.headers {
        request = request.header(*name, *value);
    }
    let mut authorization_taken = false;
    if let Some(key) = &endpoint.api_key {
        match req.key_header {
            KeyHeader::Bearer => {
                request = request.header("Authorization", format!("Bearer {key}"));
                authorization_taken = true;
            }
            KeyHeader::Named(name) => request = request.header(name, key.as_str()),
        }
    }
    if !authorization_taken && let Some(basic) = endpoint.base_url.basic_auth() {
        request = request.header("Authorization", basic);
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
        .and_then(|v| retry_after(v, SystemTime::now()));
    if (300..400).contains(&status) {
        let to = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map_or_else(
                || "elsewhere".to_string(),
                |l| format!("to {}", redact_location(l)),
            );
        return Attempt::Fail {
            why: format!(
                "HTTP {status}: the server redirects {to}; ctx does not follow redirects (give the final URL as the base URL)"
            ),
            status: Some(status),
        };
    }
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
                status: Some(status),
            }
        } else {
            Attempt::Fail {
                why,
                status: Some(status),
            }
        };
    }
    match parse(&text) {
        Ok(value) => Attempt::Done(value),
        Err(why) => Attempt::Fail {
            why,
            status: Some(status),
        },
    }
}

/// How long a `Retry-After` value asks to wait at `now`: a number of seconds, or an HTTP date
/// (RFC 9110's IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), a date already past meaning at
/// once. `None` when it is neither, so the usual backoff applies.
fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = http_date(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The time an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`, stands for (RFC 9110 5.6.7).
fn http_date(text: &str) -> Option<SystemTime> {
    const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (day_name, rest) = text.split_once(", ")?;
    let fields: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = fields[..] else {
        return None;
    };
    let number = |s: &str, digits: usize| -> Option<i64> {
        (s.len() == digits && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
    };
    let (day, year) = (number(day, 2)?, number(year, 4)?);
    let month = MONTHS.iter().position(|&m| m == month)? as i64 + 1;
    let hms: Vec<&str> = time.split(':').collect();
    let [h, m, s] = hms[..] else {
        return None;
    };
    let (h, m, s) = (number(h, 2)?, number(m, 2)?, number(s, 2)?);
    if !DAYS.contains(&day_name) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    // Days since 1970-01-01 in the proleptic Gregorian calendar, counting years from March so
    // that the leap day ends a year.
    let (y, mp) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let days = y.div_euclid(4) - y.div_euclid(100) + y.div_euclid(400) + y * 365;
    let days = days + (153 * mp + 2) / 5 + day - 1 - 719_468;
    let seconds = days * 86_400 + h * 3600 + m * 60 + s;
    match u64::try_from(seconds) {
        Ok(after) => UNIX_EPOCH.checked_add(Duration::from_secs(after)),
        Err(_) => UNIX_EPOCH.checked_sub(Duration::from_secs(seconds.unsigned_abs())),
    }
}

/// A redirect's `Location` for a message: an absolute URL redacted like a base URL; a relative
/// one with its query values redacted.
fn redact_location(location: &str) -> String {
    if location.contains("://") {
        return BaseUrl::parse(location)
            .map_or_else(|_| "a URL ctx cannot read".to_string(), |u| u.to_string());
    }
    let location = location.split_once('#').map_or(location, |(l, _)| l);
    match location.split_once('?') {
        Some((path, q)) => format!("{}?{}", shorten(path), redact_query(q)),
        None => shorten(location),
    }
}

/// A failure before a whole response was read: timeouts and connection errors are retried.
fn transport_error<T>(endpoint: &Endpoint, e: &ureq::Error) -> Attempt<T> {
    let timed_out = match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => io.kind() == std::io::ErrorKind::TimedOut,
        _ => false,
    };
    if timed_out {
        return Attempt::Retry {
            why: format!("timeout ({:?})", endpoint.timeout),
            wait: None,
            status: None,
        };
    }
    match e {
        ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::Protocol(_) => {
            Attempt::Retry {
                why: format!("connection error: {e}"),
                wait: None,
                status: None,
            }
        }
        _ => Attempt::Fail {
            why: e.to_string(),
            status: None,
        },
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
    let finish_reason = value
        .get("choices")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("finish_reason"))
        .and_then(Value::as_str);
    Ok(ChatReply {
        truncated: matches!(finish_reason, Some("length" | "max_tokens")),
        text: content.clone(),
        model: value
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string),
        attempts: 0,
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

/// The final error: what the last attempt did and how many attempts there were, with the key,
/// the URL's credentials and its secret query values scrubbed.
fn failure(
    endpoint: &Endpoint,
    path: &str,
    why: &str,
    status: Option<u16>,
    attempts: u32,
) -> LlmError {
    let shown = endpoint.base_url.shown(path);
    let mut message = if attempts > 1 {
        format!("POST {shown}: {why} after {attempts} attempts")
    } else {
        format!("POST {shown}: {why}")
    };
    let mut secrets: Vec<String> = endpoint.base_url.secrets();
    secrets.extend(endpoint.api_key.clone());
    // Longest first, so a secret inside another is not left half-scrubbed; short ones would
    // garble the message and are no secrets worth the name.
    secrets.retain(|s| s.chars().count() >= 4);
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for secret in &secrets {
        message = scrub(&message, secret);
    }
    LlmError { message, status }
}

/// `message` with every occurrence of `secret` redacted, and a shortened message's trailing
/// prefix of it (`sk-secr...`) too.
fn scrub(message: &str, secret: &str) -> String {
    let mut message = message.replace(secret, REDACTED);
    for len in (4..secret.len()).rev() {
        if let Some(prefix) = secret.get(..len)
            && let Some(stripped) = message.strip_suffix(&format!("{prefix}..."))
        {
            message = format!("{stripped}{REDACTED}...");
            break;
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use super::*;

    fn endpoint(key: Option<&str>) -> Endpoint {
        Endpoint {
            base_url: BaseUrl::parse("http://x/v1").unwrap(),
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
            "chat/completions",
            "HTTP 500: Bearer sk-secret-123",
            Some(500),
            1,
        );
        assert!(!e.message.contains("sk-secret"), "{e}");
        assert_eq!(e.status, Some(500));
        let e = failure(
            &endpoint(Some("sk-secret-123")),
            "chat/completions",
            "HTTP 500: Bearer sk-secr...",
            None,
            1,
        );
        assert!(!e.message.contains("sk-secr"), "{e}");
        assert_eq!(
            failure(&endpoint(None), "chat/completions", "x", None, 3).message,
            "POST http://x/v1/chat/completions: x after 3 attempts"
        );
    }

    #[test]
    fn the_path_goes_before_the_query_string() {
        let azure = BaseUrl::parse(
            "https://x.openai.azure.com/openai/deployments/d?api-version=2024-06-01",
        )
        .unwrap();
        assert_eq!(
            azure.join("chat/completions"),
            "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-06-01"
        );
        // api-version is shown; it is no secret.
        assert_eq!(
            azure.shown("chat/completions"),
            azure.join("chat/completions")
        );
        let u = BaseUrl::parse("HTTP://localhost:11434/v1///#frag").unwrap();
        assert_eq!(
            u.join("chat/completions"),
            "http://localhost:11434/v1/chat/completions"
        );
        let u = BaseUrl::parse("http://[::1]:8080").unwrap();
        assert_eq!(
            u.join("chat/completions"),
            "http://[::1]:8080/chat/completions"
        );
    }

    #[test]
    fn credentials_and_query_values_are_never_shown() {
        let u = BaseUrl::parse(
            "https://al%40ice:pa%3Ass-word@proxy.example/v1?api-version=1&api-key=k-123456&token=t-abcdef&bare",
        )
        .unwrap();
        let shown = u.shown("chat/completions");
        assert_eq!(
            shown,
            "https://[redacted]@proxy.example/v1/chat/completions?api-version=1&api-key=[redacted]&token=[redacted]&[redacted]"
        );
        for text in [shown, u.to_string(), format!("{u:?}")] {
            for secret in [
                "al%40ice", "alice", "pa%3Ass", "pa:ss", "k-123456", "t-abcdef", "bare",
            ] {
                assert!(!text.contains(secret), "{text}");
            }
        }
        // The request URL carries the query but never the credentials: they become Basic auth.
        assert_eq!(
            u.join("chat/completions"),
            "https://proxy.example/v1/chat/completions?api-version=1&api-key=k-123456&token=t-abcdef&bare"
        );
        assert_eq!(
            u.basic_auth().as_deref(),
            Some("Basic YWxAaWNlOnBhOnNzLXdvcmQ=")
        );
        #[cfg(feature = "cli")]
        {
            let debug = format!("{:?}", UrlArg("http://u:secret-pw@h/v1?key=abcdef".into()));
            assert!(
                !debug.contains("secret-pw") && !debug.contains("abcdef"),
                "{debug}"
            );
            let debug = format!("{:?}", UrlArg("u:secret-pw@h/v1".into()));
            assert!(!debug.contains("secret-pw"), "{debug}");
        }
    }

    #[test]
    fn bad_urls_are_refused_without_repeating_them() {
        for bad in [
            "myhost:11434/v1",
            "u:secret-pw@myhost/v1",
            "ftp://u:secret-pw@h/v1",
            "http://u:secret-pw@/v1",
            "http://u:secret-pw@h:port/v1",
            "http://u:secret-pw@h/v 1",
            "http://[::1/v1",
        ] {
            let e = BaseUrl::parse(bad).unwrap_err();
            assert!(
                !e.contains("secret-pw") && !e.contains("myhost"),
                "{bad}: {e}"
            );
        }
    }

    #[cfg(feature = "cli")]
    #[test]
    fn a_providers_own_host_is_https_and_exactly_that_host() {
        for host in ["api.openai.com", "api.anthropic.com"] {
            let is = |u: &str| {
                let url = BaseUrl::parse(&u.replace("HOST", host)).unwrap();
                let own = url.is_https_host(host);
                if host == "api.openai.com" {
                    assert_eq!(url.is_openai(), own, "{u}");
                }
                own
            };
            assert!(is("https://HOST/v1"));
            assert!(is(&format!(
                "https://{}:443/v1",
                host.replacen("api", "API", 1)
            )));
            assert!(is("https://HOST:443/"));
            assert!(!is("http://HOST/v1"));
            assert!(!is("https://HOST:8443"));
            assert!(!is("https://HOST.evil.example/v1"));
            assert!(!is("https://evil.example/HOST/v1"));
            assert!(!is("https://HOST@evil.example/v1"));
        }
    }

    #[test]
    fn endpoint_debug_redacts_the_key() {
        let e = endpoint(Some("sk-secret-123"));
        let debug = format!("{e:?}");
        assert!(!debug.contains("sk-secret"), "{debug}");
        assert!(debug.contains("[redacted]"), "{debug}");
    }

    #[test]
    fn basic_auth_and_percent_decoding() {
        let basic = |url: &str| BaseUrl::parse(url).unwrap().basic_auth();
        assert_eq!(basic("http://h/v1"), None);
        assert_eq!(basic("http://f@h/v1").as_deref(), Some("Basic Zjo="));
        assert_eq!(basic("http://fo:o@h/v1").as_deref(), Some("Basic Zm86bw=="));
        assert_eq!(
            basic("http://martin:secret@h/v1").as_deref(),
            Some("Basic bWFydGluOnNlY3JldA==")
        );
        assert_eq!(percent_decode("a%40b%2"), "a@b%2");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }

    #[test]
    fn redirect_locations_are_redacted() {
        assert_eq!(
            redact_location("http://u:pw@other:1/v1?key=abc"),
            "http://[redacted]@other:1/v1?key=[redacted]"
        );
        assert_eq!(redact_location("/v2?token=abc"), "/v2?token=[redacted]");
    }

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        let at = |v: &str| retry_after(v, now);
        assert_eq!(at("120"), Some(Duration::from_secs(120)));
        assert_eq!(at(" 0 "), Some(Duration::ZERO));
        assert_eq!(
            at("Sun, 06 Nov 1994 08:50:07 GMT"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            at("Mon, 07 Nov 1994 08:49:37 GMT"),
            Some(Duration::from_secs(86_400))
        );
        // A date already past: at once.
        assert_eq!(at("Sun, 06 Nov 1994 08:49:36 GMT"), Some(Duration::ZERO));
        assert_eq!(at("Thu, 01 Jan 1970 00:00:00 GMT"), Some(Duration::ZERO));
        assert_eq!(at("Fri, 01 Jan 1960 00:00:00 GMT"), Some(Duration::ZERO));
        // Neither: the usual backoff.
        for bad in [
            "",
            "soon",
            "-5",
            "1.5",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 November 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 32 Nov 1994 08:49:37 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(at(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn http_dates_are_read_exactly() {
        let seconds = |v: &str| {
            http_date(v)
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_secs())
        };
        assert_eq!(seconds("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(seconds("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(seconds("Tue, 29 Feb 2000 12:00:00 GMT"), Some(951_825_600));
        assert_eq!(seconds("Wed, 01 Mar 2000 00:00:00 GMT"), Some(951_868_800));
        assert_eq!(
            seconds("Sat, 31 Dec 2016 23:59:60 GMT"),
            Some(1_483_228_800)
        );
        assert_eq!(
            seconds("Fri, 31 Dec 9999 23:59:59 GMT"),
            Some(253_402_300_799)
        );
    }

    /// A keep-alive HTTP/1.1 server on 127.0.0.1: it answers each request it reads with the
    /// next of `replies` (status, extra header line, body), on the same connection, and counts
    /// the connections and requests. Returns its base URL and the two counts.
    fn keep_alive_server(
        replies: Vec<(u16, &'static str, String)>,
    ) -> (BaseUrl, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let (connections, requests) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (c, r) = (Arc::clone(&connections), Arc::clone(&requests));
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                c.fetch_add(1, Ordering::SeqCst);
                let (replies, r) = (Arc::clone(&replies), Arc::clone(&r));
                thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut stream = stream;
                    loop {
                        let mut length = 0;
                        let mut line = String::new();
                        loop {
                            line.clear();
                            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                            if line.trim().is_empty() {
                                break;
                            }
                            if let Some((name, value)) = line.split_once(':')
                                && name.eq_ignore_ascii_case("content-length")
                            {
                                length = value.trim().parse().unwrap();
                            }
                        }
                        let mut body = vec![0; length];
                        reader.read_exact(&mut body).unwrap();
                        r.fetch_add(1, Ordering::SeqCst);
                        let Some((status, header, body)) = replies.lock().unwrap().pop_front()
                        else {
                            return;
                        };
                        let head = format!(
                            "HTTP/1.1 {status} Whatever\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{header}\r\n",
                            body.len()
                        );
                        stream.write_all(head.as_bytes()).unwrap();
                        stream.write_all(body.as_bytes()).unwrap();
                    }
                });
            }
        });
        (BaseUrl::parse(&base).unwrap(), connections, requests)
    }

    fn reply(text: &str) -> (u16, &'static str, String) {
        let body = json!({"choices": [{"message": {"content": text}}]});
        (200, "", body.to_string())
    }

    fn request() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: vec![json!({"role": "user", "content": "hi"})],
            max_tokens: 10,
        }
    }

    /// The calls of one client share its connection: a summary sent in three parts opens one.
    #[test]
    fn a_clients_calls_share_one_connection() {
        let (base_url, connections, requests) =
            keep_alive_server(vec![reply("one"), reply("two"), reply("three")]);
        let client = Client::new(Endpoint {
            base_url,
            ..endpoint(None)
        });
        for text in ["one", "two", "three"] {
            assert_eq!(client.chat(&request()).unwrap().text, text);
        }
        assert_eq!(requests.load(Ordering::SeqCst), 3);
        assert_eq!(connections.load(Ordering::SeqCst), 1);
        // Calls without a shared client open a connection each (as every call once did).
        let (base_url, connections, _) = keep_alive_server(vec![reply("a"), reply("b")]);
        let endpoint = Endpoint {
            base_url,
            ..endpoint(None)
        };
        chat(&endpoint, &request()).unwrap();
        chat(&endpoint, &request()).unwrap();
        assert_eq!(connections.load(Ordering::SeqCst), 2);
    }

    /// A `Retry-After` date is waited for, within the cap on every wait.
    #[test]
    fn a_retry_after_date_is_honoured_and_capped() {
        let busy = (
            429,
            "Retry-After: Fri, 31 Dec 9999 23:59:59 GMT\r\n",
            "{}".to_string(),
        );
        let (base_url, _, requests) = keep_alive_server(vec![busy, reply("done")]);
        let client = Client::new(Endpoint {
            base_url,
            retries: 1,
            max_backoff: Duration::from_millis(50),
            ..endpoint(None)
        });
        let started = Instant::now();
        let reply = client.chat(&request()).unwrap();
        assert_eq!((reply.text.as_str(), reply.attempts), ("done", 2));
        assert_eq!(requests.load(Ordering::SeqCst), 2);
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
