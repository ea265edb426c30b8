//! Reading documents: a stream of JSON values from stdin or files, read incrementally.
//!
//! Whitespace-separated values and JSON Lines both work, as in jq. Documents are delimited
//! here and parsed by `RawDocument::parse` (on whichever thread processes them). A syntax error
//! ends the stream of the file it is in (it cannot be resynchronised; the caller skips the rest
//! of that input); other files are still read.
//! Stdin that is a terminal is refused with a hint instead of hanging. This module knows nothing
//! of what a document means.

use std::fs::File;
use std::io::{self, IsTerminal, Read};
use std::path::PathBuf;

use anyhow::{Error, anyhow, bail};
use serde_json::{Number, Value};

/// Where a document came from, for error messages and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The file, or `None` for stdin.
    pub file: Option<String>,
    /// The document's position in its file (or in stdin), from 0.
    pub index: usize,
    /// False when the error is about the file itself (it could not be opened).
    pub in_document: bool,
    /// Which input (file or stdin) it came from, counting from 1 in command-line order.
    pub input: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.file, self.in_document) {
            (Some(file), true) => write!(f, "{file}: document {}", self.index),
            (Some(file), false) => write!(f, "{file}"),
            (None, _) => write!(f, "document {}", self.index),
        }
    }
}

/// One document as read: its bytes, not yet parsed, and where it starts in its input.
pub struct RawDocument {
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
    /// Parses the document. Errors are `SyntaxError`s, positioned in the whole input (line and
    /// column as serde_json counts them: lines from 1, columns in bytes from 1). Numbers keep
    /// the spelling they have in the input.
    pub fn parse(&self) -> Result<Value, Error> {
        let mut value = serde_json::from_slice(&self.bytes).map_err(|e| {
            let mut text = e.to_string();
            if let Some(at) = text.rfind(" at line ") {
                let line = e.line();
                let column = if line == 1 {
                    self.column + e.column()
                } else {
                    e.column()
                };
                text.truncate(at);
                text = format!("{text} at line {} column {column}", self.line + line - 1);
            }
            let why = if e.is_eof() {
                format!("invalid JSON: the input ends inside a value ({text})")
            } else {
                format!("invalid JSON: {text}")
            };
            Error::new(SyntaxError(why))
        })?;
        if self.exponents {
            restore_exponents(&self.bytes, &mut value);
        }
        Ok(value)
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

/// Splits one input into documents without parsing them: whitespace-separated JSON values,
/// found by tracking strings and bracket depth, so that parsing (most of the work of reading)
/// can happen on other threads. Whatever is not valid JSON is still cut into some document,
/// whose parse then fails with the position of the first error.
struct Splitter {
    reader: Box<dyn Read>,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    line: usize,
    column: usize,
}

impl Splitter {
    fn new(reader: Box<dyn Read>) -> Splitter {
        Splitter {
            reader,
            buf: Vec::new(),
            pos: 0,
            eof: false,
            line: 1,
            column: 0,
        }
    }

    /// Makes sure unread bytes are buffered, unless the input is exhausted.
    fn fill(&mut self) -> io::Result<bool> {
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
                Err(e) => return Err(e),
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

    /// The next document, `None` at the end of the input.
    fn next_document(&mut self) -> io::Result<Option<RawDocument>> {
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
                        end = Some(i); // the end of a number or literal (or of garbage)
                        break;
                    }
                    i += 1;
                    if matches!(b, b']' | b'}' | b',' | b':') {
                        end = Some(i); // a stray structural character is a document of its own
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
                    _ => {}
                }
                i += 1;
            }
            let take = end.unwrap_or(chunk.len());
            doc.bytes.extend_from_slice(&chunk[..take]);
            self.consume(take);
            if end.is_some() {
                break;
            }
        }
        Ok(Some(doc))
    }
}

