//! [`UnitState`]: the one closed set of states a unit of a run is shown in, by every view.
//!
//! The engine's report of an invocation ([`UnitResult`](crate::engine::UnitResult)) and the
//! fold of a run's journal (apollo-replay's timeline) both end in a `UnitState`, and every
//! view — the run's summary, its JSON, the hook summary, `show`, `runs`, JUnit, the HTML
//! report — prints [`UnitState::as_str`] or [`UnitState::label`], never a name of its own.
//!
//! ```
//! use apollo_core::unit_state::{UnitCounts, UnitState};
//!
//! let counts: UnitCounts = [UnitState::Succeeded, UnitState::SkippedWhen, UnitState::Reused]
//!     .into_iter()
//!     .collect();
//! assert_eq!(counts.total(), 3);
//! assert_eq!(counts.skipped_all(), 1);
//! assert_eq!(UnitState::SkippedWhen.as_str(), "skipped_when");
//! ```

use serde::{Serialize, Serializer};

/// Where a unit of a run stands, from one closed set (DESIGN §18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum UnitState {
    /// Its last attempt succeeded (or a human marked it succeeded).
    Succeeded,
    /// Its last attempt failed or timed out (or a human marked it failed).
    Failed,
    /// It skipped itself: its command exited 77.
    Skipped,
    /// Apollo skipped it: its `when:` was false (nothing of it ran).
    SkippedWhen,
    /// Not run because a unit it depends on failed.
    UpstreamFailed,
    /// Not run: an earlier run's successful attempt with the same inputs stands for it.
    Reused,
    /// Done by an earlier invocation of this run (a resume does not run it again).
    AlreadyDone,
    /// Never started: the run stopped (fail-fast, a signal, `--only`) before its turn.
    NotStarted,
    /// Its attempt is running now (the run is live).
    Running,
    /// Its attempt was cut off: apollo died or was stopped while it ran.
    CutOff,
    /// Its attempt was cut off (apollo died, stopped it, timed it out, or a signal from
    /// outside killed it) and the unit is `idempotent: false`: its side effects may be half
    /// done, so no run starts it again until a human gives a verdict (`apollo mark`).
    NeedsVerdict,
}

impl UnitState {
    /// Every state, in the order views list their counts.
    pub const ALL: [UnitState; 11] = [
        UnitState::Succeeded,
        UnitState::Reused,
        UnitState::AlreadyDone,
        UnitState::Failed,
        UnitState::Skipped,
        UnitState::SkippedWhen,
        UnitState::UpstreamFailed,
        UnitState::Running,
        UnitState::CutOff,
        UnitState::NeedsVerdict,
        UnitState::NotStarted,
    ];

    /// The state's name in JSON and machine output (`skipped_when`).
    pub fn as_str(self) -> &'static str {
        match self {
            UnitState::Succeeded => "succeeded",
            UnitState::Failed => "failed",
            UnitState::Skipped => "skipped",
            UnitState::SkippedWhen => "skipped_when",
            UnitState::UpstreamFailed => "upstream_failed",
            UnitState::Reused => "reused",
            UnitState::AlreadyDone => "already_done",
            UnitState::NotStarted => "not_started",
            UnitState::Running => "running",
            UnitState::CutOff => "cut_off",
            UnitState::NeedsVerdict => "needs_verdict",
        }
    }

    /// The state for people (`skipped (when: false)`).
    pub fn label(self) -> &'static str {
        match self {
            UnitState::Succeeded => "succeeded",
            UnitState::Failed => "failed",
            UnitState::Skipped => "skipped (exit 77)",
            UnitState::SkippedWhen => "skipped (when: false)",
            UnitState::UpstreamFailed => "not run (upstream failed)",
            UnitState::Reused => "reused",
            UnitState::AlreadyDone => "already done",
            UnitState::NotStarted => "not started",
            UnitState::Running => "running",
            UnitState::CutOff => "cut off",
            UnitState::NeedsVerdict => "needs a verdict",
        }
    }

    /// Whether the unit's work is done: dependents may use its output.
    pub fn is_satisfied(self) -> bool {
        matches!(
            self,
            UnitState::Succeeded
                | UnitState::Skipped
                | UnitState::SkippedWhen
                | UnitState::Reused
                | UnitState::AlreadyDone
        )
    }
}

/// Whether an `idempotent: false` unit whose last attempt ended so waits for a human's verdict
/// (`apollo mark`) before anything runs again — the one rule of the resume
/// ([`PriorState`](crate::resume::PriorState)'s cut-off and in-flight attempts), the engine's
/// report of an invocation and the run model's [`UnitState::NeedsVerdict`].
///
/// `ended`: how the attempt ended, `None` when no end is recorded (apollo died while it ran);
/// `ran`: whether a process (or cluster job) of it started — an attempt stopped before that
/// cannot be half done. Cut off are: no end, `interrupted`, `timed_out`, and `failed` by a
/// signal apollo did not send ([`cut_off_by_signal`](crate::event::cut_off_by_signal)).
pub fn awaits_verdict(
    ended: Option<(
        crate::event::AttemptStatus,
        Option<crate::event::ExitStatus>,
    )>,
    ran: bool,
) -> bool {
    use crate::event::AttemptStatus;
    ran && match ended {
        None => true,
        Some((AttemptStatus::Interrupted | AttemptStatus::TimedOut, _)) => true,
        Some((status, exit)) => crate::event::cut_off_by_signal(status, exit),
    }
}

