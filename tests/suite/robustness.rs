//! Robustness tests (SPEC §5): whatever the input, `ctx` never panics, reports each error as one
//! `ctx: ...` line on stderr, uses the documented exit codes, writes nothing for a failing
//! document and still processes the documents after it.
//!
//! Most tests spawn the built binary (with `CTX_MODEL` removed and stdin piped) over inputs that
//! real traffic produces: odd shapes, broken images, missing fields, exotic unicode, very large
//! or very deep values. The property tests at the end feed arbitrary JSON to the library
//! directly, which is much faster than spawning.

use crate::isolated;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------------------------

/// How long one run may take before the test calls it a hang.
const TIMEOUT: Duration = Duration::from_secs(120);

/// What one run of `ctx` produced.
struct Run {
    /// The exit code; `None` when the process was killed by a signal (a crash).
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
    what: String,
}

fn command(args: &[&str]) -> Command {
    let mut cmd = isolated::command();
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Feeds `input` to the child's stdin from a thread (the child may stop reading early).
fn feed(child: &mut Child, input: Vec<u8>) -> thread::JoinHandle<()> {
    let mut stdin = child.stdin.take().expect("stdin is piped");
    thread::spawn(move || {
        // A child that stops reading (or exits) closes the pipe: not an error here.
        let _ = stdin.write_all(&input);
    })
}

fn drain(r: Option<impl Read + Send + 'static>) -> thread::JoinHandle<Vec<u8>> {
    let mut r = r.expect("piped");
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

/// Waits for `child`, killing it after [`TIMEOUT`].
fn wait(child: &mut Child, what: &str) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for ctx") {
            return status.code();
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: ctx did not finish within {TIMEOUT:?}");
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Reads what `child` writes while `writer` feeds it, and waits for it (see [`wait`]).
fn collect(mut child: Child, writer: Option<thread::JoinHandle<()>>, what: String) -> Run {
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let code = wait(&mut child, &what);
    if let Some(w) = writer {
        w.join().expect("stdin writer");
    }
    let stdout = out.join().expect("stdout reader");
    let stderr = String::from_utf8_lossy(&err.join().expect("stderr reader")).into_owned();
    Run {
        code,
        stdout,
        stderr,
        what,
    }
}

/// Runs `ctx ARGS` with `input` on stdin.
fn ctx(args: &[&str], input: impl Into<Vec<u8>>) -> Run {
    let what = format!("ctx {}", args.join(" "));
    let mut child = command(args).spawn().expect("spawn ctx");
    let writer = feed(&mut child, input.into());
    collect(child, Some(writer), what)
}

impl Run {
    /// What breaks the robustness contract every run must meet: a normal exit with a documented
    /// code, no panic, and nothing on stderr but `ctx: ` lines (one line per error or warning).
    fn violation(&self) -> Option<String> {
        let why = match self.code {
            None => "killed by a signal (crash?)".to_string(),
            Some(101) => "exit 101: panicked".to_string(),
            Some(c) if !(0..=4).contains(&c) => format!("undocumented exit code {c}"),
            _ if self.stderr.contains("panicked") || self.stderr.contains("RUST_BACKTRACE") => {
                "panic text on stderr".to_string()
            }
            _ => match self.stderr.lines().find(|l| !l.starts_with("ctx: ")) {
                Some(line) => format!("stderr line not starting with `ctx: `: {line:?}"),
                None if !self.stderr.is_empty() && !self.stderr.ends_with('\n') => {
                    "stderr ends mid-line".to_string()
                }
                None => return None,
            },
        };
        Some(format!("{why}\n{}", self.context()))
    }

    /// Panics unless the run meets the robustness contract.
    fn assert_robust(&self) -> &Self {
        if let Some(v) = self.violation() {
            panic!("{v}");
        }
        self
    }

    fn code(&self) -> i32 {
        self.code.expect("exited normally")
    }

    /// Panics unless the run meets the robustness contract and ends in one input error: exit 2
    /// and exactly one error line, which `says` accepts.
    fn assert_input_error(&self, says: impl FnOnce(&str) -> bool) {
        self.assert_robust();
        assert_eq!(self.code(), 2, "{}", self.context());
        assert!(says(self.one_error()), "{}", self.context());
    }

    /// The one error line of the run (fails unless there is exactly one).
    fn one_error(&self) -> &str {
        let errors = self.errors();
        assert_eq!(errors.len(), 1, "{}", self.context());
        errors[0]
    }

    /// Error lines (not warnings).
    fn errors(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| !l.starts_with("ctx: warning: "))
            .collect()
    }

    /// The JSON documents written to stdout.
    fn docs(&self) -> Vec<Value> {
        serde_json::Deserializer::from_slice(&self.stdout)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("stdout is not a JSON stream ({e})\n{}", self.context()))
    }

    fn context(&self) -> String {
        let out = String::from_utf8_lossy(&self.stdout);
        let cut = |s: &str| -> String {
            if s.len() > 2000 {
                let mut end = 2000;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                format!("{}... ({} bytes)", &s[..end], s.len())
            } else {
                s.to_string()
            }
        };
        format!(
            "command: {}\nexit: {:?}\nstderr:\n{}\nstdout:\n{}",
            self.what,
            self.code,
            cut(&self.stderr),
            cut(&out)
        )
    }
}

/// JSON Lines: one compact document per line.
fn jsonl<'a>(docs: impl IntoIterator<Item = &'a Value>) -> Vec<u8> {
    let mut out = Vec::new();
    for d in docs {
        serde_json::to_writer(&mut out, d).expect("serialise");
        out.push(b'\n');
    }
    out
}

/// A small valid document, used to prove that the stream goes on after a failure.
fn follower() -> Value {
    json!([{"role": "user", "content": "still counted after the failure"}])
}

/// The number of messages of a document (array or body).
fn message_count(doc: &Value) -> usize {
    match doc {
        Value::Array(a) => a.len(),
        other => other["messages"].as_array().map_or(0, Vec::len),
    }
}

// ---------------------------------------------------------------------------------------------
// Odd but valid shapes: every one must count (exit 0) and check (exit 0 or 1), never exit 2
// ---------------------------------------------------------------------------------------------

/// Checks one named case, or all of them as one stream; returns what went wrong.
fn shape_problems(cases: &[(&str, Value)]) -> Vec<String> {
    let mut problems = Vec::new();
    let input = jsonl(cases.iter().map(|(_, v)| v));
    let names: Vec<&str> = cases.iter().map(|(n, _)| *n).collect();
    let label = names.join(", ");

    let run = ctx(&["count", "-c"], input.clone());
    run.assert_robust();
    if run.code() != 0 || !run.errors().is_empty() {
        problems.push(format!(
            "[{label}] count: expected exit 0 without errors\n{}",
            run.context()
        ));
    } else {
        let docs = run.docs();
        if docs.len() != cases.len() {
            problems.push(format!(
                "[{label}] count: {} reports for {} documents",
                docs.len(),
                cases.len()
            ));
        }
        for ((name, input), report) in cases.iter().zip(&docs) {
            if !report["tokens"].is_u64()
                || report["messages"].as_u64() != Some(message_count(input) as u64)
            {
                problems.push(format!("[{name}] count: bad report {report}"));
            }
        }
    }

    let run = ctx(
        &["count", "--per-message", "--output", "table"],
        input.clone(),
    );
    run.assert_robust();
    if run.code() != 0 || !run.errors().is_empty() {
        problems.push(format!(
            "[{label}] count --output table: expected exit 0\n{}",
            run.context()
        ));
    }

    // The transforming commands, pushed hard: each document comes out (exit 0) or cannot fit
    // (exit 3, one `cannot fit` line); never an input error, never a panic.
    let transforms: [&[&str]; 5] = [
        &[
            "prune",
            "-c",
            "--keep",
            "0",
            "--max-tool-tokens",
            "5",
            "--thinking",
            "all",
        ],
        &["truncate", "-c", "--budget", "1", "--partial", "--note"],
        // (On documents this small no summary is smaller than what it replaces: the range is
        // dropped instead of failing with exit 4.)
        &[
            "summarize",
            "-c",
            "--engine",
            "extractive",
            "--force",
            "--keep-recent",
            "1",
            "--on-error",
            "truncate",
        ],
        &[
            "fit",
            "-c",
            "--budget",
            "1",
            "--partial",
            "--summarize=extractive",
        ],
        &["fit", "-c", "--budget", "200", "--clear-inputs", "--note"],
    ];
    for args in transforms {
        let run = ctx(args, input.clone());
        run.assert_robust();
        let errors = run.errors();
        let bad: Vec<&&str> = errors
            .iter()
            .filter(|l| !l.contains("cannot fit"))
            .collect();
        if !matches!(run.code(), 0 | 3) || !bad.is_empty() {
            problems.push(format!(
                "[{label}] {}: expected exit 0 or 3 (cannot fit)\n{}",
                args[0],
                run.context()
            ));
        } else if run.docs().len() + errors.len() != cases.len() {
            problems.push(format!(
                "[{label}] {}: {} outputs and {} errors for {} documents\n{}",
                args[0],
                run.docs().len(),
                errors.len(),
                cases.len(),
                run.context()
            ));
        }
    }

    let run = ctx(&["check", "-c"], input);
    run.assert_robust();
    if !matches!(run.code(), 0 | 1) || !run.errors().is_empty() {
        problems.push(format!(
            "[{label}] check: expected exit 0 or 1 without errors\n{}",
            run.context()
        ));
    } else {
        let docs = run.docs();
        if docs.len() != cases.len() || !docs.iter().all(Value::is_array) {
            problems.push(format!(
                "[{label}] check: expected {} arrays of findings\n{}",
                cases.len(),
                run.context()
            ));
        }
    }
    problems
}

/// Runs all cases as one stream; when that fails, reruns each alone to name the culprits.
fn assert_shapes_ok(cases: &[(&str, Value)]) {
    if shape_problems(cases).is_empty() {
        return;
    }
    let mut problems = Vec::new();
    for case in cases {
        problems.extend(shape_problems(std::slice::from_ref(case)));
    }
    if problems.is_empty() {
        problems = shape_problems(cases);
    }
    panic!(
        "{} problem(s):\n\n{}",
        problems.len(),
        problems.join("\n\n")
    );
}

