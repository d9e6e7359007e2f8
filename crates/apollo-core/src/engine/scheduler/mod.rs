//! The scheduler: the one owner of the run's state, and the one writer of its journal,
//! written as a machine its driver feeds. It decides which ready units start, batches their
//! `unit_started` and asks for them to be appended ([`Command::Append`]), hands the attempts
//! out once the driver reports the append durable ([`Command::Dispatch`]), and takes their
//! outcomes in. It reads no clock (each entry point is given `now`), waits on no channel and
//! appends nothing itself: the driver (`driver.rs`: the workers' and hashing threads'
//! channels, the journal, the clock, the nap) performs its commands and turns what happens into
//! calls; the simulation test (`engine/tests/sim/`) drives the same machine with none of them.
//!
//! This file holds the machine's state and its turn; `start.rs` decides and queues new
//! attempts, `hashing.rs` units hashed first, `commit.rs` the batch's append and hand-out,
//! `finish.rs` takes outcomes in, `late.rs` watches the deadline.

mod command;
mod commit;
mod driver;
mod end;
mod finish;
mod hashing;
mod late;
mod reuse;
mod start;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use command::Appending;
pub(super) use command::Command;
pub(super) use driver::{Channels, HashChannels, drive};

use super::admission::{self, BatchState};
use super::api::{EngineError, EngineOptions};
use super::batch::{Batch, ManifestStore};
use super::ledger::{Counts, IllegalMove, Kind, Ledger};
use super::observer::Observer;
use super::pacer::Pacer;
use super::prefetch::OutputPrefetch;
use super::retry::RetryQueue;
use super::units::{State, UnitTable};
use crate::cancel::CancelToken;
use crate::dag::{Dag, ReadyQueue};
use crate::event::{Event, RunStatus};
use crate::model::Pipeline;
use crate::resume::PriorState;

#[cfg(test)]
thread_local! {
    /// Test-only: while set, commits on this thread leave out their `unit_started` records
    /// and hand the attempts to the workers all the same — the write-ahead rule broken on
    /// purpose, to prove that the tests' checks notice.
    pub(super) static BREAK_WRITE_AHEAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Test-only: while set, the machine on this thread takes every unit for idempotent when
    /// it decides how far ahead to commit — the non-idempotent rule broken on purpose, for the
    /// simulation to notice.
    pub(super) static BREAK_NON_IDEMPOTENT_RULE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Test-only: how many naps (`driver::nap`) the engine on this thread took.
    pub(super) static NAPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What the run is given besides its pipeline: shared, read-only, or raised from outside.
pub(in crate::engine) struct Inputs<'a> {
    pub(in crate::engine) pipeline: &'a Pipeline,
    pub(in crate::engine) dag: &'a Dag,
    pub(in crate::engine) prior: &'a PriorState,
    pub(in crate::engine) options: &'a EngineOptions,
    /// By unit index: whether the unit takes part (`--only`).
    pub(in crate::engine) in_scope: Vec<bool>,
    pub(in crate::engine) cancel: &'a CancelToken,
    /// Shared with the workers: raised when no committed attempt may start any more (by the
    /// machine, or by a worker whose attempt failed for good).
    pub(in crate::engine) halt: &'a AtomicBool,
    /// Whether hashing threads take units hashed first (`false`: no unit needs one; each unit
    /// is hashed by the machine from what it holds).
    pub(in crate::engine) hashing: bool,
    /// Declared outputs hashed ahead for reuse checks, read to decide whether a check is done
    /// on the driver's thread (`None`: nothing is hashed ahead).
    pub(in crate::engine) prefetch: Option<&'a OutputPrefetch>,
}

/// What a turn of the machine ends with, for the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum Turned {
    /// Perform the commands and turn again at once: a full batch of reuses went out, or a
    /// `here` hash job waits (see [`Command::Hash`]).
    Again,
    /// Perform the commands; then, unless [`Scheduler::finished`], wait for something to
    /// happen (until [`Scheduler::wake_at`] at the latest).
    Wait,
}

