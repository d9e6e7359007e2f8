//! The scheduler's deciding part, pure: from the in-flight ledger's counts, the head of the
//! ready queue and the limits, whether to take the next ready unit, pass over it, or start
//! nothing more this turn; whether the batch is due for its commit, and how it is appended. No channels, no clock
//! (the caller passes `now`), no I/O: the scheduler's machine (`scheduler/start.rs`,
//! `scheduler/mod.rs`) asks, and acts; the simulation test (`tests/sim/`) drives that machine
//! under seeded random orders of events.
//!
//! The rules it holds:
//!
//! * local units count against `max_parallel`, Slurm jobs against `max_jobs`, each on its own
//!   (a unit being hashed holds its place, a reuse check does not: [`Counts`]);
//! * idempotent local units are committed ahead of the workers, up to the pacer's commit
//!   limit — except while a non-idempotent unit is being hashed (once hashed, it must find a
//!   free worker) and in a pipeline with Slurm units (whose extra workers could take a local
//!   attempt committed ahead and exceed `max_parallel`);
//! * a non-idempotent unit is never committed ahead: its `unit_started` must mean its process
//!   is about to exist, because after a crash that record makes apollo stop and ask a human;
//! * a stopped run (a stop, fail-fast, a journal error, a raised halt) starts nothing.
//!
//! Resources (`max_cpus`/`max_memory`) are not decided here: a worker waits for them in the
//! [`ResourcePool`](super::resources::ResourcePool) after the attempt's start is durable.

use std::time::Instant;

use super::ledger::{Counts, Kind};
use super::pacer::Pacer;

/// How many reuse checks of idempotent units may be in flight on the hashing threads at once
/// (they start nothing).
pub(super) const REUSE_CHECKS_IN_FLIGHT: usize = 256;

/// At most this many ready units are passed over per turn looking for one whose executor has
/// room (so a long queue of local units does not make each turn scan it whole).
pub(super) const MAX_PASSED_OVER: usize = 1024;

/// The limits one turn of starting units works within.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// `max_parallel`, at least 1.
    pub(super) max_parallel: usize,
    /// Attempts that may be committed and not yet taken back in (the pacer's
    /// [`commit_limit`](Pacer::commit_limit)): `max_parallel` plus the lookahead.
    pub(super) commit_limit: usize,
    /// Slurm jobs in flight at most; 0 when no unit runs on Slurm.
    pub(super) max_jobs: usize,
}

impl Limits {
    /// How many local units may be running (hashing, committed or at a worker): the commit
    /// limit, or `max_parallel` alone while nothing may be committed ahead (see the module).
    pub(super) fn local_limit(&self, counts: &Counts) -> usize {
        if counts.hashing_non_idempotent > 0 || self.max_jobs > 0 {
            self.max_parallel
        } else {
            self.commit_limit
        }
    }
}

/// Where one turn of starting units stands, besides the ledger.
#[derive(Debug, Clone, Copy)]
pub(super) struct Turn {
    /// No new attempt may be decided (the run stops starting units, or `halt` is raised).
    pub(super) stopped: bool,
    /// The batch is a full batch of reuses: it goes out before more units are decided.
    pub(super) reuses_full: bool,
    /// Ready units passed over so far this turn.
    pub(super) passed_over: usize,
}

/// The head of the ready queue, as far as admitting it goes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Head {
    pub(super) kind: Kind,
    /// It only needs a reuse check, not yet done (no result stashed): it takes a place among
    /// the reuse checks in flight instead of among the running.
    pub(super) fresh_reuse_check: bool,
}

/// What to do with the head of the ready queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// Take it from the queue: it is decided, hashed or checked now.
    Take,
    /// Its executor's limit is reached while the other's is not: set it aside for this turn
    /// and look at the next one.
    PassOver,
    /// Start nothing more this turn.
    Stop,
}

/// Whether the head of the ready queue (`None`: the queue is empty) may be taken now.
pub(super) fn admit_next(
    counts: &Counts,
    limits: &Limits,
    turn: &Turn,
    head: Option<Head>,
) -> Admission {
    if turn.stopped || turn.reuses_full {
        return Admission::Stop;
    }
    let running_local = counts.running_local();
    // Asked again for every unit, not once per turn: a non-idempotent unit sent to be hashed
    // earlier in this very turn stops commits ahead at once (the simulation found attempts
    // committed ahead of it in the same turn, queued before its start for a free worker).
    let local_full = running_local >= limits.local_limit(counts);
    let slurm_full = counts.running_slurm >= limits.max_jobs;
    if local_full && slurm_full {
        return Admission::Stop;
    }
    let Some(head) = head else {
        return Admission::Stop;
    };
    // Ahead: every worker is taken, so this attempt would be committed ahead of a free one.
    let ahead = running_local >= limits.max_parallel;
    let blocked = if head.kind.slurm {
        slurm_full
    } else {
        local_full || (ahead && !head.kind.idempotent)
    };
    if blocked {
        return if limits.max_jobs == 0 || turn.passed_over >= MAX_PASSED_OVER {
            Admission::Stop
        } else {
            Admission::PassOver
        };
    }
    if head.fresh_reuse_check && counts.checking_reuse >= REUSE_CHECKS_IN_FLIGHT {
        return Admission::Stop;
    }
    Admission::Take
}

