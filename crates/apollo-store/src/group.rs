//! Group commit: many threads append, one fdatasync covers everything queued meanwhile.
//!
//! Leader/follower: an appender queues its serialized events and waits. If no write is in
//! flight it becomes the leader: it takes the whole queue, writes and syncs it (outside the
//! queue's lock, so others keep queueing), publishes the new durable seq and wakes everyone.
//! Appenders whose records were in that batch return; the others elect the next leader, whose
//! batch holds everything that arrived while the previous fsync ran.

use std::sync::{Condvar, Mutex, MutexGuard};

use apollo_core::{Event, Journal, JournalError};

use crate::error::StoreError;
use crate::record::EncodedEvent;
use crate::writer::JournalWriter;

struct Queue {
    /// Serialized events waiting for a leader, in seq order.
    pending: Vec<EncodedEvent>,
    /// The seq the next queued event will get.
    next_seq: u64,
    /// Every seq up to this one is durable.
    durable_seq: u64,
    /// A leader is writing.
    leader_active: bool,
    /// The first failure; set once, never cleared.
    poisoned: Option<String>,
    /// Batches written (each with one fdatasync, in fsync mode).
    n_commits: u64,
}

/// A journal writer shared by many threads: `append(&self, …)` with group commit.
///
/// Each `append` returns once its record is durable. Appends that arrive while an fsync is in
/// flight are written and synced together by the next one. A write or fsync failure is
/// returned to every appender whose records were in the failed batch and poisons the writer:
/// every later append returns [`StoreError::Poisoned`].
pub struct SharedWriter {
    queue: Mutex<Queue>,
    batch_done: Condvar,
    writer: Mutex<JournalWriter>,
}

impl std::fmt::Debug for SharedWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWriter").finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another appender cannot leave the queue half-updated (every update is a
    // plain field assignment), so a poisoned mutex is still usable.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl SharedWriter {
    /// Wraps a writer (see also [`JournalWriter::into_shared`]).
    pub fn new(writer: JournalWriter) -> Self {
        let next_seq = writer.next_seq();
        let poisoned = writer.check_poisoned().err().map(|error| error.to_string());
        Self {
            queue: Mutex::new(Queue {
                pending: Vec::new(),
                next_seq,
                durable_seq: next_seq - 1,
                leader_active: false,
                poisoned,
                n_commits: 0,
            }),
            batch_done: Condvar::new(),
            writer: Mutex::new(writer),
        }
    }

    /// Appends one event; returns its seq once it is durable.
    pub fn append(&self, event: &Event) -> Result<u64, StoreError> {
        self.append_batch(std::slice::from_ref(event))
    }

    /// Appends events (consecutive seqs); returns the last one's seq once all are durable as
    /// the writer's durability says (see [`JournalWriter::append_batch`]: under `Batched`,
    /// written, and synced before returning when a record must be durable at once).
    pub fn append_batch(&self, events: &[Event]) -> Result<u64, StoreError> {
        let last_seq = self.append_batch_grouped(events)?;
        if events.iter().any(crate::writer::synced_at_once) {
            lock(&self.writer).sync_strict()?;
        }
        Ok(last_seq)
    }

    /// [`append_batch`](Self::append_batch), then synced whatever the writer's durability
    /// (see [`JournalWriter::append_batch_strict`]).
    pub fn append_batch_strict(&self, events: &[Event]) -> Result<u64, StoreError> {
        let last_seq = self.append_batch_grouped(events)?;
        lock(&self.writer).sync_strict()?;
        Ok(last_seq)
    }

    fn append_batch_grouped(&self, events: &[Event]) -> Result<u64, StoreError> {
        // Serialize on the appending thread, in parallel with other appenders.
        let encoded = events
            .iter()
            .map(EncodedEvent::new)
            .collect::<Result<Vec<_>, _>>()?;
        let mut queue = lock(&self.queue);
        if let Some(cause) = &queue.poisoned {
            return Err(StoreError::Poisoned {
                cause: cause.clone(),
            });
        }
        if encoded.is_empty() {
            return Ok(queue.next_seq - 1);
        }
        queue.next_seq += encoded.len() as u64;
        let my_last_seq = queue.next_seq - 1;
        queue.pending.extend(encoded);
        loop {
            if queue.durable_seq >= my_last_seq {
                return Ok(my_last_seq);
            }
            if let Some(cause) = &queue.poisoned {
                return Err(StoreError::Poisoned {
                    cause: cause.clone(),
                });
            }
            if queue.leader_active {
                queue = self
                    .batch_done
                    .wait(queue)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                continue;
            }
            // Become the leader for everything queued so far.
            queue.leader_active = true;
            let batch = std::mem::take(&mut queue.pending);
            let batch_last_seq = queue.next_seq - 1;
            drop(queue);
            let result = lock(&self.writer).write_encoded(&batch);
            queue = lock(&self.queue);
            queue.leader_active = false;
            match result {
                Ok(written_last_seq) => {
                    debug_assert_eq!(written_last_seq, batch_last_seq);
                    queue.durable_seq = batch_last_seq;
                    queue.n_commits += 1;
                    self.batch_done.notify_all();
                }
                Err(error) => {
                    queue.poisoned = Some(error.to_string());
                    self.batch_done.notify_all();
                    // The leader's own records were in the batch: it gets the real error.
                    return Err(error);
                }
            }
        }
    }

    /// How many batches were committed so far (one fdatasync each): appends divided by this
    /// is the group-commit factor.
    pub fn n_commits(&self) -> u64 {
        lock(&self.queue).n_commits
    }

    /// Events queued and waiting for the next commit (not yet taken by a leader).
    pub fn n_queued(&self) -> usize {
        lock(&self.queue).pending.len()
    }

    /// Consumes the shared writer, returning the inner one.
    pub fn into_inner(self) -> JournalWriter {
        self.writer
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Journal for SharedWriter {
    fn append(&mut self, events: &[Event]) -> Result<(), JournalError> {
        self.append_batch(events)
            .map(|_| ())
            .map_err(JournalError::caused_by)
    }

    fn append_strict(&mut self, events: &[Event]) -> Result<(), JournalError> {
        self.append_batch_strict(events)
            .map(|_| ())
            .map_err(JournalError::caused_by)
    }
}
