//! `ctx count`: how many input tokens a document costs, against which window and budget.
//!
//! Writes one JSON report per document (or a table, or just the total). With `--budget` it is a
//! CI gate: exit 1 when over, the report still written. Counting rules live in
//! [`crate::counter`]; this file only assembles and renders the report. With `--exact` the
//! total of a document ctx can only estimate comes from its provider ([`crate::exact`]), and
//! the estimate is kept beside it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use serde_json::{Map, Value, json};

use super::runner::Shared;
use super::summarize::{MAX_RETRIES, parse_timeout};
use super::{DocArgs, Env, ExactCountFailed, Outcome, OutputArgs, Run};
use crate::conversation::Conversation;
use crate::counter::Counter;
use crate::document::Document;
use crate::exact::{BaseUrlFlags, Providers};
use crate::input::Origin;
use crate::llm::UrlArg;
use crate::settings::Budget;

/// Count the input tokens of each document.
///
/// Counts what the API bills as input: system prompt, tool definitions, every message with its
/// formatting overhead, and the reply priming. OpenAI chat models are counted exactly with
/// OpenAI's published formula, and tool definitions as the namespace the model reads (exact
/// where every construct in them is verified, else on the high side and named in "estimated");
/// other providers are estimates (`"exact": false`).
///
/// --exact asks the provider's own counting endpoint for the total of each document ctx can
/// only estimate (Claude: Anthropic's count_tokens; Gemini: countTokens; OpenAI estimates: the
/// Responses input-token count), chosen by the document's model; an OpenAI-shaped document is
/// converted to the provider's shape. The report then says "source" and keeps ctx's estimate as
/// "estimated_total"; breakdown, by_role and --per-message stay ctx's estimate. Keys come from
/// ANTHROPIC_API_KEY, GOOGLE_API_KEY or GEMINI_API_KEY, and OPENAI_API_KEY, and go only to
/// that provider's own API or to the URL its own variable names (ANTHROPIC_BASE_URL,
/// GOOGLE_GEMINI_BASE_URL, OPENAI_BASE_URL), never to a URL named by a flag, a CTX_*_BASE_URL
/// variable or a profile. When the provider gives no count, the estimate stands with a
/// warning; --exact=required makes that exit 4. Without --exact nothing touches the network.
///
/// Example:
///   ctx count chat.json
///   ctx count --budget 80% --output total < request.json
///   ANTHROPIC_API_KEY=... ctx count --exact=required --budget 150000 < claude-request.json
///
/// Exit codes: 0 ok; 1 over --budget (the report is still written); 2 bad input or flags;
/// 4 --exact=required and the provider gave no count (nothing written for that document).
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub doc: DocArgs,

    /// Fail (exit 1) when the document is over this many tokens, or this share of the window
    /// (`80%`). A budget over the window gets a warning.
    #[arg(long, value_name = "N|P%")]
    pub budget: Option<Budget>,

    /// Add one entry per message (index, role, tokens, tool names).
    #[arg(long)]
    pub per_message: bool,

    /// What to write: the JSON report, a human table with a usage bar, or just the total.
    #[arg(long, value_enum, default_value = "json", value_name = "FORMAT")]
    pub output: Format,

    /// Write a JSON line per document (its tokens, whether they are exact, where the count came
    /// from) to FILE (overwritten), or to stderr with `-`. FILE may not be an input.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    #[command(flatten)]
    pub exact: ExactArgs,

    #[command(flatten)]
    pub output_flags: OutputArgs,
}

/// Where `--help` lists the flags of `--exact`.
const EXACT_HEADING: &str = "Provider counts (network, only with --exact)";

/// The flags of `--exact`, the only part of `count` that touches the network.
#[derive(clap::Args, Clone, Debug)]
pub struct ExactArgs {
    /// Ask the provider for the total of each document ctx can only estimate. fallback (the
    /// default of a bare --exact): keep the estimate, with a warning, when there is no count;
    /// required: exit 4 then; off: never ask.
    #[arg(
        long,
        help_heading = EXACT_HEADING,
        value_enum,
        value_name = "WHEN",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "fallback"
    )]
    pub exact: Option<ExactWhen>,

    /// Anthropic's base URL, without the version path (default: $CTX_ANTHROPIC_BASE_URL, else
    /// $ANTHROPIC_BASE_URL, else https://api.anthropic.com).
    #[arg(long, value_name = "URL", help_heading = EXACT_HEADING)]
    pub anthropic_base_url: Option<UrlArg>,

    /// The Gemini API's base URL, without the version path (default: $CTX_GEMINI_BASE_URL,
    /// else $GOOGLE_GEMINI_BASE_URL, else https://generativelanguage.googleapis.com).
    #[arg(long, value_name = "URL", help_heading = EXACT_HEADING)]
    pub gemini_base_url: Option<UrlArg>,

    /// OpenAI's base URL, with the version path (default: $CTX_OPENAI_BASE_URL, else
    /// $OPENAI_BASE_URL, else https://api.openai.com/v1).
    #[arg(long, value_name = "URL", help_heading = EXACT_HEADING)]
    pub openai_base_url: Option<UrlArg>,

    /// Seconds before a provider's count request is abandoned (more than 0, at most 86400).
    #[arg(long, help_heading = EXACT_HEADING, value_name = "SECONDS", default_value_t = 30.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub timeout: f64,

    /// Retries after a 429, a 5xx, a timeout or a refused connection (at most 100).
    #[arg(
        long,
        help_heading = EXACT_HEADING,
        value_name = "N",
        default_value_t = 2,
        value_parser = clap::value_parser!(u32).range(..=MAX_RETRIES),
        allow_negative_numbers = true
    )]
    pub retries: u32,
}

