//! [`Lanes`]: where a run's attempts really ran, one track per worker.

use chrono::{DateTime, Utc};

/// Lanes laid out where attempts really ran: each attempt is placed when it ends (its start
/// is known then, after any wait in the queue of attempts committed ahead), on the free lane
/// that was freed last (best fit, so lanes stay packed), a lane being free when its attempts
/// all ended by the attempt's start, give or take [`LANE_SLACK`]. Attempts end in record order,
/// so every renderer that reads the same records gets the same lanes; the number of lanes is
/// about the run's peak number of attempts really running at once (workers), not of attempts
/// committed. With a known number of workers ([`Lanes::with_max`]) there are never more lanes
/// than that: an attempt that finds none free (the clock's rounding, nothing else, since no more
/// attempts ran at once) goes on the lane freed first.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    /// Per lane, the latest end placed on it.
    ends: Vec<DateTime<Utc>>,
    /// The most lanes to use (the run's workers), when known.
    max: Option<usize>,
}

/// How far an attempt may seem to start before the previous one on its lane ended: the
/// journal measures `queued_ms` and `duration_ms` in whole milliseconds (rounded down) from
/// instants a little apart from the records' times, so a worker's next attempt can appear to
/// start a millisecond or two before its previous one ended. Without this slack, two workers
/// drew on dozens of lanes.
const LANE_SLACK: chrono::TimeDelta = chrono::TimeDelta::milliseconds(2);

impl Lanes {
    /// Lanes for a run of at most `max` attempts at once (`None`: unknown).
    pub(crate) fn with_max(max: Option<usize>) -> Self {
        Self {
            ends: Vec::new(),
            max: max.filter(|&max| max > 0),
        }
    }

    /// The lane for an attempt that ran from `start` to `end`.
    pub(crate) fn place(&mut self, start: DateTime<Utc>, end: DateTime<Utc>) -> usize {
        let end = end.max(start);
        let start_with_slack = start.checked_add_signed(LANE_SLACK).unwrap_or(start);
        let free = self
            .ends
            .iter()
            .enumerate()
            .filter(|&(_, &last)| last <= start_with_slack)
            .max_by_key(|&(lane, &last)| (last, std::cmp::Reverse(lane)))
            .map(|(lane, _)| lane);
        let lane = match free {
            Some(lane) => lane,
            None if self.max.is_some_and(|max| self.ends.len() >= max) => self
                .ends
                .iter()
                .enumerate()
                .min_by_key(|&(lane, &last)| (last, lane))
                .map_or(0, |(lane, _)| lane),
            None => {
                self.ends.push(end);
                return self.ends.len() - 1;
            }
        };
        self.ends[lane] = self.ends[lane].max(end);
        lane
    }
}
