//! What a placeholder keeps of a cleared tool output (SPEC §4 `ctx prune`): whether the tool
//! failed (an error flag, or a non-zero exit status written in the output), its first and last
//! non-empty lines, and the lines that report an error or a test outcome, each clipped, the whole
//! within [`MAX_PLACEHOLDER_TOKENS`].
//!
//! It reads plain text and renders through [`Template`]; it must not know about messages, JSON
//! or dialects, nor decide which results are cleared (that is `prune`'s job). Every scan is one
//! pass over the text, keeping a bounded number of candidate lines, so a huge output costs time
//! linear in its size and no more memory than a few lines.

use std::collections::VecDeque;
use std::sync::LazyLock;

use anyhow::Result;
use memchr::memmem::{Finder, FinderRev};

use crate::clip::{Fill, Template, Var};
use crate::tokenizer::Encoding;

/// The most tokens the variable parts may bring a placeholder to: lines are left out (least
/// informative first) until the rendering fits. A template whose own text is longer than this is
/// rendered with as little as its slots allow.
pub const MAX_PLACEHOLDER_TOKENS: usize = 80;
/// The most chars of each kept line (a clipped line ends in `…`).
pub const LINE_CHARS: usize = 100;
/// The most chars of `{args}`.
pub const ARGS_CHARS: usize = 60;
/// The most chars of `{tool}`.
pub const TOOL_CHARS: usize = 40;
/// The most lines of `{salient}`.
pub const MAX_SALIENT: usize = 3;
/// How many lines at each end of an output are searched for an exit status.
const STATUS_LINES: usize = 3;
/// How many bytes at each end of a line are searched for an exit status.
const STATUS_WINDOW: usize = 160;
/// How many bytes of a line are searched for error and outcome words.
const CLASSIFY_WINDOW: usize = 400;

/// An exit status written in a tool's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// A numeric status: `exit code 1`, `<returncode>2</returncode>`, `Exit status: 127`, ...
    Code(i64),
    /// `command not found`.
    NotFound,
    /// It ran out of time (only ever given by an output's structure: a shell call's `outcome`).
    Timeout,
}

/// What a salient line reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Salient {
    /// `Traceback (most recent call last):` — the exception line after it says more.
    Traceback,
    /// An error: `ValueError: …`, `error: …`, `fatal: …`, `FAILED tests/…`, `… command not found`.
    Error,
    /// A test outcome: `3 failed, 12 passed in 0.5s`, `Ran 4 tests`, `OK`, `FAILED (failures=1)`,
    /// `test result: ok. …`.
    Outcome,
}

/// What a placeholder shows of one output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Excerpt {
    /// `failed (exit code 1)`, `failed`, `exit code 0`, or none when nothing says.
    pub status: Option<String>,
    /// The first non-empty line, clipped. Lines that say nothing of the output are skipped: one
    /// that only gives the exit status (the status says it), a markup tag, a shell prompt, a bare
    /// line number.
    pub head: String,
    /// The last such line, clipped; empty when it is the head.
    pub tail: String,
    /// Up to [`MAX_SALIENT`] other lines reporting errors or test outcomes, clipped, deduplicated,
    /// in the order of the output.
    pub salient: Vec<String>,
    /// Positions in `salient`, most informative first (the newest outcome, then the newest
    /// errors): what is left out last when the placeholder is over its bound.
    importance: Vec<usize>,
}

/// A rendered placeholder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placeholder {
    pub text: String,
    /// Its tokens.
    pub tokens: usize,
    /// The failure status shown, if any (`failed (exit code 1)`, `exit code 0`).
    pub status: Option<String>,
}

