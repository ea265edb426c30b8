//! The operations that rewrite a document, and their options: builders whose defaults are the
//! commands' (a unit test holds them to it).

use anyhow::bail;
use serde_json::Value;

use super::{
    Budget, Document, Dropped, Error, IntoDocument, Model, OnError, Result, Strategy, SummaryRole,
    Thinking, fit_op, prepare, prune_op, summarize_op, truncate_op,
};
use crate::conversation::PinOptions;
use crate::counter::{Counter, DocumentCount};
use crate::document;
use crate::settings::Settings;

/// What an operation made of a document.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Rewritten {
    /// The document, rewritten (unchanged when there was nothing to do), in the shape it came
    /// in.
    pub document: Document,
    /// Its tokens before.
    pub tokens_before: usize,
    /// Its tokens after: the count of `document`.
    pub tokens_after: usize,
    /// The originals of the messages removed or rewritten, by their index in the input.
    pub dropped: Vec<Dropped>,
    /// [`fit`]: the stage after which the document fit (`prune`, `clip`, `args`, `summarize`,
    /// `truncate`, `prune-all`, `truncate-all` or `partial`), as `ctx fit --report` says it;
    /// `None` when the document was at or under the trigger, and for the other operations.
    pub stopped_at: Option<&'static str>,
    /// Warnings: an unknown model, a budget lowered to what the window holds, unknown part
    /// types, a summary that failed (with [`OnError::Truncate`] or [`OnError::Passthrough`]).
    pub warnings: Vec<String>,
}

impl Rewritten {
    /// What an operation made of a document, before the warnings of the steps around it.
    fn new(
        doc: document::Document,
        tokens_before: usize,
        tokens_after: usize,
        dropped: Vec<Dropped>,
    ) -> Rewritten {
        Rewritten {
            document: Document::from_inner(doc),
            tokens_before,
            tokens_after,
            dropped,
            stopped_at: None,
            warnings: Vec::new(),
        }
    }

    /// The rewritten messages (a body's other keys are dropped; see
    /// [`Document::into_value`] for the whole document).
    pub fn into_messages(self) -> Vec<Value> {
        self.document.into_messages()
    }
}

/// One document through an operation, as the command line's runner takes it: prepared (its
/// model resolved), its limits worked out by `limits` (which may add warnings), counted, and
/// rewritten by `op`, with the warnings of every step in that order (`op`'s last).
fn rewrite<L>(
    doc: impl IntoDocument,
    model: &Model,
    limits: impl FnOnce(&document::Document, &Settings, &mut Vec<String>) -> anyhow::Result<L>,
    op: impl FnOnce(document::Document, &Counter, DocumentCount, L) -> anyhow::Result<Rewritten>,
) -> Result<Rewritten> {
    let doc = doc.into_document()?.into_inner();
    let run = || -> anyhow::Result<Rewritten> {
        let (settings, mut warnings) = prepare(&doc, model, true)?;
        let limits = limits(&doc, &settings, &mut warnings)?;
        let counter = Counter::new(&settings, doc.dialect);
        let count = counter.document(&doc)?;
        warnings.extend(count.notes.warnings.iter().cloned());
        let mut done = op(doc, &counter, count, limits)?;
        warnings.append(&mut done.warnings);
        done.warnings = warnings;
        Ok(done)
    };
    run().map_err(Error::new)
}

/// A budget or trigger in tokens, lowered with a warning to what the window holds beside the
/// reserve (a larger request would be rejected); `what` names it in the warning.
fn request_tokens(
    what: &str,
    b: Budget,
    reserve: Option<u64>,
    doc: &document::Document,
    settings: &Settings,
    warnings: &mut Vec<String>,
) -> anyhow::Result<u64> {
    if let Budget::Percent(p) = b {
        if !(p > 0.0 && p <= 100.0) {
            bail!("{what} {p}%: a percentage must be in (0, 100]");
        }
    }
    let limit = settings.input_limit(reserve, doc.body_max_tokens())?;
    settings.request_tokens(what, b, limit.as_ref(), warnings)
}

