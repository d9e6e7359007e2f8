//! The scheduling engine: runs a pipeline's units in dependency order, through an
//! [`Executor`], recording every step in a [`Journal`] before it matters (DESIGN §4, §7).
//!
//! # How a run proceeds
//!
//! The engine thread alone owns the run's state, decides, and appends to the journal; worker
//! threads (`max_parallel` of them) run attempts. Each turn of the engine's loop:
//!
//! 1. takes ready units from the [`ReadyQueue`] (config order), decides for each whether it
//!    must run (resume rules) and, if so, queues its `unit_started` — up to `max_parallel`
//!    attempts, plus [`LOOKAHEAD_PER_WORKER`] per worker committed ahead (idempotent units
//!    only; [`LOOKAHEAD_PER_WORKER_SHORT`] while attempts are very short);
//! 2. appends everything queued — the `unit_finished` and `unit_skipped` records of attempts
//!    that just ended and the `unit_started` records of new ones — as **one** batch, with one
//!    fsync; whatever ends during that fsync goes with the next batch (group commit).
//!    Attempts go to the workers only once the batch holding their `unit_started` is durable.
//!    So `unit_started` is on disk before a unit's first process exists, and `unit_finished`
//!    is on disk before any dependent starts;
//! 3. waits for an attempt to end, a retry to come due, or a cancellation. A worker whose
//!    attempt failed for good (fail-fast, no retry left) raises `halt` itself before it
//!    reports, and every worker whose attempt failed waits for the engine to take the outcome
//!    in before its next attempt: attempts committed ahead are halted at once, even while the
//!    engine is in an fsync.
//!
//! A failed attempt is retried after a capped exponential backoff. A unit that fails for good
//! marks its downstream `skipped` and, unless `keep_going`, stops new starts while running
//! units finish. Exit code 77 from `execute` means the unit skipped itself: it satisfies its
//! dependents.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::cancel::{CancelLevel, CancelToken};
use crate::dag::{Dag, DagError, ReadyQueue};
use crate::event::{
    AttemptStatus, Event, InputComponent, PhaseRecord, RunFinished, RunStatus, SkipReason,
    UnitFinished, UnitSkipped, UnitStarted,
};
use crate::executor::{AttemptOutcome, AttemptRequest, Executor};
use crate::hash;
use crate::journal::{Journal, JournalError};
use crate::model::{Pipeline, Unit};
use crate::resume::{PriorState, PriorUnitState};

/// Attempts committed ahead per worker: their `unit_started` is made durable while the worker
/// still runs its current attempt, so a worker that finishes takes its next attempt at once
/// instead of waiting for an fsync. Each such record carries, in its `unit_finished`, how long
/// it waited (`queued_ms`); after a crash it counts as in flight, which only ever means "run
/// it again" because only idempotent units are committed ahead.
///
/// Four covers an fsync that takes several times as long as a short unit (a loaded disk):
/// measured on 3,000 no-op units with 2 workers, one ahead cost 2-3× the run without fsync,
/// four about 1.2×. When attempts are very short, see [`LOOKAHEAD_PER_WORKER_SHORT`].
pub const LOOKAHEAD_PER_WORKER: usize = 4;

/// Attempts committed ahead per worker while recent attempts last less than
/// [`SHORT_ATTEMPT`] on average: then an fsync outlasts several attempts, and four ahead
/// still left workers waiting for the next commit (10,000 no-op units, 2 workers: the
/// workers waited 0.4-0.5 s in all for jobs with four ahead, under 0.1 s with sixteen), and
/// batches shared by the dozen (see [`COMMIT_LOW_WATER_PER_WORKER`]) need room above the low
/// water mark. Longer attempts keep [`LOOKAHEAD_PER_WORKER`]: fewer attempts are then recorded
/// as interrupted when a failure stops the run before their turn.
pub const LOOKAHEAD_PER_WORKER_SHORT: usize = 32;

/// See [`LOOKAHEAD_PER_WORKER_SHORT`].
pub const SHORT_ATTEMPT: Duration = Duration::from_millis(10);

/// A batch of routine records (attempts started, attempts that succeeded) waits while more
/// than this many committed attempts per worker are still queued for the workers — or, when
/// more, as many as recent attempts show a worker gets through during one recent commit
/// (plus one), up to half of [`LOOKAHEAD_PER_WORKER_SHORT`] — so that very short attempts
/// share an fsync by the dozen instead of by two, and the workers still have work while it
/// runs: under load an fsync is slow (its kernel threads compete with the units for the CPU;
/// 1-1.5 ms for a batch was seen) and costs CPU itself. Only with
/// [`LOOKAHEAD_PER_WORKER_SHORT`] can the queue be that long, so longer attempts commit at
/// once as before. A failure, a skip or a stop commits at once, and nothing waits longer than
/// [`MAX_COMMIT_DELAY`].
pub const COMMIT_LOW_WATER_PER_WORKER: usize = LOOKAHEAD_PER_WORKER;

/// See [`COMMIT_LOW_WATER_PER_WORKER`]. Bounds what a crash can cost beyond one fsync: the
/// successes of very short attempts in the last few milliseconds, which a resume runs again.
pub const MAX_COMMIT_DELAY: Duration = Duration::from_millis(5);

/// What to do when a unit that succeeded earlier in the run has different inputs now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnInputChange {
    /// Run it again (the default).
    #[default]
    Rerun,
    /// Stop before running it, explaining what changed.
    Fail,
}

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// The run's id (passed to units as `APOLLO_RUN_ID`).
    pub run_id: String,
    /// Units running at once (at least 1).
    pub max_parallel: usize,
    /// Keep running what does not depend on a failure (like `make -k`).
    pub keep_going: bool,
    /// What to do when a succeeded unit's inputs changed.
    pub on_input_change: OnInputChange,
    /// Run only these units and whatever of their upstream is not done. `None`: every unit.
    pub only: Option<Vec<String>>,
    /// The longest wait between two attempts of a unit (the backoff doubles up to this, or up
    /// to the unit's `retry_delay` when that is longer).
    pub max_retry_delay: Duration,
}

impl EngineOptions {
    /// Defaults for a run: the pipeline's `max_parallel`, fail-fast, rerun on input change.
    pub fn new(run_id: impl Into<String>, pipeline: &Pipeline) -> Self {
        Self {
            run_id: run_id.into(),
            max_parallel: pipeline.max_parallel.max(1),
            keep_going: false,
            on_input_change: OnInputChange::Rerun,
            only: None,
            max_retry_delay: Duration::from_secs(300),
        }
    }
}

