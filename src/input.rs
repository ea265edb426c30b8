//! Reading documents: a stream of JSON values from stdin or files, read incrementally and within
//! a bound.
//!
//! Whitespace-separated values and JSON Lines both work, as in jq. Documents are delimited
//! here and parsed by `RawDocument::parse` (on whichever thread processes them). A UTF-8
//! byte-order mark at the start of an input is skipped; UTF-16 and UTF-32 are refused with the
//! conversion to run. No document may be larger than the input limit (`--max-input-size`), so
//! memory stays bounded whatever arrives. A syntax error ends the stream of the input it is in
//! (it cannot be resynchronised) and nothing more is read from that input: the splitter stops
//! by itself at bytes JSON cannot hold, and the caller calls [`Documents::end_input`] for the
//! errors only parsing finds. Other inputs are still read. An input without any document is an
//! error, so that a CI gate never passes on nothing. Files are opened here; stdin is never
//! touched: for `-` (or no file) the caller gives a reader (the binary gives the process's stdin,
//! after refusing a terminal). The files named by flags (`--tools`, `--prompt-file`,
//! `--summary-file`) are read here too, within the same limit. This module knows nothing of what
//! a document means.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Error, anyhow, bail};
use serde_json::{Number, Value};

/// Where a document came from, for error messages and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The file, or `None` for stdin.
    pub file: Option<String>,
    /// The document's position in its file (or in stdin), from 0.
    pub index: usize,
    /// False when the error is about the input itself (it could not be opened, it is empty, it
    /// is not UTF-8).
    pub in_document: bool,
    /// Which input (file or stdin) it came from, counting from 1 in command-line order.
    pub input: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.file, self.in_document) {
            (Some(file), true) => write!(f, "{file}: document {}", self.index),
            (Some(file), false) => write!(f, "{file}"),
            (None, true) => write!(f, "document {}", self.index),
            (None, false) => write!(f, "stdin"),
        }
    }
}

/// A size in bytes as `--max-input-size` takes it: `1000`, `512K`, `64M`, `1G` (powers of
/// 1024; `KB`, `KiB` and lower case are accepted too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

/// The default input limit: the largest document, and the largest flag file, ctx reads.
pub const DEFAULT_MAX_INPUT_SIZE: ByteSize = ByteSize(256 << 20);

impl Default for ByteSize {
    fn default() -> ByteSize {
        DEFAULT_MAX_INPUT_SIZE
    }
}

impl ByteSize {
    fn bytes(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<ByteSize, String> {
        let bad = || format!("'{s}' is not a size like 1000, 512K, 64M or 1G");
        let t = s.trim();
        let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (number, unit) = t.split_at(digits);
        let number: u64 = number.parse().map_err(|_| bad())?;
        let shift = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 0,
            "k" | "kb" | "kib" => 10,
            "m" | "mb" | "mib" => 20,
            "g" | "gb" | "gib" => 30,
            "t" | "tb" | "tib" => 40,
            _ => return Err(bad()),
        };
        let bytes = number
            .checked_mul(1 << shift)
            .ok_or_else(|| format!("'{s}' is too large"))?;
        if bytes == 0 {
            return Err(format!("'{s}': the limit must be at least 1 byte"));
        }
        Ok(ByteSize(bytes))
    }
}

impl std::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0;
        for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if n >= 1 << shift && n % (1 << shift) == 0 {
                return write!(f, "{} {unit}", n >> shift);
            }
        }
        write!(f, "{n} bytes")
    }
}

/// One document as read: its bytes, not yet parsed, and where it starts in its input.
pub struct RawDocument {
    /// The document's bytes.
    pub bytes: Vec<u8>,
    /// Line (from 1) and bytes before it on that line, for error positions in input terms.
    line: usize,
    column: usize,
    /// Whether a number with an exponent may be in it (whose spelling parsing changes).
    exponents: bool,
}

/// A syntax error: it ends the stream of the input it is in, which cannot be resynchronised.
#[derive(Debug)]
pub struct SyntaxError(pub String);

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SyntaxError {}

impl RawDocument {
    /// A whole text that must hold exactly one JSON value (a flag file).
    pub fn whole(bytes: Vec<u8>) -> RawDocument {
        RawDocument {
            bytes,
            line: 1,
            column: 0,
            exponents: true,
        }
    }

    /// Parses the document. Errors are `SyntaxError`s, positioned in the whole input (line and
    /// column as serde_json counts them: lines from 1, columns in bytes from 1). Numbers keep
    /// the spelling they have in the input.
    pub fn parse(&self) -> Result<Value, Error> {
        let mut value = serde_json::from_slice(&self.bytes).map_err(|e| self.syntax_error(&e))?;
        if self.exponents {
            restore_exponents(&self.bytes, &mut value);
        }
        Ok(value)
    }