/// Renders the placeholder for a cleared output of `tokens` tokens: `tool` and `args` (a short
/// form of the call's arguments) name the call, `is_error` is the result's error flag, `exit`
/// the exit status the output's structure gives (a shell call's `outcome`), which wins over one
/// written in its text. When the
/// rendering is over [`MAX_PLACEHOLDER_TOKENS`], parts are left out in this order until it fits:
/// the head (a banner or a first line of output says less than an error line), the salient
/// lines from the least informative, the tail, then the arguments (cut to 20 chars, then left
/// out) and the tool's name (cut to 16 chars).
#[allow(clippy::too_many_arguments)] // Each is one fact about the output, named at the call.
pub fn placeholder(
    template: &Template,
    enc: Encoding,
    tool: &str,
    args: &str,
    text: &str,
    is_error: bool,
    exit: Option<Exit>,
    tokens: usize,
) -> Result<Placeholder> {
    // The lines are read only when the template shows them; the status is always reported.
    let mut ex = if [Var::Head, Var::Tail, Var::Salient]
        .iter()
        .any(|&v| template.has(v))
    {
        excerpt(text, is_error)
    } else {
        Excerpt {
            status: status_of(exit_status(text), is_error),
            ..Excerpt::default()
        }
    };
    if exit.is_some() {
        ex.status = status_of(exit, is_error);
    }
    let status = ex
        .status
        .as_deref()
        .map(|s| format!(", {s}"))
        .unwrap_or_default();
    let mut tool = clip_line(tool, TOOL_CHARS);
    let mut args = clip_line(args, ARGS_CHARS);
    let chars = text.chars().count();
    // What is left out, one at a time, while the rendering is over its bound.
    let mut drops = vec![Drop::Head];
    drops.extend(ex.importance.iter().rev().map(|&k| Drop::Salient(k)));
    drops.extend([Drop::Tail, Drop::Args(20), Drop::Args(0), Drop::Tool(16)]);
    let mut shown = vec![true; ex.salient.len()];
    let (mut head, mut tail) = (ex.head.as_str(), ex.tail.as_str());
    let mut drops = drops.into_iter();
    loop {
        let salient: Vec<&str> = ex
            .salient
            .iter()
            .zip(&shown)
            .filter(|(_, s)| **s)
            .map(|(l, _)| l.as_str())
            .collect();
        let text = template.render(&Fill {
            tool: &tool,
            args: &args,
            tokens,
            chars,
            status: &status,
            head,
            tail,
            salient: &salient.join("\n"),
        });
        let n = enc.count(&text);
        let Some(drop) = drops.next().filter(|_| n > MAX_PLACEHOLDER_TOKENS) else {
            return Ok(Placeholder {
                text,
                tokens: n,
                status: ex.status,
            });
        };
        match drop {
            Drop::Salient(k) => shown[k] = false,
            Drop::Head => head = "",
            Drop::Tail => tail = "",
            Drop::Args(max) => args = clip_line(&args, max),
            Drop::Tool(max) => tool = clip_line(&tool, max),
        }
    }
}

/// A part of a placeholder left out (or cut to so many chars) to keep it within its bound.
enum Drop {
    Salient(usize),
    Head,
    Tail,
    Args(usize),
    Tool(usize),
}

/// Reads an output once: its status, head, tail and salient lines.
pub fn excerpt(text: &str, is_error: bool) -> Excerpt {
    // The first and last shown lines and the newest candidates of each salient kind: a bounded
    // amount, whatever the output's size.
    let mut head: Option<(usize, &str)> = None;
    let mut tail: Option<(usize, &str)> = None;
    let mut outcome: Option<(usize, &str)> = None;
    let mut traceback: Option<(usize, &str)> = None;
    let mut errors: VecDeque<(usize, &str)> = VecDeque::new();
    for (i, line) in text.lines().enumerate() {
        let t = undecorate(line);
        if t.is_empty() {
            continue;
        }
        if shows_output(t) {
            head.get_or_insert((i, t));
            tail = Some((i, t));
        }
        match classify(t) {
            Some(Salient::Outcome) => outcome = Some((i, t)),
            Some(Salient::Traceback) => traceback = Some((i, t)),
            Some(Salient::Error) => {
                if errors.len() == MAX_SALIENT + 3 {
                    errors.pop_front();
                }
                errors.push_back((i, t));
            }
            None => {}
        }
    }
    let status = status_of(exit_status(text), is_error);
    let head_line = head.map(|(i, t)| (i, clip_line(t, LINE_CHARS)));
    let tail_line = tail
        .filter(|(i, _)| Some(*i) != head.map(|h| h.0))
        .map(|(i, t)| (i, clip_line(t, LINE_CHARS)));
    // Candidates, most informative first: the newest outcome, the newest errors, a traceback.
    let mut candidates: Vec<(usize, &str)> = Vec::new();
    candidates.extend(outcome);
    candidates.extend(errors.iter().rev().copied());
    candidates.extend(traceback);
    let mut chosen: Vec<(usize, String)> = Vec::new();
    for (i, t) in candidates {
        if chosen.len() == MAX_SALIENT {
            break;
        }
        let line = clip_line(t, LINE_CHARS);
        let seen =
            |l: &Option<(usize, String)>| l.as_ref().is_some_and(|(k, s)| *k == i || *s == line);
        if seen(&head_line) || seen(&tail_line) || chosen.iter().any(|(_, s)| *s == line) {
            continue;
        }
        chosen.push((i, line));
    }
    // Shown in the output's order; `importance` remembers the order they were chosen in.
    let mut order: Vec<usize> = (0..chosen.len()).collect();
    order.sort_by_key(|&k| chosen[k].0);
    let mut importance = vec![0; chosen.len()];
    for (pos, &k) in order.iter().enumerate() {
        importance[k] = pos;
    }
    Excerpt {
        status,
        head: head_line.map(|(_, l)| l).unwrap_or_default(),
        tail: tail_line.map(|(_, l)| l).unwrap_or_default(),
        salient: order.iter().map(|&k| chosen[k].1.clone()).collect(),
        importance,
    }
}

