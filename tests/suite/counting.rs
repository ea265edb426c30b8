//! Counting against published numbers and over the corpus (tests/corpus), in one process (one encoder
//! per encoding for the whole file, so the sweep stays fast on a 2-core CI machine).

use crate::common::{corpus, corpus_files};
use crate::isolated;

use std::path::Path;

use ctx::{Document, Model, Severity, check};
use serde_json::{Value, json};

/// `value`'s count as `model` (else the body's model) sees it: (tokens, exact).
fn count_with(value: Value, model: Option<&str>) -> (usize, bool) {
    let doc = Document::parse(value, None).unwrap();
    let model = model.map_or_else(Model::default, Model::named);
    let c = ctx::count(&doc, &model).unwrap();
    (c.tokens, c.exact)
}

fn data(name: &str) -> Value {
    let text = std::fs::read_to_string(Path::new("tests/data").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `file` (tests/data) counted as each model: exactly the prompt tokens the API reported.
fn assert_published(file: &str, published: &[(&str, usize)]) {
    let value = data(file);
    for &(model, api) in published {
        assert_eq!(
            count_with(value.clone(), Some(model)),
            (api, true),
            "{file} as {model}"
        );
    }
}

/// OpenAI cookbook "How to count tokens with tiktoken", §6: prompt tokens reported by the API.
#[test]
fn chat_example_matches_openai_published_counts() {
    let published = [
        ("gpt-3.5-turbo-0301", 127),
        ("gpt-3.5-turbo", 129),
        ("gpt-4-0613", 129),
        ("gpt-4", 129),
        ("gpt-4o", 124),
        ("gpt-4o-mini", 124),
    ];
    assert_published("cookbook_chat.json", &published);
}

/// The same cookbook, §7: the tool-definition example.
#[test]
fn tools_example_matches_openai_published_counts() {
    let published = [
        ("gpt-3.5-turbo", 105),
        ("gpt-4", 105),
        ("gpt-4o", 101),
        ("gpt-4o-mini", 101),
    ];
    assert_published("cookbook_tools_body.json", &published);
}

#[test]
fn model_from_the_body_selects_the_encoding() {
    let mut body = json!({"model": "gpt-4", "messages": data("cookbook_chat.json")});
    assert_eq!(count_with(body.clone(), None).0, 129);
    body["model"] = json!("gpt-4o-2024-08-06");
    assert_eq!(count_with(body, None).0, 124);
}

#[test]
fn images_are_priced_from_their_real_size() {
    // A 1x1 PNG as a data: URL: one tile (85 + 170) for gpt-4o, base cost only at low detail.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    let msg = |detail: &str| {
        json!([{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}"), "detail": detail}}
        ]}])
    };
    let base = count_with(json!([{"role": "user", "content": []}]), Some("gpt-4o")).0;
    assert_eq!(count_with(msg("high"), Some("gpt-4o")), (base + 255, true));
    assert_eq!(count_with(msg("low"), Some("gpt-4o")), (base + 85, true));
    // A remote URL has no known size: the default size, and the count is an estimate.
    let remote = json!([{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    ]}]);
    assert_eq!(count_with(remote, Some("gpt-4o")), (base + 765, false));
}

#[test]
fn every_corpus_file_counts_and_only_irregular_ones_have_errors() {
    for (path, value, doc) in corpus() {
        let (tokens, _) = count_with(value, None);
        assert!(tokens > 0, "{}", path.display());
        let errors: Vec<_> = check(&doc)
            .into_iter()
            .filter(|f| f.severity == Severity::Error)
            .collect();
        let irregular = path.components().any(|c| c.as_os_str() == "irregular");
        let name = path.file_name().unwrap().to_str().unwrap();
        let expected: &[&str] = match name {
            "glaive_zh_orphan_observation.json" => &["missing-result-id", "orphan-result"],
            "openai_cookbook_drone_double_encoded_args.json" => &["invalid-arguments"],
            "sweagent_raw_tool_call_ids_plural.json" => &["missing-result-id", "unanswered-call"],
            _ => &[],
        };
        let mut codes: Vec<&str> = errors.iter().map(|f| f.code).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes, expected, "{}: {errors:?}", path.display());
        if !irregular {
            assert!(errors.is_empty(), "{}", path.display());
        }
    }
}

#[test]
fn corpus_dialects_are_detected() {
    for (path, _, doc) in corpus() {
        let in_anthropic = path.components().any(|c| c.as_os_str() == "anthropic");
        assert_eq!(
            doc.dialect() == ctx::Dialect::Anthropic,
            in_anthropic,
            "{}",
            path.display()
        );
    }
}

/// All corpus files as one JSON Lines stream: one report per document, in order, with the
/// same totals as counting each file alone.
#[test]
fn json_lines_give_one_report_per_document_in_order() {
    let files = corpus_files();
    let mut stream = String::new();
    let mut expected = Vec::new();
    for path in &files {
        let value: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        stream.push_str(&serde_json::to_string(&value).unwrap());
        stream.push('\n');
        expected.push(count_with(value, None).0);
    }
    let out = run_ctx(&["count", "--output", "total"], &stream);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(got, expected);
}

fn run_ctx(args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = isolated::command()
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin_pipe = child.stdin.take().unwrap();
    let input = stdin.to_string();
    let writer = std::thread::spawn(move || stdin_pipe.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    out
}
