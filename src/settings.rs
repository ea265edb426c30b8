//! What a document is counted against: model, encoding, formatting rules, window and budget.
//!
//! Resolves SPEC §3's precedence (flag, body `model`, `CTX_MODEL`, default), the encoding
//! override, the context window and `--budget N|P%` / reserve arithmetic, once per document.
//! Pure: the environment is read by the caller and passed in.

#[cfg(feature = "cli")]
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

#[cfg(feature = "cli")]
use anyhow::Context;
use anyhow::{Result, bail};
use serde_json::Value;

use crate::document::Dialect;
use crate::image::OpenAiImageScheme;
#[cfg(feature = "cli")]
use crate::input::{ByteSize, RawDocument, read_flag_file};
use crate::models::{self, ImageRule, Model};
use crate::tokenizer::Encoding;

/// Model flags shared by every command that counts.
#[cfg(feature = "cli")]
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ModelArgs {
    /// Model to count for (beats the body's `model` and $CTX_MODEL; default gpt-4o for OpenAI
    /// documents, claude-sonnet-4 for Anthropic ones).
    #[arg(short = 'm', long, value_name = "NAME")]
    pub model: Option<String>,

    /// Tokenizer encoding, overriding the model's (o200k_base, o200k_harmony, cl100k_base,
    /// p50k_base, r50k_base, approx).
    #[arg(long, value_name = "NAME", value_parser = parse_encoding)]
    pub encoding: Option<Encoding>,

    /// Context window in tokens, overriding the model table (needed for unknown models; at
    /// least 1). Commands that write requests never aim above the window minus the reserve.
    #[arg(long, value_name = "N", value_parser = parse_window)]
    pub context_window: Option<u64>,

    /// Tool definitions (a JSON array, or an object with `tools`/`functions`) counted with a
    /// bare message array.
    #[arg(long, value_name = "FILE")]
    pub tools: Option<std::path::PathBuf>,

    /// Size assumed for images whose dimensions cannot be read (remote URLs).
    #[arg(long, value_name = "WxH", default_value = "1024x1024", value_parser = parse_size)]
    pub image_size: (u32, u32),
}

/// What a document is counted for beyond what it says itself: the model flags, without clap
/// (`--tools` is read by the command, once per run).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelOptions {
    /// The model, beating the body's and `$CTX_MODEL`.
    pub model: Option<String>,
    /// The encoding, overriding the model's.
    pub encoding: Option<Encoding>,
    /// The context window, overriding the model table's.
    pub context_window: Option<u64>,
    /// The size assumed for images whose dimensions cannot be read.
    pub image_size: (u32, u32),
}

impl Default for ModelOptions {
    /// Nothing overridden, and `--image-size`'s default.
    fn default() -> ModelOptions {
        ModelOptions {
            model: None,
            encoding: None,
            context_window: None,
            image_size: (1024, 1024),
        }
    }
}

#[cfg(feature = "cli")]
impl From<&ModelArgs> for ModelOptions {
    fn from(args: &ModelArgs) -> ModelOptions {
        ModelOptions {
            model: args.model.clone(),
            encoding: args.encoding,
            context_window: args.context_window,
            image_size: args.image_size,
        }
    }
}

impl From<&ModelOptions> for ModelOptions {
    fn from(options: &ModelOptions) -> ModelOptions {
        options.clone()
    }
}

#[cfg(feature = "cli")]
fn parse_encoding(s: &str) -> Result<Encoding, String> {
    Encoding::parse(s).map_err(|e| e.to_string())
}

#[cfg(feature = "cli")]
fn parse_window(s: &str) -> Result<u64, String> {
    match s.trim().replace('_', "").parse::<u64>() {
        Ok(0) => Err("a context window of 0 tokens holds nothing; give the model's window".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a token count")),
    }
}

#[cfg(feature = "cli")]
fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("'{s}' is not WIDTHxHEIGHT"))?;
    let w: u32 = w
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not WIDTHxHEIGHT"))?;
    let h: u32 = h
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not WIDTHxHEIGHT"))?;
    if w == 0 || h == 0 {
        return Err(format!("'{s}': sizes must be positive"));
    }
    Ok((w, h))
}

/// A token budget as the user wrote it: a number of tokens, or a share of the model's context
/// window. Parses from `8000` (`8_000`) or `80%`; a number converts into one (`8000.into()`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// `N`: a token count.
    Tokens(u64),
    /// `P%`: a share of the context window.
    Percent(f64),
}

impl FromStr for Budget {
    type Err = String;
    fn from_str(s: &str) -> Result<Budget, String> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("'{s}' is not a token count or a percentage like 80%"))?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(format!("'{s}': a percentage must be in (0, 100]"));
            }
            Ok(Budget::Percent(p))
        } else {
            t.replace('_', "")
                .parse::<u64>()
                .map(Budget::Tokens)
                .map_err(|_| format!("'{s}' is not a token count or a percentage like 80%"))
        }
    }
}

