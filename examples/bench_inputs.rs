//! Writes the benchmark inputs of `bench/run.sh` into a directory, deterministically (a fixed
//! pseudo-random sequence, no clock, no network): the same bytes on every machine.
//!
//!   cargo run --release --example bench_inputs -- target/bench
//!
//! Files: `chat_20k.json` (a 20 KB tool-using chat), `session_10k.json` (a 10,000-message agent
//! session), `batch.jsonl` (about 100 MB of JSON Lines conversations), `text_*.txt` (prose, code,
//! JSON tool output and CJK, about 1 MB each, for counting throughput), `run_*.json` (a
//! one-message document holding a 1 MB run of one character or of whitespace), `run16m_*.json`
//! and `run64m_*.json` (one-message documents of 16 and 64 MiB that are one run of a letter,
//! spaces, newlines, digits or a CJK character, for peak memory), and `messages_*.json` (bare
//! arrays of 1, 100,000 and 1,000,000 tiny messages, for the memory each message costs);
//! `responses_20k.json` and `responses_session_10k.json` are the first two as OpenAI Responses
//! bodies (a reasoning item with 1 KB of encrypted content before each turn's calls).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use serde_json::{Value, json};

/// A small deterministic generator (64-bit LCG, high bits).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "the",
    "agent",
    "reads",
    "file",
    "and",
    "runs",
    "tests",
    "before",
    "it",
    "changes",
    "anything",
    "configuration",
    "parser",
    "returns",
    "error",
    "when",
    "input",
    "is",
    "empty",
    "because",
    "we",
    "should",
    "check",
    "length",
    "first",
    "then",
    "update",
    "documentation",
    "user",
    "asked",
    "for",
    "a",
    "refund",
    "flight",
    "reservation",
    "baggage",
    "policy",
    "allows",
    "cancellation",
    "within",
    "hours",
    "booking",
    "Monday",
    "Tuesday",
    "however",
    "I'll",
    "don't",
    "it's",
    "we've",
    "they're",
    "2024-05-15",
    "12:30",
    "#4521",
    "3.14",
    "1,250",
];

const CODE: &[&str] = &[
    "fn parse_header(input: &str) -> Result<Header, Error> {\n",
    "    let (name, value) = input.split_once(':').ok_or(Error::Missing)?;\n",
    "    if value.trim().is_empty() {\n        return Err(Error::Empty(name.to_string()));\n    }\n",
    "    for (i, line) in lines.iter().enumerate() {\n",
    "        total += line.len() * 2 + offset[i];\n",
    "    }\n    Ok(Header { name: name.into(), value: value.trim().into() })\n}\n\n",
    "def test_parse_duration():\n    assert parse_duration('1h 30m') == 5400\n\n",
    "    self.cache = {k: v for k, v in items if v is not None}  # TODO: evict\n",
    "const MAX_RETRIES = 5;\nexport async function fetchUser(id) {\n  return await api.get(`/users/${id}`);\n}\n",
];

const CJK: &[&str] = &[
    "我们",
    "需要",
    "检查",
    "文件",
    "的",
    "内容",
    "然后",
    "运行",
    "测试",
    "。",
    "，",
    "数据",
    "用户",
    "请求",
    "退款",
    "航班",
    "预订",
    "東京",
    "から",
    "大阪",
    "まで",
    "の",
    "新幹線",
    "です",
    "ます",
    "한국어",
    "문장",
    "입니다",
    "テスト",
    "サーバー",
    "错误",
    "返回",
];

fn prose(r: &mut Rng, bytes: usize) -> String {
    let mut s = String::new();
    while s.len() < bytes {
        let n = 6 + r.below(14);
        for k in 0..n {
            if k > 0 {
                s.push(' ');
            }
            s.push_str(r.pick(WORDS));
        }
        s.push_str(if r.below(5) == 0 { ".\n" } else { ". " });
    }
    s
}

fn code(r: &mut Rng, bytes: usize) -> String {
    let mut s = String::new();
    while s.len() < bytes {
        s.push_str(r.pick(CODE));
    }
    s
}

