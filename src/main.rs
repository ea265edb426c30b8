//! The `ctx` binary: parses the command line, runs a command over every input document, writes
//! each document's output with one write, and chooses the exit code (SPEC §5).
//!
//! This is the only place that touches stdin, stdout, stderr and the process exit code;
//! commands take values and return values ([`cmd::Outcome`]), so that processing a document
//! stays a pure function of the document and the flags. Every command that reads documents goes
//! the same way ([`filter`]): its flags ([`cmd::Filter`]) give the runner, the inputs and the
//! sidecars; [`cmd::pool`] runs it over the documents in order; the [`Emitter`] writes each
//! result.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use ctx::cmd::pool::{self, ordered_map};
use ctx::cmd::sidecar::{FileKey, Sidecars};
use ctx::cmd::{self, Env, Exit, Filter, Outcome, Run};
use ctx::input::{self, Documents};
use ctx::output::{self, DocumentWriter};

/// Stdout, where the output documents go.
type Stdout = DocumentWriter<std::io::Stdout>;

/// Writes one diagnostic line to stderr; never fails.
fn stderr_line(line: &str) {
    output::write_line(std::io::stderr(), line);
}

/// Keep LLM conversations inside their context window.
///
/// Every command reads chat-message JSON (OpenAI or Anthropic; bare message arrays or whole
/// request bodies; one document, many, or JSON Lines) from files or stdin and writes JSON to
/// stdout, one output per input document, in order.
#[derive(Parser, Debug)]
#[command(name = "ctx", version, propagate_version = true, max_term_width = 100)]
#[command(
    after_help = "Exit codes: 0 success, 1 a check failed (over budget, errors found), \
2 usage or input error, 3 cannot fit the budget, 4 the summarizer failed (or a provider's \
count, with count --exact=required)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,

    /// Take flag defaults from [profile.NAME] in ctx.toml (env CTX_PROFILE); flags given on
    /// the command line win.
    #[arg(long, global = true, value_name = "NAME")]
    profile: Option<String>,

    /// The profile file (default: ./ctx.toml, else $XDG_CONFIG_HOME/ctx/ctx.toml or
    /// ~/.config/ctx/ctx.toml). A ./ctx.toml not named here may not set servers, files or the
    /// llm engine.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    Count(cmd::count::Args),
    Check(cmd::check::Args),
    Models(cmd::models::Args),
    Prune(Box<cmd::prune::Args>),
    Truncate(Box<cmd::truncate::Args>),
    Summarize(Box<cmd::summarize::Args>),
    Fit(Box<cmd::fit::Args>),
}

fn main() -> ExitCode {
    use clap::CommandFactory;
    let lookup = ctx::profile::Lookup::from_process();
    let argv = match ctx::profile::apply(std::env::args_os().collect(), &Cli::command(), &lookup) {
        Ok(a) => a,
        Err(e) => return fail(&e).into(),
    };
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version go to stdout, and `ctx` alone shows the help; every other
            // usage error is one line, like every other error.
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            {
                let _ = e.print();
                return if e.use_stderr() {
                    Exit::UsageOrInput
                } else {
                    Exit::Success
                }
                .into();
            }
            stderr_line(&format!("ctx: {}", cmd::usage::one_line(&e)));
            return Exit::UsageOrInput.into();
        }
    };
    let env = Env::from_process();
    match &cli.command {
        Command::Models(args) => single(cmd::models::run(args)),
        Command::Count(args) => filter(args, env),
        Command::Check(args) => filter(args, env),
        Command::Prune(args) => filter(&**args, env),
        Command::Truncate(args) => filter(&**args, env),
        Command::Summarize(args) => filter(&**args, env),
        Command::Fit(args) => filter(&**args, env),
    }
    .into()
}

/// Reports a setup error: usage or input (exit 2).
fn fail(e: &anyhow::Error) -> Exit {
    stderr_line(&format!("ctx: {}", one_line(&format!("{e:#}"))));
    Exit::UsageOrInput
}

/// Keeps every diagnostic on one line, whatever text from the input it quotes.
fn one_line(s: &str) -> String {
    s.replace('\r', "\\r").replace('\n', "\\n")
}

/// A closed stdout ends quietly with success; any other write error is reported (exit 2).
fn write_failed(e: output::WriteError) -> Exit {
    match e {
        output::WriteError::Closed => Exit::Success,
        output::WriteError::Failed(e) => fail(&anyhow::anyhow!("cannot write output: {e}")),
    }
}

/// Writes a command's single output (no input documents).
fn single(result: anyhow::Result<Outcome>) -> Exit {
    match result {
        Ok(out) => match Stdout::new(std::io::stdout()).write_document(&out.stdout) {
            Ok(()) => out.code,
            Err(e) => write_failed(e),
        },
        Err(e) => fail(&e),
    }
}

