//! The seam between the engine and whatever runs a unit's processes.
//!
//! apollo-exec implements [`Executor`] with real, supervised process groups; tests implement it
//! with fakes. The engine calls [`Executor::run_attempt`] on a worker thread; the call blocks
//! until the attempt (prepare → execute → cleanup) is over.
//!
//! An attempt is described by an [`AttemptRequest`] (what to run) and runs in an
//! [`AttemptContext`] (how to talk back): the [`CancelToken`] that asks it to stop, and a
//! channel for [`AttemptEvent`]s it reports while it runs — for a remote executor, the job id
//! a cluster scheduler gave it — which the engine records in the run's journal. An executor
//! that reports nothing costs nothing extra.

use std::path::Path;
use std::time::Duration;

use crate::cancel::CancelToken;
use crate::event::{AttemptStatus, ExitStatus};
use crate::model::{Phase, Unit};

/// What to run: one attempt of one unit. More fields may be added (resources, an executor's
/// settings), so it is built with [`AttemptRequest::new`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct AttemptRequest<'a> {
    /// The run's id (exported as `APOLLO_RUN_ID`).
    pub run_id: &'a str,
    /// The unit (commands, env, workdir, timeout, kill grace).
    pub unit: &'a Unit,
    /// The attempt number, from 1 (exported as `APOLLO_ATTEMPT`).
    pub attempt: u32,
    /// The folder that receives the attempt's `stdout` and `stderr` files. It need not exist:
    /// an executor creates it when there is output to keep (apollo-exec does so only when the
    /// attempt wrote something or ran for a while). An executor creates `log_dir` and its
    /// parent at most, never a folder above them: apollo's run folder may have been moved or
    /// deleted while the attempt ran, and must not come back with only this output in it.
    pub log_dir: &'a Path,
    /// The attempt of this unit that an earlier apollo left in flight (its `unit_started`
    /// has no `unit_finished`: apollo died while it ran; or it ended `interrupted`: apollo was
    /// stopped, and may have left a cluster job running), on this unit's first attempt of a
    /// resume. A remote executor may find that attempt's job still running, or finished, and
    /// reattach to it instead of starting anew (reporting [`AttemptEvent::Reattached`]); a
    /// local executor ignores it (its processes died with apollo).
    pub in_flight: Option<u32>,
    /// Names the folders of the unit's other attempts in the run (see
    /// [`AttemptRequest::attempt_dir`]).
    attempt_dirs: Option<AttemptDirs<'a>>,
}

/// The run's names for attempt folders, as the engine was given them.
#[derive(Clone, Copy)]
struct AttemptDirs<'a>(&'a dyn crate::engine::AttemptLogs);

impl std::fmt::Debug for AttemptDirs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AttemptDirs")
    }
}

impl<'a> AttemptRequest<'a> {
    /// Attempt `attempt` of `unit` in run `run_id`, its output going to `log_dir`.
    pub fn new(run_id: &'a str, unit: &'a Unit, attempt: u32, log_dir: &'a Path) -> Self {
        Self {
            run_id,
            unit,
            attempt,
            log_dir,
            in_flight: None,
            attempt_dirs: None,
        }
    }

    /// The same request, the folders of the unit's other attempts in the run named by `dirs`
    /// (the engine passes the run's [`AttemptLogs`](crate::engine::AttemptLogs), the one
    /// that gave `log_dir`).
    pub fn with_attempt_dirs(self, dirs: &'a dyn crate::engine::AttemptLogs) -> Self {
        Self {
            attempt_dirs: Some(AttemptDirs(dirs)),
            ..self
        }
    }

    /// The same request, its output going to `log_dir` instead (an executor that needs the
    /// folder as an absolute path, say).
    pub fn with_log_dir(self, log_dir: &'a Path) -> Self {
        Self { log_dir, ..self }
    }

    /// The folder of attempt `attempt` of the same unit in the same run — an earlier attempt
    /// whose job a remote executor looks for — as the run names it (an executor never builds
    /// it from `log_dir`: the layout and the encoding of the unit's name are the store's).
    /// `None` when the request names no folders ([`AttemptRequest::with_attempt_dirs`]) or the
    /// run cannot name this one.
    pub fn attempt_dir(&self, attempt: u32) -> Option<std::path::PathBuf> {
        let AttemptDirs(dirs) = self.attempt_dirs?;
        dirs.log_dir(&self.unit.name, attempt).ok()
    }

    /// The run's folder for `executor`'s own files, as the run names it
    /// ([`AttemptLogs::executor_dir`](crate::engine::AttemptLogs::executor_dir)); `None` when
    /// the request names no folders or the run has none for it.
    pub fn executor_dir(&self, executor: &str) -> Option<std::path::PathBuf> {
        let AttemptDirs(dirs) = self.attempt_dirs?;
        dirs.executor_dir(executor)
    }

    /// The same request, naming the attempt an earlier apollo left in flight (see
    /// [`AttemptRequest::in_flight`]).
    pub fn with_in_flight(self, in_flight: Option<u32>) -> Self {
        Self { in_flight, ..self }
    }
}

