//! What the binary needs to know of a command that runs over input documents, so that one
//! generic path runs them all: [`Filter`], implemented by a command's flags (where documents
//! come from, how output is shaped, where `--report` and `--dropped` go, and how to make its
//! runner), and [`Run`], implemented by its runner (what one document becomes).
//!
//! The implementations here only delegate to each command's own `Runner::new`, `process` and
//! `notes`. A new command that reads documents implements these two traits, and `main` gets
//! one line for it.

use anyhow::Result;
use serde_json::Value;

use super::{Env, InputArgs, Outcome, OutputArgs, SideArgs};
use super::{check, count, fit, prune, summarize, truncate};
use crate::input::Origin;

/// A command's runner: processes one document at a time, on any thread.
pub trait Run: Sync {
    /// What one document becomes (an error: nothing is written for it).
    fn process(&self, origin: &Origin, value: Value) -> Result<Outcome>;

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

/// Implements [`Run`] and [`Filter`] for a command by delegating to its own `Runner::new`,
/// `Runner::process` and (when `notes` is named) `Runner::notes`.
macro_rules! filter {
    (
        $command:ident,
        runner: |$args:ident, $env:ident| $runner:expr,
        input: $($input:ident).+,
        output: $output:ident,
        sidecars: |$a:ident| $sidecars:expr
        $(, $notes:ident)?
    ) => {
        impl Run for $command::Runner<'_> {
            fn process(&self, origin: &Origin, value: Value) -> Result<Outcome> {
                $command::Runner::process(self, origin, value)
            }
            $(
                fn $notes(&self) -> Vec<String> {
                    $command::Runner::notes(self)
                }
            )?
        }

        impl Filter for $command::Args {
            type Runner<'a> = $command::Runner<'a>;

            fn runner<'a>(&'a self, $env: &'a Env) -> Result<$command::Runner<'a>> {
                let $args = self;
                $runner
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
    runner: |args, env| count::Runner::new(args, env),
    input: doc.input,
    output: output_flags,
    sidecars: |a| Some(SideArgs {
        report: a.report.clone(),
        dropped: None,
    })
);
filter!(
    check,
    runner: |args, env| Ok(check::Runner::new(args, env)),
    input: input,
    output: output,
    sidecars: |_a| None
);
filter!(
    prune,
    runner: |args, env| prune::Runner::new(args, env),
    input: doc.input,
    output: output,
    sidecars: |a| Some(a.side.clone())
);
filter!(
    truncate,
    runner: |args, env| truncate::Runner::new(args, env),
    input: doc.input,
    output: output,
    sidecars: |a| Some(a.side.clone())
);
filter!(
    summarize,
    runner: |args, env| summarize::Runner::new(args, env),
    input: doc.input,
    output: output,
    sidecars: |a| Some(a.side.clone()),
    notes
);
// `--dry-run` reports what it would do: to `--report FILE`, else to stderr.
filter!(
    fit,
    runner: |args, env| fit::Runner::new(args, env),
    input: doc.input,
    output: output,
    sidecars: |a| Some(SideArgs {
        report: a.side.report.clone().or_else(|| a.dry_run.then(|| "-".into())),
        dropped: a.side.dropped.clone(),
    }),
    notes
);
