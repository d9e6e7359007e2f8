//! The scheduling engine: runs a pipeline's units in dependency order, through an
//! [`Executor`], recording every step in a [`Journal`] before it matters (DESIGN §4, §7).
//!
//! # How a run proceeds
//!
//! The engine thread alone owns the run's state, decides, and appends to the journal; worker
//! threads (`max_parallel` of them) run attempts. The deciding part is a machine
//! (`scheduler::Scheduler`) with no thread, clock, channel or journal inside: it is given
//! `now` and what happened, and answers with commands (append these records, hand out this
//! attempt, hash this unit, let that worker go on), which its driver on the engine thread
//! performs (`scheduler/driver.rs`) — and the simulation test performs in random orders.
//! Each turn of the engine's loop:
//!
//! 1. takes ready units from the [`ReadyQueue`](crate::ReadyQueue) (config order), decides
//!    for each whether it must run (resume rules) and, if so, queues its `unit_started` — up
//!    to `max_parallel` attempts, plus a few per worker committed ahead (idempotent units
//!    only; more while attempts are very short: see `pacer.rs`). A unit that declares input
//!    files is first hashed on a hashing thread (see below) and decided when its hash comes
//!    back;
//! 2. appends everything queued — the `unit_finished` and `unit_skipped` records of attempts
//!    that just ended and the `unit_started` records of new ones — as **one** batch, with one
//!    fsync; whatever ends during that fsync goes with the next batch (group commit).
//!    Attempts go to the workers only once the batch holding their `unit_started` is durable.
//!    So `unit_started` is on disk before a unit's first process exists, and `unit_finished`
//!    is on disk before any dependent starts;
//! 3. waits for an attempt to end, a retry to come due, or a cancellation — while short
//!    attempts keep the workers' queue long, first asleep for a few milliseconds without
//!    waiting on the channel (the driver's nap, `Pacer::nap`), so that outcomes are taken in
//!    a few at a time rather than waking the engine thread for each. A worker whose
//!    attempt failed for good (fail-fast, no retry left) raises `halt` itself before it
//!    reports, and every worker whose attempt failed waits for the engine to take the outcome
//!    in before its next attempt: attempts committed ahead are halted at once, even while the
//!    engine is in an fsync.
//!
//! **No file is read on the engine thread.** Reading can take long or forever (`/dev/zero`,
//! a FIFO, a slow mount), and a blocked engine thread would stall every unit's commits and
//! miss SIGTERM. So declared input files, and on resume the declared outputs of units done in
//! the prior state (re-hashed to tell whether they are missing or changed), are hashed on
//! hashing threads (spawned only when some unit needs one; any other unit is hashed inline,
//! with no I/O, no allocation and no round trip), and a new attempt's declared outputs on the
//! worker after it. All count against the unit's timeout (the attempt gets what input hashing
//! left, output hashing what prepare and execute left; a done unit's output check gets the
//! unit's timeout of its own, as it decides whether an attempt happens at all), check the
//! cancellation (and, on hashing threads, the halt flag) before every read, and refuse files
//! that are not regular (see [`crate::hash`]). A unit whose input files cannot be hashed
//! fails, or times out, without a process; a done unit whose outputs cannot be hashed in time
//! counts as changed (see `policy::check_outputs`); a unit being hashed when the run stops is
//! never started. The checks before the engine starts ([`preflight`], and the same in [`run`])
//! and the dry-run planner ([`dry_run`]) hash on the calling thread, within each unit's timeout
//! and the token they are given.
//!
//! A failed attempt is retried after a capped exponential backoff. A unit that fails for good
//! marks its downstream `skipped` and, unless `keep_going`, stops new starts while running
//! units finish. Exit code 77 from `execute` means the unit skipped itself: it satisfies its
//! dependents.
//!
//! # Where things are
//!
//! One job per file, each readable on its own:
//!
//! * `api.rs` — [`EngineOptions`], [`RunReport`], [`UnitResult`], [`EngineError`],
//!   [`AttemptLogs`]: the vocabulary of [`run`].
//! * `observer.rs` — [`Notice`]s and the [`Observer`] that receives them; the notices held
//!   back until their record is durable.
//! * `policy.rs` — the resume rules as pure functions ([`Decision`]), shared with the dry-run
//!   planner in `plan.rs` ([`dry_run`]); `in_flight.rs` — the in-flight rule among them.
//! * `scheduler/` — the machine and its driver (`mod.rs`: the run's state and a turn;
//!   `command.rs`: what the machine asks; `driver.rs`: the loop on the engine thread, which
//!   performs it with the channels, the journal and the clock; `start.rs`: deciding and
//!   queuing attempts; `hashing.rs`: handing units with input files, done outputs or a reuse
//!   check to be hashed, and taking them back; `commit.rs`: the group commit and the hand-out
//!   once durable; `finish.rs`: taking outcomes in; `reuse.rs`: a unit done without an
//!   attempt; `end.rs`: the last append and the report).
//! * `ledger.rs` — the in-flight ledger: where each unit taken from the ready queue is
//!   (hashing, checking reuse, committed, at a worker), every move checked; the scheduler's
//!   counts are read from it.
//! * `admission.rs` — the deciding part, pure: whether the next ready unit is taken, passed
//!   over or waits, whether the batch is due and how it is appended (unsynced, strict,
//!   durable), whether the engine may nap — from the ledger's counts, the limits and the
//!   pacer, with no channel, clock or I/O.
//! * `outcome.rs` — taking an attempt's outcome in, the deciding part, pure: done, a retry
//!   after a backoff, failed for good (downstream skipped, fail-fast), a stop for a human, or
//!   left waiting. `tests/sim/` drives the machine itself, and the resume code after simulated
//!   crashes, under a seeded simulation of random DAGs, outcomes and event orders.
//! * `batch.rs` — the records of the next commit, the attempts it releases and the notices
//!   it allows.
//! * `pacer.rs` — commit pacing: how far ahead to commit, how long a routine batch may wait.
//! * `units.rs` — the per-unit table and the final counts.
//! * `record.rs` — an attempt's outcome turned into its `unit_finished` record.
//! * `retry.rs` — backoff and the units waiting for a retry.
//! * `reuse.rs` — reuse across runs (`reuse: true`): the [`ReuseSource`] and
//!   [`OutputRestorer`] seams and the check, run on the hashing threads, that an earlier
//!   success with the same input hash still has its outputs on disk.
//! * `workers.rs` — the worker threads, and their halt and acknowledgement protocol.
//! * `hasher.rs` — the hashing threads: input files, a done unit's outputs, reuse lookups;
//!   `hash_job`, which the engine thread also runs with stat-only limits (a job that would
//!   read a file is handed to the hashing threads instead).
//! * `prefetch.rs` — the declared outputs of units that may be reused, hashed ahead of their
//!   reuse checks on a thread of their own while nothing of the run has written anything.