fn user(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

fn call(id: &str, name: &str, args: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
}

#[test]
fn openai_odd_content_shapes() {
    assert_shapes_ok(&[
        (
            "content null",
            json!([user(json!("q")), {"role": "assistant", "content": null}]),
        ),
        (
            "content absent",
            json!([{"role": "user"}, {"role": "assistant"}]),
        ),
        ("content a number", json!([user(json!(42))])),
        ("content a float", json!([user(json!(-1.5e300))])),
        (
            "content an object",
            json!([user(json!({"text": "hi", "type": "text"}))]),
        ),
        ("content true", json!([user(json!(true))])),
        (
            "content a number beyond f64",
            serde_json::from_str("[{\"role\": \"user\", \"content\": -1e99999999999999999999}]")
                .unwrap(),
        ),
        ("content empty array", json!([user(json!([]))])),
        ("content empty string", json!([user(json!(""))])),
        (
            "part without type",
            json!([user(json!([{"text": "no type"}]))]),
        ),
        (
            "part a string",
            json!([user(json!(["bare string part", 7, null]))]),
        ),
        (
            "part of unknown type",
            json!([user(json!([{"type": "hologram", "payload": {"x": ["y"]}}]))]),
        ),
        (
            "text part with number text",
            json!([user(json!([{"type": "text", "text": 12}]))]),
        ),
        (
            "role unknown",
            json!([{"role": "narrator", "content": "x"}]),
        ),
        ("empty array", json!([])),
        ("empty body", json!({"messages": []})),
        (
            "body model a number",
            json!({"model": 4, "messages": [user(json!("q"))]}),
        ),
        (
            "body unknown model",
            json!({"model": "my-local-llm", "messages": [user(json!("q"))]}),
        ),
        (
            "name a number",
            json!([{"role": "user", "name": 5, "content": "x"}]),
        ),
        (
            "refusal",
            json!([{"role": "assistant", "content": null, "refusal": "no"}]),
        ),
        (
            "input_audio without data",
            json!([user(json!([{"type": "input_audio"}]))]),
        ),
        (
            "file without file",
            json!([user(json!([{"type": "file"}]))]),
        ),
        (
            "tools not an array",
            json!({"model": "gpt-4o", "tools": {"a": 1}, "messages": [user(json!("q"))]}),
        ),
        (
            "tool definitions with odd schemas",
            json!({"model": "gpt-4o", "messages": [user(json!("q"))], "tools": [
                {"type": "function", "function": {"name": "a", "parameters": {"properties": [1, 2]}}},
                {"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {
                    "x": {"type": ["string", "null"], "enum": []},
                    "y": {"enum": [1, null, {"z": 2}], "properties": "nope", "items": {"type": "string"}},
                    "z": 5
                }}}},
                {"type": "function"},
                {"type": "web_search"},
                "a string tool",
                null
            ], "functions": [{"name": 3}, 7]}),
        ),
    ]);
}

#[test]
fn openai_odd_tool_call_shapes() {
    assert_shapes_ok(&[
        (
            "tool_calls null",
            json!([user(json!("q")), {"role": "assistant", "content": "a", "tool_calls": null}]),
        ),
        (
            "tool_calls an object",
            json!([user(json!("q")), {"role": "assistant", "content": null,
                "tool_calls": {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}},
                {"role": "tool", "tool_call_id": "c1", "content": "r"}]),
        ),
        (
            "tool_calls a string",
            json!([{"role": "assistant", "content": null, "tool_calls": "[]"}]),
        ),
        (
            "tool_calls empty",
            json!([user(json!("q")), {"role": "assistant", "content": "a", "tool_calls": []}]),
        ),
        (
            "tool call without function",
            json!([user(json!("q")), {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function"}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"}]),
        ),
        (
            "tool call entries not objects",
            json!([user(json!("q")), {"role": "assistant", "content": null, "tool_calls": [null, 3, "x", []]}]),
        ),
        (
            "function a string",
            json!([user(json!("q")), {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "function": "f"}]}]),
        ),
        (
            "arguments an object",
            json!([user(json!("q")), {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"path": "/tmp", "n": [1, 2]}}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"}]),
        ),
        (
            "arguments odd strings",
            json!([user(json!("q")), {"role": "assistant", "content": null, "tool_calls": [
                call("c1", "f", ""), call("c2", "g", "not json"), call("c3", "h", "\"{\\\"a\\\": 1}\""),
                call("c4", "i", "[1,2]"), call("c5", "j", "{\"unterminated\": ")]},
                {"role": "tool", "tool_call_id": "c1", "content": "1"},
                {"role": "tool", "tool_call_id": "c2", "content": "2"},
                {"role": "tool", "tool_call_id": "c3", "content": "3"},
                {"role": "tool", "tool_call_id": "c4", "content": "4"},
                {"role": "tool", "tool_call_id": "c5", "content": "5"}]),
        ),
        (
            "arguments null and a number, name a number",
            json!([user(json!("q")), {"role": "assistant", "content": null, "tool_calls": [
                {"id": 1, "function": {"name": 2, "arguments": null}},
                {"id": "c2", "function": {"name": "f", "arguments": 3}}]}]),
        ),
        (
            "function_call null",
            json!([user(json!("q")), {"role": "assistant", "content": "a", "function_call": null}]),
        ),
        (
            "function_call a string",
            json!([user(json!("q")), {"role": "assistant", "content": "a", "function_call": "auto"}]),
        ),
        (
            "legacy function_call and function result",
            json!([user(json!("q")), {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": {"a": 1}}},
                {"role": "function", "name": "f", "content": "r"},
                {"role": "function", "content": null}]),
        ),
        (
            "parallel calls with reused ids",
            json!([user(json!("q")),
                {"role": "assistant", "content": null, "tool_calls": [call("call_0", "a", "{}"), call("call_0", "b", "{}"), call("call_1", "c", "{}")]},
                {"role": "tool", "tool_call_id": "call_0", "content": "1"},
                {"role": "tool", "tool_call_id": "call_0", "content": "2"},
                {"role": "tool", "tool_call_id": "call_0", "content": "3 (one too many)"},
                {"role": "assistant", "content": null, "tool_calls": [call("call_0", "a", "{}"), call("call_1", "c", "{}")]},
                {"role": "tool", "tool_call_id": "call_1", "content": "4"},
                {"role": "tool", "tool_call_id": "call_0", "content": "5"},
                {"role": "assistant", "content": null, "tool_calls": [call("call_0", "a", "{}")]}]),
        ),
        (
            "a tool message first",
            json!([{"role": "tool", "tool_call_id": "x", "content": "r"}, {"role": "tool", "content": "no id"}, user(json!("q"))]),
        ),
        (
            "only tool messages",
            json!([{"role": "tool", "tool_call_id": "x", "content": [{"type": "text", "text": "r"}]}]),
        ),
        (
            "tool message with tool_call_ids",
            json!([user(json!("q")), {"role": "assistant", "content": null, "tool_calls": [call("a", "f", "{}")]},
                {"role": "tool", "tool_call_ids": ["a"], "content": "r"}]),
        ),
        (
            "tool result content null and object",
            json!([user(json!("q")), {"role": "assistant", "content": null, "tool_calls": [call("a", "f", "{}"), call("b", "g", "{}")]},
                {"role": "tool", "tool_call_id": "a", "content": null},
                {"role": "tool", "tool_call_id": "b", "content": {"stdout": "x", "code": 0}}]),
        ),
        (
            "reasoning_content and extras",
            json!([user(json!("q")), {"role": "assistant", "content": "a", "reasoning_content": "hmm", "audio": {"id": "x"},
                "annotations": [], "cache_control": {"type": "ephemeral"}}]),
        ),
    ]);
}

// ---------------------------------------------------------------------------------------------
// Images
// ---------------------------------------------------------------------------------------------

