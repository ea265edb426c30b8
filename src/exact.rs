//! `count --exact`: the providers' own token counts, for documents ctx can only estimate.
//!
//! This module owns three things: which provider a document is sent to ([`route`]), the request
//! each provider's counting endpoint takes, converted from the document when it is written in
//! another API's shape ([`request`]), and where each provider is reached with which key
//! ([`Providers::resolve`]). The HTTP itself (retries, timeouts, redirects refused, keys and URL
//! credentials scrubbed from every error) is [`crate::llm::post`]'s.
//!
//! Keys follow the summarizer's rule (SPEC §4): a provider's key goes only to that provider's
//! own host over https, or to the base URL that provider's own variable names
//! (`ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`, `OPENAI_BASE_URL`); never to a URL named by
//! a flag, a `CTX_*_BASE_URL` variable or a profile. Nothing here prints a key, and nothing here
//! runs unless `--exact` asked for it.

use std::fmt;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use serde_json::{Map, Value, json};

use crate::cmd::Env;
use crate::document::{Dialect, Document, Field};
use crate::llm::{BaseUrl, Endpoint, KeyHeader, LlmError, Post, UrlArg};
use crate::settings::Settings;

/// A provider with a token-counting endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// Anthropic's `POST /v1/messages/count_tokens`.
    Anthropic,
    /// The Gemini API's `POST /v1beta/models/{model}:countTokens`.
    Gemini,
    /// OpenAI's `POST /v1/responses/input_tokens`.
    Openai,
}

impl Provider {
    /// The name in reports (`"source"`) and messages.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
            Provider::Openai => "openai",
        }
    }

    /// The provider's own API, where its key may go whatever named the URL.
    fn own_host(self) -> &'static str {
        match self {
            Provider::Anthropic => "api.anthropic.com",
            Provider::Gemini => "generativelanguage.googleapis.com",
            Provider::Openai => "api.openai.com",
        }
    }

    /// The default base URL, as the provider's SDK writes it: Anthropic's and Google's without
    /// the version path (the SDKs add it), OpenAI's with it.
    fn default_url(self) -> &'static str {
        match self {
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::Gemini => "https://generativelanguage.googleapis.com",
            Provider::Openai => "https://api.openai.com/v1",
        }
    }

    /// The flag naming this provider's base URL.
    fn flag(self) -> &'static str {
        match self {
            Provider::Anthropic => "--anthropic-base-url",
            Provider::Gemini => "--gemini-base-url",
            Provider::Openai => "--openai-base-url",
        }
    }

    /// ctx's own variable for the base URL (the key is not sent to it).
    fn ctx_var(self) -> &'static str {
        match self {
            Provider::Anthropic => "CTX_ANTHROPIC_BASE_URL",
            Provider::Gemini => "CTX_GEMINI_BASE_URL",
            Provider::Openai => "CTX_OPENAI_BASE_URL",
        }
    }

    /// The variable the provider's own SDK reads for its base URL (the key goes to it).
    fn sdk_var(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
            Provider::Gemini => "GOOGLE_GEMINI_BASE_URL",
            Provider::Openai => "OPENAI_BASE_URL",
        }
    }

    /// How the key is sent, and the other headers every request carries.
    fn headers(self) -> (KeyHeader, &'static [(&'static str, &'static str)]) {
        match self {
            Provider::Anthropic => (
                KeyHeader::Named("x-api-key"),
                &[("anthropic-version", "2023-06-01")],
            ),
            Provider::Gemini => (KeyHeader::Named("x-goog-api-key"), &[]),
            Provider::Openai => (KeyHeader::Bearer, &[]),
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The variables the providers' endpoints read, captured once at start (the OpenAI ones are
/// [`Env`]'s, shared with the summarizer). `Debug` redacts the keys and URL credentials.
#[derive(Clone, Default)]
pub struct ExactEnv {
    /// `$CTX_ANTHROPIC_BASE_URL`.
    pub ctx_anthropic_base_url: Option<String>,
    /// `$ANTHROPIC_BASE_URL`.
    pub anthropic_base_url: Option<String>,
    /// `$ANTHROPIC_API_KEY`.
    pub anthropic_api_key: Option<String>,
    /// `$CTX_GEMINI_BASE_URL`.
    pub ctx_gemini_base_url: Option<String>,
    /// `$GOOGLE_GEMINI_BASE_URL`.
    pub gemini_base_url: Option<String>,
    /// `$GOOGLE_API_KEY` (Google's SDK prefers it to `GEMINI_API_KEY`).
    pub google_api_key: Option<String>,
    /// `$GEMINI_API_KEY`.
    pub gemini_api_key: Option<String>,
    /// `$CTX_OPENAI_BASE_URL`.
    pub ctx_openai_base_url: Option<String>,
}

impl ExactEnv {
    /// Reads the process environment (an empty variable is unset).
    pub fn from_process() -> ExactEnv {
        let var = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
        ExactEnv {
            ctx_anthropic_base_url: var("CTX_ANTHROPIC_BASE_URL"),
            anthropic_base_url: var("ANTHROPIC_BASE_URL"),
            anthropic_api_key: var("ANTHROPIC_API_KEY"),
            ctx_gemini_base_url: var("CTX_GEMINI_BASE_URL"),
            gemini_base_url: var("GOOGLE_GEMINI_BASE_URL"),
            google_api_key: var("GOOGLE_API_KEY"),
            gemini_api_key: var("GEMINI_API_KEY"),
            ctx_openai_base_url: var("CTX_OPENAI_BASE_URL"),
        }
    }
}

impl fmt::Debug for ExactEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = |k: &Option<String>| k.as_ref().map(|_| "[redacted]");
        let url = |u: &Option<String>| u.clone().map(UrlArg);
        f.debug_struct("ExactEnv")
            .field("ctx_anthropic_base_url", &url(&self.ctx_anthropic_base_url))
            .field("anthropic_base_url", &url(&self.anthropic_base_url))
            .field("anthropic_api_key", &key(&self.anthropic_api_key))
            .field("ctx_gemini_base_url", &url(&self.ctx_gemini_base_url))
            .field("gemini_base_url", &url(&self.gemini_base_url))
            .field("google_api_key", &key(&self.google_api_key))
            .field("gemini_api_key", &key(&self.gemini_api_key))
            .field("ctx_openai_base_url", &url(&self.ctx_openai_base_url))
            .finish()
    }
}

/// The base URLs given as flags (or by a trusted profile), one per provider.
#[derive(Clone, Debug, Default)]
pub struct BaseUrlFlags {
    pub anthropic: Option<UrlArg>,
    pub gemini: Option<UrlArg>,
    pub openai: Option<UrlArg>,
}

/// Where one provider is reached, and with which key.
#[derive(Debug, Clone)]
struct Target {
    endpoint: Endpoint,
    /// The key was not sent because this URL is not one it was meant for: its variable.
    withheld: Option<&'static str>,
    /// No key, and the URL is the provider's own API, which refuses every request without
    /// one: the variables that would give it.
    missing: Option<&'static str>,
}

