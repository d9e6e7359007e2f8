//! What a phase's outcome says in words: exit codes, signals, timeouts.

use std::time::Duration;

use apollo_core::Phase;

use super::{PhaseLimit, Stage};
use crate::command_line::ExecPlan;

pub(super) fn exit_code_message(phase: Phase, code: i32, plan: &ExecPlan) -> String {
    let hint = match code {
        // The shell's own codes for a command it could not run.
        127 if !plan.direct => " (the shell reports \"command not found\" with 127)",
        126 if !plan.direct => " (the shell reports \"not executable\" with 126)",
        _ => "",
    };
    format!("{phase} exited with code {code}{hint}")
}

pub(super) fn timeout_message(
    phase: Phase,
    limit: PhaseLimit,
    stage: Stage,
    kill_grace: Duration,
) -> String {
    let length = limit
        .length
        .map_or_else(|| "its limit".to_owned(), |length| format!("{length:?}"));
    let how = if stage == Stage::Killed && !kill_grace.is_zero() {
        format!("SIGTERM, then SIGKILL after the {kill_grace:?} grace")
    } else if stage == Stage::Killed {
        "SIGKILL".to_owned()
    } else {
        "SIGTERM".to_owned()
    };
    format!(
        "{phase} timed out after {length} ({}); its process group got {how}",
        limit.description
    )
}

/// A human name for a signal number, for messages (`SIGKILL`), or `signal N`.
pub(super) fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return format!("signal {signal}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_are_readable() {
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(64), "signal 64");
    }
}