/// `--exact` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExactWhen {
    /// Keep the estimate, with a warning, when the provider gives no count.
    Fallback,
    /// A document the provider gives no count for fails (exit 4).
    Required,
    /// Never ask (overrides a profile).
    Off,
}

/// `--output` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Json,
    Table,
    Total,
}

/// Runs `count` over documents with flags fixed for the run.
pub struct Runner<'a> {
    args: &'a Args,
    shared: Shared<'a>,
    /// The providers' endpoints, with `--exact` only.
    providers: Option<Providers>,
}

/// Where a document's total came from.
struct Source {
    /// The provider's count, when there is one.
    counted: Option<crate::exact::Counted>,
    /// Why the provider gave none, when it was asked for one.
    fallback: Option<String>,
}

impl<'a> Runner<'a> {
    /// Reads what the whole run shares (the `--tools` file) and, with `--exact`, resolves the
    /// providers' endpoints (a bad base URL is an error here, before any document is read).
    pub fn new(args: &'a Args, env: &'a Env) -> Result<Runner<'a>> {
        let shared = Shared::new(&args.doc, &args.output_flags, env)?;
        let providers = match args.exact.exact {
            None | Some(ExactWhen::Off) => None,
            Some(_) => {
                let flags = BaseUrlFlags {
                    anthropic: args.exact.anthropic_base_url.clone(),
                    gemini: args.exact.gemini_base_url.clone(),
                    openai: args.exact.openai_base_url.clone(),
                };
                let timeout = Duration::from_secs_f64(args.exact.timeout);
                Some(Providers::resolve(
                    &flags,
                    env,
                    timeout,
                    args.exact.retries,
                )?)
            }
        };
        Ok(Runner {
            args,
            shared,
            providers,
        })
    }

    /// The provider's count of a document ctx could only estimate, when `--exact` asks for
    /// one: `Err` under `--exact=required` when there is none.
    fn provider_count(&self, p: &super::Prepared, exact: bool) -> Result<Option<Source>> {
        let Some(providers) = &self.providers else {
            return Ok(None);
        };
        if exact {
            return Ok(Some(Source {
                counted: None,
                fallback: None,
            }));
        }
        match providers.count(&p.doc, &p.settings) {
            Ok(c) => Ok(Some(Source {
                counted: Some(c),
                fallback: None,
            })),
            Err(reason) if self.args.exact.exact == Some(ExactWhen::Required) => {
                Err(ExactCountFailed { reason }.into())
            }
            Err(reason) => Ok(Some(Source {
                counted: None,
                fallback: Some(reason),
            })),
        }
    }
}