impl std::fmt::Display for UnitState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for UnitState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// How many units of a run are in each [`UnitState`]: the counts every view prints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct UnitCounts {
    counts: [u32; UnitState::ALL.len()],
}

impl UnitCounts {
    fn slot(state: UnitState) -> usize {
        UnitState::ALL
            .iter()
            .position(|&listed| listed == state)
            .unwrap_or(0)
    }

    /// Counts one more unit in `state`.
    pub fn add(&mut self, state: UnitState) {
        self.counts[Self::slot(state)] += 1;
    }

    /// Units in `state`.
    pub fn get(&self, state: UnitState) -> u32 {
        self.counts[Self::slot(state)]
    }

    /// The counts in [`UnitState::ALL`] order (a cache's stored form).
    pub fn to_array(&self) -> [u32; UnitState::ALL.len()] {
        self.counts
    }

    /// Counts stored by [`to_array`](Self::to_array).
    pub fn from_array(counts: [u32; UnitState::ALL.len()]) -> Self {
        Self { counts }
    }

    /// Every unit counted.
    pub fn total(&self) -> u32 {
        self.counts.iter().sum()
    }

    /// Units skipped for any reason: by themselves (exit 77), by `when:`, or because an
    /// upstream unit failed — what the run's end record calls `skipped`.
    pub fn skipped_all(&self) -> u32 {
        self.get(UnitState::Skipped)
            + self.get(UnitState::SkippedWhen)
            + self.get(UnitState::UpstreamFailed)
    }

    /// Each state with a non-zero count, in [`UnitState::ALL`] order.
    pub fn nonzero(&self) -> impl Iterator<Item = (UnitState, u32)> + '_ {
        UnitState::ALL
            .iter()
            .map(|&state| (state, self.get(state)))
            .filter(|&(_, count)| count > 0)
    }

    /// The counts as a JSON object: every state's name → its count (zeros included, so a
    /// script can read any state without checking for it).
    pub fn to_json(&self) -> serde_json::Value {
        UnitState::ALL
            .iter()
            .map(|&state| (state.as_str().to_owned(), self.get(state).into()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

impl UnitCounts {
    /// A run's counts as every text view prints them (`1 succeeded (1 already done), 1 failed,
    /// 2 skipped (1 by when:, 1 upstream failed), 1 not started`): succeeded with those done
    /// earlier in the run and the `flaky` ones (passed only after a retry) in brackets; reused;
    /// failed; skipped with why; then cut off, running and not started when there are any.
    pub fn text(&self, flaky: usize) -> String {
        let counts = self;
        let mut succeeded_detail = Vec::new();
        if flaky > 0 {
            succeeded_detail.push(format!("{flaky} FLAKY"));
        }
        let already_done = counts.get(UnitState::AlreadyDone);
        if already_done > 0 {
            succeeded_detail.push(format!("{already_done} already done"));
        }
        let bracket = |detail: &[String]| {
            if detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", detail.join(", "))
            }
        };
        let mut parts = vec![format!(
            "{} succeeded{}",
            counts.get(UnitState::Succeeded) + already_done,
            bracket(&succeeded_detail)
        )];
        // Units reused from earlier runs are counted apart, when there are any (DESIGN §17).
        let reused = counts.get(UnitState::Reused);
        if reused > 0 {
            parts.push(format!("{reused} reused"));
        }
        parts.push(format!("{} failed", counts.get(UnitState::Failed)));
        let mut skipped_detail = Vec::new();
        let when = counts.get(UnitState::SkippedWhen);
        if when > 0 {
            skipped_detail.push(format!("{when} by when:"));
        }
        let upstream = counts.get(UnitState::UpstreamFailed);
        if upstream > 0 {
            skipped_detail.push(format!("{upstream} upstream failed"));
        }
        parts.push(format!(
            "{} skipped{}",
            counts.skipped_all(),
            bracket(&skipped_detail)
        ));
        for state in [
            UnitState::CutOff,
            UnitState::NeedsVerdict,
            UnitState::Running,
            UnitState::NotStarted,
        ] {
            let n = counts.get(state);
            if n > 0 {
                parts.push(format!("{n} {}", state.label()));
            }
        }
        parts.join(", ")
    }
}

impl FromIterator<UnitState> for UnitCounts {
    fn from_iter<I: IntoIterator<Item = UnitState>>(states: I) -> Self {
        let mut counts = UnitCounts::default();
        for state in states {
            counts.add(state);
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_has_its_own_slot_and_name() {
        let counts: UnitCounts = UnitState::ALL.into_iter().collect();
        assert!(UnitState::ALL.iter().all(|&state| counts.get(state) == 1));
        let names: std::collections::HashSet<_> =
            UnitState::ALL.iter().map(|state| state.as_str()).collect();
        assert_eq!(names.len(), UnitState::ALL.len());
        assert_eq!(
            counts.to_json().as_object().map(|o| o.len()),
            Some(UnitState::ALL.len())
        );
    }
}
