//! Retries: which failures are retried (`retry_on_exit`), the capped and jittered exponential
//! backoff between attempts, and the units waiting for theirs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use crate::event::ExitStatus;
use crate::model::Unit;

/// How far jitter moves a backoff, each way: ±20 % (the delay is drawn from 80–120 % of the
/// exponential one, then capped).
const JITTER_PERCENT: u64 = 20;

/// Backoff before retry number `retry` (1 for the first retry) of `unit` in run `run_id`: the
/// unit's `retry_delay` × 2^(retry-1), moved by up to ±20 % of jitter, capped at the unit's
/// `retry_max_delay`, or without one at `cap` (the engine's, or `retry_delay` when that is
/// longer). The jitter is drawn from the run id, the unit's name and the retry number: fan-out
/// instances failing together retry apart, and the same run retries the same way (tests and
/// the scheduler's simulation stay deterministic).
pub(super) fn backoff(unit: &Unit, retry: u32, cap: Duration, run_id: &str) -> Duration {
    let factor = 2u32.saturating_pow(retry.saturating_sub(1).min(20));
    let cap = unit
        .retry_max_delay
        .unwrap_or_else(|| cap.max(unit.retry_delay));
    let exponential = unit.retry_delay.saturating_mul(factor);
    // 80 + [0, 40] percent.
    let draw = seeded(run_id, &unit.name, retry) % (2 * JITTER_PERCENT + 1);
    let percent = 100 - JITTER_PERCENT + draw;
    let jittered = exponential
        .checked_mul(u32::try_from(percent).unwrap_or(100))
        .map_or(exponential, |scaled| scaled / 100);
    jittered.min(cap)
}

/// The backoff without jitter or `retry_max_delay`: `retry_delay` × 2^(retry-1), capped at
/// `cap` (or at `retry_delay` when that is longer). The simulation's model of [`backoff`].
#[cfg(test)]
pub(super) fn backoff_from(retry_delay: Duration, retry: u32, cap: Duration) -> Duration {
    let factor = 2u32.saturating_pow(retry.saturating_sub(1).min(20));
    retry_delay.saturating_mul(factor).min(cap.max(retry_delay))
}

/// Whether a failure whose deciding phase ended `exit` is one `retry_on_exit` retries: any
/// when the unit lists none; else a listed code, or a signal N whose 128 + N is listed (as a
/// shell reports it, so `137` retries a process killed by signal 9). A failure with no exit
/// (its command could not start) is not retried under a list.
pub(super) fn retried_exit(unit: &Unit, exit: Option<ExitStatus>) -> bool {
    if unit.retry_on_exit.is_empty() {
        return true;
    }
    let code = match exit {
        Some(ExitStatus::Code(code)) => code,
        Some(ExitStatus::Signal(signal)) => 128 + signal,
        None => return false,
    };
    unit.retry_on_exit.contains(&code)
}

/// A number from the run id, the unit's name and the retry (FNV-1a, then a 64-bit mix):
/// deterministic, well spread, no state.
fn seeded(run_id: &str, unit: &str, retry: u32) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in run_id
        .bytes()
        .chain([0])
        .chain(unit.bytes())
        .chain([0])
        .chain(retry.to_le_bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^ (hash >> 33)
}

/// Units waiting for their next attempt, earliest due first.
#[derive(Debug, Default)]
pub(super) struct RetryQueue {
    waits: BinaryHeap<Reverse<(Instant, usize)>>,
}

impl RetryQueue {
    /// `unit_idx` may run again at `due`.
    pub(super) fn schedule(&mut self, unit_idx: usize, due: Instant) {
        self.waits.push(Reverse((due, unit_idx)));
    }