impl Run for Runner<'_> {
    /// Counts one document.
    fn process(&self, _origin: &Origin, value: Value) -> Result<Outcome> {
        let p = self.shared.prepare_to_count(value)?;
        let counter = Counter::new(&p.settings, p.doc.dialect);
        let count = counter.document(&p.doc)?;
        let estimate = count.total() as u64;
        let source = self.provider_count(&p, count.exact)?;
        let counted = source.as_ref().and_then(|s| s.counted);
        let tokens = counted.map_or(estimate, |c| c.tokens);
        let exact = count.exact || counted.is_some();
        let mut warnings = p.warnings;
        if let Some(why) = source.as_ref().and_then(|s| s.fallback.as_ref()) {
            warnings.push(format!(
                "--exact: no count from the provider ({why}); the estimate ({estimate}) stands"
            ));
        }
        let window = p.settings.context_window;
        let budget = self
            .args
            .budget
            .map(|b| p.settings.budget_tokens(b))
            .transpose()?;
        if let (Some(b), Some(w)) = (budget, window) {
            if b > w {
                warnings.push(format!(
                    "--budget {b} is over the {w}-token window of {}: a request that large would be rejected",
                    p.settings.model_name
                ));
            }
        }
        let over = budget.is_some_and(|b| tokens > b);

        let convo = Conversation::new(p.doc.messages(), p.doc.dialect);
        let mut breakdown = (count.system, 0usize, 0usize, count.priming);
        let mut by_role: Map<String, Value> = Map::new();
        let mut add_role = |role: &str, n: usize| {
            let e = by_role.entry(role.to_string()).or_insert(json!(0));
            *e = json!(e.as_u64().unwrap_or(0) + n as u64);
        };
        if count.system > 0 {
            add_role("system", count.system);
        }
        let mut per_message = Vec::new();
        for (i, (m, mt)) in convo.messages.iter().zip(&count.messages).enumerate() {
            if m.role.is_system() {
                breakdown.0 += mt.content;
            } else {
                breakdown.1 += mt.content;
            }
            breakdown.3 += mt.overhead;
            add_role(m.role.name(), mt.total());
            if self.args.per_message {
                let mut e = json!({"index": i, "role": m.role.name(), "tokens": mt.total()});
                let tools = convo.tool_names(i);
                if !tools.is_empty() {
                    e["tools"] = json!(tools);
                }
                if !mt.exact {
                    e["exact"] = json!(false);
                }
                per_message.push(e);
            }
        }
        warnings.extend(count.notes.warnings.iter().cloned());
        warnings.extend(server_state_warning(&p.doc, counted.is_some()));

        // Where the total came from: said only when --exact asked (the report is unchanged
        // without it).
        let source_name = counted.map_or("ctx", |c| c.provider.name());
        let mut report = Map::new();
        if let Some(id) = p.doc.custom_id() {
            report.insert("custom_id".into(), json!(id));
        }
        report.insert("model".into(), json!(p.settings.model_name));
        report.insert("encoding".into(), json!(p.settings.encoding.name()));
        report.insert("format".into(), json!(p.doc.dialect.name()));
        report.insert("exact".into(), json!(exact));
        if let Some(s) = &source {
            report.insert("source".into(), json!(source_name));
            if let Some(why) = &s.fallback {
                report.insert("fallback".into(), json!(why));
            }
        }
        report.insert("tokens".into(), json!(tokens));
        if counted.is_some() {
            report.insert("estimated_total".into(), json!(estimate));
        }
        report.insert("messages".into(), json!(count.messages.len()));
        if let Some(key) = p.doc.server_state() {
            report.insert("server_state".into(), json!(key));
        }
        report.insert(
            "breakdown".into(),
            json!({
                "system": breakdown.0,
                "tools": count.tools,
                "messages": breakdown.1,
                "overhead": breakdown.3,
            }),
        );
        report.insert("by_role".into(), Value::Object(by_role));
        report.insert("context_window".into(), json!(window));
        report.insert("percent".into(), json!(window.map(|w| percent(tokens, w))));
        if let Some(b) = budget {
            report.insert("budget".into(), json!(b));
            report.insert("remaining".into(), json!(b as i64 - tokens as i64));
            report.insert("over_budget".into(), json!(over));
        }
        if !exact {
            report.insert("estimated".into(), json!(count.notes.estimates));
        }
        if self.args.per_message {
            report.insert("per_message".into(), Value::Array(per_message));
        }
        let report = Value::Object(report);
        let stdout = match self.args.output {
            Format::Json => self.shared.render(&report),
            Format::Total => format!("{tokens}\n").into_bytes(),
            Format::Table => table(&report).into_bytes(),
        };
        // The --report line: the total and where it came from.
        let mut line = Map::new();
        if let Some(id) = p.doc.custom_id() {
            line.insert("custom_id".into(), json!(id));
        }
        line.insert("model".into(), json!(p.settings.model_name));
        line.insert("tokens".into(), json!(tokens));
        line.insert("exact".into(), json!(exact));
        line.insert("source".into(), json!(source_name));
        if counted.is_some() {
            line.insert("estimated_total".into(), json!(estimate));
        }
        if let Some(why) = source.as_ref().and_then(|s| s.fallback.as_ref()) {
            line.insert("fallback".into(), json!(why));
        }
        if let Some(b) = budget {
            line.insert("budget".into(), json!(b));
            line.insert("over_budget".into(), json!(over));
        }
        Ok(Outcome {
            stdout,
            code: if over {
                super::Exit::CheckFailed
            } else {
                super::Exit::Success
            },
            warnings,
            report: self.args.report.is_some().then_some(Value::Object(line)),
            ..Outcome::default()
        })
    }
}

