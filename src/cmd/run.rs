//! What the binary needs to know of a command that runs over input documents, so that one
//! generic path runs them all: [`Filter`], implemented by a command's flags (where documents
//! come from, how output is shaped, where `--report` and `--dropped` go, and how to make its
//! runner), and [`Run`], implemented by its runner (what one document becomes).
//!
//! `count` and `check` implement [`Run`] on runners of their own. A command that rewrites
//! documents implements [`Rewrite`](super::runner::Rewrite) on its flags instead, and its runner
//! is the one [`Rewriter`]. The [`Filter`] implementations here only say which runner each
//! command has and which of its fields hold the shared flags: a new command that reads
//! documents gets one line here, and one in `main`.

use anyhow::Result;
use serde_json::Value;

use super::runner::Rewriter;
use super::{Env, InputArgs, Outcome, OutputArgs, SideArgs};
use super::{check, count, fit, prune, summarize, truncate};
use crate::input::Origin;

/// A command's runner: processes one document at a time, on any thread.
pub trait Run: Sync {
    /// What one document becomes (an error: nothing is written for it).
    fn process(&self, origin: &Origin, value: Value) -> Result<Outcome>;

    /// [`Run::process`], with the error of a failed OpenAI Batch line named by its
    /// `custom_id` (`Batch line "req-7": ...`), which the report line of the failure carries.
    fn process_line(&self, origin: &Origin, value: Value) -> Result<Outcome> {
        let line = crate::document::BatchLine::of(&value);
        self.process(origin, value).map_err(|e| match line {
            Some(line) => e.context(line),
            None => e,
        })
    }

    /// Notes about the whole run, told once (which engine `--engine auto` chose).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The flags of a command that runs over input documents.
pub trait Filter {
    /// The command's runner, which borrows the flags and the environment.
    type Runner<'a>: Run
    where
        Self: 'a;

    /// Resolves what the run shares (files named by flags, the summarizer); an error is a usage
    /// error and nothing is read.
    fn runner<'a>(&'a self, env: &'a Env) -> Result<Self::Runner<'a>>;

    /// Where the documents come from.
    fn input(&self) -> &InputArgs;

    /// How output is shaped (`-c`, `-q`, `-j`).
    fn output(&self) -> &OutputArgs;

    /// Where `--report` and `--dropped` go; `None` for a command that has neither.
    fn sidecars(&self) -> Option<SideArgs>;
}

/// Implements [`Filter`] for a command's flags: `rewriting` for a command that rewrites
/// documents (its flags implement `Rewrite`, its runner is a [`Rewriter`]; `--report` and
/// `--dropped` go where its flags say unless `sidecars` is given), else with the command's
/// runner type and how to make it, and the fields holding its flags.
macro_rules! filter {
    (rewriting $command:ident) => {
        filter!(rewriting $command, sidecars: |a| a.change.side.clone());
    };
    (rewriting $command:ident, sidecars: |$a:ident| $sidecars:expr) => {
        filter!(
            $command,
            runner: Rewriter<'a, $command::Args> = |args, env| {
                Rewriter::new(args, &args.doc, &args.output, env)
            },
            input: doc.input,
            output: output,
            sidecars: |$a| Some($sidecars)
        );
    };
    (
        $command:ident,
        runner: $runner:ty = |$args:ident, $env:ident| $new:expr,
        input: $($input:ident).+,
        output: $output:ident,
        sidecars: |$a:ident| $sidecars:expr
    ) => {
        impl Filter for $command::Args {
            type Runner<'a> = $runner;

            fn runner<'a>(&'a self, $env: &'a Env) -> Result<Self::Runner<'a>> {
                let $args = self;
                $new
            }

            fn input(&self) -> &InputArgs {
                &self.$($input).+
            }

            fn output(&self) -> &OutputArgs {
                &self.$output
            }

            fn sidecars(&self) -> Option<SideArgs> {
                let $a = self;
                $sidecars
            }
        }
    };
}

filter!(
    count,
    runner: count::Runner<'a> = |args, env| count::Runner::new(args, env),
    input: doc.input,
    output: output_flags,
    sidecars: |a| Some(SideArgs {
        report: a.report.clone(),
        dropped: None,
    })
);
filter!(
    check,
    runner: check::Runner<'a> = |args, env| Ok(check::Runner::new(args, env)),
    input: input,
    output: output,
    sidecars: |_a| None
);
filter!(rewriting prune);
filter!(rewriting truncate);
filter!(rewriting summarize);
// `--dry-run` reports what it would do: to `--report FILE`, else to stderr.
filter!(rewriting fit, sidecars: |a| SideArgs {
    report: a.change.side.report.clone().or_else(|| a.dry_run.then(|| "-".into())),
    dropped: a.change.side.dropped.clone(),
});