/// The three providers' endpoints, resolved once per run.
#[derive(Debug, Clone)]
pub struct Providers {
    anthropic: Target,
    gemini: Target,
    openai: Target,
}

impl Providers {
    /// Resolves each provider's base URL (flag, then ctx's variable, then the provider's own
    /// variable, then its API) and key. A base URL that is not an http(s) URL is an error naming
    /// where it came from (never repeating it: it may hold credentials).
    pub fn resolve(
        flags: &BaseUrlFlags,
        env: &Env,
        timeout: Duration,
        retries: u32,
    ) -> Result<Providers> {
        let x = &env.exact;
        let google_key = x
            .google_api_key
            .as_ref()
            .map(|k| ("GOOGLE_API_KEY", k))
            .or_else(|| x.gemini_api_key.as_ref().map(|k| ("GEMINI_API_KEY", k)));
        Ok(Providers {
            anthropic: target(
                Provider::Anthropic,
                [
                    flags.anthropic.as_ref().map(|u| u.0.as_str()),
                    x.ctx_anthropic_base_url.as_deref(),
                    x.anthropic_base_url.as_deref(),
                ],
                x.anthropic_api_key
                    .as_ref()
                    .map(|k| ("ANTHROPIC_API_KEY", k)),
                "ANTHROPIC_API_KEY",
                timeout,
                retries,
            )?,
            gemini: target(
                Provider::Gemini,
                [
                    flags.gemini.as_ref().map(|u| u.0.as_str()),
                    x.ctx_gemini_base_url.as_deref(),
                    x.gemini_base_url.as_deref(),
                ],
                google_key,
                "GOOGLE_API_KEY or GEMINI_API_KEY",
                timeout,
                retries,
            )?,
            openai: target(
                Provider::Openai,
                [
                    flags.openai.as_ref().map(|u| u.0.as_str()),
                    x.ctx_openai_base_url.as_deref(),
                    env.openai_base_url.as_deref(),
                ],
                env.openai_api_key.as_ref().map(|k| ("OPENAI_API_KEY", k)),
                "OPENAI_API_KEY",
                timeout,
                retries,
            )?,
        })
    }

    fn target(&self, p: Provider) -> &Target {
        match p {
            Provider::Anthropic => &self.anthropic,
            Provider::Gemini => &self.gemini,
            Provider::Openai => &self.openai,
        }
    }

    /// The provider's count of `doc`, or why there is none (one line, never holding a key).
    pub fn count(&self, doc: &Document, settings: &Settings) -> Result<Counted, String> {
        let provider = route(doc, settings)?;
        let req = request(provider, doc, settings).map_err(|why| format!("{provider}: {why}"))?;
        let target = self.target(provider);
        if let Some(vars) = target.missing {
            return Err(format!(
                "{provider}: no key for {} (set {vars})",
                target.endpoint.base_url
            ));
        }
        let (key_header, headers) = provider.headers();
        let post = Post {
            path: &req.path,
            key_header,
            headers,
            body: &req.body,
        };
        let parse = |text: &str| parse_count(provider, text);
        match crate::llm::post(&target.endpoint, &post, parse) {
            Ok(replied) => Ok(Counted {
                provider,
                tokens: replied.value,
            }),
            Err(e) => Err(format!("{provider}: {}", explain(target, provider, e))),
        }
    }
}

/// A count from a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    pub provider: Provider,
    pub tokens: u64,
}

/// A refusal's error, with the reason when the key was held back from this URL.
fn explain(target: &Target, provider: Provider, e: LlmError) -> String {
    match target.withheld {
        Some(var) if matches!(e.status, Some(401 | 403)) => format!(
            "{} ({var} is sent only to https://{} and to {}; name this server there to send it)",
            e.message,
            provider.own_host(),
            provider.sdk_var()
        ),
        _ => e.message,
    }
}

/// One provider's endpoint. `urls` are the flag's, ctx's variable's and the provider's own
/// variable's, in that order of precedence; `key` is the provider's key and its variable.
fn target(
    provider: Provider,
    urls: [Option<&str>; 3],
    key: Option<(&'static str, &String)>,
    key_vars: &'static str,
    timeout: Duration,
    retries: u32,
) -> Result<Target> {
    let [flag, ctx_var, sdk_var] = urls;
    let (text, from, set_for_key) = if let Some(u) = flag {
        (u, provider.flag(), false)
    } else if let Some(u) = ctx_var {
        (u, provider.ctx_var(), false)
    } else if let Some(u) = sdk_var {
        (u, provider.sdk_var(), true)
    } else {
        (provider.default_url(), "the default base URL", true)
    };
    let base_url = BaseUrl::parse(text).map_err(|why| anyhow!("{from}: {why}"))?;
    let own = base_url.is_https_host(provider.own_host());
    let fits = set_for_key || own;
    let api_key = key.filter(|_| fits).map(|(_, k)| k.clone());
    let withheld = key.filter(|_| !fits).map(|(var, _)| var);
    if provider == Provider::Openai && base_url.has_credentials() && api_key.is_some() {
        bail!(
            "{from} holds credentials (user:password@) and OPENAI_API_KEY is set: both would be the Authorization header; use one"
        );
    }
    let missing = (api_key.is_none() && own && !base_url.has_credentials()).then_some(key_vars);
    Ok(Target {
        endpoint: Endpoint {
            base_url,
            api_key,
            timeout,
            retries,
            max_backoff: Duration::from_secs(30),
        },
        withheld,
        missing,
    })
}

/// Reads a 2xx reply's count: `input_tokens` (Anthropic, OpenAI) or `totalTokens` (Gemini), a
/// whole number.
fn parse_count(provider: Provider, text: &str) -> Result<u64, String> {
    let field = match provider {
        Provider::Anthropic | Provider::Openai => "input_tokens",
        Provider::Gemini => "totalTokens",
    };
    let value: Value = serde_json::from_str(text)
        .map_err(|_| format!("malformed reply: not JSON: {}", short(text)))?;
    value.get(field).and_then(Value::as_u64).ok_or_else(|| {
        format!(
            "malformed reply: no whole number `{field}`: {}",
            short(text)
        )
    })
}

/// A reply's text on one line, cut short (the HTTP client scrubs secrets from it).
fn short(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(120) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line,
    }
}

/// Which provider counts `doc`: the one that serves its model (the model table's provider:
/// Anthropic for Claude, the Gemini API for Google's models, OpenAI for OpenAI's except the
/// open-weight gpt-oss). An Anthropic Messages document goes only to Anthropic; an OpenAI Chat
/// Completions document goes to any of the three, converted. Other models have no counting
/// endpoint: the error says so.
pub fn route(doc: &Document, settings: &Settings) -> Result<Provider, String> {
    let name = &settings.model_name;
    let Some(model) = settings.model else {
        return Err(format!(
            "no provider to ask for unknown model {name:?} (pass -m with a Claude, Gemini or OpenAI model)"
        ));
    };
    let provider = match model.provider.as_str() {
        "anthropic" => Provider::Anthropic,
        "google" => Provider::Gemini,
        "openai" if !model.name.starts_with("gpt-oss") => Provider::Openai,
        other => {
            return Err(format!(
                "no provider counting endpoint for {name:?} ({other} model; only Anthropic, Gemini and OpenAI have one)"
            ));
        }
    };
    if doc.dialect == Dialect::Anthropic && provider != Provider::Anthropic {
        return Err(format!(
            "an Anthropic Messages document is sent only to Anthropic's count, and {name:?} is not a Claude model"
        ));
    }
    Ok(provider)
}

