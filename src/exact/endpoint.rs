//! Where each provider is reached, with which key ([`Providers::resolve`]), and the asking
//! ([`Providers::count`]): what each provider's entry in the provider table says, applied.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use serde_json::Value;

use super::{Provider, request, route};
use crate::cmd::Env;
use crate::document::Document;
use crate::llm::{BaseUrl, Endpoint, KeyHeader, LlmError, Post, UrlArg};
use crate::settings::Settings;

/// The variables the providers' endpoints read: each provider's base URL variables and keys,
/// as its entry in the provider table names them, captured once at start (`OPENAI_BASE_URL`
/// and `OPENAI_API_KEY` are also [`Env`]'s, for the summarizer). `Debug` redacts the keys and
/// URL credentials.
#[derive(Clone, Default)]
pub struct ExactEnv {
    /// The variables that are set (an empty one is unset), by name.
    vars: BTreeMap<&'static str, String>,
}

impl ExactEnv {
    /// Reads the process environment.
    pub fn from_process() -> ExactEnv {
        let mut vars = BTreeMap::new();
        for p in Provider::ALL {
            for name in p.spec().variables() {
                if let Some(v) = std::env::var(name).ok().filter(|s| !s.is_empty()) {
                    vars.insert(name, v);
                }
            }
        }
        ExactEnv { vars }
    }

    /// The value of variable `name`, if it is set.
    fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// Sets variable `name`, as if the process environment had it.
    #[cfg(test)]
    pub(crate) fn set(&mut self, name: &'static str, value: &str) {
        self.vars.insert(name, value.to_string());
    }
}

impl fmt::Debug for ExactEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("ExactEnv");
        for (&name, value) in &self.vars {
            let is_key = Provider::ALL
                .iter()
                .any(|p| p.spec().key_vars.contains(&name));
            match is_key {
                true => s.field(name, &"[redacted]"),
                false => s.field(name, &UrlArg(value.clone())),
            };
        }
        s.finish()
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
pub(super) struct Target {
    provider: Provider,
    pub(super) endpoint: Endpoint,
    /// The key was not sent because this URL is not one it was meant for: its variable.
    pub(super) withheld: Option<&'static str>,
    /// No key, and the URL is the provider's own API, which refuses every request without
    /// one: the variables that would give it.
    pub(super) missing: Option<String>,
}