/// `tokens` as a percentage of `window`, to two decimals.
/// The warning for a body continuing a conversation the server holds: what is counted is not
/// all the model reads (unless the provider counted it).
fn server_state_warning(doc: &Document, provider_counted: bool) -> Option<String> {
    let key = doc.server_state()?;
    Some(format!(
        "the body continues a conversation the server holds (`{key}`): the items before `input` are not counted here{}",
        if provider_counted {
            ""
        } else {
            " (count --exact asks the provider, which counts them)"
        }
    ))
}

fn percent(tokens: u64, window: u64) -> f64 {
    (tokens as f64 * 10000.0 / window as f64).round() / 100.0
}

/// Thousands separators for the table.
fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The human view: one screen, no colour, stable across terminals.
fn table(r: &Value) -> String {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let tokens = n(&r["tokens"]);
    let mut out = String::new();
    let exact = match (r["exact"] == json!(true), r["source"].as_str()) {
        (true, Some(source)) if source != "ctx" => format!("exact: counted by {source}"),
        (true, _) => "exact".to_string(),
        (false, _) => "estimate".to_string(),
    };
    out += &format!(
        "model      {} ({}, {}, {})\n",
        r["model"].as_str().unwrap_or(""),
        r["format"].as_str().unwrap_or(""),
        r["encoding"].as_str().unwrap_or(""),
        exact
    );
    match r["context_window"].as_u64() {
        Some(w) => {
            out += &format!(
                "tokens     {} of {} ({}%)\n",
                group(tokens),
                group(w),
                r["percent"].as_f64().unwrap_or(0.0)
            );
            out += &format!("usage      {}\n", bar(tokens, w, r["budget"].as_u64()));
        }
        None => out += &format!("tokens     {} (window unknown)\n", group(tokens)),
    }
    if let Some(e) = r["estimated_total"].as_u64() {
        out += &format!(
            "estimate   {} (ctx's own count; the breakdown below adds up to it)\n",
            group(e)
        );
    }
    if let Some(b) = r["budget"].as_u64() {
        let verdict = if r["over_budget"] == json!(true) {
            format!("OVER by {}", group(tokens - b))
        } else {
            format!("{} remaining", group(b - tokens))
        };
        out += &format!("budget     {} ({verdict})\n", group(b));
    }
    let b = &r["breakdown"];
    out += &format!(
        "breakdown  system {} | tools {} | messages {} | overhead {}\n",
        group(n(&b["system"])),
        group(n(&b["tools"])),
        group(n(&b["messages"])),
        group(n(&b["overhead"]))
    );
    out += &format!("messages   {}\n", n(&r["messages"]));
    if let Some(roles) = r["by_role"].as_object() {
        out += "by role\n";
        for (role, t) in roles {
            out += &format!("  {role:<11}{:>10}\n", group(n(t)));
        }
    }
    if let Some(rows) = r["per_message"].as_array() {
        out += "per message\n  index  role        tokens  tools\n";
        for row in rows {
            let tools: Vec<&str> = row["tools"]
                .as_array()
                .map(|t| t.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let line = format!(
                "  {:>5}  {:<10}{:>8}  {}",
                n(&row["index"]),
                row["role"].as_str().unwrap_or(""),
                group(n(&row["tokens"])),
                tools.join(",")
            );
            out += line.trim_end();
            out.push('\n');
        }
    }
    out
}

/// A 40-column usage bar: `#` used, `|` the budget, `.` free.
fn bar(tokens: u64, window: u64, budget: Option<u64>) -> String {
    const WIDTH: u64 = 40;
    let used = (tokens.min(window) * WIDTH).div_ceil(window.max(1));
    let mark = budget.map(|b| (b.min(window) * WIDTH / window.max(1)).min(WIDTH - 1));
    let mut s = String::from("[");
    for i in 0..WIDTH {
        s.push(if Some(i) == mark {
            '|'
        } else if i < used {
            '#'
        } else {
            '.'
        });
    }
    s.push(']');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1234567), "1,234,567");
    }

    #[test]
    fn bar_shows_usage_and_budget() {
        assert_eq!(bar(0, 100, None), format!("[{}]", ".".repeat(40)));
        assert_eq!(
            bar(50, 100, None),
            format!("[{}{}]", "#".repeat(20), ".".repeat(20))
        );
        assert_eq!(bar(200, 100, None), format!("[{}]", "#".repeat(40)));
        let b = bar(10, 100, Some(50));
        assert_eq!(b.chars().nth(21), Some('|'));
    }

    #[test]
    fn percent_rounds_to_two_places() {
        assert_eq!(percent(124, 128000), 0.1);
        assert_eq!(percent(64000, 128000), 50.0);
    }
}
