//! The worker pool: threads that run attempts handed over by the scheduler, and the
//! acknowledgement and halt protocol that keeps a failure from being overtaken.
//!
//! Everything an attempt needs beyond its durable `unit_started` — its log folder, its
//! processes, its output hash — happens on a worker, so the engine thread only decides and
//! journals. What it needs *before* — its input files' hashes — happens on a hashing thread
//! (`hasher.rs`): the engine decides once they come back.
//!
//! **Halt.** A shared flag, raised by the scheduler when it stops starting units, and by a
//! worker itself when its attempt failed for good under fail-fast ([`Job::halt_on_failure`])
//! — before it reports, so no other worker starts an attempt committed ahead while the
//! engine is still in an fsync and has not read the failure. A worker that finds the flag
//! raised reports its job as interrupted without running it.
//!
//! **Acknowledgement.** After an attempt that did not go well (it failed, or its outputs
//! could not be hashed) the worker waits for the scheduler to take its outcome in before it
//! takes the next job: a failure is then always seen (and new starts halted) before the same
//! worker starts an attempt committed ahead. That wait is a thread hand-off, not an fsync.
//! After a success it goes straight on: a success never stops the run, and the hand-off cost
//! a context switch each way per attempt.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Scope;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::api::AttemptLogs;
use super::hasher::{Hashed, why_not_captured};
use super::held_still::inputs_held_still;
use super::resources::ResourcePool;
use crate::cancel::CancelToken;
use crate::capture::{BlobSink, Capture, FileEntry};
use crate::event::AttemptStatus;
use crate::executor::{
    AttemptContext, AttemptEvent, AttemptOutcome, AttemptReporter, AttemptRequest, Executor,
};
use crate::hash::{self, HashError, Limits};
use crate::hash_cache::FileStamp;
use crate::model::{Pipeline, Unit};

/// An attempt whose `unit_started` is durable, for a worker to run.
pub(super) struct Job {
    pub(super) unit_idx: usize,
    pub(super) attempt: u32,
    /// When its `unit_started` was handed to the journal (set again when the batch holding
    /// it is appended, so a deferred commit does not count as waiting for a worker).
    pub(super) committed_at: Instant,
    /// Whether this attempt failing stops new starts (fail-fast, and no retry left): then
    /// the worker itself raises `halt` before reporting.
    pub(super) halt_on_failure: bool,
    /// The part of the unit's timeout its input files took to hash (zero when it declares
    /// none): the attempt and its output hashing get what is left.
    pub(super) spent: Duration,
    /// The attempt an earlier apollo left in flight, on the unit's first attempt of a resume
    /// (see [`AttemptRequest::in_flight`]).
    pub(super) in_flight: Option<u32>,
    /// Its declared input files' paths and `stat` identities when they were hashed: checked
    /// again when the attempt ends (see [`inputs_held_still`]).
    pub(super) input_stamps: Vec<(PathBuf, FileStamp)>,
}

/// An attempt that ended, reported to the scheduler.
pub(super) struct Done {
    /// The worker that ran it, waiting for the engine to take the outcome in; `None` for an
    /// attempt the engine failed itself.
    pub(super) worker: Option<usize>,
    pub(super) unit_idx: usize,
    pub(super) attempt: u32,
    /// How long the job waited for a worker after its `unit_started` was committed.
    pub(super) queued: Duration,
    pub(super) log_dir: PathBuf,
    pub(super) outcome: AttemptOutcome,
    /// The declared outputs' hash (`Ok(None)`: none declared), computed on the worker.
    pub(super) outputs: Option<Result<Option<String>, HashError>>,
    /// The declared outputs' manifest, when they were hashed (empty otherwise).
    pub(super) output_files: Vec<FileEntry>,
    /// Whether the worker waits for an acknowledgement before its next job.
    pub(super) awaits_ack: bool,
}

/// What a worker tells the scheduler, over one channel: an attempt's reports arrive before
/// its end.
#[allow(
    clippy::large_enum_variant,
    reason = "`Done` is the message of every attempt: boxing it would allocate per attempt"
)]
pub(super) enum FromWorker {
    /// A running attempt reported something (see [`AttemptContext::report`]).
    Report {
        unit_idx: usize,
        attempt: u32,
        event: AttemptEvent,
    },
    /// An attempt ended.
    Done(Done),
    /// A unit's input files were hashed (or could not be).
    Hashed(Hashed),
}

/// Passes a running attempt's reports to the scheduler. It lives on the worker's stack for
/// the one `run_attempt` call (the context's lifetime ends with it), so every report is sent
/// before the attempt's [`Done`]; an attempt that reports nothing costs nothing.
struct WorkerReporter<'a> {
    to_scheduler: &'a Sender<FromWorker>,
    unit_idx: usize,
    attempt: u32,
}

