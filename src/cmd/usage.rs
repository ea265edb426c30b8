//! A command-line error from clap, told in one line like every other error (SPEC §5), built from
//! the error's kind and context rather than from clap's rendered text, so that nothing it knows
//! is lost: the valid values, and its "did you mean" suggestions (`ctx cout`, `--budgte`).

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// The one-line message for a usage error, without the `ctx: ` prefix, ending with
/// `(see --help)`.
pub fn one_line(e: &clap::Error) -> String {
    let mut line = message(e);
    line.push_str(" (see --help)");
    line
}

/// What [`one_line`] says before `(see --help)`: what went wrong, the valid values, clap's
/// suggestions and tips, on one line.
pub fn message(e: &clap::Error) -> String {
    let mut line = what(e);
    if let Some(values) = strings(e, ContextKind::ValidValue) {
        let values: Vec<String> = values.iter().map(|v| escape(v)).collect();
        line.push_str(&format!(" (one of: {})", values.join(", ")));
    }
    let suggested = [
        ContextKind::SuggestedSubcommand,
        ContextKind::SuggestedArg,
        ContextKind::SuggestedValue,
    ]
    .into_iter()
    .filter_map(|k| strings(e, k))
    .find(|s| !s.is_empty());
    if let Some(s) = suggested {
        let s: Vec<String> = s.iter().map(|s| format!("'{s}'")).collect();
        line.push_str(&format!(" (did you mean {}?)", s.join(" or ")));
    }
    if let Some(ContextValue::StyledStrs(tips)) = e.get(ContextKind::Suggested) {
        for tip in tips {
            line.push_str(&format!(" (tip: {tip})"));
        }
    }
    // `--note` is a flag; its text has a flag of its own.
    let about_note = matches!(
        e.kind(),
        ErrorKind::InvalidValue
            | ErrorKind::ValueValidation
            | ErrorKind::TooManyValues
            | ErrorKind::WrongNumberOfValues
    ) && string(e, ContextKind::InvalidArg) == Some("--note");
    if about_note {
        line.push_str(" (for your own text: --note-text TEXT)");
    }
    line.replace('\r', "\\r").replace('\n', "\\n")
}