/// Where progress lines go for a run with these flags: stderr when it is a terminal, unless
/// `-q`, or the report goes to stderr (where lines that are not JSON would break the report).
fn progress(output: &cmd::OutputArgs, side: Option<&cmd::SideArgs>) -> Option<cmd::Progress> {
    let wanted = !output.quiet && !side.is_some_and(cmd::SideArgs::report_to_stderr);
    (wanted && std::io::stderr().is_terminal()).then(|| {
        Arc::new(|line: &str| stderr_line(&format!("ctx: {}", one_line(line)))) as cmd::Progress
    })
}

/// The key of stdin when it is a regular file (`ctx prune < a.json`), which no sidecar may
/// write.
fn stdin_key() -> Option<FileKey> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
        let meta = std::fs::File::from(fd).metadata().ok()?;
        cmd::sidecar::file_key(&meta, None)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Runs a command over every input document and writes the results in input order: the
/// runner is made first (an error there is a usage error and nothing is read), then the
/// sidecars are opened, the run's notes told, and the documents read, processed on `-j`
/// threads and emitted. Returns the most severe exit seen.
fn filter<F: Filter>(args: &F, mut env: Env) -> Exit {
    let (input, output, side) = (args.input(), args.output(), args.sidecars());
    env.progress = progress(output, side.as_ref());
    let runner = match args.runner(&env) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let sidecars = match &side {
        Some(side) => Sidecars::open(
            side,
            &input.files,
            stdin_key,
            || Box::new(std::io::stderr()),
        ),
        None => Ok(Sidecars::none()),
    };
    let mut sidecars = match sidecars {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    // Notes about the run are told once, unless -q: in the first report line with
    // `--report -` (so that stderr stays JSON Lines), else as text on stderr.
    if !output.quiet {
        if side.as_ref().is_some_and(cmd::SideArgs::report_to_stderr) {
            sidecars.notices = runner.notes();
        } else {
            for n in runner.notes() {
                stderr_line(&format!("ctx: {}", one_line(&n)));
            }
        }
    }
    if input::reads_stdin(&input.files) && std::io::stdin().is_terminal() {
        return fail(&anyhow::anyhow!(
            "no input: stdin is a terminal; pipe a conversation in (ctx count < chat.json) or name files (ctx count chat.json)"
        ));
    }
    let mut docs = Documents::open(&input.files, input.max_input_size, || {
        Box::new(std::io::stdin())
    });
    let mut emitter = Emitter {
        stdout: Stdout::new(std::io::stdout()),
        sidecars,
        code: Exit::Success,
        quiet: output.quiet,
        broken_input: None,
    };
    let process = |(origin, raw): (input::Origin, anyhow::Result<input::RawDocument>)| {
        let result = raw
            .and_then(|raw| raw.parse())
            .and_then(|v| runner.process_line(&origin, v));
        (origin, result)
    };
    let threads = pool::worker_threads(output.jobs);
    let run = ordered_map(&mut docs, threads, process, |docs, (origin, result)| {
        emitter.emit(docs, &origin, result)
    });
    match run {
        Ok(()) => emitter.code,
        Err(stop) => stop,
    }
}

/// Writes results in input order: the document to stdout, its warnings (each once per
/// document, naming it) to stderr, its report and dropped messages to the sidecars, and keeps
/// the worst exit.
struct Emitter {
    stdout: Stdout,
    sidecars: Sidecars,
    code: Exit,
    quiet: bool,
    /// The input a syntax error ended: its later documents are not emitted.
    broken_input: Option<usize>,
}

impl Emitter {
    /// Emits one document's result; `Err(exit)` means stop now with that exit. A syntax error
    /// ends its input: nothing more of it is read (`docs`) or emitted.
    fn emit(
        &mut self,
        docs: &mut Documents,
        origin: &input::Origin,
        result: anyhow::Result<Outcome>,
    ) -> Result<(), Exit> {
        if self.broken_input == Some(origin.input) {
            return Ok(()); // after a syntax error, the rest of that input is not JSON we can read
        }
        match result {
            Ok(mut out) => {
                if let Err(e) = self.sidecars.success(origin, &mut out) {
                    return Err(fail(&e.context("cannot write --report/--dropped")));
                }
                if !self.quiet {
                    let mut told = std::collections::HashSet::new();
                    for w in &out.warnings {
                        if told.insert(w.as_str()) {
                            stderr_line(&format!("ctx: warning: {origin}: {}", one_line(w)));
                        }
                    }
                }
                self.code = self.code.worse(out.code);
                self.stdout
                    .write_document(&out.stdout)
                    .map_err(write_failed)
            }
            Err(e) => {
                if e.downcast_ref::<input::SyntaxError>().is_some() {
                    self.broken_input = Some(origin.input);
                    docs.end_input(origin.input); // read no more of that input
                }
                stderr_line(&format!("ctx: {}", one_line(&format!("{origin}: {e:#}"))));
                let exit = cmd::exit_code(&e);
                self.code = self.code.worse(exit);
                self.sidecars
                    .failure(origin, &e, exit)
                    .map_err(|e| fail(&e.context("cannot write --report")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn diagnostics_stay_on_one_line() {
        assert_eq!(one_line("model 'a\nb'\r"), "model 'a\\nb'\\r");
    }
}
