//! The library's error: one line saying what went wrong, and its kind.

use std::fmt;

use crate::ops::{CannotFit, SummarizerFailed};

/// A result whose error is the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why an operation failed: what [`Error::kind`] tells apart, as the command line's exit codes
/// do (docs/SPEC.md §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input or an option is not something ctx can work with: not a conversation, a
    /// message without a role, tool calls of the other dialect, a model without a known context
    /// window and none given, an option out of range. Retrying the same call fails the same way.
    /// (The command line's exit 2.)
    Input,
    /// The budget is smaller than what must be kept (the pinned messages and the newest unit):
    /// give a larger budget, pin less, or let more stages run. (Exit 3.)
    CannotFit,
    /// The summarizer could not make a summary that fits where it goes. (Exit 4.)
    Summarizer,
}

/// What went wrong, in one line, as the command line reports it after `ctx: `.
///
/// The message is the cause with where it was found (`message 3 (.messages[3]): ...`); the
/// [`kind`](Error::kind) says what a caller can do about it. Errors name options as the command
/// line spells them (`--context-window`), since the two share their checks.
pub struct Error {
    kind: ErrorKind,
    error: anyhow::Error,
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The library's error for an error of the operations, classified as the command line's
    /// exit code is.
    pub(crate) fn new(error: anyhow::Error) -> Error {
        let kind = if error.downcast_ref::<CannotFit>().is_some() {
            ErrorKind::CannotFit
        } else if error.downcast_ref::<SummarizerFailed>().is_some() {
            ErrorKind::Summarizer
        } else {
            ErrorKind::Input
        };
        Error { kind, error }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("message", &format_args!("{:#}", self.error))
            .finish()
    }
}

/// The message holds the whole cause, so there is no further source.
impl std::error::Error for Error {}
