//! One phase of an attempt: spawn its command as a new process group (`start`), supervise it
//! until the leader exits (or the deadline / a cancellation ends it), kill what it left in its
//! group, reap it, and say what happened in words (`messages`).

mod messages;
mod start;

use std::cell::Cell;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use apollo_core::event::ExitStatus;
use apollo_core::{AttemptRequest, CancelLevel, CancelToken, Command, Phase, PhaseOutcome};

use crate::command_line;
use crate::environment::Environment;
use crate::group_leader::{GroupLeader, GroupSignal, Reaped, Wake};
use crate::guard::Guard;
use crate::output::LogFile;
use crate::program_search::ProgramCache;

/// Everything a phase shares with the rest of its attempt.
pub(crate) struct AttemptContext<'a> {
    pub(crate) request: &'a AttemptRequest<'a>,
    /// The run's `APOLLO_RUN_KEY` (see [`crate::run_key`]).
    pub(crate) run_key: &'a str,
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
    /// The secret values the unit's `secrets` are taken from.
    pub(crate) secrets: &'a crate::secrets::SecretValues,
    /// The relays of the running phase's output, by stream, for a unit that receives
    /// secrets or has a `log_limit`.
    pub(crate) relays: std::cell::RefCell<Vec<(&'static str, crate::relay::Relay)>>,
}

impl AttemptContext<'_> {
    /// Waits for the running phase's relays (if any) to write all it printed.
    /// A stream its `log_limit` cut is noted in the attempt folder (named for it).
    pub(crate) fn finish_relays(&self) {
        for (stream, relay) in self.relays.borrow_mut().drain(..) {
            let cut = relay.finish();
            if let (true, Some(limit)) = (cut > 0, self.request.unit.log_limit) {
                self.name_logs();
                let dir = self.request.log_dir;
                let _ = crate::log_cap::note_capped(dir, stream, cut, limit);
            }
        }
    }

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
    /// The phase created no process besides its leader: nothing can have escaped its group.
    pub(crate) forked_nothing: bool,
    /// Its process group (the leader's pid), if it started.
    pub(crate) group: Option<i32>,
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

impl PhaseResult {
    /// Whether this is a `when: {command}` that was false ([`PhaseOutcome::condition_false`];
    /// one that could not start, timed out or was killed by a signal is a failure).
    pub(crate) fn condition_false(&self) -> bool {
        self.end == PhaseEnd::Exited && self.outcome.condition_false()
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
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(crate) fn run_phase(
    context: &AttemptContext<'_>,
    phase: Phase,
    command: &Command,
    limit: PhaseLimit,
) -> PhaseResult {
    let phase_start = Instant::now();
    let unit = context.request.unit;
    let plan = command_line::plan(command, context.direct_exec, &unit.workdir);
    let spawned = start::spawn_leader(context, phase, &plan);
    let mut leader = match spawned {
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
                forked_nothing: true,
                group: None,
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
            Wake::GuardDied => {
                if let Err(error) = leader.rearm_guard() {
                    trouble.push(format!(
                        "apollo's guard process died and no other could be started, so this \
                         phase ran unguarded (no unit is started without one): {error}"
                    ));
                }
            }
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
    let group = i32::try_from(leader.pid()).ok();
    let (leftovers_killed, forked_nothing) = match leader.kill_leftovers() {
        Ok(leftovers) => (leftovers.killed, leftovers.forked_nothing),
        Err(error) => {
            trouble.push(format!("cannot clear {phase}'s process group: {error}"));
            leader.signal_group(GroupSignal::Kill);
            (0, false)
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
        PhaseEnd::TimedOut => messages.push(messages::timeout_message(
            phase,
            limit,
            stage,
            unit.kill_grace,
        )),
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
            // A false condition is an answer, not trouble; 126 and 127 say it could not run.
            Some(ExitStatus::Code(code)) if phase == Phase::When && code != 126 && code != 127 => {}
            Some(ExitStatus::Code(code)) => {
                messages.push(messages::exit_code_message(phase, code, &plan))
            }
            Some(ExitStatus::Signal(signal)) => messages.push(format!(
                "{phase} was killed by {}",
                messages::signal_name(signal)
            )),
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
        forked_nothing,
        group,
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
