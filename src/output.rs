//! Writing output: a document with one `write_all`, then a flush; a diagnostic line with one
//! write; JSON rendered the same way by every command (pretty like jq, or compact).
//!
//! The writers are the caller's (the binary gives stdout and stderr): nothing here touches the
//! process's streams. A closed output (`ctx count big.jsonl | head -1`) is not an error: it is
//! reported as [`WriteError::Closed`] so the caller can stop quietly, and [`write_line`] never
//! fails, since a closed stderr ends as quietly as a closed stdout (SPEC §5).

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

/// Where output documents go (the binary's is stdout), unbuffered beyond one document.
pub struct DocumentWriter<W: Write> {
    out: W,
}

impl<W: Write> DocumentWriter<W> {
    /// A writer of documents to `out`.
    pub fn new(out: W) -> DocumentWriter<W> {
        DocumentWriter { out }
    }

    /// Writes one rendered document and flushes it.
    pub fn write_document(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        let r = self.out.write_all(bytes).and_then(|()| self.out.flush());
        match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(WriteError::Closed),
            Err(e) => Err(WriteError::Failed(e)),
        }
    }
}

/// Writes one line (a newline is added) with one write. Nothing can fail here: a closed stderr
/// (`2>&1 | true`) or any other write error loses the line and the run goes on, where
/// `eprintln!` would panic.
pub fn write_line(mut out: impl Write, line: &str) {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    let _ = out.write_all(&buf);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes `accept` bytes, then fails with `kind`.
    struct Failing {
        written: Vec<u8>,
        accept: usize,
        kind: io::ErrorKind,
    }

    impl Write for Failing {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let n = b.len().min(self.accept - self.written.len());
            if n == 0 {
                return Err(self.kind.into());
            }
            self.written.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn failing(accept: usize, kind: io::ErrorKind) -> Failing {
        Failing {
            written: Vec::new(),
            accept,
            kind,
        }
    }

    #[test]
    fn a_closed_reader_is_told_apart_from_a_failed_write() {
        let mut w = DocumentWriter::new(Vec::new());
        assert!(w.write_document(b"[1]\n").is_ok());
        assert_eq!(w.out, b"[1]\n");
        let mut w = DocumentWriter::new(failing(2, io::ErrorKind::BrokenPipe));
        assert!(matches!(
            w.write_document(b"[1]\n"),
            Err(WriteError::Closed)
        ));
        let mut w = DocumentWriter::new(failing(0, io::ErrorKind::StorageFull));
        assert!(matches!(
            w.write_document(b"[1]\n"),
            Err(WriteError::Failed(e)) if e.kind() == io::ErrorKind::StorageFull
        ));
    }

    #[test]
    fn a_line_is_one_write_and_never_fails() {
        let mut out = Vec::new();
        write_line(&mut out, "ctx: warning: x");
        assert_eq!(out, b"ctx: warning: x\n");
        write_line(failing(0, io::ErrorKind::BrokenPipe), "lost");
    }

    #[test]
    fn documents_render_pretty_or_compact_with_a_newline() {
        let v = serde_json::json!({"a": [1, 2]});
        assert_eq!(render(&v, true), b"{\"a\":[1,2]}\n");
        assert_eq!(render(&v, false), b"{\n  \"a\": [\n    1,\n    2\n  ]\n}\n");
    }
}
