//! The `--report` and `--dropped` outputs: one JSON line per document (the report) and per
//! removed or rewritten message (dropped), beside the documents on stdout.
//!
//! Owns opening them safely (never an input, never both the same file, nothing created when a
//! check fails), the lines' shape (each names its file and document), the run's notes in the
//! first report line, and a reader that went away (`--report - 2>&1 | head -1`), which closes
//! that output quietly. It does not touch the process's streams itself: whoever opens the
//! sidecars says which file stdin is and gives the writer for `-` (stderr).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Map, Value};

use super::{CannotFit, Exit, Outcome, SideArgs};
use crate::input::Origin;

/// What identifies a file whatever the path it is named by (`./a.json`, a symlink, a hard
/// link): its device and inode.
#[cfg(unix)]
pub type FileKey = (u64, u64);
/// What identifies a file: its canonical path.
#[cfg(not(unix))]
pub type FileKey = PathBuf;

/// The key of an open file's metadata; `None` for anything but a regular file (a pipe, a
/// terminal, `/dev/null`: writing those destroys no input). `path` is its canonical path,
/// which identifies it where there are no inodes.
pub fn file_key(meta: &std::fs::Metadata, path: Option<&Path>) -> Option<FileKey> {
    if !meta.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let _ = path;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        path.map(Path::to_path_buf)
    }
}

/// The key of a regular file, following symlinks; `None` for anything else or a path that does
/// not exist.
fn regular_file_key(path: &Path) -> Option<FileKey> {
    let path = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&path).ok()?;
    file_key(&meta, Some(&path))
}

/// One `--report` or `--dropped` output.
struct Sidecar {
    out: Box<dyn Write>,
    /// Set once its reader has gone (a closed pipe): nothing more is written to it.
    closed: bool,
}

/// The `--report` and `--dropped` outputs of a run.
pub struct Sidecars {
    report: Option<Sidecar>,
    dropped: Option<Sidecar>,
    /// Notes about the run still to be told in the next report line (with `--report -`, where
    /// text lines would break the JSON Lines).
    pub notices: Vec<String>,
}

impl Sidecars {
    /// No sidecars: the commands that have no `--report` or `--dropped`.
    pub fn none() -> Sidecars {
        Sidecars {
            report: None,
            dropped: None,
            notices: Vec::new(),
        }
    }

