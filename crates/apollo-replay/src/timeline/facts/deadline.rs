//! Deadlines in the run model (issue 40 item 3): the run's and its units' `deadline:` as
//! `run_started` recorded them (journal format 1.9), and by how much each ended after it.
//! Lateness is not a record of its own: it is the run's end (`run_finished`), or a unit's
//! (its last attempt's end, or its reuse), past the deadline.

use std::collections::BTreeMap;
use std::time::Duration;

use apollo_core::UnitState;
use apollo_core::deadline::{from_journal, late_by};
use apollo_core::event::RunStarted;
use chrono::{DateTime, Utc};

use crate::timeline::{Timeline, TimelineBuilder, UnitTimeline};

/// The deadlines `run_started` recorded (empty in a run without any, and before format 1.9).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Deadlines {
    /// The run's.
    pub run: Option<DateTime<Utc>>,
    /// Each unit's own, by name.
    pub units: BTreeMap<String, DateTime<Utc>>,
}

/// A deadline and how the run (or unit) stands against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadlineStatus {
    /// The instant, in UTC.
    pub deadline: DateTime<Utc>,
    /// When it ended, if it did.
    pub ended: Option<DateTime<Utc>>,
    /// By how much it ended after the deadline: `None` when it ended in time or has not ended.
    pub late_by: Option<Duration>,
}

impl DeadlineStatus {
    fn new(deadline: DateTime<Utc>, ended: Option<DateTime<Utc>>) -> Self {
        DeadlineStatus {
            deadline,
            ended,
            late_by: ended.and_then(|end| late_by(deadline, end)),
        }
    }

    /// Whether it ended after its deadline.
    pub fn is_late(&self) -> bool {
        self.late_by.is_some()
    }

    /// `late_by` in milliseconds, for JSON documents.
    pub fn late_by_ms(&self) -> Option<u64> {
        self.late_by
            .map(|late| u64::try_from(late.as_millis()).unwrap_or(u64::MAX))
    }
}

impl TimelineBuilder {
    /// Keeps the deadlines of the run's first `run_started` (a resume keeps them).
    pub(super) fn note_deadlines(&mut self, started: &RunStarted) {
        let deadlines = &mut self.timeline.facts.deadlines;
        if deadlines.run.is_some() || !deadlines.units.is_empty() {
            return;
        }
        let Some(recorded) = &started.deadlines else {
            return;
        };
        deadlines.run = recorded.run.as_deref().and_then(from_journal);
        deadlines.units = (recorded.units.iter())
            .filter_map(|unit| Some((unit.unit.clone(), from_journal(&unit.at)?)))
            .collect();
    }
}

impl Timeline {
    /// The run's deadline and its lateness (once `run_finished` is recorded), if it has one.
    pub fn deadline(&self) -> Option<DeadlineStatus> {
        let deadline = self.facts.deadlines.run?;
        Some(DeadlineStatus::new(
            deadline,
            self.finished.map(|finished| finished.ts),
        ))
    }

    /// `unit`'s own deadline and its lateness (once it succeeded, failed or was reused), if it
    /// has one.
    pub fn unit_deadline(&self, unit: &UnitTimeline) -> Option<DeadlineStatus> {
        let deadline = *self.facts.deadlines.units.get(&unit.name)?;
        let ended = match self.state_of(unit) {
            UnitState::Succeeded | UnitState::Failed => unit.last_attempt().map(|a| a.end),
            UnitState::Reused => unit.reused.as_ref().map(|reused| reused.ts),
            _ => None,
        };
        Some(DeadlineStatus::new(deadline, ended))
    }

    /// The units that ended after their own deadline, with their lateness, in model order.
    pub fn late_units(&self) -> Vec<(&UnitTimeline, DeadlineStatus)> {
        (self.units.iter())
            .filter_map(|unit| Some((unit, self.unit_deadline(unit)?)))
            .filter(|(_, status)| status.is_late())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use apollo_core::event::RunStatus;

    use crate::Timeline;
    use crate::testkit::{RunBuilder, at};

    #[test]
    fn a_run_and_its_units_are_late_by_how_long_they_ended_after_their_deadline() {
        let mut run = RunBuilder::new("r1", &["a", "b", "c"]);
        // Deadlines to the second; the run's at 10 s, a's at 2 s, b's at 9 s, c's at 60 s.
        run.deadlines(Some(10_000), &[("a", 2_000), ("b", 9_000), ("c", 60_000)]);
        run.start(0, "a", 1).succeed(5_000, "a", 1);
        run.start(5_000, "b", 1).succeed(8_000, "b", 1);
        let running = Timeline::from_records(run.reads()).unwrap();
        let deadline = running.deadline().unwrap();
        assert_eq!(deadline.deadline, at(10_000));
        assert_eq!(deadline.late_by, None, "not ended yet");
        run.end(12_500, RunStatus::Failed, 2, 0, 1);
        let ended = Timeline::from_records(run.reads()).unwrap();
        assert_eq!(
            ended.deadline().unwrap().late_by,
            Some(Duration::from_millis(2_500))
        );
        let late: Vec<_> = (ended.late_units().into_iter())
            .map(|(unit, status)| (unit.name.as_str(), status.late_by_ms()))
            .collect();
        assert_eq!(late, [("a", Some(3_000))], "b in time, c never ran");
        let c = ended.unit("c").unwrap();
        assert_eq!(ended.unit_deadline(c).unwrap().ended, None);
    }

    #[test]
    fn a_run_without_deadlines_has_none() {
        let mut run = RunBuilder::new("r1", &["a"]);
        run.start(0, "a", 1).succeed(5_000, "a", 1);
        let timeline = Timeline::from_records(run.reads()).unwrap();
        assert_eq!(timeline.deadline(), None);
        assert!(timeline.late_units().is_empty());
    }
}
