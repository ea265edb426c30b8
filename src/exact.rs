//! `count --exact`: the providers' own token counts, for documents ctx can only estimate.
//!
//! Everything ctx knows of a provider is its entry in one table (`Provider::spec`): the
//! models it counts for, its host, base URL flag and variables, key variables and header, its
//! endpoint's path and reply field, and the dialects it takes with the function writing each as
//! its request. From that table this module decides which provider a document is sent to
//! ([`route`]) and writes the request ([`request`]: the Anthropic body as it is, or an OpenAI
//! Chat Completions document converted, through `chat`'s one reading of it, by
//! `anthropic`, `gemini` or `responses`); `endpoint` resolves where each provider is
//! reached with which key, and asks. The HTTP itself (retries, timeouts, redirects refused,
//! keys and URL credentials scrubbed from every error) is [`crate::llm::post`]'s.
//!
//! Keys follow the summarizer's rule (SPEC §4): a provider's key goes only to that provider's
//! own host over https, or to the base URL that provider's own variable names
//! (`ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`, `OPENAI_BASE_URL`); never to a URL named by
//! a flag, a `CTX_*_BASE_URL` variable or a profile. Nothing here prints a key, and nothing here
//! runs unless `--exact` asked for it.

mod anthropic;
mod chat;
mod endpoint;
mod gemini;
pub(crate) mod responses;

use std::fmt;

use serde_json::{Map, Value};

use crate::document::{Dialect, Document};
use crate::llm::{KeyHeader, UrlArg};
use crate::models::Model;
use crate::settings::Settings;

pub use endpoint::{BaseUrlFlags, Counted, ExactEnv, Providers};

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

/// A function writing a document as a provider's request body: `(document, settings, the
/// model as the provider knows it)`, or why the document cannot be written faithfully.
type Body = fn(&Document, &Settings, &str) -> Result<Value, String>;

/// What ctx knows of one provider's counting endpoint. Adding a provider is one more of these,
/// its [`Provider`] variant (the compiler asks for its arm in [`Provider::spec`]), and its
/// base URL flag (`count`'s `--*-base-url`, a field of [`BaseUrlFlags`]).
struct Spec {
    /// The name in reports (`"source"`) and messages.
    name: &'static str,
    /// The provider in a sentence.
    title: &'static str,
    /// Its models in a sentence ("a Claude model").
    models: &'static str,
    /// The model table's `provider` of the models it counts for ...
    maker: &'static str,
    /// ... but for these (name prefixes: open-weight models its API does not serve).
    not_served: &'static [&'static str],
    /// The provider's own API, where its key may go whatever named the URL.
    own_host: &'static str,
    /// The default base URL, as the provider's SDK writes it: Anthropic's and Google's without
    /// the version path (the SDKs add it), OpenAI's with it.
    default_url: &'static str,
    /// The flag naming the base URL (the key is not sent to it), and its value.
    flag: &'static str,
    flag_value: fn(&BaseUrlFlags) -> Option<&UrlArg>,
    /// ctx's own variable for the base URL (the key is not sent to it).
    ctx_var: &'static str,
    /// The variable the provider's own SDK reads for its base URL (the key goes to it).
    sdk_var: &'static str,
    /// The variables holding the key, the one the provider's SDK prefers first.
    key_vars: &'static [&'static str],
    /// How the key is sent.
    key_header: KeyHeader,
    /// The other headers every request carries.
    headers: &'static [(&'static str, &'static str)],
    /// The counting endpoint under the base URL; `{model}` is the model, as a path segment.
    path: &'static str,
    /// The reply's whole-number field holding the count.
    count_field: &'static str,
    /// The dialects it counts, each with the function writing such a document as its request.
    bodies: &'static [(Dialect, Body)],
}

impl Spec {
    /// Whether it counts for `model`.
    fn serves(&self, model: &Model) -> bool {
        model.provider == self.maker && !self.not_served.iter().any(|p| model.name.starts_with(p))
    }

