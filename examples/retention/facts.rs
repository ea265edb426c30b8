//! The key facts of an agent trajectory, annotated by rule, and whether an output still holds
//! them (SPEC §7). Shared by the retention benchmark (`examples/retention`) and its test
//! (`tests/suite/retention.rs`); docs/retention.md states the rules in words.
//!
//! A fact is a piece of text. It is retained when it appears, verbatim, anywhere in the text of
//! the output: every string in the output, plus the strings inside tool-call arguments that
//! are JSON encoded as a string (so that `{"command": "pytest -x"}` holds `pytest -x`).
#![allow(dead_code)]

use serde_json::Value;

/// What a fact is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// The task: the first user message that is not only tool results.
    Task,
    /// The newest tool results (up to three), verbatim.
    Newest,
    /// Files created or edited, and test commands run.
    Artifact,
    /// Lines of tool output that report an error.
    Error,
    /// Lines of tool output that report a test outcome.
    Outcome,
}

impl Category {
    pub const ALL: [Category; 5] = [
        Category::Task,
        Category::Newest,
        Category::Artifact,
        Category::Error,
        Category::Outcome,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Category::Task => "task",
            Category::Newest => "newest",
            Category::Artifact => "artifacts",
            Category::Error => "errors",
            Category::Outcome => "outcomes",
        }
    }
}

/// One fact: its category and the text that must survive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    pub category: Category,
    pub text: String,
    /// Index of the first message it was read from.
    pub message: usize,
}

/// A tool result (or, in a text-only agent, an observation) of the input.
#[derive(Clone, Debug)]
pub struct Observation {
    /// Index of the message holding it.
    pub message: usize,
    pub text: String,
}

/// What the rules read from a trajectory.
#[derive(Clone, Debug, Default)]
pub struct Annotation {
    pub facts: Vec<Fact>,
    /// The newest observation, if any (for the "newest result verbatim" measure).
    pub newest: Option<Observation>,
    /// Whether the trajectory carries structured tool results (else observations are the user
    /// messages after the first assistant message: a text-only ReAct agent).
    pub structured: bool,
}

fn messages(doc: &Value) -> &[Value] {
    match doc {
        Value::Array(a) => a,
        Value::Object(o) => o
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice),
        _ => &[],
    }
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// The plain text of a content value: a string, or the text of its parts/blocks (tool_result
/// blocks included).
fn content_text(c: &Value) -> String {
    match c {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let mut out = String::new();
            for p in parts {
                let t = match p.get("type").and_then(Value::as_str) {
                    Some("tool_result") => p.get("content").map(content_text).unwrap_or_default(),
                    _ => p
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                };
                if !t.is_empty() {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(&t);
                }
            }
            out
        }
        _ => String::new(),
    }
}

/// Tool results of message `m` (OpenAI tool/function messages; Anthropic tool_result blocks).
fn tool_results(m: &Value) -> Vec<String> {
    match role(m) {
        "tool" | "function" => vec![m.get("content").map(content_text).unwrap_or_default()],
        "user" => m
            .get("content")
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some("tool_result"))
                    .map(|p| p.get("content").map(content_text).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The task: the first user message that is not only tool results (its index).
pub fn task_at(ms: &[Value]) -> Option<usize> {
    ms.iter()
        .position(|m| role(m) == "user" && !only_tool_results(m))
}

fn only_tool_results(m: &Value) -> bool {
    m.get("content")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            !parts.is_empty()
                && parts
                    .iter()
                    .all(|p| p.get("type").and_then(Value::as_str) == Some("tool_result"))
        })
}

