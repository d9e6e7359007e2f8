//! One journal record as read back: the unit of replay, diff and resume.
//!
//! The type lives here rather than in apollo-store so that crates which only *read* records
//! (apollo-replay, a consumer's own report) need not depend on the storage crate. apollo-store
//! re-exports it as `apollo_store::Record`.

use chrono::{DateTime, Utc};

use crate::event::Event;

/// One journal record as read back: its sequence number, its timestamp and its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Monotonic from 1 across all segments of a run.
    pub seq: u64,
    /// When the record was appended (UTC, microsecond precision).
    pub ts: DateTime<Utc>,
    /// The event.
    pub event: Event,
}
