//! The tiktoken-rs baseline of `bench/run.sh` (not part of ctx).
//!
//!   tiktoken_baseline chat FILE
//!       Whole-process baseline for `ctx count FILE`: builds tiktoken-rs's o200k_base and counts
//!       every string a chat message carries (role, name, content, text parts, tool-call names
//!       and arguments). Prints the token total.
//!   tiktoken_baseline text FILE ENCODING RUNS
//!       Counts FILE's text with ctx's counter and with tiktoken-rs, RUNS times each after one
//!       warm-up (so loading the encodings is not timed), checks that the counts are identical,
//!       and prints `tokens ctx_ns tiktoken_ns` (median nanoseconds).

// A benchmark helper whose stdout bench/run.sh always reads: println! is fine here.
#![allow(clippy::print_stdout)]

use std::time::Instant;

use serde_json::Value;
use tiktoken_rs::CoreBPE;

fn bpe(encoding: &str) -> CoreBPE {
    match encoding {
        "o200k_base" => tiktoken_rs::o200k_base(),
        "o200k_harmony" => tiktoken_rs::o200k_harmony(),
        "cl100k_base" => tiktoken_rs::cl100k_base(),
        "p50k_base" => tiktoken_rs::p50k_base(),
        "r50k_base" => tiktoken_rs::r50k_base(),
        other => panic!("unknown encoding {other}"),
    }
    .expect("tiktoken-rs builds its encodings")
}

fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "type" | "id" | "tool_call_id"))
            .for_each(|(_, x)| strings(x, out)),
        _ => {}
    }
}

fn median(mut v: Vec<u128>) -> u128 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("chat") => {
            let text = std::fs::read_to_string(&args[2]).expect("readable file");
            let doc: Value = serde_json::from_str(&text).expect("JSON");
            let messages = doc.get("messages").unwrap_or(&doc);
            let bpe = bpe("o200k_base");
            let mut parts = Vec::new();
            strings(messages, &mut parts);
            let total: usize = parts.iter().map(|s| bpe.encode_ordinary(s).len() + 3).sum();
            println!("{total}");
        }
        Some("text") => {
            let text = std::fs::read_to_string(&args[2]).expect("readable file");
            let encoding: ctx::Encoding = args[3].parse().expect("known encoding");
            let runs: usize = args.get(4).and_then(|r| r.parse().ok()).unwrap_or(5);
            let bpe = bpe(&args[3]);
            let ours = encoding.count(&text);
            let theirs = bpe.encode_ordinary(&text).len();
            if ours != theirs {
                eprintln!("counts differ: ctx {ours}, tiktoken-rs {theirs}");
                std::process::exit(1);
            }
            let time = |f: &dyn Fn() -> usize| -> u128 {
                median(
                    (0..runs)
                        .map(|_| {
                            let t = Instant::now();
                            std::hint::black_box(f());
                            t.elapsed().as_nanos()
                        })
                        .collect(),
                )
            };
            let ctx_ns = time(&|| encoding.count(&text));
            let base_ns = time(&|| bpe.encode_ordinary(&text).len());
            println!("{ours} {ctx_ns} {base_ns}");
        }
        _ => {
            eprintln!("usage: tiktoken_baseline chat FILE | text FILE ENCODING RUNS");
            std::process::exit(2);
        }
    }
}
