//! `--encoding approx` must not undercount (SPEC §3: budgets rely on it): over the corpus it is
//! at least the exact `o200k_base` and `cl100k_base` count of every text, every message and
//! every document. Its bias, by kind of text, is printed by `approx_bias_by_kind_of_text`
//! (`cargo test --lib tests::approx:: -- --nocapture`) and recorded in docs/counting.md.

use super::common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::counter::{Counter, Notes};
use crate::document::Document;
use crate::settings::Settings;
use crate::tokenizer::Encoding;
use common::{corpus_files, read_json};
use serde_json::Value;

const EXACT: [Encoding; 2] = [Encoding::O200kBase, Encoding::Cl100kBase];

/// Every conversation of the corpus and of tests/data, and the measured requests' texts.
fn documents() -> Vec<(PathBuf, Value)> {
    let mut files = corpus_files();
    for dir in ["tests/data", "tests/data/measured"] {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 40, "the corpus is missing");
    files
        .into_iter()
        .map(|p| {
            let v = read_json(&p);
            (p, v)
        })
        .collect()
}

/// The strings ctx counts as text: every string but binary payloads (as the counter does).
fn texts<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    const BINARY: &[&str] = &[
        "data",
        "signature",
        "encrypted_content",
        "encrypted_index",
        "file_data",
    ];
    match v {
        Value::String(s) if !s.starts_with("data:") => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| texts(x, out)),
        Value::Object(o) => {
            for (k, x) in o {
                if !BINARY.contains(&k.as_str()) {
                    texts(x, out);
                }
            }
        }
        _ => {}
    }
}

fn settings(doc: &Document, encoding: Encoding) -> Settings {
    common::settings_with(doc, Some(encoding))
}

#[test]
fn approx_is_an_upper_bound_on_every_text_message_and_document() {
    let mut failures = Vec::new();
    for (path, value) in documents() {
        let name = path.display();
        let mut strings = Vec::new();
        texts(&value, &mut strings);
        for s in strings {
            let approx = Encoding::Approx.count(s);
            for e in EXACT {
                let exact = e.count(s);
                if approx < exact {
                    failures.push(format!("{name}: {approx} < {exact} ({e}) for {s:.80?}"));
                }
            }
        }
        let Ok(doc) = Document::parse(value, None) else {
            continue;
        };
        let approx_settings = settings(&doc, Encoding::Approx);
        let approx = Counter::new(&approx_settings, doc.dialect);
        let approx_count = approx.document(&doc).unwrap();
        for e in EXACT {
            let exact_settings = settings(&doc, e);
            let exact = Counter::new(&exact_settings, doc.dialect);
            for (i, m) in doc.messages().iter().enumerate() {
                let a = approx.message(m, &mut Notes::default()).unwrap().total();
                let x = exact.message(m, &mut Notes::default()).unwrap().total();
                if a < x {
                    failures.push(format!("{name}: message {i}: {a} < {x} ({e})"));
                }
            }
            let (a, x) = (approx_count.total(), exact.document(&doc).unwrap().total());
            if a < x {
                failures.push(format!("{name}: document: {a} < {x} ({e})"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} undercounts:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// What kind of text a string is, for the bias table.
fn kind(s: &str) -> &'static str {
    let chars = s.chars().count().max(1);
    let cjk = s
        .chars()
        .filter(|&c| {
            matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x9FFF | 0xAC00..=0xD7AF | 0xFF00..=0xFFEF)
        })
        .count();
    let code = s
        .chars()
        .filter(|c| "{}[]()<>=;:\"'`_/\\|$#*".contains(*c))
        .count();
    if cjk * 5 >= chars {
        "CJK"
    } else if !s.contains(char::is_whitespace) && chars >= 12 {
        "ids, hashes, names"
    } else if code * 12 >= chars || s.contains("\n    ") {
        "code, JSON, logs"
    } else {
        "English prose"
    }
}

/// Over-count of `approx` against each exact encoding, by kind of text: token-weighted mean,
/// and the largest over texts of at least 20 tokens. Also per document. Asserts the bias stays
/// sane (an estimate that doubles English would make budgets useless).
#[test]
fn approx_bias_by_kind_of_text() {
    #[derive(Default)]
    struct Bias {
        texts: usize,
        approx: usize,
        exact: [usize; 2],
        max: [f64; 2],
    }
    let mut by_kind: BTreeMap<&str, Bias> = BTreeMap::new();
    let mut docs = Bias::default();
    for (_, value) in documents() {
        let mut strings = Vec::new();
        texts(&value, &mut strings);
        strings.sort();
        strings.dedup();
        for s in strings {
            let b = by_kind.entry(kind(s)).or_default();
            let a = Encoding::Approx.count(s);
            b.texts += 1;
            b.approx += a;
            for (k, e) in EXACT.iter().enumerate() {
                let x = e.count(s);
                b.exact[k] += x;
                if x >= 20 {
                    b.max[k] = b.max[k].max(a as f64 / x as f64 - 1.0);
                }
            }
        }
        if let Ok(doc) = Document::parse(value, None) {
            let total = |e| {
                let s = settings(&doc, e);
                Counter::new(&s, doc.dialect)
                    .document(&doc)
                    .unwrap()
                    .total()
            };
            let a = total(Encoding::Approx);
            docs.texts += 1;
            docs.approx += a;
            for (k, e) in EXACT.iter().enumerate() {
                let x = total(*e);
                docs.exact[k] += x;
                docs.max[k] = docs.max[k].max(a as f64 / x as f64 - 1.0);
            }
        }
    }
    let pct = |x: f64| format!("{:+.0}%", x * 100.0);
    eprintln!("| text | texts | mean over o200k_base | max | mean over cl100k_base | max |");
    eprintln!("| --- | --- | --- | --- | --- | --- |");
    let rows = by_kind.iter().map(|(k, b)| (*k, b));
    for (name, b) in rows.chain([("whole documents", &docs)]) {
        let mean = |k: usize| b.approx as f64 / b.exact[k] as f64 - 1.0;
        eprintln!(
            "| {name} | {} | {} | {} | {} | {} |",
            b.texts,
            pct(mean(0)),
            pct(b.max[0]),
            pct(mean(1)),
            pct(b.max[1])
        );
        assert!(mean(0) >= 0.0 && mean(1) >= 0.0, "{name} is undercounted");
        if name != "CJK" {
            assert!(
                mean(0) < 0.6 && mean(1) < 0.6,
                "{name}: approx is far over ({})",
                pct(mean(0))
            );
        }
    }
}
