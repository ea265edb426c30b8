//! What a shell command an agent ran does, read from its text: its simple commands (words and
//! redirections), the lines that are commands rather than heredoc bodies, the files it writes
//! (`sed -i`, `>`/`>>` redirections, `tee`, `touch`, `cp`/`mv`, `git apply`/`patch` of a heredoc
//! diff, `cat <<EOF > file`, Python code that opens a file for writing), and whether it runs tests
//! or a script. The extractive summary's ledger is built from these (SPEC §4 `ctx summarize`).
//!
//! This is a small lexer for the shell as agents write it (quotes, escapes, `&&`/`||`/`;`/`|`,
//! redirections, heredocs, `$(...)`), not a shell: what it cannot read it leaves out, so a file
//! it names is one the command really writes, and a fragment that is not a path (an option, a
//! variable, a regex, `/dev/null`) is never named. One pass over the text, linear in its size.
//! It never runs anything and knows nothing of messages or tokens.

use crate::signals::runs_tests;

/// One simple command: its words (quotes removed) and redirections, and the body of the heredoc
/// it reads, if any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Simple {
    pub words: Vec<String>,
    /// `(operator, target)`: `(">", "out.txt")`, `(">>", "log")`, `("2>&", "1")`, `("<", "in")`.
    pub redirects: Vec<(String, String)>,
    /// The body of its heredoc (`<<EOF ... EOF`) or here-string (`<<<`).
    pub heredoc: Option<String>,
}

impl Simple {
    /// The command's name and arguments, without leading variable assignments (`A=1 cmd`) and
    /// wrappers (`sudo`, `env`, `time`, `nohup`, `command`, `exec`).
    pub fn argv(&self) -> &[String] {
        let mut i = 0;
        while i < self.words.len() {
            let w = &self.words[i];
            let assignment = w
                .split_once('=')
                .is_some_and(|(name, _)| is_name(name) && !name.is_empty());
            if assignment
                || matches!(
                    w.as_str(),
                    "sudo" | "env" | "time" | "nohup" | "command" | "exec"
                )
            {
                i += 1;
            } else {
                break;
            }
        }
        &self.words[i..]
    }

    /// The command's name (its first word after assignments and wrappers), without a directory.
    pub fn name(&self) -> &str {
        self.argv()
            .first()
            .map_or("", |w| w.rsplit('/').next().unwrap_or(w))
    }
}

/// A script read once: its simple commands, in order, and the byte ranges of its heredoc bodies.
#[derive(Clone, Debug, Default)]
pub struct Script {
    pub commands: Vec<Simple>,
    bodies: Vec<(usize, usize)>,
}

fn is_name(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// Reads a shell script into simple commands.
pub fn parse(script: &str) -> Script {
    Lexer::new(script).run()
}

struct Lexer<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    out: Script,
    cur: Simple,
    word: String,
    /// Whether `word` holds anything (an empty quoted word `''` counts).
    in_word: bool,
    /// Heredocs whose bodies start at the next line: (delimiter, strip tabs, command index).
    pending: Vec<(String, bool, usize)>,
    /// A redirection operator waiting for its target word.
    redirect: Option<String>,
}