/// A counting request: the path under the provider's base URL, and the JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct CountRequest {
    pub path: String,
    pub body: Value,
}

/// The request that asks `provider` to count `doc`, or why the document cannot be written
/// faithfully in that provider's shape.
pub fn request(
    provider: Provider,
    doc: &Document,
    settings: &Settings,
) -> Result<CountRequest, String> {
    let model = provider_model(&settings.model_name);
    match (provider, doc.dialect) {
        (Provider::Anthropic, Dialect::Anthropic) => Ok(CountRequest {
            path: "v1/messages/count_tokens".into(),
            body: anthropic_body(doc, settings, &model)?,
        }),
        (Provider::Anthropic, Dialect::Openai) => Ok(CountRequest {
            path: "v1/messages/count_tokens".into(),
            body: chat_to_anthropic(doc, settings, &model)?,
        }),
        (Provider::Gemini, Dialect::Openai) => Ok(CountRequest {
            path: format!("v1beta/models/{}:countTokens", path_segment(&model)),
            body: chat_to_gemini(doc, settings, &model)?,
        }),
        (Provider::Openai, Dialect::Openai) => Ok(CountRequest {
            path: "responses/input_tokens".into(),
            body: chat_to_responses(doc, settings, &model)?,
        }),
        (_, Dialect::Anthropic) => Err("an Anthropic Messages document is not converted".into()),
    }
}

/// The model name as the provider knows it: without a routing prefix (`anthropic/`,
/// `models/`, `openrouter/google/`).
fn provider_model(name: &str) -> String {
    let name = name.trim();
    if name.starts_with("ft:") {
        return name.to_string(); // OpenAI fine-tunes are asked for by their whole name
    }
    name.rsplit_once('/')
        .map_or(name, |(_, last)| last)
        .to_string()
}

/// `s` percent-encoded for one URL path segment.
fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The tool definitions the counter uses: the body's `tools` and `functions`, else `--tools`'.
fn tool_lists(doc: &Document, settings: &Settings) -> (Option<Value>, Option<Value>) {
    let body = doc.body();
    let own = body.map(|b| (b.get("tools").cloned(), b.get("functions").cloned()));
    match (own, &settings.extra_tools) {
        (Some((t, f)), _) if t.is_some() || f.is_some() => (t, f),
        (_, Some(extra)) => match &**extra {
            Value::Array(_) => (Some((**extra).clone()), None),
            other => (other.get("tools").cloned(), other.get("functions").cloned()),
        },
        _ => (None, None),
    }
}

/// The Messages keys `count_tokens` takes; the others (`max_tokens`, `temperature`, `stream`,
/// `metadata`, `stop_sequences`, `top_p`, `top_k`, `service_tier`, ...) only shape the reply.
const ANTHROPIC_COUNT_KEYS: &[&str] = &[
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",
    "mcp_servers",
    "context_management",
];

/// An Anthropic document's count request: its body without the generation fields.
fn anthropic_body(doc: &Document, settings: &Settings, model: &str) -> Result<Value, String> {
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    match doc.body() {
        Some(b) => {
            for (k, v) in b {
                if ANTHROPIC_COUNT_KEYS.contains(&k.as_str()) {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        None => {
            // The Messages API takes no system-role message: a bare array's system messages
            // are its top-level `system`, as a body would carry them.
            let mut system = Vec::new();
            let mut messages = Vec::new();
            for (i, m) in doc.messages().iter().enumerate() {
                if matches!(role(m), "system" | "developer") {
                    let text = plain_text(m.get("content")).ok_or_else(|| {
                        format!("message {i}: a system message with other than text has no Anthropic equivalent")
                    })?;
                    system.push(json!({"type": "text", "text": text}));
                } else {
                    messages.push(m.clone());
                }
            }
            if !system.is_empty() {
                out.insert("system".into(), Value::Array(system));
            }
            out.insert("messages".into(), Value::Array(messages));
        }
    }
    if !out.contains_key("tools") {
        let (tools, functions) = tool_lists(doc, settings);
        let tools = anthropic_tools(tools.as_ref(), functions.as_ref())?;
        if !tools.is_empty() {
            out.insert("tools".into(), Value::Array(tools));
        }
    }
    Ok(Value::Object(out))
}

/// Tool definitions in Anthropic's shape: OpenAI function definitions (`tools` entries of type
/// `function`, legacy `functions`) converted, Anthropic ones kept.
fn anthropic_tools(tools: Option<&Value>, functions: Option<&Value>) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let function = |f: &Value| -> Result<Value, String> {
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a function definition has no name")?;
        let mut t = Map::new();
        t.insert("name".into(), json!(name));
        if let Some(d) = f.get("description") {
            t.insert("description".into(), d.clone());
        }
        let schema = f
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        t.insert("input_schema".into(), schema);
        Ok(Value::Object(t))
    };
    for t in tools.and_then(Value::as_array).into_iter().flatten() {
        match (t.get("type").and_then(Value::as_str), t.get("function")) {
            (Some("function"), Some(f)) => out.push(function(f)?),
            (_, None) => out.push(t.clone()),
            (kind, Some(_)) => {
                return Err(format!(
                    "a tool of type {} has no Anthropic equivalent",
                    kind.unwrap_or("?")
                ));
            }
        }
    }
    for f in functions.and_then(Value::as_array).into_iter().flatten() {
        out.push(function(f)?);
    }
    Ok(out)
}

/// The text of an OpenAI message's content: a string, or the `text` (and `refusal`) of its
/// parts; `None` when a part is something else (an image, audio, a file).
fn plain_text(content: Option<&Value>) -> Option<String> {
    match content {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = Vec::new();
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => text.push(p.get("text").and_then(Value::as_str)?),
                    Some("refusal") => text.push(p.get("refusal").and_then(Value::as_str)?),
                    _ => return None,
                }
            }
            Some(text.join("\n"))
        }
        Some(_) => None,
    }
}

/// A `data:` URL's media type and base64 payload.
fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (head, data) = rest.split_once(',')?;
    let media = head.strip_suffix(";base64")?;
    Some((media, data))
}

/// The URL of an `image_url` part (`{"url": ...}`, or a bare string as some servers accept).
fn image_url(p: &Value) -> Option<&str> {
    let u = p.get("image_url")?;
    u.get("url").and_then(Value::as_str).or_else(|| u.as_str())
}