/// Why a unit runs, or why it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// It succeeded earlier in this run and its inputs are the same: not run again.
    Reuse {
        /// The attempt that succeeded.
        attempt: u32,
        /// Whether that success was a human's verdict.
        marked: bool,
    },
    /// It never ran in this run.
    FirstRun,
    /// It succeeded earlier but its inputs changed (the phrases name what).
    InputsChanged(Vec<String>),
    /// It was running when apollo stopped, and is idempotent.
    WasInFlight {
        /// The attempt that was cut off.
        attempt: u32,
    },
    /// Its latest attempt did not succeed (failed, timed out, interrupted, or skipped because
    /// an upstream failed).
    PreviouslyNotDone {
        /// The latest attempt.
        attempt: u32,
    },
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decision::Reuse {
                attempt,
                marked: false,
            } => {
                write!(
                    f,
                    "succeeded earlier in this run (attempt {attempt}), inputs unchanged: not run again"
                )
            }
            Decision::Reuse {
                attempt,
                marked: true,
            } => {
                write!(
                    f,
                    "marked succeeded by a human (attempt {attempt}), inputs unchanged: not run again"
                )
            }
            Decision::FirstRun => f.write_str("has not run yet in this run"),
            Decision::InputsChanged(changes) => write!(f, "runs again: {}", changes.join(", ")),
            Decision::WasInFlight { attempt } => write!(
                f,
                "was running (attempt {attempt}) when apollo stopped; idempotent → runs again"
            ),
            Decision::PreviouslyNotDone { attempt } => {
                write!(f, "attempt {attempt} did not succeed: runs again")
            }
        }
    }
}

/// What the engine tells its observer (progress output, `--explain`).
#[derive(Debug)]
#[non_exhaustive]
pub enum Notice<'a> {
    /// The engine decided whether `unit` runs.
    Decided {
        /// The unit.
        unit: &'a str,
        /// The decision and its reason.
        decision: &'a Decision,
    },
    /// An attempt is durably recorded as started and about to spawn.
    Started {
        /// The unit.
        unit: &'a str,
        /// The attempt number.
        attempt: u32,
    },
    /// An attempt ended (its `unit_finished` is durable).
    Finished {
        /// The unit.
        unit: &'a str,
        /// The attempt's record.
        record: &'a UnitFinished,
        /// When the unit will be tried again, if it will.
        retry_in: Option<Duration>,
        /// Where the attempt's stdout and stderr are.
        log_dir: &'a std::path::Path,
    },
    /// The unit will not run: an upstream failed.
    Skipped {
        /// The unit.
        unit: &'a str,
        /// The failed upstream unit.
        upstream: &'a str,
    },
}

/// Receives [`Notice`]s from the engine thread.
pub trait Observer {
    /// Called for every notice, on the engine thread; keep it quick.
    fn notice(&mut self, notice: &Notice<'_>);

    /// Called before the engine waits for something to happen: a good moment to write out
    /// what the notices since the last call produced, in one go.
    fn flush(&mut self) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl Observer for NoObserver {
    fn notice(&mut self, _notice: &Notice<'_>) {}
}

/// Provides the folder an attempt's stdout/stderr go to.
pub trait AttemptLogs: Sync {
    /// The folder for `unit`'s attempt `attempt`. The executor creates it when there is output
    /// to keep.
    fn log_dir(&self, unit: &str, attempt: u32) -> Result<PathBuf, String>;
}

/// Where a unit ended up in this engine run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitResult {
    /// An attempt in this process succeeded.
    Succeeded {
        /// The attempt.
        attempt: u32,
    },
    /// It skipped itself (exit 77).
    SelfSkipped {
        /// The attempt.
        attempt: u32,
    },
    /// Done earlier in the run; not run again.
    Reused,
    /// It failed for good.
    Failed {
        /// Its last attempt.
        attempt: u32,
        /// Where that attempt's logs are.
        log_dir: PathBuf,
        /// The first line of its error, when there is one.
        error: Option<String>,
    },
    /// An upstream unit failed.
    SkippedUpstream {
        /// The upstream unit.
        upstream: String,
    },
    /// It was interrupted, or never started (interrupted run, fail-fast stop, `--only`).
    NotRun,
}

/// The outcome of [`run`].
#[derive(Debug, Clone)]
pub struct RunReport {
    /// How the run ended; `None` when `only` left units of the pipeline undone (the run stays
    /// open and the next `apollo run` resumes it).
    pub status: Option<RunStatus>,
    /// Each unit's result, in config order.
    pub units: Vec<(String, UnitResult)>,
}

impl RunReport {
    /// How many units ended in a state matching `predicate`.
    pub fn count(&self, predicate: impl Fn(&UnitResult) -> bool) -> usize {
        self.units
            .iter()
            .filter(|(_, result)| predicate(result))
            .count()
    }
}

/// Why a run could not proceed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The pipeline's graph is broken (validation should have caught it).
    #[error(transparent)]
    Graph(#[from] DagError),
    /// `only` names a unit that does not exist.
    #[error("`--only {unit}`: the pipeline has no unit `{unit}`")]
    UnknownUnit {
        /// The name given.
        unit: String,
    },
    /// A non-idempotent unit was running when apollo stopped: a human must decide.
    #[error(
        "unit `{unit}` (attempt {attempt}) was running when apollo stopped, and it is not idempotent: \
         its side effects may be half done"
    )]
    NeedsVerdict {
        /// The unit.
        unit: String,
        /// The attempt that was cut off.
        attempt: u32,
    },
    /// With `--on-input-change=fail`: a unit that succeeded has different inputs now.
    #[error("unit `{unit}` succeeded earlier in this run but its inputs changed: {}", changes.join(", "))]
    InputsChanged {
        /// The unit.
        unit: String,
        /// What changed.
        changes: Vec<String>,
    },
    /// Appending to the journal failed; running units were stopped.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

struct Job {
    unit_idx: usize,
    attempt: u32,
    /// When its `unit_started` was handed to the journal (set again when the batch holding
    /// it is appended, so a deferred commit does not count as waiting for a worker).
    committed_at: Instant,
    /// Whether this attempt failing stops new starts (fail-fast, and no retry left): then
    /// the worker itself raises `halt` before reporting, so other workers do not start
    /// attempts committed ahead while the engine has not read the failure yet.
    halt_on_failure: bool,
}

struct Done {
    /// The worker that ran it, waiting for the engine to take the outcome in; `None` for an
    /// attempt the engine failed itself.
    worker: Option<usize>,
    unit_idx: usize,
    attempt: u32,
    /// How long the job waited for a worker after its `unit_started` was committed.
    queued: Duration,
    log_dir: PathBuf,
    outcome: AttemptOutcome,
    /// The declared outputs' hash (`Ok(None)`: none declared), computed on the worker.
    outputs: Option<Result<Option<String>, String>>,
    /// Whether the worker waits for an acknowledgement before its next job (see [`worker`]).
    awaits_ack: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Waiting,
    Running,
    RetryWait,
    Done,
    Failed,
    Skipped,
}

/// Run (or resume) `pipeline`. `prior` is what the run's journal already holds (empty for a
/// new run). Writes unit records and `run_finished` to `journal`; the caller writes
/// `run_started`/`run_resumed` first.
#[allow(clippy::too_many_arguments)]
pub fn run(
    pipeline: &Pipeline,
    prior: &PriorState,
    options: &EngineOptions,
    journal: &mut dyn Journal,
    executor: &dyn Executor,
    logs: &dyn AttemptLogs,
    cancel: &CancelToken,
    observer: &mut dyn Observer,
) -> Result<RunReport, EngineError> {
    let dag = Dag::new(pipeline)?;
    let in_scope = scope(pipeline, &dag, options.only.as_deref())?;
    check_in_flight(pipeline, prior, &in_scope)?;

    let (job_tx, job_rx) = crossbeam_channel::unbounded::<Job>();
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<Done>();
    let (wake_tx, wake_rx) = crossbeam_channel::bounded::<()>(1);
    let _wake_registration = cancel.on_cancel(move || {
        let _ = wake_tx.try_send(());
    });
    let n_workers = options.max_parallel.max(1).min(pipeline.units.len().max(1));

    // Set when the engine stops starting units: committed attempts still waiting for a worker
    // are then recorded as interrupted instead of started.
    let halt = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let mut acks = Vec::with_capacity(n_workers);
        for worker_idx in 0..n_workers {
            let job_rx = job_rx.clone();
            let done_tx = done_tx.clone();
            let (ack_tx, ack_rx) = crossbeam_channel::bounded::<()>(1);
            acks.push(ack_tx);
            let halt = &halt;
            scope.spawn(move || {
                worker(
                    WorkerContext {
                        worker_idx,
                        pipeline,
                        run_id: &options.run_id,
                        executor,
                        logs,
                        cancel,
                        halt,
                    },
                    &job_rx,
                    &done_tx,
                    &ack_rx,
                )
            });
        }
        drop(done_tx);
        let mut engine = EngineLoop::new(
            pipeline, &dag, prior, options, in_scope, cancel, &halt, acks,
        );
        let channels = Channels {
            job_tx: &job_tx,
            done_rx: &done_rx,
            wake_rx: &wake_rx,
        };
        let result = engine.run(observer, &channels, journal);
        // Dropping the job sender and the acknowledgements ends the workers; the scope joins
        // them.
        drop(job_tx);
        drop(engine);
        result
    })
}

