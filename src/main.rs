//! The `ctx` binary: parses the command line, runs a command over every input document, writes
//! each document's output with one write, and chooses the exit code (SPEC §5).
//!
//! This is the only place that touches stdin, stdout, stderr and the process exit code;
//! commands take values and return values ([`cmd::Outcome`]), so that processing a document
//! stays a pure function of the document and the flags.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use ctx::cmd::{self, Env, Exit, Outcome};
use ctx::input::{self, Documents};
use ctx::output::{self, Stdout, stderr_line};

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
    let code = match &cli.command {
        Command::Models(args) => single(cmd::models::run(args)),
        Command::Count(args) => match cmd::count::Runner::new(args, &env) {
            Ok(r) => filter(
                &args.input,
                &args.output_flags,
                Some(&cmd::SideArgs {
                    report: args.report.clone(),
                    dropped: None,
                }),
                &[],
                |o, v| r.process(o, v),
            ),
            Err(e) => fail(&e),
        },
        Command::Check(args) => {
            let r = cmd::check::Runner::new(args, &env);
            filter(&args.input, &args.output, None, &[], |o, v| r.process(o, v))
        }
        Command::Prune(args) => match cmd::prune::Runner::new(args, &env) {
            Ok(r) => filter(&args.input, &args.output, Some(&args.side), &[], |o, v| {
                r.process(o, v)
            }),
            Err(e) => fail(&e),
        },
        Command::Summarize(args) => match cmd::summarize::Runner::new(args, &env) {
            Ok(r) => filter(
                &args.input,
                &args.output,
                Some(&args.side),
                &r.notes(),
                |o, v| r.process(o, v),
            ),
            Err(e) => fail(&e),
        },
        Command::Fit(args) => match cmd::fit::Runner::new(args, &env) {
            Ok(r) => filter(
                &args.input,
                &args.output,
                // --dry-run reports what it would do: to --report FILE, else to stderr.
                Some(&cmd::SideArgs {
                    report: args
                        .side
                        .report
                        .clone()
                        .or_else(|| args.dry_run.then(|| std::path::PathBuf::from("-"))),
                    dropped: args.side.dropped.clone(),
                }),
                &r.notes(),
                |o, v| r.process(o, v),
            ),
            Err(e) => fail(&e),
        },
        Command::Truncate(args) => match cmd::truncate::Runner::new(args, &env) {
            Ok(r) => filter(&args.input, &args.output, Some(&args.side), &[], |o, v| {
                r.process(o, v)
            }),
            Err(e) => fail(&e),
        },
    };
    code.into()
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
        Ok(out) => {
            let mut stdout = Stdout::new();
            match stdout.write_document(&out.stdout) {
                Ok(()) => out.code,
                Err(e) => write_failed(e),
            }
        }
        Err(e) => fail(&e),
    }
}

/// One `--report` or `--dropped` output.
struct Sidecar {
    out: Box<dyn Write>,
    /// Set once its reader has gone (a closed pipe): nothing more is written to it.
    closed: bool,
}

/// The `--report` and `--dropped` files of a run.
struct Sidecars {
    report: Option<Sidecar>,
    dropped: Option<Sidecar>,
    /// Notes about the run still to be told in the next report line (with `--report -`, where
    /// text lines would break the JSON Lines).
    notices: Vec<String>,
}

/// What identifies a file whatever the path it is named by (`./a.json`, a symlink, a hard
/// link): its device and inode.
#[cfg(unix)]
type FileKey = (u64, u64);
#[cfg(not(unix))]
type FileKey = PathBuf;

/// The key of a regular file, following symlinks; `None` for anything else (a pipe, a
/// terminal, `/dev/null`: writing those destroys no input) or a path that does not exist.
fn regular_file_key(path: &Path) -> Option<FileKey> {
    let path = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&path).ok().filter(|m| m.is_file())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        Some(path)
    }
}