    /// The next unit whose retry is due at `now`, if any.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<usize> {
        let Reverse((due, unit_idx)) = *self.waits.peek()?;
        if due > now {
            return None;
        }
        self.waits.pop();
        Some(unit_idx)
    }

    /// When the earliest retry comes due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.waits.peek().map(|Reverse((due, _))| *due)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.waits.is_empty()
    }

    /// Forget every waiting retry (the run stops starting units).
    pub(super) fn clear(&mut self) {
        self.waits.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::unit;

    #[test]
    fn backoff_doubles_within_its_jitter_and_is_capped() {
        let mut flaky = unit("flaky", &[]);
        flaky.retry_delay = Duration::from_secs(10);
        let cap = Duration::from_secs(50);
        for retry in 1..=6 {
            let exponential = 10_000u128 << (retry - 1);
            let delay = backoff(&flaky, retry, cap, "run-1").as_millis();
            let low = (exponential * 80 / 100).min(50_000);
            let high = (exponential * 120 / 100).min(50_000);
            assert!((low..=high).contains(&delay), "retry {retry}: {delay} ms");
        }
        // The same run retries the same way.
        assert_eq!(
            backoff(&flaky, 2, cap, "run-1"),
            backoff(&flaky, 2, cap, "run-1")
        );
    }

    #[test]
    fn jitter_spreads_units_that_fail_together() {
        let cap = Duration::from_secs(300);
        let delays: std::collections::BTreeSet<Duration> = (0..20)
            .map(|instance| {
                let mut part = unit(&format!("load[{instance}]"), &[]);
                part.retry_delay = Duration::from_secs(10);
                backoff(&part, 1, cap, "run-1")
            })
            .collect();
        assert!(delays.len() >= 10, "{delays:?}");
        assert!(
            delays
                .iter()
                .all(|delay| delay.as_millis() >= 8_000 && delay.as_millis() <= 12_000)
        );
    }

    #[test]
    fn retry_max_delay_caps_the_backoff_instead_of_the_engine() {
        let mut flaky = unit("flaky", &[]);
        flaky.retry_delay = Duration::from_secs(1);
        flaky.retry_max_delay = Some(Duration::from_secs(3));
        let engine_cap = Duration::from_secs(300);
        assert!(backoff(&flaky, 1, engine_cap, "r") <= Duration::from_millis(1_200));
        for retry in 3..=8 {
            assert_eq!(
                backoff(&flaky, retry, engine_cap, "r"),
                Duration::from_secs(3)
            );
        }
        // Above the engine's cap too: the unit's key is the user's word.
        flaky.retry_max_delay = Some(Duration::from_secs(3_600));
        assert!(backoff(&flaky, 20, engine_cap, "r") == Duration::from_secs(3_600));
    }

    #[test]
    fn retry_on_exit_retries_listed_codes_and_signals_as_128_plus_n() {
        let mut picky = unit("picky", &[]);
        assert!(retried_exit(&picky, Some(ExitStatus::Code(1))));
        assert!(retried_exit(&picky, None));
        picky.retry_on_exit = vec![75, 137];
        assert!(retried_exit(&picky, Some(ExitStatus::Code(75))));
        assert!(!retried_exit(&picky, Some(ExitStatus::Code(1))));
        assert!(retried_exit(&picky, Some(ExitStatus::Signal(9))));
        assert!(!retried_exit(&picky, Some(ExitStatus::Signal(15))));
        assert!(!retried_exit(&picky, None));
    }

    #[test]
    fn retries_come_due_in_time_order() {
        let start = Instant::now();
        let mut retries = RetryQueue::default();
        retries.schedule(7, start + Duration::from_secs(2));
        retries.schedule(3, start + Duration::from_secs(1));
        assert_eq!(retries.next_due(), Some(start + Duration::from_secs(1)));
        assert_eq!(retries.pop_due(start), None);
        assert_eq!(retries.pop_due(start + Duration::from_secs(2)), Some(3));
        assert_eq!(retries.pop_due(start + Duration::from_secs(2)), Some(7));
        assert!(retries.is_empty());
    }
}
