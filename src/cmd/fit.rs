//! `ctx fit`: the staged pipeline that brings a document under its budget with the least loss
//! (SPEC §4).
//!
//! Stages run in order, each only while the document is still over budget: `prune`, `clip`,
//! `prune-all`, `summarize` (with `--summarize`), `truncate` and `partial` (with `--partial`).
//! Every stage calls the function behind its standalone command ([`super::prune::prune`],
//! [`super::summarize::summarize`], [`super::truncate::truncate`]); this file only chains them,
//! carries the per-message token counts from one stage to the next (a message is tokenized again
//! only when a stage rewrote it), and maps what each stage did back to input indices.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::prune::{self, Thinking};
use super::summarize::{self, Engine, Summarizer, SummaryArgs};
use super::truncate::{self, Strategy, Weights};
use super::{
    BudgetArgs, CannotFit, Dropped, Env, InputArgs, Outcome, OutputArgs, PinArgs, SideArgs, prepare,
};
use crate::clip::DEFAULT_PLACEHOLDER;
use crate::counter::{Counter, DocumentCount, MessageTokens, Notes};
use crate::document::Document;
use crate::input::Origin;
use crate::output::render;
use crate::settings::{Budget, ModelArgs, read_tools_file};

/// Bring each document under its budget with the least loss: prune, clip, prune all,
/// summarize (with --summarize), truncate, cut (with --partial), stopping at the first stage
/// after which the document fits.
///
/// Documents at or under --trigger (default: the budget) pass through unchanged; documents over
/// it come out within the budget. With a trigger above the budget, a loop that calls fit before
/// every API call compacts once, well below the trigger, and not again until the conversation
/// has grown past it.
///
/// Stages (--stages chooses and orders them):
///   prune      old tool results become placeholders (--keep newest kept)
///   clip       tool results over 25% of the budget are clipped middle-out
///   prune-all  every tool result becomes a placeholder
///   summarize  older messages become one summary (only with --summarize or in --stages)
///   truncate   oldest units are removed (--strategy)
///   partial    the largest text is cut to the exact budget (only with --partial or in --stages)
///
/// Example:
///   ctx fit --budget 100000 < body.json | curl -d @- https://api.openai.com/v1/chat/completions ...
///   ctx fit --budget 60% --trigger 80% --summarize=extractive < session.json
///
/// Exit codes: 0 ok; 2 bad input or flags; 3 even the last stage cannot reach the budget;
/// 4 the summarizer failed (with --on-error fail). Nothing is written for a failed document.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub budget: BudgetArgs,

    /// Pass documents at or under N tokens (or P% of the window) through unchanged; documents
    /// over it are brought within the budget (default: the budget; never below it).
    #[arg(long, value_name = "N|P%")]
    pub trigger: Option<Budget>,

    /// Warn on stderr when an input is over N tokens or P% of the window.
    #[arg(long, value_name = "N|P%")]
    pub warn_at: Option<Budget>,

    /// The stages to run, in order (default: prune,clip,prune-all,summarize,truncate,partial,
    /// where summarize needs --summarize and partial needs --partial).
    #[arg(long, value_name = "A,B", value_delimiter = ',', value_enum)]
    pub stages: Vec<Stage>,

    /// Run the summarize stage, with this engine (default auto).
    #[arg(
        long,
        value_name = "ENGINE",
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "auto"
    )]
    pub summarize: Option<Engine>,

    /// Run the partial stage: when whole units cannot fit, cut the largest unpinned text.
    #[arg(long)]
    pub partial: bool,

    /// prune stage: most recent tool results kept verbatim.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub keep: usize,

    /// Placeholder text for cleared results; {tool}, {tokens} and {chars} are replaced.
    #[arg(long, value_name = "TEXT", default_value = DEFAULT_PLACEHOLDER)]
    pub placeholder: String,

    /// Never clear or clip the results of these tools.
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub exclude_tools: Vec<String>,

    /// Also replace the arguments of cleared calls with {}.
    #[arg(long)]
    pub clear_inputs: bool,

    /// Clear error results too (Anthropic `is_error: true`).
    #[arg(long)]
    pub include_errors: bool,

    /// prune stages: drop reasoning from older assistant turns (`old`) or all (`all`).
    #[arg(long, value_enum, default_value = "keep")]
    pub thinking: Thinking,

    /// truncate stage: which units go first.
    #[arg(long, value_enum, default_value = "oldest")]
    pub strategy: Strategy,

    /// truncate stage, with --strategy middle: units kept at the start after the pinned ones.
    #[arg(long, value_name = "K", default_value_t = 2)]
    pub keep_first: usize,

    /// truncate stage, with --strategy importance: scores as key=value pairs.
    #[arg(long, value_name = "K=V,...", value_parser = truncate::parse_weights)]
    pub weights: Option<Weights>,

    /// truncate stage: put a note where messages were removed (`--note=TEXT` for your own).
    #[arg(
        long,
        value_name = "TEXT",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = truncate::DEFAULT_NOTE
    )]
    pub note: Option<String>,

    #[command(flatten)]
    pub summary: SummaryArgs,

    #[command(flatten)]
    pub pin: PinArgs,

    #[command(flatten)]
    pub side: SideArgs,

    #[command(flatten)]
    pub output: OutputArgs,
}