impl From<u64> for Budget {
    /// A budget of `tokens` tokens.
    fn from(tokens: u64) -> Budget {
        Budget::Tokens(tokens)
    }
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Budget::Tokens(n) => write!(f, "{n}"),
            Budget::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Tokens kept for the reply when neither `--reserve` nor the body's output limit gives one.
pub const DEFAULT_RESERVE: u64 = 4096;

/// The most input tokens a request may hold: the window minus the reserve for the reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputLimit {
    /// window − reserve.
    pub tokens: u64,
    /// The context window.
    pub window: u64,
    /// Tokens kept free for the reply.
    pub reserve: u64,
    /// Where the reserve comes from, for messages.
    pub source: &'static str,
}

/// The tools file given with `--tools`, read once per run, at most `limit` bytes
/// (`--max-input-size`).
#[cfg(feature = "cli")]
pub fn read_tools_file(path: &Path, limit: ByteSize) -> Result<Arc<Value>> {
    let flag = || format!("--tools {}", path.display());
    let text = read_flag_file(path, limit).with_context(flag)?;
    if text.trim().is_empty() {
        bail!("{}: the file is empty", flag());
    }
    let v: Value = RawDocument::whole(text.into_bytes())
        .parse()
        .with_context(flag)?;
    if !is_tool_definitions(&v) {
        bail!(
            "--tools {}: expected an array of tool definitions or an object with `tools`",
            path.display()
        );
    }
    Ok(Arc::new(v))
}

/// Whether `v` holds tool definitions as `--tools` takes them: an array of definitions, or an
/// object with a `tools` or `functions` array.
pub fn is_tool_definitions(v: &Value) -> bool {
    v.is_array()
        || v.get("tools").is_some_and(Value::is_array)
        || v.get("functions").is_some_and(Value::is_array)
}

/// Everything a document is counted against.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The model name as given (flag, body, environment or default).
    pub model_name: String,
    /// The model table row, when the name is known.
    pub model: Option<&'static Model>,
    /// The encoding counted with.
    pub encoding: Encoding,
    /// Input window, from `--context-window` or the table.
    pub context_window: Option<u64>,
    /// Formatting tokens per message.
    pub message_tokens: i64,
    /// Tokens added per `name` field.
    pub name_tokens: i64,
    /// Image pricing.
    pub image: ImageRule,
    /// Whether `image` comes from the model (false: a stand-in rule, counts are estimates).
    pub image_known: bool,
    /// Provider's system-prompt overhead when tools are defined.
    pub tool_overhead: u64,
    /// Whether the model reproduces provider counts.
    pub exact: bool,
    /// Image size assumed when unknown.
    pub image_size: (u32, u32),
    /// `--tools` definitions for bare arrays.
    pub extra_tools: Option<Arc<Value>>,
}

impl Settings {
    /// Resolves the settings for a document in `dialect` whose body names `body_model`;
    /// `env_model` is `$CTX_MODEL`. Without a model from any of them, the dialect's default
    /// (gpt-4o, or the current Claude Sonnet for Anthropic documents). Warnings (unknown model)
    /// are pushed to `warnings`.
    pub fn resolve(
        options: impl Into<ModelOptions>,
        body_model: Option<&str>,
        env_model: Option<&str>,
        dialect: Dialect,
        extra_tools: Option<Arc<Value>>,
        warnings: &mut Vec<String>,
    ) -> Settings {
        let args: ModelOptions = options.into();
        let model_name = args
            .model
            .as_deref()
            .or(body_model)
            .or(env_model.filter(|s| !s.is_empty()))
            .unwrap_or(match dialect {
                Dialect::Openai | Dialect::Responses => models::default_model(),
                Dialect::Anthropic => models::default_anthropic_model(),
            })
            .to_string();
        let model = models::lookup(&model_name);
        if model.is_none() {
            warnings.push(format!(
                "unknown model {model_name:?}: counting with {} as an estimate{}",
                args.encoding.unwrap_or(Encoding::O200kBase),
                if args.context_window.is_some() {
                    ""
                } else {
                    "; pass --context-window N to give it a window"
                }
            ));
        }
        let encoding = args
            .encoding
            .or(model.map(|m| m.encoding))
            .unwrap_or(Encoding::O200kBase);
        let (image, image_known) = match model.and_then(|m| m.image) {
            Some(rule) => (rule, true),
            None => (
                ImageRule::OpenAi(OpenAiImageScheme::Tiles {
                    base: 85,
                    tile: 170,
                }),
                false,
            ),
        };
        Settings {
            model,
            encoding,
            context_window: args.context_window.or(model.map(|m| m.context_window)),
            message_tokens: model.map_or(3, |m| m.message_tokens),
            name_tokens: model.map_or(1, |m| m.name_tokens),
            image,
            image_known,
            tool_overhead: model.map_or(0, |m| m.tool_overhead),
            exact: model.is_some_and(|m| m.exact)
                && encoding.is_exact()
                && args
                    .encoding
                    .is_none_or(|e| e == model.map_or(e, |m| m.encoding)),
            image_size: args.image_size,
            extra_tools,
            model_name,
        }
    }