/// What `{status}` says of an exit status and an error flag.
fn status_of(exit: Option<Exit>, is_error: bool) -> Option<String> {
    match exit {
        Some(Exit::Code(0)) if !is_error => Some("exit code 0".to_string()),
        Some(Exit::Code(0)) | None if is_error => Some("failed".to_string()),
        Some(Exit::Code(n)) => Some(format!("failed (exit code {n})")),
        Some(Exit::NotFound) => Some("failed (command not found)".to_string()),
        Some(Exit::Timeout) => Some("failed (timed out)".to_string()),
        None => None,
    }
}

/// The line with control chars as spaces, clipped to `max` chars (ending in `…` when clipped).
pub fn clip_line(line: &str, max: usize) -> String {
    let line = line.trim();
    // A line of at most `max` bytes has at most `max` chars.
    if line.len() <= max && !line.chars().any(|c| c.is_control() && c != '\t') {
        return line.to_string();
    }
    let mut out = String::new();
    for (k, c) in line.chars().enumerate() {
        if k == max {
            break;
        }
        if k + 1 == max && line.chars().nth(max).is_some() {
            out.push('…');
            break;
        }
        out.push(if c.is_control() && c != '\t' { ' ' } else { c });
    }
    out
}

/// The exit status written in an output (searched in its first and last non-empty lines, the
/// last one found winning), if any.
pub fn exit_status(text: &str) -> Option<Exit> {
    let (first, last) = end_lines(text);
    first
        .iter()
        .chain(last.iter())
        .filter_map(|l| exit_in_line(l))
        .next_back()
}

/// The first and last [`STATUS_LINES`] non-empty lines of a text, trimmed, in one pass.
fn end_lines(text: &str) -> (Vec<&str>, VecDeque<&str>) {
    let mut first = Vec::new();
    let mut last = VecDeque::new();
    for t in text.lines().map(str::trim).filter(|t| !t.is_empty()) {
        if first.len() < STATUS_LINES {
            first.push(t);
        }
        if last.len() == STATUS_LINES {
            last.pop_front();
        }
        last.push_back(t);
    }
    (first, last)
}

/// Words after which an exit status is written.
const EXIT_WORDS: &[&str] = &[
    "exit code",
    "exit status",
    "exit_code",
    "exitcode",
    "exit_status",
    "returncode",
    "return code",
    "return_code",
    "exited with code",
];

/// The last exit status written in one line (its two ends only).
fn exit_in_line(line: &str) -> Option<Exit> {
    let lower = ends(line, STATUS_WINDOW).to_ascii_lowercase();
    let finders = &*FINDERS;
    // Every word holds one of these: most lines are ruled out in three scans.
    if finders
        .exit_or_return
        .iter()
        .all(|f| f.find(lower.as_bytes()).is_none())
        && finders.not_found.rfind(lower.as_bytes()).is_none()
    {
        return None;
    }
    let mut found: Option<(usize, Exit)> = None;
    for (word, finder) in EXIT_WORDS.iter().zip(&finders.exit_words) {
        for at in finder.find_iter(lower.as_bytes()) {
            let rest = lower[at + word.len()..]
                .trim_start_matches([' ', '\t', ':', '=', '"', '\'', '>'])
                .trim_start_matches("is ");
            let digits = rest
                .strip_prefix('-')
                .unwrap_or(rest)
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            if digits == 0 || digits > 9 {
                continue;
            }
            let sign = usize::from(rest.starts_with('-'));
            if let Ok(code) = rest[..sign + digits].parse::<i64>() {
                if found.is_none_or(|(p, _)| at >= p) {
                    found = Some((at, Exit::Code(code)));
                }
            }
        }
    }
    if let Some(at) = finders.not_found.rfind(lower.as_bytes()) {
        if found.is_none_or(|(p, _)| at >= p) {
            found = Some((at, Exit::NotFound));
        }
    }
    found.map(|(_, e)| e)
}