    /// Opens the sidecars of `args`, after checking that none of them is one of the `inputs`
    /// (inputs are never written: `--report a.json a.json` would empty the input before it is
    /// read) nor stdin when stdin is read (`stdin` gives its key, asked only then). `-` writes
    /// to what `stderr` gives. Nothing is created or truncated when a check fails.
    pub fn open(
        args: &SideArgs,
        inputs: &[PathBuf],
        stdin: impl FnOnce() -> Option<FileKey>,
        stderr: impl Fn() -> Box<dyn Write>,
    ) -> Result<Sidecars> {
        let named = [("--report", &args.report), ("--dropped", &args.dropped)];
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
            let stdin = if crate::input::reads_stdin(inputs) {
                stdin()
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
        let open = |path: &Path, append: bool| -> Result<Sidecar> {
            let out: Box<dyn Write> = if path.as_os_str() == "-" {
                stderr()
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
        Ok(Sidecars {
            report: args.report.as_deref().map(|p| open(p, false)).transpose()?,
            dropped: args.dropped.as_deref().map(|p| open(p, true)).transpose()?,
            notices: Vec::new(),
        })
    }

    fn origin_fields(origin: &Origin) -> Map<String, Value> {
        let mut m = Map::new();
        if let Some(f) = &origin.file {
            m.insert("file".into(), f.clone().into());
        }
        m.insert("document".into(), origin.index.into());
        m
    }

    /// Writes one JSON line. A sidecar whose reader has gone (`--report - 2>&1 | head -1`) is
    /// closed quietly, and the run goes on; any other write error is returned.
    fn write(side: &mut Option<Sidecar>, v: Value) -> Result<()> {
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
    fn write_report(&mut self, mut m: Map<String, Value>) -> Result<()> {
        if !self.notices.is_empty() {
            m.insert("notices".into(), std::mem::take(&mut self.notices).into());
        }
        Self::write(&mut self.report, m.into())
    }

    /// Records a document's outcome: its report line and its dropped messages, each naming
    /// the document. What no sidecar asked for is taken out of `out` unwritten.
    pub fn success(&mut self, origin: &Origin, out: &mut Outcome) -> Result<()> {
        // Nothing is assembled for a sidecar nobody asked for (a fit can drop thousands).
        if self.report.is_none() {
            out.report = None;
        }
        if self.dropped.is_none() {
            out.dropped.clear();
        }
        if let Some(report) = out.report.take() {
            let mut m = Self::origin_fields(origin);
            if let Value::Object(r) = report {
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

    /// Records a document that failed with `e` and `code`: a report line with the error.
    pub fn failure(&mut self, origin: &Origin, e: &anyhow::Error, code: Exit) -> Result<()> {
        if self.report.is_none() {
            return Ok(());
        }
        let mut m = Self::origin_fields(origin);
        if let Some(line) = e.downcast_ref::<crate::document::BatchLine>() {
            m.insert("custom_id".into(), line.0.clone().into());
        }
        m.insert("error".into(), format!("{e:#}").into());
        m.insert("exit".into(), code.code().into());
        if let Some(cf) = e.downcast_ref::<CannotFit>() {
            m.insert("tokens_before".into(), cf.tokens_before.into());
            m.insert("budget".into(), cf.budget.into());
        }
        self.write_report(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::Dropped;
    use serde_json::json;
    use std::sync::{Arc, Mutex};

    /// A writer whose bytes the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn lines(&self) -> Vec<Value> {
            let bytes = self.0.lock().unwrap();
            std::str::from_utf8(&bytes)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        }
    }

    /// A writer that fails with `kind`.
    struct Failing(std::io::ErrorKind);

    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(self.0.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn to_stderr(report: bool, dropped: bool) -> SideArgs {
        SideArgs {
            report: report.then(|| PathBuf::from("-")),
            dropped: dropped.then(|| PathBuf::from("-")),
        }
    }

    fn open_with(args: &SideArgs, stderr: &Shared) -> Sidecars {
        let stderr = stderr.clone();
        Sidecars::open(args, &[], || None, move || Box::new(stderr.clone())).unwrap()
    }

    fn origin(file: Option<&str>, index: usize) -> Origin {
        Origin {
            file: file.map(String::from),
            index,
            in_document: true,
            input: 1,
        }
    }

    fn outcome() -> Outcome {
        Outcome {
            report: Some(json!({"command": "prune", "tokens_after": 5})),
            dropped: vec![Dropped {
                index: 2,
                reason: "cleared".into(),
                message: json!({"role": "tool", "content": "x"}),
            }],
            ..Outcome::default()
        }
    }

    #[test]
    fn lines_name_their_document_and_notes_go_in_the_first_report_line() {
        let err = Shared::default();
        let mut s = open_with(&to_stderr(true, true), &err);
        s.notices = vec!["fit: --engine auto chose extractive".into()];
        s.success(&origin(Some("a.json"), 0), &mut outcome())
            .unwrap();
        s.success(&origin(None, 1), &mut outcome()).unwrap();
        assert_eq!(
            err.lines(),
            vec![
                json!({"file": "a.json", "document": 0, "notices": ["fit: --engine auto chose extractive"], "command": "prune", "tokens_after": 5}),
                json!({"file": "a.json", "document": 0, "index": 2, "reason": "cleared", "message": {"role": "tool", "content": "x"}}),
                json!({"document": 1, "command": "prune", "tokens_after": 5}),
                json!({"document": 1, "index": 2, "reason": "cleared", "message": {"role": "tool", "content": "x"}}),
            ]
        );
    }

    #[test]
    fn a_failed_document_gets_a_report_line_with_its_error_and_exit() {
        let err = Shared::default();
        let mut s = open_with(&to_stderr(true, false), &err);
        let e = anyhow::Error::new(CannotFit {
            reason: "the pinned messages alone are 900 tokens".into(),
            tokens_before: 1200,
            budget: 500,
        });
        s.failure(&origin(None, 3), &e, Exit::CannotFit).unwrap();
        s.failure(
            &origin(None, 4),
            &anyhow::anyhow!("bad"),
            Exit::UsageOrInput,
        )
        .unwrap();
        assert_eq!(
            err.lines(),
            vec![
                json!({"document": 3, "error": "cannot fit in 500 tokens: the pinned messages alone are 900 tokens", "exit": 3, "tokens_before": 1200, "budget": 500}),
                json!({"document": 4, "error": "bad", "exit": 2}),
            ]
        );
    }

    #[test]
    fn nothing_is_assembled_for_a_sidecar_nobody_asked_for() {
        let err = Shared::default();
        let mut s = open_with(&to_stderr(false, true), &err);
        let mut out = outcome();
        s.success(&origin(None, 0), &mut out).unwrap();
        assert!(out.report.is_none() && out.dropped.is_empty());
        assert_eq!(err.lines().len(), 1, "only the dropped message");
        let mut none = Sidecars::none();
        let mut out = outcome();
        none.success(&origin(None, 0), &mut out).unwrap();
        none.failure(&origin(None, 0), &anyhow::anyhow!("x"), Exit::UsageOrInput)
            .unwrap();
        assert!(out.report.is_none() && out.dropped.is_empty());
    }

    #[test]
    fn a_closed_reader_closes_the_sidecar_quietly_and_other_errors_are_returned() {
        use std::io::ErrorKind::{BrokenPipe, StorageFull};
        for kind in [BrokenPipe, StorageFull] {
            let args = to_stderr(true, false);
            let mut s = Sidecars::open(&args, &[], || None, || Box::new(Failing(kind))).unwrap();
            let first = s.success(&origin(None, 0), &mut outcome());
            assert_eq!(first.is_ok(), kind == BrokenPipe, "{kind:?}");
            assert_eq!(s.report.as_ref().unwrap().closed, kind == BrokenPipe);
            if kind == BrokenPipe {
                s.success(&origin(None, 1), &mut outcome()).unwrap();
            }
        }
    }

    #[test]
    fn inputs_and_a_shared_path_are_refused_before_anything_is_created() {
        let dir = std::env::temp_dir().join(format!("ctx-sidecar-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("in.json");
        std::fs::write(&input, "[]").unwrap();
        let fresh = dir.join("report.jsonl");
        let args = |report: &Path, dropped: Option<&Path>| SideArgs {
            report: Some(report.to_path_buf()),
            dropped: dropped.map(Path::to_path_buf),
        };
        let open = |a: &SideArgs, inputs: &[PathBuf], stdin: Option<FileKey>| {
            Sidecars::open(a, inputs, move || stdin, || Box::new(std::io::sink()))
                .err()
                .map(|e| e.to_string())
        };
        let inputs = [input.clone()];
        let e = open(&args(&input, None), &inputs, None).unwrap();
        assert!(e.contains("is also the input"), "{e}");
        // The same file by another name.
        #[cfg(unix)]
        {
            let link = dir.join("link.json");
            let _ = std::fs::remove_file(&link);
            std::fs::hard_link(&input, &link).unwrap();
            let e = open(&args(&link, None), &inputs, None).unwrap();
            assert!(e.contains("is also the input"), "{e}");
        }
        // The file on stdin, asked for only when stdin is read.
        let key = regular_file_key(&input);
        assert!(key.is_some());
        let e = open(&args(&input, None), &[], key).unwrap();
        assert!(e.contains("(on stdin)"), "{e}");
        let not_read = || -> Option<FileKey> { panic!("stdin is not an input here") };
        let other = Sidecars::open(&args(&fresh, None), &inputs, not_read, || {
            Box::new(std::io::sink())
        });
        assert!(other.is_ok() && fresh.exists());
        // --report and --dropped on one file still to be created, named two ways.
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let same = dir.join("same.jsonl");
        let e = open(
            &args(&same, Some(&dir.join("sub/../same.jsonl"))),
            &[],
            None,
        )
        .unwrap();
        assert!(e.contains("name the same file"), "{e}");
        assert!(!same.exists(), "nothing is created when a check fails");
        assert_eq!(std::fs::read_to_string(&input).unwrap(), "[]");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
