//! Streams of many documents are processed on several threads; the output, the diagnostics, the
//! sidecar files and the exit code must be exactly those of a single thread.

use crate::isolated;

use std::io::Write;
use std::process::Stdio;

use serde_json::{Value, json};

/// A stream of documents of very different sizes (so workers finish out of order), with
/// documents that fail in the middle.
fn stream() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..200usize {
        let doc = match i % 50 {
            7 => json!({"contents": []}), // Gemini: exit 2 for this document
            13 => {
                json!([{"role": "user", "content": "x".repeat(10)}, {"role": "tool", "tool_call_id": "nope", "content": "orphan"}])
            }
            _ => {
                let n = 1 + (i * 7919) % 12;
                let mut msgs = vec![
                    json!({"role": "system", "content": "be brief"}),
                    json!({"role": "user", "content": format!("task {i}")}),
                ];
                for k in 0..n {
                    msgs.push(json!({"role": "assistant", "content": null, "tool_calls": [
                        {"id": format!("c{k}"), "type": "function", "function": {"name": "run", "arguments": "{}"}}]}));
                    msgs.push(json!({"role": "tool", "tool_call_id": format!("c{k}"), "content": format!("output {k} ").repeat(1 + (i * k) % 60)}));
                }
                msgs.push(json!({"role": "assistant", "content": format!("done {i}")}));
                Value::Array(msgs)
            }
        };
        out.extend(serde_json::to_vec(&doc).unwrap());
        out.push(b'\n');
    }
    out
}

fn run(
    args: &[&str],
    input: &[u8],
    report: &std::path::Path,
) -> (Option<i32>, Vec<u8>, String, String) {
    let _ = std::fs::remove_file(report);
    // ctx stops reading at a syntax error, so the write may fail with a broken pipe.
    let out = isolated::output(isolated::command().args(args), input);
    (
        out.status.code(),
        out.stdout,
        String::from_utf8(out.stderr).unwrap(),
        std::fs::read_to_string(report).unwrap_or_default(),
    )
}

#[test]
fn several_threads_give_exactly_the_single_thread_output() {
    let input = stream();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let report = dir.join("parallel-report.jsonl");
    let report_arg = report.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["count", "-c"],
        &["prune", "-c", "--keep", "1", "--report", report_arg],
        &["truncate", "-c", "--budget", "300", "--report", report_arg],
        &["fit", "-c", "--budget", "250", "--report", report_arg],
    ];
    for args in commands {
        let one = run(&[args, &["-j", "1"]].concat(), &input, &report);
        for jobs in ["2", "4"] {
            let many = run(&[args, &["-j", jobs]].concat(), &input, &report);
            assert_eq!(one.0, many.0, "{args:?} -j {jobs}: exit code");
            assert!(one.1 == many.1, "{args:?} -j {jobs}: stdout differs");
            assert_eq!(one.2, many.2, "{args:?} -j {jobs}: stderr");
            assert_eq!(one.3, many.3, "{args:?} -j {jobs}: --report");
        }
        assert_eq!(
            one.0,
            Some(2),
            "{args:?}: the Gemini documents fail with exit 2"
        );
        assert!(!one.1.is_empty());
    }
}

/// A syntax error ends the stream where it is, whatever the workers have already done.
#[test]
fn a_syntax_error_ends_the_stream_at_the_same_place() {
    let mut input = stream();
    input.extend(b"[{\"role\": \"user\", \"content\": \"ok\"}]\n{\"oops\": \n");
    input.extend(stream());
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let report = dir.join("parallel-syntax.jsonl");
    let one = run(&["count", "-c", "-j", "1"], &input, &report);
    let two = run(&["count", "-c", "-j", "2"], &input, &report);
    assert_eq!(one, two);
    let written = serde_json::Deserializer::from_slice(&one.1)
        .into_iter::<Value>()
        .count();
    assert_eq!(
        written,
        200 - 4 + 1,
        "every document before the syntax error"
    );
    assert!(one.2.contains("invalid JSON"), "{}", one.2);
}

/// An agent loop that pipes one conversation at a time gets each answer before it sends the
/// next: documents are grouped for the workers only when more input is already at hand.
#[test]
fn a_document_alone_on_a_pipe_is_answered_at_once() {
    use std::io::{BufRead, BufReader};
    for jobs in ["1", "2"] {
        let mut child = isolated::command()
            .args(["count", "-c", "--output", "total", "-j", jobs])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        for turn in 0..3 {
            let doc = json!([{"role": "user", "content": format!("turn {turn}")}]);
            stdin.write_all(format!("{doc}\n").as_bytes()).unwrap();
            stdin.flush().unwrap();
            // The pipe stays open: the answer must come without more input or an end of input.
            let answer = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| {
                    panic!("-j {jobs}: no answer to document {turn} while the pipe stays open")
                });
            assert!(answer.parse::<u64>().is_ok_and(|t| t > 0), "{answer}");
        }
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}