impl<'a> Lexer<'a> {
    fn new(s: &'a str) -> Lexer<'a> {
        Lexer {
            s,
            b: s.as_bytes(),
            i: 0,
            out: Script::default(),
            cur: Simple::default(),
            word: String::new(),
            in_word: false,
            pending: Vec::new(),
            redirect: None,
        }
    }

    fn run(mut self) -> Script {
        while self.i < self.b.len() {
            let c = self.b[self.i];
            match c {
                b' ' | b'\t' | b'\r' => {
                    self.end_word();
                    self.i += 1;
                }
                b'\n' => {
                    self.end_word();
                    self.end_command();
                    self.i += 1;
                    self.read_bodies();
                }
                b'#' if !self.in_word => {
                    // A comment runs to the end of the line.
                    self.i = memchr::memchr(b'\n', &self.b[self.i..])
                        .map_or(self.b.len(), |k| self.i + k);
                }
                b'\'' => {
                    self.in_word = true;
                    let start = self.i + 1;
                    let end =
                        memchr::memchr(b'\'', &self.b[start..]).map_or(self.b.len(), |k| start + k);
                    self.word.push_str(&self.s[start..end]);
                    self.i = (end + 1).min(self.b.len());
                }
                b'"' => {
                    self.in_word = true;
                    self.i += 1;
                    while self.i < self.b.len() && self.b[self.i] != b'"' {
                        if self.b[self.i] == b'\\' && self.i + 1 < self.b.len() {
                            let next = self.b[self.i + 1];
                            if matches!(next, b'"' | b'\\' | b'$' | b'`') {
                                self.word.push(next as char);
                                self.i += 2;
                                continue;
                            }
                        }
                        self.push_char();
                    }
                    self.i = (self.i + 1).min(self.b.len());
                }
                b'\\' => {
                    self.in_word = true;
                    if self.i + 1 < self.b.len() {
                        if self.b[self.i + 1] == b'\n' {
                            self.i += 2; // a continued line
                        } else {
                            self.i += 1;
                            self.push_char();
                        }
                    } else {
                        self.i += 1;
                    }
                }
                b'$' if self.b.get(self.i + 1) == Some(&b'(') => {
                    // A command substitution stays inside its word, unread.
                    self.in_word = true;
                    let start = self.i;
                    let mut depth = 0usize;
                    while self.i < self.b.len() {
                        match self.b[self.i] {
                            b'(' => depth += 1,
                            b')' => {
                                depth = depth.saturating_sub(1);
                                if depth == 0 {
                                    self.i += 1;
                                    break;
                                }
                            }
                            _ => {}
                        }
                        self.i += 1;
                    }
                    self.word.push_str(&self.s[start..self.i]);
                }
                b'`' => {
                    self.in_word = true;
                    let start = self.i;
                    let end = memchr::memchr(b'`', &self.b[start + 1..])
                        .map_or(self.b.len(), |k| start + 1 + k);
                    let end = (end + 1).min(self.b.len());
                    self.word.push_str(&self.s[start..end]);
                    self.i = end;
                }
                b';' | b'|' | b'(' | b')' => {
                    self.end_word();
                    self.end_command();
                    self.i += 1;
                    if matches!(self.b.get(self.i), Some(b'|' | b'&' | b';')) {
                        self.i += 1;
                    }
                }
                b'&' => {
                    if self.b.get(self.i + 1) == Some(&b'>') {
                        self.end_word();
                        self.i += 2;
                        let op = if self.b.get(self.i) == Some(&b'>') {
                            self.i += 1;
                            "&>>"
                        } else {
                            "&>"
                        };
                        self.redirect = Some(op.to_string());
                    } else {
                        self.end_word();
                        self.end_command();
                        self.i += 1;
                        if self.b.get(self.i) == Some(&b'&') {
                            self.i += 1;
                        }
                    }
                }
                b'<' | b'>' => self.redirection(),
                _ => self.push_char(),
            }
        }
        self.end_word();
        self.end_command();
        self.out
    }

    /// Appends the char at `i` to the word.
    fn push_char(&mut self) {
        let ch = self.s[self.i..].chars().next().unwrap_or(' ');
        self.word.push(ch);
        self.in_word = true;
        self.i += ch.len_utf8();
    }

    fn redirection(&mut self) {
        // A word of digits right before the operator is its file descriptor (`2>`).
        let fd = if self.in_word
            && !self.word.is_empty()
            && self.word.bytes().all(|b| b.is_ascii_digit())
        {
            let fd = std::mem::take(&mut self.word);
            self.in_word = false;
            fd
        } else {
            self.end_word();
            String::new()
        };
        let rest = &self.s[self.i..];
        let op = ["<<<", "<<-", "<<", ">>", ">|", ">&", "<&", "<>", ">", "<"]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .unwrap_or(">");
        self.i += op.len();
        if op == "<<" || op == "<<-" {
            // The delimiter word follows; the body starts at the next line.
            while matches!(self.b.get(self.i), Some(b' ' | b'\t')) {
                self.i += 1;
            }
            let mut delim = String::new();
            while self.i < self.b.len()
                && !matches!(
                    self.b[self.i],
                    b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'>' | b'<' | b')'
                )
            {
                let c = self.b[self.i];
                if c == b'\'' || c == b'"' || c == b'\\' {
                    self.i += 1;
                    continue;
                }
                let ch = self.s[self.i..].chars().next().unwrap_or(' ');
                delim.push(ch);
                self.i += ch.len_utf8();
            }
            if !delim.is_empty() {
                self.pending
                    .push((delim, op == "<<-", self.out.commands.len()));
            }
            return;
        }
        self.redirect = Some(format!("{fd}{op}"));
    }

    fn end_word(&mut self) {
        if !self.in_word {
            return;
        }
        let word = std::mem::take(&mut self.word);
        self.in_word = false;
        match self.redirect.take() {
            Some(op) if op == "<<<" => self.cur.heredoc = Some(word),
            Some(op) => self.cur.redirects.push((op, word)),
            None => self.cur.words.push(word),
        }
    }

    fn end_command(&mut self) {
        self.redirect = None;
        let cur = std::mem::take(&mut self.cur);
        let has_heredoc = self.pending.iter().any(|p| p.2 == self.out.commands.len());
        if !cur.words.is_empty()
            || !cur.redirects.is_empty()
            || cur.heredoc.is_some()
            || has_heredoc
        {
            self.out.commands.push(cur);
        } else {
            // Heredocs of an empty command (never happens in practice) attach to nothing.
            for p in &mut self.pending {
                if p.2 == self.out.commands.len() {
                    p.2 = usize::MAX;
                }
            }
        }
    }

    /// Reads the bodies of the heredocs opened on the line just ended.
    fn read_bodies(&mut self) {
        for (delim, strip_tabs, at) in std::mem::take(&mut self.pending) {
            let start = self.i;
            let mut end = self.b.len();
            let mut next = self.b.len();
            let mut k = self.i;
            while k < self.b.len() {
                let line_end = memchr::memchr(b'\n', &self.b[k..]).map_or(self.b.len(), |n| k + n);
                let line = self.s[k..line_end].trim_end_matches('\r');
                let line = if strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if line.trim() == delim {
                    end = k;
                    next = (line_end + 1).min(self.b.len());
                    break;
                }
                k = line_end + 1;
            }
            let body = &self.s[start..end.max(start)];
            if let Some(cmd) = self.out.commands.get_mut(at) {
                cmd.heredoc = Some(body.to_string());
            }
            self.out.bodies.push((start, end.max(start)));
            self.i = next;
        }
    }
}

impl Script {
    /// The lines of the script that are commands: not heredoc bodies, not blank, not comments.
    pub fn command_lines<'s>(&self, script: &'s str) -> Vec<&'s str> {
        let mut out = Vec::new();
        let mut at = 0;
        for line in script.split_inclusive('\n') {
            let start = at;
            at += line.len();
            if self
                .bodies
                .iter()
                .any(|&(s, e)| start >= s && start < e.max(s + 1) && e > s)
            {
                continue;
            }
            // A heredoc's closing delimiter line follows its body.
            if self.bodies.iter().any(|&(_, e)| start == e) && self.is_delimiter_line(line) {
                continue;
            }
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            out.push(t);
        }
        out
    }

    fn is_delimiter_line(&self, line: &str) -> bool {
        let t = line.trim();
        !t.is_empty() && !t.contains(char::is_whitespace)
    }

    /// The files the script writes, in order, each once (see the module's doc).
    pub fn written_files(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let push = |p: &str, out: &mut Vec<String>| {
            if is_file_path(p) && !out.iter().any(|o| o == p) {
                out.push(p.to_string());
            }
        };
        // Heredoc bodies written to a Python file, which a later command may run.
        let mut scripts: Vec<(&str, &str)> = Vec::new();
        for cmd in &self.commands {
            for (op, target) in &cmd.redirects {
                let writes = op.ends_with('>') || op.ends_with(">|") || op.ends_with(">>");
                if writes && !op.ends_with(">&") {
                    push(target, &mut out);
                    if let (Some(body), true) = (&cmd.heredoc, target.ends_with(".py")) {
                        scripts.push((target, body));
                    }
                }
            }
            let argv = cmd.argv();
            let args: Vec<&str> = argv.iter().skip(1).map(String::as_str).collect();
            match cmd.name() {
                "tee" | "touch" => {
                    for a in args.iter().filter(|a| !a.starts_with('-')) {
                        push(a, &mut out);
                    }
                }
                "sed" | "gsed" | "perl" => {
                    for f in in_place_files(cmd.name(), &args) {
                        push(f, &mut out);
                    }
                }
                "cp" | "mv" => {
                    let operands: Vec<&&str> =
                        args.iter().filter(|a| !a.starts_with('-')).collect();
                    if operands.len() >= 2 {
                        let last = operands[operands.len() - 1];
                        let name = last.rsplit('/').next().unwrap_or(last);
                        if name.contains('.') && !name.ends_with('.') {
                            push(last, &mut out);
                        }
                    }
                }
                "git" if args.first() == Some(&"apply") => {
                    for f in diff_targets(cmd.heredoc.as_deref().unwrap_or("")) {
                        push(f, &mut out);
                    }
                }
                "patch" => {
                    for f in diff_targets(cmd.heredoc.as_deref().unwrap_or("")) {
                        push(f, &mut out);
                    }
                }
                name if is_python(name) => {
                    let mut code: Vec<&str> = Vec::new();
                    if let Some(k) = args.iter().position(|a| *a == "-c") {
                        code.extend(args.get(k + 1).copied());
                    } else if let Some(body) = &cmd.heredoc {
                        code.push(body);
                    }
                    if let Some(file) = args.iter().find(|a| !a.starts_with('-')) {
                        code.extend(scripts.iter().filter(|(t, _)| t == file).map(|(_, b)| *b));
                    }
                    for c in code {
                        for f in python_writes(c) {
                            push(&f, &mut out);
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The command whose exit status is the script's: the last one.
    pub fn last(&self) -> Option<&Simple> {
        self.commands.last()
    }

    /// Whether the script runs tests: a command that names a test runner (signals'
    /// [`runs_tests`]: `pytest`, `cargo test`, `go test`, `npm test`, `tox`, ...) other than an
    /// installer or a reader of files (`pip install pytest`, `grep pytest`), or that runs a
    /// Python script (`python reproduce.py`, what agents run to check their work).
    pub fn runs_tests(&self) -> bool {
        self.commands.iter().any(|c| {
            let name = c.name();
            if READERS.contains(&name) || INSTALLERS.contains(&name) {
                return false;
            }
            let argv = c.argv();
            if argv
                .get(1)
                .is_some_and(|a| matches!(a.as_str(), "install" | "add" | "i" | "get"))
            {
                return false;
            }
            runs_tests(&argv.join(" ")) || runs_python_script(argv)
        })
    }

    /// Whether every command only reads (`cat`, `grep`, `ls`, `sed -n`, `git diff`, ...): its
    /// output is a file's or a search's, whose lines are not errors of the agent's work.
    pub fn only_reads(&self) -> bool {
        !self.commands.is_empty()
            && self.commands.iter().all(|c| {
                let name = c.name();
                let in_place = matches!(name, "sed" | "gsed" | "perl")
                    && !in_place_files(
                        name,
                        &c.argv()
                            .iter()
                            .skip(1)
                            .map(String::as_str)
                            .collect::<Vec<_>>(),
                    )
                    .is_empty();
                let git_reads = name == "git"
                    && c.argv().get(1).is_some_and(|a| {
                        matches!(
                            a.as_str(),
                            "diff" | "log" | "show" | "status" | "grep" | "blame"
                        )
                    });
                let writes = c.redirects.iter().any(|(op, t)| {
                    op.contains('>') && !op.ends_with(">&") && !t.starts_with("/dev/")
                });
                !writes && !in_place && (READERS.contains(&name) || git_reads || name == "cd")
            })
    }
}

/// Commands that only read and print files or search them.
const READERS: &[&str] = &[
    "cat", "head", "tail", "less", "more", "grep", "egrep", "fgrep", "rg", "ag", "ls", "find",
    "sed", "awk", "nl", "wc", "tree", "echo", "printf", "pwd", "which", "file", "stat", "diff",
    "cut", "sort", "uniq", "du", "df",
];

/// Package installers: `pip install pytest` installs a test runner, it runs no test.
const INSTALLERS: &[&str] = &[
    "pip", "pip3", "conda", "mamba", "apt", "apt-get", "yum", "dnf", "brew", "uv", "poetry",
    "pipx", "gem", "apk",
];

/// Commands whose exit status 1 is an answer, not a failure: `grep` found nothing, `diff` found
/// differences.
pub fn exit_one_is_an_answer(name: &str) -> bool {
    matches!(
        name,
        "grep" | "egrep" | "fgrep" | "rg" | "ag" | "diff" | "cmp" | "test" | "["
    )
}

fn is_python(name: &str) -> bool {
    name == "python"
        || name
            .strip_prefix("python")
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

/// `python reproduce.py`, `python3 -u tests/check.py arg`: a Python interpreter whose first
/// operand is a `.py` file, what agents run to see whether their change works; unless the file
/// is named as a change (`fix`, `patch`, `apply`, `update`, `modify`, `edit`, `replace`,
/// `install`, `setup`, `migrate`, `generate`): `python fix_it.py` is an edit, not a check.
fn runs_python_script(argv: &[String]) -> bool {
    let Some(name) = argv.first() else {
        return false;
    };
    if !is_python(name.rsplit('/').next().unwrap_or(name)) {
        return false;
    }
    let Some(file) = argv
        .iter()
        .skip(1)
        .find(|a| !a.starts_with('-') || a.as_str() == "-")
        .filter(|a| a.ends_with(".py"))
    else {
        return false;
    };
    let stem = file.rsplit('/').next().unwrap_or(file).to_ascii_lowercase();
    ![
        "fix", "patch", "apply", "update", "modify", "edit", "replace", "install", "setup",
        "migrate", "generate",
    ]
    .iter()
    .any(|w| stem.contains(w))
}

/// The files `sed -i` or `perl -i` edits: its operands after the script (the first operand,
/// unless the script came with `-e`, `-f` or `--expression`).
fn in_place_files<'a>(name: &str, args: &[&'a str]) -> Vec<&'a str> {
    let in_place = args.iter().any(|a| {
        *a == "--in-place"
            || a.starts_with("--in-place=")
            || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains('i'))
    });
    if !in_place {
        return Vec::new();
    }
    let mut files = Vec::new();
    let mut script_given = false;
    let mut k = 0;
    while k < args.len() {
        let a = args[k];
        if a == "-e" || a == "-f" || a == "--expression" || a == "--file" {
            script_given = true;
            k += 2;
            continue;
        }
        if a.starts_with("--expression=") || a.starts_with("--file=") {
            script_given = true;
        } else if a.starts_with('-') && a.len() > 1 {
            // Perl's `-pi -e` and sed's `-ie` bundle the script flag last.
            let bundled = if name == "perl" {
                a.ends_with('e')
            } else {
                a.len() > 2 && a.ends_with('e') && !a.starts_with("-i")
            };
            if bundled {
                script_given = true;
                k += 2;
                continue;
            }
        } else if !script_given {
            script_given = true;
        } else {
            files.push(a);
        }
        k += 1;
    }
    files
}

/// The files a unified diff changes: the paths of its `+++ b/...` lines.
fn diff_targets(diff: &str) -> Vec<&str> {
    diff.lines()
        .filter_map(|l| l.strip_prefix("+++ "))
        .map(|p| p.split('\t').next().unwrap_or(p).trim())
        .map(|p| p.strip_prefix("b/").unwrap_or(p))
        .filter(|p| *p != "/dev/null")
        .collect()
}

/// Files that Python code opens for writing: `open("x", "w")`, `open('x', mode='a')`,
/// `Path("x").write_text(...)`, `Path("x").open("w")`. Only string literals: a name held in a
/// variable is not known.
pub fn python_writes(code: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (at, _) in code.match_indices("open(") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + 5..];
        let Some((path, rest)) = string_literal(rest) else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(rest) = rest.strip_prefix(',') else {
            continue;
        };
        let rest = rest.trim_start();
        let rest = rest.strip_prefix("mode").map_or(rest, |r| {
            r.trim_start().trim_start_matches('=').trim_start()
        });
        if let Some((mode, _)) = string_literal(rest) {
            if mode.contains(['w', 'a', 'x']) && !out.contains(&path) {
                out.push(path);
            }
        }
    }
    for (at, _) in code.match_indices("Path(") {
        let Some((path, rest)) = string_literal(&code[at + 5..]) else {
            continue;
        };
        let rest = rest.trim_start().strip_prefix(')').unwrap_or("");
        let writes = rest.starts_with(".write_text(")
            || rest.starts_with(".write_bytes(")
            || rest
                .strip_prefix(".open(")
                .and_then(string_literal)
                .is_some_and(|(m, _)| m.contains(['w', 'a', 'x']));
        if writes && !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// A Python string literal at the start of `s` (after spaces; `r`/`b` prefixes allowed, not
/// f-strings): its text and what follows it.
fn string_literal(s: &str) -> Option<(String, &str)> {
    let s = s.trim_start();
    let s = s.strip_prefix(['r', 'b', 'R', 'B']).unwrap_or(s);
    let quote = s.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let body = &s[1..];
    let end = body.find([quote, '\n'])?;
    if body[end..].starts_with('\n') {
        return None;
    }
    Some((body[..end].to_string(), &body[end + 1..]))
}

/// Files commonly named without an extension.
const BARE_FILES: &[&str] = &[
    "Makefile",
    "Dockerfile",
    "Gemfile",
    "Rakefile",
    "Procfile",
    "Vagrantfile",
    "Jenkinsfile",
    "README",
    "LICENSE",
    "CHANGELOG",
    "NOTICE",
    "AUTHORS",
    "CODEOWNERS",
];

/// Whether a word names a file, not noise: no spaces, quotes, globs, escapes, variables or
/// options; not a device (`/dev/null`), not `.` or `..`; at least one letter or digit in its last
/// part, and a `/` or a `.` somewhere (`src/x.py`, `notes.txt`, `./build/out`). A regex or sed
/// script (`s/a/b/g`, `\n\n\2/s`), a fragment (`/e`, `/def`) or a local name (`result`) is none.
pub fn is_file_path(p: &str) -> bool {
    if p.is_empty() || p.len() > 300 {
        return false;
    }
    let ok_char = |c: char| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '~' | '+');
    if !p.chars().all(ok_char) || p.starts_with('-') {
        return false;
    }
    if p.starts_with("/dev/") || p.starts_with("/proc/") || p == "/dev" {
        return false;
    }
    let last = p.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    if last.is_empty() || last == "." || last == ".." || !last.chars().any(char::is_alphanumeric) {
        return false;
    }
    // A bare word with no `.` is a name, not a file; `/x` with a one- or two-letter name is a
    // regex flag or a fragment (`/g`, `/e`), and a lone `/word` at the root is rarely a file an
    // agent writes.
    let parts = p.split('/').filter(|s| !s.is_empty()).count();
    if !p.contains('/') {
        return (last.contains('.') && last.chars().filter(|c| c.is_alphanumeric()).count() >= 2)
            || BARE_FILES.contains(&last);
    }
    if p.starts_with('/') && parts == 1 && !last.contains('.') {
        return false;
    }
    // `s/a/b/g`-like scripts have short parts and no extension.
    if p.starts_with("s/") || p.starts_with("y/") {
        return false;
    }
    last.contains('.') || parts >= 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::common::assert_classifies;

    fn files(s: &str) -> Vec<String> {
        parse(s).written_files()
    }

    #[test]
    fn words_quotes_and_operators() {
        let s = parse(
            "cd /repo && python -m pytest 'tests/a b.py' -k \"x y\" 2>&1 | tail -5; echo done",
        );
        let words: Vec<Vec<String>> = s.commands.iter().map(|c| c.words.clone()).collect();
        assert_eq!(
            words,
            vec![
                vec!["cd", "/repo"],
                vec!["python", "-m", "pytest", "tests/a b.py", "-k", "x y"],
                vec!["tail", "-5"],
                vec!["echo", "done"],
            ]
        );
        assert_eq!(
            s.commands[1].redirects,
            vec![("2>&".to_string(), "1".to_string())]
        );
        assert_eq!(s.last().unwrap().name(), "echo");
    }

    #[test]
    fn files_written_by_shell_edits() {
        assert_eq!(
            files("sed -i 's/np\\.Inf/np.inf/g' ./pvlib/singlediode.py"),
            ["./pvlib/singlediode.py"]
        );
        assert_eq!(
            files("sed -i \"s/freq='6H'/freq='6h'/g\" ./pvlib/tests/test_irradiance.py"),
            ["./pvlib/tests/test_irradiance.py"]
        );
        assert_eq!(
            files("sed -i -e 's/a/b/' -e 's/c/d/' a.py b.py"),
            ["a.py", "b.py"]
        );
        assert_eq!(
            files("sed -n '793,900p' ./pvlib/irradiance.py"),
            Vec::<String>::new()
        );
        assert_eq!(files("perl -pi -e 's/a/b/' src/x.rs"), ["src/x.rs"]);
        assert_eq!(
            files("echo hi >> notes.txt && cat x > out/y.log 2>/dev/null"),
            ["notes.txt", "out/y.log"]
        );
        assert_eq!(files("python x.py > /dev/null 2>&1"), Vec::<String>::new());
        assert_eq!(files("echo x | tee -a CHANGES.md"), ["CHANGES.md"]);
        assert_eq!(
            files("touch /workspace/test_project/__init__.py"),
            ["/workspace/test_project/__init__.py"]
        );
        assert_eq!(
            files("cp ./pvlib/irradiance.py ./pvlib/irradiance.py.backup"),
            ["./pvlib/irradiance.py.backup"]
        );
        assert_eq!(files("cp -r src build"), Vec::<String>::new());
        // A heredoc's body is not read as commands: its `>` are Python's.
        let heredoc = "cat > reproduce_issue.py << 'EOF'\nimport numpy as np\nif a > b:\n    print(x >> 2)\nEOF\npython reproduce_issue.py";
        assert_eq!(files(heredoc), ["reproduce_issue.py"]);
        assert_eq!(
            parse(heredoc).command_lines(heredoc),
            [
                "cat > reproduce_issue.py << 'EOF'",
                "python reproduce_issue.py"
            ]
        );
        // A patch's targets are in its diff.
        let patch =
            "git apply <<'PATCH'\n--- a/src/x.py\n+++ b/src/x.py\n@@ -1 +1 @@\n-a\n+b\nPATCH";
        assert_eq!(files(patch), ["src/x.py"]);
        // Python that writes a file, run from a heredoc or written to a script and run.
        let py =
            "python3 - <<EOF\nwith open('./pvlib/irradiance.py', 'w') as f:\n    f.write(s)\nEOF";
        assert_eq!(files(py), ["./pvlib/irradiance.py"]);
        let script = "cat > fix.py << 'EOF'\nlines = open('a.py').read()\nopen('a.py', mode='w').write(lines)\nEOF\npython fix.py";
        assert_eq!(files(script), ["fix.py", "a.py"]);
        assert_eq!(
            files("python -c \"from pathlib import Path; Path('out.txt').write_text('x')\""),
            ["out.txt"]
        );
    }

    #[test]
    fn noise_is_not_a_path() {
        let paths = [
            "src/x.py",
            "./a.txt",
            "/workspace/django/db/models/deletion.py",
            "Makefile.am",
            "build/out",
            "~/notes.md",
        ];
        let noise = [
            "/def",
            "/e",
            "\\n\\n\\2/s",
            "s/a/b/g",
            "$OUT",
            "-i",
            "/dev/null",
            "&1",
            "result",
            "..",
            "x",
            "a.",
            "{a}.py",
            "*.py",
            "'x.py'",
        ];
        assert_classifies(is_file_path, &paths, &noise);
    }

    #[test]
    fn tests_and_reads() {
        for c in [
            "cd /testbed && python -m pytest pvlib/tests/test_irradiance.py::test_reindl -xvs 2>&1 | tail -50",
            "python reproduce_issue.py",
            "cd /workspace && PYTHONPATH=/workspace python3 reproduce.py",
            "cargo test --lib",
            "tox -e py311",
        ] {
            assert!(parse(c).runs_tests(), "{c}");
        }
        for c in [
            "pip install pytest -q",
            "grep -n pytest setup.cfg",
            "python -c 'print(1)'",
            "ls tests/",
            "cat test_x.py",
            "python fix_reindl.py",
        ] {
            assert!(!parse(c).runs_tests(), "{c}");
        }
        assert!(parse("cd /repo && grep -rn 'def x' . | head -20").only_reads());
        assert!(parse("sed -n '1,20p' a.py").only_reads());
        assert!(!parse("sed -i 's/a/b/' a.py").only_reads());
        assert!(!parse("cat > a.py <<EOF\nx\nEOF").only_reads());
        assert!(!parse("python x.py").only_reads());
    }
}