/// A notice held back until the batch holding its record is durable.
enum Deferred {
    Finished {
        unit_idx: usize,
        record: UnitFinished,
        retry_in: Option<Duration>,
        log_dir: PathBuf,
    },
    Skipped {
        unit_idx: usize,
        upstream: String,
    },
}

/// The channels the engine loop works with.
struct Channels<'c> {
    job_tx: &'c Sender<Job>,
    done_rx: &'c Receiver<Done>,
    wake_rx: &'c Receiver<()>,
}

/// Which units take part: all, or those named by `only` plus their upstream.
fn scope(
    pipeline: &Pipeline,
    dag: &Dag,
    only: Option<&[String]>,
) -> Result<Vec<bool>, EngineError> {
    let Some(only) = only else {
        return Ok(vec![true; pipeline.units.len()]);
    };
    let mut roots = Vec::with_capacity(only.len());
    for name in only {
        let unit_idx = pipeline
            .unit_index(name)
            .ok_or_else(|| EngineError::UnknownUnit { unit: name.clone() })?;
        roots.push(unit_idx);
    }
    let mut in_scope = vec![false; pipeline.units.len()];
    for unit_idx in dag.upstream_closure(&roots) {
        in_scope[unit_idx] = true;
    }
    Ok(in_scope)
}

/// The checks [`run`] makes before anything runs — an unknown `--only` unit, a broken
/// graph, a non-idempotent unit cut off mid-attempt — without running anything: so a caller
/// can refuse before it records that the run resumed.
pub fn preflight(
    pipeline: &Pipeline,
    prior: &PriorState,
    options: &EngineOptions,
) -> Result<(), EngineError> {
    let dag = Dag::new(pipeline)?;
    let in_scope = scope(pipeline, &dag, options.only.as_deref())?;
    check_in_flight(pipeline, prior, &in_scope)
}

/// DESIGN §7: a non-idempotent unit cut off mid-attempt stops the run before anything runs.
fn check_in_flight(
    pipeline: &Pipeline,
    prior: &PriorState,
    in_scope: &[bool],
) -> Result<(), EngineError> {
    for (unit, _) in pipeline
        .units
        .iter()
        .zip(in_scope)
        .filter(|(_, in_scope)| **in_scope)
    {
        if let Some(prior_unit) = prior.unit(&unit.name)
            && let PriorUnitState::InFlight { attempt } = prior_unit.state
            && !unit.idempotent
        {
            return Err(EngineError::NeedsVerdict {
                unit: unit.name.clone(),
                attempt,
            });
        }
    }
    Ok(())
}

/// Runs attempts handed over by the engine thread. Everything an attempt needs beyond its
/// durable `unit_started` — its log folder, its processes, its output hash — happens here, off
/// the engine thread, so the engine thread only decides and journals.
struct WorkerContext<'a> {
    worker_idx: usize,
    pipeline: &'a Pipeline,
    run_id: &'a str,
    executor: &'a dyn Executor,
    logs: &'a dyn AttemptLogs,
    cancel: &'a CancelToken,
    halt: &'a AtomicBool,
}