    /// The function writing a `dialect` document as its request, if it takes one.
    fn body(&self, dialect: Dialect) -> Option<Body> {
        self.bodies
            .iter()
            .find_map(|&(d, body)| (d == dialect).then_some(body))
    }

    /// The variables it reads: base URLs, then keys.
    fn variables(&self) -> impl Iterator<Item = &'static str> {
        [self.ctx_var, self.sdk_var]
            .into_iter()
            .chain(self.key_vars.iter().copied())
    }
}

const ANTHROPIC: Spec = Spec {
    name: "anthropic",
    title: "Anthropic",
    models: "Claude",
    maker: "anthropic",
    not_served: &[],
    own_host: "api.anthropic.com",
    default_url: "https://api.anthropic.com",
    flag: "--anthropic-base-url",
    flag_value: |f| f.anthropic.as_ref(),
    ctx_var: "CTX_ANTHROPIC_BASE_URL",
    sdk_var: "ANTHROPIC_BASE_URL",
    key_vars: &["ANTHROPIC_API_KEY"],
    key_header: KeyHeader::Named("x-api-key"),
    headers: &[("anthropic-version", "2023-06-01")],
    path: "v1/messages/count_tokens",
    count_field: "input_tokens",
    bodies: &[
        (Dialect::Anthropic, anthropic::body),
        (Dialect::Openai, anthropic::from_chat),
    ],
};

const GEMINI: Spec = Spec {
    name: "gemini",
    title: "Gemini",
    models: "Gemini",
    maker: "google",
    not_served: &[],
    own_host: "generativelanguage.googleapis.com",
    default_url: "https://generativelanguage.googleapis.com",
    flag: "--gemini-base-url",
    flag_value: |f| f.gemini.as_ref(),
    ctx_var: "CTX_GEMINI_BASE_URL",
    sdk_var: "GOOGLE_GEMINI_BASE_URL",
    // Google's SDK prefers GOOGLE_API_KEY to GEMINI_API_KEY.
    key_vars: &["GOOGLE_API_KEY", "GEMINI_API_KEY"],
    key_header: KeyHeader::Named("x-goog-api-key"),
    headers: &[],
    path: "v1beta/models/{model}:countTokens",
    count_field: "totalTokens",
    bodies: &[(Dialect::Openai, gemini::from_chat)],
};

const OPENAI: Spec = Spec {
    name: "openai",
    title: "OpenAI",
    models: "OpenAI",
    maker: "openai",
    not_served: &["gpt-oss"],
    own_host: "api.openai.com",
    default_url: "https://api.openai.com/v1",
    flag: "--openai-base-url",
    flag_value: |f| f.openai.as_ref(),
    ctx_var: "CTX_OPENAI_BASE_URL",
    sdk_var: "OPENAI_BASE_URL",
    key_vars: &["OPENAI_API_KEY"],
    key_header: KeyHeader::Bearer,
    headers: &[],
    path: "responses/input_tokens",
    count_field: "input_tokens",
    bodies: &[
        (Dialect::Openai, responses::from_chat),
        (Dialect::Responses, responses::body),
    ],
};

impl Provider {
    /// Every provider, in the order their endpoints are resolved.
    pub const ALL: [Provider; 3] = [Provider::Anthropic, Provider::Gemini, Provider::Openai];

