//! The predicted finish of a run that is going on (issue 40 item 3, DESIGN §18 "Cost and
//! deadlines"): the critical path — the longest path through the dependency graph — over the
//! units not yet done, each weighed by its history (p50 and p95 of its earlier successful
//! attempts). Pure: the graph, the history, each unit's progress and the time in; the
//! prediction out.
//!
//! A unit that is running weighs what is left of its p50 (`max(0, p50 - elapsed)`; p95 for the
//! pessimistic figure); one that is waiting, its whole p50 (p95); one that is done, nothing. A
//! unit with no history weighs nothing and is named ([`Prediction::no_history`]): the
//! prediction is then a lower bound, and says so.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::dag::Dag;

/// What earlier runs say of one unit's duration (its successful attempts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitHistory {
    /// The median.
    pub p50: Duration,
    /// The 95th percentile.
    pub p95: Duration,
}

/// Where a unit of the run is, for the prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Done (succeeded, skipped, reused, failed for good, …): nothing left to wait for.
    Done,
    /// An attempt has been running for `elapsed`.
    Running {
        /// How long the attempt has run.
        elapsed: Duration,
    },
    /// Not started yet (waiting for its dependencies, a slot or a retry).
    Waiting,
}

/// The predicted finish of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    /// When the run is expected to finish, by each unit's p50.
    pub finish_p50: DateTime<Utc>,
    /// The pessimistic figure, by each unit's p95.
    pub finish_p95: DateTime<Utc>,
    /// The units on the critical path (by p50), from the first to run to the last; empty when
    /// nothing is left.
    pub critical_path: Vec<usize>,
    /// Units not done that have no history (they weigh nothing: the prediction is a lower
    /// bound), in index order.
    pub no_history: Vec<usize>,
    /// Whether any unit is not done.
    pub units_left: bool,
}

/// The prediction for a run at `now`: `history` and `progress` are by unit index, as `dag`'s.
///
/// Units missing from `progress` (a shorter slice) count as done.
pub fn predict(
    dag: &Dag,
    history: &[Option<UnitHistory>],
    progress: &[Progress],
    now: DateTime<Utc>,
) -> Prediction {
    let n_units = dag.len();
    let progress_of = |unit_idx: usize| progress.get(unit_idx).copied().unwrap_or(Progress::Done);
    let weight = |unit_idx: usize, pick: fn(&UnitHistory) -> Duration| -> Duration {
        let Some(history) = history.get(unit_idx).copied().flatten() else {
            return Duration::ZERO;
        };
        match progress_of(unit_idx) {
            Progress::Done => Duration::ZERO,
            Progress::Running { elapsed } => pick(&history).saturating_sub(elapsed),
            Progress::Waiting => pick(&history),
        }
    };
    // Longest path ending at each unit (its own weight included), in topological order; the
    // predecessor on it for the p50 figure, to name the path.
    let mut ends_p50 = vec![Duration::ZERO; n_units];
    let mut ends_p95 = vec![Duration::ZERO; n_units];
    let mut before: Vec<Option<usize>> = vec![None; n_units];
    for unit_idx in dag.topo_order() {
        let mut start_p50 = Duration::ZERO;
        let mut start_p95 = Duration::ZERO;
        for &dep in dag.deps(unit_idx) {
            // A done dependency holds nothing up (its own upstream is done too).
            if progress_of(dep) == Progress::Done {
                continue;
            }
            // The first of equally long paths is named (deps are in config order).
            if before[unit_idx].is_none() || ends_p50[dep] > start_p50 {
                before[unit_idx] = Some(dep);
            }
            start_p50 = start_p50.max(ends_p50[dep]);
            start_p95 = start_p95.max(ends_p95[dep]);
        }
        ends_p50[unit_idx] = start_p50 + weight(unit_idx, |history| history.p50);
        ends_p95[unit_idx] = start_p95 + weight(unit_idx, |history| history.p95);
    }
    let left: Vec<usize> = (0..n_units)
        .filter(|&unit_idx| progress_of(unit_idx) != Progress::Done)
        .collect();
    // The end of the critical path: of the units not done that no unit left waits for (a
    // longest path ends at one, weights being never negative), the one whose path is longest
    // (the first such in index order, config order being the tie-breaker everywhere).
    let last = left
        .iter()
        .copied()
        .filter(|&unit_idx| {
            (dag.dependents(unit_idx).iter()).all(|&next| progress_of(next) == Progress::Done)
        })
        .fold(None, |best: Option<usize>, unit_idx| match best {
            Some(best) if ends_p50[best] >= ends_p50[unit_idx] => Some(best),
            _ => Some(unit_idx),
        });
    let mut critical_path = Vec::new();
    let mut cursor = last;
    while let Some(unit_idx) = cursor {
        critical_path.push(unit_idx);
        cursor = before[unit_idx];
    }
    critical_path.reverse();
    let longest = |ends: &[Duration]| {
        let longest = left.iter().map(|&unit_idx| ends[unit_idx]).max();
        now + TimeDelta::from_std(longest.unwrap_or_default()).unwrap_or(TimeDelta::MAX)
    };
    Prediction {
        finish_p50: longest(&ends_p50),
        finish_p95: longest(&ends_p95),
        critical_path,
        no_history: (left.iter().copied())
            .filter(|&unit_idx| history.get(unit_idx).copied().flatten().is_none())
            .collect(),
        units_left: !left.is_empty(),
    }
}

/// Whether a run whose prediction is `prediction` at `now` is late for `deadline`: units are
/// left and either the deadline has come or the predicted finish (p50) is after it.
pub fn is_late(prediction: &Prediction, deadline: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    prediction.units_left && (now >= deadline || prediction.finish_p50 > deadline)
}

#[cfg(test)]
#[path = "predict_tests.rs"]
mod tests;
