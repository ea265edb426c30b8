//! What a message shows an agent did or saw, read from its text: an error, a test run or test
//! outcome, a file edit. `truncate --strategy importance` scores units with these
//! (docs/strategies.md lists every rule).
//!
//! These are heuristics over plain text, tuned on shell and function-calling agent transcripts:
//! they may miss a signal or see one that is not there, and a wrong guess only changes which units
//! are removed first. Each text is scanned once per pattern with a `memchr::memmem` searcher built
//! once, never line by line with allocations, so scoring a 10,000-message document stays linear and cheap next to
//! counting its tokens. This module never changes a message and never counts tokens.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use serde_json::Value;

use crate::dialect::{Field, Piece, Role, calls, pieces};

/// What a message (or a unit, all its messages together) shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Signals {
    /// A result reports a failure: an error flag, a non-zero exit status, an error line.
    pub error: bool,
    /// Tests were run (a test command) or a result reports a test outcome.
    pub test: bool,
    /// A call edits or creates a file.
    pub edit: bool,
}

impl Signals {
    /// Both together: what either shows.
    pub fn or(self, other: Signals) -> Signals {
        Signals {
            error: self.error || other.error,
            test: self.test || other.test,
            edit: self.edit || other.edit,
        }
    }

    /// The signals of one message, in either dialect. What an assistant message does is read
    /// from its tool calls (name and arguments) and, for agents that write their commands as
    /// text, from the fenced code blocks of its text; what an agent saw is read from tool
    /// results and from user messages (text-only agents get their observations as user
    /// messages).
    pub fn of_message(m: &Value) -> Signals {
        let mut s = Signals::default();
        match Role::parse(m.field("role")) {
            Role::Assistant => {
                // The calls the client runs: a server tool's work is not the agent's.
                for c in calls(m).into_iter().filter(|c| !c.server) {
                    s.call(c.name, c.args);
                }
                match m.field("content") {
                    Some(Value::String(t)) => s.code_blocks(t),
                    Some(Value::Array(parts)) => {
                        for (_, piece) in pieces(parts) {
                            if let Piece::Text(t) = piece {
                                s.code_blocks(t)
                            }
                        }
                    }
                    _ => {}
                }
            }
            Role::Tool | Role::Function | Role::User => s.observed(m.field("content")),
            _ => {}
        }
        s
    }