/// Yields every document of every input in order, as `(origin, raw document or error)`.
pub struct Documents {
    files: std::vec::IntoIter<Option<PathBuf>>,
    current: Option<(Option<String>, Splitter, usize)>,
    /// Inputs opened so far; an origin's `input` is its number.
    inputs: usize,
}

impl Documents {
    /// True when the next document can be started without waiting for input: some of it is
    /// already read. A caller holding documents back should send them before asking for the
    /// next one otherwise, so that a document that arrived alone on a pipe is not kept waiting.
    pub fn buffered(&self) -> bool {
        self.current.as_ref().is_some_and(|(_, splitter, _)| {
            splitter.buf[splitter.pos..]
                .iter()
                .any(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        })
    }

    /// Reads `files` in order (`-` is stdin), or stdin when there are none.
    pub fn open(files: &[PathBuf]) -> Result<Documents, Error> {
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
        if list.iter().any(Option::is_none) && io::stdin().is_terminal() {
            bail!(
                "no input: stdin is a terminal; pipe a conversation in (ctx count < chat.json) or name files (ctx count chat.json)"
            );
        }
        Ok(Documents {
            files: list.into_iter(),
            current: None,
            inputs: 0,
        })
    }
}

impl Iterator for Documents {
    type Item = (Origin, Result<RawDocument, Error>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((name, splitter, index)) = &mut self.current {
                let origin = Origin {
                    file: name.clone(),
                    index: *index,
                    in_document: true,
                    input: self.inputs,
                };
                match splitter.next_document() {
                    Ok(None) => self.current = None,
                    Ok(Some(doc)) => {
                        *index += 1;
                        return Some((origin, Ok(doc)));
                    }
                    Err(e) => {
                        self.current = None;
                        return Some((origin, Err(anyhow!("cannot read input: {e}"))));
                    }
                }
                continue;
            }
            let file = self.files.next()?;
            self.inputs += 1;
            let (name, reader): (Option<String>, Box<dyn Read>) = match file {
                None => (None, Box::new(io::stdin())),
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
            self.current = Some((name, Splitter::new(reader), 0));
        }
    }
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
        let mut s = Splitter::new(Box::new(Trickle(input.as_bytes().to_vec(), 0, step)));
        let mut out = Vec::new();
        while let Some(doc) = s.next_document().unwrap() {
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
        ] {
            let results = split(input, 3);
            let err = results.iter().find_map(|r| r.as_ref().err()).expect(input);
            assert!(err.contains(expected), "{input:?}: {err}");
            assert!(err.starts_with("invalid JSON: "), "{err}");
        }
    }

    /// Numbers are written back as the input spells them.
    #[test]
    fn numbers_keep_their_spelling() {
        let input = r#"{"a":[1e5,1E5,1e+5,1E+05,-1.5e-3,-0,-0.0,0.1000,1e-7,2.50,0e0,1E-0],"b":{"c":6.02e23,"d":123456789012345678901234567890,"e":-98765432109876543210.5e0},"s":"1e5 in a string \"2E3\"","t":[true,false,null,1.0]}"#;
        for step in [1, 3, 1 << 16] {
            let docs: Vec<String> = split(input, step)
                .into_iter()
                .map(|d| String::from_utf8(crate::output::render(&d.unwrap(), true)).unwrap())
                .collect();
            assert_eq!(docs, vec![format!("{input}\n")]);
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
        let whole = |text: &str| RawDocument {
            bytes: text.as_bytes().to_vec(),
            line: 1,
            column: 0,
            exponents: true,
        };
        // The spelling is what the counter sees too.
        let v = whole("[1E5]").parse().unwrap();
        assert_eq!(v.to_string(), "[1E5]");
        assert_eq!(v[0].as_f64(), Some(1e5));
        // Duplicate keys keep the last value, and the numbers cannot be matched: serde_json's
        // spelling stays, nothing is mixed up.
        let v = whole(r#"{"a":1e5,"a":2E5,"b":3e5}"#).parse().unwrap();
        assert_eq!(v.to_string(), r#"{"a":2e+5,"b":3e+5}"#);
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