/// A stage of the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Stage {
    Prune,
    Clip,
    PruneAll,
    Summarize,
    Truncate,
    Partial,
}

impl Stage {
    /// The stage's name as `--stages` and the report spell it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Prune => "prune",
            Stage::Clip => "clip",
            Stage::PruneAll => "prune-all",
            Stage::Summarize => "summarize",
            Stage::Truncate => "truncate",
            Stage::Partial => "partial",
        }
    }
}

/// Everything the stages need, resolved for one document.
pub struct Options {
    pub budget: u64,
    pub trigger: u64,
    pub stages: Vec<Stage>,
    /// List what each stage cleared, clipped and removed in its report entry (for `--report`;
    /// without it the entries hold the stage and its token counts only).
    pub details: bool,
    pub prune: prune::Options,
    pub truncate: truncate::Options,
    pub summarize: summarize::Options,
}

/// What fitting did to one document.
pub struct Fitting {
    pub doc: Document,
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// False when the document was at or under the trigger.
    pub triggered: bool,
    /// One report object per stage run.
    pub stages: Vec<Value>,
    /// Originals of every removed or rewritten input message, by input index.
    pub dropped: Vec<Dropped>,
}

/// The document as it moves through the stages: its count, and where each message came from.
struct State {
    doc: Document,
    count: DocumentCount,
    /// Input index of each current message (None for a summary or a note made by a stage).
    origins: Vec<Option<usize>>,
    dropped: BTreeMap<usize, Dropped>,
}

impl State {
    fn total(&self) -> usize {
        self.count.total()
    }

    /// The input index of current message `i`, as JSON (null for a message a stage made).
    fn input_index(&self, i: usize) -> Value {
        self.origins
            .get(i)
            .copied()
            .flatten()
            .map_or(Value::Null, Value::from)
    }

    /// Takes a stage's output. `origins` maps each new message to its index in the stage's
    /// input; messages in `dropped` were removed or rewritten, so only they (and new ones) are
    /// counted again.
    fn advance(
        &mut self,
        counter: &Counter,
        doc: Document,
        origins: Vec<Option<usize>>,
        dropped: Vec<Dropped>,
        recounted: &[MessageTokens],
    ) -> Result<()> {
        let mut changed = vec![false; self.count.messages.len()];
        for d in &dropped {
            changed[d.index] = true;
        }
        // Counts the stage already made of changed messages, by index in the stage's input.
        let mut known: Vec<Option<MessageTokens>> = Vec::new();
        if !recounted.is_empty() {
            known.resize(self.count.messages.len(), None);
            for (d, c) in dropped.iter().zip(recounted) {
                known[d.index] = Some(*c);
            }
        }
        let mut messages = Vec::with_capacity(origins.len());
        for (k, o) in origins.iter().enumerate() {
            messages.push(match o {
                Some(i) if !changed[*i] => self.count.messages[*i],
                Some(i) if known.get(*i).copied().flatten().is_some() => {
                    known[*i].expect("checked")
                }
                _ => counter.message(&doc.messages()[k], &mut Notes::default())?,
            });
        }
        for d in dropped {
            if let Some(input) = self.origins[d.index] {
                match self.dropped.get_mut(&input) {
                    // Already rewritten by an earlier stage: the original is kept, the reasons
                    // add up.
                    Some(first) => {
                        if !first.reason.split(',').any(|r| r == d.reason) {
                            first.reason = format!("{},{}", first.reason, d.reason);
                        }
                    }
                    None => {
                        self.dropped.insert(input, Dropped { index: input, ..d });
                    }
                }
            }
        }
        self.origins = origins
            .iter()
            .map(|o| o.and_then(|i| self.origins[i]))
            .collect();
        self.count.messages = messages;
        self.doc = doc;
        Ok(())
    }
}