    fn syntax_error(&self, e: &serde_json::Error) -> Error {
        let mut text = e.to_string();
        let mut position = String::new();
        if let Some(at) = text.rfind(" at line ") {
            let line = e.line();
            let column = if line == 1 {
                self.column + e.column()
            } else {
                e.column()
            };
            text.truncate(at);
            position = format!(" at line {} column {column}", self.line + line - 1);
        }
        let offset = self.offset(e.line(), e.column());
        let why = if e.is_eof() {
            format!("invalid JSON: the input ends inside a value ({text}{position})")
        } else if text == "lone leading surrogate in hex escape"
            || text == "unexpected end of hex escape"
        {
            let escape = self
                .surrogate_before(offset)
                .map_or_else(|| "\\uD800-\\uDFFF".to_string(), |e| e.to_string());
            format!(
                "invalid JSON: lone surrogate escape {escape} in a string{position}: half of a \
                 UTF-16 pair without its other half is not a character (the text was probably \
                 cut in the middle of an emoji or another character outside the BMP)"
            )
        } else if self.bytes.get(offset) == Some(&0) {
            format!("invalid JSON: {text}{position} (a NUL byte: binary data, not JSON text)")
        } else {
            format!("invalid JSON: {text}{position}")
        };
        Error::new(SyntaxError(why))
    }

    /// The byte offset in the document of serde_json's error position (line from 1, column in
    /// bytes from 1, 0 before the first byte of a line).
    fn offset(&self, line: usize, column: usize) -> usize {
        let start = if line <= 1 {
            0
        } else {
            memchr::memchr_iter(b'\n', &self.bytes)
                .nth(line - 2)
                .map_or(self.bytes.len(), |p| p + 1)
        };
        (start + column.saturating_sub(1)).min(self.bytes.len())
    }

    /// The last `\uD800`-`\uDFFF` escape that ends at or just before `offset`.
    fn surrogate_before(&self, offset: usize) -> Option<&str> {
        let end = (offset + 1).min(self.bytes.len());
        let window = &self.bytes[offset.saturating_sub(16)..end];
        (0..window.len().saturating_sub(5)).rev().find_map(|i| {
            let w = &window[i..i + 6];
            let surrogate = w[0] == b'\\'
                && w[1] == b'u'
                && matches!(w[2], b'd' | b'D')
                && matches!(w[3], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
                && w[4..].iter().all(u8::is_ascii_hexdigit);
            surrogate.then(|| std::str::from_utf8(w).ok()).flatten()
        })
    }
}

/// serde_json keeps numbers as they are written (`arbitrary_precision`: `1.0`, `-0` and big
/// integers survive) except for exponents, which it spells `e+5` whatever the input had (`1e5`,
/// `1E5`, `1E+5`). This puts the input's spelling back, so that a document passes through
/// byte for byte. The numbers with an exponent are found in the text in order and matched one
/// for one with those of the value; if they do not match (duplicate keys), nothing is changed.
/// Two passes that allocate nothing (check, then replace), so that a document made of numbers
/// costs no extra memory.
fn restore_exponents(bytes: &[u8], value: &mut Value) {
    /// Deeper values are left as serde_json spells them (its parser stops at 128 anyway).
    const MAX_DEPTH: usize = 512;

    fn matches(v: &Value, spelled: &mut ExponentNumbers, depth: usize) -> bool {
        match v {
            Value::Number(n) if n.as_str().contains('e') => {
                spelled.next().is_some_and(|s| same_number(n.as_str(), s))
            }
            _ if depth > MAX_DEPTH => false,
            Value::Array(items) => items.iter().all(|v| matches(v, spelled, depth + 1)),
            Value::Object(map) => map.values().all(|v| matches(v, spelled, depth + 1)),
            _ => true,
        }
    }

    fn restore(v: &mut Value, spelled: &mut ExponentNumbers) {
        match v {
            Value::Number(n) if n.as_str().contains('e') => {
                if let Some(s) = spelled.next().filter(|s| n.as_str() != *s) {
                    // The one way to hold a spelling serde_json would not write itself; the text
                    // is a valid JSON number (the parser just read it), all `Number` requires.
                    *n = Number::from_string_unchecked(s.to_string());
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| restore(v, spelled)),
            Value::Object(map) => map.values_mut().for_each(|v| restore(v, spelled)),
            _ => {}
        }
    }

    let mut spelled = ExponentNumbers { bytes, at: 0 };
    if matches(value, &mut spelled, 0) && spelled.next().is_none() {
        restore(value, &mut ExponentNumbers { bytes, at: 0 });
    }
}

/// The numbers with an exponent in a JSON text, in order, as written.
struct ExponentNumbers<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Iterator for ExponentNumbers<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let bytes = self.bytes;
        while self.at < bytes.len() {
            match bytes[self.at] {
                b'"' => {
                    self.at += 1;
                    loop {
                        match memchr::memchr2(b'"', b'\\', bytes.get(self.at..)?) {
                            None => return None,
                            Some(k) if bytes[self.at + k] == b'\\' => self.at += k + 2,
                            Some(k) => {
                                self.at += k + 1;
                                break;
                            }
                        }
                    }
                }
                b'-' | b'0'..=b'9' => {
                    let start = self.at;
                    while self.at < bytes.len()
                        && matches!(
                            bytes[self.at],
                            b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'
                        )
                    {
                        self.at += 1;
                    }
                    let token = &bytes[start..self.at];
                    if token.iter().any(|b| matches!(b, b'e' | b'E')) {
                        return std::str::from_utf8(token).ok();
                    }
                }
                _ => self.at += 1,
            }
        }
        None
    }
}

