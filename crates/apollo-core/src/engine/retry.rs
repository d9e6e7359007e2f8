//! Retries: the capped exponential backoff between attempts, and the units waiting for theirs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// Backoff before retry number `retry` (1 for the first retry): the unit's `retry_delay` ×
/// 2^(retry-1), capped at `cap` (or at `retry_delay` when that is longer).
pub(super) fn backoff_from(retry_delay: Duration, retry: u32, cap: Duration) -> Duration {
    let factor = 2u32.saturating_pow(retry.saturating_sub(1).min(20));
    retry_delay.saturating_mul(factor).min(cap.max(retry_delay))
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
    fn backoff_doubles_and_is_capped() {
        let mut flaky = unit("flaky", &[]);
        flaky.retry_delay = Duration::from_secs(1);
        let cap = Duration::from_secs(5);
        let delays: Vec<u64> = (1..=5)
            .map(|retry| backoff_from(flaky.retry_delay, retry, cap).as_secs())
            .collect();
        assert_eq!(delays, vec![1, 2, 4, 5, 5]);
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