/// Runs the stages on `doc` (already counted as `count`) until it fits `opts.budget`.
pub fn fit(
    doc: Document,
    counter: &Counter,
    count: DocumentCount,
    opts: &Options,
    summarizer: Option<&Summarizer>,
) -> Result<Fitting> {
    let tokens_before = count.total();
    let n = doc.messages().len();
    if tokens_before as u64 <= opts.trigger {
        return Ok(Fitting {
            doc,
            tokens_before,
            tokens_after: tokens_before,
            triggered: false,
            stages: Vec::new(),
            dropped: Vec::new(),
        });
    }
    let budget = opts.budget as usize;
    let mut st = State {
        doc,
        count,
        origins: (0..n).map(Some).collect(),
        dropped: BTreeMap::new(),
    };
    let mut stages = Vec::new();
    // Why the last stage that could not reach the budget failed.
    let mut cannot: Option<String> = None;
    // The document's structure as the last prune stage read it, while no other stage has
    // changed the document since.
    let mut structure: Option<prune::Structure> = None;
    for (k, &stage) in opts.stages.iter().enumerate() {
        if st.total() <= budget {
            break;
        }
        let before = st.total();
        // Only truncate can fail and let a later stage go on from the same document, so only
        // then, and only when a stage follows, is the document copied.
        let may_fail = matches!(stage, Stage::Truncate | Stage::Partial);
        let doc = if may_fail && k + 1 < opts.stages.len() {
            st.doc.clone()
        } else {
            std::mem::replace(&mut st.doc, Document::placeholder())
        };
        let mut report = json!({"stage": stage.name(), "tokens_before": before});
        match stage {
            Stage::Clip
                if st
                    .count
                    .messages
                    .iter()
                    .all(|m| m.content <= (budget / 4).max(1)) =>
            {
                // No message is over the clip limit, so no result is: clipping would change
                // nothing, and is not worth a pass over the conversation.
                st.doc = doc;
                report["cleared"] = json!([]);
                report["clipped"] = json!([]);
            }
            Stage::Prune | Stage::Clip | Stage::PruneAll => {
                let mut o = opts.prune.clone();
                match stage {
                    Stage::Clip => {
                        o.keep = usize::MAX;
                        o.thinking = Thinking::Keep;
                        o.max_tool_tokens = Some((budget / 4).max(1));
                    }
                    Stage::PruneAll => o.keep = 0,
                    _ => {}
                }
                let (r, kept) = prune::prune_with(doc, counter, &st.count, &o, structure.take())?;
                structure = kept;
                if opts.details {
                    report["cleared"] = r
                        .cleared
                        .iter()
                        .map(|(i, t, k)| json!({"index": st.input_index(*i), "tool": t, "tokens": k}))
                        .collect();
                    report["clipped"] = r
                        .clipped
                        .iter()
                        .map(|&(i, b, a)| json!({"index": st.input_index(i), "tokens_before": b, "tokens_after": a}))
                        .collect();
                }
                if !r.thinking.is_empty() {
                    report["thinking"] = r.thinking.iter().map(|&i| st.input_index(i)).collect();
                }
                let origins = (0..r.doc.messages().len()).map(Some).collect();
                st.advance(counter, r.doc, origins, r.dropped, &r.recounted)?;
            }
            Stage::Summarize => {
                structure = None;
                let Some(s) = summarizer else {
                    bail!("the summarize stage needs a summarizer");
                };
                let mut o = opts.summarize.clone();
                o.force = true;
                let r = summarize::summarize(doc, counter, &st.count, &o, s)?;
                report["engine"] = json!(s.engine_name());
                report["summarized"] = r.plan.range.iter().map(|&i| st.input_index(i)).collect();
                if let Some(c) = r.covered {
                    report["messages_covered"] = json!(c);
                }
                if let Some(f) = r.fallback {
                    report["fallback"] = json!(f);
                    report["error"] = json!(r.error);
                }
                if let Some(m) = &r.model {
                    report["model"] = json!(m);
                }
                st.advance(counter, r.doc, r.origins, r.dropped, &[])?;
            }
            Stage::Truncate | Stage::Partial => {
                // The prune stages' conversation model still describes the document; a stage
                // after truncate reads it again.
                let conv = structure.take().map(prune::Structure::into_conversation);
                let mut o = opts.truncate.clone();
                o.partial = stage == Stage::Partial;
                match truncate::truncate_with(doc, counter, &st.count, &o, conv) {
                    Ok(r) => {
                        if opts.details {
                            report["removed"] =
                                r.removed.iter().map(|&i| st.input_index(i)).collect();
                        }
                        report["partial"] = r
                            .partial
                            .iter()
                            .map(|&(i, b, a)| json!({"index": st.input_index(i), "tokens_before": b, "tokens_after": a}))
                            .collect();
                        report["notes"] = json!(r.notes);
                        st.advance(counter, r.doc, r.origins, r.dropped, &[])?;
                    }
                    Err(e) => match e.downcast::<CannotFit>() {
                        Ok(cf) => {
                            report["cannot_fit"] = json!(cf.reason);
                            cannot = Some(cf.reason);
                        }
                        Err(e) => return Err(e),
                    },
                }
            }
        }
        report["tokens_after"] = json!(st.total());
        stages.push(report);
    }
    let tokens_after = st.total();
    if tokens_after > budget {
        let ran: Vec<&str> = stages.iter().filter_map(|s| s["stage"].as_str()).collect();
        let reason = match cannot {
            Some(r) => format!("after {}: {r}", ran.join(", ")),
            None => format!(
                "after {} the document still needs {tokens_after} tokens (add truncate to --stages, or raise the budget)",
                if ran.is_empty() {
                    "no stage".to_string()
                } else {
                    ran.join(", ")
                }
            ),
        };
        return Err(CannotFit {
            reason,
            tokens_before,
            budget: opts.budget,
        }
        .into());
    }
    Ok(Fitting {
        doc: st.doc,
        tokens_before,
        tokens_after,
        triggered: true,
        stages,
        dropped: st.dropped.into_values().collect(),
    })
}