/// The run's state, owned by the engine thread alone: the machine its driver feeds.
pub(in crate::engine) struct Scheduler<'a> {
    pipeline: &'a Pipeline,
    dag: &'a Dag,
    prior: &'a PriorState,
    options: &'a EngineOptions,
    cancel: &'a CancelToken,
    /// By unit index: whether the unit takes part (`--only`).
    in_scope: Vec<bool>,
    /// Shared with the workers: raised when no committed attempt may start any more.
    halt: &'a AtomicBool,
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
    /// Units declaring input files are hashed on hashing threads (`false`: no unit declares
    /// any).
    hashing: bool,
    prefetch: Option<&'a OutputPrefetch>,
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
    /// The time the driver gave with the call being handled.
    now: Instant,
    /// Commands emitted and not yet taken by the driver.
    out: Vec<Command>,
    /// The append outstanding, and what follows once it is durable.
    appending: Option<Appending>,
    /// A `here` hash job was emitted and is not yet reported.
    hash_here_pending: bool,
    /// The run's status, once its last append was asked for (`Some(None)`: it has none).
    ended: Option<Option<RunStatus>>,
}

impl<'a> Scheduler<'a> {
    /// The machine for a run, at `now`, with the engine's pacer.
    pub(in crate::engine) fn new(inputs: Inputs<'a>, now: Instant) -> Self {
        Self::with_pacer(inputs, Pacer::new(), now)
    }

    /// The machine with `pacer` (the simulation tunes it).
    pub(in crate::engine) fn with_pacer(inputs: Inputs<'a>, pacer: Pacer, now: Instant) -> Self {
        let Inputs {
            pipeline,
            dag,
            prior,
            options,
            in_scope,
            cancel,
            halt,
            hashing,
            prefetch,
        } = inputs;
        let queue = ReadyQueue::new(dag, |unit_idx| !in_scope[unit_idx]);
        Self {
            pipeline,
            dag,
            prior,
            options,
            cancel,
            in_scope,
            halt,
            pacer,
            units: UnitTable::new(pipeline, prior),
            queue,
            retries: RetryQueue::default(),
            batch: Batch::default(),
            ledger: Ledger::new(pipeline.units.len()),
            max_jobs: max_jobs(pipeline),
            hashing,
            prefetch,
            stop_starting: false,
            failed_any: false,
            human_needed: None,
            late: late::LateWatcher::new(options.late.as_ref(), prior, now),
            now,
            out: Vec::new(),
            appending: None,
            hash_here_pending: false,
            ended: None,
        }
    }

    /// Move the commands emitted since the last call into `into` (which the driver keeps,
    /// empty, between calls, so no vector is grown afresh).
    pub(in crate::engine) fn take_commands(&mut self, into: &mut Vec<Command>) {
        debug_assert!(into.is_empty());
        std::mem::swap(&mut self.out, into);
    }

    /// One turn: stop if cancelled, release retries come due, decide and queue the starts of
    /// ready units, and ask for the batch to be appended when it is due. `manifests`: where
    /// input lists too large for a record go before the batch naming them is appended.
    pub(in crate::engine) fn turn<M: ManifestStore + ?Sized>(
        &mut self,
        now: Instant,
        manifests: &mut M,
        observer: &mut dyn Observer,
    ) -> Turned {
        debug_assert!(
            self.appending.is_none() && !self.hash_here_pending,
            "a turn while the driver owes a report"
        );
        self.now = now;
        if self.cancel.is_cancelled() {
            self.stop();
        }
        self.release_due_retries();
        self.start_ready(observer);
        if self.hash_here_pending {
            return Turned::Again;
        }
        if self.batch.is_empty() {
            self.pacer.release();
            return Turned::Wait;
        }
        self.pacer.hold(now);
        let batch = BatchState {
            records: self.batch.len(),
            only_reuses: self.batch.only_reuses(),
            urgent: self.batch.is_urgent(),
        };
        let workers = self.options.max_parallel.max(1);
        let counts = self.ledger.counts();
        if !admission::commit_due(
            &batch,
            &counts,
            self.stop_starting,
            &self.pacer,
            workers,
            now,
        ) {
            return Turned::Wait;
        }
        let full = self.batch.only_reuses() && self.pacer.reuses_full(self.batch.len());
        self.commit(manifests, observer);
        self.pacer.release();
        // `start_ready` stopped at a full batch of reuses: decide on at once.
        if full { Turned::Again } else { Turned::Wait }
    }

