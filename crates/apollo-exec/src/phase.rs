//! One phase of an attempt: spawn its command as a new process group, supervise it until the
//! leader exits (or the deadline / a cancellation ends it), kill what it left in its group,
//! reap it.

use std::cell::Cell;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use apollo_core::event::ExitStatus;
use apollo_core::{AttemptRequest, CancelLevel, CancelToken, Command, Phase, PhaseOutcome};

use crate::command_line::{self, ExecPlan, ProgramCache};
use crate::environment::Environment;
use crate::group_leader::{GroupLeader, GroupSignal, Reaped, Wake};
use crate::guard::{Guard, Slot};
use crate::output::LogFile;
use crate::spawn::Spawn;

/// Everything a phase shares with the rest of its attempt.
pub(crate) struct AttemptContext<'a> {
    pub(crate) request: &'a AttemptRequest<'a>,
    pub(crate) cancel: &'a CancelToken,
    pub(crate) cancel_event: &'a OwnedFd,
    pub(crate) stdout: &'a LogFile,
    pub(crate) stderr: &'a LogFile,
    /// Whether the output files were given their names during the attempt (see `output`).
    pub(crate) logs_named: Cell<bool>,
    /// When, into the attempt, they get their names even if empty.
    pub(crate) name_output_after: Duration,
    pub(crate) attempt_start: Instant,
    pub(crate) direct_exec: bool,
    /// Kills the phases' groups if apollo dies.
    pub(crate) guard: &'a Guard,
    /// Programs found in `PATH` so far.
    pub(crate) programs: &'a ProgramCache,
    /// `/dev/null` for stdin, if it could be opened once for all.
    pub(crate) dev_null: Option<&'a std::fs::File>,
    /// Apollo's environment, which the units' variables are set over.
    pub(crate) environment: &'a Environment,
}

impl AttemptContext<'_> {
    /// When the output files are due to get their names, unless that happened already.
    fn naming_due(&self) -> Option<Instant> {
        if self.logs_named.get() {
            return None;
        }
        self.attempt_start.checked_add(self.name_output_after)
    }

    /// Give the output files their names, once. A failure is left for the end of the
    /// attempt, which copies what it cannot link.
    fn name_logs(&self) {
        self.logs_named.set(true);
        let _ = self.stdout.name_now();
        let _ = self.stderr.name_now();
    }
}

/// The time limit of one phase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PhaseLimit {
    /// When the phase must be over; `None` for no limit.
    pub(crate) deadline: Option<Instant>,
    /// The limit as configured, for messages.
    pub(crate) length: Option<Duration>,
    /// What the limit is, for messages ("the attempt's limit for prepare + execute").
    pub(crate) description: &'static str,
    /// Cancellation at or below this level does not concern this phase (cleanup ignores the
    /// level that was already raised when it started).
    pub(crate) cancel_baseline: CancelLevel,
}

/// How a phase ended, from the attempt's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PhaseEnd {
    /// Its leader exited by itself (with whatever status).
    Exited,
    /// The phase's time limit ended it.
    TimedOut,
    /// A cancellation ended it.
    Interrupted,
    /// It could not be started or supervised.
    Broken,
}

/// A phase's outcome plus what the attempt needs to aggregate.
#[derive(Debug)]
pub(crate) struct PhaseResult {
    pub(crate) outcome: PhaseOutcome,
    pub(crate) end: PhaseEnd,
    pub(crate) usage: Option<Reaped>,
}

impl PhaseResult {
    /// Whether the phase went well enough for the attempt to go on. `execute` exiting 77
    /// (skip) counts as fine.
    pub(crate) fn is_ok(&self) -> bool {
        self.end == PhaseEnd::Exited
            && match self.outcome.exit {
                Some(ExitStatus::Code(0)) => true,
                Some(ExitStatus::Code(77)) => self.outcome.phase == Phase::Execute,
                _ => false,
            }
    }
}

/// Where the termination of a running phase stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Running,
    /// SIGTERM sent to the group; SIGKILL at the (grace) deadline.
    Terminating,
    /// SIGKILL sent; waiting for the leader to be gone.
    Killed,
}

