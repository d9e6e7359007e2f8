//! The exit codes of `apollo`: one table, used by every command and printed in `--help`
//! (DESIGN §10). Scripts may rely on these numbers; they never change meaning.

/// What an `apollo` process tells its caller through its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// 0: success (or: the runs match, the config is valid).
    Success,
    /// 1: a unit failed / the runs differ.
    Failure,
    /// 2: a usage or config error.
    Usage,
    /// 3: journal corruption.
    Corruption,
    /// 4: the state directory is locked by another apollo (the message names its pid).
    Locked,
    /// 5: a human decision is needed (a non-idempotent unit was cut off mid-attempt, or its
    /// inputs or outputs changed since it succeeded, see `apollo mark`; or
    /// `--on-input-change=fail` found changes).
    VerdictNeeded,
    /// 6: I/O failure writing the journal (disk full, EIO, fsync failed); nothing acknowledged
    /// was lost.
    JournalIo,
    /// 130: interrupted by SIGINT/SIGTERM.
    Interrupted,
}

impl Exit {
    /// Every exit code, in table order.
    pub(crate) const ALL: [Exit; 8] = [
        Exit::Success,
        Exit::Failure,
        Exit::Usage,
        Exit::Corruption,
        Exit::Locked,
        Exit::VerdictNeeded,
        Exit::JournalIo,
        Exit::Interrupted,
    ];

    /// The numeric exit status.
    pub(crate) fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Corruption => 3,
            Exit::Locked => 4,
            Exit::VerdictNeeded => 5,
            Exit::JournalIo => 6,
            Exit::Interrupted => 130,
        }
    }

    /// What the code means, as printed in `--help`.
    pub(crate) fn meaning(self) -> &'static str {
        match self {
            Exit::Success => "success (or: runs match, config valid)",
            Exit::Failure => "a unit failed / the runs differ",
            Exit::Usage => "usage or config error",
            Exit::Corruption => "journal corruption",
            Exit::Locked => "state directory locked by another apollo (the message names its pid)",
            Exit::VerdictNeeded => {
                "a human decision is needed (a non-idempotent unit was cut off, or changed since it succeeded: see `apollo mark`; or --on-input-change=fail found changes)"
            }
            Exit::JournalIo => {
                "I/O failure writing the journal (disk full, EIO, fsync failed); nothing acknowledged was lost"
            }
            Exit::Interrupted => "interrupted (SIGINT/SIGTERM)",
        }
    }

    /// The exit-code table for `--help`.
    pub(crate) fn help_table() -> String {
        let mut table = String::from("Exit codes:\n");
        for exit in Exit::ALL {
            table.push_str(&format!("  {:>3}  {}\n", exit.code(), exit.meaning()));
        }
        table
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_design_table() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|exit| exit.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5, 6, 130]);
    }
}