/// Whether `parsed` is how serde_json spells the number written `spelled`: the exponent with
/// `e`, then always a sign.
fn same_number(parsed: &str, spelled: &str) -> bool {
    let Some(at) = spelled.find(['e', 'E']) else {
        return parsed == spelled;
    };
    let (mantissa, exponent) = (&spelled[..at], &spelled[at + 1..]);
    let Some(rest) = parsed
        .strip_prefix(mantissa)
        .and_then(|r| r.strip_prefix('e'))
    else {
        return false;
    };
    if exponent.starts_with(['+', '-']) {
        rest == exponent
    } else {
        rest.strip_prefix('+') == Some(exponent)
    }
}

/// Bytes that may stand outside strings in JSON text: whitespace, structure, and what numbers
/// and the literals `true`, `false` and `null` are made of. Any other byte there is a syntax
/// error, found while splitting, so that garbage (`/dev/zero`, `yes`) is not read on.
const OUTSIDE_STRINGS: [bool; 256] = byte_set(b" \t\n\r{}[],:\"0123456789+-.eEaflnrstu");

/// Bytes a top-level number or literal is made of.
const SCALAR: [bool; 256] = byte_set(b"0123456789+-.eEaflnrstu");

const fn byte_set(bytes: &[u8]) -> [bool; 256] {
    let mut set = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        set[bytes[i] as usize] = true;
        i += 1;
    }
    set
}

/// Why reading an input stopped early.
enum ReadError {
    Io(io::Error),
    /// The input is not UTF-8: what it is, and the name `iconv -f` knows it by.
    Encoding {
        name: &'static str,
        iconv: &'static str,
    },
    /// A document over the limit.
    TooLarge,
}

/// What the first bytes of an input say about its encoding.
#[derive(Debug, PartialEq)]
enum Sniff {
    /// UTF-8, after `skip` bytes of byte-order mark.
    Utf8 { skip: usize },
    /// Not UTF-8.
    Foreign {
        name: &'static str,
        iconv: &'static str,
    },
    /// Too few bytes to tell.
    NeedMore,
}

/// Recognises UTF-16 and UTF-32 from a byte-order mark or from the NUL bytes that ASCII text
/// has in them (RFC 4627's method), and a UTF-8 byte-order mark. `eof`: no more bytes come.
fn sniff(head: &[u8], eof: bool) -> Sniff {
    let foreign = |name, iconv| Sniff::Foreign { name, iconv };
    let undecided = head.len() < 4
        && (head.len() < 2
            || head.contains(&0)
            || [&b"\xEF\xBB\xBF"[..], b"\xFF\xFE\x00\x00"]
                .iter()
                .any(|bom| bom.starts_with(head)));
    if undecided && !eof {
        return Sniff::NeedMore;
    }
    match head {
        [0xEF, 0xBB, 0xBF, ..] => Sniff::Utf8 { skip: 3 },
        [0x00, 0x00, 0xFE, 0xFF, ..] => {
            foreign("UTF-32 (big-endian, with a byte-order mark)", "UTF-32")
        }
        [0xFF, 0xFE, 0x00, 0x00, ..] => {
            foreign("UTF-32 (little-endian, with a byte-order mark)", "UTF-32")
        }
        [0xFE, 0xFF, ..] => foreign("UTF-16 (big-endian, with a byte-order mark)", "UTF-16"),
        [0xFF, 0xFE, ..] => foreign("UTF-16 (little-endian, with a byte-order mark)", "UTF-16"),
        [0x00, 0x00, 0x00, x, ..] if *x != 0 => foreign("UTF-32 (big-endian)", "UTF-32BE"),
        [x, 0x00, 0x00, 0x00, ..] if *x != 0 => foreign("UTF-32 (little-endian)", "UTF-32LE"),
        [0x00, x, ..] if *x != 0 => foreign("UTF-16 (big-endian)", "UTF-16BE"),
        [x, 0x00, ..] if *x != 0 => foreign("UTF-16 (little-endian)", "UTF-16LE"),
        _ => Sniff::Utf8 { skip: 0 },
    }
}

/// Splits one input into documents without parsing them: whitespace-separated JSON values,
/// found by tracking strings and bracket depth, so that parsing (most of the work of reading)
/// can happen on other threads. Whatever is not valid JSON is still cut into some document,
/// whose parse then fails with the position of the first error; a byte that cannot be JSON
/// outside a string ends the document, and the input, right there.
struct Splitter {
    reader: Box<dyn Read>,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    line: usize,
    column: usize,
    /// The largest document, in bytes.
    limit: usize,
    /// Whether the encoding has been checked (on the first read).
    started: bool,
    /// Whether whitespace was read (to tell an empty input from a blank one).
    blank: bool,
    /// A document was cut at a byte that cannot be JSON: the input ends after it.
    broken: bool,
}

impl Splitter {
    fn new(reader: Box<dyn Read>, limit: ByteSize) -> Splitter {
        Splitter {
            reader,
            buf: Vec::new(),
            pos: 0,
            eof: false,
            line: 1,
            column: 0,
            limit: limit.bytes(),
            started: false,
            blank: false,
            broken: false,
        }
    }

