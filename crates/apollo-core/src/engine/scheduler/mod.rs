//! The scheduler loop on the engine thread: the one owner of the run's state, and the one
//! writer of its journal. It decides which ready units start, commits their `unit_started`
//! in batches, hands them to the workers once durable, and takes their outcomes in.
//!
//! This file holds the loop and the commit; `start.rs` decides and queues new attempts,
//! `finish.rs` takes their outcomes in.

mod commit;
mod finish;
mod hashing;
mod late;
mod reuse;
mod start;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::admission::{self, BatchState};
use super::api::{EngineError, EngineOptions, RunReport};
use super::batch::Batch;
use super::hasher::{self, HashContext, HashJob};
use super::ledger::{IllegalMove, Kind, Ledger};
use super::observer::Observer;
use super::pacer::Pacer;
use super::retry::RetryQueue;
use super::units::{State, UnitTable};
use super::workers::{Acks, FromWorker, Job};
use crate::cancel::{CancelLevel, CancelToken};
use crate::dag::{Dag, ReadyQueue};
use crate::event::{Event, RunStatus};
use crate::journal::{Journal, JournalError};
use crate::model::Pipeline;
use crate::resume::PriorState;

#[cfg(test)]
thread_local! {
    /// Test-only: while set, commits on this thread leave out their `unit_started` records
    /// and hand the attempts to the workers all the same — the write-ahead rule broken on
    /// purpose, to prove that the tests' checks notice.
    pub(super) static BREAK_WRITE_AHEAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Test-only: how many naps (`Scheduler::nap`) the engine on this thread took.
    pub(super) static NAPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The channels the scheduler works with.
pub(super) struct Channels<'c> {
    pub(super) job_tx: &'c Sender<Job>,
    /// Attempts' reports and ends.
    pub(super) from_workers: &'c Receiver<FromWorker>,
    /// Woken when the run is cancelled.
    pub(super) wake_rx: &'c Receiver<()>,
}

/// The hashing threads' job channels, and what the engine thread needs to do a job itself.
#[derive(Clone, Copy)]
pub(super) struct HashChannels<'a> {
    /// Jobs for the hashing threads.
    pub(super) jobs: &'a Sender<HashJob>,
    /// The same channel's receiving end: the engine thread takes a job back while it waits.
    pub(super) take: &'a Receiver<HashJob>,
    /// Jobs the engine thread took on and found to need a file read: the hashing threads
    /// take these first.
    pub(super) deferred: &'a Sender<HashJob>,
    pub(super) context: HashContext<'a>,
}

/// The run's state, owned by the engine thread alone.
pub(super) struct Scheduler<'a> {
    pipeline: &'a Pipeline,
    dag: &'a Dag,
    prior: &'a PriorState,
    options: &'a EngineOptions,
    cancel: &'a CancelToken,
    /// By unit index: whether the unit takes part (`--only`).
    in_scope: Vec<bool>,
    /// Shared with the workers: raised when no committed attempt may start any more.
    halt: &'a AtomicBool,
    acks: Acks,
    pacer: Pacer,
    units: UnitTable,
    queue: ReadyQueue,
    retries: RetryQueue,
    batch: Batch,
    /// Where each unit in flight is (hashing, checking reuse, committed, at a worker): the
    /// counts of running units, Slurm jobs, hashing jobs and attempts at workers are read from
    /// it.
    ledger: Ledger,
    /// Slurm jobs in flight at most; 0 when no unit runs on Slurm.
    max_jobs: usize,
    /// Units declaring input files are hashed on these threads (`None`: no unit declares any).
    hashing: Option<HashChannels<'a>>,
    /// No new attempt is decided or committed (a stop, fail-fast, a journal error).
    stop_starting: bool,
    /// A unit failed for good.
    failed_any: bool,
    /// Why the run stopped for a human, returned at its end: a change of a done unit's
    /// inputs (`--on-input-change`), a non-idempotent attempt cut off by a signal apollo did
    /// not send, or an attempt that needs a human ([`crate::NeedsHuman`]). The first wins.
    human_needed: Option<EngineError>,
    /// Watching the run's deadline for `on_late`, until the run is found late.
    late: Option<late::LateWatcher<'a>>,
}

