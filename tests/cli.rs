//! Golden CLI tests: each `tests/cmd/<command>-<scenario>.toml` runs `ctx` with its arguments
//! and `.stdin`, and compares stdout, stderr and the exit code with the files beside it.
//! Re-bless after an intended change with `TRYCMD=overwrite cargo test --test cli`, then review
//! the diff like any other. trycmd normalises `\` to `/` in the files it writes (it treats them
//! as Windows path separators), so escaped quotes in JSON appear as `/"` in `.stdout` files.
//!
//! The cases run with every `CTX_*`, `OPENAI_*` and proxy variable blanked and `HOME` and
//! `XDG_CONFIG_HOME` at an empty directory, so a developer's shell or `~/.config/ctx/ctx.toml`
//! cannot change their outcome.

mod isolated;

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn golden() {
    let cases = trycmd::TestCases::new();
    for (name, value) in isolated::blanked_vars() {
        cases.env(name, value);
    }
    cases.case("tests/cmd/*.toml");
}

/// The golden cases pass whatever the developer has exported: they are run again, in a child
/// test process whose environment selects another model, a profile from a user config that
/// would change every budget, an endpoint and keys.
#[test]
fn golden_cases_ignore_the_developers_environment() {
    let home = scratch("hostile-home");
    std::fs::create_dir_all(home.join(".config/ctx")).unwrap();
    let profile = "[profile.x]\nbudget = 10\nmodel = \"claude-sonnet-4\"\n";
    std::fs::write(home.join(".config/ctx/ctx.toml"), profile).unwrap();
    std::fs::write(home.join("ctx.toml"), profile).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["golden", "--exact", "--quiet"])
        .env("CTX_MODEL", "claude-sonnet-4")
        .env("CTX_PROFILE", "x")
        .env("CTX_BASE_URL", "http://127.0.0.1:9/v1")
        .env("CTX_API_KEY", "sk-ctx-hostile")
        .env("CTX_SUMMARY_MODEL", "gpt-4o-mini")
        .env("OPENAI_API_KEY", "sk-hostile")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", &home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "golden cases changed with the environment:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh directory under the target directory.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