/// Runs `fit` over documents.
pub struct Runner<'a> {
    args: &'a Args,
    env: &'a Env,
    tools: Option<Arc<Value>>,
    stages: Vec<Stage>,
    summarizer: Option<Summarizer>,
}

impl<'a> Runner<'a> {
    /// Checks the flags and resolves the stages and the summarizer.
    pub fn new(args: &'a Args, env: &'a Env) -> Result<Runner<'a>> {
        let tools = args
            .model
            .tools
            .as_deref()
            .map(read_tools_file)
            .transpose()?;
        if let (Some(Budget::Tokens(b)), Some(Budget::Tokens(t))) =
            (args.budget.budget, args.trigger)
        {
            if t < b {
                bail!(
                    "--trigger {t} is below --budget {b}: the trigger must be at least the budget"
                );
            }
        }
        if args.note.as_deref().is_some_and(str::is_empty) {
            bail!("--note needs a text (or no value for the default note)");
        }
        let stages = if args.stages.is_empty() {
            [
                Stage::Prune,
                Stage::Clip,
                Stage::PruneAll,
                Stage::Summarize,
                Stage::Truncate,
                Stage::Partial,
            ]
            .into_iter()
            .filter(|s| match s {
                Stage::Summarize => args.summarize.is_some(),
                Stage::Partial => args.partial,
                _ => true,
            })
            .collect()
        } else {
            let mut seen = Vec::new();
            for &s in &args.stages {
                if seen.contains(&s) {
                    bail!("--stages names {} twice", s.name());
                }
                seen.push(s);
            }
            seen
        };
        let summarizer = if stages.contains(&Stage::Summarize) {
            Some(Summarizer::new(
                &args.summary,
                args.summarize.unwrap_or(Engine::Auto),
                env,
                args.output.quiet,
                "fit",
            )?)
        } else {
            None
        };
        Ok(Runner {
            args,
            env,
            tools,
            stages,
            summarizer,
        })
    }

    /// Fits one document.
    pub fn process(&self, _origin: &Origin, value: Value) -> Result<Outcome> {
        let args = self.args;
        let p = prepare(
            value,
            &args.input,
            &args.model,
            self.env,
            self.tools.clone(),
        )?;
        let budget = args.budget.budget(&p)?;
        let trigger = match args.trigger {
            Some(t) => p.settings.budget_tokens(t)?,
            None => budget,
        };
        if trigger < budget {
            bail!(
                "--trigger ({trigger} tokens) is below the budget ({budget} tokens): the trigger must be at least the budget"
            );
        }
        let counter = Counter::new(&p.settings, p.doc.dialect);
        let count = counter.document(&p.doc)?;
        let mut warnings = p.warnings;
        warnings.extend(count.notes.warnings.iter().cloned());
        if let Some(w) = args.warn_at {
            let limit = p.settings.budget_tokens(w)?;
            let tokens = count.total();
            if tokens as u64 > limit {
                let share = match p.settings.context_window {
                    Some(win) if win > 0 => format!(
                        ", {:.1}% of the {win}-token window",
                        tokens as f64 * 100.0 / win as f64
                    ),
                    _ => String::new(),
                };
                warnings.push(format!(
                    "the input has {tokens} tokens{share}, over --warn-at ({limit} tokens)"
                ));
            }
        }
        let pins = args.pin.pins();
        let opts = Options {
            budget,
            trigger,
            stages: self.stages.clone(),
            details: args.side.report.is_some(),
            prune: prune::Options {
                keep: args.keep,
                placeholder: args.placeholder.clone(),
                trigger: None,
                clear_at_least: None,
                exclude_tools: args.exclude_tools.clone(),
                clear_inputs: args.clear_inputs,
                max_tool_tokens: None,
                thinking: args.thinking,
                include_errors: args.include_errors,
                pins: pins.clone(),
                keep_originals: args.side.dropped.is_some(),
            },
            truncate: truncate::Options {
                budget,
                keep_last: None,
                strategy: args.strategy,
                keep_first: args.keep_first,
                weights: args.weights.unwrap_or_default(),
                partial: false,
                note: args.note.clone(),
                pins: pins.clone(),
                protect_recent_exchanges: 0,
                best_effort: false,
            },
            summarize: summarize::Options {
                keep_recent: args.summary.keep_recent,
                after_messages: 0,
                over_tokens: 0,
                force: true,
                pins,
            },
        };
        let f = fit(p.doc, &counter, count, &opts, self.summarizer.as_ref())?;
        let stopped_at = if f.triggered {
            f.stages
                .last()
                .and_then(|s| s["stage"].as_str())
                .map(Value::from)
                .unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        let report = json!({
            "command": "fit",
            "budget": budget,
            "trigger": trigger,
            "triggered": f.triggered,
            "tokens_before": f.tokens_before,
            "tokens_after": f.tokens_after,
            "stages": f.stages,
            "stopped_at": stopped_at,
        });
        Ok(Outcome {
            stdout: render(&f.doc.into_value(), args.output.compact),
            code: 0,
            warnings,
            report: Some(report),
            dropped: f.dropped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_names_match_the_flag_values() {
        use clap::ValueEnum;
        for s in Stage::value_variants() {
            assert_eq!(s.to_possible_value().unwrap().get_name(), s.name());
        }
    }
}