/// After an attempt that did not go well (it failed, or its outputs could not be hashed), the
/// worker waits for the engine to take its outcome in (`ack`) before it takes the next job: a
/// failure is then always seen (and new starts halted) before the same worker starts an
/// attempt that was committed ahead. That wait is a thread hand-off, not an fsync. After a
/// success it goes straight on: a success never stops the run, and the hand-off cost a
/// context switch each way per attempt.
fn worker(
    context: WorkerContext<'_>,
    jobs: &Receiver<Job>,
    done: &Sender<Done>,
    ack: &Receiver<()>,
) {
    let WorkerContext {
        worker_idx,
        pipeline,
        run_id,
        executor,
        logs,
        cancel,
        halt,
    } = context;
    for job in jobs {
        let unit = &pipeline.units[job.unit_idx];
        let queued = job.committed_at.elapsed();
        if halt.load(Ordering::SeqCst) {
            let mut outcome = failed_to_start(
                "not started: the run stopped starting units before this attempt's turn came"
                    .to_owned(),
            );
            outcome.status = AttemptStatus::Interrupted;
            let message = Done {
                worker: Some(worker_idx),
                unit_idx: job.unit_idx,
                attempt: job.attempt,
                queued,
                log_dir: PathBuf::new(),
                outcome,
                outputs: None,
                awaits_ack: true,
            };
            if done.send(message).is_err() || ack.recv().is_err() {
                return;
            }
            continue;
        }
        // A panic in an executor, a hash or the log folder must not leave the engine waiting
        // for an outcome that never comes: it becomes a failed attempt.
        let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            match logs.log_dir(&unit.name, job.attempt) {
                Ok(log_dir) => {
                    let request = AttemptRequest {
                        run_id,
                        unit,
                        attempt: job.attempt,
                        log_dir: &log_dir,
                    };
                    let outcome = executor.run_attempt(&request, cancel);
                    let outputs = outcome.status.satisfies_dependents().then(|| {
                        hash::output_hash(unit, &pipeline.base_dir)
                            .map_err(|error| error.to_string())
                    });
                    (log_dir, outcome, outputs)
                }
                Err(error) => (
                    PathBuf::new(),
                    failed_to_start(format!("cannot create the attempt's log folder: {error}")),
                    None,
                ),
            }
        }));
        let (log_dir, outcome, outputs) = attempt.unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            let error = format!("internal error while running the attempt: {message}");
            (PathBuf::new(), failed_to_start(error), None)
        });
        // Only an attempt that did not go well can make the engine stop starting units.
        let awaits_ack = !outcome.status.satisfies_dependents() || matches!(outputs, Some(Err(_)));
        // A missing declared output fails a success, not a self-skip (see `finish_attempt`).
        let failed = matches!(
            outcome.status,
            AttemptStatus::Failed | AttemptStatus::TimedOut
        ) || (outcome.status == AttemptStatus::Succeeded
            && matches!(outputs, Some(Err(_))));
        if failed && job.halt_on_failure {
            // Fail-fast: stop the other workers' attempts committed ahead now, not once the
            // engine (perhaps in an fsync) has read this outcome.
            halt.store(true, Ordering::SeqCst);
        }
        let message = Done {
            worker: Some(worker_idx),
            unit_idx: job.unit_idx,
            attempt: job.attempt,
            queued,
            log_dir,
            outcome,
            outputs,
            awaits_ack,
        };
        if done.send(message).is_err() || (awaits_ack && ack.recv().is_err()) {
            return;
        }
    }
}

/// `recent` moved 1/8 of the way towards `sample` (or `sample`, the first time); saturating,
/// since an [`Executor`] may report any duration.
fn moving_average(recent: Option<Duration>, sample: Duration) -> Duration {
    match recent {
        None => sample,
        Some(recent) => recent.saturating_mul(7).saturating_add(sample) / 8,
    }
}

/// Backoff before retry number `retry` (1 for the first retry): base × 2^(retry-1), capped.
fn backoff(unit: &Unit, retry: u32, cap: Duration) -> Duration {
    let factor = 2u32.saturating_pow(retry.saturating_sub(1).min(20));
    unit.retry_delay
        .saturating_mul(factor)
        .min(cap.max(unit.retry_delay))
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").to_owned()
}

struct EngineLoop<'a> {
    pipeline: &'a Pipeline,
    dag: &'a Dag,
    prior: &'a PriorState,
    options: &'a EngineOptions,
    cancel: &'a CancelToken,
    in_scope: Vec<bool>,
    halt: &'a AtomicBool,
    /// One acknowledgement channel per worker (see [`worker`]).
    acks: Vec<Sender<()>>,
    /// Workers whose outcome was taken in and who wait for their acknowledgement.
    acks_due: Vec<usize>,
    /// Moving average of the attempts' wall time (each new one weighs 1/8); `None` before
    /// the first attempt ends. Sets how far ahead attempts are committed.
    recent_attempt_time: Option<Duration>,
    /// Moving average of how long a commit (append + fsync) took, the same way.
    recent_commit_time: Option<Duration>,
    /// The unit's latest attempt in this process failed and it waits for a retry: if the run
    /// stops after a failure, this is the unit's result.
    last_failure: Vec<Option<UnitResult>>,
    state: Vec<State>,
    results: Vec<Option<UnitResult>>,
    output_hashes: Vec<Option<String>>,
    /// The last attempt number used per unit (continues across resumes).
    last_attempt: Vec<u32>,
    /// Attempts made by this process per unit (the retry budget is per process).
    attempts_here: Vec<u32>,
    queue: ReadyQueue,
    retry_waits: BinaryHeap<Reverse<(Instant, usize)>>,
    /// What the next batch records, to report once durable (`reporting`: the batch being
    /// appended).
    unreported: Vec<Deferred>,
    reporting: Vec<Deferred>,
    /// Events waiting for the next batch, and the attempts that start once it is durable.
    pending_events: Vec<Event>,
    pending_jobs: Vec<Job>,
    /// Since when `pending_events` has not been empty.
    pending_since: Option<Instant>,
    /// The pending events hold the end of a non-idempotent unit's attempt: commit at once,
    /// since after a crash its unrecorded end would make apollo stop and ask a human.
    commit_now: bool,
    /// Attempts committed (queued in a batch, or at a worker) and not yet taken back in.
    running: usize,
    /// Attempts handed to workers and not yet taken back in.
    at_workers: usize,
    stop_starting: bool,
    failed_any: bool,
    input_change_error: Option<EngineError>,
}