    /// Reads the first bytes and checks the encoding; a UTF-8 byte-order mark is skipped.
    fn start(&mut self) -> Result<(), ReadError> {
        self.started = true;
        let mut head = [0u8; 4];
        let mut n = 0;
        let skip = loop {
            match sniff(&head[..n], self.eof) {
                Sniff::Utf8 { skip } => break skip,
                Sniff::Foreign { name, iconv } => return Err(ReadError::Encoding { name, iconv }),
                Sniff::NeedMore => {}
            }
            match self.reader.read(&mut head[n..]) {
                Ok(0) => self.eof = true,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        };
        self.buf.clear();
        self.buf.extend_from_slice(&head[..n]);
        self.pos = skip;
        Ok(())
    }

    /// Makes sure unread bytes are buffered, unless the input is exhausted.
    fn fill(&mut self) -> Result<bool, ReadError> {
        if self.pos < self.buf.len() {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        // Large reads: the caller writes every owed result whenever the buffer runs dry.
        self.buf.resize(1 << 20, 0);
        self.pos = 0;
        loop {
            match self.reader.read(&mut self.buf) {
                Ok(0) => {
                    self.buf.clear();
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.buf.truncate(n);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.clear();
                    return Err(ReadError::Io(e));
                }
            }
        }
    }

    /// Moves past `n` buffered bytes, keeping the line and column up to date.
    fn consume(&mut self, n: usize) {
        let taken = &self.buf[self.pos..self.pos + n];
        match memchr::memrchr(b'\n', taken) {
            Some(last) => {
                self.line += memchr::memchr_iter(b'\n', taken).count();
                self.column = n - 1 - last;
            }
            None => self.column += n,
        }
        self.pos += n;
    }

    /// The next document, `None` at the end of the input (or after a byte that cannot be JSON).
    fn next_document(&mut self) -> Result<Option<RawDocument>, ReadError> {
        if self.broken {
            return Ok(None);
        }
        if !self.started {
            self.start()?;
        }
        // Whitespace between documents, as JSON defines it.
        loop {
            if !self.fill()? {
                return Ok(None);
            }
            let rest = &self.buf[self.pos..];
            let n = rest
                .iter()
                .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(rest.len());
            self.blank |= n > 0;
            self.consume(n);
            if self.pos < self.buf.len() {
                break;
            }
        }
        let mut doc = RawDocument {
            bytes: Vec::new(),
            line: self.line,
            column: self.column,
            exponents: false,
        };
        let scalar = !matches!(self.buf[self.pos], b'{' | b'[' | b'"');
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        // Scans a buffer at a time; `end` is where the document ends in it, if it does.
        while self.fill()? {
            let chunk = &self.buf[self.pos..];
            let mut end = None;
            let mut i = 0;
            while i < chunk.len() {
                let b = chunk[i];
                if scalar {
                    let started = i > 0 || !doc.bytes.is_empty();
                    if started
                        && matches!(
                            b,
                            b' ' | b'\t'
                                | b'\n'
                                | b'\r'
                                | b'{'
                                | b'['
                                | b'"'
                                | b']'
                                | b'}'
                                | b','
                                | b':'
                        )
                    {
                        end = Some(i); // the end of a number or literal
                        break;
                    }
                    i += 1;
                    if !SCALAR[b as usize] {
                        // A stray `]`, `}`, `,` or `:`, or a byte no JSON has: a syntax error.
                        end = Some(i);
                        self.broken = true;
                        break;
                    }
                    continue;
                }
                if in_string {
                    if escaped {
                        escaped = false;
                        i += 1;
                        continue;
                    }
                    match memchr::memchr2(b'"', b'\\', &chunk[i..]) {
                        None => i = chunk.len(),
                        Some(k) => {
                            i += k;
                            if chunk[i] == b'\\' {
                                escaped = true;
                            } else {
                                in_string = false;
                                if depth == 0 {
                                    end = Some(i + 1); // a top-level string
                                    break;
                                }
                            }
                            i += 1;
                        }
                    }
                    continue;
                }
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            end = Some(i + 1);
                            break;
                        }
                    }
                    b'e' | b'E' => {
                        // An exponent follows a digit (the `e` of `true` and `false` does not).
                        let before = match i {
                            0 => doc.bytes.last().copied(),
                            _ => Some(chunk[i - 1]),
                        };
                        doc.exponents |= before.is_some_and(|c| c.is_ascii_digit());
                    }
                    _ if !OUTSIDE_STRINGS[b as usize] => {
                        end = Some(i + 1); // the parse fails here
                        self.broken = true;
                        break;
                    }
                    _ => {}
                }
                i += 1;
            }
            let take = end.unwrap_or(chunk.len());
            if doc.bytes.len() + take > self.limit {
                return Err(ReadError::TooLarge);
            }
            doc.bytes.extend_from_slice(&chunk[..take]);
            self.consume(take);
            if end.is_some() {
                break;
            }
        }
        Ok(Some(doc))
    }
}

/// The input being read.
struct Current {
    /// The file's name, `None` for stdin.
    name: Option<String>,
    splitter: Splitter,
    /// Documents read from it so far.
    index: usize,
}

/// Whether reading `files` reads stdin: none are named, or one is `-`.
pub fn reads_stdin(files: &[PathBuf]) -> bool {
    files.is_empty() || files.iter().any(|f| f.as_os_str() == "-")
}

/// Yields every document of every input in order, as `(origin, raw document or error)`.
pub struct Documents {
    files: std::vec::IntoIter<Option<PathBuf>>,
    /// Opens stdin, for each `-`.
    stdin: Box<dyn FnMut() -> Box<dyn Read>>,
    current: Option<Current>,
    /// Inputs opened so far; an origin's `input` is its number.
    inputs: usize,
    /// The largest document.
    limit: ByteSize,
}