impl<'a> Scheduler<'a> {
    #[allow(
        clippy::too_many_arguments,
        reason = "one private constructor, each argument distinct"
    )]
    pub(super) fn new(
        pipeline: &'a Pipeline,
        dag: &'a Dag,
        prior: &'a PriorState,
        options: &'a EngineOptions,
        in_scope: Vec<bool>,
        cancel: &'a CancelToken,
        halt: &'a AtomicBool,
        acks: Acks,
        hashing: Option<HashChannels<'a>>,
    ) -> Self {
        let queue = ReadyQueue::new(dag, |unit_idx| !in_scope[unit_idx]);
        Self {
            pipeline,
            dag,
            prior,
            options,
            cancel,
            in_scope,
            halt,
            acks,
            pacer: Pacer::new(),
            units: UnitTable::new(pipeline, prior),
            queue,
            retries: RetryQueue::default(),
            batch: Batch::default(),
            ledger: Ledger::new(pipeline.units.len()),
            max_jobs: max_jobs(pipeline),
            hashing,
            stop_starting: false,
            failed_any: false,
            human_needed: None,
            late: late::LateWatcher::new(options.late.as_ref(), prior),
        }
    }

    /// Run until nothing is left to start or running, then record `run_finished` (unless
    /// `--only` left units undone).
    pub(super) fn run(
        &mut self,
        observer: &mut dyn Observer,
        channels: &Channels<'_>,
        journal: &mut dyn Journal,
    ) -> Result<RunReport, EngineError> {
        let workers = self.options.max_parallel.max(1);
        loop {
            if self.cancel.is_cancelled() {
                self.stop();
            }
            self.release_due_retries();
            self.start_ready(observer);
            if self.batch.is_empty() {
                self.pacer.release();
            } else {
                let now = Instant::now();
                self.pacer.hold(now);
                let batch = BatchState {
                    records: self.batch.len(),
                    only_reuses: self.batch.only_reuses(),
                    urgent: self.batch.is_urgent(),
                };
                let counts = self.ledger.counts();
                if admission::commit_due(
                    &batch,
                    &counts,
                    self.stop_starting,
                    &self.pacer,
                    workers,
                    now,
                ) {
                    let full = self.batch.only_reuses() && self.pacer.reuses_full(self.batch.len());
                    if let Err(error) = self.commit(journal, observer, channels.job_tx) {
                        return Err(self.abort_on_journal_error(error, channels.from_workers));
                    }
                    self.pacer.release();
                    // `start_ready` stopped at a full batch of reuses: decide on at once.
                    if full {
                        continue;
                    }
                }
            }
            let counts = self.ledger.counts();
            if admission::finished(
                &counts,
                self.batch.is_empty(),
                self.stop_starting,
                self.queue.is_empty() && self.retries.is_empty(),
            ) {
                break;
            }
            // Wait for an attempt to end, a retry to come due, a held batch's deadline, or a
            // cancellation.
            let timeout = self.wait_timeout();
            observer.flush();
            // Reuse checks come back within microseconds: poll briefly before sleeping (see
            // `hasher::POLL_BEFORE_SLEEP`), doing queued checks meanwhile. So is a
            // resume's output check when nothing runs.
            if (counts.checking_reuse > 0 || (counts.at_hashers > 0 && counts.at_workers == 0))
                && self.poll_for_hashed(channels, observer)
            {
                continue;
            }
            // Nothing is left unsynced while the engine waits.
            if let Err(error) = self.sync_unsynced(journal, observer) {
                return Err(self.abort_on_journal_error(error, channels.from_workers));
            }
            if let Err(error) = self.check_late(journal, observer) {
                return Err(self.abort_on_journal_error(error, channels.from_workers));
            }
            let timeout = self.nap(channels, timeout);
            crossbeam_channel::select! {
                recv(channels.from_workers) -> message => {
                    if let Ok(message) = message {
                        self.take_in(message, observer);
                        // Take every other attempt that ended meanwhile: one batch for all.
                        while let Ok(message) = channels.from_workers.try_recv() {
                            self.take_in(message, observer);
                        }
                        self.acks.send_due();
                    }
                }
                recv(channels.wake_rx) -> _ => self.stop(),
                default(timeout) => {}
            }
        }
        let status = self.final_status().filter(|_| self.human_needed.is_none());
        // The last append is durable: `run_finished`, else one that syncs what was appended
        // unsynced (and only then are its notices told).
        let last = status.map(|status| Event::RunFinished(self.units.run_finished(status)));
        if let Some(unsynced) = self.batch.take_unsynced() {
            journal
                .append(last.as_slice())
                .map_err(EngineError::Journal)?;
            unsynced
                .into_iter()
                .for_each(|notice| notice.deliver(self.pipeline, observer));
        } else if let Some(last) = last {
            journal.append(&[last]).map_err(EngineError::Journal)?;
        }
        if let Some(error) = self.human_needed.take() {
            return Err(error);
        }
        Ok(RunReport {
            status,
            units: self.units.take_results(self.pipeline, self.prior),
        })
    }

    fn final_status(&self) -> Option<RunStatus> {
        // Every unit done is a success, even if a signal arrived after the last one ended.
        if self.units.all_done() {
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
        self.retries.clear();
    }

    fn release_due_retries(&mut self) {
        let now = Instant::now();
        while let Some(unit_idx) = self.retries.pop_due(now) {
            self.units[unit_idx].state = State::Waiting;
            self.queue.requeue(unit_idx);
        }
    }

    /// What the ledger needs to know of `unit_idx`: whether it is idempotent, and whether it
    /// runs on Slurm (counted against `max_jobs`).
    fn kind(&self, unit_idx: usize) -> Kind {
        let unit = &self.pipeline.units[unit_idx];
        Kind {
            idempotent: unit.idempotent,
            slurm: unit.executor == crate::model::ExecutorKind::Slurm,
        }
    }

    /// Take back the attempts of the batch not yet handed to the journal: their
    /// `unit_started` is never written. (Attempts already handed to the workers are halted by
    /// them instead.)
    fn drop_pending_starts(&mut self) {
        for job in self.batch.take_back_starts(self.pipeline) {
            checked(self.ledger.taken_back(job.unit_idx));
            self.units[job.unit_idx].take_back_attempt();
        }
    }

    /// The journal failed: stop every running attempt, wait for them, report the error.
    fn abort_on_journal_error(
        &mut self,
        error: JournalError,
        from_workers: &Receiver<FromWorker>,
    ) -> EngineError {
        self.stop_starting = true;
        self.halt.store(true, Ordering::SeqCst);
        // Without acknowledgements the workers stop after their current attempt.
        self.acks.abandon();
        self.cancel.cancel(CancelLevel::Graceful);
        // Counted here, not read from the ledger: each end is one fewer whatever the ledger
        // says of it, so this wait always ends.
        let mut at_workers = self.ledger.counts().at_workers;
        while at_workers > 0 {
            match from_workers.recv() {
                Ok(FromWorker::Done(done)) => {
                    at_workers -= 1;
                    checked(self.ledger.ended_at_worker(done.unit_idx));
                }
                Ok(FromWorker::Report { .. } | FromWorker::Hashed(_)) => {}
                Err(_) => break,
            }
        }
        EngineError::Journal(error)
    }
}

/// The value of a ledger move, or `None` when the move was illegal: a defect of the scheduler,
/// which fails debug builds (every engine test) and leaves the ledger unchanged in a release
/// build rather than stop a run that may be holding processes.
fn checked<T>(result: Result<T, IllegalMove>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(illegal) => {
            if cfg!(debug_assertions) {
                panic!("{illegal}");
            }
            None
        }
    }
}

/// Slurm jobs in flight at most: the pipeline's `max_jobs` (default
/// [`crate::model::DEFAULT_MAX_JOBS`]), or 0 when no unit runs on Slurm.
pub(super) fn max_jobs(pipeline: &Pipeline) -> usize {
    let has_slurm = pipeline
        .units
        .iter()
        .any(|unit| unit.executor == crate::model::ExecutorKind::Slurm);
    if has_slurm {
        pipeline
            .max_jobs
            .unwrap_or(crate::model::DEFAULT_MAX_JOBS)
            .max(1)
    } else {
        0
    }
}