    /// Everything ctx knows of the provider.
    fn spec(self) -> &'static Spec {
        match self {
            Provider::Anthropic => &ANTHROPIC,
            Provider::Gemini => &GEMINI,
            Provider::Openai => &OPENAI,
        }
    }

    /// The name in reports (`"source"`) and messages.
    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which provider counts `doc`: the one that serves its model (the model table's provider:
/// Anthropic for Claude, the Gemini API for Google's models, OpenAI for OpenAI's except the
/// open-weight gpt-oss), if it takes the document's dialect. An Anthropic Messages document
/// goes only to Anthropic; an OpenAI Chat Completions document goes to any of the three,
/// converted. Other models have no counting endpoint: the error says so.
pub fn route(doc: &Document, settings: &Settings) -> Result<Provider, String> {
    let name = &settings.model_name;
    let all = || Provider::ALL.into_iter().map(Provider::spec);
    let Some(model) = settings.model else {
        let models: Vec<_> = all().map(|s| s.models).collect();
        return Err(format!(
            "no provider to ask for unknown model {name:?} (pass -m with a {} model)",
            in_words(&models, "or")
        ));
    };
    let Some(provider) = Provider::ALL.into_iter().find(|p| p.spec().serves(model)) else {
        let titles: Vec<_> = all().map(|s| s.title).collect();
        return Err(format!(
            "no provider counting endpoint for {name:?} ({} model; only {} have one)",
            model.provider,
            in_words(&titles, "and")
        ));
    };
    if provider.spec().body(doc.dialect).is_none() {
        let takers = || all().filter(|s| s.body(doc.dialect).is_some());
        let titles: Vec<_> = takers().map(|s| s.title).collect();
        let models: Vec<_> = takers().map(|s| s.models).collect();
        return Err(format!(
            "{} is sent only to {}'s count, and {name:?} is not a {} model",
            document_name(doc.dialect),
            in_words(&titles, "or"),
            in_words(&models, "or")
        ));
    }
    Ok(provider)
}

/// A count request for `model` holding the body's fields named in `keys`, in the body's order
/// (the fields that change the count; the others only shape the reply).
fn counted_fields(
    model: &str,
    body: Option<&Map<String, Value>>,
    keys: &[&str],
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("model".into(), Value::String(model.to_string()));
    for (k, v) in body.into_iter().flatten() {
        if keys.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// A document of `dialect`, in a sentence.
fn document_name(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Openai => "an OpenAI Chat Completions document",
        Dialect::Anthropic => "an Anthropic Messages document",
        Dialect::Responses => "an OpenAI Responses document",
    }
}

/// `words` in a sentence: `A`, `A or B`, `A, B or C` (with `or`).
fn in_words(words: &[&str], or: &str) -> String {
    match words {
        [rest @ .., last] if !rest.is_empty() => format!("{} {or} {last}", rest.join(", ")),
        _ => words.join(""),
    }
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
    let spec = provider.spec();
    let Some(body) = spec.body(doc.dialect) else {
        return Err(format!("{} is not converted", document_name(doc.dialect)));
    };
    let model = provider_model(&settings.model_name);
    Ok(CountRequest {
        path: spec.path.replace("{model}", &path_segment(&model)),
        body: body(doc, settings, &model)?,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::ModelArgs;
    use serde_json::json;

    /// `v` as a document, and its settings as `count` resolves them.
    pub(super) fn doc(v: Value) -> (Document, Settings) {
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
    fn routing_refusals_name_the_providers_in_words() {
        let refusal = |v: Value| {
            let (d, s) = doc(v);
            route(&d, &s).unwrap_err()
        };
        let chat =
            |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(
            refusal(chat("my-model")),
            "no provider to ask for unknown model \"my-model\" (pass -m with a Claude, Gemini or OpenAI model)"
        );
        assert_eq!(
            refusal(chat("llama3.1:8b")),
            "no provider counting endpoint for \"llama3.1:8b\" (meta model; only Anthropic, Gemini and OpenAI have one)"
        );
        let anthropic = json!({"model": "gpt-4.1", "system": "s", "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(
            refusal(anthropic),
            "an Anthropic Messages document is sent only to Anthropic's count, and \"gpt-4.1\" is not a Claude model"
        );
        assert_eq!(in_words(&["A"], "or"), "A");
        assert_eq!(in_words(&["A", "B"], "or"), "A or B");
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
}
