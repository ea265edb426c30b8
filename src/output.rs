//! Writing output documents to stdout: one `write_all` per document, then a flush.
//!
//! A closed stdout (`ctx count big.jsonl | head -1`) is not an error: it is reported as
//! [`WriteError::Closed`] so the caller can stop quietly. Lines for stderr go through
//! [`stderr_line`], which never panics, since a closed stderr ends as quietly as a closed stdout
//! (SPEC §5). Rendering JSON (pretty like jq, or compact) is here too, so every command formats
//! documents the same way.

use std::io::{self, Write};

use serde_json::Value;

/// Why output stopped.
#[derive(Debug)]
pub enum WriteError {
    /// Stdout was closed by the reader (`| head`): stop quietly.
    Closed,
    /// Any other write error (a full disk): reported, exit 2.
    Failed(io::Error),
}

/// The process's stdout.
pub struct Stdout {
    out: io::Stdout,
}

impl Default for Stdout {
    fn default() -> Stdout {
        Stdout::new()
    }
}

impl Stdout {
    /// Stdout, unbuffered beyond one document.
    pub fn new() -> Stdout {
        Stdout { out: io::stdout() }
    }

    /// Writes one rendered document and flushes it.
    pub fn write_document(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        let mut lock = self.out.lock();
        let r = lock.write_all(bytes).and_then(|()| lock.flush());
        match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(WriteError::Closed),
            Err(e) => Err(WriteError::Failed(e)),
        }
    }
}

/// Writes one line (a newline is added) to stderr with one write. Nothing can fail here: a
/// closed stderr (`2>&1 | true`) or any other write error loses the line and the run goes on,
/// where `eprintln!` would panic.
pub fn stderr_line(line: &str) {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    let _ = io::stderr().lock().write_all(&buf);
}

/// Renders a JSON value: pretty with two-space indents (like jq), or compact on one line.
/// Always ends with a newline.
pub fn render(v: &Value, compact: bool) -> Vec<u8> {
    let mut buf = if compact {
        serde_json::to_vec(v)
    } else {
        serde_json::to_vec_pretty(v)
    }
    .expect("serialising a serde_json::Value cannot fail");
    buf.push(b'\n');
    buf
}
