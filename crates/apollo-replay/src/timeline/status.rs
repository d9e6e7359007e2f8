//! [`UnitStatus`] (what the last record about a unit says) and how it maps into the one closed
//! set of states every view prints ([`UnitState`]).

use apollo_core::UnitState;
use apollo_core::event::{AttemptStatus, SkipReason, Verdict};
use apollo_core::unit_state::awaits_verdict;
use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};

use super::{Timeline, UnitTimeline};

impl Timeline {
    /// `unit`'s state in the closed set every view prints (running or cut off as
    /// [`live`](Self::live) says).
    pub fn state_of(&self, unit: &UnitTimeline) -> UnitState {
        unit.state(self.live && self.finished.is_none())
    }

    /// How long the run has lasted, looked at `now`, in milliseconds: a [`live`](Self::live)
    /// run that has not finished has lasted until `now` (issue 35: cut at its last record, a
    /// run whose unit runs for an hour read 50 ms, like a killed one); any other run, as
    /// [`duration_ms`](Self::duration_ms) says.
    pub fn duration_ms_at(&self, now: DateTime<Utc>) -> u64 {
        let recorded = self.duration_ms();
        match self.started {
            Some(start) if self.live && self.finished.is_none() => {
                crate::display::offset_ms(start, now).max(recorded)
            }
            _ => recorded,
        }
    }

    /// Whether a unit's last attempt was cut off without a verdict since: only then does the
    /// run's definition decide a state ([`set_not_idempotent`](Self::set_not_idempotent)), so a
    /// reader reads the definition only when this says so.
    pub fn may_await_verdict(&self) -> bool {
        self.units
            .iter()
            .any(UnitTimeline::awaits_verdict_if_not_idempotent)
    }

    /// Marks the units `names` as `idempotent: false` (from the run's definition): their
    /// cut-off attempts without a verdict are [`UnitState::NeedsVerdict`].
    pub fn set_not_idempotent<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) {
        for name in names {
            if let Some(unit) = self.units.iter_mut().find(|unit| unit.name == name) {
                unit.idempotent = false;
            }
        }
    }
}

impl UnitTimeline {
    /// The unit's state in the one closed set every view prints ([`UnitState`]). `live`:
    /// whether an apollo is writing the run now — then an attempt without its end is
    /// running; otherwise it was cut off.
    pub fn state(&self, live: bool) -> UnitState {
        let ran = self
            .last_attempt()
            .is_none_or(|attempt| !attempt.phases().is_empty());
        let state = self.status.state(ran, live);
        if !self.idempotent
            && matches!(state, UnitState::CutOff | UnitState::Failed)
            && self.awaits_verdict_if_not_idempotent()
        {
            return UnitState::NeedsVerdict;
        }
        state
    }

    /// Whether the last attempt was cut off (no end, interrupted, timed out, or killed by a
    /// signal apollo did not send, after a process of it started) with no verdict on it since:
    /// the one rule ([`awaits_verdict`]) the resume asks a human by.
    pub(crate) fn awaits_verdict_if_not_idempotent(&self) -> bool {
        let Some(last) = self.last_attempt() else {
            return false;
        };
        if self.marks.iter().any(|mark| mark.attempt == last.number) {
            return false;
        }
        let ended = (last.outcome.as_ref()).map(|outcome| (outcome.status, outcome.exit));
        // No end recorded: its start was durable before its process, which may have run.
        let ran = ended.is_none() || !last.phases().is_empty() || last.job.is_some();
        awaits_verdict(ended, ran)
    }
}

