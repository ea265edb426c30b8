//! The exit codes (SPEC §5) and their severity order, in one place.
//!
//! A run over many documents ends with the most severe code any of them had: a usage or input
//! error (2) outranks a failed summarizer (4), which outranks a document that cannot fit (3),
//! which outranks a failed check (1). This module only names codes and ranks them; choosing the
//! code of an error is [`super::exit_code`], and making the process exit is `main`'s job.

/// How a run, or one document of it, ended (SPEC §5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Exit {
    /// 0: success.
    #[default]
    Success,
    /// 1: a check failed (`count --budget` over budget, `check` found errors); the output is
    /// still written.
    CheckFailed,
    /// 2: a usage or input error (bad flags, unreadable or invalid JSON, wrong shape, unknown
    /// encoding); nothing is written for that document.
    UsageOrInput,
    /// 3: the budget is smaller than what must be kept.
    CannotFit,
    /// 4: the summarizer failed after its retries with `--on-error fail`, or a provider's count
    /// failed with `count --exact=required`.
    SummarizerFailed,
}

impl Exit {
    /// Every exit, least severe first: the one place the order is written.
    pub const BY_SEVERITY: [Exit; 5] = [
        Exit::Success,
        Exit::CheckFailed,
        Exit::CannotFit,
        Exit::SummarizerFailed,
        Exit::UsageOrInput,
    ];

    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::CheckFailed => 1,
            Exit::UsageOrInput => 2,
            Exit::CannotFit => 3,
            Exit::SummarizerFailed => 4,
        }
    }

    /// Where this exit stands in [`Exit::BY_SEVERITY`].
    fn severity(self) -> usize {
        Exit::BY_SEVERITY
            .iter()
            .position(|&e| e == self)
            .expect("every exit is ranked")
    }

    /// The more severe of the two (the first when they are the same).
    #[must_use]
    pub fn worse(self, other: Exit) -> Exit {
        if other.severity() > self.severity() {
            other
        } else {
            self
        }
    }

    /// Whether this is a failure of the run (any exit but success).
    pub fn is_failure(self) -> bool {
        self != Exit::Success
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> std::process::ExitCode {
        std::process::ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2, then 4, then 3, then 1, then 0 (SPEC §5).
    #[test]
    fn severity_order_is_2_4_3_1_0() {
        let codes: Vec<u8> = Exit::BY_SEVERITY.iter().rev().map(|e| e.code()).collect();
        assert_eq!(codes, [2, 4, 3, 1, 0]);
        for (i, &a) in Exit::BY_SEVERITY.iter().enumerate() {
            for (j, &b) in Exit::BY_SEVERITY.iter().enumerate() {
                let expected = if j > i { b } else { a };
                assert_eq!(a.worse(b), expected, "{a:?} vs {b:?}");
                assert_eq!(a.worse(b), b.worse(a), "{a:?} vs {b:?}");
            }
        }
        // Folding a run keeps its worst document, whatever the order they came in.
        let run = [
            Exit::CheckFailed,
            Exit::CannotFit,
            Exit::Success,
            Exit::CheckFailed,
        ];
        assert_eq!(
            run.iter().fold(Exit::Success, |a, &b| a.worse(b)),
            Exit::CannotFit
        );
    }

    #[test]
    fn codes_are_the_documented_ones() {
        let all = [
            (Exit::Success, 0),
            (Exit::CheckFailed, 1),
            (Exit::UsageOrInput, 2),
            (Exit::CannotFit, 3),
            (Exit::SummarizerFailed, 4),
        ];
        for (e, code) in all {
            assert_eq!(e.code(), code);
            assert_eq!(e.is_failure(), code != 0);
        }
        assert_eq!(Exit::default(), Exit::Success);
    }
}