/// Standard base64 with padding.
fn base64(data: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(TABLE[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    b << 16 | a
}

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend((data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend(kind);
    out.extend(data);
    let crc = crc32(&out[start..]);
    out.extend(crc.to_be_bytes());
}

/// A complete, valid RGB PNG of `w` x `h` pixels (zlib stored block, correct CRCs), small
/// enough for one stored block.
fn tiny_png(w: u32, h: u32) -> Vec<u8> {
    let mut raw = Vec::new();
    for y in 0..h {
        raw.push(0); // filter: none
        for x in 0..w {
            raw.extend([(x * 80) as u8, (y * 120) as u8, 200]);
        }
    }
    assert!(raw.len() < 65535, "tiny_png is for tiny images");
    let mut zlib = vec![0x78, 0x01, 0x01];
    let len = raw.len() as u16;
    zlib.extend(len.to_le_bytes());
    zlib.extend((!len).to_le_bytes());
    zlib.extend(&raw);
    zlib.extend(adler32(&raw).to_be_bytes());

    let mut ihdr = Vec::new();
    ihdr.extend(w.to_be_bytes());
    ihdr.extend(h.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]); // 8-bit RGB, deflate, no filter method, no interlace
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png_chunk(&mut png, b"IHDR", &ihdr);
    png_chunk(&mut png, b"IDAT", &zlib);
    png_chunk(&mut png, b"IEND", &[]);
    png
}

/// Only a PNG signature and an IHDR claiming `w` x `h` (no image data).
fn png_header(w: u32, h: u32) -> Vec<u8> {
    let mut ihdr = Vec::new();
    ihdr.extend(w.to_be_bytes());
    ihdr.extend(h.to_be_bytes());
    ihdr.extend([8, 6, 0, 0, 0]);
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png_chunk(&mut png, b"IHDR", &ihdr);
    png
}

fn data_url(mime: &str, bytes: &[u8]) -> String {
    format!("data:{mime};base64,{}", base64(bytes))
}

fn image_part(url: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": url}})
}

#[test]
fn helpers_build_a_real_png() {
    // The base64 helper against RFC 4648's test vectors, and the PNG's fixed layout.
    let vectors = [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foobar", "Zm9vYmFy"),
    ];
    for (plain, encoded) in vectors {
        assert_eq!(base64(plain.as_bytes()), encoded);
    }
    assert_eq!(crc32(b"IEND"), 0xAE42_6082);
    let png = tiny_png(3, 2);
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x03\0\0\0\x02"));
    assert!(png.ends_with(b"\0\0\0\0IEND\xae\x42\x60\x82"));
}

#[test]
fn openai_images_of_every_kind() {
    let png = data_url("image/png", &tiny_png(3, 2));
    let mut jpeg_then_zeros = vec![0xFF, 0xD8, 0xFF];
    jpeg_then_zeros.resize(800_000, 0);
    assert_shapes_ok(&[
        (
            "garbage base64",
            json!([user(json!([image_part(
                "data:image/png;base64,!!!not*base64@@@"
            )]))]),
        ),
        (
            "base64 of text",
            json!([user(json!([image_part(&data_url(
                "image/png",
                b"hello world, no image"
            ))]))]),
        ),
        (
            "base64 truncated mid-header",
            json!([user(json!([image_part(&data_url(
                "image/png",
                &tiny_png(3, 2)[..20]
            ))]))]),
        ),
        (
            "data url without comma",
            json!([user(json!([image_part("data:image/png;base64")]))]),
        ),
        (
            "data url without base64",
            json!([user(json!([image_part("data:image/png,%89PNG")]))]),
        ),
        (
            "data url empty",
            json!([user(json!([image_part("data:")]))]),
        ),
        (
            "data url with unicode",
            json!([user(json!([image_part("data:imäge/png;base64,ÿÿ🙂")]))]),
        ),
        (
            "a real tiny png",
            json!([user(
                json!([{"type": "text", "text": "what is this?"}, image_part(&png)])
            )]),
        ),
        (
            "a real tiny png, low detail",
            json!([user(
                json!([{"type": "image_url", "image_url": {"url": png, "detail": "low"}}])
            )]),
        ),
        (
            "png claiming 0x0",
            json!([user(json!([image_part(&data_url(
                "image/png",
                &png_header(0, 0)
            ))]))]),
        ),
        (
            "png claiming 4294967295x1",
            json!([user(json!([image_part(&data_url(
                "image/png",
                &png_header(u32::MAX, 1)
            ))]))]),
        ),
        (
            "png claiming 4294967295x4294967295, patch model",
            json!({"model": "gpt-4.1-mini", "messages": [user(json!([image_part(&data_url("image/png", &png_header(u32::MAX, u32::MAX)))]))]}),
        ),
        (
            "png claiming 1x4294967295, patch model",
            json!({"model": "o4-mini", "messages": [user(json!([image_part(&data_url("image/png", &png_header(1, u32::MAX)))]))]}),
        ),
        (
            "jpeg header then 800 KB of zeros",
            json!([user(json!([image_part(&data_url(
                "image/jpeg",
                &jpeg_then_zeros
            ))]))]),
        ),
        (
            "remote url",
            json!([user(json!([image_part("https://example.com/cat.png")]))]),
        ),
        (
            "remote url, high detail",
            json!([user(
                json!([{"type": "image_url", "image_url": {"url": "http://x/y.jpg", "detail": "high"}}])
            )]),
        ),
        (
            "image_url a bare string",
            json!([user(
                json!([{"type": "image_url", "image_url": "https://example.com/cat.png"}])
            )]),
        ),
        (
            "image_url a bare data string",
            json!([user(json!([{"type": "image_url", "image_url": png}]))]),
        ),
        (
            "image_url missing",
            json!([user(json!([{"type": "image_url"}]))]),
        ),
        (
            "image_url null",
            json!([user(json!([{"type": "image_url", "image_url": null}]))]),
        ),
        (
            "image_url a number",
            json!([user(json!([{"type": "image_url", "image_url": 5}]))]),
        ),
        (
            "url a number, detail a list",
            json!([user(
                json!([{"type": "image_url", "image_url": {"url": 5, "detail": ["low"]}}])
            )]),
        ),
        (
            "image for an unknown model",
            json!({"model": "my-vlm", "messages": [user(json!([image_part(&png)]))]}),
        ),
        (
            "image for a claude model",
            json!({"model": "claude-sonnet-4", "messages": [user(json!([image_part(&png)]))]}),
        ),
    ]);
}

#[test]
fn a_real_png_is_sized_from_its_header() {
    // A 3x2 PNG costs less than the 1024x1024 assumed for a remote image: its size was read.
    let png = data_url("image/png", &tiny_png(3, 2));
    let docs = [
        json!([user(json!([image_part(&png)]))]),
        json!([user(json!([image_part("https://example.com/cat.png")]))]),
    ];
    let run = ctx(&["count", "-c"], jsonl(&docs));
    run.assert_robust();
    assert_eq!(run.code(), 0, "{}", run.context());
    let reports = run.docs();
    let (small, remote) = (
        reports[0]["tokens"].as_u64().unwrap(),
        reports[1]["tokens"].as_u64().unwrap(),
    );
    assert!(
        small < remote,
        "3x2 png: {small} tokens, remote default: {remote}\n{}",
        run.context()
    );
}

// ---------------------------------------------------------------------------------------------
// Anthropic blocks with missing or odd fields
// ---------------------------------------------------------------------------------------------

fn assistant_blocks(blocks: Value) -> Value {
    json!({"role": "assistant", "content": blocks})
}

/// A question, an assistant message with the one block `call`, and a user message with the
/// one block `result`.
fn exchange(call: Value, result: Value) -> Value {
    json!([
        user(json!("q")),
        assistant_blocks(json!([call])),
        user(json!([result]))
    ])
}

#[test]
fn anthropic_blocks_with_missing_fields() {
    let png = base64(&tiny_png(2, 2));
    let img = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}});
    assert_shapes_ok(&[
        (
            "tool_use without id",
            json!({"model": "claude-sonnet-4", "max_tokens": 100, "messages": [user(json!("q")),
                assistant_blocks(json!([{"type": "tool_use", "name": "ls", "input": {}}])),
                user(json!([{"type": "tool_result", "tool_use_id": "x", "content": "r"}]))]}),
        ),
        (
            "tool_use without name or input",
            exchange(
                json!({"type": "tool_use", "id": "t1"}),
                json!({"type": "tool_result", "tool_use_id": "t1"}),
            ),
        ),
        (
            "tool_use input a string",
            exchange(
                json!({"type": "tool_use", "id": "t1", "name": "f", "input": "{\"a\":1}"}),
                json!({"type": "tool_result", "tool_use_id": "t1", "content": "ok"}),
            ),
        ),
        (
            "tool_result with image blocks",
            json!([
                user(json!("take a screenshot")),
                assistant_blocks(
                    json!([{"type": "tool_use", "id": "t1", "name": "screenshot", "input": {}}])
                ),
                user(
                    json!([{"type": "tool_result", "tool_use_id": "t1", "content": [
                        {"type": "text", "text": "here"}, img.clone(),
                        {"type": "image", "source": {"type": "base64", "data": "@@garbage@@"}},
                        {"type": "image"}
                    ]}])
                )
            ]),
        ),
        (
            "tool_result without id, is_error a string, content a number",
            exchange(
                json!({"type": "tool_use", "id": "t1", "name": "f", "input": {}}),
                json!({"type": "tool_result", "is_error": "yes", "content": 5}),
            ),
        ),
        (
            "tool_result nested in tool_result",
            exchange(
                json!({"type": "tool_use", "id": "t1", "name": "f", "input": {}}),
                json!({"type": "tool_result", "tool_use_id": "t1", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "tool_result"}]}]}),
            ),
        ),
        (
            "image with source.type url",
            json!([user(
                json!([{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                {"type": "text", "text": "describe"}])
            )]),
        ),
        (
            "image with source.type file and odd sources",
            json!([user(
                json!([{"type": "image", "source": {"type": "file", "file_id": "f_1"}},
                {"type": "image", "source": null}, {"type": "image", "source": "https://x"},
                {"type": "image", "source": {"type": "base64", "data": 17}}])
            )]),
        ),
        (
            "a real png block",
            json!([user(json!([img, {"type": "text", "text": "what?"}]))]),
        ),
        (
            "thinking and redacted_thinking without fields",
            json!([
                user(json!("q")),
                assistant_blocks(json!([{"type": "thinking"}, {"type": "redacted_thinking"},
                {"type": "thinking", "thinking": 5, "signature": ["x"]}, {"type": "redacted_thinking", "data": null}]))
            ]),
        ),
        (
            "server tool blocks",
            json!([
                user(json!("q")),
                assistant_blocks(json!([
                {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "x"}},
                {"type": "web_search_tool_result", "tool_use_id": "s1", "content": [{"type": "web_search_result", "url": "u", "encrypted_content": "zzz"}]},
                {"type": "mcp_tool_use"}, {"type": "mcp_tool_result", "content": null},
                {"type": "text", "text": "done", "citations": [{"type": "x"}]}]))
            ]),
        ),
        (
            "document blocks",
            json!([user(
                json!([{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
                {"type": "document", "source": {"type": "text", "data": "plain text doc"}}, {"type": "document"},
                {"type": "search_result", "title": "t", "content": [{"type": "text", "text": "c"}]}])
            )]),
        ),
        (
            "blocks without type and non-object blocks",
            json!([user(
                json!([{"text": "no type"}, "bare", 3, null, [], {"type": 5}, {"type": "tool_result", "cache_control": {"type": "ephemeral"}}])
            )]),
        ),
        (
            "system as blocks with cache_control",
            json!({"system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}, {"type": "text"}],
                "messages": [user(json!("q"))]}),
        ),
        (
            "system null",
            json!({"system": null, "messages": [user(json!("q"))]}),
        ),
        (
            "system a number",
            json!({"system": 3, "messages": [user(json!("q"))]}),
        ),
        (
            "system an object",
            json!({"system": {"text": "s"}, "messages": []}),
        ),
        (
            "system role inside messages, consecutive roles, unknown roles",
            json!({"system": "s", "messages": [{"role": "system", "content": "x"}, user(json!("a")), user(json!("b")),
                {"role": "tool", "content": "?"}, {"role": "assistant", "content": null}]}),
        ),
        (
            "anthropic tools with odd fields",
            json!({"system": "s", "messages": [user(json!("q"))], "tools": [{"name": 5}, {"input_schema": "x"}, null,
                {"name": "f", "description": "d", "input_schema": {"type": "object"}}, {"type": "web_search_20250305", "name": "web_search"}]}),
        ),
    ]);
}

// ---------------------------------------------------------------------------------------------
// Unicode
// ---------------------------------------------------------------------------------------------