impl Documents {
    /// True when the next document can be started without waiting for input: some of it is
    /// already read. A caller holding documents back should send them before asking for the
    /// next one otherwise, so that a document that arrived alone on a pipe is not kept waiting.
    pub fn buffered(&self) -> bool {
        self.current.as_ref().is_some_and(|c| {
            !c.splitter.broken
                && c.splitter.buf[c.splitter.pos..]
                    .iter()
                    .any(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        })
    }

    /// Reads `files` in order, or stdin when there are none; no document may be larger than
    /// `limit`. Stdin (`-`) is whatever `stdin` gives, each time it is named.
    pub fn open(
        files: &[PathBuf],
        limit: ByteSize,
        stdin: impl FnMut() -> Box<dyn Read> + 'static,
    ) -> Documents {
        let list: Vec<Option<PathBuf>> = if files.is_empty() {
            vec![None]
        } else {
            files
                .iter()
                .map(|f| {
                    if f.as_os_str() == "-" {
                        None
                    } else {
                        Some(f.clone())
                    }
                })
                .collect()
        };
        Documents {
            files: list.into_iter(),
            stdin: Box::new(stdin),
            current: None,
            inputs: 0,
            limit,
        }
    }

    /// Stops reading input number `input` (a syntax error ended its stream): the next document
    /// comes from the next input. Nothing happens if that input is already over.
    pub fn end_input(&mut self, input: usize) {
        if self.inputs == input {
            self.current = None;
        }
    }
}

impl Iterator for Documents {
    type Item = (Origin, Result<RawDocument, Error>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(current) = &mut self.current {
                let mut origin = Origin {
                    file: current.name.clone(),
                    index: current.index,
                    in_document: true,
                    input: self.inputs,
                };
                let err = match current.splitter.next_document() {
                    Ok(Some(doc)) => {
                        current.index += 1;
                        return Some((origin, Ok(doc)));
                    }
                    Ok(None) if current.index > 0 => None,
                    Ok(None) => {
                        origin.in_document = false;
                        Some(if current.splitter.blank {
                            anyhow!("no JSON document: the input holds only whitespace")
                        } else {
                            anyhow!("no JSON document: the input is empty")
                        })
                    }
                    Err(ReadError::Io(e)) => {
                        origin.in_document = current.index > 0;
                        Some(anyhow!("cannot read input: {e}"))
                    }
                    Err(ReadError::Encoding { name, iconv }) => {
                        origin.in_document = false;
                        Some(anyhow!(
                            "the input is {name}, not UTF-8; convert it first: iconv -f {iconv} -t UTF-8"
                        ))
                    }
                    Err(ReadError::TooLarge) => Some(anyhow!(
                        "the document is over the {} input limit; raise it with --max-input-size (the rest of this input is not read)",
                        self.limit
                    )),
                };
                self.current = None;
                match err {
                    Some(e) => return Some((origin, Err(e))),
                    None => continue,
                }
            }
            let file = self.files.next()?;
            self.inputs += 1;
            let (name, reader): (Option<String>, Box<dyn Read>) = match file {
                None => (None, (self.stdin)()),
                Some(path) => {
                    let name = path.display().to_string();
                    match File::open(&path) {
                        Ok(f) => (Some(name), Box::new(f)),
                        Err(e) => {
                            let origin = Origin {
                                file: Some(name),
                                index: 0,
                                in_document: false,
                                input: self.inputs,
                            };
                            return Some((origin, Err(anyhow!("cannot open: {e}"))));
                        }
                    }
                }
            };
            self.current = Some(Current {
                name,
                splitter: Splitter::new(reader, self.limit),
                index: 0,
            });
        }
    }
}

impl crate::cmd::pool::Source for Documents {
    type Item = (Origin, Result<RawDocument, Error>);

    fn next_item(&mut self) -> Option<Self::Item> {
        self.next()
    }

    fn ready(&self) -> bool {
        self.buffered()
    }

    fn size(item: &Self::Item) -> usize {
        item.1.as_ref().map_or(0, |d| d.bytes.len())
    }
}