fn json_output(r: &mut Rng, bytes: usize) -> String {
    let mut s = String::from("[");
    let mut i = 0;
    while s.len() < bytes {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(
            s,
            "{{\"id\":{},\"name\":\"{}_{}\",\"price\":{}.{:02},\"tags\":[\"{}\",\"{}\"],\"in_stock\":{}}}",
            10_000 + r.below(90_000),
            r.pick(WORDS),
            r.below(100),
            r.below(1000),
            r.below(100),
            r.pick(WORDS),
            r.pick(WORDS),
            r.below(2) == 0
        );
        i += 1;
    }
    s.push(']');
    s
}

fn cjk(r: &mut Rng, bytes: usize) -> String {
    let mut s = String::new();
    while s.len() < bytes {
        s.push_str(r.pick(CJK));
        if r.below(12) == 0 {
            s.push('\n');
        }
    }
    s
}

/// An OpenAI agent session: a system prompt, the task, then exchanges (an assistant tool call
/// and its result, sometimes parallel) and assistant notes, until `messages` messages.
fn session(r: &mut Rng, messages: usize, result_bytes: usize) -> Value {
    let mut msgs = vec![
        json!({"role": "system", "content": prose(r, 600)}),
        json!({"role": "user", "content": prose(r, 200)}),
    ];
    let mut call = 0;
    while msgs.len() < messages {
        match r.below(4) {
            0 if msgs.len() + 1 < messages => {
                msgs.push(json!({"role": "assistant", "content": prose(r, 150)}));
            }
            _ => {
                let parallel = if r.below(5) == 0 { 2 } else { 1 };
                if msgs.len() + 1 + parallel > messages {
                    msgs.push(json!({"role": "assistant", "content": prose(r, 80)}));
                    continue;
                }
                let calls: Vec<Value> = (0..parallel)
                    .map(|k| {
                        json!({"id": format!("call_{}", call + k), "type": "function", "function": {
                            "name": r.pick(&["read_file", "run_tests", "grep", "list_dir"]),
                            "arguments": format!("{{\"path\":\"src/{}.rs\"}}", r.pick(WORDS))}})
                    })
                    .collect();
                msgs.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
                for k in 0..parallel {
                    let size = result_bytes / 2 + r.below(result_bytes);
                    let content = match r.below(3) {
                        0 => code(r, size),
                        1 => json_output(r, size),
                        _ => prose(r, size),
                    };
                    msgs.push(json!({"role": "tool", "tool_call_id": format!("call_{}", call + k), "content": content}));
                }
                call += parallel;
            }
        }
    }
    json!({"model": "gpt-4o", "messages": msgs})
}

