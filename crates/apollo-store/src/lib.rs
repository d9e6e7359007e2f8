//! apollo-store: the journal Apollo-11 trusts. (Being built: see issue 3.)

#![warn(missing_docs)]

use apollo_core::Event;
use chrono::{DateTime, Utc};

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
