//! `ctx count`: how many input tokens a document costs, against which window and budget.
//!
//! Writes one JSON report per document (or a table, or just the total). With `--budget` it is a
//! CI gate: exit 1 when over, the report still written. Counting rules live in
//! [`crate::counter`]; this file only assembles and renders the report.

use std::sync::Arc;

use anyhow::Result;
use serde_json::{Map, Value, json};

use super::{Env, InputArgs, Outcome, OutputArgs, prepare};
use crate::conversation::Conversation;
use crate::counter::Counter;
use crate::input::Origin;
use crate::output::render;
use crate::settings::{Budget, ModelArgs, read_tools_file};

/// Count the input tokens of each document.
///
/// Counts what the API bills as input: system prompt, tool definitions, every message with its
/// formatting overhead, and the reply priming. OpenAI chat models are counted exactly with
/// OpenAI's published formula; other providers are estimates (`"exact": false`).
///
/// Example:
///   ctx count chat.json
///   ctx count --budget 80% --output total < request.json
///
/// Exit codes: 0 ok; 1 over --budget (the report is still written); 2 bad input or flags.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    /// Fail (exit 1) when the document is over this many tokens, or this share of the window
    /// (`80%`).
    #[arg(long, value_name = "N|P%")]
    pub budget: Option<Budget>,

    /// Add one entry per message (index, role, tokens, tool names).
    #[arg(long)]
    pub per_message: bool,

    /// What to write: the JSON report, a human table with a usage bar, or just the total.
    #[arg(long, value_enum, default_value = "json", value_name = "FORMAT")]
    pub output: Format,

    #[command(flatten)]
    pub output_flags: OutputArgs,
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
    env: &'a Env,
    tools: Option<Arc<Value>>,
}

impl<'a> Runner<'a> {
    /// Reads what the whole run shares (the `--tools` file).
    pub fn new(args: &'a Args, env: &'a Env) -> Result<Runner<'a>> {
        let tools = args
            .model
            .tools
            .as_deref()
            .map(read_tools_file)
            .transpose()?;
        Ok(Runner { args, env, tools })
    }

    /// Counts one document.
    pub fn process(&self, _origin: &Origin, value: Value) -> Result<Outcome> {
        let p = prepare(
            value,
            &self.args.input,
            &self.args.model,
            self.env,
            self.tools.clone(),
        )?;
        let counter = Counter::new(&p.settings, p.doc.dialect);
        let count = counter.document(&p.doc)?;
        let tokens = count.total() as u64;
        let mut warnings = p.warnings;
        let window = p.settings.context_window;
        let budget = self
            .args
            .budget
            .map(|b| p.settings.budget_tokens(b))
            .transpose()?;
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

        let mut report = json!({
            "model": p.settings.model_name,
            "encoding": p.settings.encoding.name(),
            "format": p.doc.dialect.name(),
            "exact": count.exact,
            "tokens": tokens,
            "messages": count.messages.len(),
            "breakdown": {
                "system": breakdown.0,
                "tools": count.tools,
                "messages": breakdown.1,
                "overhead": breakdown.3,
            },
            "by_role": by_role,
            "context_window": window,
            "percent": window.map(|w| percent(tokens, w)),
        });
        if let Some(b) = budget {
            report["budget"] = json!(b);
            report["remaining"] = json!(b as i64 - tokens as i64);
            report["over_budget"] = json!(over);
        }
        if !count.exact {
            report["estimated"] = json!(count.notes.estimates);
        }
        if self.args.per_message {
            report["per_message"] = Value::Array(per_message);
        }
        let stdout = match self.args.output {
            Format::Json => render(&report, self.args.output_flags.compact),
            Format::Total => format!("{tokens}\n").into_bytes(),
            Format::Table => table(&report).into_bytes(),
        };
        Ok(Outcome {
            stdout,
            code: u8::from(over),
            warnings,
            ..Outcome::default()
        })
    }
}

/// `tokens` as a percentage of `window`, to two decimals.
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
    let exact = if r["exact"] == json!(true) {
        "exact"
    } else {
        "estimate"
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
