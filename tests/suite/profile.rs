//! Profiles (SPEC §4): where ctx.toml is looked for, `CTX_PROFILE`, `--config`, flags beating
//! profile values, and keys applying to every command that has the flag.

use crate::isolated;

use std::path::{Path, PathBuf};

const CHAT: &str = "tests/data/fit_agent.json";

/// A fresh directory under the target directory.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("profile-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A test's own current directory and user config directory (`XDG_CONFIG_HOME`).
struct Dirs {
    cwd: PathBuf,
    home: PathBuf,
}

impl Dirs {
    /// Fresh `profile-cwdN` and `profile-homeN` directories.
    fn new(n: &str) -> Dirs {
        Dirs {
            cwd: scratch(&format!("cwd{n}")),
            home: scratch(&format!("home{n}")),
        }
    }

    /// Writes `text` into ./ctx.toml, the file of the current directory.
    fn local(&self, text: impl AsRef<[u8]>) {
        std::fs::write(self.cwd.join("ctx.toml"), text).unwrap();
    }

    /// Runs ctx in the current directory with the user config directory.
    fn ctx(&self, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
        ctx(&self.cwd, &self.home, env, args)
    }
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
    let dirs = Dirs::new("");
    let home = &dirs.home;
    std::fs::create_dir_all(home.join("ctx")).unwrap();
    std::fs::write(
        home.join("ctx/ctx.toml"),
        "[profile.p]\noutput = \"total\"\n",
    )
    .unwrap();
    // Only the user's file: it is used.
    let (code, out, err) = dirs.ctx(&[], &["count", "--profile", "p"]);
    assert_eq!((code, out.trim()), (0, "3163"), "{err}");
    // A file in the current directory wins.
    dirs.local("[profile.p]\noutput = \"total\"\nbudget = 1000\n");
    let (code, out, _) = dirs.ctx(&[], &["count", "--profile", "p"]);
    assert_eq!(
        (code, out.trim()),
        (1, "3163"),
        "the budget of ./ctx.toml applies"
    );
}

#[test]
fn ctx_profile_selects_and_config_overrides() {
    let dirs = Dirs::new("2");
    let cwd = &dirs.cwd;
    dirs.local("[profile.p]\noutput = \"total\"\n");
    let other = cwd.join("other.toml");
    std::fs::write(&other, "[profile.p]\noutput = \"table\"\n").unwrap();
    let (code, out, _) = dirs.ctx(&[("CTX_PROFILE", "p")], &["count"]);
    assert_eq!((code, out.trim()), (0, "3163"));
    let (code, out, _) = dirs.ctx(
        &[("CTX_PROFILE", "p")],
        &["count", "--config", other.to_str().unwrap()],
    );
    assert_eq!(code, 0);
    assert!(out.contains("3,163") && out.lines().count() > 1, "{out}");
    // --profile beats CTX_PROFILE.
    let (code, _, err) = dirs.ctx(&[("CTX_PROFILE", "p")], &["count", "--profile", "q"]);
    assert_eq!(code, 2);
    assert!(err.contains("no profile 'q'"), "{err}");
}

