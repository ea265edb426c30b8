//! Profiles: defaults for any flag, read from `[profile.NAME]` in `ctx.toml` (SPEC §4).
//!
//! A profile is applied to the command line before it is parsed for real: each key names a long
//! flag (`max_tool_tokens` or `max-tool-tokens` for `--max-tool-tokens`), and becomes that flag
//! for every command that has it, unless the command line already gives it (flags beat the
//! profile). Values are checked with the flag's own parser, so a bad value is reported with the
//! file and key rather than as a puzzling usage error. This module reads files and the
//! environment; it never writes anything.
//!
//! A `ctx.toml` found in the current directory may have come with a cloned repository, so it is
//! trusted with thresholds only: a key that could send conversations or keys to a server
//! (`base_url` and the providers' base URLs, `engine`/`summarize` = `"llm"`, `exact`), read
//! local files into a request (`prompt_file`,
//! `summary_file`, `tools`) or write files (`report`, `dropped`) is an error there. Those keys are
//! honoured from the user's config directory or a file named with `--config`.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use clap::parser::ValueSource;
use clap::{ArgAction, Command};

/// The file name looked for in the current directory and the user's config directory.
pub const FILE_NAME: &str = "ctx.toml";

/// Keys that select the profile itself, or are not flags, and so cannot be set in one.
const NOT_SETTABLE: &[&str] = &["profile", "config", "help", "version"];

/// Flags an implicit `./ctx.toml` may not set: they name a server, or a file to read into a
/// request or to write. Any flag taking a file or a URL is treated the same (see [`trusted_only`]).
const TRUSTED_ONLY: &[&str] = &[
    "base-url",
    "prompt-file",
    "summary-file",
    "tools",
    "report",
    "dropped",
];

/// Flags an implicit `./ctx.toml` may not set to `llm`: with `OPENAI_BASE_URL` and
/// `OPENAI_API_KEY` in the environment, that alone would send conversations to a server.
const NO_LLM: &[&str] = &["engine", "summarize"];

/// Flags an implicit `./ctx.toml` may set only to `off` (or false): `count --exact` sends each
/// conversation to its provider with the key in the environment.
const NO_NETWORK: &[&str] = &["exact"];

/// Where the profile file was found: only a file in the current directory is untrusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    /// Named with `--config`.
    Named,
    /// In the user's config directory.
    UserConfig,
    /// `./ctx.toml`, found without being asked for.
    CurrentDirectory,
}

/// Where a profile may come from, as the process sees it.
#[derive(Clone, Debug, Default)]
pub struct Lookup {
    /// `$CTX_PROFILE`.
    pub env_profile: Option<String>,
    /// The current directory.
    pub cwd: Option<PathBuf>,
    /// The user's config directory for ctx (`$XDG_CONFIG_HOME/ctx`, else `~/.config/ctx`).
    pub config_dir: Option<PathBuf>,
}

impl Lookup {
    /// Reads the process environment.
    pub fn from_process() -> Lookup {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let config_dir = var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")))
            .map(|d| d.join("ctx"));
        Lookup {
            env_profile: var("CTX_PROFILE").map(|v| v.to_string_lossy().into_owned()),
            cwd: std::env::current_dir().ok(),
            config_dir,
        }
    }
}