mod admission;
mod api;
mod batch;
mod hasher;
mod held_still;
mod in_flight;
mod ledger;
mod observer;
mod outcome;
mod outputs;
mod pacer;
mod plan;
mod policy;
mod prefetch;
mod record;
pub(crate) mod resources;
pub use resources::local_parallelism_cap;
mod retry;
mod reuse;
mod scheduler;
mod units;
mod workers;

#[cfg(test)]
mod tests;

use std::sync::atomic::AtomicBool;

pub use api::{
    AttemptLogs, EngineError, EngineOptions, LateWatch, OnInputChange, RunReport, UnitResult,
};
pub use observer::{NoObserver, Notice, Observer};
pub use plan::{Planned, dry_run};
pub use policy::Decision;
pub use reuse::{NoRestore, OutputRestorer, Reuse, ReuseCandidate, ReuseSource};

use crate::cancel::CancelToken;
use crate::dag::Dag;
use crate::executor::Executor;
use crate::journal::Journal;
use crate::model::Pipeline;
use crate::resume::PriorState;
use hasher::{HashContext, HashJob};
use prefetch::OutputPrefetch;
use scheduler::{Channels, HashChannels, Inputs, Scheduler};
use workers::{FromWorker, Job, WorkerShared};

/// Run (or resume) `pipeline`. `prior` is what the run's journal already holds (empty for a
/// new run). Writes unit records and `run_finished` to `journal`; the caller writes
/// `run_started`/`run_resumed` first.
#[allow(clippy::too_many_arguments)]
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
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
    let in_scope = policy::scope(pipeline, &dag, options.only.as_deref())?;
    policy::check_in_flight(pipeline, prior, &in_scope)?;
    policy::check_changed(
        pipeline,
        &dag,
        prior,
        &in_scope,
        options.on_input_change,
        cancel,
    )?;

    let (job_tx, job_rx) = crossbeam_channel::unbounded::<Job>();
    let (to_scheduler, from_workers) = crossbeam_channel::unbounded::<FromWorker>();
    let (wake_tx, wake_rx) = crossbeam_channel::bounded::<()>(1);
    let _wake_registration = cancel.on_cancel(move || {
        let _ = wake_tx.try_send(());
    });
    // Local units and Slurm jobs each have their limit; a Slurm attempt waiting for its job
    // holds a worker.
    let n_workers = (options.max_parallel.max(1) + scheduler::max_jobs(pipeline))
        .min(pipeline.units.len().max(1));

    // Set when the engine stops starting units: committed attempts still waiting for a worker
    // are then recorded as interrupted instead of started.
    let halt = AtomicBool::new(false);
    let (capacity_cpus, capacity_memory) = resources::effective_capacity(pipeline.capacity);
    let resource_pool = resources::ResourcePool::new(capacity_cpus, capacity_memory);
    // Reuse checks compare; their outputs are hashed ahead (see `prefetch.rs`).
    let reuse_checked: Vec<bool> = (pipeline.units.iter().zip(&in_scope))
        .map(|(unit, &in_scope)| {
            in_scope && reuse::wants_check(options.reuse.as_ref(), prior, unit)
        })
        .collect();
    // Stat-only hashing knows a file's hash from the hash cache alone: without one, nothing
    // could be observed.
    let prefetch = (options.hash_cache.is_some() && reuse_checked.contains(&true))
        .then(|| OutputPrefetch::new(pipeline.units.len()));
    std::thread::scope(|scope| {
        let shared = WorkerShared {
            pipeline,
            run_id: &options.run_id,
            executor,
            logs,
            cancel,
            halt: &halt,
            capture: options.capture.as_deref(),
            resources: &resource_pool,
        };
        let acks = workers::spawn(scope, n_workers, shared, &job_rx, &to_scheduler);
        // Declared input files are hashed on threads of their own, never on the engine
        // thread (a file can take long, or forever, to read); so are the declared outputs of
        // units done in the prior state, checked before they are reused. A pipeline without
        // any gets none of them.
        let n_with_inputs = pipeline
            .units
            .iter()
            .filter(|unit| {
                !unit.inputs.is_empty()
                    || policy::needs_output_check(prior, unit)
                    || reuse::wants_check(options.reuse.as_ref(), prior, unit)
            })
            .count();
        // Jobs the engine thread took on itself and handed back because they need a file
        // read go to `deferred`: the hashing threads take those first.
        let (hash_tx, hash_rx) = crossbeam_channel::unbounded::<HashJob>();
        let (deferred_tx, deferred_rx) = crossbeam_channel::unbounded::<HashJob>();
        let hash_context = HashContext::new(
            &shared,
            prior,
            (options.reuse.as_ref(), options.hash_cache.as_deref()),
            prefetch.as_ref(),
        );
        if let Some(prefetch) = &prefetch {
            let reuse_checked = &reuse_checked;
            let prefetcher =
                move || prefetch.run(&hash_context, |unit_idx| reuse_checked[unit_idx]);
            #[cfg(test)]
            match prefetch::AHEAD.get() {
                prefetch::Ahead::Racing => drop(scope.spawn(prefetcher)),
                prefetch::Ahead::First => prefetcher(),
                prefetch::Ahead::Never => {}
            }
            #[cfg(not(test))]
            scope.spawn(prefetcher);
        }
        for _ in 0..n_workers.min(n_with_inputs) {
            let hash_rx = hash_rx.clone();
            let deferred_rx = deferred_rx.clone();
            let to_scheduler = to_scheduler.clone();
            scope.spawn(move || {
                hasher::hasher(hash_context, (&hash_rx, &deferred_rx), &to_scheduler)
            });
        }
        drop(to_scheduler);
        let hashing = (n_with_inputs > 0).then_some(HashChannels {
            jobs: &hash_tx,
            take: &hash_rx,
            deferred: &deferred_tx,
            context: hash_context,
        });
        let mut scheduler = Scheduler::new(
            Inputs {
                pipeline,
                dag: &dag,
                prior,
                options,
                in_scope,
                cancel,
                halt: &halt,
                hashing: hashing.is_some(),
                prefetch: prefetch.as_ref(),
            },
            std::time::Instant::now(),
        );
        let channels = Channels {
            job_tx: &job_tx,
            from_workers: &from_workers,
            wake_rx: &wake_rx,
        };
        let result = scheduler::drive(
            &mut scheduler,
            observer,
            &channels,
            (hashing, acks),
            journal,
        );
        if let Some(prefetch) = &prefetch {
            prefetch.close();
        }
        // Dropping the job sender and the acknowledgements ends the workers; the scope joins
        // them.
        drop(job_tx);
        drop(scheduler);
        drop(hash_tx);
        drop(deferred_tx);
        result
    })
}

/// The checks [`run`] makes before anything runs — an unknown `--only` unit, a broken
/// graph, a non-idempotent unit cut off mid-attempt, a done non-idempotent unit whose inputs
/// or outputs are known to have changed already — without running anything: so a caller can
/// refuse before it records that the run resumed.
///
/// The files it hashes are hashed on the calling thread, within each unit's timeout and
/// `cancel`: a raised `cancel` ends it at once with `Ok` (nothing more known; [`run`], given
/// the same token, then starts nothing).
pub fn preflight(
    pipeline: &Pipeline,
    prior: &PriorState,
    options: &EngineOptions,
    cancel: &CancelToken,
) -> Result<(), EngineError> {
    let dag = Dag::new(pipeline)?;
    let in_scope = policy::scope(pipeline, &dag, options.only.as_deref())?;
    policy::check_in_flight(pipeline, prior, &in_scope)?;
    policy::check_changed(
        pipeline,
        &dag,
        prior,
        &in_scope,
        options.on_input_change,
        cancel,
    )
}