/// The key of stdin when it is a regular file (`ctx prune < a.json`).
fn stdin_key() -> Option<FileKey> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
        let meta = std::fs::File::from(fd).metadata().ok()?;
        meta.is_file().then(|| (meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

impl Sidecars {
    /// Opens the sidecars of `args`, after checking that none of them is one of the `inputs`
    /// (inputs are never written: `--report a.json a.json` would empty the input before it is
    /// read). Nothing is created or truncated when that check fails.
    fn open(args: Option<&cmd::SideArgs>, inputs: &[PathBuf]) -> anyhow::Result<Sidecars> {
        use anyhow::Context;
        let mut sidecars = Sidecars {
            report: None,
            dropped: None,
            notices: Vec::new(),
        };
        let Some(a) = args else {
            return Ok(sidecars);
        };
        let named = [("--report", &a.report), ("--dropped", &a.dropped)];
        let named: Vec<(&str, &Path)> = named
            .iter()
            .filter_map(|(flag, p)| Some((*flag, p.as_deref()?)))
            .filter(|(_, p)| p.as_os_str() != "-")
            .collect();
        if let [(_, report), (_, dropped)] = named[..] {
            // An existing file by identity; a file still to be created by its directory and name.
            let target = |p: &Path| {
                let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
                let dir = std::fs::canonicalize(dir.unwrap_or(Path::new("."))).ok();
                (dir, p.file_name().map(|n| n.to_os_string()))
            };
            let same = report == dropped
                || match (regular_file_key(report), regular_file_key(dropped)) {
                    (Some(a), Some(b)) => a == b,
                    _ => target(report).0.is_some() && target(report) == target(dropped),
                };
            if same {
                anyhow::bail!(
                    "--report and --dropped name the same file {}: the two would overwrite each other (choose two paths)",
                    report.display()
                );
            }
        }
        if !named.is_empty() {
            let stdin = if input::reads_stdin(inputs) {
                stdin_key()
            } else {
                None
            };
            for (flag, path) in &named {
                let Some(key) = regular_file_key(path) else {
                    continue;
                };
                if stdin.as_ref() == Some(&key) {
                    anyhow::bail!(
                        "{flag} {}: this file is also the input (on stdin), and inputs are never written (choose another path)",
                        path.display()
                    );
                }
                let input = inputs
                    .iter()
                    .filter(|f| f.as_os_str() != "-")
                    .find(|f| regular_file_key(f).as_ref() == Some(&key));
                if let Some(input) = input {
                    anyhow::bail!(
                        "{flag} {}: this file is also the input {}, and inputs are never written (choose another path)",
                        path.display(),
                        input.display()
                    );
                }
            }
        }
        let open = |path: &Path, append: bool| -> anyhow::Result<Sidecar> {
            let out: Box<dyn Write> = if path.as_os_str() == "-" {
                Box::new(std::io::stderr())
            } else {
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(append)
                    .truncate(!append)
                    .open(path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                Box::new(std::io::BufWriter::new(f))
            };
            Ok(Sidecar { out, closed: false })
        };
        sidecars.report = a.report.as_deref().map(|p| open(p, false)).transpose()?;
        sidecars.dropped = a.dropped.as_deref().map(|p| open(p, true)).transpose()?;
        Ok(sidecars)
    }

    fn origin_fields(origin: &input::Origin) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        if let Some(f) = &origin.file {
            m.insert("file".into(), f.clone().into());
        }
        m.insert("document".into(), origin.index.into());
        m
    }

    /// Writes one JSON line. A sidecar whose reader has gone (`--report - 2>&1 | head -1`) is
    /// closed quietly, and the run goes on; any other write error is returned.
    fn write(side: &mut Option<Sidecar>, v: serde_json::Value) -> anyhow::Result<()> {
        let Some(side) = side.as_mut().filter(|s| !s.closed) else {
            return Ok(());
        };
        let mut line = serde_json::to_vec(&v)?;
        line.push(b'\n');
        match side.out.write_all(&line).and_then(|()| side.out.flush()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                side.closed = true;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Writes a report line, with the run's notes still untold.
    fn write_report(
        &mut self,
        mut m: serde_json::Map<String, serde_json::Value>,
    ) -> anyhow::Result<()> {
        if !self.notices.is_empty() {
            m.insert("notices".into(), std::mem::take(&mut self.notices).into());
        }
        Self::write(&mut self.report, m.into())
    }

    fn success(&mut self, origin: &input::Origin, out: &mut Outcome) -> anyhow::Result<()> {
        // Nothing is assembled for a sidecar nobody asked for (a fit can drop thousands).
        if self.report.is_none() {
            out.report = None;
        }
        if self.dropped.is_none() {
            out.dropped.clear();
        }
        if let Some(report) = out.report.take() {
            let mut m = Self::origin_fields(origin);
            if let serde_json::Value::Object(r) = report {
                m.extend(r);
            }
            self.write_report(m)?;
        }
        for d in out.dropped.drain(..) {
            let mut m = Self::origin_fields(origin);
            m.insert("index".into(), d.index.into());
            m.insert("reason".into(), d.reason.into());
            m.insert("message".into(), d.message);
            Self::write(&mut self.dropped, m.into())?;
        }
        Ok(())
    }

    fn failure(
        &mut self,
        origin: &input::Origin,
        e: &anyhow::Error,
        code: Exit,
    ) -> anyhow::Result<()> {
        if self.report.is_none() {
            return Ok(());
        }
        let mut m = Self::origin_fields(origin);
        m.insert("error".into(), format!("{e:#}").into());
        m.insert("exit".into(), code.code().into());
        if let Some(cf) = e.downcast_ref::<cmd::CannotFit>() {
            m.insert("tokens_before".into(), cf.tokens_before.into());
            m.insert("budget".into(), cf.budget.into());
        }
        self.write_report(m)
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
    /// Emits one document's result; `Err(exit)` means stop now with that exit.
    fn emit(
        &mut self,
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

/// A document read from the input, numbered in input order.
type Job = (usize, input::Origin, anyhow::Result<input::RawDocument>);
/// A document processed, with its number.
type Done = (usize, input::Origin, anyhow::Result<Outcome>);

/// The most worker threads `-j` starts. Counting and the other local commands are CPU-bound,
/// so more threads than cores only cost memory; 64 also bounds how many summarizer requests
/// are in flight at once.
const MAX_JOBS: usize = 64;

/// The number of worker threads for `-j`: the number of CPUs by default and for `-j 0`, never
/// more than [`MAX_JOBS`].
fn worker_threads(jobs: Option<usize>) -> usize {
    match jobs {
        None | Some(0) => std::thread::available_parallelism().map_or(1, usize::from),
        Some(n) => n,
    }
    .min(MAX_JOBS)
}

/// Runs `process` over every input document on `jobs` threads and writes the results in input
/// order; returns the most severe exit seen.
///
/// The input is read and split into documents on this thread; the workers parse and process
/// them, and results are written here, in order, as soon as every earlier one has been. A
/// syntax error ends its input's stream at the same document whatever the number of threads
/// (the emitter skips the rest of that input, and reading it stops). At most a few documents
/// per worker are in flight, so memory stays bounded however long the stream.
fn filter(
    input: &cmd::InputArgs,
    output: &cmd::OutputArgs,
    sidecar_args: Option<&cmd::SideArgs>,
    notes: &[String],
    process: impl Fn(&input::Origin, serde_json::Value) -> anyhow::Result<Outcome> + Sync,
) -> Exit {
    let mut sidecars = match Sidecars::open(sidecar_args, &input.files) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    // Notes about the run are told once, unless -q: in the first report line with
    // `--report -` (so that stderr stays JSON Lines), else as text on stderr.
    if !output.quiet {
        if sidecar_args.is_some_and(cmd::SideArgs::report_to_stderr) {
            sidecars.notices = notes.to_vec();
        } else {
            for n in notes {
                stderr_line(&format!("ctx: {}", one_line(n)));
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
        stdout: Stdout::new(),
        sidecars,
        code: Exit::Success,
        quiet: output.quiet,
        broken_input: None,
    };
    let jobs = worker_threads(output.jobs);
    if jobs == 1 {
        while let Some((origin, value)) = docs.next() {
            let result = value
                .and_then(|raw| raw.parse())
                .and_then(|v| process(&origin, v));
            if let Err(code) = emitter.emit(&origin, result) {
                return code;
            }
            if let Some(input) = emitter.broken_input {
                docs.end_input(input); // a syntax error: read no more of that input
            }
        }
        return emitter.code;
    }

    // Documents go to the workers in batches (a wake-up per document costs more than counting
    // a small one), at most `in_flight` batches between reading and writing.
    let in_flight = 4 * jobs;
    let (job_tx, job_rx) = std::sync::mpsc::sync_channel::<Vec<Job>>(in_flight);
    let job_rx = std::sync::Mutex::new(job_rx);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Done>();
    let process = &process;
    let job_rx = &job_rx;
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let done_tx = done_tx.clone();
            scope.spawn(move || {
                loop {
                    let batch = job_rx
                        .lock()
                        .map_err(|_| ())
                        .and_then(|rx| rx.recv().map_err(|_| ()));
                    let Ok(batch) = batch else {
                        break;
                    };
                    for (seq, origin, value) in batch {
                        let result = value
                            .and_then(|raw| raw.parse())
                            .and_then(|v| process(&origin, v));
                        if done_tx.send((seq, origin, result)).is_err() {
                            return;
                        }
                    }
                }
            });
        }
        drop(done_tx);
        let mut pending: std::collections::BTreeMap<
            usize,
            (input::Origin, anyhow::Result<Outcome>),
        > = std::collections::BTreeMap::new();
        let mut next = 0usize;
        // The end (last number + 1) of every batch sent and not yet written.
        let mut out: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
        // The input a syntax error ended, as the emitter saw it: reading it stops.
        let broken = std::cell::Cell::new(None);
        // Takes the finished results (first waiting for one if `wait`), writes every one that is
        // next in order and forgets the batches fully written. Ok(false): no result can come.
        let mut settle = |pending: &mut std::collections::BTreeMap<usize, _>,
                          next: &mut usize,
                          out: &mut std::collections::VecDeque<usize>,
                          wait: bool|
         -> Result<bool, Exit> {
            let mut open = true;
            if wait {
                match done_rx.recv() {
                    Ok((seq, o, r)) => {
                        pending.insert(seq, (o, r));
                    }
                    Err(_) => open = false,
                }
            }
            while let Ok((seq, o, r)) = done_rx.try_recv() {
                pending.insert(seq, (o, r));
            }
            while let Some((origin, result)) = pending.remove(next) {
                emitter.emit(&origin, result)?;
                *next += 1;
            }
            broken.set(emitter.broken_input);
            while out.front().is_some_and(|&end| *next >= end) {
                out.pop_front();
            }
            Ok(open)
        };
        let mut batch: Vec<Job> = Vec::new();
        let mut batch_bytes = 0usize;
        let mut seq = 0usize;
        loop {
            // A batch goes when it is big enough, when the input is over, or when the next
            // document is not read yet (it may be slow to come).
            if batch.is_empty() && !docs.buffered() {
                // Reading may now wait for input that is slow to come (an agent piping one
                // conversation at a time): first write every result still owed.
                while next < seq {
                    match settle(&mut pending, &mut next, &mut out, true) {
                        Err(code) => return code,
                        Ok(open) if !open => break,
                        Ok(_) => {}
                    }
                }
            }
            if let Some(input) = broken.get() {
                docs.end_input(input); // a syntax error: read no more of that input
            }
            let tried = batch.is_empty() || docs.buffered();
            let item = if tried { docs.next() } else { None };
            let done_reading = tried && item.is_none();
            if let Some((origin, value)) = item {
                batch_bytes += value.as_ref().map_or(0, |d| d.bytes.len());
                batch.push((seq, origin, value));
                seq += 1;
                if batch.len() < 64 && batch_bytes < 1 << 18 {
                    continue;
                }
            }
            if !batch.is_empty() {
                while out.len() >= in_flight {
                    match settle(&mut pending, &mut next, &mut out, true) {
                        Err(code) => return code,
                        Ok(open) if !open => break,
                        Ok(_) => {}
                    }
                }
                out.push_back(seq);
                batch_bytes = 0;
                if job_tx.send(std::mem::take(&mut batch)).is_err() {
                    break;
                }
            }
            if let Err(code) = settle(&mut pending, &mut next, &mut out, false) {
                return code;
            }
            if done_reading {
                break;
            }
        }
        drop(job_tx);
        loop {
            match settle(&mut pending, &mut next, &mut out, true) {
                Err(code) => return code,
                Ok(open) if !open => break,
                Ok(_) => {}
            }
        }
        emitter.code
    })
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

    #[test]
    fn jobs_are_capped() {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(worker_threads(None), cpus.min(MAX_JOBS));
        assert_eq!(worker_threads(Some(0)), cpus.min(MAX_JOBS));
        assert_eq!(worker_threads(Some(1)), 1);
        assert_eq!(worker_threads(Some(3)), 3);
        assert_eq!(worker_threads(Some(5000)), MAX_JOBS);
        assert_eq!(worker_threads(Some(usize::MAX)), MAX_JOBS);
    }
}