impl AttemptReporter for WorkerReporter<'_> {
    fn report(&self, event: AttemptEvent) {
        // The scheduler takes messages until every attempt at a worker has ended; a send can
        // only fail once the run is over.
        let _ = self.to_scheduler.send(FromWorker::Report {
            unit_idx: self.unit_idx,
            attempt: self.attempt,
            event,
        });
    }
}

/// What every worker shares.
#[derive(Clone, Copy)]
pub(super) struct WorkerShared<'a> {
    pub(super) pipeline: &'a Pipeline,
    pub(super) run_id: &'a str,
    pub(super) executor: &'a dyn Executor,
    pub(super) logs: &'a dyn AttemptLogs,
    pub(super) cancel: &'a CancelToken,
    pub(super) halt: &'a AtomicBool,
    /// Where declared files' bytes go as they are hashed, if anywhere.
    pub(super) capture: Option<&'a dyn BlobSink>,
    /// Local capacity (`cpus`, `memory`) the local units' attempts share.
    pub(super) resources: &'a ResourcePool,
}

/// Start `n_workers` workers in `scope`. They end when the job sender and the returned
/// acknowledgements are dropped.
pub(super) fn spawn<'scope, 'env: 'scope>(
    scope: &'scope Scope<'scope, 'env>,
    n_workers: usize,
    shared: WorkerShared<'env>,
    jobs: &Receiver<Job>,
    to_scheduler: &Sender<FromWorker>,
) -> Acks {
    let mut senders = Vec::with_capacity(n_workers);
    for worker_idx in 0..n_workers {
        let jobs = jobs.clone();
        let to_scheduler = to_scheduler.clone();
        let (ack_tx, ack_rx) = crossbeam_channel::bounded::<()>(1);
        senders.push(ack_tx);
        scope.spawn(move || worker(worker_idx, shared, &jobs, &to_scheduler, &ack_rx));
    }
    Acks {
        senders,
        due: Vec::new(),
    }
}

/// The scheduler's side of the acknowledgement protocol.
pub(super) struct Acks {
    /// One channel per worker.
    senders: Vec<Sender<()>>,
    /// Workers whose outcome was taken in and who wait for their acknowledgement.
    due: Vec<usize>,
}

impl Acks {
    /// `worker_idx`'s outcome was taken in; it goes on at the next [`send_due`](Self::send_due).
    pub(super) fn owe(&mut self, worker_idx: usize) {
        self.due.push(worker_idx);
    }

    /// Let the workers whose outcomes were taken in go on. Called after draining every
    /// outcome at hand, so a failure among them halts new starts before any of those workers
    /// takes an attempt committed ahead.
    pub(super) fn send_due(&mut self) {
        for worker_idx in self.due.drain(..) {
            if let Some(sender) = self.senders.get(worker_idx) {
                let _ = sender.send(());
            }
        }
    }

    /// Never acknowledge again: each worker reports the attempts still queued as halted (the
    /// caller raised `halt`) without running them.
    pub(super) fn abandon(&mut self) {
        self.senders.clear();
    }
}

