//! Which records a replay shows: by unit, and by a time window.

use apollo_store::Record;
use chrono::{DateTime, Utc};

/// Selects the records a replay shows. The default shows everything.
///
/// Run-level records (`run_started`, `run_resumed`, `run_finished`) are kept by a unit filter,
/// because they give the unit's lines their context; the time window applies to every record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Filter {
    /// Only these units (any of them); empty means every unit.
    pub units: Vec<String>,
    /// Only records at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only records at or before this instant.
    pub until: Option<DateTime<Utc>>,
}

impl Filter {
    /// A filter that shows everything.
    pub fn all() -> Self {
        Self::default()
    }

    /// Also show `unit` (the first call narrows from "every unit" to this one).
    pub fn unit(mut self, unit: impl Into<String>) -> Self {
        self.units.push(unit.into());
        self
    }

    /// Only records at or after `since`.
    pub fn since(mut self, since: DateTime<Utc>) -> Self {
        self.since = Some(since);
        self
    }

    /// Only records at or before `until`.
    pub fn until(mut self, until: DateTime<Utc>) -> Self {
        self.until = Some(until);
        self
    }

    /// Whether the filter keeps everything.
    pub fn is_all(&self) -> bool {
        self.units.is_empty() && self.since.is_none() && self.until.is_none()
    }

    /// Whether `unit` passes the unit filter.
    pub fn keeps_unit(&self, unit: &str) -> bool {
        self.units.is_empty() || self.units.iter().any(|wanted| wanted == unit)
    }

    /// Whether an interval `[start, end]` overlaps the time window.
    pub fn overlaps(&self, start: DateTime<Utc>, end: DateTime<Utc>) -> bool {
        self.since.is_none_or(|since| end >= since) && self.until.is_none_or(|until| start <= until)
    }

    /// Whether the instant `ts` is inside the time window.
    pub fn keeps_time(&self, ts: DateTime<Utc>) -> bool {
        self.overlaps(ts, ts)
    }

    /// Whether the record passes the filter.
    pub fn keeps(&self, record: &Record) -> bool {
        self.keeps_time(record.ts) && record.event.unit().is_none_or(|unit| self.keeps_unit(unit))
    }
}