/// A tool call's `arguments` as the object the other APIs take (empty text is `{}`).
fn arguments(i: usize, f: &Value) -> Result<Value, String> {
    let raw = f.get("arguments").cloned().unwrap_or(Value::Null);
    let v = match raw {
        Value::String(s) if s.trim().is_empty() => json!({}),
        Value::String(s) => serde_json::from_str(&s)
            .map_err(|_| format!("message {i}: tool call arguments are not JSON"))?,
        Value::Null => json!({}),
        other => other,
    };
    if v.is_object() {
        Ok(v)
    } else {
        Err(format!(
            "message {i}: tool call arguments are not a JSON object"
        ))
    }
}

/// The role of message `m`.
fn role(m: &Value) -> &str {
    m.field("role").and_then(Value::as_str).unwrap_or("")
}

/// An OpenAI Chat Completions document as an Anthropic Messages count request, as an
/// OpenAI-compatible gateway (OpenRouter, LiteLLM) sends it: system and developer messages
/// become the top-level `system`; tool calls `tool_use` blocks; tool results `tool_result`
/// blocks in a user message; images `image` blocks (inline or by URL); function definitions
/// Anthropic tools; `tool_choice` Anthropic's. Audio, files other than inline PDFs and tools
/// other than functions have no equivalent: the error says which.
fn chat_to_anthropic(doc: &Document, settings: &Settings, model: &str) -> Result<Value, String> {
    let mut system: Vec<Value> = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    let mut legacy_call: Option<String> = None;
    let blocks = |i: usize, content: Option<&Value>| -> Result<Value, String> {
        let Some(Value::Array(parts)) = content else {
            return Ok(json!(plain_text(content).unwrap_or_default()));
        };
        let mut out = Vec::new();
        for p in parts {
            let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
            match kind {
                "text" => out.push(
                    json!({"type": "text", "text": p.get("text").cloned().unwrap_or(json!(""))}),
                ),
                "refusal" => out.push(
                    json!({"type": "text", "text": p.get("refusal").cloned().unwrap_or(json!(""))}),
                ),
                "image_url" => {
                    let url =
                        image_url(p).ok_or(format!("message {i}: an image part has no URL"))?;
                    out.push(match data_url(url) {
                        Some((media, data)) => json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}),
                        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
                    });
                }
                "file" => {
                    let file = p.get("file");
                    match file.and_then(|f| f.get("file_data")).and_then(Value::as_str).and_then(data_url) {
                        Some(("application/pdf", data)) => out.push(json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}})),
                        _ => return Err(format!("message {i}: a file part other than an inline PDF has no Anthropic equivalent")),
                    }
                }
                other => {
                    return Err(format!(
                        "message {i}: a {other:?} part has no Anthropic equivalent"
                    ));
                }
            }
        }
        Ok(Value::Array(out))
    };
    let push_result = |messages: &mut Vec<Value>, block: Value| {
        let carrier = messages.last_mut().filter(|m| {
            role(m) == "user"
                && m["content"].as_array().is_some_and(|c| {
                    c.iter()
                        .all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                })
        });
        match carrier {
            Some(m) => m["content"].as_array_mut().expect("checked").push(block),
            None => messages.push(json!({"role": "user", "content": [block]})),
        }
    };
    for (i, m) in doc.messages().iter().enumerate() {
        match role(m) {
            "system" | "developer" => {
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: a system message with other than text has no Anthropic equivalent"
                ))?;
                system.push(json!({"type": "text", "text": text}));
            }
            "user" => {
                messages.push(json!({"role": "user", "content": blocks(i, m.field("content"))?}))
            }
            "assistant" => {
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: an assistant message with other than text has no Anthropic equivalent"
                ))?;
                let mut out = Vec::new();
                if !text.is_empty() {
                    out.push(json!({"type": "text", "text": text}));
                }
                for c in m
                    .field("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let f = c.get("function").cloned().unwrap_or(json!({}));
                    out.push(json!({"type": "tool_use", "id": c.get("id").cloned().unwrap_or(json!("")),
                        "name": f.get("name").cloned().unwrap_or(json!("")), "input": arguments(i, &f)?}));
                }
                if let Some(f) = m.field("function_call") {
                    let id = format!("call_{i}");
                    out.push(json!({"type": "tool_use", "id": id, "name": f.get("name").cloned().unwrap_or(json!("")),
                        "input": arguments(i, f)?}));
                    legacy_call = Some(id);
                }
                if !out.is_empty() {
                    messages.push(json!({"role": "assistant", "content": out}));
                }
            }
            "tool" | "function" => {
                let id = if role(m) == "tool" {
                    m.field("tool_call_id").cloned().unwrap_or(json!(""))
                } else {
                    json!(legacy_call.clone().unwrap_or_default())
                };
                let block = json!({"type": "tool_result", "tool_use_id": id, "content": blocks(i, m.field("content"))?});
                push_result(&mut messages, block);
            }
            other => {
                return Err(format!(
                    "message {i}: role {other:?} has no Anthropic equivalent"
                ));
            }
        }
    }
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), Value::Array(messages));
    let (tools, functions) = tool_lists(doc, settings);
    let tools = anthropic_tools(tools.as_ref(), functions.as_ref())?;
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
        let body = doc.body();
        let choice = body.and_then(|b| b.get("tool_choice").or_else(|| b.get("function_call")));
        let mut choice = match choice {
            None => None,
            Some(Value::String(s)) => match s.as_str() {
                "auto" => Some(json!({"type": "auto"})),
                "none" => Some(json!({"type": "none"})),
                "required" => Some(json!({"type": "any"})),
                other => return Err(format!("tool_choice {other:?} has no Anthropic equivalent")),
            },
            Some(c) => {
                let name = c
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .or_else(|| c.get("name"))
                    .and_then(Value::as_str)
                    .ok_or("a tool_choice without a function name has no Anthropic equivalent")?;
                Some(json!({"type": "tool", "name": name}))
            }
        };
        if body.and_then(|b| b.get("parallel_tool_calls")) == Some(&json!(false)) {
            let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
            if c["type"] != "none" {
                c["disable_parallel_tool_use"] = json!(true);
            }
        }
        if let Some(c) = choice {
            out.insert("tool_choice".into(), c);
        }
    }
    Ok(Value::Object(out))
}