/// What [`fit`] and [`truncate`] work to: a budget as given (`None`: the window minus the
/// reserve), and the tokens kept free for the reply (`None`: the body's
/// `max_completion_tokens`, `max_tokens` or `max_output_tokens`, else 4096).
#[derive(Clone, Copy, Debug, Default)]
struct Room {
    budget: Option<Budget>,
    reserve: Option<u64>,
}

impl Room {
    /// The budget of a document: the one given, lowered to what the window holds, else the
    /// window minus the reserve.
    fn tokens(
        &self,
        doc: &document::Document,
        settings: &Settings,
        warnings: &mut Vec<String>,
    ) -> anyhow::Result<u64> {
        match self.budget {
            Some(b) => request_tokens("budget", b, self.reserve, doc, settings, warnings),
            None => settings.default_budget(self.reserve, doc.body_max_tokens()),
        }
    }
}

/// The constructor and the `reserve` setter of the options that work to a [`Room`], with each
/// type's own docs.
macro_rules! budget_and_reserve {
    ($options:ident, $(#[$new:meta])* new, $(#[$reserve:meta])* reserve) => {
        impl $options {
            $(#[$new])*
            pub fn new(budget: impl Into<Budget>) -> $options {
                $options {
                    room: Room {
                        budget: Some(budget.into()),
                        reserve: None,
                    },
                    ..$options::default()
                }
            }

            $(#[$reserve])*
            #[must_use]
            pub fn reserve(mut self, tokens: u64) -> $options {
                self.room.reserve = Some(tokens);
                self
            }
        }
    };
}

/// Builder setters that each set one field of the options: `name(arg: Type) => field = value;`
/// makes `pub fn name(self, arg: Type) -> Self`, with the docs written above it.
macro_rules! setters {
    ($options:ty { $($(#[$doc:meta])* $name:ident($arg:ident: $t:ty) => $($field:ident).+ = $value:expr;)* }) => {
        impl $options {
            $(
                $(#[$doc])*
                #[must_use]
                pub fn $name(mut self, $arg: $t) -> Self {
                    self.$($field).+ = $value;
                    self
                }
            )*
        }
    };
}

/// The setters every rewriting operation's options share: the model, and which messages are
/// pinned (`$pins`: where the options keep their [`PinOptions`]).
macro_rules! model_and_pins {
    ($options:ty, $($pins:ident).+) => {
        impl $options {
            /// What the document is counted against (default: its body's `model`, else its
            /// dialect's default model). Takes a name (`"gpt-4o"`) or a [`Model`].
            #[must_use]
            pub fn model(mut self, model: impl Into<Model>) -> Self {
                self.model = model.into();
                self
            }

            /// Also pins the unit of message `index` (counted from the end when negative):
            /// never removed or rewritten.
            #[must_use]
            pub fn pin(mut self, index: i64) -> Self {
                self.$($pins).+.pins.push(index);
                self
            }

            /// Whether system and developer messages are pinned (default true).
            #[must_use]
            pub fn pin_system(mut self, pinned: bool) -> Self {
                self.$($pins).+.drop_system = !pinned;
                self
            }

            /// Whether the task (the first user message) is pinned (default true).
            #[must_use]
            pub fn pin_task(mut self, pinned: bool) -> Self {
                self.$($pins).+.no_keep_task = !pinned;
                self
            }
        }
    };
}

model_and_pins!(FitOptions, pins);
model_and_pins!(PruneOptions, op.pins);
model_and_pins!(TruncateOptions, op.pins);
model_and_pins!(SummarizeOptions, op.pins);

/// How [`fit`] brings a document under its budget, as `ctx fit` does (docs/fit.md).
///
/// The stages run in order, each only while the document is still over the budget: old tool
/// results become placeholders, oversized results are clipped, long arguments of old calls are
/// shortened, (with [`summarize`](FitOptions::summarize)) the oldest units become one summary,
/// old units are removed, then newer results and units, and (with
/// [`partial`](FitOptions::partial)) the newest unit's largest text is cut.
#[derive(Clone, Debug)]
pub struct FitOptions {
    model: Model,
    room: Room,
    trigger: Option<Budget>,
    summarize: bool,
    partial: bool,
    /// Given to the prune, truncate and summarize stages alike.
    pins: PinOptions,
    /// The operation's options, but for the stages, the pins and a document's budget and
    /// trigger.
    op: fit_op::Options,
}

impl Default for FitOptions {
    /// The budget is the window minus the reserve, and every other option as `ctx fit` has it.
    fn default() -> FitOptions {
        FitOptions {
            model: Model::default(),
            room: Room::default(),
            trigger: None,
            summarize: false,
            partial: false,
            pins: PinOptions::default(),
            op: fit_op::Options::default(),
        }
    }
}

budget_and_reserve!(
    FitOptions,
    /// Fit within `budget`: a number of tokens (`8000`) or a share of the window
    /// ([`Budget::Percent`]). A budget above the window minus the reserve is lowered to it, with
    /// a warning.
    new,
    /// Tokens kept free for the reply: the budget never goes above the window minus this
    /// (default: the body's `max_completion_tokens`, `max_tokens` or `max_output_tokens`, else
    /// 4096).
    reserve
);

setters!(FitOptions {
    /// Documents at or under `trigger` pass through unchanged; those over it are brought within
    /// the budget (default: the budget; never below it). With a trigger above the budget, an
    /// agent that fits before every call compacts once, well below the trigger.
    trigger(trigger: impl Into<Budget>) => trigger = Some(trigger.into());

    /// Whether the summarize stage runs, with the offline extractive engine (default false).
    summarize(yes: bool) => summarize = yes;

    /// With the summarize stage: at least this many newest messages stay verbatim (default 6).
    keep_recent(messages: usize) => op.summarize.keep_recent = messages;

    /// Whether the partial stage runs: when whole units cannot fit, the largest unpinned text
    /// is cut to the exact budget (default false).
    partial(yes: bool) => partial = yes;

    /// The newest tool results the prune stage keeps verbatim, and the newest exchanges the
    /// truncate stage keeps (default 3).
    keep(results: usize) => op.prune.keep = results;

    /// The prune stage clears a result only when that saves at least this many tokens (default
    /// 200); the prune-all stage, which comes just before whole exchanges are removed, clears
    /// whatever saves anything.
    min_saving(tokens: usize) => op.prune.min_saving = tokens;

    /// Which units the truncate stages remove first (default [`Strategy::Oldest`]).
    strategy(strategy: Strategy) => op.truncate.strategy = strategy;
});

impl FitOptions {
    /// The options of the operation, for a document whose budget and trigger are these.
    fn options(&self, budget: u64, trigger: u64) -> fit_op::Options {
        let mut o = self.op.for_budget(budget, trigger);
        o.stages = fit_op::Stage::defaults(self.summarize, self.partial);
        for pins in [
            &mut o.prune.pins,
            &mut o.truncate.pins,
            &mut o.summarize.pins,
        ] {
            pins.clone_from(&self.pins);
        }
        o
    }
}

/// Brings `doc` within its budget with the least loss, as `ctx fit` does: a document at or
/// under the trigger (by default the budget) comes back unchanged; one over it comes back
/// within the budget, or the call fails with [`ErrorKind::CannotFit`](super::ErrorKind) when
/// even the last stage cannot get there (the pinned messages and the newest unit are too large).
///
/// ```
/// # fn main() -> Result<(), ctx::Error> {
/// let messages: Vec<serde_json::Value> =
///     serde_json::from_str(r#"[{"role":"user","content":"hi"}]"#).unwrap();
/// let fitted = ctx::fit(messages, &ctx::FitOptions::new(8000).model("gpt-4o"))?;
/// assert!(fitted.tokens_after <= 8000);
/// let messages: Vec<serde_json::Value> = fitted.into_messages();
/// # assert_eq!(messages.len(), 1);
/// # Ok(())
/// # }
/// ```
pub fn fit(doc: impl IntoDocument, options: &FitOptions) -> Result<Rewritten> {
    let limits = |doc: &document::Document, settings: &Settings, warnings: &mut Vec<String>| {
        let budget = options.room.tokens(doc, settings, warnings)?;
        let trigger = match options.trigger {
            Some(t) => {
                // Compared as given: lowering both to the window minus the reserve may make them
                // equal, which is fine.
                let given = settings.budget_tokens(t)?;
                let given_budget = match options.room.budget {
                    Some(b) => settings.budget_tokens(b)?,
                    None => budget,
                };
                if given < given_budget {
                    bail!(
                        "the trigger ({given} tokens) is below the budget ({given_budget} tokens): the trigger must be at least the budget"
                    );
                }
                request_tokens("trigger", t, options.room.reserve, doc, settings, warnings)?
            }
            None => budget,
        };
        Ok((budget, trigger))
    };
    rewrite(
        doc,
        &options.model,
        limits,
        |doc, counter, count, (budget, trigger)| {
            let opts = options.options(budget, trigger);
            let summarizer = opts
                .stages
                .contains(&fit_op::Stage::Summarize)
                .then(|| SummarizeOptions::default().summarizer());
            let f = fit_op::fit(doc, counter, count, &opts, summarizer.as_ref())?;
            // The last stage run, as the report names it.
            let last = f.stages.last().and_then(|s| s["stage"].as_str());
            let stopped_at = fit_op::Stage::ALL
                .into_iter()
                .find(|s| f.triggered && last == Some(s.name()))
                .map(fit_op::Stage::name);
            Ok(Rewritten {
                stopped_at,
                ..Rewritten::new(f.doc, f.tokens_before, f.tokens_after, f.dropped)
            })
        },
    )
}

/// How [`prune`] shrinks old tool traffic, as `ctx prune` does (docs/strategies.md).
#[derive(Clone, Debug)]
pub struct PruneOptions {
    model: Model,
    op: prune_op::Options,
}

impl Default for PruneOptions {
    /// Every option as `ctx prune` has it.
    fn default() -> PruneOptions {
        PruneOptions {
            model: Model::default(),
            op: prune_op::Options::default(),
        }
    }
}

setters!(PruneOptions {
    /// The newest tool results kept verbatim (default 3).
    keep(results: usize) => op.keep = results;

    /// A result is cleared only when that saves at least this many tokens (default 200).
    min_saving(tokens: usize) => op.min_saving = tokens;

    /// Which reasoning to drop (default [`Thinking::Keep`]: none); never from an unfinished
    /// tool loop.
    thinking(thinking: Thinking) => op.thinking = thinking;

    /// Whether error results are cleared too (default false).
    include_errors(yes: bool) => op.include_errors = yes;

    /// Whether the arguments of cleared calls are emptied too, where the API takes an empty
    /// value (`{}`; `""` for a Responses custom tool call's input; default false).
    clear_inputs(yes: bool) => op.clear_inputs = yes;

    /// Clips any tool result over this many tokens middle-out, kept results included (at
    /// least 1).
    max_tool_tokens(tokens: usize) => op.max_tool_tokens = Some(tokens);

    /// Cuts string values over this many tokens in the arguments of old calls to their start
    /// and a marker (at least 1).
    shorten_args(tokens: usize) => op.shorten_args = Some(tokens);
});

impl PruneOptions {
    /// Never clears, clips or shortens the results and calls of this tool.
    #[must_use]
    pub fn exclude_tool(mut self, name: impl Into<String>) -> PruneOptions {
        self.op.exclude_tools.push(name.into());
        self
    }
}

/// Shrinks old tool traffic in `doc` without removing a message, as `ctx prune` does: older
/// tool results become placeholders that keep the call, the size, the status and the salient
/// lines, and (as the options say) huge results are clipped, long arguments shortened and old
/// reasoning dropped. No pair is broken, so the output is as valid as the input.
pub fn prune(doc: impl IntoDocument, options: &PruneOptions) -> Result<Rewritten> {
    let no_limits = |_: &document::Document, _: &Settings, _: &mut Vec<String>| Ok(());
    rewrite(doc, &options.model, no_limits, |doc, counter, count, ()| {
        if options.op.max_tool_tokens == Some(0) {
            bail!("--max-tool-tokens must be at least 1");
        }
        if options.op.shorten_args == Some(0) {
            bail!("--shorten-args must be at least 1");
        }
        let p = prune_op::prune(doc, counter, &count, &options.op)?;
        Ok(Rewritten::new(
            p.doc,
            p.tokens_before,
            p.tokens_after,
            p.dropped,
        ))
    })
}

/// How [`truncate`] removes whole units, as `ctx truncate` does (docs/strategies.md).
#[derive(Clone, Debug)]
pub struct TruncateOptions {
    model: Model,
    room: Room,
    /// The operation's options, but for a document's budget.
    op: truncate_op::Options,
}

impl Default for TruncateOptions {
    /// The budget is the window minus the reserve, and every other option as `ctx truncate` has
    /// it.
    fn default() -> TruncateOptions {
        TruncateOptions {
            model: Model::default(),
            room: Room::default(),
            op: truncate_op::Options::default(),
        }
    }
}

budget_and_reserve!(
    TruncateOptions,
    /// Truncate to `budget`: tokens, or a share of the window; lowered, with a warning, to the
    /// window minus the reserve.
    new,
    /// Tokens kept free for the reply (default: the body's `max_tokens`, else 4096).
    reserve
);

setters!(TruncateOptions {
    /// Which units go first (default [`Strategy::Oldest`]).
    strategy(strategy: Strategy) => op.strategy = strategy;

    /// Keeps at most this many newest non-system messages, rounded down to a unit boundary.
    keep_last(messages: usize) => op.keep_last = Some(messages);

    /// Whether a note marks where messages were removed (default false).
    note(yes: bool) => op.note = yes.then(|| truncate_op::DEFAULT_NOTE.to_string());

    /// Whether, when whole units cannot fit, the largest unpinned text is cut middle-out to
    /// use the budget exactly (default false).
    partial(yes: bool) => op.partial = yes;
});

/// Removes whole units of `doc` (a tool exchange, or any other single message), oldest first by
/// default, until it fits its budget, as `ctx truncate` does. Pinned units and the newest unit
/// are never removed; when they alone are over the budget, the call fails with
/// [`ErrorKind::CannotFit`](super::ErrorKind).
pub fn truncate(doc: impl IntoDocument, options: &TruncateOptions) -> Result<Rewritten> {
    let limits = |doc: &document::Document, settings: &Settings, warnings: &mut Vec<String>| {
        options.room.tokens(doc, settings, warnings)
    };
    rewrite(
        doc,
        &options.model,
        limits,
        |doc, counter, count, budget| {
            let opts = truncate_op::Options {
                budget,
                ..options.op.clone()
            };
            let t = truncate_op::truncate(doc, counter, &count, &opts)?;
            Ok(Rewritten::new(
                t.doc,
                t.tokens_before,
                t.tokens_after,
                t.dropped,
            ))
        },
    )
}

/// How [`summarize`] replaces older messages with a summary (docs/summarize.md).
#[derive(Clone, Debug)]
pub struct SummarizeOptions {
    model: Model,
    max_summary_tokens: usize,
    summary_role: SummaryRole,
    on_error: OnError,
    op: summarize_op::Options,
}

impl Default for SummarizeOptions {
    /// Every option as `ctx summarize --engine extractive` has it.
    fn default() -> SummarizeOptions {
        SummarizeOptions {
            model: Model::default(),
            max_summary_tokens: summarize_op::DEFAULT_MAX_SUMMARY_TOKENS,
            summary_role: SummaryRole::System,
            on_error: OnError::Fail,
            op: summarize_op::Options::default(),
        }
    }
}

setters!(SummarizeOptions {
    /// At least this many newest messages stay verbatim, extended back to a unit boundary
    /// (default 6).
    keep_recent(messages: usize) => op.keep_recent = messages;

    /// The longest summary text, in tokens (default 500; at least 1).
    max_summary_tokens(tokens: usize) => max_summary_tokens = tokens;

    /// The summary message's role in OpenAI documents (default [`SummaryRole::System`];
    /// Anthropic documents always use `user`).
    summary_role(role: SummaryRole) => summary_role = role;

    /// What happens when no summary fits where it goes (default [`OnError::Fail`]: the call
    /// fails with [`ErrorKind::Summarizer`](super::ErrorKind)); a fallback adds a warning.
    on_error(on_error: OnError) => on_error = on_error;
});

impl SummarizeOptions {
    /// The extractive engine these options ask for.
    fn summarizer(&self) -> summarize_op::Summarizer {
        summarize_op::Summarizer::extractive(
            self.max_summary_tokens,
            self.summary_role,
            self.on_error,
        )
    }
}

/// Replaces every unpinned message older than the newest few with one summary message, written
/// by ctx's offline extractive engine (a ledger of the task, the actions, the files edited, the
/// tests run, the errors and the latest state), as `ctx summarize --engine extractive --force`
/// does. A later call extends that running summary with only the newly aged-out messages. A
/// summary is never larger than what it replaces; when none fits, the call fails with
/// [`ErrorKind::Summarizer`](super::ErrorKind).
pub fn summarize(doc: impl IntoDocument, options: &SummarizeOptions) -> Result<Rewritten> {
    let no_limits = |_: &document::Document, _: &Settings, _: &mut Vec<String>| Ok(());
    rewrite(doc, &options.model, no_limits, |doc, counter, count, ()| {
        if options.max_summary_tokens == 0 {
            bail!("--max-summary-tokens must be at least 1");
        }
        let s = summarize_op::summarize(
            doc,
            counter,
            &count,
            &options.op,
            &options.summarizer(),
            &[],
        )?;
        let fallback = match (s.fallback, &s.error) {
            (Some("truncate"), Some(why)) => Some(format!(
                "no summary ({why}): the messages to summarize were removed instead"
            )),
            (Some(_), Some(why)) => Some(format!("no summary ({why}): the document is unchanged")),
            _ => None,
        };
        Ok(Rewritten {
            warnings: fallback.into_iter().collect(),
            ..Rewritten::new(s.doc, s.tokens_before, s.tokens_after, s.dropped)
        })
    })
}

#[cfg(all(test, feature = "cli"))]
mod tests {
    use super::*;

    /// The library's defaults are the command's: `FitOptions::new(b)` gives `fit`'s operation
    /// the options `ctx fit --budget b` gives it (but for keeping every original, which
    /// `--dropped` also does).
    #[test]
    fn fit_options_default_to_the_commands() {
        let args: crate::cmd::fit::Args = crate::cmd::parse_flags("fit --budget 8000");
        let mut cli = args.options().unwrap().for_budget(8000, 8000);
        cli.prune.keep_originals = true;
        let lib = FitOptions::new(8000).options(8000, 8000);
        assert_eq!(format!("{lib:?}"), format!("{cli:?}"));
        let args: crate::cmd::fit::Args =
            crate::cmd::parse_flags("fit --summarize=extractive --partial");
        let mut cli = args.options().unwrap().for_budget(100, 100);
        cli.prune.keep_originals = true;
        let lib = FitOptions::default()
            .summarize(true)
            .partial(true)
            .options(100, 100);
        assert_eq!(format!("{lib:?}"), format!("{cli:?}"));
    }

    /// Each setter sets what its flag sets: the options built with every setter are those the
    /// command builds from the same flags.
    #[test]
    fn setters_set_what_the_flags_set() {
        let args: crate::cmd::fit::Args = crate::cmd::parse_flags(
            "fit --keep=5 --min-saving=10 --strategy=middle --keep-recent=4 --pin=2 \
                --pin=-1 --drop-system --no-keep-task --summarize=extractive",
        );
        let mut cli = args.options().unwrap().for_budget(900, 1000);
        cli.prune.keep_originals = true;
        let lib = FitOptions::new(900)
            .keep(5)
            .min_saving(10)
            .strategy(Strategy::Middle)
            .keep_recent(4)
            .pin(2)
            .pin(-1)
            .pin_system(false)
            .pin_task(false)
            .summarize(true)
            .options(900, 1000);
        assert_eq!(format!("{lib:?}"), format!("{cli:?}"));

        let args: crate::cmd::prune::Args = crate::cmd::parse_flags(
            "prune --keep=1 --min-saving=0 --thinking=old --exclude-tools=a,b \
                --include-errors --clear-inputs --max-tool-tokens=50 --shorten-args=20 --pin=3",
        );
        let mut cli = args.options();
        cli.keep_originals = true;
        let lib = PruneOptions::default()
            .keep(1)
            .min_saving(0)
            .thinking(Thinking::Old)
            .exclude_tool("a")
            .exclude_tool("b")
            .include_errors(true)
            .clear_inputs(true)
            .max_tool_tokens(50)
            .shorten_args(20)
            .pin(3);
        assert_eq!(format!("{:?}", lib.op), format!("{cli:?}"));

        let args: crate::cmd::truncate::Args = crate::cmd::parse_flags(
            "truncate --strategy=importance --keep-last=4 --note --partial --pin=1",
        );
        let cli = args.options().unwrap();
        let lib = TruncateOptions::new(100)
            .strategy(Strategy::Importance)
            .keep_last(4)
            .note(true)
            .partial(true)
            .pin(1);
        assert_eq!(format!("{:?}", lib.op), format!("{cli:?}"));

        let args: crate::cmd::summarize::Args = crate::cmd::parse_flags(
            "summarize --force --after-messages=0 --keep-recent=2 --max-summary-tokens=80 \
                --summary-role=user --on-error=truncate --pin=1 --no-keep-task",
        );
        let lib = SummarizeOptions::default()
            .keep_recent(2)
            .max_summary_tokens(80)
            .summary_role(SummaryRole::User)
            .on_error(OnError::Truncate)
            .pin(1)
            .pin_task(false);
        assert_eq!(format!("{:?}", lib.op), format!("{:?}", args.options()));
        assert_eq!(
            (lib.max_summary_tokens, lib.summary_role, lib.on_error),
            (
                args.summary.max_summary_tokens,
                args.summary.summary_role,
                args.summary.on_error
            )
        );
    }

    /// `PruneOptions::default()` is `ctx prune` with no flags, `TruncateOptions` and
    /// `SummarizeOptions` those of `ctx truncate` and `ctx summarize`.
    #[test]
    fn other_options_default_to_the_commands() {
        let args: crate::cmd::prune::Args = crate::cmd::parse_flags("prune");
        let cli = args.options();
        let lib = PruneOptions::default();
        assert_eq!(
            (
                lib.op.keep,
                lib.op.min_saving,
                lib.op.thinking,
                lib.op.include_errors
            ),
            (cli.keep, cli.min_saving, cli.thinking, cli.include_errors)
        );
        let args: crate::cmd::truncate::Args = crate::cmd::parse_flags("truncate");
        let cli = args.options().unwrap();
        let lib = TruncateOptions::default();
        assert_eq!(
            (
                lib.op.strategy,
                lib.op.keep_last,
                lib.op.note.is_some(),
                lib.op.partial
            ),
            (cli.strategy, cli.keep_last, cli.note.is_some(), cli.partial)
        );
        let args: crate::cmd::summarize::Args = crate::cmd::parse_flags("summarize");
        let lib = SummarizeOptions::default();
        assert_eq!(
            (
                lib.op.keep_recent,
                lib.max_summary_tokens,
                lib.summary_role,
                lib.on_error
            ),
            (
                args.summary.keep_recent,
                args.summary.max_summary_tokens,
                args.summary.summary_role,
                args.summary.on_error
            )
        );
    }
}