/// Returns `args` with the selected profile's flags added after the subcommand's name. When no
/// profile is selected (no `--profile`, no `$CTX_PROFILE`), or the command line does not parse
/// (clap reports that later, with its own message), `args` comes back unchanged.
pub fn apply(args: Vec<OsString>, cli: &Command, lookup: &Lookup) -> Result<Vec<OsString>> {
    let mut cli = cli.clone();
    cli.build();
    let cli = &cli;
    let Ok(matches) = cli.clone().try_get_matches_from(&args) else {
        return Ok(args);
    };
    let Some((sub_name, sub_matches)) = matches.subcommand() else {
        return Ok(args);
    };
    let flag = |id: &str| {
        sub_matches
            .try_get_one::<String>(id)
            .ok()
            .flatten()
            .cloned()
    };
    let Some(name) = flag("profile").or_else(|| lookup.env_profile.clone()) else {
        return Ok(args);
    };
    let config = sub_matches
        .try_get_one::<PathBuf>("config")
        .ok()
        .flatten()
        .cloned();
    let (path, found) = locate(config.as_deref(), lookup)?;
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let table = profile_table(&text, &path, &name)?;
    let sub = cli
        .find_subcommand(sub_name)
        .expect("the subcommand that matched exists");
    let at = |key: &str| format!("{}: [profile.{name}] {key}", path.display());

    let mut extra: Vec<OsString> = Vec::new();
    for (key, value) in &table {
        let long = key.replace('_', "-");
        if NOT_SETTABLE.contains(&long.as_str()) {
            bail!("{}: cannot be set in a profile", at(key));
        }
        if found == Found::CurrentDirectory && trusted_only(cli, &long, value) {
            let home = lookup.config_dir.as_ref().map_or_else(
                || format!("~/.config/ctx/{FILE_NAME}"),
                |d| d.join(FILE_NAME).display().to_string(),
            );
            bail!(
                "{}: not honoured from a {FILE_NAME} found in the current directory (it could send conversations or keys to a server, or read or write files); to use it, move the profile to {home} or pass --config {}",
                at(key),
                path.display()
            );
        }
        let Some(arg) = sub.get_arguments().find(|a| a.get_long() == Some(&long)) else {
            let known_elsewhere = cli.get_subcommands().any(|c| {
                c.get_arguments()
                    .any(|a| a.get_long() == Some(long.as_str()))
            });
            if known_elsewhere {
                continue; // Another command's flag: it applies there.
            }
            bail!("{}: unknown key (not a flag of any ctx command)", at(key));
        };
        if sub_matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
            continue; // The flag beats the profile.
        }
        let takes_values = arg.get_num_args().is_some_and(|r| r.takes_values());
        let optional_value = arg.get_num_args().is_some_and(|r| r.min_values() == 0);
        let is_switch = matches!(arg.get_action(), ArgAction::SetTrue) || !takes_values;
        match value {
            toml::Value::Boolean(b) if is_switch || optional_value => {
                if *b {
                    extra.push(format!("--{long}").into());
                }
                continue;
            }
            _ if is_switch => bail!("{}: expected true or false", at(key)),
            toml::Value::Boolean(_) => {
                bail!("{}: expected a value, not true or false", at(key))
            }
            _ => {}
        }
        let values: Vec<String> = match value {
            toml::Value::Array(items) => items
                .iter()
                .map(|v| scalar(v).ok_or_else(|| anyhow!("{}: expected a list of values", at(key))))
                .collect::<Result<_>>()?,
            other => vec![
                scalar(other)
                    .ok_or_else(|| anyhow!("{}: expected a string or a number", at(key)))?,
            ],
        };
        let multiple =
            matches!(arg.get_action(), ArgAction::Append) || arg.get_value_delimiter().is_some();
        if values.len() != 1 && !multiple {
            bail!("{}: takes one value, not a list", at(key));
        }
        let flags: Vec<OsString> = if arg.get_value_delimiter().is_some() {
            vec![format!("--{long}={}", values.join(",")).into()]
        } else {
            values
                .iter()
                .map(|v| OsString::from(format!("--{long}={v}")))
                .collect()
        };
        // The flag's own parser checks the value: the subcommand alone, given only this flag.
        let probe = std::iter::once(OsString::from(sub_name)).chain(flags.iter().cloned());
        if let Err(e) = sub.clone().try_get_matches_from(probe) {
            bail!("{}: invalid value: {}", at(key), clap_reason(&e));
        }
        extra.extend(flags);
    }
    // The profile's flags go right after the subcommand's name, so they are never mistaken
    // for input files (after a `--`) and the command line's own flags still read the same.
    let pos = (1..args.len())
        .find(|&i| {
            args[i] == OsStr::new(sub_name)
                && !matches!(args[i - 1].to_str(), Some("--profile" | "--config"))
        })
        .expect("the subcommand's name is on the command line");
    let mut out = args;
    out.splice(pos + 1..pos + 1, extra);
    Ok(out)
}