impl<'a> EngineLoop<'a> {
    #[allow(
        clippy::too_many_arguments,
        reason = "one private constructor, each argument distinct"
    )]
    fn new(
        pipeline: &'a Pipeline,
        dag: &'a Dag,
        prior: &'a PriorState,
        options: &'a EngineOptions,
        in_scope: Vec<bool>,
        cancel: &'a CancelToken,
        halt: &'a AtomicBool,
        acks: Vec<Sender<()>>,
    ) -> Self {
        let n_units = pipeline.units.len();
        let queue = ReadyQueue::new(dag, |unit_idx| !in_scope[unit_idx]);
        let last_attempt = pipeline
            .units
            .iter()
            .map(|unit| {
                prior
                    .unit(&unit.name)
                    .map_or(0, |prior_unit| prior_unit.last_attempt)
            })
            .collect();
        Self {
            pipeline,
            dag,
            prior,
            options,
            cancel,
            in_scope,
            halt,
            acks,
            acks_due: Vec::new(),
            recent_attempt_time: None,
            recent_commit_time: None,
            last_failure: vec![None; n_units],
            state: vec![State::Waiting; n_units],
            results: vec![None; n_units],
            output_hashes: vec![None; n_units],
            last_attempt,
            attempts_here: vec![0; n_units],
            queue,
            retry_waits: BinaryHeap::new(),
            unreported: Vec::new(),
            reporting: Vec::new(),
            pending_events: Vec::new(),
            pending_jobs: Vec::new(),
            pending_since: None,
            commit_now: false,
            running: 0,
            at_workers: 0,
            stop_starting: false,
            failed_any: false,
            input_change_error: None,
        }
    }

    fn run(
        &mut self,
        observer: &mut dyn Observer,
        channels: &Channels<'_>,
        journal: &mut dyn Journal,
    ) -> Result<RunReport, EngineError> {
        loop {
            if self.cancel.is_cancelled() {
                self.stop();
            }
            self.release_due_retries();
            self.start_ready(observer);
            if self.pending_events.is_empty() {
                self.pending_since = None;
            } else if self.pending_since.is_none() {
                self.pending_since = Some(Instant::now());
            }
            if self.commit_due() {
                if let Err(error) = self.commit(journal, observer, channels.job_tx) {
                    return Err(self.abort_on_journal_error(error, channels.done_rx));
                }
                self.pending_since = None;
            }
            if self.running == 0
                && self.pending_events.is_empty()
                && (self.stop_starting || (self.queue.is_empty() && self.retry_waits.is_empty()))
            {
                break;
            }
            // Wait for an attempt to end, a retry to come due, or a cancellation.
            let retry_due = self.retry_waits.peek().map(|Reverse((due, _))| *due);
            let commit_due = self
                .pending_since
                .and_then(|since| since.checked_add(MAX_COMMIT_DELAY));
            let next_due = match (retry_due, commit_due) {
                (Some(retry), Some(commit)) => Some(retry.min(commit)),
                (retry, commit) => retry.or(commit),
            };
            let timeout = next_due.map_or(Duration::from_secs(3600), |due| {
                due.saturating_duration_since(Instant::now())
            });
            observer.flush();
            crossbeam_channel::select! {
                recv(channels.done_rx) -> message => {
                    if let Ok(done) = message {
                        self.finish_attempt(done);
                        // Take every other attempt that ended meanwhile: one batch for all.
                        while let Ok(done) = channels.done_rx.try_recv() {
                            self.finish_attempt(done);
                        }
                        self.send_acks();
                    }
                }
                recv(channels.wake_rx) -> _ => self.stop(),
                default(timeout) => {}
            }
        }
        if let Some(error) = self.input_change_error.take() {
            return Err(error);
        }
        let status = self.final_status();
        if let Some(status) = status {
            let count = |wanted: &[State]| {
                u32::try_from(
                    self.state
                        .iter()
                        .filter(|state| wanted.contains(state))
                        .count(),
                )
                .unwrap_or(u32::MAX)
            };
            let finished = RunFinished {
                status,
                succeeded: u32::try_from(
                    self.results
                        .iter()
                        .filter(|result| {
                            matches!(
                                result,
                                Some(UnitResult::Succeeded { .. } | UnitResult::Reused)
                            )
                        })
                        .count(),
                )
                .unwrap_or(u32::MAX),
                failed: count(&[State::Failed]),
                skipped: u32::try_from(
                    self.results
                        .iter()
                        .filter(|result| {
                            matches!(
                                result,
                                Some(
                                    UnitResult::SelfSkipped { .. }
                                        | UnitResult::SkippedUpstream { .. }
                                )
                            )
                        })
                        .count(),
                )
                .unwrap_or(u32::MAX),
            };
            journal
                .append(&[Event::RunFinished(finished)])
                .map_err(EngineError::Journal)?;
        }
        let units = self
            .pipeline
            .units
            .iter()
            .zip(&mut self.results)
            .map(|(unit, result)| {
                (
                    unit.name.clone(),
                    result.take().unwrap_or(UnitResult::NotRun),
                )
            })
            .collect();
        Ok(RunReport { status, units })
    }

    /// Whether the pending events should be committed now (see
    /// [`COMMIT_LOW_WATER_PER_WORKER`]).
    fn commit_due(&self) -> bool {
        if self.pending_events.is_empty() {
            return false;
        }
        let workers = self.options.max_parallel.max(1);
        let queue_may_run_low =
            self.at_workers < workers.saturating_mul(1 + self.commit_low_water());
        let waited_enough = self
            .pending_since
            .is_some_and(|since| since.elapsed() >= MAX_COMMIT_DELAY);
        let routine = |event: &Event| match event {
            Event::UnitStarted(_) => true,
            Event::UnitFinished(record) => record.status.satisfies_dependents(),
            _ => false,
        };
        queue_may_run_low
            || waited_enough
            || self.stop_starting
            || self.commit_now
            || !self.pending_events.iter().all(routine)
    }

    /// Committed attempts per worker below which the next commit starts: enough to keep a
    /// worker busy through a commit as long as the recent ones (see
    /// [`COMMIT_LOW_WATER_PER_WORKER`]).
    fn commit_low_water(&self) -> usize {
        let covering_one_commit = match (self.recent_commit_time, self.recent_attempt_time) {
            (Some(commit), Some(attempt)) => {
                let per_commit = commit.as_nanos().div_ceil(attempt.as_nanos().max(1));
                usize::try_from(per_commit)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1)
            }
            _ => 0,
        };
        covering_one_commit.clamp(COMMIT_LOW_WATER_PER_WORKER, LOOKAHEAD_PER_WORKER_SHORT / 2)
    }

    /// Append the pending events as one durable batch, then report what it recorded and hand
    /// its attempts to the workers. The engine thread does the fsync itself: workers go on
    /// with the attempts committed ahead meanwhile, outcomes wait in their channel, and all
    /// of them go out with the next batch (group commit). A separate journal thread did the
    /// same with two more thread hand-offs per batch, which on a small machine that also runs
    /// the units cost more than they overlapped.
    fn commit(
        &mut self,
        journal: &mut dyn Journal,
        observer: &mut dyn Observer,
        job_tx: &Sender<Job>,
    ) -> Result<(), JournalError> {
        if self.pending_events.is_empty() {
            return Ok(());
        }
        self.reporting = std::mem::take(&mut self.unreported);
        let events = std::mem::take(&mut self.pending_events);
        let jobs = std::mem::take(&mut self.pending_jobs);
        self.commit_now = false;
        let started = Instant::now();
        let mut jobs = jobs;
        for job in &mut jobs {
            job.committed_at = started;
        }
        journal.append(&events)?;
        let took = started.elapsed();
        self.recent_commit_time = Some(moving_average(self.recent_commit_time, took));
        self.report(observer);
        self.dispatch(jobs, job_tx, observer);
        Ok(())
    }

    /// A batch is durable: tell the observer what it recorded. Outcomes are reported only
    /// once durable, so "ok" on the screen means the journal holds it.
    fn report(&mut self, observer: &mut dyn Observer) {
        for deferred in std::mem::take(&mut self.reporting) {
            match deferred {
                Deferred::Finished {
                    unit_idx,
                    record,
                    retry_in,
                    log_dir,
                } => observer.notice(&Notice::Finished {
                    unit: &self.pipeline.units[unit_idx].name,
                    record: &record,
                    retry_in,
                    log_dir: &log_dir,
                }),
                Deferred::Skipped { unit_idx, upstream } => observer.notice(&Notice::Skipped {
                    unit: &self.pipeline.units[unit_idx].name,
                    upstream: &upstream,
                }),
            }
        }
    }

    /// A batch is durable: its attempts may spawn.
    fn dispatch(&mut self, jobs: Vec<Job>, job_tx: &Sender<Job>, observer: &mut dyn Observer) {
        for job in jobs {
            observer.notice(&Notice::Started {
                unit: &self.pipeline.units[job.unit_idx].name,
                attempt: job.attempt,
            });
            self.at_workers += 1;
            // The workers outlive this loop (the scope joins them), so a send cannot fail.
            let _ = job_tx.send(job);
        }
    }

    fn final_status(&self) -> Option<RunStatus> {
        // Every unit done is a success, even if a signal arrived after the last one ended.
        if self.state.iter().all(|state| *state == State::Done) {
            return Some(RunStatus::Succeeded);
        }
        if self.cancel.is_cancelled() {
            return Some(RunStatus::Interrupted);
        }
        self.failed_any.then_some(RunStatus::Failed)
    }

    /// Stop starting units (cancellation, or a check that failed before a start). Units
    /// waiting for a retry stay undone: their last failed attempt is already recorded.
    fn stop(&mut self) {
        self.stop_starting = true;
        self.halt.store(true, Ordering::SeqCst);
        self.drop_pending_starts();
        self.retry_waits.clear();
    }

    fn release_due_retries(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((due, unit_idx))) = self.retry_waits.peek().copied() {
            if due > now {
                break;
            }
            self.retry_waits.pop();
            self.state[unit_idx] = State::Waiting;
            self.queue.requeue(unit_idx);
        }
    }

    /// Decide and queue the `unit_started` of ready units: up to `max_parallel` running, plus
    /// [`LOOKAHEAD_PER_WORKER`] committed ahead per worker.
    /// The attempts go to `pending_jobs` at once, so a stop during this very call (a unit
    /// whose inputs changed, an input that cannot be read) takes them back with the rest.
    fn start_ready(&mut self, observer: &mut dyn Observer) {
        let max_parallel = self.options.max_parallel.max(1);
        let lookahead = if self
            .recent_attempt_time
            .is_some_and(|time| time < SHORT_ATTEMPT)
        {
            LOOKAHEAD_PER_WORKER_SHORT
        } else {
            LOOKAHEAD_PER_WORKER
        };
        let limit = max_parallel.saturating_mul(1 + lookahead);
        // A worker raises `halt` itself when an attempt fails for good (see `Job`).
        while !self.stop_starting && !self.halt.load(Ordering::SeqCst) && self.running < limit {
            let Some(unit_idx) = self.queue.peek() else {
                break;
            };
            // Only idempotent units are committed ahead: a non-idempotent unit's
            // `unit_started` must mean its process is about to exist, because after a crash
            // that record makes apollo stop and ask a human.
            let ahead = self.running >= max_parallel;
            if ahead && !self.pipeline.units[unit_idx].idempotent {
                break;
            }
            self.queue.pop();
            let unit = &self.pipeline.units[unit_idx];
            let upstream: Vec<(&str, &str)> = self
                .dag
                .deps(unit_idx)
                .iter()
                .map(|&dep_idx| {
                    (
                        self.pipeline.units[dep_idx].name.as_str(),
                        self.output_hashes[dep_idx].as_deref().unwrap_or(""),
                    )
                })
                .collect();
            let components = hash::input_components(unit, &self.pipeline.base_dir, &upstream);
            let (inputs, hash_error) = match components {
                Ok(inputs) => (inputs, None),
                Err(error) => (Vec::new(), Some(error.to_string())),
            };
            let input_hash = hash::combine_components(&inputs);
            if self.attempts_here[unit_idx] == 0 && hash_error.is_none() {
                let decision = decide(self.prior, unit, &input_hash, &inputs);
                observer.notice(&Notice::Decided {
                    unit: &unit.name,
                    decision: &decision,
                });
                match decision {
                    Decision::Reuse { .. } => {
                        self.reuse(unit_idx);
                        continue;
                    }
                    Decision::InputsChanged(changes)
                        if self.options.on_input_change == OnInputChange::Fail =>
                    {
                        self.input_change_error = Some(EngineError::InputsChanged {
                            unit: unit.name.clone(),
                            changes,
                        });
                        self.stop();
                        break;
                    }
                    _ => {}
                }
            }
            self.last_attempt[unit_idx] += 1;
            self.attempts_here[unit_idx] += 1;
            let attempt = self.last_attempt[unit_idx];
            self.pending_events.push(Event::UnitStarted(UnitStarted {
                unit: unit.name.clone(),
                attempt,
                input_hash,
                inputs,
            }));
            self.state[unit_idx] = State::Running;
            if let Some(error) = hash_error {
                // The attempt cannot start: record it as failed without spawning.
                self.running += 1;
                observer.notice(&Notice::Started {
                    unit: &unit.name,
                    attempt,
                });
                let outcome = failed_to_start(error);
                self.finish_attempt(Done {
                    worker: None,
                    unit_idx,
                    attempt,
                    queued: Duration::ZERO,
                    log_dir: PathBuf::new(),
                    outcome,
                    outputs: None,
                    awaits_ack: false,
                });
                continue;
            }
            self.running += 1;
            let halt_on_failure = !self.options.keep_going
                && self.attempts_here[unit_idx] > self.pipeline.units[unit_idx].retries;
            self.pending_jobs.push(Job {
                unit_idx,
                attempt,
                committed_at: Instant::now(),
                halt_on_failure,
            });
        }
    }

    fn reuse(&mut self, unit_idx: usize) {
        let unit = &self.pipeline.units[unit_idx];
        self.output_hashes[unit_idx] = Some(reused_output_hash(
            self.prior,
            unit,
            &self.pipeline.base_dir,
        ));
        self.state[unit_idx] = State::Done;
        self.results[unit_idx] = Some(UnitResult::Reused);
        self.queue.complete(self.dag, unit_idx);
    }

    fn finish_attempt(&mut self, done: Done) {
        let Done {
            worker,
            unit_idx,
            attempt,
            queued,
            log_dir,
            outcome,
            outputs,
            awaits_ack,
        } = done;
        self.running -= 1;
        // Only attempts a worker ran say how long attempts take (not one the engine failed
        // itself, nor one halted before it started).
        let ran = worker.is_some()
            && !(outcome.status == AttemptStatus::Interrupted && outcome.phases.is_empty());
        if ran {
            self.recent_attempt_time =
                Some(moving_average(self.recent_attempt_time, outcome.wall_time));
        }
        if worker.is_some() {
            self.at_workers -= 1;
        }
        let unit = &self.pipeline.units[unit_idx];
        if !unit.idempotent {
            self.commit_now = true;
        }
        let mut status = outcome.status;
        let mut error = outcome.error.clone();
        let mut output_hash = None;
        if status.satisfies_dependents() {
            match outputs {
                Some(Ok(Some(hash))) => output_hash = Some(hash),
                Some(Ok(None)) | None => {
                    output_hash = Some(
                        outcome
                            .stdout_sha256
                            .clone()
                            .unwrap_or_else(|| hash::sha256_hex(b"")),
                    );
                }
                // A unit that skipped itself need not have produced its outputs.
                Some(Err(_)) if status == AttemptStatus::Skipped => {
                    output_hash = Some(
                        outcome
                            .stdout_sha256
                            .clone()
                            .unwrap_or_else(|| hash::sha256_hex(b"")),
                    );
                }
                Some(Err(message)) => {
                    status = AttemptStatus::Failed;
                    error = Some(format!(
                        "execute exited 0 but a declared output is missing: {message}"
                    ));
                }
            }
        }
        let record = UnitFinished {
            unit: unit.name.clone(),
            attempt,
            status,
            exit: outcome.exit,
            failed_phase: outcome.failed_phase,
            timed_out: outcome.timed_out,
            duration_ms: millis(outcome.wall_time),
            queued_ms: millis(queued),
            output_hash: output_hash.clone(),
            stdout_bytes: outcome.stdout_bytes,
            stderr_bytes: outcome.stderr_bytes,
            user_cpu_ms: millis(outcome.user_cpu),
            sys_cpu_ms: millis(outcome.sys_cpu),
            max_rss_kib: outcome.max_rss_kib,
            leftovers_killed: outcome
                .phases
                .iter()
                .map(|phase| phase.leftovers_killed)
                .sum(),
            phases: outcome
                .phases
                .iter()
                .map(|phase| PhaseRecord {
                    phase: phase.phase,
                    offset_ms: millis(phase.offset),
                    duration_ms: millis(phase.wall_time),
                    exit: phase.exit,
                    timed_out: phase.timed_out,
                })
                .collect(),
            error: error.clone(),
        };
        let mut retry_in = None;
        let mut retry_failed = false;
        match status {
            AttemptStatus::Succeeded | AttemptStatus::Skipped => {
                self.last_failure[unit_idx] = None;
                self.output_hashes[unit_idx] = output_hash;
                self.state[unit_idx] = State::Done;
                self.results[unit_idx] = Some(if status == AttemptStatus::Skipped {
                    UnitResult::SelfSkipped { attempt }
                } else {
                    UnitResult::Succeeded { attempt }
                });
                self.queue.complete(self.dag, unit_idx);
            }
            AttemptStatus::Interrupted => {
                self.state[unit_idx] = State::Waiting;
                self.results[unit_idx] = Some(UnitResult::NotRun);
                // A retry halted by a failure elsewhere: the unit's last real attempt failed.
                if self.failed_any
                    && !self.options.keep_going
                    && !self.cancel.is_cancelled()
                    && let Some(result) = self.last_failure[unit_idx].take()
                {
                    self.state[unit_idx] = State::Failed;
                    self.results[unit_idx] = Some(result);
                    retry_failed = true;
                }
            }
            AttemptStatus::Failed | AttemptStatus::TimedOut => {
                let retries_left = self.attempts_here[unit_idx] <= unit.retries;
                if retries_left && !self.stop_starting && !self.cancel.is_cancelled() {
                    let delay = backoff(
                        unit,
                        self.attempts_here[unit_idx],
                        self.options.max_retry_delay,
                    );
                    self.retry_waits
                        .push(Reverse((Instant::now() + delay, unit_idx)));
                    self.last_failure[unit_idx] = Some(UnitResult::Failed {
                        attempt,
                        log_dir: log_dir.clone(),
                        error: error.as_deref().map(first_line),
                    });
                    self.state[unit_idx] = State::RetryWait;
                    retry_in = Some(delay);
                } else {
                    self.state[unit_idx] = State::Failed;
                    self.results[unit_idx] = Some(UnitResult::Failed {
                        attempt,
                        log_dir: log_dir.clone(),
                        error: error.as_deref().map(first_line),
                    });
                    self.failed_any = true;
                }
            }
        }
        self.unreported.push(Deferred::Finished {
            unit_idx,
            record: record.clone(),
            retry_in,
            log_dir,
        });
        self.pending_events.push(Event::UnitFinished(record));
        if self.state[unit_idx] == State::Failed {
            self.skip_downstream(unit_idx);
            // A halted retry's failure comes from fail-fast already under way.
            if !self.options.keep_going && !retry_failed {
                self.fail_fast();
            }
        }
        // The worker may go on once every outcome at hand is taken in (see `send_acks`).
        if let Some(worker_idx) = worker.filter(|_| awaits_ack) {
            self.acks_due.push(worker_idx);
        }
    }

    /// Let the workers whose outcomes were taken in go on. Called after draining every
    /// outcome at hand, so a failure among them halts new starts before any of those workers
    /// takes an attempt committed ahead.
    fn send_acks(&mut self) {
        for worker_idx in self.acks_due.drain(..) {
            if let Some(sender) = self.acks.get(worker_idx) {
                let _ = sender.send(());
            }
        }
    }

    /// Record every unit downstream of a failed unit as skipped.
    fn skip_downstream(&mut self, failed_idx: usize) {
        let upstream = self.pipeline.units[failed_idx].name.clone();
        for unit_idx in self.dag.downstream(failed_idx) {
            if !self.in_scope[unit_idx] || self.state[unit_idx] != State::Waiting {
                continue;
            }
            self.state[unit_idx] = State::Skipped;
            let unit = &self.pipeline.units[unit_idx].name;
            self.results[unit_idx] = Some(UnitResult::SkippedUpstream {
                upstream: upstream.clone(),
            });
            self.pending_events.push(Event::UnitSkipped(UnitSkipped {
                unit: unit.clone(),
                reason: SkipReason::UpstreamFailed {
                    upstream: upstream.clone(),
                },
            }));
            self.unreported.push(Deferred::Skipped {
                unit_idx,
                upstream: upstream.clone(),
            });
        }
    }

    /// Fail-fast: start nothing new; units waiting for a retry fail for good.
    fn fail_fast(&mut self) {
        self.stop_starting = true;
        self.halt.store(true, Ordering::SeqCst);
        self.retry_waits.clear();
        self.drop_pending_starts();
        // Units whose last attempt failed and that wait for a retry — in the backoff heap, or
        // already released to the ready queue — will not get it: they failed.
        for unit_idx in 0..self.pipeline.units.len() {
            if !matches!(self.state[unit_idx], State::RetryWait | State::Waiting) {
                continue;
            }
            if let Some(result) = self.last_failure[unit_idx].take() {
                self.state[unit_idx] = State::Failed;
                self.results[unit_idx] = Some(result);
                self.skip_downstream(unit_idx);
            }
        }
    }

    /// Take back the attempts of the batch not yet handed to the journal: their
    /// `unit_started` is never written, so they leave no record of an attempt that never had
    /// a process. (Attempts already handed to the workers are halted by them instead.)
    fn drop_pending_starts(&mut self) {
        for job in std::mem::take(&mut self.pending_jobs) {
            let unit = &self.pipeline.units[job.unit_idx].name;
            self.pending_events.retain(|event| {
                !matches!(event, Event::UnitStarted(started)
                    if &started.unit == unit && started.attempt == job.attempt)
            });
            self.running -= 1;
            self.last_attempt[job.unit_idx] -= 1;
            self.attempts_here[job.unit_idx] -= 1;
            self.state[job.unit_idx] = if self.last_failure[job.unit_idx].is_some() {
                State::RetryWait
            } else {
                State::Waiting
            };
        }
    }

    /// The journal failed: stop every running attempt, wait for them, report the error.
    fn abort_on_journal_error(
        &mut self,
        error: JournalError,
        done_rx: &Receiver<Done>,
    ) -> EngineError {
        self.stop_starting = true;
        self.halt.store(true, Ordering::SeqCst);
        // Without acknowledgements the workers stop after their current attempt.
        self.acks.clear();
        self.cancel.cancel(CancelLevel::Graceful);
        while self.at_workers > 0 {
            if done_rx.recv().is_err() {
                break;
            }
            self.at_workers -= 1;
        }
        EngineError::Journal(error)
    }
}