/// One worker: runs jobs until the job channel closes (or the scheduler is gone).
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(super) fn worker(
    worker_idx: usize,
    shared: WorkerShared<'_>,
    jobs: &Receiver<Job>,
    to_scheduler: &Sender<FromWorker>,
    ack: &Receiver<()>,
) {
    let WorkerShared {
        pipeline,
        run_id,
        executor,
        logs,
        cancel,
        halt,
        capture,
        resources,
    } = shared;
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
                output_files: Vec::new(),
                awaits_ack: true,
            };
            // Acknowledgements abandoned (the journal failed) leave `halt` raised: the
            // worker goes on reporting the attempts still queued, without running them, so
            // the scheduler hears of every attempt it handed out.
            if to_scheduler.send(FromWorker::Done(message)).is_err() {
                return;
            }
            let _ = ack.recv();
            continue;
        }
        // A panic in an executor, a hash or the log folder must not leave the engine waiting
        // for an outcome that never comes: it becomes a failed attempt.
        let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            match logs.log_dir(&unit.name, job.attempt) {
                Ok(log_dir) => {
                    // Hashing the inputs took part of the timeout: the attempt gets the rest
                    // (a copy of the unit only for a unit with input files and a timeout).
                    let timeout = unit.timeout;
                    let left = timeout.map(|timeout| timeout.saturating_sub(job.spent));
                    if left == Some(Duration::ZERO) {
                        // Spawning only to kill at once could leave half-done side effects.
                        let mut outcome = failed_to_start(format!(
                            "not started: hashing its input files used up the unit's timeout \
                             of {:?}",
                            timeout.unwrap_or_default()
                        ));
                        outcome.status = AttemptStatus::TimedOut;
                        outcome.timed_out = true;
                        return (log_dir, outcome, None, Vec::new());
                    }
                    let shortened;
                    let unit = if left == unit.timeout {
                        unit
                    } else {
                        shortened = Unit {
                            timeout: left,
                            ..unit.clone()
                        };
                        &shortened
                    };
                    let request = AttemptRequest::new(run_id, unit, job.attempt, &log_dir)
                        .with_in_flight(job.in_flight)
                        .with_attempt_dirs(logs);
                    let reporter = WorkerReporter {
                        to_scheduler,
                        unit_idx: job.unit_idx,
                        attempt: job.attempt,
                    };
                    let context = AttemptContext::new(cancel).with_reporter(&reporter);
                    let permit = resources.acquire(unit, cancel);
                    let mut outcome = executor.run_attempt(&request, &context);
                    drop(permit);
                    inputs_held_still(&mut outcome, unit, &job.input_stamps, &pipeline.base_dir);
                    let mut output_files = Vec::new();
                    let outputs = outcome.status.satisfies_dependents().then(
                        || -> Result<Option<String>, HashError> {
                            let limits = output_limits(unit, &outcome, left, timeout, cancel);
                            let capture = capture_for(capture, unit, unit.capture.mode.outputs());
                            let hashed = hash::output_files_within(
                                unit,
                                &pipeline.base_dir,
                                &limits,
                                capture.as_ref(),
                            )?;
                            Ok(hashed.map(|(hash, mut files)| {
                                why_not_captured(&mut files, capture.as_ref(), unit);
                                output_files = files;
                                hash
                            }))
                        },
                    );
                    (log_dir, outcome, outputs, output_files)
                }
                Err(error) => (
                    PathBuf::new(),
                    failed_to_start(format!("cannot create the attempt's log folder: {error}")),
                    None,
                    Vec::new(),
                ),
            }
        }));
        let (log_dir, outcome, outputs, output_files) = attempt.unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            let error = format!("internal error while running the attempt: {message}");
            (PathBuf::new(), failed_to_start(error), None, Vec::new())
        });
        // Only an attempt that did not go well can make the engine stop starting units.
        let awaits_ack = !outcome.status.satisfies_dependents() || matches!(outputs, Some(Err(_)));
        // A declared output that is missing or not hashed in time fails a success, not a
        // self-skip (see `record::settle`); a cancelled hashing only interrupts it.
        let failed = matches!(
            outcome.status,
            AttemptStatus::Failed | AttemptStatus::TimedOut
        ) || (outcome.status == AttemptStatus::Succeeded
            && matches!(&outputs, Some(Err(error)) if !error.cancelled()));
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
            output_files,
            awaits_ack,
        };
        if to_scheduler.send(FromWorker::Done(message)).is_err() {
            return;
        }
        if awaits_ack {
            // Abandoned (see above): the next jobs are reported halted.
            let _ = ack.recv();
        }
    }
}

/// The limits of hashing `unit`'s declared outputs after `outcome`: what the attempt left of
/// the unit's `timeout` (`left`: the timeout less the time its inputs took to hash), counting
/// prepare and execute; and the run's cancellation, after the unit's kill grace for a graceful
/// one (a success that ended as the user pressed Ctrl-C is still recorded, as its process
/// would have been given that grace), at once for an immediate one. No limit for a unit
/// without a declared output (nothing to read).
fn output_limits<'a>(
    unit: &Unit,
    outcome: &AttemptOutcome,
    left: Option<Duration>,
    timeout: Option<Duration>,
    cancel: &'a CancelToken,
) -> Limits<'a> {
    if unit.outputs.is_empty() {
        return Limits::none();
    }
    // The timeout covers prepare + execute; cleanup has its own limit.
    let used = outcome
        .phases
        .iter()
        .filter(|phase| phase.phase != crate::model::Phase::Cleanup)
        .map(|phase| phase.offset + phase.wall_time)
        .max()
        .unwrap_or(outcome.wall_time);
    Limits::new(cancel, left.map(|left| left.saturating_sub(used)), timeout)
        .with_grace(unit.kill_grace)
}

/// What hashing `unit`'s files keeps: everything through `sink` when there is one and the
/// unit's capture mode covers these files (`wanted`), else nothing.
pub(super) fn capture_for<'a>(
    sink: Option<&'a dyn BlobSink>,
    unit: &Unit,
    wanted: bool,
) -> Option<Capture<'a>> {
    let sink = sink.filter(|_| wanted)?;
    Some(Capture {
        sink,
        max_file: unit.capture.max_file,
    })
}

/// A failed attempt in which nothing ran, with `error` as its reason.
pub(super) fn failed_to_start(error: String) -> AttemptOutcome {
    AttemptOutcome {
        error: Some(error),
        ..AttemptOutcome::nothing_ran(AttemptStatus::Failed)
    }
}