/// Something an attempt reports while it runs, for the engine to record in the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttemptEvent {
    /// The attempt was handed to an external scheduler, which knows it as `job_id` (recorded
    /// as `unit_submitted`, so a later apollo can find the job again).
    #[non_exhaustive]
    Submitted {
        /// Which executor (`slurm`, …).
        executor: String,
        /// The scheduler's id for the job.
        job_id: String,
        /// What the job asked for (partition, nodes, memory), recorded so its cost can be
        /// priced by the request ([`AttemptEvent::with_request`]).
        request: JobRequest,
    },
    /// The attempt did not start anything: it found the job of `attempt`, an attempt an
    /// earlier apollo left in flight ([`AttemptRequest::in_flight`]), and took its outcome
    /// over — waiting for it if it still runs, reading its result if it finished. Recorded as
    /// a `unit_submitted` with `reattached_from`.
    #[non_exhaustive]
    Reattached {
        /// Which executor (`slurm`, …).
        executor: String,
        /// The scheduler's id for the job.
        job_id: String,
        /// The earlier attempt that submitted the job.
        attempt: u32,
    },
}

impl AttemptEvent {
    /// The attempt reattached to job `job_id` of `executor`, submitted by attempt `attempt`.
    pub fn reattached(
        executor: impl Into<String>,
        job_id: impl Into<String>,
        attempt: u32,
    ) -> Self {
        AttemptEvent::Reattached {
            executor: executor.into(),
            job_id: job_id.into(),
            attempt,
        }
    }

    /// The attempt was submitted to `executor`'s scheduler as job `job_id`.
    pub fn submitted(executor: impl Into<String>, job_id: impl Into<String>) -> Self {
        AttemptEvent::Submitted {
            executor: executor.into(),
            job_id: job_id.into(),
            request: JobRequest::default(),
        }
    }

    /// A submission that asked for `request` (other events are returned as they are).
    pub fn with_request(self, request: JobRequest) -> Self {
        match self {
            AttemptEvent::Submitted {
                executor, job_id, ..
            } => AttemptEvent::Submitted {
                executor,
                job_id,
                request,
            },
            other => other,
        }
    }

    /// The journal's record of this report about attempt `attempt` of `unit`.
    pub fn into_submitted(self, unit: String, attempt: u32) -> crate::event::UnitSubmitted {
        let (executor, job_id, reattached_from, request) = match self {
            AttemptEvent::Submitted {
                executor,
                job_id,
                request,
            } => (executor, job_id, None, request),
            AttemptEvent::Reattached {
                executor,
                job_id,
                attempt: from,
            } => (executor, job_id, Some(from), JobRequest::default()),
        };
        crate::event::UnitSubmitted {
            unit,
            attempt,
            executor,
            job_id,
            reattached_from,
            partition: request.partition,
            nodes: request.nodes,
            mem_mib: request.mem_mib,
        }
    }
}

/// What a cluster job asked for when it was submitted (`unit_submitted`'s `partition`,
/// `nodes`, `mem_mib`, journal format 1.7): what its cost is priced by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobRequest {
    /// The partition, when known.
    pub partition: Option<String>,
    /// How many nodes.
    pub nodes: Option<u32>,
    /// Memory in MiB, when the job asked for an amount.
    pub mem_mib: Option<u64>,
}

impl JobRequest {
    /// A request of `nodes` nodes and `mem_mib` MiB in `partition`.
    pub fn new(partition: Option<String>, nodes: Option<u32>, mem_mib: Option<u64>) -> Self {
        JobRequest {
            partition,
            nodes,
            mem_mib,
        }
    }
}

/// Receives the [`AttemptEvent`]s of one attempt. The engine implements it; a program that
/// calls an executor directly can implement it to see what the attempt reports.
///
/// ```
/// use std::sync::Mutex;
/// use apollo_core::{AttemptContext, AttemptEvent, AttemptReporter, CancelToken};
///
/// #[derive(Default)]
/// struct Collect(Mutex<Vec<AttemptEvent>>);
///
/// impl AttemptReporter for Collect {
///     fn report(&self, event: AttemptEvent) {
///         self.0.lock().unwrap().push(event);
///     }
/// }
///
/// let cancel = CancelToken::new();
/// let collected = Collect::default();
/// let context = AttemptContext::new(&cancel).with_reporter(&collected);
/// // What a remote executor does once the cluster took the attempt:
/// context.report(AttemptEvent::submitted("slurm", "4242"));
/// assert_eq!(*collected.0.lock().unwrap(), [AttemptEvent::submitted("slurm", "4242")]);
/// ```
pub trait AttemptReporter: Send + Sync {
    /// Take `event` in. Must not block for long: the attempt is waiting.
    fn report(&self, event: AttemptEvent);
}

/// Drops every event: the reporter of an [`AttemptContext`] made with [`AttemptContext::new`].
struct DropReports;

impl AttemptReporter for DropReports {
    fn report(&self, _event: AttemptEvent) {}
}