/// The providers' endpoints, resolved once per run.
#[derive(Debug, Clone)]
pub struct Providers {
    /// One per provider, in [`Provider::ALL`]'s order.
    targets: Vec<Target>,
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
        let targets = Provider::ALL
            .into_iter()
            .map(|p| target(p, flags, &env.exact, timeout, retries))
            .collect::<Result<_>>()?;
        Ok(Providers { targets })
    }

    pub(super) fn target(&self, p: Provider) -> &Target {
        self.targets
            .iter()
            .find(|t| t.provider == p)
            .expect("every provider is resolved")
    }

    /// The provider's count of `doc`, or why there is none (one line, never holding a key).
    pub fn count(&self, doc: &Document, settings: &Settings) -> Result<Counted, String> {
        let provider = route(doc, settings)?;
        let req = request(provider, doc, settings).map_err(|why| format!("{provider}: {why}"))?;
        let target = self.target(provider);
        if let Some(vars) = &target.missing {
            return Err(format!(
                "{provider}: no key for {} (set {vars})",
                target.endpoint.base_url
            ));
        }
        let spec = provider.spec();
        let post = Post {
            path: &req.path,
            key_header: spec.key_header,
            headers: spec.headers,
            body: &req.body,
        };
        let parse = |text: &str| parse_count(provider, text);
        match crate::llm::post(&target.endpoint, &post, parse) {
            Ok(replied) => Ok(Counted {
                provider,
                tokens: replied.value,
            }),
            Err(e) => Err(format!("{provider}: {}", explain(target, e))),
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
fn explain(target: &Target, e: LlmError) -> String {
    let spec = target.provider.spec();
    match target.withheld {
        Some(var) if matches!(e.status, Some(401 | 403)) => format!(
            "{} ({var} is sent only to https://{} and to {}; name this server there to send it)",
            e.message, spec.own_host, spec.sdk_var
        ),
        _ => e.message,
    }
}

/// One provider's endpoint: the base URL from its flag, else ctx's variable, else the
/// provider's own variable, else its API; its key (the first of its variables that is set)
/// only where that key was meant to go.
fn target(
    provider: Provider,
    flags: &BaseUrlFlags,
    vars: &ExactEnv,
    timeout: Duration,
    retries: u32,
) -> Result<Target> {
    let spec = provider.spec();
    let (text, from, set_for_key) = if let Some(u) = (spec.flag_value)(flags) {
        (u.0.as_str(), spec.flag, false)
    } else if let Some(u) = vars.get(spec.ctx_var) {
        (u, spec.ctx_var, false)
    } else if let Some(u) = vars.get(spec.sdk_var) {
        (u, spec.sdk_var, true)
    } else {
        (spec.default_url, "the default base URL", true)
    };
    let base_url = BaseUrl::parse(text).map_err(|why| anyhow!("{from}: {why}"))?;
    let own = base_url.is_https_host(spec.own_host);
    let fits = set_for_key || own;
    let key = spec
        .key_vars
        .iter()
        .find_map(|&var| vars.get(var).map(|k| (var, k)));
    let sent = key.filter(|_| fits);
    let withheld = key.filter(|_| !fits).map(|(var, _)| var);
    // Credentials in the URL are an `Authorization: Basic` header: a bearer key would be a second.
    let both = spec.key_header == KeyHeader::Bearer && base_url.has_credentials();
    if let Some((var, _)) = sent.filter(|_| both) {
        bail!(
            "{from} holds credentials (user:password@) and {var} is set: both would be the Authorization header; use one"
        );
    }
    let api_key = sent.map(|(_, k)| k.to_string());
    let missing = (api_key.is_none() && own && !base_url.has_credentials())
        .then(|| spec.key_vars.join(" or "));
    Ok(Target {
        provider,
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

/// Reads a 2xx reply's count: the provider's field (`input_tokens`, `totalTokens`), a whole
/// number.
pub(super) fn parse_count(provider: Provider, text: &str) -> Result<u64, String> {
    let field = provider.spec().count_field;
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

#[cfg(test)]
mod tests {
    use super::*;
    use Provider::{Anthropic, Gemini, Openai};

    fn env(f: impl FnOnce(&mut Env)) -> Env {
        let mut e = Env::default();
        f(&mut e);
        e
    }

    fn resolve(flags: &BaseUrlFlags, e: &Env) -> Providers {
        Providers::resolve(flags, e, Duration::from_secs(1), 0).unwrap()
    }

    #[test]
    fn keys_go_only_to_their_providers_own_host_or_sdk_variable() {
        let keys = |e: &mut Env| {
            e.exact.set("OPENAI_API_KEY", "sk-o");
            e.exact.set("ANTHROPIC_API_KEY", "sk-a");
            e.exact.set("GEMINI_API_KEY", "g-gem");
            e.exact.set("GOOGLE_API_KEY", "g-goo");
        };
        // Defaults: each provider's own API, with its key (Google's SDK prefers GOOGLE_API_KEY).
        let p = resolve(&BaseUrlFlags::default(), &env(keys));
        assert_eq!(
            p.target(Anthropic).endpoint.api_key.as_deref(),
            Some("sk-a")
        );
        assert_eq!(p.target(Gemini).endpoint.api_key.as_deref(), Some("g-goo"));
        assert_eq!(p.target(Openai).endpoint.api_key.as_deref(), Some("sk-o"));
        assert_eq!(
            p.target(Anthropic)
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
                e.exact.set("CTX_GEMINI_BASE_URL", "http://127.0.0.1:9");
                e.exact.set("CTX_OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
            }),
        );
        for t in Provider::ALL.map(|x| p.target(x)) {
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
                .target(Anthropic)
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
                e.exact.set("ANTHROPIC_BASE_URL", "http://127.0.0.1:9");
                e.exact.set("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9");
                e.exact.set("OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
            }),
        );
        assert_eq!(
            p.target(Anthropic).endpoint.api_key.as_deref(),
            Some("sk-a")
        );
        assert_eq!(p.target(Gemini).endpoint.api_key.as_deref(), Some("g-goo"));
        assert_eq!(p.target(Openai).endpoint.api_key.as_deref(), Some("sk-o"));
        // No key for a provider's own API: nothing to ask.
        let p = resolve(&BaseUrlFlags::default(), &Env::default());
        assert_eq!(
            p.target(Anthropic).missing.as_deref(),
            Some("ANTHROPIC_API_KEY")
        );
        // A bad URL names its source, never itself.
        let e = Providers::resolve(
            &BaseUrlFlags::default(),
            &env(|e| e.exact.set("ANTHROPIC_BASE_URL", "u:secret-pw@host")),
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
        let mut e = ExactEnv::default();
        e.set("ANTHROPIC_API_KEY", "sk-ant-secret");
        e.set("GOOGLE_GEMINI_BASE_URL", "http://u:pw-secret@h");
        let d = format!("{e:?}");
        assert!(
            !d.contains("sk-ant-secret") && !d.contains("pw-secret"),
            "{d}"
        );
    }
}