/// What the batch holds, as far as its commit goes.
#[derive(Debug, Clone, Copy)]
pub(super) struct BatchState {
    /// How many records it holds (0: nothing to commit).
    pub(super) records: usize,
    /// Every record is a `unit_reused`.
    pub(super) only_reuses: bool,
    /// It holds a record that must not wait for company (a failure, a skip, …).
    pub(super) urgent: bool,
}

/// Whether the batch is due for its commit now: the run stops starting units, a record in it
/// must not wait, or the pacer says it may not wait longer for company (`workers` with
/// `counts.at_workers` attempts at them; `now` the caller's clock). An empty batch is never due.
pub(super) fn commit_due(
    batch: &BatchState,
    counts: &Counts,
    stopped: bool,
    pacer: &Pacer,
    workers: usize,
    now: Instant,
) -> bool {
    if batch.records == 0 {
        return false;
    }
    let in_flight = counts.running > 0 || counts.checking_reuse > 0;
    let may_wait = if batch.only_reuses {
        pacer.may_hold_reuses(batch.records, in_flight, now)
    } else {
        pacer.may_hold_back(workers, counts.at_workers, now)
    };
    stopped || batch.urgent || !may_wait
}

/// How a batch due for its commit is appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Append {
    /// Without a sync: a full batch of reuses while the run goes on (it starts nothing; its
    /// records become durable with the next durable append, and a crash may lose them).
    Unsynced,
    /// Synced before it returns, whatever the journal's durability mode: it starts a unit
    /// that must not run twice, or a job for Slurm (DESIGN §18).
    Strict,
    /// As the journal's durability mode says.
    Durable,
}

/// What the commit's choice of [`Append`] looks at.
#[derive(Debug, Clone, Copy)]
pub(super) struct Committing {
    /// The batch is a full batch of reuses ([`Pacer::reuses_full`]).
    pub(super) full_of_reuses: bool,
    /// The run stops starting units.
    pub(super) stopped: bool,
    /// Records appended unsynced before have waited as long as a batch of reuses may
    /// ([`Pacer::reuses_overdue`]): what a crash can tear stays bounded.
    pub(super) unsynced_overdue: bool,
    /// One of its attempts is non-idempotent or runs on Slurm.
    pub(super) strict_attempt: bool,
}

/// How the batch is appended (see [`Append`]).
pub(super) fn append_mode(committing: &Committing) -> Append {
    if committing.full_of_reuses && !committing.stopped && !committing.unsynced_overdue {
        Append::Unsynced
    } else if committing.strict_attempt {
        Append::Strict
    } else {
        Append::Durable
    }
}

/// Whether the run is over: nothing running (attempts at workers and units being hashed count
/// as running) or being checked for reuse, nothing to commit, and nothing left to start — or
/// nothing may start any more.
pub(super) fn finished(
    counts: &Counts,
    batch_empty: bool,
    stopped: bool,
    nothing_ready: bool,
) -> bool {
    counts.running == 0 && counts.checking_reuse == 0 && batch_empty && (stopped || nothing_ready)
}

/// What the engine thread knows when it may nap (see [`may_nap`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Waiting {
    /// The run stops starting units.
    pub(super) stopped: bool,
    /// The run was cancelled.
    pub(super) cancelled: bool,
    /// Slurm jobs in flight at most (0: no unit runs on Slurm).
    pub(super) max_jobs: usize,
    /// An outcome is already waiting to be taken in.
    pub(super) messages_waiting: bool,
}

/// Whether the engine thread may sleep before it takes in what the workers sent (the pacer
/// then says for how long: [`Pacer::nap`]). Not once the run stops starting units or is
/// cancelled; not while a non-idempotent attempt is at a worker (its end is recorded at once:
/// unrecorded after a crash, it would make the resume stop and ask a human); not while the
/// pipeline has Slurm units (a job's id is recorded as soon as it is known); not while inputs
/// are being hashed or units checked for reuse (their results come back within microseconds);
/// not when an outcome is already waiting.
pub(super) fn may_nap(counts: &Counts, waiting: &Waiting) -> bool {
    !(waiting.stopped
        || waiting.cancelled
        || counts.non_idempotent_at_workers > 0
        || waiting.max_jobs > 0
        || counts.at_hashers > 0
        || counts.checking_reuse > 0
        || waiting.messages_waiting)
}

#[cfg(test)]
mod tests;
