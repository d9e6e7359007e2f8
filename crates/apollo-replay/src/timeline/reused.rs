//! A `unit_reused` laid out: the earlier run's success that stands for the unit, and the
//! output files put back from the blob store to reuse it.

use apollo_core::event::{InputComponent, UnitReused};
use chrono::{DateTime, Utc};

use super::{TimelineBuilder, UnitStatus};

/// A `unit_reused` record: the unit was not run, an earlier run's success stands for it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reused {
    /// The record's sequence number.
    pub seq: u64,
    /// When it was recorded.
    pub ts: DateTime<Utc>,
    /// The run whose attempt did the work.
    pub from_run: String,
    /// That attempt.
    pub from_attempt: u32,
    /// The input hash (equal to that attempt's).
    pub input_hash: String,
    /// The input components (empty when too large for the record).
    pub inputs: Vec<InputComponent>,
    /// The output hash it hands its dependents.
    pub output_hash: String,
    /// The output files that were missing or changed and were put back from the blob store to
    /// reuse it (journal format 1.11; empty when none was, and before).
    pub restored: Vec<String>,
}

impl TimelineBuilder {
    /// Record that the unit of `reused` was reused (its latest `unit_reused` stands).
    pub(super) fn reused(&mut self, seq: u64, ts: DateTime<Utc>, reused: UnitReused) {
        let unit_idx = self.unit_idx(reused.unit);
        let unit = &mut self.timeline.units[unit_idx];
        unit.status = UnitStatus::Reused;
        unit.reused = Some(Reused {
            seq,
            ts,
            from_run: reused.from_run,
            from_attempt: reused.from_attempt,
            input_hash: reused.input_hash,
            inputs: reused.inputs,
            output_hash: reused.output_hash,
            restored: reused.restored,
        });
    }
}