/// How a running attempt talks back: whether it must stop, and what it reports.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct AttemptContext<'a> {
    cancel: &'a CancelToken,
    reporter: &'a dyn AttemptReporter,
}

impl<'a> AttemptContext<'a> {
    /// A context whose attempt stops when `cancel` is raised, and whose reports go nowhere.
    pub fn new(cancel: &'a CancelToken) -> Self {
        Self {
            cancel,
            reporter: &DropReports,
        }
    }

    /// The same context, with reports going to `reporter`.
    pub fn with_reporter(self, reporter: &'a dyn AttemptReporter) -> Self {
        Self { reporter, ..self }
    }

    /// Raised when the attempt must stop (see [`Executor::run_attempt`]).
    pub fn cancel(&self) -> &'a CancelToken {
        self.cancel
    }

    /// Report `event`. Under the engine it is appended to the journal with the next commit —
    /// at once, never held back to share an fsync, and always before the attempt's
    /// `unit_finished` — but this call does not wait for that.
    pub fn report(&self, event: AttemptEvent) {
        self.reporter.report(event);
    }
}

impl std::fmt::Debug for AttemptContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttemptContext")
            .field("cancel", self.cancel)
            .finish_non_exhaustive()
    }
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

impl PhaseOutcome {
    /// Whether this is a `when: {command}` ([`Phase::When`]) that was **false**: it exited
    /// with a code other than 0 — and other than 126 and 127, the shell's "cannot execute"
    /// and "not found", which say the condition could not start: a failure, as one killed by
    /// a signal or timed out is. The one rule for every executor.
    pub fn condition_false(&self) -> bool {
        self.phase == Phase::When
            && !self.timed_out
            && matches!(self.exit, Some(ExitStatus::Code(code)) if !matches!(code, 0 | 126 | 127))
    }
}

/// The result of one attempt. More fields may be added, so it is built with
/// [`AttemptOutcome::nothing_ran`] and filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttemptOutcome {
    /// How the attempt ended. `Skipped` when `execute` exited 77, or when the unit's
    /// `when: {command}` exited non-zero (then its last phase is [`Phase::When`]:
    /// [`AttemptOutcome::when_false`]).
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
    /// Set when the attempt cannot settle without a human: the engine retries nothing and
    /// stops the run for a human ([`crate::EngineError::NeedsHuman`], exit 5). `None` for
    /// every ordinary outcome.
    pub needs_human: Option<NeedsHuman>,
}

/// Why an attempt stops the run for a human (see [`AttemptOutcome::needs_human`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NeedsHuman {
    /// What happened and what the human can look at, in one or a few sentences (the job, its
    /// token, the `scancel` that ends it).
    pub reason: String,
    /// `true`: whether the attempt started work is unknown (a cluster's answer to a
    /// submission was lost and the job cannot be found), so no end is recorded: the attempt
    /// stays in flight in the journal, as if apollo had died while it ran, and the next
    /// resume asks for a verdict on it (`apollo mark`). `false`: the attempt started nothing
    /// (it refused to, because work of an earlier attempt still runs) and is recorded
    /// failed.
    pub left_in_flight: bool,
}

impl NeedsHuman {
    /// Whether the attempt started anything is unknown: its end is not recorded.
    pub fn in_doubt(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            left_in_flight: true,
        }
    }

    /// The attempt refused to start anything: it is recorded failed, nothing ran.
    pub fn refused(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            left_in_flight: false,
        }
    }
}

impl AttemptOutcome {
    /// Whether the attempt skipped because its unit's `when: {command}` was false (see
    /// [`crate::event::UnitFinished::when_false`]).
    pub fn when_false(&self) -> bool {
        self.status == AttemptStatus::Skipped
            && self.phases.last().map(|phase| phase.phase) == Some(Phase::When)
    }

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
            needs_human: None,
        }
    }
}

impl Unit {
    /// The unit's commands by phase, in the order an attempt runs them (`None`: it has none).
    pub fn phase_commands(&self) -> [(Phase, Option<&crate::model::Command>); 4] {
        [
            (Phase::When, self.when_command.as_ref()),
            (Phase::Prepare, self.prepare.as_ref()),
            (Phase::Execute, Some(&self.execute)),
            (Phase::Cleanup, self.cleanup.as_ref()),
        ]
    }
}

/// Runs attempts. Implementations must be usable from several worker threads at once.
pub trait Executor: Send + Sync {
    /// Run one attempt: `prepare` (if any) → `execute` (if prepare succeeded) → `cleanup`
    /// (if any, always once prepare started). Blocks until done. Never panics on a failing
    /// command: every failure is described in the outcome.
    ///
    /// When [`AttemptContext::cancel`] is raised, the running phase is terminated (SIGTERM,
    /// `kill_grace`, SIGKILL; at once for [`crate::CancelLevel::Immediate`]), cleanup still
    /// runs, and the outcome is [`AttemptStatus::Interrupted`].
    ///
    /// What the attempt reports through [`AttemptContext::report`] while it runs (a remote
    /// job's id) the engine records in the journal.
    fn run_attempt(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
    ) -> AttemptOutcome;
}