    /// Whether the run is over: nothing running, being checked or to commit, and nothing
    /// left to start (or nothing may start any more).
    pub(in crate::engine) fn finished(&self) -> bool {
        self.appending.is_none()
            && admission::finished(
                &self.ledger.counts(),
                self.batch.is_empty(),
                self.stop_starting,
                self.queue.is_empty() && self.retries.is_empty(),
            )
    }

    /// The ledger's counts (what the driver's nap and poll look at).
    pub(in crate::engine) fn counts(&self) -> Counts {
        self.ledger.counts()
    }

    /// When the driver must turn again at the latest if nothing happens: a retry comes due,
    /// a held batch's deadline, the run's deadline (`on_late`).
    pub(in crate::engine) fn wake_at(&self) -> Option<Instant> {
        let commit_deadline = self.pacer.hold_deadline(self.batch.only_reuses());
        let late_due = self.late.as_ref().map(late::LateWatcher::next_due);
        [self.retries.next_due(), commit_deadline, late_due]
            .into_iter()
            .flatten()
            .min()
    }

    /// Before the driver waits: ask for what was appended unsynced to be made durable (an
    /// empty append) — nothing is left unsynced while the engine waits.
    pub(in crate::engine) fn sync_unsynced(&mut self) {
        debug_assert!(self.appending.is_none());
        if self.batch.unsynced_since().is_some() {
            self.emit_append(Vec::new(), admission::Append::Durable, Appending::Sync);
        }
    }

    /// What [`admission::may_nap`] needs besides the counts, as the machine knows it.
    pub(in crate::engine) fn waiting(&self, messages_waiting: bool) -> admission::Waiting {
        admission::Waiting {
            stopped: self.stop_starting,
            cancelled: self.cancel.is_cancelled(),
            max_jobs: self.max_jobs,
            messages_waiting,
        }
    }

    /// `max_parallel`, at least 1.
    pub(in crate::engine) fn max_parallel(&self) -> usize {
        self.options.max_parallel.max(1)
    }

    /// The run's cancellation (raised by the driver when the journal fails).
    pub(in crate::engine) fn cancel(&self) -> &CancelToken {
        self.cancel
    }

    /// The pacer (its nap).
    pub(in crate::engine) fn pacer(&self) -> &Pacer {
        &self.pacer
    }

    fn emit_append(&mut self, events: Vec<Event>, mode: admission::Append, then: Appending) {
        debug_assert!(self.appending.is_none(), "two appends outstanding");
        self.appending = Some(then);
        self.out.push(Command::Append { events, mode });
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
        while let Some(unit_idx) = self.retries.pop_due(self.now) {
            self.units[unit_idx].state = State::Waiting;
            self.queue.requeue(unit_idx);
        }
    }

    /// What the ledger needs to know of `unit_idx`: whether it is idempotent, and whether it
    /// runs on Slurm (counted against `max_jobs`).
    fn kind(&self, unit_idx: usize) -> Kind {
        let unit = &self.pipeline.units[unit_idx];
        #[cfg(test)]
        if BREAK_NON_IDEMPOTENT_RULE.get() {
            return Kind {
                idempotent: true,
                slurm: unit.executor == crate::model::ExecutorKind::Slurm,
            };
        }
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