#[test]
fn flags_beat_the_profile_and_keys_apply_where_the_flag_exists() {
    let dirs = Dirs::new("3");
    dirs.local("[profile.p]\nbudget = 500\nkeep_last = 2\ncompact = true\nexclude-tools = [\"run\", \"read_file\"]\n");
    // fit has --budget, --compact and --exclude-tools, not --keep-last.
    let (code, out, err) = dirs.ctx(&[], &["fit", "--profile", "p", "--report", "-"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "compact output from the profile");
    let report: serde_json::Value = serde_json::from_str(err.trim()).unwrap();
    assert_eq!(report["budget"], 500);
    assert_eq!(
        report["stopped_at"], "truncate-all",
        "the excluded tools were not cleared"
    );
    assert!(
        report["stages"][0]["cleared"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let (code, out, _) = dirs.ctx(&[], &["fit", "--profile", "p", "--budget", "5000"]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 1, "compact output from the profile");
    // truncate has --keep-last: two messages besides the pinned ones.
    let (code, out, err) = dirs.ctx(&[], &["truncate", "--profile", "p", "--budget", "5000"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["messages"].as_array().unwrap().len(), 3, "{v}");
}

#[test]
fn bad_profiles_are_errors_naming_the_file_and_key() {
    let dirs = Dirs::new("4");
    let cwd = &dirs.cwd;
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
        dirs.local(text);
        let (code, out, err) = dirs.ctx(&[], &["truncate", "--profile", "p"]);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(out.is_empty());
        assert!(
            err.contains("ctx.toml") && err.contains(want),
            "{text}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
    std::fs::remove_file(cwd.join("ctx.toml")).unwrap();
    let (code, _, err) = dirs.ctx(&[], &["count", "--profile", "p"]);
    assert_eq!(code, 2);
    assert!(err.contains("no ctx.toml"), "{err}");
}

/// A port where a listener waits, and whether anyone connected to it.
fn listener() -> (std::net::TcpListener, String) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let url = format!("http://127.0.0.1:{}/v1", l.local_addr().unwrap().port());
    (l, url)
}

fn contacted(l: &std::net::TcpListener) -> bool {
    std::thread::sleep(std::time::Duration::from_millis(100));
    l.accept().is_ok()
}

#[test]
fn an_implicit_ctx_toml_cannot_send_read_or_write() {
    let dirs = Dirs::new("5");
    let (cwd, home) = (&dirs.cwd, &dirs.home);
    let (server, url) = listener();
    let secret = cwd.join("secret.txt");
    std::fs::write(&secret, "not for a server").unwrap();
    let secret = secret.display().to_string().replace('\\', "/");
    let cases: Vec<(String, &str, &str)> = vec![
        (format!("base_url = \"{url}\""), "base_url", "summarize"),
        (format!("base-url = \"{url}\""), "base-url", "count"),
        (
            format!("prompt_file = \"{secret}\""),
            "prompt_file",
            "summarize",
        ),
        (
            format!("summary_file = \"{secret}\""),
            "summary_file",
            "fit",
        ),
        (format!("tools = \"{secret}\""), "tools", "count"),
        ("report = \"written.json\"".into(), "report", "truncate"),
        ("dropped = \"written.json\"".into(), "dropped", "prune"),
        ("engine = \"llm\"".into(), "engine", "summarize"),
        ("summarize = \"llm\"".into(), "summarize", "fit"),
    ];
    // OPENAI_BASE_URL and OPENAI_API_KEY in the environment: `engine = "llm"` alone would send
    // the conversation and the key there.
    let env = [
        ("OPENAI_BASE_URL", url.as_str()),
        ("OPENAI_API_KEY", "sk-profile-test"),
        ("CTX_API_KEY", ""),
        ("CTX_BASE_URL", ""),
    ];
    for (line, key, command) in &cases {
        dirs.local(format!("[profile.p]\n{line}\n"));
        let mut args = vec![*command, "--profile", "p"];
        if *command == "summarize" {
            args.push("--force");
        }
        let (code, out, err) = dirs.ctx(&env, &args);
        assert_eq!(code, 2, "{line}: {err}");
        assert!(out.is_empty(), "{line}: {out}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.contains(&format!("ctx.toml: [profile.p] {key}: not honoured")),
            "{err}"
        );
        assert!(err.contains("current directory"), "{err}");
        let home_file = home.join("ctx").join("ctx.toml").display().to_string();
        assert!(err.contains(&home_file), "says where to move it: {err}");
        assert!(err.contains("--config"), "says how to opt in: {err}");
        assert!(
            !cwd.join("written.json").exists(),
            "{line}: a file was written"
        );
        assert!(!contacted(&server), "{line}: the server was contacted");
    }
    // Thresholds, and engines that do not call a server, are fine.
    dirs.local("[profile.p]\nengine = \"extractive\"\nsummarize = \"extractive\"\nkeep_recent = 2\ntimeout = 5\n");
    let (code, _, err) = dirs.ctx(&env, &["summarize", "--profile", "p", "--force", "-q"]);
    assert_eq!(code, 0, "{err}");
    assert!(!contacted(&server));
}

#[test]
fn trusted_profile_files_may_name_servers_and_files() {
    let dirs = Dirs::new("6");
    let (cwd, home) = (&dirs.cwd, &dirs.home);
    let text = "[profile.p]\nreport = \"written.json\"\nbudget = 2000\n";
    dirs.local(text);
    // Named with --config, the same file is honoured.
    let (code, _, err) = dirs.ctx(
        &[],
        &["truncate", "--profile", "p", "--config", "./ctx.toml"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(cwd.join("written.json").exists());
    std::fs::remove_file(cwd.join("written.json")).unwrap();
    // From the user's config directory too.
    std::fs::remove_file(cwd.join("ctx.toml")).unwrap();
    std::fs::create_dir_all(home.join("ctx")).unwrap();
    std::fs::write(home.join("ctx/ctx.toml"), text).unwrap();
    let (code, _, err) = dirs.ctx(&[], &["truncate", "--profile", "p"]);
    assert_eq!(code, 0, "{err}");
    assert!(cwd.join("written.json").exists());
    // And when the current directory is the user's config directory, its file is that file.
    let (code, _, err) = ctx(
        &home.join("ctx"),
        home,
        &[],
        &["truncate", "--profile", "p"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(home.join("ctx/written.json").exists());
}

#[test]
fn profile_timeouts_out_of_range_are_errors_not_panics() {
    let dirs = Dirs::new("7");
    for value in ["1e20", "-1", "0", "nan", "inf", "\"1e20\"", "100000"] {
        dirs.local(format!("[profile.p]\ntimeout = {value}\n"));
        let (code, _, err) = dirs.ctx(
            &[],
            &["summarize", "--profile", "p", "--engine", "extractive"],
        );
        assert_eq!(code, 2, "timeout = {value}: {err}");
        assert!(
            err.contains("[profile.p] timeout: invalid value"),
            "timeout = {value}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    dirs.local("[profile.p]\nretries = 4294967296\n");
    let (code, _, err) = dirs.ctx(&[], &["summarize", "--profile", "p"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("[profile.p] retries: invalid value"), "{err}");
}