impl UnitStatus {
    /// This status in the one closed set every view prints ([`UnitState`]). `ran`: whether
    /// the unit's last attempt started a process; `live`: whether an apollo is writing the run
    /// now (one rule for the run model and the diff's fold).
    pub(crate) fn state(self, ran: bool, live: bool) -> UnitState {
        match self {
            UnitStatus::Succeeded | UnitStatus::MarkedSucceeded => UnitState::Succeeded,
            UnitStatus::Failed | UnitStatus::TimedOut | UnitStatus::MarkedFailed => {
                UnitState::Failed
            }
            UnitStatus::Skipped => UnitState::Skipped,
            UnitStatus::SkippedWhen => UnitState::SkippedWhen,
            UnitStatus::UpstreamFailed => UnitState::UpstreamFailed,
            UnitStatus::Reused => UnitState::Reused,
            // An attempt committed ahead and ended before any process of it started.
            UnitStatus::Interrupted if !ran => UnitState::NotStarted,
            UnitStatus::Interrupted => UnitState::CutOff,
            UnitStatus::Unfinished if live => UnitState::Running,
            UnitStatus::Unfinished => UnitState::CutOff,
            UnitStatus::NotStarted | UnitStatus::NotRun => UnitState::NotStarted,
        }
    }
}

/// A unit's status in a run, after the last record about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnitStatus {
    /// Its last attempt succeeded.
    Succeeded,
    /// Its last attempt failed.
    Failed,
    /// Its last attempt timed out.
    TimedOut,
    /// Its last attempt was interrupted.
    Interrupted,
    /// It skipped itself (exit 77).
    Skipped,
    /// Apollo skipped it: its `when:` was false when the pipeline was loaded (nothing ran).
    SkippedWhen,
    /// It was skipped because an upstream unit failed.
    UpstreamFailed,
    /// It was skipped because the run was interrupted before it started.
    NotStarted,
    /// Its last attempt has no `unit_finished`.
    Unfinished,
    /// A human marked it succeeded.
    MarkedSucceeded,
    /// A human marked it failed.
    MarkedFailed,
    /// Nothing was recorded about it.
    NotRun,
    /// It was reused from an earlier run (`unit_reused`): not run, satisfied.
    Reused,
}

impl UnitStatus {
    /// The status for users and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            UnitStatus::Succeeded => "succeeded",
            UnitStatus::Failed => "failed",
            UnitStatus::TimedOut => "timed_out",
            UnitStatus::Interrupted => "interrupted",
            UnitStatus::Skipped => "skipped",
            UnitStatus::SkippedWhen => "skipped_when",
            UnitStatus::UpstreamFailed => "upstream_failed",
            UnitStatus::NotStarted => "not_started",
            UnitStatus::Unfinished => "unfinished",
            UnitStatus::MarkedSucceeded => "marked_succeeded",
            UnitStatus::MarkedFailed => "marked_failed",
            UnitStatus::NotRun => "not_run",
            UnitStatus::Reused => "reused",
        }
    }

    /// The status a `unit_skipped` record leaves (one rule for every fold of records).
    pub(crate) fn after_skip(reason: &SkipReason) -> Self {
        match reason {
            SkipReason::UpstreamFailed { .. } => UnitStatus::UpstreamFailed,
            SkipReason::When { .. } => UnitStatus::SkippedWhen,
            _ => UnitStatus::NotStarted,
        }
    }

    /// The status a human's verdict leaves on a unit that was `self`.
    pub(crate) fn after_mark(self, verdict: Verdict) -> Self {
        match verdict {
            Verdict::Succeeded => UnitStatus::MarkedSucceeded,
            Verdict::Failed => UnitStatus::MarkedFailed,
            // Allowing a rerun leaves the unit where it was (done, or cut off).
            Verdict::Rerun => self,
        }
    }

    pub(crate) fn from_attempt(status: AttemptStatus) -> Self {
        match status {
            AttemptStatus::Succeeded => UnitStatus::Succeeded,
            AttemptStatus::Failed => UnitStatus::Failed,
            AttemptStatus::TimedOut => UnitStatus::TimedOut,
            AttemptStatus::Interrupted => UnitStatus::Interrupted,
            AttemptStatus::Skipped => UnitStatus::Skipped,
        }
    }
}

impl std::fmt::Display for UnitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for UnitStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}