    /// A tool call: its name and its arguments (a JSON string for OpenAI, an object for
    /// Anthropic).
    fn call(&mut self, name: Option<&str>, args: Option<&Value>) {
        let parsed;
        let args = match args {
            Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                Ok(v) => {
                    parsed = v;
                    Some(&parsed)
                }
                Err(_) => args,
            },
            other => other,
        };
        if let Some(name) = name {
            if edit_tool(name, args) {
                self.edit = true;
            }
        }
        if let Some(args) = args {
            for_each_string(args, &mut |t| self.command(t));
        }
    }

    /// A command an agent ran (or any text of a call's arguments).
    fn command(&mut self, text: &str) {
        self.test = self.test || runs_tests(text);
        self.edit = self.edit || edits_files(text);
    }

    /// The fenced code blocks of an assistant's text: the commands of a text-only agent.
    fn code_blocks(&mut self, text: &str) {
        for block in fenced_blocks(text) {
            self.command(block);
            self.edit = self.edit || edit_command(block);
        }
    }

    /// Content an agent read: a tool result, a user message, `tool_result` blocks.
    fn observed(&mut self, content: Option<&Value>) {
        match content {
            Some(Value::String(t)) => self.output(t),
            Some(Value::Array(parts)) => {
                for (_, piece) in pieces(parts) {
                    match piece {
                        Piece::Text(t) => self.output(t),
                        Piece::Result {
                            content, is_error, ..
                        } => {
                            if is_error {
                                self.error = true;
                            }
                            self.observed(content);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    /// The text of a result.
    fn output(&mut self, text: &str) {
        if !(self.error && self.test) {
            let (error, test) = scan_output(text);
            self.error = self.error || error;
            self.test = self.test || test;
        }
    }
}

fn for_each_string(v: &Value, f: &mut impl FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|i| for_each_string(i, f)),
        Value::Object(map) => map.values().for_each(|i| for_each_string(i, f)),
        _ => {}
    }
}

const PHRASES: &[&str] = &[
    "Traceback (most recent call last)",
    "panicked at",
    "command not found",
    "No such file or directory",
    "Permission denied",
    "Segmentation fault",
];

/// Test runners named as a word.
const TEST_RUNNERS: &[&str] = &["tox", "jest", "mocha", "rspec", "phpunit"];

/// Test commands that end in `test` (or `tests`), found from each occurrence of `test`.
const TEST_COMMANDS: &[&str] = &[
    "pytest",
    "py.test",
    "unittest",
    "nosetests",
    "vitest",
    "ctest",
    "cargo test",
    "go test",
    "npm test",
    "npm run test",
    "yarn test",
    "pnpm test",
    "mvn test",
    "gradle test",
    "make test",
    "manage.py test",
];

const EDIT_COMMANDS: &[&str] = &[
    "sed -i",
    "perl -i",
    "perl -pi",
    "tee",
    "git apply",
    "patch -p",
];

/// The searchers of every pattern searched anywhere in a text, built once: building one costs
/// more than searching a short text. Patterns that must start a line are checked in one pass
/// over the lines instead.
struct Searchers {
    phrases: Vec<Finder<'static>>,
    test_runners: Vec<Finder<'static>>,
    test: Finder<'static>,
    edit_commands: Vec<Finder<'static>>,
    /// `exit code`, `Exit status`, `exit_code`...
    xit: Finder<'static>,
    /// `return code`, `returncode`, `<returncode>`.
    eturn: Finder<'static>,
    passed: Finder<'static>,
    failed: Finder<'static>,
    double_colon: Finder<'static>,
    passed_caps: Finder<'static>,
    failed_caps: Finder<'static>,
    heredoc: Finder<'static>,
    fence: Finder<'static>,
}

fn finders(patterns: &[&'static str]) -> Vec<Finder<'static>> {
    patterns.iter().map(|p| Finder::new(*p)).collect()
}

static SEARCHERS: LazyLock<Searchers> = LazyLock::new(|| Searchers {
    phrases: finders(PHRASES),
    test_runners: finders(TEST_RUNNERS),
    test: Finder::new("test"),
    edit_commands: finders(EDIT_COMMANDS),
    xit: Finder::new("xit"),
    eturn: Finder::new("eturn"),
    passed: Finder::new(" passed"),
    failed: Finder::new(" failed"),
    double_colon: Finder::new("::"),
    passed_caps: Finder::new("PASSED"),
    failed_caps: Finder::new("FAILED"),
    heredoc: Finder::new("<<"),
    fence: Finder::new("```"),
});

/// Whether some offset of `finder`'s pattern in `text` passes `ok`.
fn any_at(text: &str, finder: &Finder, ok: impl FnMut(usize) -> bool) -> bool {
    finder.find_iter(text.as_bytes()).any(ok)
}

/// Whether `text` holds `finder`'s pattern.
fn holds(text: &str, finder: &Finder) -> bool {
    finder.find(text.as_bytes()).is_some()
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether `word` occurs in `text` as a whole word (or words): not inside a longer word.
fn has_word(text: &str, word: &Finder) -> bool {
    let b = text.as_bytes();
    let len = word.needle().len();
    any_at(text, word, |at| {
        let end = at + len;
        (at == 0 || !is_word_byte(b[at - 1])) && (end == b.len() || !is_word_byte(b[end]))
    })
}

/// The integer after `rest`'s separators (`: `, `=`, `"`, `>`), if any.
fn number_after(rest: &str) -> Option<i64> {
    let rest = rest.trim_start_matches([' ', ':', '=', '"', '\'', '>', '\t']);
    let neg = rest.starts_with('-');
    let digits = rest.trim_start_matches('-');
    let len = digits.bytes().take_while(u8::is_ascii_digit).count();
    let n: i64 = digits[..len].parse().ok()?;
    Some(if neg { -n } else { n })
}

/// Whether `text` reports a non-zero exit status.
fn nonzero_status(text: &str) -> bool {
    let s = &*SEARCHERS;
    let b = text.as_bytes();
    let nonzero = |rest: &str| number_after(rest).is_some_and(|n| n != 0);
    any_at(text, &s.xit, |at| {
        if at == 0 || !matches!(b[at - 1], b'e' | b'E') {
            return false;
        }
        let rest = &text[at + 3..];
        [" code", " status", "_code"]
            .iter()
            .any(|w| rest.strip_prefix(w).is_some_and(nonzero))
    }) || any_at(text, &s.eturn, |at| {
        if at == 0 || b[at - 1] != b'r' {
            return false;
        }
        let rest = &text[at + 5..];
        [" code", "code"]
            .iter()
            .any(|w| rest.strip_prefix(w).is_some_and(nonzero))
    })
}

/// Whether a line (without its indent) is an error line: its first word (after pytest's `E`
/// marker) is `error`, `Error`, `ERROR`, `fatal` or `FATAL`, or ends in `Error` or
/// `Exception`, followed by `:` (or `[` after `error`, as in `error[E0308]:`).
fn error_line(line: &str) -> bool {
    let line = match line.strip_prefix("E ") {
        Some(rest) => rest.trim_start(),
        None => line,
    };
    let len = line
        .bytes()
        .take_while(|&b| is_word_byte(b) || b == b'.')
        .count();
    let (word, rest) = line.split_at(len);
    let bare = matches!(word, "error" | "Error" | "ERROR" | "fatal" | "FATAL");
    (rest.starts_with(':') && (bare || word.ends_with("Error") || word.ends_with("Exception")))
        || (rest.starts_with('[') && word == "error")
}

/// Whether a line (without its indent) reports a test outcome by how it starts.
fn test_line(line: &str) -> bool {
    line.starts_with("test result:")
        || line
            .strip_prefix("Ran ")
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()) && r.contains(" test"))
        || line.trim_end() == "OK"
        || line.starts_with("OK (")
        || line.starts_with("FAILED (")
        || line.starts_with("--- FAIL")
        || line.starts_with("--- PASS")
}

/// What a result's text reports: (an error, a test outcome), as `reports_error` and
/// `reports_test_outcome` (the tests' names for its two answers) describe them.
fn scan_output(text: &str) -> (bool, bool) {
    let s = &*SEARCHERS;
    let b = text.as_bytes();
    let mut error = s.phrases.iter().any(|p| holds(text, p)) || nonzero_status(text);
    let counted = |at: usize| at > 0 && b[at - 1].is_ascii_digit();
    let mut test = any_at(text, &s.passed, counted) || any_at(text, &s.failed, counted);
    // A test named with `::` and marked PASSED or FAILED on the same line (looked for line by
    // line only when the text holds both).
    let named = holds(text, &s.double_colon)
        && (holds(text, &s.passed_caps) || holds(text, &s.failed_caps));
    for line in text.split('\n') {
        if error && test {
            break;
        }
        let line = line.trim_start();
        error = error || error_line(line);
        test = test
            || test_line(line)
            || (named
                && holds(line, &s.double_colon)
                && (holds(line, &s.passed_caps) || holds(line, &s.failed_caps)));
    }
    (error, test)
}

/// Whether `text` (a tool result, an observation) reports a failure:
/// - a non-zero exit status: `<returncode>N</returncode>`, `exit code N`, `Exit code: N`,
///   `exit status N`, `return code N`, `returncode=N`, `exit_code: N`;
/// - a line whose first word is `error`, `Error`, `ERROR`, `fatal` or `FATAL`, or ends in
///   `Error` or `Exception`, followed by `:` (or `[`, as in `error[E0308]:`), also after
///   pytest's `E` marker: `SyntaxError: invalid syntax`, `error: could not compile`;
/// - `Traceback (most recent call last)`, `panicked at`, `command not found`,
///   `No such file or directory`, `Permission denied`, `Segmentation fault`.
///
/// (Callers scan a text once for both with `scan_output`; this and [`reports_test_outcome`]
/// name its two answers for the tests.)
#[cfg(test)]
pub fn reports_error(text: &str) -> bool {
    scan_output(text).0
}

/// Whether `text` reports a test outcome:
/// - a count of passed or failed tests (`3 passed`, `1 failed, 2 passed in 0.1s`,
///   `Tests: 1 failed`);
/// - a line starting with `test result:` (cargo), `Ran N tests` (unittest), a line `OK`,
///   `OK (...)` or `FAILED (...)` (unittest), `--- FAIL` or `--- PASS` (go test);
/// - a test named with `::` and marked `PASSED` or `FAILED` (pytest -v, pytest's summary).
#[cfg(test)]
pub fn reports_test_outcome(text: &str) -> bool {
    scan_output(text).1
}

/// Whether a command runs tests: it names a test runner as a word (`pytest`, `py.test`,
/// `unittest`, `nosetests`, `tox`, `jest`, `vitest`, `mocha`, `rspec`, `phpunit`, `ctest`), or
/// a build tool's test command (`cargo test`, `go test`, `npm test`, `npm run test`,
/// `yarn test`, `pnpm test`, `mvn test`, `gradle test`, `make test`, `manage.py test`).
pub fn runs_tests(command: &str) -> bool {
    let s = &*SEARCHERS;
    let b = command.as_bytes();
    let bounded = |start: usize, end: usize| {
        (start == 0 || !is_word_byte(b[start - 1])) && (end == b.len() || !is_word_byte(b[end]))
    };
    s.test_runners.iter().any(|w| has_word(command, w))
        || any_at(command, &s.test, |at| {
            TEST_COMMANDS.iter().any(|c| {
                let end = at + 4 + usize::from(c.ends_with('s'));
                end <= b.len()
                    && end >= c.len()
                    && &b[end - c.len()..end] == c.as_bytes()
                    && bounded(end - c.len(), end)
            })
        })
}

/// Whether a shell command writes a file: `sed -i`, `perl -i`/`perl -pi`, a heredoc (`<<`),
/// `tee`, `git apply`, `patch -p`, or an output redirection (`>`, `>>`) to a file (not `>&2`,
/// `2>&1` or `/dev/null`).
pub fn edits_files(command: &str) -> bool {
    let s = &*SEARCHERS;
    if s.edit_commands.iter().any(|w| has_word(command, w)) || any_at(command, &s.heredoc, |_| true)
    {
        return true;
    }
    let b = command.as_bytes();
    memchr::memchr_iter(b'>', b).any(|at| {
        // `->`, `=>`, `>=`, `<>`, and the second `>` of `>>` or a heredoc-like `>>`.
        if at > 0 && matches!(b[at - 1], b'-' | b'=' | b'<' | b'>') {
            return false;
        }
        let mut rest = &command[at + 1..];
        rest = rest.strip_prefix('>').unwrap_or(rest);
        let rest = rest.trim_start_matches([' ', '\t']);
        !(rest.starts_with('&')
            || rest.starts_with('=')
            || rest.starts_with("/dev/null")
            || rest.is_empty()
            || !rest.starts_with(|c: char| {
                c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '~' | '$' | '"' | '\'')
            }))
    })
}

/// Whether a tool is an editing tool: its name holds `edit`, `write`, `replace`, `patch`,
/// `create` or `insert` (any case), unless its arguments' `command` is `view` (as with
/// `str_replace_editor`).
pub fn edit_tool(name: &str, args: Option<&Value>) -> bool {
    let name = name.to_ascii_lowercase();
    let editing = ["edit", "write", "replace", "patch", "create", "insert"]
        .iter()
        .any(|w| name.contains(w));
    let viewing = args
        .and_then(|a| a.field("command"))
        .and_then(Value::as_str)
        == Some("view");
    editing && !viewing
}

/// The editing commands of SWE-agent-style text agents, in a code block: a line starting with
/// `edit N:M`, `create `, `insert `, `append `, or an `end_of_edit` marker.
fn edit_command(block: &str) -> bool {
    block.lines().any(|l| {
        let l = l.trim_start();
        l.strip_prefix("edit ")
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
            || l.starts_with("create ")
            || l.starts_with("insert ")
            || l.starts_with("append ")
            || l.starts_with("end_of_edit")
    })
}

/// The bodies of the fenced code blocks (```) of a markdown text; an unclosed fence runs to the
/// end.
fn fenced_blocks(text: &str) -> Vec<&str> {
    fences(text).into_iter().map(|f| f.body).collect()
}

/// A fenced code block (```) of a markdown text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fence<'a> {
    /// Where the opening fence is in the text.
    pub start: usize,
    /// The info string after the opening fence (`bash`, `python`, `mswea_bash_command`), trimmed.
    pub info: &'a str,
    pub body: &'a str,
    /// Where the block ends in the text: after its closing fence's line (the text's end when
    /// the fence is not closed).
    pub end: usize,
}

/// The fenced code blocks of a markdown text, in order; an unclosed fence runs to the end.
pub fn fences(text: &str) -> Vec<Fence<'_>> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    // A fence opens its line (after an indent). The look back stops at the first other byte,
    // so it never rescans a line.
    let mut fences = SEARCHERS.fence.find_iter(b).filter(|&at| {
        b[..at]
            .iter()
            .rev()
            .find(|&&c| c != b' ' && c != b'\t')
            .is_none_or(|&c| c == b'\n')
    });
    while let Some(open) = fences.next() {
        let line_end = memchr::memchr(b'\n', &b[open..]).map_or(text.len(), |i| open + i);
        let body_start = (line_end + 1).min(text.len());
        let info = text[open + 3..line_end].trim();
        let close = fences.by_ref().find(|&c| c >= body_start);
        let end = close.map_or(text.len(), |c| {
            memchr::memchr(b'\n', &b[c..]).map_or(text.len(), |i| c + i)
        });
        let close = close.unwrap_or(text.len());
        out.push(Fence {
            start: open,
            info,
            body: &text[body_start..close.max(body_start)],
            end,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::common::assert_classifies;
    use serde_json::json;

    #[test]
    fn errors_are_seen_in_results() {
        assert_classifies(
            reports_error,
            &[
                "<returncode>1</returncode>\n<output>\ncat: x.py: No such file\n</output>",
                "  File \"x.py\", line 4\n    def f(x)\n           ^\nSyntaxError: invalid syntax",
                "bash: pytest: command not found",
                "error[E0308]: mismatched types",
                "E   AssertionError: assert 1 == 2",
                "Process exited with exit code 2",
                "Exit code: 127",
                "fatal: not a git repository",
                "thread 'main' panicked at src/main.rs:3:5",
            ],
            &[
                "<returncode>0</returncode>\n<output>\nexisting_lint_error.py\n</output>",
                "Exit code: 0",
                "293:        raise AttributeError(",
                "no errors were found: error-free",
                "Script completed successfully, no errors.",
            ],
        );
    }

    #[test]
    fn test_outcomes_are_seen_in_results() {
        assert_classifies(
            reports_test_outcome,
            &[
                "===== 1 failed, 3 passed in 0.12s =====",
                "test result: ok. 12 passed; 0 failed",
                "Ran 4 tests in 0.002s\n\nOK",
                "FAILED (failures=1)",
                "tests/test_a.py::test_b PASSED [ 50%]",
                "--- FAIL: TestParse (0.00s)",
            ],
            &["OKAY then", "the build passed review", "all tests passed"],
        );
    }

    #[test]
    fn commands_that_run_tests_or_edit_files() {
        assert_classifies(
            runs_tests,
            &[
                "cd /repo && python -m pytest tests/ -x",
                "cargo test --lib",
                "nosetests -v",
                "npm run test",
                "tox -e py311",
                "go test ./...",
                "./manage.py test app",
                "py.test",
            ],
            &["cat toxic.txt", "ls tests/", "cat latest.log", "mypytest"],
        );
        assert_classifies(
            edits_files,
            &[
                "sed -i 's/a/b/' src/x.py",
                "cat > fix.py << 'EOF'\nprint(1)\nEOF",
                "echo hi >> notes.txt",
                "git apply /tmp/p.diff",
            ],
            &[
                "python x.py 2>&1 | head",
                "grep -n 'a->b' x.c",
                "ls > /dev/null",
                "cat x.py",
            ],
        );
    }

    #[test]
    fn messages_in_both_dialects() {
        let call = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
            "function": {"name": "bash", "arguments": "{\"command\": \"sed -i 's/x/y/' a.py && pytest\"}"}}]});
        assert_eq!(
            Signals::of_message(&call),
            Signals {
                error: false,
                test: true,
                edit: true
            }
        );
        let view = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "str_replace_editor",
            "input": {"command": "view", "path": "a.py"}}]});
        assert_eq!(Signals::of_message(&view), Signals::default());
        let failed = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": true, "content": "nope"}]});
        assert!(Signals::of_message(&failed).error);
        let react = json!({"role": "assistant", "content": "Let me fix it.\n\n```\nedit 3:3\n    return 1\nend_of_edit\n```"});
        assert!(Signals::of_message(&react).edit);
        let prose =
            json!({"role": "assistant", "content": "I will edit 3 files and run pytest later."});
        assert_eq!(Signals::of_message(&prose), Signals::default());
    }
}
