//! The model table: which encoding, formatting rules and window a model name means.
//!
//! The table is data (`data/models.json`, compiled in) with a source for every row. This module
//! parses it once and resolves a user's model name: exact match, else the longest prefix, after
//! stripping `ft:` fine-tune wrappers and `provider/` routing prefixes. It knows nothing about
//! documents or counting.

use std::sync::OnceLock;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::image::OpenAiImageScheme;
use crate::tokenizer::Encoding;

const TABLE: &str = include_str!("../data/models.json");

/// How a model prices images.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ImageRule {
    /// OpenAI's tile or patch formulas.
    OpenAi(OpenAiImageScheme),
    /// Anthropic's width × height / 750 after resizing.
    Anthropic,
}

/// One row of the model table, as counting uses it. (Its output limit and the source of its
/// numbers are read from the rows themselves: `ctx models` prints them, the tests check them.)
#[derive(Clone, Debug)]
pub struct Model {
    /// The name or prefix in the table.
    pub name: String,
    /// `openai`, `anthropic`, `google`, `meta`, `mistral`, `qwen` or `deepseek`.
    pub provider: String,
    /// The encoding ctx counts with.
    pub encoding: Encoding,
    /// Most input tokens the model accepts.
    pub context_window: u64,
    /// Whether counts reproduce the provider's (true only for OpenAI chat models).
    pub exact: bool,
    /// Formatting tokens per message (3 for current OpenAI models).
    pub message_tokens: i64,
    /// Tokens added for a `name` field (1, or -1 for gpt-3.5-turbo-0301).
    pub name_tokens: i64,
    /// Image pricing, when the model takes images.
    pub image: Option<ImageRule>,
    /// Tokens the provider adds to the system prompt when tools are defined.
    pub tool_overhead: u64,
    /// Whether the model accepts `input_audio` parts.
    pub audio: bool,
}

#[derive(Deserialize)]
struct RawTable {
    default_model: String,
    default_anthropic_model: String,
    models: Vec<RawModel>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    name: String,
    provider: String,
    encoding: String,
    context_window: u64,
    max_output: u64,
    exact: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    image: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_overhead: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    audio: bool,
    source: String,
}

struct Table {
    default_model: String,
    default_anthropic_model: String,
    models: Vec<Model>,
    #[cfg_attr(
        not(feature = "cli"),
        expect(dead_code, reason = "printed by `ctx models`")
    )]
    raw: Value,
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| {
        parse_table(TABLE).expect("data/models.json is valid (checked by a unit test)")
    })
}

fn parse_table(text: &str) -> Result<Table> {
    let raw: RawTable = serde_json::from_str(text).context("data/models.json")?;
    let mut models = Vec::with_capacity(raw.models.len());
    let mut rows = Vec::with_capacity(raw.models.len());
    for m in raw.models {
        let encoding = Encoding::parse(&m.encoding).with_context(|| format!("model {}", m.name))?;
        let image = match &m.image {
            None => None,
            Some(Value::String(s)) if s == "anthropic" => Some(ImageRule::Anthropic),
            Some(Value::Object(o)) if o.contains_key("tiles") => {
                let t: [u32; 2] = serde_json::from_value(o["tiles"].clone())
                    .with_context(|| format!("model {}: image.tiles", m.name))?;
                Some(ImageRule::OpenAi(OpenAiImageScheme::Tiles {
                    base: t[0],
                    tile: t[1],
                }))
            }
            Some(Value::Object(o)) if o.contains_key("patches") => {
                let multiplier = o["patches"]
                    .as_f64()
                    .with_context(|| format!("model {}: image.patches", m.name))?;
                Some(ImageRule::OpenAi(OpenAiImageScheme::Patches { multiplier }))
            }
            Some(other) => anyhow::bail!("model {}: bad image rule {other}", m.name),
        };
        rows.push(serde_json::to_value(&m)?);
        models.push(Model {
            name: m.name,
            provider: m.provider,
            encoding,
            context_window: m.context_window,
            exact: m.exact,
            message_tokens: m.message_tokens.unwrap_or(3),
            name_tokens: m.name_tokens.unwrap_or(1),
            image,
            tool_overhead: m.tool_overhead.unwrap_or(0),
            audio: m.audio,
        });
    }
    Ok(Table {
        default_model: raw.default_model,
        default_anthropic_model: raw.default_anthropic_model,
        models,
        raw: Value::Array(rows),
    })
}