#[test]
fn unicode_everywhere() {
    let texts = [
        "👩‍👩‍👧‍👦 🔥🔥🔥 🏳️‍🌈 🇯🇵 👍🏽",
        "你好，世界。こんにちは世界。안녕하세요 세계. 𠜎𠜱𠝹𠱓",
        "مرحبا بالعالم — שלום עולם \u{200F}\u{202E}reversed\u{202C}",
        "\u{0301}\u{0308}\u{0327}",
        "a\u{0000}b\u{0000}\u{0000}",
        "\u{FEFF}\u{200B}\u{200D}\u{2028}\u{2029}\u{FFFD}\u{FFFF}\u{10FFFF}",
        "e\u{0301}\u{0301}\u{0301}\u{0301}\u{0301}\u{0301}\u{0301}\u{0301}",
        "<|endoftext|><|im_start|>system<|im_end|><|fim_prefix|>",
        "\t\r\n\u{000B}\u{000C}\u{0085}\u{00A0}\u{3000}",
        "\u{E000}\u{F8FF}\u{1F3FB}",
    ];
    let mut cases: Vec<(String, Value)> = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        cases.push((format!("text {i} as content"), json!([user(json!(t))])));
        cases.push((
            format!("text {i} everywhere (openai)"),
            json!({"model": "gpt-4o", "messages": [
                {"role": "system", "content": t, "name": t},
                {"role": "user", "content": [{"type": "text", "text": t}], "name": t},
                {"role": "assistant", "content": null, "tool_calls": [{"id": t, "type": "function", "function": {"name": t, "arguments": json!({ *t: t }).to_string()}}]},
                {"role": "tool", "tool_call_id": t, "content": t},
                {"role": t, "content": t}
            ]}),
        ));
        cases.push((
            format!("text {i} everywhere (anthropic)"),
            json!({"system": t, "messages": [user(json!(t)),
                assistant_blocks(json!([{"type": "thinking", "thinking": t}, {"type": "tool_use", "id": t, "name": t, "input": { *t: t }}])),
                user(json!([{"type": "tool_result", "tool_use_id": t, "content": [{"type": "text", "text": t}]}]))]}),
        ));
    }
    let cases: Vec<(&str, Value)> = cases.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    assert_shapes_ok(&cases);
}

