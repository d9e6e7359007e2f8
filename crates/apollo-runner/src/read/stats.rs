//! A pipeline's history in numbers — `apollo stats` and `apollo serve`'s history page render
//! these: each unit's duration percentiles over its successful attempts, how often it failed
//! or needed a retry, and a flag on a `timeout` below 1.5 × its p95 (false timeouts ahead) or
//! above 10 × it (failures found late), with the timeout that fits (p95 + 50%).

use std::collections::BTreeMap;

use apollo_core::event::AttemptStatus;
use apollo_replay::{AttemptState, Timeline, UnitStatus};
use apollo_store::{RunId, StateDir};
use serde::Serialize;

/// Below this multiple of p95, a timeout will cut off ordinary runs.
const TIMEOUT_TIGHT: f64 = 1.5;
/// Above this multiple of p95, a timeout lets a hung unit hold its slot far too long.
const TIMEOUT_LOOSE: f64 = 10.0;

/// One unit's numbers over the runs looked at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnitStats {
    /// The unit.
    pub unit: String,
    /// Runs (of those looked at) in which the unit ran.
    pub runs: usize,
    /// Successful attempts measured.
    pub samples: usize,
    /// Median duration of its successful attempts, in milliseconds.
    pub p50_ms: Option<u64>,
    /// 90th percentile.
    pub p90_ms: Option<u64>,
    /// 95th percentile.
    pub p95_ms: Option<u64>,
    /// The longest.
    pub max_ms: Option<u64>,
    /// Share of its runs in which it failed for good (failed or timed out).
    pub failure_rate: f64,
    /// Share of its runs in which it needed more than one attempt.
    pub retry_rate: f64,
    /// Attempts that ended by the timeout.
    pub timeouts: usize,
    /// The unit's current `timeout` (the latest run's definition).
    pub timeout_ms: Option<u64>,
    /// `too_tight` (< 1.5 × p95), `too_loose` (> 10 × p95), or absent.
    pub timeout_flag: Option<&'static str>,
    /// 1.5 × p95, rounded up to a second, when the timeout is flagged.
    pub suggested_timeout_ms: Option<u64>,
}

impl UnitStats {
    /// The advice on a flagged timeout, in one line (`timeout 1h is above 10 × its p95 of
    /// 2s: …; `timeout: 3s` fits (p95 + 50%)`), given how durations are written.
    pub fn advice(&self, duration: &dyn Fn(u64) -> String) -> Option<String> {
        let (flag, suggested, p95) = (self.timeout_flag?, self.suggested_timeout_ms?, self.p95_ms?);
        let (bound, why) = if flag == "too_tight" {
            ("below 1.5", "ordinary runs will time out")
        } else {
            ("above 10", "a hung run holds its slot long before it fails")
        };
        Some(format!(
            "timeout {} is {bound} × its p95 of {}: {why}; `timeout: {}s` fits (p95 + 50%)",
            self.timeout_ms.map_or_else(|| "none".to_owned(), duration),
            duration(p95),
            suggested / 1000
        ))
    }
}

/// The `q`-quantile (nearest rank) of sorted `values`.
fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// What the runs say about one unit: its successful durations, in how many runs it failed for
/// good or took more than one attempt, how many attempts timed out.
#[derive(Debug, Default)]
struct History {
    durations: Vec<u64>,
    runs: usize,
    failed_runs: usize,
    retried_runs: usize,
    timeouts: usize,
}

impl History {
    fn stats(mut self, unit: String, timeout_ms: Option<u64>) -> UnitStats {
        self.durations.sort_unstable();
        let p95 = percentile(&self.durations, 0.95);
        let timeout_flag = match (timeout_ms, p95) {
            (Some(timeout), Some(p95)) if (timeout as f64) < TIMEOUT_TIGHT * p95 as f64 => {
                Some("too_tight")
            }
            (Some(timeout), Some(p95)) if (timeout as f64) > TIMEOUT_LOOSE * p95 as f64 => {
                Some("too_loose")
            }
            _ => None,
        };
        let suggested_timeout_ms = timeout_flag.and(p95).map(|p95| {
            let suggested = (TIMEOUT_TIGHT * p95 as f64).ceil() as u64;
            suggested.div_ceil(1000).max(1) * 1000
        });
        let rate = |count: usize| {
            if self.runs == 0 {
                0.0
            } else {
                count as f64 / self.runs as f64
            }
        };
        UnitStats {
            runs: self.runs,
            samples: self.durations.len(),
            p50_ms: percentile(&self.durations, 0.50),
            p90_ms: percentile(&self.durations, 0.90),
            p95_ms: p95,
            max_ms: self.durations.last().copied(),
            failure_rate: rate(self.failed_runs),
            retry_rate: rate(self.retried_runs),
            timeouts: self.timeouts,
            timeout_ms,
            timeout_flag,
            suggested_timeout_ms,
            unit,
        }
    }
}