/// The model used for an OpenAI document when neither flag, body nor `CTX_MODEL` names one.
pub fn default_model() -> &'static str {
    &table().default_model
}

/// The model used for an Anthropic document when neither flag, body nor `CTX_MODEL` names one
/// (the current Claude Sonnet).
pub fn default_anthropic_model() -> &'static str {
    &table().default_anthropic_model
}

/// Every row of the table, as `ctx models` prints it.
#[cfg(feature = "cli")]
pub fn table_json() -> Value {
    table().raw.clone()
}

/// Resolves a model name (`gpt-4o-2024-08-06`, `ft:gpt-4o-mini:org::id`, `openai/gpt-4o`, ...).
pub fn lookup(name: &str) -> Option<&'static Model> {
    let base = base_name(name);
    let models = &table().models;
    if let Some(m) = models.iter().find(|m| m.name == base) {
        return Some(m);
    }
    models
        .iter()
        .filter(|m| {
            base.starts_with(&m.name) && base[m.name.len()..].starts_with(['-', '.', ':', '@', '_'])
        })
        .max_by_key(|m| m.name.len())
}

/// Strips routing and fine-tune wrappers: `ft:BASE:org::id` → BASE, `vendor/BASE` → BASE.
fn base_name(name: &str) -> String {
    let mut s = name.trim();
    if let Some(rest) = s.strip_prefix("ft:") {
        s = rest.split(':').next().unwrap_or(rest);
    }
    if let Some((_, last)) = s.rsplit_once('/') {
        s = last;
    }
    s.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_parses_and_names_are_unique() {
        let t = parse_table(TABLE).unwrap();
        let mut names: Vec<&str> = t.models.iter().map(|m| m.name.as_str()).collect();
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len(), "duplicate model names");
        assert!(lookup(&t.default_model).is_some());
        let claude = lookup(&t.default_anthropic_model).unwrap();
        assert_eq!(claude.provider, "anthropic");
        let raw: RawTable = serde_json::from_str(TABLE).unwrap();
        for m in &raw.models {
            assert!(!m.source.is_empty(), "{} has no source", m.name);
            assert!(m.context_window > 0 && m.max_output > 0, "{}", m.name);
            if m.provider != "openai" {
                assert!(!m.exact, "{} is not OpenAI and cannot be exact", m.name);
            }
        }
    }

    #[test]
    fn resolves_prefixes_snapshots_and_fine_tunes() {
        assert_eq!(lookup("gpt-4o").unwrap().name, "gpt-4o");
        assert_eq!(lookup("gpt-4o-2024-08-06").unwrap().name, "gpt-4o");
        assert_eq!(
            lookup("gpt-4o-mini-2024-07-18").unwrap().name,
            "gpt-4o-mini"
        );
        assert_eq!(
            lookup("ft:gpt-4o-mini-2024-07-18:acme::abc123")
                .unwrap()
                .name,
            "gpt-4o-mini"
        );
        assert_eq!(lookup("openai/gpt-4.1-nano").unwrap().name, "gpt-4.1-nano");
        assert_eq!(lookup("gpt-4-0613").unwrap().name, "gpt-4");
        assert_eq!(
            lookup("gpt-4-turbo-2024-04-09").unwrap().name,
            "gpt-4-turbo"
        );
        assert_eq!(lookup("gpt-3.5-turbo-0301").unwrap().message_tokens, 4);
        assert_eq!(
            lookup("claude-sonnet-4-20250514").unwrap().name,
            "claude-sonnet-4"
        );
        assert_eq!(lookup("claude-opus-4-8").unwrap().name, "claude-opus-4");
        assert_eq!(
            lookup("anthropic/claude-3-5-haiku-latest").unwrap().name,
            "claude-3-5-haiku"
        );
        assert_eq!(lookup("llama3.1:8b").unwrap().name, "llama3.1");
        assert_eq!(lookup("o3-mini-2025-01-31").unwrap().name, "o3-mini");
        assert!(lookup("gpt-4ox").is_none());
        assert!(lookup("my-local-model").is_none());
    }
}