/// The output hash a reused unit hands its dependents: the recorded one, or — for a human's
/// verdict, which measured nothing — the declared outputs as they are now, else a fixed value
/// standing for the verdict.
pub(crate) fn reused_output_hash(
    prior: &PriorState,
    unit: &Unit,
    base_dir: &std::path::Path,
) -> String {
    match prior.unit(&unit.name).map(|prior_unit| &prior_unit.state) {
        Some(PriorUnitState::Done {
            output_hash: Some(output_hash),
            ..
        }) => output_hash.clone(),
        Some(PriorUnitState::Done { attempt, .. }) => hash::output_hash(unit, base_dir)
            .ok()
            .flatten()
            .unwrap_or_else(|| hash::sha256_hex(format!("marked {attempt}").as_bytes())),
        _ => String::new(),
    }
}

/// The resume rules of DESIGN §7 for one unit whose input hash is known.
pub(crate) fn decide(
    prior: &PriorState,
    unit: &Unit,
    input_hash: &str,
    inputs: &[InputComponent],
) -> Decision {
    let Some(prior_unit) = prior.unit(&unit.name) else {
        return Decision::FirstRun;
    };
    match &prior_unit.state {
        PriorUnitState::Done {
            attempt,
            input_hash: old_hash,
            inputs: old_inputs,
            marked,
            ..
        } => {
            if old_hash == input_hash {
                Decision::Reuse {
                    attempt: *attempt,
                    marked: *marked,
                }
            } else {
                let mut changes = hash::describe_input_changes(old_inputs, inputs);
                if changes.is_empty() {
                    changes.push("input hash changed".to_owned());
                }
                Decision::InputsChanged(changes)
            }
        }
        PriorUnitState::InFlight { attempt } => Decision::WasInFlight { attempt: *attempt },
        PriorUnitState::NotDone if prior_unit.last_attempt == 0 => Decision::FirstRun,
        PriorUnitState::NotDone => Decision::PreviouslyNotDone {
            attempt: prior_unit.last_attempt,
        },
    }
}

fn failed_to_start(error: String) -> AttemptOutcome {
    AttemptOutcome {
        error: Some(error),
        ..AttemptOutcome::nothing_ran(AttemptStatus::Failed)
    }
}

mod plan;

pub use plan::{Planned, dry_run};

#[cfg(test)]
mod tests;
