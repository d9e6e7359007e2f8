//! The seam between the engine and whatever runs a unit's processes.
//!
//! apollo-exec implements [`Executor`] with real, supervised process groups; tests implement it
//! with fakes. The engine calls [`Executor::run_attempt`] on a worker thread; the call blocks
//! until the attempt (prepare → execute → cleanup) is over.

use std::path::Path;
use std::time::Duration;

use crate::cancel::CancelToken;
use crate::event::{AttemptStatus, ExitStatus};
use crate::model::{Phase, Unit};

/// What to run: one attempt of one unit.
#[derive(Debug, Clone, Copy)]
pub struct AttemptRequest<'a> {
    /// The run's id (exported as `APOLLO_RUN_ID`).
    pub run_id: &'a str,
    /// The unit (commands, env, workdir, timeout, kill grace).
    pub unit: &'a Unit,
    /// The attempt number, from 1 (exported as `APOLLO_ATTEMPT`).
    pub attempt: u32,
    /// The folder that receives the attempt's `stdout` and `stderr` files. It need not exist:
    /// an executor creates it when there is output to keep (apollo-exec does so only when the
    /// attempt wrote something or ran for a while).
    pub log_dir: &'a Path,
}

/// How one phase went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseOutcome {
    /// Which phase.
    pub phase: Phase,
    /// Time from the attempt's start to the phase's start.
    pub offset: Duration,
    /// Wall time of the phase.
    pub wall_time: Duration,
    /// How its process ended; `None` when it could not be started.
    pub exit: Option<ExitStatus>,
    /// Whether apollo's timeout ended it.
    pub timed_out: bool,
    /// Processes left in the phase's group after its leader exited, which apollo killed.
    pub leftovers_killed: u32,
    /// Why it could not start, or other trouble, in one line.
    pub error: Option<String>,
}

/// The result of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptOutcome {
    /// How the attempt ended. `Skipped` when `execute` exited 77.
    pub status: AttemptStatus,
    /// How the deciding phase ended: `execute`'s, or that of the phase that failed first.
    pub exit: Option<ExitStatus>,
    /// The phase that failed or timed out first, if any (cleanup included).
    pub failed_phase: Option<Phase>,
    /// Whether apollo's timeout ended the attempt.
    pub timed_out: bool,
    /// Every phase that ran, in order.
    pub phases: Vec<PhaseOutcome>,
    /// Wall time of the whole attempt.
    pub wall_time: Duration,
    /// User CPU time of all the attempt's processes.
    pub user_cpu: Duration,
    /// System CPU time of all the attempt's processes.
    pub sys_cpu: Duration,
    /// Largest resident set size among its processes, in KiB.
    pub max_rss_kib: u64,
    /// Bytes written to stdout over all phases.
    pub stdout_bytes: u64,
    /// Bytes written to stderr over all phases.
    pub stderr_bytes: u64,
    /// SHA-256 (hex) of what `execute` wrote to stdout; `None` when execute did not run.
    pub stdout_sha256: Option<String>,
    /// What went wrong, in one or a few lines.
    pub error: Option<String>,
}

impl AttemptOutcome {
    /// An outcome with `status` in which nothing ran yet: no phase, no exit, no time, no
    /// output, no error. Executors start from it and fill in what happened.
    pub fn nothing_ran(status: AttemptStatus) -> AttemptOutcome {
        AttemptOutcome {
            status,
            exit: None,
            failed_phase: None,
            timed_out: false,
            phases: Vec::new(),
            wall_time: Duration::ZERO,
            user_cpu: Duration::ZERO,
            sys_cpu: Duration::ZERO,
            max_rss_kib: 0,
            stdout_bytes: 0,
            stderr_bytes: 0,
            stdout_sha256: None,
            error: None,
        }
    }
}

/// Runs attempts. Implementations must be usable from several worker threads at once.
pub trait Executor: Send + Sync {
    /// Run one attempt: `prepare` (if any) → `execute` (if prepare succeeded) → `cleanup`
    /// (if any, always once prepare started). Blocks until done. Never panics on a failing
    /// command: every failure is described in the outcome.
    ///
    /// When `cancel` is raised, the running phase is terminated (SIGTERM, `kill_grace`, SIGKILL;
    /// at once for [`crate::CancelLevel::Immediate`]), cleanup still runs, and the outcome is
    /// [`AttemptStatus::Interrupted`].
    fn run_attempt(&self, request: &AttemptRequest<'_>, cancel: &CancelToken) -> AttemptOutcome;
}
