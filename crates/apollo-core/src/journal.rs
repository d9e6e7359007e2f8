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

/// The size at which a journal starts a new segment when the pipeline does not say
/// (`journal_segment_size:`).
pub const DEFAULT_SEGMENT_SIZE: u64 = 64 * 1024 * 1024;
/// The smallest `journal_segment_size:`: twice the largest record, so a segment always holds
/// its header and at least one record of any size.
pub const MIN_SEGMENT_SIZE: u64 = 2 * MAX_RECORD_BYTES as u64;
/// The largest `journal_segment_size:` (1 GiB): a segment is what `verify` and a resume scan
/// and what a backup copies as one piece.
pub const MAX_SEGMENT_SIZE: u64 = 1024 * 1024 * 1024;

/// How a run's journal is made durable (DESIGN §6, §18), recorded in its `run_started`.
///
/// Only [`Durability::Fsync`] keeps the write-ahead rule exactly; it is the default and what a
/// journal that does not say (format 1.5 and older) was written with.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Every append returns only after `fdatasync`; new files and folders are fsynced into
    /// their parent. The default.
    #[default]
    Fsync,
    /// Every append is written at once, in order, and synced within the writer's sync interval
    /// (10 ms by default) by a sync thread, off the critical path; [`Journal::append_strict`]
    /// (the start of an `idempotent: false` or Slurm unit) and the records that open or close
    /// a run or record a human's or a hook's act are synced before the append returns, and new
    /// files and folders are fsynced as with `Fsync`. A crash of apollo loses nothing (the
    /// records are in the page cache); a power loss or kernel crash loses at most the last
    /// interval's records, which a resume repairs by running idempotent units again.
    Batched,
    /// No fsync at all: for tests and benchmarks only. A power loss may lose acknowledged
    /// records.
    None,
}

impl Durability {
    /// The name a user writes (`fsync`, `batched`, `none`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fsync => "fsync",
            Self::Batched => "batched",
            Self::None => "none",
        }
    }

    /// Whether this is the default, [`Durability::Fsync`] (left out of `run_started`).
    pub fn is_fsync(&self) -> bool {
        *self == Self::Fsync
    }

    /// Whether anything is ever synced: new segments, folders and files are fsynced, and
    /// strict appends wait for the disk (every mode but [`Durability::None`]).
    pub fn syncs(self) -> bool {
        self != Self::None
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An append-only, durable event log.
pub trait Journal {
    /// Append `events` in order. Returns only once **all** of them are durable (on disk, fsynced),
    /// so the engine can batch the events it has at hand and pay one sync for all (group commit)
    /// — or, in a journal written [`Durability::Batched`], once they are written, in order,
    /// ahead of any later append's, and bound to be synced within the journal's sync interval.
    ///
    /// An error is final for the run: the engine stops starting units and reports it.
    fn append(&mut self, events: &[Event]) -> Result<(), JournalError>;

    /// [`append`](Self::append), durable before it returns whatever the journal's durability
    /// mode (with everything appended before): the engine calls it for a batch that starts a
    /// unit that must not run twice (`idempotent: false`) or is submitted to Slurm.
    ///
    /// The default is [`append`](Self::append), which is right for a journal that syncs every
    /// append.
    fn append_strict(&mut self, events: &[Event]) -> Result<(), JournalError> {
        self.append(events)
    }

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