/// Whether the key `long` (a flag's name) with `value` is one only a trusted file may set: a
/// flag of [`TRUSTED_ONLY`], any flag of any command that takes a file or a URL, or `llm` for a
/// flag of [`NO_LLM`].
fn trusted_only(cli: &Command, long: &str, value: &toml::Value) -> bool {
    if TRUSTED_ONLY.contains(&long) {
        return true;
    }
    if NO_LLM.contains(&long) {
        return scalar(value).is_some_and(|v| v.eq_ignore_ascii_case("llm"));
    }
    if NO_NETWORK.contains(&long) {
        return !scalar(value).is_some_and(|v| v == "off" || v == "false");
    }
    let path_like = |arg: &clap::Arg| {
        let parser = arg.get_value_parser().type_id();
        parser == std::any::TypeId::of::<PathBuf>()
            || parser == std::any::TypeId::of::<crate::llm::UrlArg>()
            || arg.get_value_names().into_iter().flatten().any(|n| {
                let n = n.as_str().to_ascii_uppercase();
                ["FILE", "URL", "PATH", "DIR"].iter().any(|w| n.contains(w))
            })
    };
    cli.get_subcommands()
        .chain(std::iter::once(cli))
        .flat_map(Command::get_arguments)
        .any(|a| a.get_long() == Some(long) && path_like(a))
}

/// The profile file: `--config`, else `./ctx.toml`, else the user's config directory; and where
/// it was found. The current directory's file counts as the user's when it is the same file.
fn locate(config: Option<&Path>, lookup: &Lookup) -> Result<(PathBuf, Found)> {
    if let Some(p) = config {
        if !p.is_file() {
            bail!("--config {}: no such file", p.display());
        }
        return Ok((p.to_path_buf(), Found::Named));
    }
    let in_cwd = lookup.cwd.as_ref().map(|d| d.join(FILE_NAME));
    let in_config = lookup.config_dir.as_ref().map(|d| d.join(FILE_NAME));
    let same_file = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if let Some(p) = in_cwd.as_ref().filter(|p| p.is_file()) {
        let found = if in_config.as_deref().is_some_and(|c| same_file(p, c)) {
            Found::UserConfig
        } else {
            Found::CurrentDirectory
        };
        return Ok((p.clone(), found));
    }
    if let Some(p) = in_config.as_ref().filter(|p| p.is_file()) {
        return Ok((p.clone(), Found::UserConfig));
    }
    let looked: Vec<String> = [in_cwd, in_config]
        .into_iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect();
    bail!(
        "a profile was asked for but there is no {FILE_NAME} (looked in {}; use --config FILE)",
        looked.join(", ")
    )
}

/// Parses the file and returns `[profile.NAME]`.
fn profile_table(text: &str, path: &Path, name: &str) -> Result<toml::Table> {
    let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        anyhow!(
            "{}: invalid TOML: {}",
            path.display(),
            e.message().trim().replace('\n', " ")
        )
    })?;
    for key in doc.keys() {
        if key != "profile" {
            bail!(
                "{}: unknown key '{key}' (settings go in [profile.NAME] tables)",
                path.display()
            );
        }
    }
    let profiles = match doc.get("profile") {
        None => toml::Table::new(),
        Some(toml::Value::Table(t)) => t.clone(),
        Some(_) => bail!("{}: 'profile' must be a table of profiles", path.display()),
    };
    match profiles.get(name) {
        Some(toml::Value::Table(t)) => Ok(t.clone()),
        Some(_) => bail!("{}: [profile.{name}] must be a table", path.display()),
        None => {
            let names: Vec<&str> = profiles.keys().map(String::as_str).collect();
            bail!(
                "{}: no profile '{name}' (profiles there: {})",
                path.display(),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        }
    }
}

/// A TOML scalar as the text a flag would get.
fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The reason in a clap value error: the value parser's own words ("'x' is not a token
/// count ..."), else clap's message on one line.
fn clap_reason(e: &clap::Error) -> String {
    match std::error::Error::source(e) {
        Some(why) if e.kind() == clap::error::ErrorKind::ValueValidation => why.to_string(),
        _ => crate::cmd::usage::message(e),
    }
}
