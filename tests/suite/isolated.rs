//! Spawning `ctx` from the tests in an environment of the test's own making: whatever the
//! developer has exported (`CTX_MODEL`, `CTX_PROFILE`, `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, a
//! proxy) or keeps in `~/.config/ctx/ctx.toml` must not change an outcome. A test that means a
//! variable sets it after [`isolate`] with `.env`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

/// The variables that reach `ctx` from a developer's shell and can change what it does.
fn is_ambient(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("CTX_")
        || upper.starts_with("OPENAI_")
        || upper.starts_with("ANTHROPIC_")
        || upper.starts_with("GEMINI_")
        || upper.starts_with("GOOGLE_")
        || upper.ends_with("_PROXY")
        || upper == "RUST_BACKTRACE"
}

/// The variables ctx reads, blanked even when the test process does not have them.
const READ_BY_CTX: &[&str] = &[
    "CTX_MODEL",
    "CTX_PROFILE",
    "CTX_BASE_URL",
    "CTX_API_KEY",
    "CTX_SUMMARY_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CTX_ANTHROPIC_BASE_URL",
    "CTX_GEMINI_BASE_URL",
    "CTX_OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
];

/// An empty directory for `HOME` and `XDG_CONFIG_HOME`, so no user config is found. Nothing
/// may write into it.
pub fn empty_home() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("empty-home");
    std::fs::create_dir_all(&d).expect("create the empty home directory");
    d
}

/// Removes every ambient variable from `cmd` and points `HOME` and `XDG_CONFIG_HOME` at an
/// empty directory.
pub fn isolate(cmd: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if is_ambient(&name.to_string_lossy()) {
            cmd.env_remove(&name);
        }
    }
    let home = empty_home();
    cmd.env("HOME", &home).env("XDG_CONFIG_HOME", &home)
}

/// `ctx`, isolated.
pub fn command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ctx"));
    isolate(&mut cmd);
    cmd
}

/// The same isolation as variables to set, for runners that can only add variables (trycmd):
/// every ambient variable blanked (ctx reads an empty variable as unset), `HOME` and
/// `XDG_CONFIG_HOME` at the empty directory.
pub fn blanked_vars() -> Vec<(String, String)> {
    let mut names: Vec<String> = READ_BY_CTX.iter().map(|s| s.to_string()).collect();
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if is_ambient(&name) && !names.contains(&name) {
            names.push(name);
        }
    }
    let home = empty_home().to_string_lossy().into_owned();
    let mut vars: Vec<(String, String)> = names.into_iter().map(|n| (n, String::new())).collect();
    vars.push(("HOME".into(), home.clone()));
    vars.push(("XDG_CONFIG_HOME".into(), home));
    vars
}

/// What a run of `ctx` wrote, and how it ended (-1: killed by a signal).
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Fails unless stderr holds `wanted`.
    pub fn assert_stderr_has(&self, wanted: &str) {
        assert!(
            self.stderr.contains(wanted),
            "{wanted:?} is not on stderr: {}",
            self.stderr
        );
    }

    /// Stdout as JSON; fails the test when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }
}

/// Runs `ctx ARGS`, isolated, with the variables of `env` set and `input` on stdin.
pub fn run(args: &[&str], env: &[(&str, &str)], input: impl Into<Vec<u8>>) -> Run {
    let out = output(command().envs(env.iter().copied()).args(args), input);
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `cmd` with `input` on stdin and returns what it wrote.
pub fn output(cmd: &mut Command, input: impl Into<Vec<u8>>) -> Output {
    feed(spawn(cmd), input)
}

/// Starts `cmd` with stdin, stdout and stderr piped.
pub fn spawn(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ctx")
}

/// Writes `input` to the child's stdin from a thread (so a large input cannot block on a full
/// stdout pipe), waits for the child and returns what it wrote.
pub fn feed(mut child: Child, input: impl Into<Vec<u8>>) -> Output {
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.into();
    // ctx may stop reading early (an error): a broken pipe is not the test's failure.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait for ctx");
    writer.join().expect("stdin writer");
    out
}