/// Substring searchers built once: a line is searched for many words, and building a searcher
/// costs more than searching a short line.
struct Finders {
    exit_or_return: [Finder<'static>; 2],
    exit_words: Vec<Finder<'static>>,
    not_found: FinderRev<'static>,
    error_inside: Vec<Finder<'static>>,
}

static FINDERS: LazyLock<Finders> = LazyLock::new(|| Finders {
    exit_or_return: [Finder::new("exit"), Finder::new("return")],
    exit_words: EXIT_WORDS.iter().map(Finder::new).collect(),
    not_found: FinderRev::new("command not found"),
    error_inside: ERROR_INSIDE.iter().map(Finder::new).collect(),
});

/// Words inside a line that mark it as an error (lowercase). `error: ` needs something after
/// it: `except OSError as error:` is code, not an error.
const ERROR_INSIDE: &[&str] = &[
    ": error ",
    "error: ",
    "error[",
    "[error]",
    "fatal:",
    "panicked at",
    "command not found",
    "no such file or directory",
    "permission denied",
    "segmentation fault",
];

/// A line that says only the exit status (`<returncode>1</returncode>`, `[The command completed
/// with exit code 1.]`, `Exit code: 1`): what `{status}` already shows.
fn is_status_only(line: &str) -> bool {
    line.len() <= 48 && matches!(exit_in_line(line), Some(Exit::Code(_)))
}

/// Whether a line (undecorated) says something of an output: not only its exit status (a
/// status is reported apart), a markup tag, a shell prompt or a bare line number.
pub fn shows_output(line: &str) -> bool {
    !is_status_only(line) && !is_tag_only(line) && !is_prompt(line) && !is_number(line)
}

/// A line that is only a markup tag (`<output>`, `</stdout>`).
fn is_tag_only(line: &str) -> bool {
    line.strip_prefix('<')
        .and_then(|l| l.strip_suffix('>'))
        .map(|l| l.strip_prefix('/').unwrap_or(l))
        .is_some_and(|name| {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
}

/// The line without surrounding blanks and banner rules (`===== 1 failed in 0.5s =====` →
/// `1 failed in 0.5s`): a run of three or more `=`, `-`, `_`, `*`, `#` or `~` at either end. A
/// line that is only a rule becomes empty.
pub fn undecorate(line: &str) -> &str {
    const RULES: &[u8] = b"=-_*#~";
    let mut t = line.trim();
    let b = t.as_bytes();
    if b.len() >= 3 && RULES.contains(&b[0]) && b[1] == b[0] && b[2] == b[0] {
        t = t.trim_start_matches(b[0] as char).trim_start();
    }
    let b = t.as_bytes();
    let n = b.len();
    if n >= 3 && RULES.contains(&b[n - 1]) && b[n - 2] == b[n - 1] && b[n - 3] == b[n - 1] {
        t = t.trim_end_matches(b[n - 1] as char).trim_end();
    }
    t
}

/// A bare number: the line number of an empty line in a numbered listing (`cat -n`).
fn is_number(line: &str) -> bool {
    line.bytes().all(|b| b.is_ascii_digit())
}

/// A shell prompt left at the end of an output (`bash-$`, `root@host:/testbed#`).
fn is_prompt(line: &str) -> bool {
    line.len() <= 40
        && line
            .strip_suffix(['$', '#'])
            .is_some_and(|rest| !rest.contains(char::is_whitespace))
}

/// What a line reports, if it is worth keeping: an error or a test outcome.
pub fn classify(line: &str) -> Option<Salient> {
    let t = ends(line.trim(), CLASSIFY_WINDOW);
    let t = t.as_ref();
    if t.is_empty() {
        return None;
    }
    if is_outcome(t) {
        return Some(Salient::Outcome);
    }
    if t.starts_with("Traceback (most recent call last)") {
        return Some(Salient::Traceback);
    }
    // pytest prints the failing assertion and exception after `E`.
    let e = match t.strip_prefix("E ") {
        Some(rest) => rest.trim_start(),
        None => t,
    };
    if is_exception_line(e) {
        return Some(Salient::Error);
    }
    let lower = t.to_ascii_lowercase();
    let word_at_start = |w: &str| {
        lower.starts_with(w)
            && lower[w.len()..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_')
    };
    let error_start = [
        "error", "fatal", "panic", "failed", "fail", "err!", "npm err!",
    ]
    .iter()
    .any(|w| word_at_start(w))
        || lower.starts_with("--- fail")
        || lower.starts_with("segmentation fault");
    let error_inside = FINDERS
        .error_inside
        .iter()
        .any(|f| f.find(lower.as_bytes()).is_some());
    (error_start || error_inside).then_some(Salient::Error)
}

/// Test runners' summary lines.
fn is_outcome(t: &str) -> bool {
    let s = t.trim_matches(|c: char| c == '=' || c == '-' || c.is_whitespace());
    if s == "OK" || s.starts_with("OK (") || s.starts_with("FAILED (") {
        return true; // unittest
    }
    let go_package = |w: &str| {
        s.strip_prefix(w)
            .is_some_and(|r| r.starts_with([' ', '\t']) && r.contains('\t'))
    };
    if s == "PASS" || s == "FAIL" || go_package("ok") || go_package("FAIL") {
        return true; // go test
    }
    if let Some(rest) = s.strip_prefix("Ran ") {
        return rest.starts_with(|c: char| c.is_ascii_digit()) && rest.contains(" test");
    }
    if s.starts_with("test result:") || s.contains("no tests ran") {
        return true; // cargo test, pytest
    }
    if s.starts_with("Tests:") || s.starts_with("Test Suites:") {
        return true; // jest
    }
    // `3 failed, 12 passed in 0.5s`, `5 passed; 0 failed`, `2 passing`: a count, then the word.
    const COUNTED: &[&str] = &[
        "passed", "failed", "failing", "passing", "errors", "error", "skipped",
    ];
    let b = s.as_bytes();
    memchr::memchr_iter(b' ', b).any(|i| {
        i > 0
            && b[i - 1].is_ascii_digit()
            && COUNTED.iter().any(|w| {
                s[i + 1..].starts_with(w)
                    && s[i + 1 + w.len()..]
                        .chars()
                        .next()
                        .is_none_or(|c| !c.is_ascii_alphanumeric())
            })
    })
}

/// `ValueError: …`, `django.core.exceptions.ImproperlyConfigured: …`, `AssertionError`,
/// `KeyboardInterrupt`: a dotted name ending in an exception word, then `:` or nothing.
fn is_exception_line(t: &str) -> bool {
    let name_len = t
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.')
        .count();
    let (name, rest) = t.split_at(name_len);
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return false;
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    let exception_word = [
        "Error",
        "Exception",
        "Exit",
        "Interrupt",
        "Failure",
        "Fault",
    ]
    .iter()
    .any(|w| last.ends_with(w) && last.starts_with(|c: char| c.is_ascii_uppercase()));
    let exception_word =
        exception_word || ["ImproperlyConfigured", "DoesNotExist", "StopIteration"].contains(&last);
    exception_word && (rest.is_empty() || rest.starts_with(':'))
}

/// The line itself when short, else its first and last `window` bytes joined by a space (on
/// char boundaries): what the searches read of a very long line.
fn ends(line: &str, window: usize) -> std::borrow::Cow<'_, str> {
    if line.len() <= 2 * window {
        return line.into();
    }
    let mut a = window;
    while !line.is_char_boundary(a) {
        a -= 1;
    }
    let mut b = line.len() - window;
    while !line.is_char_boundary(b) {
        b += 1;
    }
    format!("{} {}", &line[..a], &line[b..]).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clip::DEFAULT_PLACEHOLDER;

    #[test]
    fn exit_statuses_found_where_harnesses_write_them() {
        let cases: &[(&str, Option<Exit>)] = &[
            (
                "ok\n[The command completed with exit code 1.]",
                Some(Exit::Code(1)),
            ),
            (
                "<returncode>2</returncode>\n<output>\nboom\n</output>",
                Some(Exit::Code(2)),
            ),
            ("Exit status: 127", Some(Exit::Code(127))),
            ("exit code 0", Some(Exit::Code(0))),
            ("Exit code: -9", Some(Exit::Code(-9))),
            ("{\"exit_code\": 3, \"stdout\": \"\"}", Some(Exit::Code(3))),
            ("bash: pytest: command not found", Some(Exit::NotFound)),
            (
                "error: test failed\nprocess didn't exit successfully: `target/debug/deps/x` (exit status: 101)",
                Some(Exit::Code(101)),
            ),
            (
                "exit code 0\n...\n[The command completed with exit code 1.]",
                Some(Exit::Code(1)),
            ),
            ("all good\nnothing to see", None),
            ("exit code", None),
            ("exit codes are documented", None),
        ];
        for (text, want) in cases {
            assert_eq!(exit_status(text), *want, "{text:?}");
        }
        // Only the ends of a long output are read: a status in its middle is not one.
        let middle = format!(
            "{}exit code 4\n{}",
            "line\n".repeat(10),
            "line\n".repeat(10)
        );
        assert_eq!(exit_status(&middle), None);
    }

    #[test]
    fn salient_lines_are_errors_and_test_outcomes() {
        let errors = [
            "ValueError: could not parse header",
            "E       AssertionError: assert 1 == 2",
            "django.core.exceptions.ImproperlyConfigured: settings are not configured",
            "SyntaxError: invalid syntax",
            "KeyboardInterrupt",
            "error: could not compile `ctx` (lib) due to 2 previous errors",
            "error[E0308]: mismatched types",
            "src/main.c:3:5: error: expected ';' before '}' token",
            "fatal: not a git repository (or any of the parent directories): .git",
            "FAILED tests/test_io.py::test_read - ValueError: bad",
            "FAIL: test_split (tests.test_text.TextTests)",
            "--- FAIL: TestParse (0.00s)",
            "thread 'main' panicked at src/lib.rs:10:5:",
            "bash: pytest: command not found",
            "ls: cannot access 'x': No such file or directory",
            "npm ERR! code ELIFECYCLE",
            "[ERROR] Failed to execute goal",
        ];
        let outcomes = [
            "===== 3 failed, 12 passed in 0.50s =====",
            "1 passed in 0.01s",
            "Ran 4 tests in 0.002s",
            "OK",
            "OK (skipped=1)",
            "FAILED (failures=1)",
            "FAILED (errors=2, failures=1)",
            "test result: ok. 5 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
            "test result: FAILED. 4 passed; 1 failed; 0 ignored",
            "Tests:       1 failed, 4 passed, 5 total",
            "  2 passing (20ms)",
            "ok  \tgithub.com/x/y\t0.012s",
            "FAIL",
            "============ no tests ran in 0.01s ============",
        ];
        let ordinary = [
            "def parse_header(line):",
            "    return value",
            "The errors module handles this.",
            "        except OverflowError as error:",
            "bash-$",
            "Errors: none",
            "import error_handling",
            "All 3 files passed review",
            "",
            "total 48",
            "OKAY then",
            "error_count = 0",
        ];
        let traceback = ["Traceback (most recent call last):"];
        let cases: [(&[&str], Option<Salient>); 4] = [
            (&errors, Some(Salient::Error)),
            (&outcomes, Some(Salient::Outcome)),
            (&traceback, Some(Salient::Traceback)),
            (&ordinary, None),
        ];
        for (lines, want) in cases {
            for line in lines {
                assert_eq!(classify(line), want, "{line}");
            }
        }
    }

    #[test]
    fn excerpt_keeps_the_ends_and_the_newest_salient_lines() {
        let text = "<returncode>1</returncode>\n<output>\n============ test session starts ============\ncollected 13 items\n\ntests/test_io.py F.\n\nE   ValueError: could not parse header\nE   ValueError: could not parse header\nFAILED tests/test_io.py::test_read - ValueError: could not parse header\n===== 1 failed, 12 passed in 0.52s =====\n</output>";
        let ex = excerpt(text, false);
        assert_eq!(ex.status.as_deref(), Some("failed (exit code 1)"));
        assert_eq!(ex.head, "test session starts", "banner rules are left out");
        assert_eq!(ex.tail, "1 failed, 12 passed in 0.52s");
        assert_eq!(
            ex.salient,
            [
                "E   ValueError: could not parse header",
                "FAILED tests/test_io.py::test_read - ValueError: could not parse header"
            ],
            "deduplicated, in the output's order; the tail is not repeated"
        );
        let traceback = "Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n    main()\nKeyError: 'path'";
        let ex = excerpt(traceback, true);
        assert_eq!(ex.status.as_deref(), Some("failed"));
        assert_eq!(ex.head, "Traceback (most recent call last):");
        assert_eq!(ex.tail, "KeyError: 'path'");
        assert!(ex.salient.is_empty());
        let swe_agent = "Obtaining file:///testbed\n  Installing build dependencies ... done\nSuccessfully installed marshmallow-3.13.0\n(Open file: n/a)\n(Current directory: /testbed)\nbash-$";
        let ex = excerpt(swe_agent, false);
        assert_eq!(
            ex.tail, "(Current directory: /testbed)",
            "a prompt is not the tail"
        );
        let long = "x".repeat(500);
        let ex = excerpt(&long, false);
        assert_eq!(ex.head.chars().count(), LINE_CHARS);
        assert!(ex.head.ends_with('…'));
        assert_eq!(ex.tail, "", "one line is the head only");
        assert_eq!(excerpt("", false), Excerpt::default());
        assert_eq!(excerpt("\n \n", false), Excerpt::default());
    }

    #[test]
    fn the_newest_errors_are_kept_when_there_are_many() {
        let mut text = String::from("start\n");
        for i in 0..50 {
            text.push_str(&format!(
                "FAILED tests/test_{i}.py::test - AssertionError\n"
            ));
        }
        text.push_str("===== 50 failed in 1.00s =====\n");
        let ex = excerpt(&text, false);
        assert_eq!(
            ex.salient,
            [
                "FAILED tests/test_47.py::test - AssertionError",
                "FAILED tests/test_48.py::test - AssertionError",
                "FAILED tests/test_49.py::test - AssertionError",
            ]
        );
    }

    #[test]
    fn default_placeholder_within_its_bound_and_recognised() {
        let template = Template::parse(DEFAULT_PLACEHOLDER);
        let enc = Encoding::O200kBase;
        let mut text = String::from("============ test session starts ============\n");
        for i in 0..200 {
            text.push_str(&format!("tests/test_{i}.py {}\n", "x".repeat(i % 90)));
        }
        text.push_str("E   ValueError: could not parse header in the file that was given to the reader, which is long\n");
        text.push_str("FAILED tests/test_io.py::test_read - ValueError: could not parse header in the file given\n");
        text.push_str(
            "===== 1 failed, 12 passed in 0.52s =====\n[The command completed with exit code 1.]",
        );
        let p = placeholder(
            &template,
            enc,
            "bash",
            "pytest -x tests/test_io.py",
            &text,
            false,
            None,
            4321,
        )
        .unwrap();
        assert!(p.tokens <= MAX_PLACEHOLDER_TOKENS, "{}", p.tokens);
        assert_eq!(p.tokens, enc.count(&p.text));
        assert!(p.text.starts_with("[ctx: cleared output of bash(pytest -x tests/test_io.py): 4321 tokens, failed (exit code 1)]\n"), "{}", p.text);
        assert!(
            p.text.ends_with("\n1 failed, 12 passed in 0.52s"),
            "{}",
            p.text
        );
        assert!(p.text.contains("ValueError"), "{}", p.text);
        assert!(!p.text.contains("again"), "no advice to re-run the tool");
        assert!(template.matches(&p.text));
        // A result with nothing salient: header, first and last lines, no blank line.
        let p = placeholder(
            &template,
            enc,
            "read_file",
            "src/x.py",
            "import os\n\nx = 1\n",
            false,
            None,
            300,
        )
        .unwrap();
        assert_eq!(
            p.text,
            "[ctx: cleared output of read_file(src/x.py): 300 tokens]\nimport os\nx = 1"
        );
        assert!(template.matches(&p.text));
        // Pathological names and lines still give a bounded placeholder.
        let wide = "ツ".repeat(400);
        let p = placeholder(
            &template,
            enc,
            &wide,
            &wide,
            &format!("{wide}\nValueError: {wide}\n{wide}"),
            true,
            None,
            9,
        )
        .unwrap();
        assert!(
            p.tokens <= MAX_PLACEHOLDER_TOKENS,
            "{}: {}",
            p.tokens,
            p.text
        );
        assert!(template.matches(&p.text));
    }
}