/// The actions of an assistant message: tool-call arguments (their string values, and the
/// whole arguments when they are not JSON) and, for text agents, the commands in its text
/// (fenced code blocks, and `Action:` lines).
fn actions(m: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
        for c in calls {
            if let Some(a) = c.pointer("/function/arguments") {
                push_args(a, &mut out);
            }
        }
    }
    if let Some(a) = m.pointer("/function_call/arguments") {
        push_args(a, &mut out);
    }
    if let Some(parts) = m.get("content").and_then(Value::as_array) {
        for p in parts {
            if p.get("type").and_then(Value::as_str) == Some("tool_use") {
                if let Some(i) = p.get("input") {
                    push_args(i, &mut out);
                }
            }
        }
    }
    let text = m.get("content").map(content_text).unwrap_or_default();
    let mut in_block = false;
    let mut block = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            if in_block && !block.trim().is_empty() {
                out.push(block.trim().to_string());
            }
            block.clear();
            in_block = !in_block;
            continue;
        }
        if in_block {
            block.push_str(line);
            block.push('\n');
        } else if let Some(a) = line.trim().strip_prefix("Action:") {
            out.push(a.trim().to_string());
        }
    }
    out
}

fn push_args(a: &Value, out: &mut Vec<String>) {
    match a {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => push_args(&v, out),
            _ => out.push(s.clone()),
        },
        Value::Object(o) => {
            for v in o.values() {
                match v {
                    Value::String(s) => out.push(s.clone()),
                    Value::Object(_) => push_args(v, out),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// Longest fact text kept whole; longer lines are shortened to their first `MAX_LINE` chars
/// (a placeholder or a summary that keeps a long line's start keeps the fact: it is how an
/// engineer recognises an error or a test summary).
const MAX_LINE: usize = 80;

/// A line as a fact: without the rules and padding around it (`==== 3 passed in 0.1s ====`
/// is the fact `3 passed in 0.1s`), at most `MAX_LINE` chars.
fn clip_line(s: &str) -> String {
    let t = s.trim_matches(|c: char| c.is_whitespace() || matches!(c, '=' | '-' | '*' | '#' | '_'));
    match t.char_indices().nth(MAX_LINE) {
        Some((i, _)) => t[..i].to_string(),
        None => t.to_string(),
    }
}

/// Lines of tool output that report an error (by rule: a Python exception line, `error:`,
/// `fatal:`, `command not found`, `No such file or directory`, a non-zero exit status).
pub fn is_error_line(line: &str) -> bool {
    let l = line.trim();
    if l.is_empty() || l.len() < 6 {
        return false;
    }
    let lower = l.to_ascii_lowercase();
    if lower.starts_with("traceback (most recent call last)") {
        return true;
    }
    // `NameError: name 'x' is not defined`, `E   AssertionError: ...`, `- E999 SyntaxError: ...`
    let exception = l.split_whitespace().any(|w| {
        w.strip_suffix(':').is_some_and(|name| {
            (name.ends_with("Error") || name.ends_with("Exception"))
                && name.len() > 5
                && name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
        })
    });
    if exception {
        return true;
    }
    lower.starts_with("error:")
        || lower.starts_with("error ")
        || lower.starts_with("fatal:")
        || lower.contains("command not found")
        || lower.contains("no such file or directory")
        || nonzero_status(&lower)
}

fn nonzero_status(lower: &str) -> bool {
    for key in [
        "exit code",
        "exit status",
        "exited with code",
        "returncode>",
        "return code",
    ] {
        if let Some(at) = lower.find(key) {
            let rest = lower[at + key.len()..].trim_start_matches([':', ' ', '=']);
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if !digits.is_empty() && digits.parse::<u64>().is_ok_and(|d| d != 0) {
                return true;
            }
        }
    }
    false
}

/// Lines of tool output that report a test outcome (pytest and unittest summaries, `PASSED`/
/// `FAILED` test lines, cargo/go/jest summaries).
pub fn is_outcome_line(line: &str) -> bool {
    let l = line.trim();
    if l.len() < 4 {
        return false;
    }
    let lower = l.to_ascii_lowercase();
    let counted = |word: &str| {
        lower.match_indices(word).any(|(i, _)| {
            lower[..i]
                .trim_end()
                .chars()
                .last()
                .is_some_and(|c| c.is_ascii_digit())
        })
    };
    (counted(" passed") || counted(" failed") || counted(" error") && lower.contains(" in "))
        || lower.starts_with("ran ") && lower.contains(" test")
        || lower == "ok"
        || lower.starts_with("ok (")
        || lower.starts_with("failed (")
        || lower.starts_with("test result:")
        || lower.starts_with("tests:")
        || (l.contains("::") && l.contains(" FAILED"))
        || l.starts_with("FAILED ")
        || l.starts_with("--- FAIL")
        || l.starts_with("--- PASS")
}

/// Files a shell command creates or edits: `sed -i … FILE`, `> FILE`, `>> FILE`, `tee FILE`,
/// `touch FILE`, `git apply`/`patch` targets are not knowable and are skipped.
pub fn edited_by_shell(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in cmd.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for (k, w) in words.iter().enumerate() {
            let next = words.get(k + 1).copied();
            let target = match *w {
                ">" | ">>" => next,
                "tee" | "touch" => next.filter(|n| !n.starts_with('-')),
                w if w.starts_with(">>") && w.len() > 2 => Some(&w[2..]),
                w if w.starts_with('>') && w.len() > 1 && !w.starts_with(">&") => Some(&w[1..]),
                _ => None,
            };
            if let Some(t) = target {
                push_path(t, &mut out);
            }
        }
        if words.first() == Some(&"sed") && words.iter().any(|w| w.starts_with("-i")) {
            if let Some(last) = words.last() {
                push_path(last, &mut out);
            }
        }
        // SWE-agent's file commands.
        if matches!(words.first(), Some(&"create")) {
            if let Some(p) = words.get(1) {
                push_path(p, &mut out);
            }
        }
    }
    out
}

fn push_path(p: &str, out: &mut Vec<String>) {
    let p = p.trim_matches(['"', '\'', ';', '&', '|', ')', '(']);
    let looks_like_path = p.len() >= 3
        && !p.starts_with('$')
        && !p.starts_with('-')
        && p != "/dev/null"
        && !p.starts_with("/dev/")
        && !p.starts_with("&")
        && (p.contains('/') || p.contains('.'))
        && p.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '~'));
    if looks_like_path && !out.iter().any(|o| o == p) {
        out.push(p.to_string());
    }
}

/// The file an editor observation names as open: `[File: PATH (N lines total)]` or
/// `(Open file: PATH)`.
fn named_open_file(text: &str) -> Option<String> {
    let mut found = None;
    for line in text.lines() {
        let l = line.trim();
        let path = l
            .strip_prefix("[File: ")
            .and_then(|r| r.split_once(" (").map(|(p, _)| p))
            .or_else(|| {
                l.strip_prefix("(Open file: ")
                    .and_then(|r| r.strip_suffix(')'))
            });
        if let Some(p) = path {
            if p != "n/a" && !p.is_empty() {
                found = Some(p.to_string());
            }
        }
    }
    found
}

/// Test commands: the first line of an action that runs a test runner or a Python script (an
/// agent's reproduction script is its test).
pub fn test_command(action: &str) -> Option<String> {
    let first = action.lines().find(|l| !l.trim().is_empty())?.trim();
    let lower = first.to_ascii_lowercase();
    let runs_tests = [
        "pytest",
        "python -m pytest",
        "python3 -m pytest",
        "-m unittest",
        "npm test",
        "npm run test",
        "yarn test",
        "cargo test",
        "go test",
        "tox",
        "make test",
        "runtests",
        "nosetests",
        "jest",
    ]
    .iter()
    .any(|k| lower.contains(k))
        || (lower.starts_with("python") && lower.contains(".py"));
    runs_tests.then(|| clip_line(first))
}

/// Annotates a trajectory's key facts by rule.
pub fn annotate(doc: &Value) -> Annotation {
    let ms = messages(doc);
    let mut facts: Vec<Fact> = Vec::new();
    let add = |category: Category, text: String, message: usize, facts: &mut Vec<Fact>| {
        let text = text.trim().to_string();
        if text.len() >= 3 && !facts.iter().any(|f| f.text == text) {
            facts.push(Fact {
                category,
                text,
                message,
            });
        }
    };
    let structured = ms.iter().any(|m| !tool_results(m).is_empty());
    // The task.
    let task = task_at(ms);
    if let Some(t) = task {
        add(
            Category::Task,
            content_text(ms[t].get("content").unwrap_or(&Value::Null)),
            t,
            &mut facts,
        );
    }
    // Observations: structured results, or (text agents) the user messages after the first
    // assistant message.
    let first_assistant = ms.iter().position(|m| role(m) == "assistant");
    let mut observations: Vec<Observation> = Vec::new();
    for (i, m) in ms.iter().enumerate() {
        if structured {
            for text in tool_results(m) {
                observations.push(Observation { message: i, text });
            }
        } else if role(m) == "user" && Some(i) != task && first_assistant.is_some_and(|a| i > a) {
            observations.push(Observation {
                message: i,
                text: content_text(m.get("content").unwrap_or(&Value::Null)),
            });
        }
    }
    // Artifacts: files created or edited, test commands. Editors that edit "the open file"
    // (SWE-agent's `edit N:M`, search/replace tools without a path) edit the file the latest
    // observation names as open.
    let mut open_file: Option<String> = None;
    for (i, m) in ms.iter().enumerate() {
        if role(m) != "assistant" {
            for o in observations.iter().filter(|o| o.message == i) {
                if let Some(f) = named_open_file(&o.text) {
                    open_file = Some(f);
                }
            }
            continue;
        }
        for a in actions(m) {
            if let Some(t) = test_command(&a) {
                add(Category::Artifact, t, i, &mut facts);
            }
            for p in edited_by_shell(&a) {
                add(Category::Artifact, p, i, &mut facts);
            }
            if a.trim_start().starts_with("edit ") {
                if let Some(f) = &open_file {
                    add(Category::Artifact, f.clone(), i, &mut facts);
                }
            }
        }
        // Edit tools: a `path`/`file_path`/`filename` argument of a call that writes.
        let mut calls: Vec<(String, Value)> = Vec::new();
        if let Some(cs) = m.get("tool_calls").and_then(Value::as_array) {
            for c in cs {
                let name = c
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let args = c
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .and_then(|s| serde_json::from_str(s).ok())
                    .unwrap_or(Value::Null);
                calls.push((name, args));
            }
        }
        if let Some(parts) = m.get("content").and_then(Value::as_array) {
            for p in parts {
                if p.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                    calls.push((
                        name.to_string(),
                        p.get("input").cloned().unwrap_or_default(),
                    ));
                }
            }
        }
        for (name, args) in calls {
            let n = name.to_ascii_lowercase();
            let command = args.get("command").and_then(Value::as_str).unwrap_or("");
            let writes = ["edit", "write", "create", "replace", "patch", "insert"]
                .iter()
                .any(|k| n.contains(k))
                || matches!(command, "create" | "str_replace" | "insert" | "edit");
            if writes {
                let mut named = false;
                for key in ["path", "file_path", "filename", "file"] {
                    if let Some(p) = args.get(key).and_then(Value::as_str) {
                        add(Category::Artifact, p.to_string(), i, &mut facts);
                        named = true;
                    }
                }
                if !named {
                    if let Some(f) = &open_file {
                        add(Category::Artifact, f.clone(), i, &mut facts);
                    }
                }
            }
        }
    }
    // Errors and outcomes, from the observations' lines.
    for o in &observations {
        for line in o.text.lines() {
            if is_outcome_line(line) {
                add(Category::Outcome, clip_line(line), o.message, &mut facts);
            } else if is_error_line(line) {
                add(Category::Error, clip_line(line), o.message, &mut facts);
            }
        }
    }
    // The newest results, verbatim (up to three).
    for o in observations.iter().rev().take(3) {
        add(Category::Newest, o.text.clone(), o.message, &mut facts);
    }
    Annotation {
        facts,
        newest: observations.last().cloned(),
        structured,
    }
}