/// What went wrong, in clap's words, on one line.
fn what(e: &clap::Error) -> String {
    let arg = string(e, ContextKind::InvalidArg);
    let value = string(e, ContextKind::InvalidValue);
    let number = |k| match e.get(k) {
        Some(ContextValue::Number(n)) => Some(*n),
        _ => None,
    };
    let quoted = |k| {
        strings(e, k).map(|v| {
            v.iter()
                .map(|v| format!("'{v}'"))
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    let message = match e.kind() {
        ErrorKind::InvalidValue => match (arg, value) {
            (Some(arg), Some("")) => Some(format!(
                "a value is required for '{arg}' but none was supplied"
            )),
            (Some(arg), Some(value)) => Some(format!("invalid value '{value}' for '{arg}'")),
            _ => None,
        },
        ErrorKind::ValueValidation => match (arg, value) {
            (Some(arg), Some(value)) => Some(match std::error::Error::source(e) {
                Some(why) => format!("invalid value '{value}' for '{arg}': {why}"),
                None => format!("invalid value '{value}' for '{arg}'"),
            }),
            _ => None,
        },
        ErrorKind::UnknownArgument => arg.map(|a| format!("unexpected argument '{a}' found")),
        ErrorKind::InvalidSubcommand => string(e, ContextKind::InvalidSubcommand)
            .map(|s| format!("unrecognized subcommand '{s}'")),
        ErrorKind::TooManyValues => match (arg, value) {
            (Some(arg), Some(value)) => Some(format!(
                "unexpected value '{value}' for '{arg}' found; no more were expected"
            )),
            _ => None,
        },
        ErrorKind::ArgumentConflict => {
            let prior = string(e, ContextKind::PriorArg)
                .map(|p| format!("'{p}'"))
                .or_else(|| quoted(ContextKind::PriorArg));
            match (arg, prior) {
                (Some(arg), _) if string(e, ContextKind::PriorArg) == Some(arg) => Some(format!(
                    "the argument '{arg}' cannot be used multiple times"
                )),
                (Some(arg), Some(prior)) => {
                    Some(format!("the argument '{arg}' cannot be used with {prior}"))
                }
                _ => None,
            }
        }
        ErrorKind::MissingRequiredArgument => quoted(ContextKind::InvalidArg)
            .map(|a| format!("the following required arguments were not provided: {a}")),
        ErrorKind::NoEquals => {
            arg.map(|a| format!("equal sign is needed when assigning values to '{a}'"))
        }
        ErrorKind::TooFewValues | ErrorKind::WrongNumberOfValues => {
            let (limit, required) = if e.kind() == ErrorKind::TooFewValues {
                (ContextKind::MinValues, "required by '{arg}'; only")
            } else {
                (ContextKind::ExpectedNumValues, "required for '{arg}' but")
            };
            match (arg, number(ContextKind::ActualNumValues), number(limit)) {
                (Some(arg), Some(n), Some(limit)) => Some(format!(
                    "{limit} values {} {n} {} provided",
                    required.replace("{arg}", arg),
                    if n > 1 { "were" } else { "was" }
                )),
                _ => None,
            }
        }
        _ => None,
    };
    message
        .or_else(|| e.kind().as_str().map(String::from))
        .or_else(|| std::error::Error::source(e).map(|s| s.to_string()))
        .unwrap_or_else(|| "invalid arguments".to_string())
}

fn string(e: &clap::Error, kind: ContextKind) -> Option<&str> {
    match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s),
        _ => None,
    }
}

/// A context value that is a list (or one string, as a list of one).
fn strings(e: &clap::Error, kind: ContextKind) -> Option<Vec<&str>> {
    match e.get(kind) {
        Some(ContextValue::Strings(v)) => Some(v.iter().map(String::as_str).collect()),
        Some(ContextValue::String(s)) => Some(vec![s.as_str()]),
        _ => None,
    }
}

/// A value as clap lists it: quoted when it is empty or holds whitespace.
fn escape(v: &str) -> String {
    if v.is_empty() || v.contains(char::is_whitespace) {
        format!("{v:?}")
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    fn cli() -> Command {
        let budget = Arg::new("budget")
            .long("budget")
            .value_name("N")
            .value_parser(|s: &str| {
                s.parse::<u64>()
                    .map_err(|_| format!("'{s}' is not a count"))
            });
        let count = Command::new("count")
            .arg(budget)
            .arg(Arg::new("json").long("json").action(ArgAction::SetTrue))
            .arg(Arg::new("files").num_args(0..));
        let prune = Command::new("prune")
            .arg(
                Arg::new("thinking")
                    .long("thinking")
                    .value_parser(["keep", "old", "all"]),
            )
            .arg(Arg::new("note").long("note").action(ArgAction::SetTrue))
            .arg(
                Arg::new("note-text")
                    .long("note-text")
                    .value_name("TEXT")
                    .conflicts_with("note"),
            )
            .arg(
                Arg::new("pair")
                    .long("pair")
                    .num_args(2)
                    .value_name("V")
                    .required(false),
            )
            .arg(Arg::new("must").long("must").required(true));
        Command::new("ctx").subcommand(count).subcommand(prune)
    }

    fn error(args: &[&str]) -> String {
        let argv = std::iter::once("ctx").chain(args.iter().copied());
        one_line(&cli().try_get_matches_from(argv).unwrap_err())
    }

    /// Every error keeps what clap knows: suggestions, valid values, the parser's reason, tips,
    /// and the lists clap renders on several lines, all on one line.
    #[test]
    fn errors_keep_what_clap_knows_on_one_line() {
        for (args, expected) in [
            (
                &["cout"][..],
                "unrecognized subcommand 'cout' (did you mean 'count'?)",
            ),
            (
                &["count", "--budgte", "5"],
                "unexpected argument '--budgte' found (did you mean '--budget'?)",
            ),
            (
                &["prune", "--must", "x", "--thinking=kep"],
                "invalid value 'kep' for '--thinking <thinking>' (one of: keep, old, all) (did you mean 'keep'?)",
            ),
            (
                &["count", "-x"],
                "unexpected argument '-x' found (tip: to pass '-x' as a value, use '-- -x')",
            ),
            (
                &["prune", "--must", "x", "--thinking=mayb"],
                "invalid value 'mayb' for '--thinking <thinking>' (one of: keep, old, all)",
            ),
            (
                &["prune", "--must", "x", "--thinking"],
                "a value is required for '--thinking <thinking>' but none was supplied (one of: keep, old, all)",
            ),
            (
                &["count", "--budget", "lots"],
                "invalid value 'lots' for '--budget <N>': 'lots' is not a count",
            ),
            (
                &["prune", "--must", "x", "--note=[gap]"],
                "unexpected value '[gap]' for '--note' found; no more were expected (for your own text: --note-text TEXT)",
            ),
            (
                &["prune"],
                "the following required arguments were not provided: '--must <must>'",
            ),
            (
                &["prune", "--must", "x", "--note", "--note-text", "t"],
                "the argument '--note' cannot be used with '--note-text <TEXT>'",
            ),
            (
                &["prune", "--must", "x", "--pair", "a"],
                "2 values required for '--pair <V> <V>' but 1 was provided",
            ),
        ] {
            assert_eq!(error(args), format!("{expected} (see --help)"), "{args:?}");
        }
        assert!(!error(&["count", "--budget", "a\nb"]).contains('\n'));
    }
}