/// Run `command` as `phase` of the attempt, within `limit`. Never panics; every failure is in
/// the result.
pub(crate) fn run_phase(
    context: &AttemptContext<'_>,
    phase: Phase,
    command: &Command,
    limit: PhaseLimit,
) -> PhaseResult {
    let phase_start = Instant::now();
    let unit = context.request.unit;
    let plan = command_line::plan(command, context.direct_exec, &unit.workdir);
    let spawned = spawn_leader(context, phase, &plan);
    let leader = match spawned {
        Ok(leader) => leader,
        Err(reason) => {
            return PhaseResult {
                outcome: PhaseOutcome {
                    phase,
                    offset: phase_start.duration_since(context.attempt_start),
                    wall_time: phase_start.elapsed(),
                    exit: None,
                    timed_out: false,
                    leftovers_killed: 0,
                    error: Some(format!("{phase} could not start: {reason}")),
                },
                end: PhaseEnd::Broken,
                usage: None,
            };
        }
    };

    let mut end = PhaseEnd::Exited;
    let mut stage = Stage::Running;
    let mut deadline = limit.deadline;
    let mut trouble: Vec<String> = Vec::new();
    loop {
        let naming_due = context.naming_due();
        let wait_until = match (deadline, naming_due) {
            (Some(deadline), Some(due)) => Some(deadline.min(due)),
            (deadline, due) => deadline.or(due),
        };
        let wake = match leader.wait(context.cancel_event, wait_until) {
            Ok(wake) => wake,
            Err(error) => {
                // We can no longer wait properly: make sure the group dies, then reap below.
                trouble.push(format!(
                    "cannot wait for {phase} (pid {}): {error}",
                    leader.pid()
                ));
                leader.signal_group(GroupSignal::Kill);
                end = PhaseEnd::Broken;
                break;
            }
        };
        match wake {
            Wake::LeaderExited => break,
            Wake::Deadline if deadline.is_none_or(|deadline| Instant::now() < deadline) => {
                // Only the naming was due.
                context.name_logs();
            }
            Wake::Deadline => {
                if stage == Stage::Running {
                    end = PhaseEnd::TimedOut;
                }
                (stage, deadline) = escalate(&leader, stage, unit.kill_grace);
            }
            Wake::Cancel => {
                let level = context.cancel.level();
                if level <= limit.cancel_baseline {
                    continue;
                }
                if stage == Stage::Running {
                    end = PhaseEnd::Interrupted;
                }
                if level == CancelLevel::Immediate && stage != Stage::Killed {
                    leader.signal_group(GroupSignal::Kill);
                    (stage, deadline) = (Stage::Killed, None);
                } else if stage == Stage::Running {
                    (stage, deadline) = escalate(&leader, stage, unit.kill_grace);
                }
            }
        }
    }

    // The leader has exited (or, after a failed wait, been SIGKILLed) but is not reaped: its pid
    // still pins the group id, so killing the group cannot hit an unrelated process.
    let leftovers_killed = match leader.kill_leftovers() {
        Ok(count) => count,
        Err(error) => {
            trouble.push(format!("cannot clear {phase}'s process group: {error}"));
            leader.signal_group(GroupSignal::Kill);
            0
        }
    };
    let usage = match leader.reap() {
        Ok(reaped) => Some(reaped),
        Err(error) => {
            trouble.push(format!("cannot reap {phase}: {error}"));
            end = PhaseEnd::Broken;
            None
        }
    };
    let exit = usage.map(|reaped| reaped.exit);
    let mut messages = Vec::new();
    match end {
        PhaseEnd::TimedOut => messages.push(timeout_message(phase, limit, stage, unit.kill_grace)),
        PhaseEnd::Interrupted => messages.push(format!(
            "{phase} was interrupted: apollo is stopping{}",
            if stage == Stage::Killed {
                " (SIGKILL)"
            } else {
                " (SIGTERM)"
            }
        )),
        PhaseEnd::Exited => match exit {
            Some(ExitStatus::Code(0)) | None => {}
            Some(ExitStatus::Code(77)) if phase == Phase::Execute => {}
            Some(ExitStatus::Code(code)) => messages.push(exit_code_message(phase, code, &plan)),
            Some(ExitStatus::Signal(signal)) => {
                messages.push(format!("{phase} was killed by {}", signal_name(signal)))
            }
        },
        PhaseEnd::Broken => {}
    }
    messages.extend(trouble);
    PhaseResult {
        outcome: PhaseOutcome {
            phase,
            offset: phase_start.duration_since(context.attempt_start),
            wall_time: phase_start.elapsed(),
            exit,
            timed_out: end == PhaseEnd::TimedOut,
            leftovers_killed,
            error: (!messages.is_empty()).then(|| messages.join("; ")),
        },
        end,
        usage,
    }
}

/// The next termination step: SIGTERM and a grace deadline, then SIGKILL and no deadline.
fn escalate(
    leader: &GroupLeader<'_>,
    stage: Stage,
    kill_grace: Duration,
) -> (Stage, Option<Instant>) {
    match stage {
        Stage::Running if !kill_grace.is_zero() => {
            leader.signal_group(GroupSignal::Terminate);
            (Stage::Terminating, Instant::now().checked_add(kill_grace))
        }
        Stage::Running | Stage::Terminating => {
            leader.signal_group(GroupSignal::Kill);
            (Stage::Killed, None)
        }
        Stage::Killed => (Stage::Killed, None),
    }
}