/// Each unit's numbers over `runs` (the run models of a pipeline's runs), given each unit's
/// current timeout in milliseconds ([`timeouts`]), by unit name.
pub fn unit_stats<'t>(
    runs: impl IntoIterator<Item = &'t Timeline>,
    timeouts: &BTreeMap<String, u64>,
) -> Vec<UnitStats> {
    let mut histories: BTreeMap<String, History> = BTreeMap::new();
    for timeline in runs {
        for unit in &timeline.units {
            // An attempt that ended on its `when: {command}` false ran nothing of the unit
            // (the model's state is skipped_when, as for a false expression, which has no
            // attempt): it is neither a run of the unit nor a retry (issue 35, found by
            // tests/e2e/agreement.rs).
            let ran: Vec<_> = (unit.attempts.iter())
                .filter(|attempt| !attempt.outcome.as_ref().is_some_and(|o| o.when_false()))
                .collect();
            if ran.is_empty() {
                continue;
            }
            let history = histories.entry(unit.name.clone()).or_default();
            history.runs += 1;
            history.retried_runs += usize::from(ran.len() > 1);
            history.failed_runs += usize::from(matches!(
                unit.status,
                UnitStatus::Failed | UnitStatus::TimedOut
            ));
            for attempt in ran {
                match attempt.state {
                    AttemptState::Finished(AttemptStatus::Succeeded) => {
                        history.durations.push(attempt.duration_ms());
                    }
                    AttemptState::Finished(AttemptStatus::TimedOut) => history.timeouts += 1,
                    _ => {}
                }
            }
        }
    }
    histories
        .into_iter()
        .map(|(unit, history)| {
            let timeout = timeouts.get(&unit).copied();
            history.stats(unit, timeout)
        })
        .collect()
}

/// Each unit's timeout in milliseconds, from the definition snapshot `run` started with
/// (empty when its blob is gone).
pub fn timeouts(state: &StateDir, run: &RunId) -> BTreeMap<String, u64> {
    super::definition(state, run)
        .map(|pipeline| {
            (pipeline.units.iter())
                .filter_map(|unit| {
                    let ms = u64::try_from(unit.timeout?.as_millis()).unwrap_or(u64::MAX);
                    Some((unit.name.clone(), ms))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<u64> = (1..=20).collect();
        assert_eq!(percentile(&values, 0.5), Some(10));
        assert_eq!(percentile(&values, 0.95), Some(19));
        assert_eq!(percentile(&[7], 0.95), Some(7));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn tight_and_loose_timeouts_are_flagged_with_the_timeout_that_fits() {
        let history = |durations: Vec<u64>, runs| History {
            durations,
            runs,
            ..History::default()
        };
        let fetch =
            history((1..=20).map(|n| n * 1000).collect(), 20).stats("f".into(), Some(20_000));
        assert_eq!(fetch.timeout_flag, Some("too_tight"));
        assert_eq!(fetch.suggested_timeout_ms, Some(29_000));
        let load = history(vec![500; 10], 10).stats("l".into(), Some(3_600_000));
        assert_eq!(load.timeout_flag, Some("too_loose"));
        let ms = |ms: u64| format!("{ms}ms");
        assert_eq!(
            load.advice(&ms).as_deref(),
            Some(
                "timeout 3600000ms is above 10 × its p95 of 500ms: a hung run holds its slot long before it fails; `timeout: 1s` fits (p95 + 50%)"
            )
        );
        let report = history(vec![2000; 5], 5).stats("r".into(), Some(4_000));
        assert_eq!((report.timeout_flag, report.advice(&ms)), (None, None));
    }
}
