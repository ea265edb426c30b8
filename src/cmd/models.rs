//! `ctx models`: the built-in model table as JSON.

use anyhow::Result;

use super::{Outcome, OutputArgs};
use crate::output::render;

/// List the built-in model table as JSON.
///
/// Each row: name (matched exactly or as a prefix, longest first; `ft:` fine-tunes and
/// `provider/` prefixes are stripped), provider, encoding, context_window (input tokens),
/// max_output, exact (counts reproduce the provider's) and the source of the numbers.
///
/// Example:
///   ctx models -c | jq -r '.[] | select(.provider == "anthropic") | .name'
///
/// Exit codes: 0 ok.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Renders the table.
pub fn run(args: &Args) -> Result<Outcome> {
    Ok(Outcome {
        stdout: render(&crate::models::table_json(), args.output.compact),
        ..Outcome::default()
    })
}
