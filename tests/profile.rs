//! Profiles (SPEC §4): where ctx.toml is looked for, `CTX_PROFILE`, `--config`, flags beating
//! profile values, and keys applying to every command that has the flag.

mod isolated;

use std::path::{Path, PathBuf};

const CHAT: &str = "tests/data/fit_agent.json";

/// A fresh directory under the target directory.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("profile-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs ctx in `cwd` with `XDG_CONFIG_HOME` set to `config_home`.
fn ctx(
    cwd: &Path,
    config_home: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> (i32, String, String) {
    let input = std::fs::canonicalize(CHAT).unwrap();
    let mut c = isolated::command();
    c.current_dir(cwd)
        .env("XDG_CONFIG_HOME", config_home)
        .args(args)
        .arg(input);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_current_directory_beats_the_user_config_directory() {
    let home = scratch("home");
    let cwd = scratch("cwd");
    std::fs::create_dir_all(home.join("ctx")).unwrap();
    std::fs::write(
        home.join("ctx/ctx.toml"),
        "[profile.p]\noutput = \"total\"\n",
    )
    .unwrap();
    // Only the user's file: it is used.
    let (code, out, err) = ctx(&cwd, &home, &[], &["count", "--profile", "p"]);
    assert_eq!((code, out.trim()), (0, "3163"), "{err}");
    // A file in the current directory wins.
    std::fs::write(
        cwd.join("ctx.toml"),
        "[profile.p]\noutput = \"total\"\nbudget = 1000\n",
    )
    .unwrap();
    let (code, out, _) = ctx(&cwd, &home, &[], &["count", "--profile", "p"]);
    assert_eq!(
        (code, out.trim()),
        (1, "3163"),
        "the budget of ./ctx.toml applies"
    );
}

#[test]
fn ctx_profile_selects_and_config_overrides() {
    let home = scratch("home2");
    let cwd = scratch("cwd2");
    std::fs::write(cwd.join("ctx.toml"), "[profile.p]\noutput = \"total\"\n").unwrap();
    let other = cwd.join("other.toml");
    std::fs::write(&other, "[profile.p]\noutput = \"table\"\n").unwrap();
    let (code, out, _) = ctx(&cwd, &home, &[("CTX_PROFILE", "p")], &["count"]);
    assert_eq!((code, out.trim()), (0, "3163"));
    let (code, out, _) = ctx(
        &cwd,
        &home,
        &[("CTX_PROFILE", "p")],
        &["count", "--config", other.to_str().unwrap()],
    );
    assert_eq!(code, 0);
    assert!(out.contains("3,163") && out.lines().count() > 1, "{out}");
    // --profile beats CTX_PROFILE.
    let (code, _, err) = ctx(
        &cwd,
        &home,
        &[("CTX_PROFILE", "p")],
        &["count", "--profile", "q"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("no profile 'q'"), "{err}");
}

#[test]
fn flags_beat_the_profile_and_keys_apply_where_the_flag_exists() {
    let home = scratch("home3");
    let cwd = scratch("cwd3");
    std::fs::write(
        cwd.join("ctx.toml"),
        "[profile.p]\nbudget = 500\nkeep_last = 2\ncompact = true\nexclude-tools = [\"run\", \"read_file\"]\n",
    )
    .unwrap();
    // fit has --budget, --compact and --exclude-tools, not --keep-last.
    let (code, out, err) = ctx(
        &cwd,
        &home,
        &[],
        &["fit", "--profile", "p", "--report", "-"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "compact output from the profile");
    let report: serde_json::Value = serde_json::from_str(err.trim()).unwrap();
    assert_eq!(report["budget"], 500);
    assert_eq!(
        report["stopped_at"], "truncate",
        "the excluded tools were not cleared"
    );
    assert!(
        report["stages"][0]["cleared"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let (code, out, _) = ctx(
        &cwd,
        &home,
        &[],
        &["fit", "--profile", "p", "--budget", "5000"],
    );
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 1, "compact output from the profile");
    // truncate has --keep-last: two messages besides the pinned ones.
    let (code, out, err) = ctx(
        &cwd,
        &home,
        &[],
        &["truncate", "--profile", "p", "--budget", "5000"],
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["messages"].as_array().unwrap().len(), 3, "{v}");
}

#[test]
fn bad_profiles_are_errors_naming_the_file_and_key() {
    let home = scratch("home4");
    let cwd = scratch("cwd4");
    let cases = [
        (
            "[profile.p]\nbudgte = 5\n",
            "[profile.p] budgte: unknown key",
        ),
        (
            "[profile.p]\nbudget = \"lots\"\n",
            "[profile.p] budget: invalid value",
        ),
        (
            "[profile.p]\ncompact = \"yes\"\n",
            "[profile.p] compact: expected true or false",
        ),
        (
            "[profile.p]\nstrategy = \"newest\"\n",
            "[profile.p] strategy: invalid value",
        ),
        (
            "[profile.p]\nprofile = \"q\"\n",
            "[profile.p] profile: cannot be set",
        ),
        ("[profile.p\n", "invalid TOML"),
        ("budget = 5\n", "unknown key 'budget'"),
    ];
    for (text, want) in cases {
        std::fs::write(cwd.join("ctx.toml"), text).unwrap();
        let (code, out, err) = ctx(&cwd, &home, &[], &["truncate", "--profile", "p"]);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(out.is_empty());
        assert!(
            err.contains("ctx.toml") && err.contains(want),
            "{text}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
    std::fs::remove_file(cwd.join("ctx.toml")).unwrap();
    let (code, _, err) = ctx(&cwd, &home, &[], &["count", "--profile", "p"]);
    assert_eq!(code, 2);
    assert!(err.contains("no ctx.toml"), "{err}");
}
