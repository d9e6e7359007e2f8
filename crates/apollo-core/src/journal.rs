//! The seam between the engine and durable storage.
//!
//! apollo-store implements [`Journal`] with its checksummed, fsynced segments; tests implement
//! it in memory. The engine is the only caller, from its own thread, between its turns.

use std::collections::BTreeMap;

use crate::event::Event;

/// The largest record the engine writes, in bytes of JSON: the one bound on a unit's records
/// (the journal format docs of apollo-store state it). A unit's input components that would
/// make its `unit_started` larger go to an input manifest
/// ([`Journal::store_input_manifest`]); a record that still would not fit fails its unit,
/// never the journal.
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;

/// An append-only, durable event log.
pub trait Journal {
    /// Append `events` in order. Returns only once **all** of them are durable (on disk, fsynced),
    /// so the engine can batch the events it has at hand and pay one sync for all (group commit).
    ///
    /// An error is final for the run: the engine stops starting units and reports it.
    fn append(&mut self, events: &[Event]) -> Result<(), JournalError>;

    /// Append `events` in order **without** waiting for them to be durable: they go into the
    /// journal ahead of any later append's events, and are durable once a later
    /// [`append`](Self::append) returned (an `append` of no events makes them durable and
    /// nothing else). The engine uses it only for records whose loss in a crash costs nothing
    /// but a decision made again — a batch of `unit_reused` while more units are being
    /// decided — so that a run reusing thousands of units neither holds all their records in
    /// memory nor pays a sync for every thousand; its last append is always a durable one.
    ///
    /// The default is [`append`](Self::append): durable at once, which is never wrong.
    fn append_unsynced(&mut self, events: &[Event]) -> Result<(), JournalError> {
        self.append(events)
    }

    /// Store a unit's input manifest (`bytes`, whose SHA-256 is `sha256`, see
    /// [`input_manifest`](crate::input_manifest)) durably beside the journal. The engine calls
    /// it before appending the `unit_started` that names the manifest, and returns only once
    /// the manifest is durable. An error fails that unit's attempt, not the run.
    ///
    /// The default refuses: a journal that cannot keep manifests fails the (rare) units whose
    /// input list is too large for a record.
    fn store_input_manifest(&mut self, sha256: &str, bytes: &[u8]) -> Result<(), JournalError> {
        let _ = bytes;
        Err(JournalError::msg(format!(
            "this journal cannot store input manifest {sha256}"
        )))
    }
}

/// Appending to the journal failed; nothing after the last successful append may be assumed durable.
///
/// The message never repeats the source: a [`JournalError::caused_by`] error says only that
/// the append failed and returns the storage error from `source()`.
#[derive(Debug, thiserror::Error)]
#[error("failed to append to the journal{}", context(.message.as_deref()))]
pub struct JournalError {
    message: Option<String>,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

fn context(message: Option<&str>) -> String {
    message
        .map(|message| format!(": {message}"))
        .unwrap_or_default()
}

impl JournalError {
    /// An error with context of its own and the underlying cause. `message` must add to what
    /// `source` says, not repeat it (the cause is printed after it).
    pub fn new(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            message: Some(message.into()),
            source: Some(source.into()),
        }
    }

    /// An error whose cause says everything: "failed to append to the journal", caused by
    /// `source`.
    pub fn caused_by(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            message: None,
            source: Some(source.into()),
        }
    }

    /// An error with a message only.
    pub fn msg(message: impl Into<String>) -> Self {
        Self {
            message: Some(message.into()),
            source: None,
        }
    }
}

/// A journal that keeps events in memory: for tests and for `--dry-run`.
#[derive(Debug, Default, Clone)]
pub struct MemoryJournal {
    /// Every event appended so far, in order.
    pub events: Vec<Event>,
    /// Input manifests stored so far, by SHA-256.
    pub input_manifests: BTreeMap<String, Vec<u8>>,
}

impl Journal for MemoryJournal {
    fn append(&mut self, events: &[Event]) -> Result<(), JournalError> {
        self.events.extend_from_slice(events);
        Ok(())
    }

    fn store_input_manifest(&mut self, sha256: &str, bytes: &[u8]) -> Result<(), JournalError> {
        self.input_manifests
            .insert(sha256.to_owned(), bytes.to_vec());
        Ok(())
    }
}