/// Reads a file named by a flag (`--tools`, `--prompt-file`, `--summary-file`) as UTF-8 text,
/// within `limit`. Binary data is refused at its first NUL byte or invalid UTF-8 sequence, and a
/// longer file at the limit, so a device (`/dev/zero`, `/dev/urandom`) fails at once instead of
/// filling the memory; pipes and process substitutions (`<(...)`) work. A UTF-8 byte-order mark
/// is skipped; UTF-16 and UTF-32 are named with the conversion to run.
pub fn read_flag_file(path: &Path, limit: ByteSize) -> Result<String, Error> {
    let mut file = File::open(path).map_err(|e| anyhow!("cannot read: {e}"))?;
    let limit_bytes = limit.bytes();
    let mut text: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    // How much of `text` is known to be UTF-8, once the encoding is known (the mark skipped).
    let mut checked: Option<usize> = None;
    let mut eof = false;
    while !eof {
        let n = match file.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => bail!("cannot read: {e}"),
        };
        eof = n == 0;
        if text.len() + n > limit_bytes {
            bail!("the file is over the {limit} input limit; raise it with --max-input-size");
        }
        text.extend_from_slice(&chunk[..n]);
        let from = match checked {
            Some(c) => c,
            None => match sniff(&text[..text.len().min(4)], eof) {
                Sniff::NeedMore => continue,
                Sniff::Foreign { name, iconv } => bail!(
                    "the file is {name}, not UTF-8; convert it first: iconv -f {iconv} -t UTF-8"
                ),
                Sniff::Utf8 { skip } => {
                    text.drain(..skip);
                    0
                }
            },
        };
        if let Some(at) = memchr::memchr(0, &text[from..]) {
            bail!("binary data, not text (a NUL byte at byte {})", from + at);
        }
        checked = Some(match std::str::from_utf8(&text[from..]) {
            Ok(_) => text.len(),
            // A character cut by the end of the read: the next read completes it.
            Err(e) if e.error_len().is_none() && !eof => from + e.valid_up_to(),
            Err(e) => bail!(
                "not UTF-8 text (an invalid byte at byte {})",
                from + e.valid_up_to()
            ),
        });
    }
    String::from_utf8(text).map_err(|e| anyhow!("not UTF-8 text ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A reader that hands out a few bytes at a time, so documents straddle buffer edges.
    struct Trickle(Vec<u8>, usize, usize);

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.2.min(out.len()).min(self.0.len() - self.1);
            out[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
            self.1 += n;
            Ok(n)
        }
    }

    fn split(input: &str, step: usize) -> Vec<Result<Value, String>> {
        let mut s = Splitter::new(
            Box::new(Trickle(input.as_bytes().to_vec(), 0, step)),
            ByteSize::default(),
        );
        let mut out = Vec::new();
        while let Some(doc) = s.next_document().ok().unwrap() {
            out.push(doc.parse().map_err(|e| e.to_string()));
        }
        out
    }

    #[test]
    fn splits_streams_of_every_shape() {
        let input = "{\"a\": \"}{\\\"]\"}\n[1, [2, {\"b\": []}]]  \"top\\\"level\" 42 -1.5e3 true null\r\n{\n  \"pretty\": [\n    1\n  ]\n}";
        for step in [1, 2, 3, 7, 1 << 16] {
            let docs: Vec<Value> = split(input, step).into_iter().map(Result::unwrap).collect();
            assert_eq!(
                docs,
                vec![
                    json!({"a": "}{\"]"}),
                    json!([1, [2, {"b": []}]]),
                    json!("top\"level"),
                    json!(42),
                    serde_json::from_str::<Value>("-1.5e3").unwrap(),
                    json!(true),
                    json!(null),
                    json!({"pretty": [1]}),
                ],
                "step {step}"
            );
        }
    }

    /// Errors are placed where parsing the whole stream would place them.
    #[test]
    fn syntax_errors_are_positioned_in_the_input() {
        for (input, expected) in [
            ("{}\n{\"a\": }", "expected value at line 2 column 7"),
            ("[1]\n\n   [1, 2,, 3]", "expected value at line 3 column 10"),
            ("{} {\"a\": 1", "the input ends inside a value"),
            ("{}\n{\"a\":\n  tru}", "expected ident at line 3 column 6"),
            (
                "[\"\\ud800\"]",
                "lone surrogate escape \\ud800 in a string at line 1 column",
            ),
            (
                "[\"\\uDC00\"]",
                "lone surrogate escape \\uDC00 in a string at line 1 column",
            ),
        ] {
            let results = split(input, 3);
            let err = results.iter().find_map(|r| r.as_ref().err()).expect(input);
            assert!(err.contains(expected), "{input:?}: {err}");
            assert!(err.starts_with("invalid JSON: "), "{err}");
        }
    }

    /// Everything a splitter yields for `input` read `step` bytes at a time, with `limit`: each
    /// document parsed (or its error), then how the input ended.
    fn read_all(input: &[u8], step: usize, limit: u64) -> (Vec<Result<String, String>>, String) {
        let mut s = Splitter::new(Box::new(Trickle(input.to_vec(), 0, step)), ByteSize(limit));
        let mut out = Vec::new();
        loop {
            match s.next_document() {
                Ok(Some(doc)) => out.push(
                    doc.parse()
                        .map(|v| String::from_utf8(crate::output::render(&v, true)).unwrap())
                        .map_err(|e| e.to_string()),
                ),
                Ok(None) => return (out, "end".into()),
                Err(ReadError::TooLarge) => return (out, "too large".into()),
                Err(ReadError::Encoding { iconv, .. }) => {
                    return (out, format!("encoding {iconv}"));
                }
                Err(ReadError::Io(e)) => return (out, format!("io {e}")),
            }
        }
    }

    #[test]
    fn a_utf8_byte_order_mark_is_skipped() {
        for step in [1, 2, 3, 1 << 16] {
            let (docs, end) = read_all(b"\xEF\xBB\xBF[1]\n{\"a\":\n 2}", step, 1 << 20);
            assert_eq!(end, "end");
            assert_eq!(docs, vec![Ok("[1]\n".into()), Ok("{\"a\":2}\n".into())]);
            // Positions do not count the mark.
            let (docs, _) = read_all(b"\xEF\xBB\xBF[1,]", step, 1 << 20);
            assert!(
                docs[0].as_ref().unwrap_err().contains("line 1 column 4"),
                "{docs:?}"
            );
        }
        // Only at the start: elsewhere it is not JSON.
        let (docs, _) = read_all(b"[1]\n\xEF\xBB\xBF[2]", 1 << 16, 1 << 20);
        assert_eq!(docs.len(), 2);
        assert!(docs[1].is_err());
    }

    #[test]
    fn other_encodings_are_recognised() {
        let text = "[{\"k\": \"v\"}]";
        let le: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let be: Vec<u8> = text.encode_utf16().flat_map(u16::to_be_bytes).collect();
        let le32: Vec<u8> = text
            .chars()
            .flat_map(|c| (c as u32).to_le_bytes())
            .collect();
        let be32: Vec<u8> = text
            .chars()
            .flat_map(|c| (c as u32).to_be_bytes())
            .collect();
        for (input, iconv) in [
            ([&[0xFF, 0xFE][..], &le].concat(), "UTF-16"),
            ([&[0xFE, 0xFF][..], &be].concat(), "UTF-16"),
            ([&[0xFF, 0xFE, 0, 0][..], &le32].concat(), "UTF-32"),
            ([&[0, 0, 0xFE, 0xFF][..], &be32].concat(), "UTF-32"),
            (le.clone(), "UTF-16LE"),
            (be.clone(), "UTF-16BE"),
            (le32.clone(), "UTF-32LE"),
            (be32.clone(), "UTF-32BE"),
            (vec![b'1', 0], "UTF-16LE"),
        ] {
            for step in [1, 3, 1 << 16] {
                let (docs, end) = read_all(&input, step, 1 << 20);
                assert!(docs.is_empty());
                assert_eq!(end, format!("encoding {iconv}"), "{input:?}");
            }
        }
        // NUL bytes that are not text in another encoding are a syntax error.
        let (docs, end) = read_all(&[0; 64], 1 << 16, 1 << 20);
        assert_eq!(end, "end");
        assert_eq!(docs.len(), 1);
        assert!(
            docs[0].as_ref().unwrap_err().contains("NUL byte"),
            "{docs:?}"
        );
    }

    /// A byte that cannot be JSON ends the document and the input: `yes` and `/dev/zero` are
    /// not read on.
    #[test]
    fn garbage_ends_the_input_where_it_starts() {
        for (input, good) in [
            (&b"[1] y\ny\ny\n[2]"[..], 1),
            (b"[1]\n\0\0\0\0[2]", 1),
            (b"{\"a\": 1} {\"b\": <html>} [2]", 1),
            (b"[1] ]] [2]", 1),
            (b"nope [2]", 0),
            (b"[1, 2, \x01] [2]", 0),
        ] {
            for step in [1, 4, 1 << 16] {
                let (docs, end) = read_all(input, step, 1 << 20);
                assert_eq!(end, "end");
                assert_eq!(
                    docs.len(),
                    good + 1,
                    "nothing after the error: {input:?} {docs:?}"
                );
                assert!(docs[..good].iter().all(Result::is_ok), "{input:?} {docs:?}");
                assert!(docs[good].is_err(), "{input:?} {docs:?}");
            }
        }
    }

    #[test]
    fn documents_over_the_limit_end_the_input() {
        for step in [1, 5, 1 << 16] {
            let (docs, end) = read_all(b"[1, 2] [1, 2, 3] [4]", step, 6);
            assert_eq!(docs, vec![Ok("[1,2]\n".into())]);
            assert_eq!(end, "too large");
            let (docs, end) = read_all(b"[1, 2] \"abcdefgh\"", step, 6);
            assert_eq!((docs.len(), end.as_str()), (1, "too large"));
            let (docs, end) = read_all(b"123456789", step, 6);
            assert_eq!((docs.len(), end.as_str()), (0, "too large"));
        }
    }

    /// Numbers are written back as the input spells them.
    #[test]
    fn numbers_keep_their_spelling() {
        let input = r#"{"a":[1e5,1E5,1e+5,1E+05,-1.5e-3,-0,-0.0,0.1000,1e-7,2.50,0e0,1E-0],"b":{"c":6.02e23,"d":123456789012345678901234567890,"e":-98765432109876543210.5e0},"s":"1e5 in a string \"2E3\"","t":[true,false,null,1.0]}"#;
        for step in [1, 3, 1 << 16] {
            let (docs, _) = read_all(input.as_bytes(), step, 1 << 20);
            assert_eq!(docs, vec![Ok(format!("{input}\n"))]);
        }
        for (parsed, spelled, same) in [
            ("1e+5", "1e5", true),
            ("1e+5", "1E+5", true),
            ("-1.5e-3", "-1.5E-3", true),
            ("1e+5", "1e-5", false),
            ("2e+5", "1e5", false),
            ("1e+50", "1e5", false),
            ("10e+5", "1e5", false),
        ] {
            assert_eq!(same_number(parsed, spelled), same, "{parsed} {spelled}");
        }
        // The spelling is what the counter sees too.
        let v = RawDocument::whole(b"[1E5]".to_vec()).parse().unwrap();
        assert_eq!(v.to_string(), "[1E5]");
        assert_eq!(v[0].as_f64(), Some(1e5));
        // Duplicate keys keep the last value, and the numbers cannot be matched: serde_json's
        // spelling stays, nothing is mixed up.
        let v = RawDocument::whole(br#"{"a":1e5,"a":2E5,"b":3e5}"#.to_vec())
            .parse()
            .unwrap();
        assert_eq!(v.to_string(), r#"{"a":2e+5,"b":3e+5}"#);
    }

    #[test]
    fn sizes_parse_and_print() {
        for (text, bytes, shown) in [
            ("1000", 1000, "1000 bytes"),
            ("512K", 512 << 10, "512 KiB"),
            ("64M", 64 << 20, "64 MiB"),
            ("64mb", 64 << 20, "64 MiB"),
            ("1G", 1 << 30, "1 GiB"),
            ("2GiB", 2 << 30, "2 GiB"),
            ("1024M", 1 << 30, "1 GiB"),
            ("1T", 1 << 40, "1 TiB"),
        ] {
            let size: ByteSize = text.parse().unwrap();
            assert_eq!(size, ByteSize(bytes));
            assert_eq!(size.to_string(), shown);
        }
        assert_eq!(DEFAULT_MAX_INPUT_SIZE.to_string(), "256 MiB");
        for bad in ["", "0", "0M", "M", "-1", "1.5G", "12Q", "99999999999999G"] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad:?}");
        }
    }

    /// Stdin is whatever reader the caller gives, opened again each time `-` is named; the
    /// library never reads the process's stdin itself.
    #[test]
    fn stdin_is_the_callers_reader() {
        let mut texts = vec!["[3]", "[1] [2]"];
        let stdin = move || -> Box<dyn Read> {
            Box::new(io::Cursor::new(texts.pop().unwrap_or("").as_bytes()))
        };
        let dash = PathBuf::from("-");
        let docs = Documents::open(&[dash.clone(), dash], ByteSize::default(), stdin);
        let read: Vec<(Option<String>, usize, usize, String)> = docs
            .map(|(o, d)| {
                (
                    o.file,
                    o.input,
                    o.index,
                    d.unwrap().parse().unwrap().to_string(),
                )
            })
            .collect();
        let expected = [(1, 0, "[1]"), (1, 1, "[2]"), (2, 0, "[3]")];
        let expected: Vec<_> = expected
            .iter()
            .map(|&(input, index, v)| (None, input, index, v.to_string()))
            .collect();
        assert_eq!(read, expected);
        assert!(reads_stdin(&[]) && reads_stdin(&["a".into(), "-".into()]));
        assert!(!reads_stdin(&["a".into()]));
    }

    #[test]
    fn flag_files_are_read_as_bounded_text() {
        let dir = std::env::temp_dir().join(format!("ctx-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        let read = |p: &Path, limit| read_flag_file(p, ByteSize(limit)).map_err(|e| e.to_string());
        let long = "é".repeat(100_000);
        assert_eq!(read(&file("a", long.as_bytes()), 1 << 20).unwrap(), long);
        assert_eq!(read(&file("b", b"\xEF\xBB\xBFhi"), 1 << 20).unwrap(), "hi");
        assert_eq!(read(&file("c", b""), 1 << 20).unwrap(), "");
        let refused: [(&str, &[u8], u64, &str); 5] = [
            ("d", b"12345", 4, "4 bytes input limit"),
            ("e", b"ab\0cd", 1 << 20, "NUL byte at byte 2"),
            ("f", b"ab\xffcd", 1 << 20, "not UTF-8"),
            ("g", b"ab\xc3", 1 << 20, "not UTF-8"),
            ("h", b"\xFF\xFEh\0i\0", 1 << 20, "iconv -f UTF-16"),
        ];
        for (name, bytes, limit, why) in refused {
            let err = read(&file(name, bytes), limit).unwrap_err();
            assert!(err.contains(why), "{name}: {err}");
        }
        assert!(
            read(&dir.join("missing"), 1 << 20)
                .unwrap_err()
                .starts_with("cannot read: ")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    proptest! {
        /// Any sequence of JSON values, written compactly or pretty, separated by any JSON
        /// whitespace, comes back value for value, whatever the read sizes.
        #[test]
        fn any_stream_of_values_round_trips(
            values in prop::collection::vec(
                prop_oneof![
                    Just(json!({"role": "user", "content": "a \"quoted\" } ] \\ text"})),
                    Just(json!([1, [2, [3, {"k": "v"}]], "x"])),
                    Just(json!("str\\\"ing")),
                    Just(json!(12345)),
                    Just(json!(null)),
                    Just(json!({"nested": {"deep": [[], {}, ""]}})),
                    "[a-z\"\\\\{}\\[\\] ]{0,12}".prop_map(|s| json!({"s": s})),
                ],
                0..12,
            ),
            pretty in any::<bool>(),
            separators in prop::collection::vec(prop::sample::select(vec![" ", "\n", "\r\n", "\t", "  \n "]), 12),
            step in 1usize..9,
        ) {
            let mut input = String::new();
            for (k, v) in values.iter().enumerate() {
                let text = if pretty { serde_json::to_string_pretty(v) } else { serde_json::to_string(v) };
                input.push_str(&text.unwrap());
                input.push_str(separators[k]);
            }
            let docs: Vec<Value> = split(&input, step).into_iter().map(Result::unwrap).collect();
            prop_assert_eq!(docs, values);
        }
    }
}