/// Text from the document that ctx quotes in a warning or an error (a model name, a part type)
/// must not break the one-line rule: a line break in it would start a second stderr line, which
/// could even pose as another `ctx:` message.
#[test]
fn quoted_document_text_stays_on_one_stderr_line() {
    let cases: [(&[&str], Value, usize, i32); 6] = [
        (
            &["count", "-c"],
            json!({"model": "two\nlines", "messages": [user(json!("q"))]}),
            1,
            0,
        ),
        (
            &["count", "-c"],
            json!({"model": "evil\nctx: a forged line", "messages": []}),
            1,
            0,
        ),
        (
            &["count", "-c", "--budget", "50%"],
            json!({"model": "two\nlines", "messages": []}),
            1,
            2,
        ),
        (
            &["count", "-c", "-m", "flag\nmodel"],
            json!([user(json!("q"))]),
            1,
            0,
        ),
        (
            &["count", "-c"],
            json!([user(json!([{"type": "odd\ntype", "text": "x"}]))]),
            1,
            0,
        ),
        (
            &["count", "-c"],
            json!({"system": "s", "messages": [user(json!([{"type": "odd\nblock"}]))]}),
            1,
            0,
        ),
    ];
    let mut problems = Vec::new();
    for (args, doc, lines, code) in cases {
        let run = ctx(args, jsonl([&doc]));
        if let Some(v) = run.violation() {
            problems.push(v);
        } else if run.code != Some(code) || run.stderr.lines().count() != lines {
            problems.push(run.context());
        }
    }
    assert!(
        problems.is_empty(),
        "{} case(s) broke the one-line rule:\n\n{}",
        problems.len(),
        problems.join("\n\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Size: big values, deep values, many messages
// ---------------------------------------------------------------------------------------------

/// About `bytes` bytes of varied English-like prose, deterministic.
fn prose(bytes: usize) -> String {
    const WORDS: &[&str] = &[
        "the",
        "build",
        "failed",
        "because",
        "a",
        "test",
        "in",
        "module",
        "parser",
        "expected",
        "three",
        "tokens",
        "but",
        "found",
        "two;",
        "we",
        "then",
        "reran",
        "it",
        "with",
        "verbose",
        "logging,",
        "and",
        "saw",
        "that",
        "configuration",
        "file",
        "was",
        "missing.",
        "Next,",
        "check",
        "src/lib.rs",
        "line",
        "42",
        "for",
        "errors",
        "(see",
        "above)",
        "while",
        "keeping",
        "API",
        "stable:",
        "\"quoted\"",
        "values",
        "don't",
        "change.",
    ];
    let mut out = String::with_capacity(bytes + 64);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut words_in_paragraph = 0;
    while out.len() < bytes {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.push_str(WORDS[(state % WORDS.len() as u64) as usize]);
        words_in_paragraph += 1;
        if words_in_paragraph > 60 && state % 7 == 0 {
            out.push_str("\n\n");
            words_in_paragraph = 0;
        } else {
            out.push(' ');
        }
    }
    out
}

#[test]
fn a_one_megabyte_tool_output_counts() {
    let doc = json!([
        {"role": "system", "content": "You are a coding agent."},
        user(json!("fix the build")),
        {"role": "assistant", "content": null, "tool_calls": [call("call_1", "run", "{\"cmd\": \"make\"}")]},
        {"role": "tool", "tool_call_id": "call_1", "content": prose(1 << 20)},
        {"role": "assistant", "content": "The build is fixed."}
    ]);
    let input = jsonl([&doc]);
    let run = ctx(&["count", "-c"], input.clone());
    run.assert_robust();
    assert_eq!(run.code(), 0, "{}", run.context());
    assert!(run.errors().is_empty(), "{}", run.context());
    let reports = run.docs();
    assert_eq!(reports.len(), 1);
    let tokens = reports[0]["tokens"].as_u64().expect("tokens");
    assert!(tokens > 100_000, "1 MB of prose counted as {tokens} tokens");
    let run = ctx(&["check", "-c"], input);
    run.assert_robust();
    assert_eq!(run.code(), 0, "{}", run.context());
    assert_eq!(run.docs(), vec![json!([])]);
}

fn nested_arrays(depth: usize) -> String {
    format!("{}\"deep\"{}", "[".repeat(depth), "]".repeat(depth))
}

fn nested_objects(depth: usize) -> String {
    format!("{}\"deep\"{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

/// A deep value must be counted or refused with one error line, never crash the process.
fn assert_deep_value_is_handled(doc: String) {
    let input = format!("{doc}\n{}\n", follower());
    for args in [&["count", "-c"][..], &["check", "-c"][..]] {
        let run = ctx(args, input.clone());
        run.assert_robust();
        match run.code() {
            0 | 1 => assert_eq!(run.docs().len(), 2, "{}", run.context()),
            2 => {
                let errors = run.errors();
                assert_eq!(
                    errors.len(),
                    1,
                    "one error line expected\n{}",
                    run.context()
                );
                assert!(
                    errors[0].starts_with("ctx: document 0"),
                    "error names the document\n{}",
                    run.context()
                );
                // A JSON error ends the stream (SPEC §1); a document error does not.
                assert!(run.docs().len() <= 1, "{}", run.context());
            }
            c => panic!("unexpected exit {c}\n{}", run.context()),
        }
    }
}

#[test]
fn ten_thousand_nested_arrays_in_a_content_part() {
    assert_deep_value_is_handled(format!(
        "[{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"x\",\"extra\":{}}}]}}]",
        nested_arrays(10_000)
    ));
    assert_deep_value_is_handled(format!(
        "[{{\"role\":\"user\",\"content\":[{{\"type\":\"hologram\",\"data2\":{}}}]}}]",
        nested_objects(10_000)
    ));
    assert_deep_value_is_handled(format!(
        "[{{\"role\":\"user\",\"content\":{}}}]",
        nested_arrays(10_000)
    ));
    assert_deep_value_is_handled(nested_arrays(100_000));
}

#[test]
fn moderately_nested_values_are_counted() {
    // 100 levels: deep, but within what any JSON parser accepts; unknown parts are counted by
    // their text, which walks the whole value.
    let docs = [
        format!(
            "[{{\"role\":\"user\",\"content\":[{{\"type\":\"hologram\",\"x\":{}}}]}}]",
            nested_arrays(100)
        ),
        format!(
            "[{{\"role\":\"user\",\"content\":[{{\"type\":\"hologram\",\"x\":{}}}]}}]",
            nested_objects(100)
        ),
        format!(
            "{{\"system\":[{{\"type\":\"widget\",\"x\":{}}}],\"messages\":[]}}",
            nested_arrays(100)
        ),
    ];
    for doc in docs {
        let run = ctx(&["count", "-c"], format!("{doc}\n{}\n", follower()));
        run.assert_robust();
        assert_eq!(run.code(), 0, "{}", run.context());
        assert_eq!(run.docs().len(), 2, "{}", run.context());
        assert!(run.errors().is_empty(), "{}", run.context());
    }
}

#[test]
fn twenty_thousand_tiny_messages() {
    let msgs: Vec<Value> = (0..20_000)
        .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("m{i}")}))
        .collect();
    let input = jsonl([&Value::Array(msgs)]);
    let run = ctx(&["count", "-c", "--per-message"], input.clone());
    run.assert_robust();
    assert_eq!(run.code(), 0, "{}", run.context());
    let reports = run.docs();
    assert_eq!(reports[0]["messages"], json!(20_000));
    assert_eq!(
        reports[0]["per_message"].as_array().map(Vec::len),
        Some(20_000)
    );
    let run = ctx(&["check", "-c"], input);
    run.assert_robust();
    assert_eq!(run.code(), 0, "{}", run.context());
    assert_eq!(run.docs(), vec![json!([])]);
}

// ---------------------------------------------------------------------------------------------
// Megabyte-long runs that make regex pre-tokenizers misbehave (SPEC §3 Robustness)
// ---------------------------------------------------------------------------------------------

/// The run inside `doc` is counted (exit 0; src/tokenizer/tests.rs checks the counts of such
/// runs against the reference), and so is the document after it. `check`, which does not
/// tokenize, accepts both.
fn assert_long_run_is_handled(doc: Value) {
    let input = jsonl([&doc, &follower()]);
    let run = ctx(&["count", "-c"], input.clone());
    run.assert_robust();
    assert_eq!(run.code(), 0, "{}", run.context());
    assert!(run.errors().is_empty(), "{}", run.context());
    let reports = run.docs();
    assert_eq!(reports.len(), 2, "{}", run.context());
    assert!(
        reports[0]["tokens"].as_u64().is_some_and(|t| t > 0),
        "{}",
        run.context()
    );
    assert_eq!(reports[1]["messages"], json!(1), "{}", run.context());

    let run = ctx(&["check", "-c"], input);
    run.assert_robust();
    assert_eq!(run.code(), 0, "{}", run.context());
    assert_eq!(run.docs(), vec![json!([]), json!([])], "{}", run.context());
}

const MB: usize = 1 << 20;

#[test]
fn a_megabyte_of_spaces() {
    assert_long_run_is_handled(json!([user(json!(" ".repeat(MB)))]));
    assert_long_run_is_handled(json!([user(json!(format!("start{}end", " ".repeat(MB))))]));
}

#[test]
fn a_megabyte_of_newlines() {
    assert_long_run_is_handled(
        json!([user(json!("q")), {"role": "assistant", "content": "\n".repeat(MB)}]),
    );
}

#[test]
fn a_megabyte_of_mixed_whitespace_in_a_tool_result() {
    let ws: String = " \t\n\r ".repeat(MB / 5);
    assert_long_run_is_handled(
        json!([user(json!("q")), {"role": "assistant", "content": null, "tool_calls": [call("c", "f", "{}")]},
            {"role": "tool", "tool_call_id": "c", "content": ws}]),
    );
}

#[test]
fn a_megabyte_of_spaces_in_tool_arguments_and_anthropic_text() {
    let args = json!({"patch": " ".repeat(MB)}).to_string();
    assert_long_run_is_handled(
        json!([user(json!("q")), {"role": "assistant", "content": null, "tool_calls": [call("c", "edit", &args)]},
            {"role": "tool", "tool_call_id": "c", "content": "ok"}]),
    );
    assert_long_run_is_handled(
        json!({"system": "s", "messages": [user(json!([{"type": "text", "text": "\n".repeat(MB)}]))]}),
    );
}

#[test]
fn a_megabyte_of_one_letter_or_digit() {
    assert_long_run_is_handled(json!([user(json!("a".repeat(MB)))]));
    assert_long_run_is_handled(json!([user(json!("7".repeat(MB)))]));
    assert_long_run_is_handled(json!([user(json!("!".repeat(MB)))]));
}

// ---------------------------------------------------------------------------------------------
// Memory on megabyte-long runs of one character (SPEC §6)
// ---------------------------------------------------------------------------------------------

/// Runs `ctx ARGS -j 1` with `input` on stdin in an address space of at most `limit` bytes
/// (`ulimit -v`). An address space holds more than the memory in use: the binary and its
/// libraries (about 30 MB for a debug build), and every thread's stack and malloc arena, hence
/// one thread.
fn ctx_within(limit: usize, args: &[&str], input: Vec<u8>) -> Run {
    let what = format!("ctx {} -j 1 (ulimit -v {} KB)", args.join(" "), limit >> 10);
    let mut child = limited(limit >> 10, args, " -j 1")
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    let writer = feed(&mut child, input);
    collect(child, Some(writer), what)
}

/// `sh` running `ctx ARGS` and then `tail` in an address space of at most `kb` KiB (`ulimit
/// -v`), with stdout and stderr piped.
fn limited(kb: usize, args: &[&str], tail: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -v {kb} && exec \"$0\" \"$@\"{tail}"))
        .arg(env!("CARGO_BIN_EXE_ctx"))
        .args(args)
        .env_remove("CTX_MODEL")
        .env_remove("CTX_PROFILE")
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// SPEC §6: peak memory at most 3× the document plus 30 MB, for single-message documents of one
/// character too. Counting a 16 MB run once took 350 MB (the merge kept 20 to 25 bytes per byte
/// of the run), and clipping one kept 8 more bytes per character.
#[test]
fn an_8_megabyte_run_of_one_character_stays_within_three_times_its_size() {
    let size = 8 * MB;
    // SPEC's bound on memory in use, and room for what else the address space holds (a debug
    // build needs 55 to 65 MB in all for these documents).
    let limit = 3 * size + 30 * MB + 40 * MB;
    for unit in ["a", " ", "\n", "中"] {
        let escaped = serde_json::to_string(unit).expect("serialise").len() - 2;
        let doc = json!([user(json!(unit.repeat((size - 40) / escaped)))]);
        let input = jsonl([&doc]);
        assert!(input.len() <= size);
        for args in [
            &["count"][..],
            &["prune"],
            &[
                "truncate",
                "--budget",
                "1000",
                "--partial",
                "--no-keep-task",
            ],
            &["fit", "--budget", "1000", "--partial", "--no-keep-task"],
        ] {
            let run = ctx_within(limit, args, input.clone());
            run.assert_robust();
            assert_eq!(run.code(), 0, "{unit:?}: {}", run.context());
            let out = &run.docs()[0];
            match args[0] {
                "count" => assert!(out["tokens"].as_u64().is_some_and(|t| t > 1000)),
                "prune" => assert_eq!(out, &doc),
                _ => assert!(
                    out[0]["content"]
                        .as_str()
                        .is_some_and(|c| c.len() < 100_000)
                ),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Errors: one line each, nothing on stdout for the failing document, the stream goes on
// ---------------------------------------------------------------------------------------------

#[test]
fn failing_documents_write_nothing_and_the_stream_continues() {
    let docs = [
        follower(),
        json!(42),
        json!("a string"),
        json!(null),
        json!({"model": "gpt-4o"}),
        json!({"messages": {"role": "user"}}),
        json!({"model": "gpt-4.1", "input": 42}),
        json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
        json!({"prompt": "hi"}),
        json!([{"role": "user", "content": "ok"}, "not a message"]),
        json!([null]),
        follower(),
    ];
    let input = jsonl(&docs);
    for args in [
        &["count", "-c"][..],
        &["check", "-c"][..],
        &["count", "--output", "total"][..],
    ] {
        let run = ctx(args, input.clone());
        run.assert_robust();
        assert_eq!(run.code(), 2, "{}", run.context());
        let errors = run.errors();
        assert_eq!(
            errors.len(),
            10,
            "one line per failing document\n{}",
            run.context()
        );
        for (line, index) in errors.iter().zip(1..) {
            assert!(
                line.starts_with(&format!("ctx: document {index}: ")),
                "{line}\n{}",
                run.context()
            );
        }
        if args.contains(&"total") {
            assert_eq!(
                String::from_utf8_lossy(&run.stdout).lines().count(),
                2,
                "{}",
                run.context()
            );
        } else {
            assert_eq!(
                run.docs().len(),
                2,
                "only the two valid documents have output\n{}",
                run.context()
            );
        }
    }
}

#[test]
fn a_failing_document_between_over_budget_documents_keeps_the_most_severe_code() {
    let big = json!([user(json!("word ".repeat(200)))]);
    let input = jsonl([&big, &json!(1), &big]);
    let run = ctx(&["count", "-c", "--budget", "10"], input);
    run.assert_input_error(|_| true);
    assert_eq!(run.docs().len(), 2, "{}", run.context());
}

/// Each input is broken JSON (or not UTF-8): exit 2 with one error line naming the broken
/// document, the documents before it still processed, nothing after it (SPEC §1: a syntax error
/// ends the stream).
#[test]
fn malformed_json_ends_the_stream_with_one_line() {
    let good = String::from_utf8(jsonl([&follower()])).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "truncated",
            format!("{good}[{{\"role\": \"user\", \"content\": \"x").into_bytes(),
        ),
        (
            "trailing comma",
            format!("{good}[{{\"role\": \"user\"}},]\n{good}").into_bytes(),
        ),
        (
            "lone surrogate",
            format!("{good}[{{\"role\": \"user\", \"content\": \"\\ud800\"}}]\n{good}")
                .into_bytes(),
        ),
        (
            "raw control character",
            format!("{good}[{{\"role\": \"user\", \"content\": \"a\u{0}b\"}}]\n{good}")
                .into_bytes(),
        ),
        (
            "garbage",
            format!("{good}<html>oops</html>\n{good}").into_bytes(),
        ),
        (
            "stray closing bracket",
            format!("{good}[{{\"role\": \"user\"}}]]\n{good}").into_bytes(),
        ),
        (
            "NaN",
            format!("{good}[{{\"role\": \"user\", \"content\": NaN}}]\n").into_bytes(),
        ),
        ("invalid utf-8", {
            let mut v = good.clone().into_bytes();
            v.extend(b"[{\"role\": \"user\", \"content\": \"\xff\xfe\xc3\"}]\n");
            v.extend(good.as_bytes());
            v
        }),
    ];
    for (name, input) in cases {
        for args in [&["count", "-c"][..], &["check", "-c"][..]] {
            let run = ctx(args, input.clone());
            run.assert_robust();
            let what = format!("[{name}]\n{}", run.context());
            assert_eq!(run.code(), 2, "{what}");
            let errors = run.errors();
            assert_eq!(errors.len(), 1, "{what}");
            let docs = run.docs();
            // `]` after a complete document is the start of the next (invalid) one.
            let expected = match name {
                "stray closing bracket" => 2,
                _ => 1,
            };
            assert_eq!(docs.len(), expected, "{what}");
            let index = expected;
            assert!(
                errors[0].starts_with(&format!("ctx: document {index}: ")),
                "{what}"
            );
        }
    }
}

#[test]
fn unreadable_files_are_reported_and_the_other_files_processed() {
    let dir = std::env::temp_dir().join(format!("ctx-robustness-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("a.json");
    let b = dir.join("b.jsonl");
    std::fs::write(&a, jsonl([&follower()])).unwrap();
    std::fs::write(&b, jsonl([&follower(), &json!(7), &follower()])).unwrap();
    let missing = dir.join("missing.json");
    let (a, b, missing, d) = (
        a.to_str().unwrap().to_string(),
        b.to_str().unwrap().to_string(),
        missing.to_str().unwrap().to_string(),
        dir.to_str().unwrap().to_string(),
    );
    for cmd in ["count", "check"] {
        let run = ctx(&[cmd, "-c", &a, &missing, &d, &b], "");
        run.assert_robust();
        assert_eq!(run.code(), 2, "{}", run.context());
        assert_eq!(
            run.docs().len(),
            3,
            "a.json and two documents of b.jsonl\n{}",
            run.context()
        );
        let errors = run.errors();
        assert_eq!(
            errors.len(),
            3,
            "missing file, directory, bad document\n{}",
            run.context()
        );
        assert!(errors[0].contains(&missing), "{}", run.context());
        assert!(errors[1].contains(&d), "{}", run.context());
        assert!(
            errors[2].contains(&b) && errors[2].contains("document 1"),
            "{}",
            run.context()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// Reading input (SPEC §1): empty inputs, encodings, numbers, limits, endless streams, -j
// ---------------------------------------------------------------------------------------------

/// A directory of its own for a test's files, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("ctx-robustness-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Writes `bytes` to `name` in the directory and returns its path.
    fn file(&self, name: &str, bytes: impl AsRef<[u8]>) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a bounded run reads on stdin.
enum Stdin {
    /// These bytes, then the end of the input.
    Bytes(Vec<u8>),
    /// `prefix`, then `unit` again and again until ctx closes the pipe (like `yes`).
    Endless(Vec<u8>, Vec<u8>),
    /// A device such as /dev/zero.
    Device(&'static str),
}

/// Runs `ctx ARGS` under a 2 GiB address-space limit (`ulimit -v`), so that a run that reads
/// without bound dies of it instead of eating the machine's memory, and is killed (failing the
/// test) if it does not end within [`TIMEOUT`].
fn bounded(args: &[&str], stdin: Stdin) -> Run {
    let what = format!("ctx {}", args.join(" "));
    let mut cmd = limited(2 << 20, args, "");
    match &stdin {
        Stdin::Device(path) => cmd.stdin(std::fs::File::open(path).expect("open the device")),
        _ => cmd.stdin(Stdio::piped()),
    };
    let mut child = cmd.spawn().expect("spawn ctx");
    let writer = match stdin {
        Stdin::Bytes(bytes) => Some(feed(&mut child, bytes)),
        Stdin::Endless(prefix, unit) => {
            let mut w = child.stdin.take().expect("stdin is piped");
            Some(thread::spawn(move || {
                // Ends when ctx closes the pipe (it stopped reading, or exited).
                let _ = w.write_all(&prefix);
                let block = unit.repeat((1 << 16) / unit.len().max(1) + 1);
                while w.write_all(&block).is_ok() {}
            }))
        }
        Stdin::Device(_) => None,
    };
    collect(child, writer, what)
}

/// An input with no document at all is an input error, so that a CI gate never passes on
/// nothing; the other inputs of the run are still processed.
#[test]
fn empty_input_is_an_input_error() {
    for input in ["", "\n\n  \t\r\n", "\u{FEFF}"] {
        for args in [
            &["count"][..],
            &["check"][..],
            &["truncate", "--budget", "100"][..],
        ] {
            let run = ctx(args, input);
            run.assert_input_error(|e| {
                e.starts_with("ctx: stdin: ") && e.contains("no JSON document")
            });
            assert!(run.stdout.is_empty(), "{input:?}\n{}", run.context());
        }
    }
    let dir = TempDir::new("empty");
    let a = dir.file("a.json", jsonl([&follower()]));
    let empty = dir.file("empty.json", "");
    let blank = dir.file("blank.json", " \n\n");
    let run = ctx(&["count", "-c", &a, &empty, &blank, &a], "");
    run.assert_robust();
    assert_eq!(run.code(), 2, "{}", run.context());
    assert_eq!(run.docs().len(), 2, "{}", run.context());
    let errors = run.errors();
    assert_eq!(errors.len(), 2, "{}", run.context());
    assert!(
        errors[0].starts_with(&format!("ctx: {empty}: ")) && errors[0].contains("empty"),
        "{}",
        run.context()
    );
    assert!(
        errors[1].starts_with(&format!("ctx: {blank}: ")) && errors[1].contains("whitespace"),
        "{}",
        run.context()
    );
}

/// A UTF-8 byte-order mark at the start of an input is skipped, as jq does.
#[test]
fn a_utf8_byte_order_mark_is_skipped() {
    let plain = jsonl([&follower(), &follower()]);
    let marked = [b"\xEF\xBB\xBF".as_slice(), &plain].concat();
    for args in [
        &["count", "-c"][..],
        &["check", "-c"][..],
        &["truncate", "-c", "--budget", "1000"][..],
    ] {
        let want = ctx(args, plain.clone());
        let run = ctx(args, marked.clone());
        run.assert_robust();
        assert_eq!(run.code(), want.code(), "{}", run.context());
        assert_eq!(run.stdout, want.stdout, "{}", run.context());
        assert_eq!(run.stderr, want.stderr, "{}", run.context());
    }
    // In files, each with its own mark.
    let dir = TempDir::new("bom");
    let a = dir.file("a.json", &marked);
    let b = dir.file("b.json", &marked);
    let run = ctx(&["count", "-c", &a, &b], "");
    run.assert_robust();
    assert_eq!(run.code(), 0, "{}", run.context());
    assert_eq!(run.docs().len(), 4, "{}", run.context());
}

/// UTF-16 and UTF-32 inputs are named in the error, with the conversion to run.
#[test]
fn utf16_input_is_named_with_the_conversion_to_run() {
    let text = "[{\"role\": \"user\", \"content\": \"h\u{e9}llo\"}]\n";
    let utf16 = |le: bool| -> Vec<u8> {
        text.encode_utf16()
            .flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() })
            .collect()
    };
    let utf32le: Vec<u8> = text
        .chars()
        .flat_map(|c| (c as u32).to_le_bytes())
        .collect();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "UTF-16LE with a mark",
            [b"\xFF\xFE".as_slice(), &utf16(true)].concat(),
            "iconv -f UTF-16 -t UTF-8",
        ),
        (
            "UTF-16BE with a mark",
            [b"\xFE\xFF".as_slice(), &utf16(false)].concat(),
            "iconv -f UTF-16 -t UTF-8",
        ),
        ("UTF-16LE", utf16(true), "iconv -f UTF-16LE -t UTF-8"),
        ("UTF-16BE", utf16(false), "iconv -f UTF-16BE -t UTF-8"),
        ("UTF-32LE", utf32le, "iconv -f UTF-32LE -t UTF-8"),
    ];
    let dir = TempDir::new("utf16");
    for (name, bytes, conversion) in cases {
        let run = ctx(&["count"], bytes.clone());
        run.assert_robust();
        let what = format!("[{name}]\n{}", run.context());
        assert_eq!(run.code(), 2, "{what}");
        let errors = run.errors();
        assert_eq!(errors.len(), 1, "{what}");
        assert!(errors[0].starts_with("ctx: stdin: "), "{what}");
        assert!(errors[0].contains(&name[..6]), "{what}");
        assert!(errors[0].contains(conversion), "{what}");
        let file = dir.file("utf16.json", &bytes);
        let run = ctx(&["count", &file], "");
        run.assert_robust();
        assert_eq!(run.code(), 2, "{}", run.context());
        assert!(
            run.errors()[0].starts_with(&format!("ctx: {file}: ")),
            "{}",
            run.context()
        );
    }
}

/// A lone surrogate escape gets a message that says so, quoting it (exit 2, as any invalid
/// JSON).
#[test]
fn lone_surrogate_escapes_are_named() {
    for (content, escape) in [
        (r"\ud800", r"\ud800"),
        (r"a\udc00b", r"\udc00"),
        (r"\uD83D\u0041", r"\uD83D"),
        (r"\ud83d\ude00 \ud800 x", r"\ud800"),
        (r"\ud83d\ude00\udc00", r"\udc00"),
    ] {
        let input = format!("[{{\"role\": \"user\", \"content\": \"{content}\"}}]\n");
        let run = ctx(&["count"], input);
        run.assert_input_error(|e| {
            e.contains(&format!("lone surrogate escape {escape}")) && e.contains("at line 1 column")
        });
    }
}

/// Numbers are written back as they were written: `1e5` stays `1e5`, `1E+05` stays `1E+05`,
/// `1.0`, `-0` and big integers are unchanged, by every command that passes a document
/// through.
#[test]
fn numbers_pass_through_byte_for_byte() {
    let body = r#"{"model":"gpt-4o","temperature":1.0,"top_p":1E0,"seed":123456789012345678901234567890,"x":[1e5,1E5,1e+5,1E+05,-1.5e-3,-0,-0.0,0.1000,1e-7,2.50,0e0],"messages":[{"role":"system","content":"be_brief"},{"role":"user","content":"hi","extra":{"n":6.02e23,"m":-0,"big":-98765432109876543210.5e-0}}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"k":{"type":"number","minimum":-1E-2,"maximum":1e3}}}}}]}"#;
    let input = format!("{body}\n{body}\n");
    for args in [
        &["truncate", "--budget", "100000"][..],
        &["prune"][..],
        &["fit", "--budget", "100000"][..],
        &["summarize"][..],
    ] {
        let compact = [args, &["-c"]].concat();
        let run = ctx(&compact, input.clone());
        run.assert_robust();
        assert_eq!(run.code(), 0, "{}", run.context());
        assert_eq!(
            String::from_utf8_lossy(&run.stdout),
            input,
            "{}",
            run.context()
        );
        // Pretty output holds the same bytes once the indentation is taken out.
        let run = ctx(args, input.clone());
        assert_eq!(run.code(), 0, "{}", run.context());
        let squeezed: String = String::from_utf8_lossy(&run.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join("");
        assert_eq!(squeezed, format!("{body}{body}"), "{}", run.context());
    }
}

/// A document over the input limit is an input error (exit 2) that ends its input; the
/// documents before it and the other inputs are processed; `--max-input-size` raises the limit.
#[test]
fn a_document_over_the_input_limit_is_an_input_error() {
    let small = jsonl([&follower()]);
    let big = jsonl([&json!([user(json!("x".repeat(4000)))])]);
    let input = [small.clone(), big.clone(), small.clone()].concat();
    let run = ctx(&["count", "-c", "--max-input-size", "1K"], input.clone());
    run.assert_input_error(|e| {
        e.starts_with("ctx: document 1: ") && e.contains("1 KiB") && e.contains("--max-input-size")
    });
    assert_eq!(run.docs().len(), 1, "{}", run.context());
    for limit in ["1M", "4097", "64m", "1GiB"] {
        let run = ctx(&["count", "-c", "--max-input-size", limit], input.clone());
        assert_eq!(run.code(), 0, "{}", run.context());
        assert_eq!(run.docs().len(), 3, "{}", run.context());
    }
    let dir = TempDir::new("limit");
    let a = dir.file("a.json", &big);
    let b = dir.file("b.json", &small);
    let run = ctx(&["count", "-c", "--max-input-size", "1K", &a, &b], "");
    run.assert_robust();
    assert_eq!(run.code(), 2, "{}", run.context());
    assert_eq!(run.docs().len(), 1, "{}", run.context());
    assert!(
        run.errors()[0].starts_with(&format!("ctx: {a}: document 0: ")),
        "{}",
        run.context()
    );
    // The flag files are bounded by the same limit.
    let tools = dir.file(
        "tools.json",
        format!("[{{\"type\": \"function\", \"function\": {{\"name\": \"f\", \"description\": \"{}\"}}}}]", "d".repeat(2000)),
    );
    let run = ctx(
        &["count", "--max-input-size", "1K", "--tools", &tools],
        small.clone(),
    );
    run.assert_robust();
    assert_eq!(run.code(), 2, "{}", run.context());
    assert!(run.errors()[0].contains("--tools"), "{}", run.context());
    for bad in ["0", "lots", "12Q", "99999999999999G"] {
        let run = ctx(&["count", "--max-input-size", bad], small.clone());
        run.assert_input_error(|_| true);
    }
}

/// `ctx count < /dev/zero` ends at once with exit 2 (NUL bytes are not JSON), with one thread
/// or several, instead of reading gigabytes.
#[test]
fn dev_zero_on_stdin_ends_at_once() {
    for jobs in ["1", "4"] {
        for args in [
            &["count", "-j", jobs][..],
            &["fit", "-j", jobs, "--budget", "1000"][..],
        ] {
            let run = bounded(args, Stdin::Device("/dev/zero"));
            run.assert_input_error(|e| e.contains("NUL"));
            assert!(run.stdout.is_empty(), "{}", run.context());
        }
    }
}

/// A document that never ends (a string, an array that never closes) stops at the input
/// limit with exit 2: memory stays bounded.
#[test]
fn a_document_that_never_ends_stops_at_the_limit() {
    for (prefix, unit) in [
        (
            &b"[{\"role\": \"user\", \"content\": \""[..],
            &b"aaaaaaa "[..],
        ),
        (&b"["[..], &b"[1, "[..]),
        (&b"{\"a\": "[..], &b"{\"b\": \"c\", \"d\": "[..]),
        (&b""[..], &b"1"[..]),
    ] {
        for jobs in ["1", "4"] {
            let run = bounded(
                &["count", "-j", jobs, "--max-input-size", "8M"],
                Stdin::Endless(prefix.to_vec(), unit.to_vec()),
            );
            run.assert_input_error(|e| e.contains("8 MiB"));
        }
    }
}

/// `--tools`, `--prompt-file` and `--summary-file` pointed at a device are refused at once
/// (exit 2); a pipe still works (`--tools <(...)`).
#[test]
fn flag_files_are_read_with_a_bound() {
    let doc = jsonl([&follower()]);
    for args in [
        &["count", "--tools", "/dev/zero"][..],
        &["count", "--tools", "/dev/urandom"][..],
        &["truncate", "--tools", "/dev/zero"][..],
        &["summarize", "--force", "--prompt-file", "/dev/zero"][..],
        &["summarize", "--force", "--summary-file", "/dev/urandom"][..],
        &[
            "fit",
            "--summarize=extractive",
            "--prompt-file",
            "/dev/urandom",
        ][..],
    ] {
        let run = bounded(args, Stdin::Bytes(doc.clone()));
        // Refused for what it is (binary, not text), not after filling the memory.
        run.assert_input_error(|e| {
            e.starts_with(&format!("ctx: {} /dev/", args[args.len() - 2]))
                && (e.contains("NUL") || e.contains("UTF-8"))
        });
    }
    // A pipe that never ends stops at the limit.
    for flag in ["--tools", "--prompt-file", "--summary-file"] {
        let run = bounded(
            &[
                "summarize",
                "--force",
                "--max-input-size",
                "1M",
                flag,
                "/dev/stdin",
                "-",
            ],
            Stdin::Endless(b"[\"".to_vec(), b"text ".to_vec()),
        );
        run.assert_input_error(|e| {
            e.starts_with(&format!("ctx: {flag} /dev/stdin: ")) && e.contains("--max-input-size")
        });
    }
    // Tools from a pipe (here stdin), the conversation from a file.
    let dir = TempDir::new("flag-files");
    let chat = dir.file("chat.json", &doc);
    let tools = r#"{"tools": [{"type": "function", "function": {"name": "lookup", "description": "Finds a thing", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]}"#;
    let without = ctx(&["count", "--output", "total", &chat], "");
    let with = ctx(
        &["count", "--output", "total", "--tools", "/dev/stdin", &chat],
        tools,
    );
    with.assert_robust();
    assert_eq!(with.code(), 0, "{}", with.context());
    let n = |r: &Run| -> u64 { String::from_utf8_lossy(&r.stdout).trim().parse().unwrap() };
    assert!(n(&with) > n(&without), "{}", with.context());
}

/// After a syntax error ends an input's stream, ctx stops reading that input (`yes | ctx count`
/// ends) and goes on with the next input, with one thread or several.
#[test]
fn a_syntax_error_stops_reading_its_input() {
    let dir = TempDir::new("stop-reading");
    let good = dir.file("good.json", jsonl([&follower()]));
    let first = jsonl([&follower()]);
    for jobs in ["1", "4"] {
        // `yes`: garbage that reading alone recognises.
        let run = bounded(
            &["count", "-c", "-j", jobs],
            Stdin::Endless(Vec::new(), b"y\n".to_vec()),
        );
        run.assert_input_error(|_| true);
        // Documents that are delimited but do not parse: only the parser sees the error.
        let run = bounded(
            &["count", "-c", "-j", jobs],
            Stdin::Endless(first.clone(), b"[1,, 2]\n".to_vec()),
        );
        run.assert_input_error(|_| true);
        assert_eq!(run.docs().len(), 1, "{}", run.context());
        // The next input is read after stdin's stream ended.
        let run = bounded(
            &["count", "-c", "-j", jobs, "-", &good],
            Stdin::Endless(first.clone(), b"{\"a\": nope}\n".to_vec()),
        );
        run.assert_input_error(|e| e.starts_with("ctx: document 1: "));
        assert_eq!(run.docs().len(), 2, "{}", run.context());
    }
}

/// `-j` is capped: a huge value neither panics nor starts a thread per document; `-j 0` means
/// the default.
#[test]
fn any_jobs_value_is_handled() {
    let docs: Vec<Value> = (0..50).map(|_| follower()).collect();
    let input = jsonl(&docs);
    let want = ctx(&["count", "-c", "-j", "1"], input.clone());
    for jobs in ["0", "5000", "18446744073709551615"] {
        let run = ctx(&["count", "-c", "-j", jobs], input.clone());
        run.assert_robust();
        assert_eq!(run.code(), 0, "{}", run.context());
        assert_eq!(run.stdout, want.stdout, "{}", run.context());
    }
    let run = ctx(&["count", "-j", "99999999999999999999999"], input);
    run.assert_input_error(|_| true);
}

// ---------------------------------------------------------------------------------------------
// A closed stdout (`| head -1`) ends quietly with 0
// ---------------------------------------------------------------------------------------------

fn closed_stdout(args: &[&str], docs: &[Value]) {
    let what = format!("ctx {} (stdout closed after one line)", args.join(" "));
    let mut child = command(args).spawn().expect("spawn ctx");
    let writer = feed(&mut child, jsonl(docs));
    let err = drain(child.stderr.take());
    {
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let mut first = String::new();
        out.read_line(&mut first).expect("read the first line");
        assert!(!first.is_empty(), "{what}: no output at all");
        // Dropping the reader closes the pipe, as `head -1` does.
    }
    let code = wait(&mut child, &what);
    writer.join().expect("stdin writer");
    let stderr = String::from_utf8_lossy(&err.join().expect("stderr")).into_owned();
    assert!(!stderr.contains("panicked"), "{what}: panic\n{stderr}");
    assert_eq!(code, Some(0), "{what}: exit code\n{stderr}");
    assert!(
        stderr.lines().all(|l| l.starts_with("ctx: warning: ")),
        "{what}: errors on stderr\n{stderr}"
    );
}

#[test]
fn closed_stdout_ends_quietly() {
    let docs: Vec<Value> = (0..2_000)
        .map(|i| json!([{"role": "system", "content": "s"}, user(json!(format!("question number {i}")))]))
        .collect();
    closed_stdout(&["count"], &docs);
    closed_stdout(&["count", "-c", "--per-message"], &docs);
    closed_stdout(&["count", "--output", "table"], &docs);
    // `check` with findings, so that its output overflows the pipe buffer too.
    let bad: Vec<Value> = (0..2_000)
        .map(|i| json!([{"content": i}, {"role": "tool", "content": "orphan"}, {"role": "narrator"}]))
        .collect();
    closed_stdout(&["check"], &bad);
}

// ---------------------------------------------------------------------------------------------
// Property tests: the library never panics, whatever JSON it is given
// ---------------------------------------------------------------------------------------------

mod library {
    use super::*;
    use ctx::{Dialect, Document, Model, check, count};
    use proptest::sample::select;
    use proptest::test_runner::Config;

    const KEYS: &[&str] = &[
        "role",
        "content",
        "tool_calls",
        "function",
        "arguments",
        "name",
        "id",
        "type",
        "text",
        "tool_call_id",
        "messages",
        "system",
        "model",
        "image_url",
        "url",
        "source",
        "data",
        "input",
        "tool_use_id",
        "is_error",
    ];
    const ROLES: &[&str] = &[
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "function",
        "model",
        "",
        "User",
        "ユーザー",
    ];
    const TYPES: &[&str] = &[
        "text",
        "image_url",
        "input_audio",
        "file",
        "refusal",
        "input_text",
        "image",
        "document",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "search_result",
        "container_upload",
        "function",
        "",
        "hologram",
    ];
    const MODELS: &[&str] = &[
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4",
        "gpt-3.5-turbo-0301",
        "gpt-4.1-mini",
        "o4-mini",
        "o1",
        "gpt-5",
        "claude-sonnet-4",
        "claude-3-5-haiku-latest",
        "gemini-2.5-pro",
        "llama3.1:8b",
        "ft:gpt-4o:org::x",
        "openrouter/anthropic/claude-opus-4",
        "unknown-model",
        "",
        "ft:",
        "/",
        "ɡpt-4o",
    ];
    const IDS: &[&str] = &["call_0", "call_1", "t1", "", "toolu_01"];

    fn interesting_strings() -> Vec<String> {
        let png = tiny_png(4, 3);
        let mut v: Vec<String> = [
            "{}",
            "{\"a\": 1}",
            "\"{}\"",
            "[1]",
            "not json",
            "null",
            "https://example.com/a.png",
            "data:",
            "data:image/png;base64,",
            "data:image/png;base64,!!!",
            "data:image/jpeg;base64,/9j/AAAA",
            "low",
            "high",
            "auto",
            "base64",
            "url",
            "image/png",
            " ",
            "\n\n\n",
            "\u{0}",
            "👍🏽",
            "𠜎",
            "\u{0301}",
            "<|endoftext|>",
            "ephemeral",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(
            ROLES
                .iter()
                .chain(TYPES)
                .chain(MODELS)
                .chain(IDS)
                .map(|s| s.to_string()),
        );
        v.push(data_url("image/png", &png));
        v.push(base64(&png));
        v.push(data_url("image/png", &png_header(u32::MAX, 7)));
        v.push(base64(&png_header(0, 9)));
        v
    }

    fn string() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => "\\PC{0,12}",
            3 => select(interesting_strings()),
            1 => proptest::collection::vec(any::<char>(), 0..6).prop_map(|c| c.into_iter().collect()),
        ]
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => select(KEYS).prop_map(str::to_string),
            1 => "[a-z_]{0,6}",
            1 => "\\PC{0,4}",
        ]
    }

    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            select(
                &[
                    "1e400",
                    "-0",
                    "123456789012345678901234567890",
                    "0.1",
                    "-1e-400",
                    "4294967296"
                ][..]
            )
            .prop_map(|s| serde_json::from_str::<Value>(s).expect("valid number")),
        ]
    }

    /// Arbitrary JSON: null, booleans, numbers, short unicode strings, arrays and objects.
    pub fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            number(),
            string().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((key(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn object(fields: Vec<(String, Option<Value>)>, extra: Vec<(String, Value)>) -> Value {
        let mut o = serde_json::Map::new();
        for (k, v) in extra {
            o.insert(k, v);
        }
        for (k, v) in fields {
            if let Some(v) = v {
                o.insert(k, v);
            }
        }
        Value::Object(o)
    }

    /// An object of the `extra` fields and of each of `fields` whose strategy gives a value: each
    /// field named once, beside the strategy of its value.
    fn object_of(
        fields: Vec<(&'static str, BoxedStrategy<Option<Value>>)>,
        extra: impl Strategy<Value = Vec<(String, Value)>>,
    ) -> impl Strategy<Value = Value> {
        let (names, values): (Vec<_>, Vec<_>) = fields.into_iter().unzip();
        (values, extra).prop_map(move |(values, extra)| {
            object(
                names.iter().map(|n| n.to_string()).zip(values).collect(),
                extra,
            )
        })
    }

    /// A field of [`object_of`]: its name and the strategy of its value (`None`: absent).
    fn field(
        name: &'static str,
        value: impl Strategy<Value = Option<Value>> + 'static,
    ) -> (&'static str, BoxedStrategy<Option<Value>>) {
        (name, value.boxed())
    }

    /// No extra fields, for [`object_of`].
    fn no_extras() -> Just<Vec<(String, Value)>> {
        Just(Vec::new())
    }

    fn extras() -> impl Strategy<Value = Vec<(String, Value)>> {
        proptest::collection::vec((key(), json_value()), 0..2)
    }

    /// A value that is often, but not always, the expected kind.
    fn mostly<S: Strategy<Value = Value> + 'static>(s: S) -> BoxedStrategy<Value> {
        prop_oneof![6 => s, 1 => json_value()].boxed()
    }

    fn str_from(pool: &'static [&'static str]) -> impl Strategy<Value = Value> {
        prop_oneof![3 => select(pool).prop_map(Value::from), 1 => string().prop_map(Value::String)]
    }

    fn image_url() -> impl Strategy<Value = Value> {
        prop_oneof![
            string().prop_map(Value::String),
            object_of(
                vec![
                    field(
                        "url",
                        mostly(string().prop_map(Value::String)).prop_map(Some)
                    ),
                    field(
                        "detail",
                        proptest::option::of(str_from(&["low", "high", "auto"]))
                    ),
                ],
                no_extras()
            ),
        ]
    }

    fn source() -> impl Strategy<Value = Value> {
        let text = || proptest::option::of(mostly(string().prop_map(Value::String)));
        object_of(
            vec![
                field(
                    "type",
                    proptest::option::of(str_from(&["base64", "url", "file", "text"])),
                ),
                field("data", text()),
                field("url", text()),
                field("media_type", Just(Some(json!("image/png")))),
            ],
            no_extras(),
        )
    }

    /// A content part or block of any dialect, with fields that may be missing or odd.
    fn part() -> BoxedStrategy<Value> {
        let leaf = (
            proptest::option::weighted(0.9, str_from(TYPES)),
            proptest::option::of(mostly(string().prop_map(Value::String))),
            proptest::option::of(mostly(image_url())),
            proptest::option::of(mostly(source())),
            proptest::option::of(str_from(IDS)),
            proptest::option::of(mostly(json_value())),
            extras(),
        )
            .prop_map(|(ty, text, iu, src, id, input, extra)| {
                let key = if id.is_some() && input.is_none() {
                    "tool_use_id"
                } else {
                    "id"
                };
                object(
                    vec![
                        ("type".into(), ty),
                        ("text".into(), text),
                        ("image_url".into(), iu),
                        ("source".into(), src),
                        (key.into(), id),
                        ("input".into(), input),
                    ],
                    extra,
                )
            });
        leaf.prop_recursive(2, 12, 4, |inner| {
            (
                str_from(&["tool_result", "mcp_tool_result", "web_search_tool_result"]),
                proptest::collection::vec(inner, 0..4),
                str_from(IDS),
            )
                .prop_map(
                    |(ty, content, id)| json!({"type": ty, "tool_use_id": id, "content": content}),
                )
        })
        .boxed()
    }

    fn content() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            1 => Just(None),
            1 => Just(Some(Value::Null)),
            3 => string().prop_map(|s| Some(Value::String(s))),
            4 => proptest::collection::vec(part(), 0..4).prop_map(|p| Some(Value::Array(p))),
            1 => json_value().prop_map(Some),
        ]
    }

    fn arguments() -> impl Strategy<Value = Value> {
        prop_oneof![
            3 => select(&["{}", "{\"a\": 1}", "\"{}\"", "[1]", "not json", "", "{\"a\": "][..]).prop_map(Value::from),
            1 => json_value().prop_map(|v| Value::String(v.to_string())),
            1 => json_value(),
        ]
    }

    fn tool_call() -> impl Strategy<Value = Value> {
        let function = object_of(
            vec![
                field(
                    "name",
                    proptest::option::of(str_from(&["f", "search", "run"])),
                ),
                field("arguments", proptest::option::of(arguments())),
            ],
            no_extras(),
        );
        object_of(
            vec![
                field("id", proptest::option::weighted(0.9, str_from(IDS))),
                field(
                    "type",
                    proptest::option::weighted(0.9, str_from(&["function"])),
                ),
                field(
                    "function",
                    proptest::option::weighted(0.9, mostly(function)),
                ),
            ],
            no_extras(),
        )
    }

    fn tool_calls() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            3 => Just(None),
            1 => Just(Some(Value::Null)),
            4 => proptest::collection::vec(tool_call(), 0..4).prop_map(|c| Some(Value::Array(c))),
            1 => json_value().prop_map(Some),
        ]
    }

    /// A message-like object: role, content, tool calls, tool_call_id and the odd extra.
    pub fn message() -> BoxedStrategy<Value> {
        let function_call = mostly(tool_call().prop_map(|c| c["function"].clone()));
        object_of(
            vec![
                field("role", proptest::option::weighted(0.95, str_from(ROLES))),
                field("content", content()),
                field("tool_calls", tool_calls()),
                field(
                    "tool_call_id",
                    proptest::option::weighted(0.3, str_from(IDS)),
                ),
                field(
                    "function_call",
                    proptest::option::weighted(0.1, function_call),
                ),
                field(
                    "name",
                    proptest::option::weighted(0.2, string().prop_map(Value::String)),
                ),
            ],
            extras(),
        )
        .boxed()
    }

    fn tool_definition() -> impl Strategy<Value = Value> {
        let types = str_from(&["string", "integer", "object", "array"]);
        let values = proptest::collection::vec(json_value(), 0..4).prop_map(Value::Array);
        let property = object_of(
            vec![
                field("type", proptest::option::of(mostly(types))),
                field(
                    "description",
                    proptest::option::of(string().prop_map(Value::String)),
                ),
                field("enum", proptest::option::of(mostly(values))),
                field("properties", proptest::option::weighted(0.2, json_value())),
                field("items", proptest::option::weighted(0.2, json_value())),
            ],
            no_extras(),
        );
        let props = proptest::collection::vec((key(), mostly(property)), 0..4)
            .prop_map(|kv| Value::Object(kv.into_iter().collect()));
        (
            proptest::option::of(str_from(&["f", "search"])),
            proptest::option::of(string().prop_map(Value::String)),
            mostly(props),
        )
            .prop_map(|(name, description, properties)| {
                let f = object(
                    vec![
                        ("name".into(), name.clone()),
                        ("description".into(), description.clone()),
                        (
                            "parameters".into(),
                            Some(json!({"type": "object", "properties": properties})),
                        ),
                    ],
                    vec![],
                );
                json!({"type": "function", "function": f, "name": name, "description": description,
                       "input_schema": {"type": "object", "properties": properties}})
            })
    }

    /// Documents biased toward what ctx expects: message arrays and request bodies.
    pub fn document() -> impl Strategy<Value = Value> {
        let messages = proptest::collection::vec(message(), 0..8);
        let system = prop_oneof![
            string().prop_map(Value::String),
            proptest::collection::vec(part(), 0..3).prop_map(Value::Array),
            json_value()
        ];
        let tools = |most| {
            mostly(proptest::collection::vec(tool_definition(), 0..most).prop_map(Value::Array))
        };
        let body = object_of(
            vec![
                field("model", proptest::option::of(str_from(MODELS))),
                field(
                    "messages",
                    messages.clone().prop_map(|m| Some(Value::Array(m))),
                ),
                field("system", proptest::option::weighted(0.3, system)),
                field("tools", proptest::option::weighted(0.3, tools(3))),
                field("functions", proptest::option::weighted(0.1, tools(2))),
            ],
            extras(),
        );
        prop_oneof![
            4 => messages.prop_map(Value::Array),
            3 => body,
            1 => json_value(),
            1 => proptest::collection::vec(json_value(), 0..4).prop_map(Value::Array),
        ]
    }

    /// Recognises, checks and counts `value` under every dialect choice, through the library's
    /// API; any panic fails the property (proptest catches it and shrinks the input).
    fn exercise(value: &Value) {
        for format in [None, Some(Dialect::Openai), Some(Dialect::Anthropic)] {
            let Ok(doc) = Document::parse(value.clone(), format) else {
                continue;
            };
            let _findings = check(&doc);
            let _count = count(&doc, &Model::default());
        }
    }

    /// Where message `i` of `doc` is, as a finding's jq-style path starts.
    fn message_path(doc: &Document, i: usize) -> String {
        match doc.body() {
            Some(_) => format!(".messages[{i}]"),
            None => format!(".[{i}]"),
        }
    }

    fn config() -> Config {
        Config {
            cases: 64,
            failure_persistence: None,
            ..Config::default()
        }
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn arbitrary_json_never_panics(value in json_value()) {
            exercise(&value);
        }

        #[test]
        fn message_like_documents_never_panic(value in document()) {
            exercise(&value);
        }

        #[test]
        fn check_findings_point_into_the_document(value in document()) {
            if let Ok(doc) = Document::parse(value.clone(), None) {
                for f in check(&doc) {
                    if let Some(i) = f.index {
                        prop_assert!(i < doc.messages().len(), "finding for message {} of {}", i, doc.messages().len());
                        prop_assert!(f.path.starts_with(&message_path(&doc, i)), "path {:?} for message {}", f.path, i);
                    }
                }
            }
        }
    }
}