/// Parts of a Gemini `Content` from an OpenAI message's content: text, and images, audio and
/// files given inline (`inlineData`). An image or file by URL cannot be: the Gemini API takes
/// only its own Files API's URIs.
fn gemini_parts(i: usize, content: Option<&Value>) -> Result<Vec<Value>, String> {
    let Some(Value::Array(parts)) = content else {
        let text = plain_text(content).unwrap_or_default();
        return Ok(if text.is_empty() {
            Vec::new()
        } else {
            vec![json!({"text": text})]
        });
    };
    let mut out = Vec::new();
    for p in parts {
        let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
        let inline =
            |media: &str, data: &str| json!({"inlineData": {"mimeType": media, "data": data}});
        match kind {
            "text" => out.push(json!({"text": p.get("text").cloned().unwrap_or(json!(""))})),
            "refusal" => out.push(json!({"text": p.get("refusal").cloned().unwrap_or(json!(""))})),
            "image_url" => {
                let url = image_url(p).ok_or(format!("message {i}: an image part has no URL"))?;
                let (media, data) = data_url(url).ok_or(format!(
                    "message {i}: an image by URL cannot be sent to Gemini's count (only inline data: images)"
                ))?;
                out.push(inline(media, data));
            }
            "input_audio" => {
                let a = p.get("input_audio");
                let data = a.and_then(|a| a.get("data")).and_then(Value::as_str);
                let format = a.and_then(|a| a.get("format")).and_then(Value::as_str);
                match (data, format) {
                    (Some(d), Some(f)) => out.push(inline(&format!("audio/{f}"), d)),
                    _ => return Err(format!("message {i}: an audio part without data or format")),
                }
            }
            "file" => {
                let file_data = p
                    .get("file")
                    .and_then(|f| f.get("file_data"))
                    .and_then(Value::as_str)
                    .and_then(data_url);
                let (media, data) = file_data.ok_or(format!(
                    "message {i}: a file by id cannot be sent to Gemini's count (only inline file_data)"
                ))?;
                out.push(inline(media, data));
            }
            other => {
                return Err(format!(
                    "message {i}: a {other:?} part has no Gemini equivalent"
                ));
            }
        }
    }
    Ok(out)
}

/// An OpenAI Chat Completions document as a Gemini `countTokens` request, counting the system
/// prompt and tools with it (`generateContentRequest`): system and developer messages become
/// `systemInstruction`; user and assistant turns `user` and `model` contents; tool calls
/// `functionCall` parts; tool results `functionResponse` parts (a JSON object result as it is,
/// anything else as `{"output": text}`) in one user content per run of results; function
/// definitions `functionDeclarations` with their JSON Schema as `parametersJsonSchema`;
/// `tool_choice` the function-calling mode.
fn chat_to_gemini(doc: &Document, settings: &Settings, model: &str) -> Result<Value, String> {
    let mut system: Vec<Value> = Vec::new();
    let mut contents: Vec<Value> = Vec::new();
    // The names of the calls of the nearest assistant message, by id: results pair with them.
    let mut calls: Vec<(Value, String)> = Vec::new();
    for (i, m) in doc.messages().iter().enumerate() {
        match role(m) {
            "system" | "developer" => {
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: a system message with other than text has no Gemini equivalent"
                ))?;
                system.push(json!({"text": text}));
            }
            "user" => {
                let parts = gemini_parts(i, m.field("content"))?;
                if !parts.is_empty() {
                    contents.push(json!({"role": "user", "parts": parts}));
                }
            }
            "assistant" => {
                let mut parts = gemini_parts(i, m.field("content"))?;
                calls.clear();
                for c in m
                    .field("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let f = c.get("function").cloned().unwrap_or(json!({}));
                    let name = f
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    calls.push((c.get("id").cloned().unwrap_or(Value::Null), name.clone()));
                    parts.push(json!({"functionCall": {"name": name, "args": arguments(i, &f)?}}));
                }
                if let Some(f) = m.field("function_call") {
                    let name = f
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    calls.push((Value::Null, name.clone()));
                    parts.push(json!({"functionCall": {"name": name, "args": arguments(i, f)?}}));
                }
                if !parts.is_empty() {
                    contents.push(json!({"role": "model", "parts": parts}));
                }
            }
            "tool" | "function" => {
                let id = m.field("tool_call_id").cloned().unwrap_or(Value::Null);
                let name = m
                    .field("name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| {
                        calls
                            .iter()
                            .find(|(cid, _)| !id.is_null() && *cid == id)
                            .or(calls.last().filter(|_| id.is_null()))
                            .map(|(_, n)| n.clone())
                    })
                    .ok_or(format!(
                        "message {i}: a tool result whose call is not in the previous assistant message"
                    ))?;
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: a tool result with other than text has no Gemini equivalent"
                ))?;
                let response = match serde_json::from_str::<Value>(&text) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => json!({"output": text}),
                };
                let part = json!({"functionResponse": {"name": name, "response": response}});
                let carrier = contents.last_mut().filter(|c| {
                    c["role"] == "user"
                        && c["parts"]
                            .as_array()
                            .is_some_and(|p| p.iter().all(|p| p.get("functionResponse").is_some()))
                });
                match carrier {
                    Some(c) => c["parts"].as_array_mut().expect("checked").push(part),
                    None => contents.push(json!({"role": "user", "parts": [part]})),
                }
            }
            other => {
                return Err(format!(
                    "message {i}: role {other:?} has no Gemini equivalent"
                ));
            }
        }
    }
    let mut req = Map::new();
    req.insert("model".into(), json!(format!("models/{model}")));
    req.insert("contents".into(), Value::Array(contents));
    if !system.is_empty() {
        req.insert("systemInstruction".into(), json!({"parts": system}));
    }
    let (tools, functions) = tool_lists(doc, settings);
    let mut declarations = Vec::new();
    let declare = |f: &Value| -> Result<Value, String> {
        let mut d = Map::new();
        d.insert(
            "name".into(),
            f.get("name")
                .cloned()
                .ok_or("a function definition has no name")?,
        );
        if let Some(desc) = f.get("description") {
            d.insert("description".into(), desc.clone());
        }
        if let Some(p) = f.get("parameters") {
            d.insert("parametersJsonSchema".into(), p.clone());
        }
        Ok(Value::Object(d))
    };
    for t in tools
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match (t.get("type").and_then(Value::as_str), t.get("function")) {
            (Some("function"), Some(f)) => declarations.push(declare(f)?),
            (kind, _) => {
                return Err(format!(
                    "a tool of type {} has no Gemini equivalent",
                    kind.unwrap_or("?")
                ));
            }
        }
    }
    for f in functions
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        declarations.push(declare(f)?);
    }
    if !declarations.is_empty() {
        req.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
        let body = doc.body();
        let choice = body.and_then(|b| b.get("tool_choice").or_else(|| b.get("function_call")));
        let config = match choice {
            None => None,
            Some(Value::String(s)) => match s.as_str() {
                "auto" => Some(json!({"mode": "AUTO"})),
                "none" => Some(json!({"mode": "NONE"})),
                "required" => Some(json!({"mode": "ANY"})),
                other => return Err(format!("tool_choice {other:?} has no Gemini equivalent")),
            },
            Some(c) => {
                let name = c
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .or_else(|| c.get("name"))
                    .and_then(Value::as_str)
                    .ok_or("a tool_choice without a function name has no Gemini equivalent")?;
                Some(json!({"mode": "ANY", "allowedFunctionNames": [name]}))
            }
        };
        if let Some(c) = config {
            req.insert("toolConfig".into(), json!({"functionCallingConfig": c}));
        }
    }
    Ok(json!({"generateContentRequest": req}))
}