/// Reserve a guard slot and spawn `plan` as a new group; the error is the reason in words.
fn spawn_leader<'g>(
    context: &AttemptContext<'g>,
    phase: Phase,
    plan: &ExecPlan,
) -> Result<GroupLeader<'g>, String> {
    let unit = context.request.unit;
    let reserve = || {
        context.guard.reserve().map_err(|error| {
            format!(
                "cannot start apollo's guard process, which kills the units if apollo dies: \
                 {error}"
            )
        })
    };
    let child_path = match unit.env.get("PATH") {
        Some(path) => Some(OsStr::new(path.as_str())),
        None => context.environment.get("PATH"),
    };
    let found = context
        .programs
        .find(&plan.program, child_path, &unit.workdir);
    if found.is_none() && !plan.program.as_bytes().contains(&b'/') {
        // A bare name the `PATH` search did not find.
        let errno =
            if command_line::in_path_but_not_executable(&plan.program, child_path, &unit.workdir) {
                libc::EACCES
            } else {
                libc::ENOENT
            };
        return Err(describe_start_error(
            &io::Error::from_raw_os_error(errno),
            plan,
            &unit.workdir,
        ));
    }
    let program: &OsStr = found.as_deref().map_or(&plan.program, Path::as_os_str);
    let slot = reserve()?;
    let error = match start(context, phase, program, &plan.args, slot) {
        Ok(leader) => return Ok(leader),
        Err(error) => error,
    };
    if error.raw_os_error() != Some(libc::ENOEXEC) {
        return Err(describe_start_error(&error, plan, &unit.workdir));
    }
    // A file the kernel cannot exec (a script without `#!`): run it with the shell, as
    // `execvp` does (`execve` does not).
    let mut args = Vec::with_capacity(plan.args.len() + 1);
    args.push(program.to_owned());
    args.extend(plan.args.iter().cloned());
    let slot = reserve()?;
    start(context, phase, OsStr::new("/bin/sh"), &args, slot)
        .map_err(|error| describe_start_error(&error, plan, &unit.workdir))
}

/// Spawn `program` with `args` as the phase's group leader, with the unit's environment and
/// working directory and the attempt's output files.
fn start<'g>(
    context: &AttemptContext<'g>,
    phase: Phase,
    program: &OsStr,
    args: &[OsString],
    slot: Slot<'g>,
) -> io::Result<GroupLeader<'g>> {
    let request = context.request;
    let opened_null;
    let stdin = match context.dev_null {
        Some(dev_null) => dev_null.as_fd(),
        None => {
            opened_null = std::fs::File::open("/dev/null")?;
            opened_null.as_fd()
        }
    };
    let attempt = request.attempt.to_string();
    let mut overrides: Vec<(&str, &OsStr)> = request
        .unit
        .env
        .iter()
        .map(|(key, value)| (key.as_str(), OsStr::new(value.as_str())))
        .collect();
    overrides.extend([
        ("APOLLO_RUN_ID", OsStr::new(request.run_id)),
        ("APOLLO_UNIT", OsStr::new(request.unit.name.as_str())),
        ("APOLLO_ATTEMPT", OsStr::new(attempt.as_str())),
        ("APOLLO_PHASE", OsStr::new(phase.as_str())),
    ]);
    let spawn = Spawn {
        program,
        args,
        workdir: &request.unit.workdir,
        stdin,
        stdout: context.stdout.fd(),
        stderr: context.stderr.fd(),
        base: context.environment,
        overrides: &overrides,
    };
    GroupLeader::spawn(&spawn, slot)
}

/// Why a command could not start, in words a user can act on.
fn describe_start_error(error: &io::Error, plan: &ExecPlan, workdir: &Path) -> String {
    match std::fs::metadata(workdir) {
        Err(workdir_error) => {
            return format!(
                "working directory {} is not usable: {workdir_error}",
                workdir.display()
            );
        }
        Ok(metadata) if !metadata.is_dir() => {
            return format!("working directory {} is not a directory", workdir.display());
        }
        Ok(_) => {}
    }
    let program = plan.program.to_string_lossy();
    match error.raw_os_error() {
        Some(libc::ENOENT) => format!("command not found: {program}"),
        Some(libc::EACCES) => format!("permission denied: {program} (is it executable?)"),
        Some(libc::ENOEXEC) => format!("{program} is not a program this system can run"),
        _ => format!("cannot start {program}: {error}"),
    }
}

fn exit_code_message(phase: Phase, code: i32, plan: &ExecPlan) -> String {
    let hint = match code {
        // The shell's own codes for a command it could not run.
        127 if !plan.direct => " (the shell reports \"command not found\" with 127)",
        126 if !plan.direct => " (the shell reports \"not executable\" with 126)",
        _ => "",
    };
    format!("{phase} exited with code {code}{hint}")
}

fn timeout_message(phase: Phase, limit: PhaseLimit, stage: Stage, kill_grace: Duration) -> String {
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
fn signal_name(signal: i32) -> String {
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