/// A chat body as a Responses body: the system message as `instructions`, typed messages, a
/// reasoning item before each turn's calls, `function_call` and `function_call_output` items.
fn as_responses(chat: &Value) -> Value {
    let msgs = chat["messages"].as_array().unwrap();
    let mut items = Vec::new();
    for (i, m) in msgs.iter().enumerate().skip(1) {
        match (m["role"].as_str().unwrap(), m["tool_calls"].as_array()) {
            ("tool", _) => items.push(json!({"type": "function_call_output",
                "call_id": m["tool_call_id"], "output": m["content"]})),
            ("assistant", Some(calls)) => {
                let blob: String = (0..1024)
                    .map(|k| (b'A' + ((i * 7 + k) % 26) as u8) as char)
                    .collect();
                items.push(
                    json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": [],
                    "encrypted_content": format!("gAAAAA{blob}")}),
                );
                for c in calls {
                    items.push(json!({"type": "function_call", "call_id": c["id"],
                        "name": c["function"]["name"], "arguments": c["function"]["arguments"]}));
                }
            }
            (role, _) => {
                let part = if role == "assistant" {
                    "output_text"
                } else {
                    "input_text"
                };
                items.push(json!({"type": "message", "role": role,
                    "content": [{"type": part, "text": m["content"]}]}));
            }
        }
    }
    json!({"model": "gpt-5", "instructions": msgs[0]["content"], "input": items})
}

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/bench".to_string());
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir)?;
    let mut r = Rng(0x5eed_c7c7);
    let write = |name: &str, bytes: &[u8]| std::fs::write(dir.join(name), bytes);

    // A 20 KB chat (as written, pretty): a few dozen messages with short tool results.
    let mut chat = session(&mut r, 60, 500);
    while serde_json::to_vec_pretty(&chat).unwrap().len() > 20_480 {
        chat["messages"].as_array_mut().unwrap().pop();
        if chat["messages"].as_array().unwrap().last().unwrap()["role"] == "assistant"
            && chat["messages"].as_array().unwrap().last().unwrap()["tool_calls"].is_array()
        {
            chat["messages"].as_array_mut().unwrap().pop();
        }
    }
    write("chat_20k.json", &serde_json::to_vec_pretty(&chat).unwrap())?;
    write(
        "responses_20k.json",
        &serde_json::to_vec_pretty(&as_responses(&chat)).unwrap(),
    )?;

    // A 10,000-message agent session.
    let s = session(&mut r, 10_000, 300);
    write("session_10k.json", &serde_json::to_vec(&s).unwrap())?;
    write(
        "responses_session_10k.json",
        &serde_json::to_vec(&as_responses(&s)).unwrap(),
    )?;

    // About 100 MB of JSON Lines: conversations of 10 to 60 messages.
    let mut batch = Vec::with_capacity(105 << 20);
    while batch.len() < 100 << 20 {
        let n = 10 + r.below(50);
        batch.extend(serde_json::to_vec(&session(&mut r, n, 400)).unwrap());
        batch.push(b'\n');
    }
    write("batch.jsonl", &batch)?;

    // Counting throughput texts.
    write("text_prose.txt", prose(&mut r, 1 << 20).as_bytes())?;
    write("text_code.txt", code(&mut r, 1 << 20).as_bytes())?;
    write("text_json.txt", json_output(&mut r, 1 << 20).as_bytes())?;
    write("text_cjk.txt", cjk(&mut r, 1 << 20).as_bytes())?;

    // Pathological runs.
    let mb = 1 << 20;
    for (name, text) in [
        ("run_a.json", "a".repeat(mb)),
        ("run_spaces.json", " ".repeat(mb)),
        ("run_newlines.json", "\n".repeat(mb)),
        ("run_digits.json", "7".repeat(mb)),
    ] {
        let doc = json!([{"role": "user", "content": text}]);
        write(name, &serde_json::to_vec(&doc).unwrap())?;
    }

    // Documents of 16 and 64 MiB (a little under: a whole number of characters) that are one
    // user message holding one run, written as it is streamed rather than built in memory.
    for mib in [16, 64] {
        for (kind, unit) in [
            ("a", "a"),
            ("spaces", " "),
            ("newlines", "\\n"),
            ("digits", "7"),
            ("cjk", "中"),
        ] {
            let (head, tail) = (r#"[{"role":"user","content":""#, r#""}]"#);
            let units = ((mib << 20) - head.len() - tail.len()) / unit.len();
            let file = std::fs::File::create(dir.join(format!("run{mib}m_{kind}.json")))?;
            let mut out = std::io::BufWriter::new(file);
            out.write_all(head.as_bytes())?;
            let block = unit.repeat(4096);
            for _ in 0..units / 4096 {
                out.write_all(block.as_bytes())?;
            }
            out.write_all(unit.repeat(units % 4096).as_bytes())?;
            out.write_all(tail.as_bytes())?;
            out.flush()?;
        }
    }

    // Tiny messages, alternately the user's and the assistant's.
    for (name, n) in [
        ("messages_1.json", 1),
        ("messages_100k.json", 100_000),
        ("messages_1m.json", 1_000_000),
    ] {
        let mut doc = Vec::with_capacity(n * 34 + 2);
        doc.push(b'[');
        for i in 0..n {
            if i > 0 {
                doc.push(b',');
            }
            doc.extend_from_slice(if i % 2 == 0 {
                br#"{"role":"user","content":"hi"}"#
            } else {
                br#"{"role":"assistant","content":"ok"}"#
            });
        }
        doc.push(b']');
        write(name, &doc)?;
    }
    Ok(())
}