    /// Whether the model is one of Anthropic's: its counts follow Anthropic's estimates (tool
    /// definitions with the tool-use system prompt) whatever the document's dialect.
    pub fn is_anthropic_model(&self) -> bool {
        self.model.is_some_and(|m| m.provider == "anthropic")
    }

    /// Whether a model accepts `input_audio` parts (unknown models are given the benefit).
    pub fn accepts_audio(name: Option<&str>) -> bool {
        match name.map(models::lookup) {
            Some(Some(m)) => m.audio,
            Some(None) => true,
            None => false,
        }
    }

    /// The window, or an error saying how to give one.
    pub fn window(&self) -> Result<u64> {
        match self.context_window {
            Some(w) => Ok(w),
            None => bail!(
                "model {:?} has no known context window; pass --context-window N",
                self.model_name
            ),
        }
    }

    /// Resolves a budget: `N` as is, `P%` of the window.
    pub fn budget_tokens(&self, b: Budget) -> Result<u64> {
        Ok(match b {
            Budget::Tokens(n) => n,
            Budget::Percent(p) => (self.window()? as f64 * p / 100.0).floor() as u64,
        })
    }

    /// The budget commands use without `--budget`: window − reserve, where the reserve is
    /// `--reserve`, else the body's output limit, else 4096.
    pub fn default_budget(
        &self,
        reserve: Option<u64>,
        body_max_tokens: Option<(u64, &'static str)>,
    ) -> Result<u64> {
        match self.input_limit(reserve, body_max_tokens)? {
            Some(limit) => Ok(limit.tokens),
            // No window: the error that says how to give one.
            None => self.window(),
        }
    }

    /// The most input a request may hold: the window minus the reserve (`--reserve`, else the
    /// body's output limit, else 4096). `None` when the window is unknown; an error when the
    /// reserve leaves nothing.
    pub fn input_limit(
        &self,
        reserve: Option<u64>,
        body_max_tokens: Option<(u64, &'static str)>,
    ) -> Result<Option<InputLimit>> {
        let Some(window) = self.context_window else {
            return Ok(None);
        };
        let (reserve, source) = match (reserve, body_max_tokens) {
            (Some(r), _) => (r, "--reserve"),
            (None, Some((m, source))) => (m, source),
            (None, None) => (DEFAULT_RESERVE, "default; --reserve sets it"),
        };
        if reserve >= window {
            bail!(
                "the reserve ({reserve} tokens, {source}) leaves nothing of the {window}-token window"
            );
        }
        Ok(Some(InputLimit {
            tokens: window - reserve,
            window,
            reserve,
            source,
        }))
    }

    /// Resolves a budget or trigger of a command that writes requests, lowered to the input
    /// limit with a warning when it is above it (the provider would reject such a request).
    /// `flag` names the flag in the warning.
    pub fn request_tokens(
        &self,
        flag: &str,
        b: Budget,
        limit: Option<&InputLimit>,
        warnings: &mut Vec<String>,
    ) -> Result<u64> {
        let tokens = self.budget_tokens(b)?;
        match limit {
            Some(l) if tokens > l.tokens => {
                let given = match b {
                    Budget::Tokens(_) => format!("{flag} {tokens}"),
                    Budget::Percent(_) => format!("{flag} {b} ({tokens} tokens)"),
                };
                warnings.push(format!(
                    "{given} is over what the {}-token window of {} holds with {} tokens kept for the reply ({}): lowered to {}, since the provider would reject a larger request",
                    l.window, self.model_name, l.reserve, l.source, l.tokens
                ));
                Ok(l.tokens)
            }
            _ => Ok(tokens),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(
        args: &ModelOptions,
        body: Option<&str>,
        env: Option<&str>,
    ) -> (Settings, Vec<String>) {
        let mut w = Vec::new();
        let s = Settings::resolve(args, body, env, Dialect::Openai, None, &mut w);
        (s, w)
    }

    #[test]
    fn model_precedence_is_flag_body_env_default() {
        let flag = ModelOptions {
            model: Some("gpt-4".into()),
            ..Default::default()
        };
        assert_eq!(
            settings(&flag, Some("gpt-4o-mini"), Some("o3"))
                .0
                .model_name,
            "gpt-4"
        );
        let none = ModelOptions::default();
        assert_eq!(
            settings(&none, Some("gpt-4o-mini"), Some("o3"))
                .0
                .model_name,
            "gpt-4o-mini"
        );
        assert_eq!(settings(&none, None, Some("o3")).0.model_name, "o3");
        assert_eq!(settings(&none, None, None).0.model_name, "gpt-4o");
    }

    /// SPEC §3: an Anthropic document that names no model is counted and windowed as the
    /// current Claude Sonnet, not as gpt-4o.
    #[test]
    fn anthropic_documents_default_to_claude() {
        let none = ModelOptions::default();
        let s = Settings::resolve(&none, None, None, Dialect::Anthropic, None, &mut Vec::new());
        assert_eq!(s.model_name, "claude-sonnet-4");
        assert!(s.is_anthropic_model());
        assert_eq!(s.context_window, Some(200_000));
        // Anything that names a model still wins.
        let s = Settings::resolve(
            &none,
            None,
            Some("o3"),
            Dialect::Anthropic,
            None,
            &mut Vec::new(),
        );
        assert_eq!(s.model_name, "o3");
    }

    #[test]
    fn budgets_over_the_window_minus_the_reserve_are_lowered() {
        let (s, _) = settings(&ModelOptions::default(), Some("gpt-4o"), None);
        let limit = s
            .input_limit(None, Some((16384, "the body's max_tokens")))
            .unwrap()
            .unwrap();
        assert_eq!(limit.tokens, 128_000 - 16384);
        let mut w = Vec::new();
        let t = s
            .request_tokens("--trigger", Budget::Percent(95.0), Some(&limit), &mut w)
            .unwrap();
        assert_eq!(t, 128_000 - 16384);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with("--trigger 95% (121600 tokens) is over"),
            "{}",
            w[0]
        );
        let t = s
            .request_tokens("--budget", Budget::Percent(70.0), Some(&limit), &mut w)
            .unwrap();
        assert_eq!((t, w.len()), (89600, 1));
        // --reserve beats the body; a reserve that leaves nothing is an error.
        assert_eq!(
            s.input_limit(Some(1000), Some((16384, "the body's max_tokens")))
                .unwrap()
                .unwrap()
                .tokens,
            127_000
        );
        assert!(s.input_limit(Some(128_000), None).is_err());
        // No window, nothing to lower to.
        let (u, _) = settings(&ModelOptions::default(), Some("my-model"), None);
        assert_eq!(u.input_limit(None, None).unwrap(), None);
    }

    #[cfg(feature = "cli")]
    #[test]
    fn a_context_window_of_zero_is_refused() {
        assert!(parse_window("0").is_err());
        assert_eq!(parse_window("8_192"), Ok(8192));
        assert!(parse_window("lots").is_err());
    }

    #[test]
    fn unknown_model_warns_and_has_no_window() {
        let (s, w) = settings(&ModelOptions::default(), Some("my-model"), None);
        assert_eq!(w.len(), 1);
        assert!(s.window().is_err());
        assert!(s.budget_tokens(Budget::Percent(50.0)).is_err());
        assert_eq!(s.budget_tokens(Budget::Tokens(10)).unwrap(), 10);
        assert!(!s.exact);
        let args = ModelOptions {
            context_window: Some(1000),
            ..Default::default()
        };
        let (s, _) = settings(&args, Some("my-model"), None);
        assert_eq!(s.budget_tokens(Budget::Percent(50.0)).unwrap(), 500);
    }

    #[test]
    fn budgets_and_reserves() {
        let (s, _) = settings(&ModelOptions::default(), Some("gpt-4o"), None);
        assert_eq!(s.budget_tokens(Budget::Percent(50.0)).unwrap(), 64000);
        assert_eq!(s.default_budget(None, None).unwrap(), 128000 - 4096);
        assert_eq!(
            s.default_budget(None, Some((1000, "the body's max_tokens")))
                .unwrap(),
            127000
        );
        assert_eq!(
            s.default_budget(Some(8000), Some((1000, "the body's max_tokens")))
                .unwrap(),
            120000
        );
        assert_eq!("80%".parse::<Budget>().unwrap(), Budget::Percent(80.0));
        assert_eq!("6_000".parse::<Budget>().unwrap(), Budget::Tokens(6000));
        assert!("0%".parse::<Budget>().is_err());
        assert!("lots".parse::<Budget>().is_err());
    }

    #[test]
    fn encoding_override_makes_counts_inexact() {
        let args = ModelOptions {
            encoding: Some(Encoding::Cl100kBase),
            ..Default::default()
        };
        let (s, _) = settings(&args, Some("gpt-4o"), None);
        assert_eq!(s.encoding, Encoding::Cl100kBase);
        assert!(!s.exact);
        let args = ModelOptions {
            encoding: Some(Encoding::O200kBase),
            ..Default::default()
        };
        assert!(settings(&args, Some("gpt-4o"), None).0.exact);
    }
}