/// An OpenAI Chat Completions document as a Responses API `input_tokens` request: messages
/// become input items in place (system and developer ones keep their role), user parts
/// `input_text`/`input_image`/`input_file`, tool calls `function_call` items and tool results
/// `function_call_output` items with the same call id, function definitions flat Responses
/// tools; `tool_choice`, `parallel_tool_calls`, `reasoning_effort` and `response_format` are
/// carried over in the Responses shape. Audio parts and tools other than functions have no
/// equivalent: the error says which.
fn chat_to_responses(doc: &Document, settings: &Settings, model: &str) -> Result<Value, String> {
    let mut input: Vec<Value> = Vec::new();
    let mut legacy_call: Option<String> = None;
    let user_content = |i: usize, content: Option<&Value>| -> Result<Value, String> {
        let Some(Value::Array(parts)) = content else {
            return Ok(json!(plain_text(content).unwrap_or_default()));
        };
        let mut out = Vec::new();
        for p in parts {
            let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
            match kind {
                "text" => out.push(json!({"type": "input_text", "text": p.get("text").cloned().unwrap_or(json!(""))})),
                "refusal" => out.push(json!({"type": "input_text", "text": p.get("refusal").cloned().unwrap_or(json!(""))})),
                "image_url" => {
                    let url = image_url(p).ok_or(format!("message {i}: an image part has no URL"))?;
                    let detail = p
                        .get("image_url")
                        .and_then(|u| u.get("detail"))
                        .cloned()
                        .unwrap_or(json!("auto"));
                    out.push(json!({"type": "input_image", "image_url": url, "detail": detail}));
                }
                "file" => {
                    let f = p.get("file").cloned().unwrap_or(json!({}));
                    let mut item = Map::new();
                    item.insert("type".into(), json!("input_file"));
                    for k in ["file_id", "file_data", "filename"] {
                        if let Some(v) = f.get(k) {
                            item.insert(k.into(), v.clone());
                        }
                    }
                    out.push(Value::Object(item));
                }
                other => {
                    return Err(format!(
                        "message {i}: a {other:?} part is not converted for the Responses count"
                    ));
                }
            }
        }
        Ok(Value::Array(out))
    };
    for (i, m) in doc.messages().iter().enumerate() {
        let r = role(m);
        match r {
            "system" | "developer" | "user" => {
                input.push(json!({"role": r, "content": user_content(i, m.field("content"))?}))
            }
            "assistant" => {
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: an assistant message with other than text is not converted for the Responses count"
                ))?;
                if !text.is_empty() {
                    input.push(json!({"role": "assistant", "content": text}));
                }
                for c in m
                    .field("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let f = c.get("function").cloned().unwrap_or(json!({}));
                    input.push(json!({"type": "function_call", "call_id": c.get("id").cloned().unwrap_or(json!("")),
                        "name": f.get("name").cloned().unwrap_or(json!("")),
                        "arguments": f.get("arguments").cloned().unwrap_or(json!("{}"))}));
                }
                if let Some(f) = m.field("function_call") {
                    let id = format!("call_{i}");
                    input.push(json!({"type": "function_call", "call_id": id,
                        "name": f.get("name").cloned().unwrap_or(json!("")),
                        "arguments": f.get("arguments").cloned().unwrap_or(json!("{}"))}));
                    legacy_call = Some(id);
                }
            }
            "tool" | "function" => {
                let id = if r == "tool" {
                    m.field("tool_call_id").cloned().unwrap_or(json!(""))
                } else {
                    json!(legacy_call.clone().unwrap_or_default())
                };
                let text = plain_text(m.field("content")).ok_or(format!(
                    "message {i}: a tool result with other than text is not converted for the Responses count"
                ))?;
                input.push(json!({"type": "function_call_output", "call_id": id, "output": text}));
            }
            other => {
                return Err(format!(
                    "message {i}: role {other:?} has no Responses equivalent"
                ));
            }
        }
    }
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    out.insert("input".into(), Value::Array(input));
    let (tools, functions) = tool_lists(doc, settings);
    let flat = |f: &Value, strict: Option<&Value>| -> Value {
        let mut t = Map::new();
        t.insert("type".into(), json!("function"));
        for k in ["name", "description", "parameters"] {
            if let Some(v) = f.get(k) {
                t.insert(k.into(), v.clone());
            }
        }
        if let Some(s) = strict.or_else(|| f.get("strict")) {
            t.insert("strict".into(), s.clone());
        }
        Value::Object(t)
    };
    let mut list = Vec::new();
    for t in tools
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match (t.get("type").and_then(Value::as_str), t.get("function")) {
            (Some("function"), Some(f)) => list.push(flat(f, t.get("strict"))),
            (kind, _) => {
                return Err(format!(
                    "a tool of type {} is not converted for the Responses count",
                    kind.unwrap_or("?")
                ));
            }
        }
    }
    for f in functions
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        list.push(flat(f, None));
    }
    if !list.is_empty() {
        out.insert("tools".into(), Value::Array(list));
    }
    if let Some(b) = doc.body() {
        match b.get("tool_choice").or_else(|| b.get("function_call")) {
            None => {}
            Some(Value::String(s)) => {
                out.insert("tool_choice".into(), json!(s));
            }
            Some(c) => {
                let name = c
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .or_else(|| c.get("name"))
                    .cloned()
                    .ok_or("a tool_choice without a function name is not converted")?;
                out.insert(
                    "tool_choice".into(),
                    json!({"type": "function", "name": name}),
                );
            }
        }
        if let Some(p) = b.get("parallel_tool_calls") {
            out.insert("parallel_tool_calls".into(), p.clone());
        }
        if let Some(e) = b.get("reasoning_effort") {
            out.insert("reasoning".into(), json!({"effort": e}));
        }
        if let Some(rf) = b.get("response_format") {
            let format = match rf.get("type").and_then(Value::as_str) {
                Some("json_schema") => {
                    let mut f = Map::new();
                    f.insert("type".into(), json!("json_schema"));
                    if let Some(Value::Object(s)) = rf.get("json_schema") {
                        for (k, v) in s {
                            f.insert(k.clone(), v.clone());
                        }
                    }
                    Value::Object(f)
                }
                _ => rf.clone(),
            };
            out.insert("text".into(), json!({"format": format}));
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::ModelArgs;

    fn doc(v: Value) -> (Document, Settings) {
        let d = Document::parse(v, None).unwrap();
        let s = Settings::resolve(
            &ModelArgs::default(),
            d.body_model(),
            None,
            d.dialect,
            None,
            &mut Vec::new(),
        );
        (d, s)
    }

    fn env(f: impl FnOnce(&mut Env)) -> Env {
        let mut e = Env::default();
        f(&mut e);
        e
    }

    fn resolve(flags: &BaseUrlFlags, e: &Env) -> Providers {
        Providers::resolve(flags, e, Duration::from_secs(1), 0).unwrap()
    }

    #[test]
    fn routing_follows_the_model_and_keeps_anthropic_documents_at_anthropic() {
        let route_of = |v: Value| {
            let (d, s) = doc(v);
            route(&d, &s)
        };
        let chat =
            |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(route_of(chat("claude-sonnet-4-5")), Ok(Provider::Anthropic));
        assert_eq!(
            route_of(chat("anthropic/claude-3-5-haiku-latest")),
            Ok(Provider::Anthropic)
        );
        assert_eq!(route_of(chat("gemini-2.5-flash")), Ok(Provider::Gemini));
        assert_eq!(route_of(chat("gpt-4.1")), Ok(Provider::Openai));
        assert!(
            route_of(chat("gpt-oss-120b"))
                .unwrap_err()
                .contains("openai model")
        );
        assert!(
            route_of(chat("llama3.1:8b"))
                .unwrap_err()
                .contains("meta model")
        );
        assert!(
            route_of(chat("my-model"))
                .unwrap_err()
                .contains("unknown model")
        );
        let anthropic = |model: &str| json!({"model": model, "system": "s", "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(
            route_of(anthropic("claude-opus-4-1")),
            Ok(Provider::Anthropic)
        );
        assert!(
            route_of(anthropic("gemini-2.5-pro"))
                .unwrap_err()
                .contains("only to Anthropic")
        );
    }

    #[test]
    fn model_names_lose_their_routing_prefix() {
        assert_eq!(
            provider_model("anthropic/claude-3-5-haiku"),
            "claude-3-5-haiku"
        );
        assert_eq!(
            provider_model("models/gemini-2.5-flash"),
            "gemini-2.5-flash"
        );
        assert_eq!(
            provider_model("openrouter/google/gemini-2.5-pro"),
            "gemini-2.5-pro"
        );
        assert_eq!(
            provider_model("ft:gpt-4o-mini:org::id"),
            "ft:gpt-4o-mini:org::id"
        );
        assert_eq!(path_segment("gemini-2.5-flash"), "gemini-2.5-flash");
        assert_eq!(path_segment("a b/c?d"), "a%20b%2Fc%3Fd");
    }

    #[test]
    fn anthropic_bodies_lose_the_generation_fields_only() {
        let (d, s) = doc(
            json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "temperature": 0.2,
            "stream": true, "metadata": {"user_id": "u"}, "system": "be brief",
            "tools": [{"name": "t", "input_schema": {"type": "object"}}], "tool_choice": {"type": "auto"},
            "thinking": {"type": "enabled", "budget_tokens": 2000},
            "messages": [{"role": "user", "content": "hi"}]}),
        );
        let r = request(Provider::Anthropic, &d, &s).unwrap();
        assert_eq!(r.path, "v1/messages/count_tokens");
        assert_eq!(
            r.body,
            json!({"model": "claude-sonnet-4-5", "system": "be brief",
                "tools": [{"name": "t", "input_schema": {"type": "object"}}], "tool_choice": {"type": "auto"},
                "thinking": {"type": "enabled", "budget_tokens": 2000},
                "messages": [{"role": "user", "content": "hi"}]})
        );
        // The keys keep the body's order but for the model, which comes first.
        let keys: Vec<&String> = r.body.as_object().unwrap().keys().collect();
        assert_eq!(keys[0], "model");
    }

    #[test]
    fn a_bare_arrays_system_messages_become_the_top_level_system() {
        let (d, s) = doc(json!([
            {"role": "system", "content": [{"type": "text", "text": "be brief"}]},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
        ]));
        let r = request(Provider::Anthropic, &d, &s).unwrap();
        assert_eq!(
            r.body["system"],
            json!([{"type": "text", "text": "be brief"}])
        );
        let messages = r.body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert!(messages.iter().all(|m| m["role"] != "system"), "{}", r.body);
    }

    #[test]
    fn chat_documents_convert_to_anthropic_like_a_gateway_would() {
        let (d, s) = doc(
            json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "parallel_tool_calls": false,
            "tools": [{"type": "function", "function": {"name": "get", "description": "d", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}],
            "tool_choice": "required",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "image_url", "image_url": {"url": "https://x.example/a.png"}}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"q\":\"a\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "get", "arguments": ""}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r1"},
                {"role": "tool", "tool_call_id": "c2", "content": "r2"},
                {"role": "assistant", "content": "done"}]}),
        );
        let r = request(Provider::Anthropic, &d, &s).unwrap();
        assert_eq!(
            r.body,
            json!({"model": "claude-sonnet-4-5",
                "system": [{"type": "text", "text": "sys"}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "look"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                        {"type": "image", "source": {"type": "url", "url": "https://x.example/a.png"}}]},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "c1", "name": "get", "input": {"q": "a"}},
                        {"type": "tool_use", "id": "c2", "name": "get", "input": {}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "c1", "content": "r1"},
                        {"type": "tool_result", "tool_use_id": "c2", "content": "r2"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": "done"}]}],
                "tools": [{"name": "get", "description": "d", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
                "tool_choice": {"type": "any", "disable_parallel_tool_use": true}})
        );
    }

    #[test]
    fn conversions_that_cannot_be_faithful_say_why() {
        let audio = json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}]});
        let (d, s) = doc(audio);
        assert!(
            request(Provider::Anthropic, &d, &s)
                .unwrap_err()
                .contains("input_audio")
        );
        let url_image = json!({"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://x.example/a.png"}}]}]});
        let (d, s) = doc(url_image);
        assert!(
            request(Provider::Gemini, &d, &s)
                .unwrap_err()
                .contains("image by URL")
        );
        let bad_args = json!({"model": "gemini-2.5-flash", "messages": [{"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]});
        let (d, s) = doc(bad_args);
        assert!(
            request(Provider::Gemini, &d, &s)
                .unwrap_err()
                .contains("not a JSON object")
        );
    }

    #[test]
    fn chat_documents_convert_to_gemini() {
        let (d, s) = doc(
            json!({"model": "gemini-2.5-flash", "tool_choice": {"type": "function", "function": {"name": "get"}},
            "tools": [{"type": "function", "function": {"name": "get", "description": "d", "parameters": {"type": "object", "additionalProperties": false}}}],
            "messages": [
                {"role": "developer", "content": "sys"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "let me look", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"q\":1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 20}"},
                {"role": "user", "content": [{"type": "text", "text": "and?"}, {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}}]},
                {"role": "assistant", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "get", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c2", "content": "plain text"}]}),
        );
        let r = request(Provider::Gemini, &d, &s).unwrap();
        assert_eq!(r.path, "v1beta/models/gemini-2.5-flash:countTokens");
        assert_eq!(
            r.body,
            json!({"generateContentRequest": {
                "model": "models/gemini-2.5-flash",
                "contents": [
                    {"role": "user", "parts": [{"text": "hi"}]},
                    {"role": "model", "parts": [{"text": "let me look"}, {"functionCall": {"name": "get", "args": {"q": 1}}}]},
                    {"role": "user", "parts": [{"functionResponse": {"name": "get", "response": {"temp": 20}}}]},
                    {"role": "user", "parts": [{"text": "and?"}, {"inlineData": {"mimeType": "audio/wav", "data": "UklG"}}]},
                    {"role": "model", "parts": [{"functionCall": {"name": "get", "args": {}}}]},
                    {"role": "user", "parts": [{"functionResponse": {"name": "get", "response": {"output": "plain text"}}}]}],
                "systemInstruction": {"parts": [{"text": "sys"}]},
                "tools": [{"functionDeclarations": [{"name": "get", "description": "d", "parametersJsonSchema": {"type": "object", "additionalProperties": false}}]}],
                "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get"]}}}})
        );
    }

    #[test]
    fn chat_documents_convert_to_responses_input() {
        let (d, s) = doc(
            json!({"model": "gpt-5", "reasoning_effort": "low", "parallel_tool_calls": true,
            "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}, "strict": true}}],
            "tool_choice": {"type": "function", "function": {"name": "get"}},
            "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": true}},
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "https://x.example/a.png", "detail": "low"}}]},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r1"},
                {"role": "assistant", "content": "done"}]}),
        );
        let r = request(Provider::Openai, &d, &s).unwrap();
        assert_eq!(r.path, "responses/input_tokens");
        assert_eq!(
            r.body,
            json!({"model": "gpt-5",
                "input": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": [{"type": "input_text", "text": "look"},
                        {"type": "input_image", "image_url": "https://x.example/a.png", "detail": "low"}]},
                    {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "c1", "output": "r1"},
                    {"role": "assistant", "content": "done"}],
                "tools": [{"type": "function", "name": "get", "parameters": {"type": "object"}, "strict": true}],
                "tool_choice": {"type": "function", "name": "get"},
                "parallel_tool_calls": true,
                "reasoning": {"effort": "low"},
                "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": true}}})
        );
    }

    #[test]
    fn legacy_function_calls_pair_with_their_results() {
        let (d, s) = doc(
            json!({"model": "gpt-5", "functions": [{"name": "f", "parameters": {"type": "object"}}],
            "function_call": {"name": "f"},
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{}"}},
                {"role": "function", "name": "f", "content": "42"}]}),
        );
        let r = request(Provider::Openai, &d, &s).unwrap();
        assert_eq!(r.body["input"][1]["call_id"], "call_1");
        assert_eq!(r.body["input"][2]["call_id"], "call_1");
        assert_eq!(
            r.body["tool_choice"],
            json!({"type": "function", "name": "f"})
        );
        let r = request(Provider::Anthropic, &d, &s).unwrap();
        assert_eq!(r.body["messages"][2]["content"][0]["tool_use_id"], "call_1");
        assert_eq!(r.body["tool_choice"], json!({"type": "tool", "name": "f"}));
    }

    #[test]
    fn keys_go_only_to_their_providers_own_host_or_sdk_variable() {
        let keys = |e: &mut Env| {
            e.openai_api_key = Some("sk-o".into());
            e.exact.anthropic_api_key = Some("sk-a".into());
            e.exact.gemini_api_key = Some("g-gem".into());
            e.exact.google_api_key = Some("g-goo".into());
        };
        // Defaults: each provider's own API, with its key (Google's SDK prefers GOOGLE_API_KEY).
        let p = resolve(&BaseUrlFlags::default(), &env(keys));
        assert_eq!(p.anthropic.endpoint.api_key.as_deref(), Some("sk-a"));
        assert_eq!(p.gemini.endpoint.api_key.as_deref(), Some("g-goo"));
        assert_eq!(p.openai.endpoint.api_key.as_deref(), Some("sk-o"));
        assert_eq!(
            p.anthropic
                .endpoint
                .base_url
                .join("v1/messages/count_tokens"),
            "https://api.anthropic.com/v1/messages/count_tokens"
        );
        // A flag or ctx's own variable naming another server: the keys stay home.
        let flags = BaseUrlFlags {
            anthropic: Some(UrlArg("http://127.0.0.1:9".into())),
            ..Default::default()
        };
        let p = resolve(
            &flags,
            &env(|e| {
                keys(e);
                e.exact.ctx_gemini_base_url = Some("http://127.0.0.1:9".into());
                e.exact.ctx_openai_base_url = Some("http://127.0.0.1:9/v1".into());
            }),
        );
        for t in [&p.anthropic, &p.gemini, &p.openai] {
            assert_eq!(t.endpoint.api_key, None);
            assert!(t.withheld.is_some() && t.missing.is_none());
        }
        // ... unless it is the provider's own API.
        let flags = BaseUrlFlags {
            anthropic: Some(UrlArg("https://api.anthropic.com".into())),
            ..Default::default()
        };
        assert_eq!(
            resolve(&flags, &env(keys))
                .anthropic
                .endpoint
                .api_key
                .as_deref(),
            Some("sk-a")
        );
        // The provider's own variable: the key goes where it points.
        let p = resolve(
            &BaseUrlFlags::default(),
            &env(|e| {
                keys(e);
                e.exact.anthropic_base_url = Some("http://127.0.0.1:9".into());
                e.exact.gemini_base_url = Some("http://127.0.0.1:9".into());
                e.openai_base_url = Some("http://127.0.0.1:9/v1".into());
            }),
        );
        assert_eq!(p.anthropic.endpoint.api_key.as_deref(), Some("sk-a"));
        assert_eq!(p.gemini.endpoint.api_key.as_deref(), Some("g-goo"));
        assert_eq!(p.openai.endpoint.api_key.as_deref(), Some("sk-o"));
        // No key for a provider's own API: nothing to ask.
        let p = resolve(&BaseUrlFlags::default(), &Env::default());
        assert_eq!(p.anthropic.missing, Some("ANTHROPIC_API_KEY"));
        // A bad URL names its source, never itself.
        let e = Providers::resolve(
            &BaseUrlFlags::default(),
            &env(|e| e.exact.anthropic_base_url = Some("u:secret-pw@host".into())),
            Duration::from_secs(1),
            0,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("ANTHROPIC_BASE_URL: "), "{e}");
        assert!(!e.contains("secret-pw"), "{e}");
    }

    #[test]
    fn counts_are_read_from_each_providers_field() {
        assert_eq!(
            parse_count(Provider::Anthropic, r#"{"input_tokens": 14}"#),
            Ok(14)
        );
        assert_eq!(
            parse_count(
                Provider::Gemini,
                r#"{"totalTokens": 9, "promptTokensDetails": []}"#
            ),
            Ok(9)
        );
        assert_eq!(
            parse_count(
                Provider::Openai,
                r#"{"object":"response.input_tokens","input_tokens":3}"#
            ),
            Ok(3)
        );
        assert!(parse_count(Provider::Gemini, r#"{"input_tokens": 3}"#).is_err());
        assert!(parse_count(Provider::Anthropic, r#"{"input_tokens": -3}"#).is_err());
        assert!(parse_count(Provider::Anthropic, r#"{"input_tokens": 1.5}"#).is_err());
        assert!(parse_count(Provider::Anthropic, "<html>").is_err());
    }

    #[test]
    fn exact_env_debug_redacts_keys() {
        let e = ExactEnv {
            anthropic_api_key: Some("sk-ant-secret".into()),
            gemini_base_url: Some("http://u:pw-secret@h".into()),
            ..Default::default()
        };
        let d = format!("{e:?}");
        assert!(
            !d.contains("sk-ant-secret") && !d.contains("pw-secret"),
            "{d}"
        );
    }
}
