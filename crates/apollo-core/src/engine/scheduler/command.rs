//! What the scheduler asks its driver to do: the machine ([`Scheduler`](super::Scheduler))
//! decides, the driver (`driver.rs` with threads, channels, the journal and the clock; the
//! simulation test with none of them) performs, and tells the machine what happened.
//!
//! The write-ahead rule is a data dependency here, not an order of statements: an attempt
//! is handed out only in a [`Command::Dispatch`], which the machine emits only once the
//! driver reported the [`Command::Append`] carrying its `unit_started` durable
//! ([`Scheduler::appended`](super::Scheduler::appended)).

use super::super::admission::Append;
use super::super::hasher::HashJob;
use super::super::workers::Job;
use crate::event::Event;

/// One thing for the driver to do, in the order the machine emitted them.
pub(in crate::engine) enum Command {
    /// Append `events` as one unit (`mode`: durable, strict, or unsynced), then report it
    /// with [`Scheduler::appended`](super::Scheduler::appended) (or, when the journal
    /// failed, [`Scheduler::abort`](super::Scheduler::abort)). At most one is outstanding:
    /// the machine emits nothing more until it is reported.
    Append { events: Vec<Event>, mode: Append },
    /// Hash this unit before it is decided. `here`: nothing else is running or being hashed
    /// (or its outputs were hashed ahead), so the driver may do it on its own thread when
    /// that reads no file, and report it at once with
    /// [`Scheduler::take_hashed`](super::Scheduler::take_hashed); otherwise (and always when
    /// `here` is false) it goes to the hashing threads, which report it later — the driver
    /// tells the machine so with
    /// [`Scheduler::sent_to_hashers`](super::Scheduler::sent_to_hashers) when `here` was
    /// true. The machine decides nothing more until a `here` job is reported either way.
    Hash { job: HashJob, here: bool },
    /// Hand this attempt to the workers: its `unit_started` is durable.
    Dispatch(Job),
    /// The worker that sent an outcome may go on (after every outcome at hand is taken in).
    Ack(usize),
}

/// Why an [`Command::Append`] was emitted: what the machine does once it is durable.
pub(super) enum Appending {
    /// The batch: its attempts go out and its notices are told.
    Batch(super::super::batch::Committing, Append),
    /// An empty append, making what was appended unsynced durable.
    Sync,
    /// The run's `run_late`.
    Late(Box<crate::event::RunLate>),
    /// The run's last append.
    Last,
}