/// The text of ctx's summary message in an output, if it holds one.
pub fn summary_text(doc: &Value) -> Option<String> {
    messages(doc)
        .iter()
        .map(|m| content_text(m.get("content").unwrap_or(&Value::Null)))
        .find(|t| t.starts_with("[ctx summary of "))
}

/// All the text of an output: every string, and the strings inside JSON-encoded arguments.
pub fn output_text(doc: &Value) -> String {
    let mut out = String::new();
    collect(doc, &mut out);
    out
}

fn collect(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
            if s.starts_with('{') {
                if let Ok(inner @ Value::Object(_)) = serde_json::from_str::<Value>(s) {
                    collect(&inner, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
        // Block and part types are not text (and would split a multi-part text).
        Value::Object(o) => o
            .iter()
            .filter(|(k, v)| !(k.as_str() == "type" && v.is_string()))
            .for_each(|(_, x)| collect(x, out)),
        _ => {}
    }
}

/// Which facts an output holds.
pub fn retained(facts: &[Fact], output: &Value) -> Vec<bool> {
    let text = output_text(output);
    facts.iter().map(|f| text.contains(&f.text)).collect()
}

/// What ctx must keep whatever the budget: system and developer messages, the task and the
/// newest unit (the last message, with the call it answers when it is a tool result). A budget
/// below its count is infeasible: no output can keep ctx's guarantees.
pub fn must_keep(doc: &Value) -> Value {
    let ms = messages(doc);
    let task = task_at(ms);
    let mut newest = ms.len().saturating_sub(1);
    let answers = |m: &Value| !tool_results(m).is_empty() && role(m) != "assistant";
    while newest > 0 && ms.get(newest).is_some_and(answers) {
        newest -= 1;
    }
    let kept: Vec<Value> = ms
        .iter()
        .enumerate()
        .filter(|(i, m)| {
            matches!(role(m), "system" | "developer") || Some(*i) == task || *i >= newest
        })
        .map(|(_, m)| m.clone())
        .collect();
    with_messages(doc, kept)
}

/// `doc` with `kept` as its messages (a body keeps its other keys).
fn with_messages(doc: &Value, kept: Vec<Value>) -> Value {
    match doc {
        Value::Object(o) => {
            let mut o = o.clone();
            o.insert("messages".into(), Value::Array(kept));
            Value::Object(o)
        }
        _ => Value::Array(kept),
    }
}

/// The naive baseline: drops the oldest messages (system messages stay) until `fits` says the
/// rest fits. Returns the shortened document; it may break tool pairs, as naive trimming does.
pub fn drop_oldest(doc: &Value, fits: impl Fn(&Value) -> bool) -> Value {
    let ms = messages(doc);
    let system: Vec<usize> = ms
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(role(m), "system" | "developer"))
        .map(|(i, _)| i)
        .collect();
    let others: Vec<usize> = (0..ms.len()).filter(|i| !system.contains(i)).collect();
    let build = |drop: usize| -> Value {
        let kept: Vec<Value> = ms
            .iter()
            .enumerate()
            .filter(|(i, _)| system.contains(i) || others[drop..].contains(i))
            .map(|(_, m)| m.clone())
            .collect();
        with_messages(doc, kept)
    };
    // The fewest dropped that fits (counts shrink as messages go).
    let (mut lo, mut hi) = (0, others.len());
    if fits(&build(0)) {
        return build(0);
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if fits(&build(mid)) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    build(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_and_outcome_lines() {
        assert!(is_error_line("SyntaxError: invalid syntax"));
        assert!(is_error_line("E       AssertionError: assert 1 == 2"));
        assert!(is_error_line("bash: pytest: command not found"));
        assert!(is_error_line("<returncode>127</returncode>"));
        assert!(!is_error_line("<returncode>0</returncode>"));
        assert!(is_outcome_line("===== 3 failed, 12 passed in 0.52s ====="));
        assert!(is_outcome_line("Ran 4 tests in 0.001s"));
        assert!(!is_outcome_line("the tests passed"));
        assert_eq!(
            edited_by_shell("sed -i 's/a/b/' src/x.py\ncat > tests/t.py <<'EOF'"),
            vec!["src/x.py", "tests/t.py"]
        );
    }
}
