//! Commit pacing: how far ahead of the workers attempts are committed, and how long a batch
//! of routine records may wait for company before its fsync.
//!
//! Two pressures pull against each other. Every fsync costs time and CPU, so records should
//! share one; but a worker with no durable attempt to take next sits idle. The [`Pacer`]
//! keeps moving averages of how long attempts and commits take, and from them answers the
//! scheduler's two questions: how many attempts may be committed but not yet taken back in
//! ([`Pacer::commit_limit`]), and whether a batch of routine records may wait a little longer
//! ([`Pacer::may_hold_back`]). It reads no clock: the caller passes `now`, so tests drive it
//! without sleeping.

use std::time::{Duration, Instant};

/// The knobs of commit pacing. One value, [`TUNING`], is used; its consistency is checked at
/// compile time, and the pacer's arithmetic cannot panic even for an inconsistent one.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tuning {
    /// Attempts committed ahead per worker: their `unit_started` is made durable while the
    /// worker still runs its current attempt, so a worker that finishes takes its next
    /// attempt at once instead of waiting for an fsync. After a crash such an attempt counts
    /// as in flight, which only ever means "run it again", because only idempotent units are
    /// committed ahead. Four covers an fsync several times as long as a short unit.
    pub(super) lookahead_per_worker: usize,
    /// Attempts committed ahead per worker while recent attempts last less than
    /// `short_attempt` on average: then one fsync outlasts several attempts, and batches
    /// shared by the dozen need room above the low water mark. Longer attempts keep
    /// `lookahead_per_worker`, so fewer attempts are recorded as interrupted when a failure
    /// stops the run before their turn.
    pub(super) lookahead_per_worker_short: usize,
    /// See `lookahead_per_worker_short`.
    pub(super) short_attempt: Duration,
    /// A batch of routine records (attempts started, attempts that succeeded) waits while
    /// more than this many committed attempts per worker are still queued for the workers —
    /// or, when more, as many as recent attempts show a worker gets through during one recent
    /// commit (plus one), up to half of `lookahead_per_worker_short` — so that very short
    /// attempts share an fsync by the dozen and the workers still have work while it runs.
    pub(super) commit_low_water_per_worker: usize,
    /// The longest a routine record waits for company. Bounds what a crash can cost beyond
    /// one fsync: the successes of very short attempts in the last few milliseconds, which a
    /// resume runs again.
    pub(super) max_commit_delay: Duration,
    /// A batch holding only `unit_reused` records (units reused from an earlier run: they
    /// start nothing, so nothing waits for them to be durable) waits for company up to this
    /// many records, while other units are still being checked or run. A full one is
    /// written without a sync while the run goes on (durable with the next durable append):
    /// unbounded, a run reusing a long chain held all its records, notices and encodings, and
    /// their fresh pages cost a visible part of its time...
    pub(super) reuses_per_commit: usize,
    /// ... and at most this long. A crash loses at most these records, and a resume reuses
    /// their units again.
    pub(super) max_reuse_delay: Duration,
    /// The longest the engine thread sleeps, while the workers' queue of committed attempts
    /// keeps them busy, before it takes in what they sent meanwhile ([`Pacer::nap`]). Short
    /// attempts end by the thousand per second, and waking the engine thread for each (a
    /// futex wake, a context switch, on a machine whose cores run the units) made 10,000
    /// wide or layered no-op units take 11–13% longer (same-round runs on 2 cores); taken in
    /// a few at a time, their records also share a batch. The price: an outcome is taken in
    /// up to this much later (8 ms: see the chain-fsync design note, "The nap, again").
    pub(super) max_nap: Duration,
    /// Naps shorter than this are not taken (a sleep costs a wake-up of its own).
    pub(super) min_nap: Duration,
}

/// Attempts committed ahead per worker, and the committed attempts per worker below which a
/// routine batch commits (see [`Tuning`]): one value, so a worker holds a full lookahead when
/// its next batch starts.
const LOOKAHEAD_PER_WORKER: usize = 4;

/// The tuning the engine runs with. The measurements behind these values are in
/// ARCHITECTURE.md ("Durability").
pub(super) const TUNING: Tuning = Tuning {
    lookahead_per_worker: LOOKAHEAD_PER_WORKER,
    lookahead_per_worker_short: 32,
    short_attempt: Duration::from_millis(10),
    commit_low_water_per_worker: LOOKAHEAD_PER_WORKER,
    max_commit_delay: Duration::from_millis(5),
    reuses_per_commit: 1024,
    max_reuse_delay: Duration::from_millis(200),
    max_nap: Duration::from_millis(8),
    min_nap: Duration::from_micros(250),
};

// A knob changed on its own must not silently break another's assumption: this fails the
// build, with the reason, instead.
const _: () = TUNING.assert_consistent();

impl Tuning {
    /// The most committed attempts per worker a routine batch waits for.
    const fn commit_high_water_per_worker(&self) -> usize {
        self.lookahead_per_worker_short / 2
    }

    /// What is inconsistent about this tuning, if anything.
    pub(super) const fn problem(&self) -> Option<&'static str> {
        if self.lookahead_per_worker > self.lookahead_per_worker_short {
            return Some(
                "the lookahead for short attempts must not be smaller than the normal one",
            );
        }
        if self.commit_low_water_per_worker > self.commit_high_water_per_worker() {
            return Some(
                "the commit low water per worker must not exceed half the lookahead for short \
                 attempts: a batch must be able to wait while workers hold more than it",
            );
        }
        if self.max_commit_delay.is_zero() {
            return Some("a routine record must be allowed to wait a little (max_commit_delay)");
        }
        if self.reuses_per_commit == 0 {
            return Some("a batch of reuses must hold at least one record (reuses_per_commit)");
        }
        None
    }

    const fn assert_consistent(&self) {
        if let Some(problem) = self.problem() {
            panic!("{}", problem);
        }
    }
}

/// Moving averages of attempt and commit times, and since when records have been waiting.
#[derive(Debug)]
pub(super) struct Pacer {
    tuning: Tuning,
    /// Moving average of the attempts' wall time (each new one weighs 1/8); `None` before
    /// the first attempt ends.
    recent_attempt_time: Option<Duration>,
    /// Moving average of how long a commit (append + fsync) took, the same way.
    recent_commit_time: Option<Duration>,
    /// Since when records have been waiting for a commit.
    pending_since: Option<Instant>,
}

impl Pacer {
    pub(super) fn new() -> Self {
        Self::with_tuning(TUNING)
    }

    pub(super) fn with_tuning(tuning: Tuning) -> Self {
        Self {
            tuning,
            recent_attempt_time: None,
            recent_commit_time: None,
            pending_since: None,
        }
    }

    /// An attempt a worker ran ended after `wall_time`.
    pub(super) fn attempt_ended(&mut self, wall_time: Duration) {
        self.recent_attempt_time = Some(moving_average(self.recent_attempt_time, wall_time));
    }

    /// A commit (append and fsync) took `took`.
    pub(super) fn commit_took(&mut self, took: Duration) {
        self.recent_commit_time = Some(moving_average(self.recent_commit_time, took));
    }

    /// How many attempts may be committed (in a batch or at a worker) and not yet taken back
    /// in: `max_parallel` running, plus the lookahead per worker.
    pub(super) fn commit_limit(&self, max_parallel: usize) -> usize {
        let lookahead = if self
            .recent_attempt_time
            .is_some_and(|time| time < self.tuning.short_attempt)
        {
            self.tuning.lookahead_per_worker_short
        } else {
            self.tuning.lookahead_per_worker
        };
        max_parallel.saturating_mul(lookahead.saturating_add(1))
    }

    /// Records are waiting for a commit, at least since `now`.
    pub(super) fn hold(&mut self, now: Instant) {
        self.pending_since.get_or_insert(now);
    }

    /// Nothing waits for a commit any more (it is done, or there was nothing).
    pub(super) fn release(&mut self) {
        self.pending_since = None;
    }

    /// Whether a batch of routine records may wait for more: the `workers` still have more
    /// than the low water mark of committed attempts (`at_workers`) to get through, and the
    /// oldest record has not waited its longest yet.
    pub(super) fn may_hold_back(&self, workers: usize, at_workers: usize, now: Instant) -> bool {
        let low_water = workers.saturating_mul(self.commit_low_water().saturating_add(1));
        let queue_may_run_low = at_workers < low_water;
        let waited_enough = self.pending_since.is_some_and(|since| {
            now.saturating_duration_since(since) >= self.tuning.max_commit_delay
        });
        !queue_may_run_low && !waited_enough
    }

    /// Whether a batch of `records` that are all `unit_reused` may wait for more: others are
    /// still `in_flight` (being checked or run) to join it, it is not full, and its oldest
    /// record has not waited its longest yet (see [`Tuning::reuses_per_commit`]).
    pub(super) fn may_hold_reuses(&self, records: usize, in_flight: bool, now: Instant) -> bool {
        let waited_enough = self.pending_since.is_some_and(|since| {
            now.saturating_duration_since(since) >= self.tuning.max_reuse_delay
        });
        in_flight && !self.reuses_full(records) && !waited_enough
    }

    /// Whether records appended unsynced `since` have waited as long as a batch of reuses
    /// may: the next append is durable.
    pub(super) fn reuses_overdue(&self, since: Instant, now: Instant) -> bool {
        now.saturating_duration_since(since) >= self.tuning.max_reuse_delay
    }

    /// Whether a batch of `records` that are all `unit_reused` is full: it is committed
    /// before any other unit is decided, without a sync while the run goes on (see
    /// [`Tuning::reuses_per_commit`]).
    pub(super) fn reuses_full(&self, records: usize) -> bool {
        records >= self.tuning.reuses_per_commit
    }

    /// When the records waiting now must be committed at the latest: `only_reuses` when
    /// they are all `unit_reused` (see [`Pacer::may_hold_reuses`]).
    pub(super) fn hold_deadline(&self, only_reuses: bool) -> Option<Instant> {
        let delay = if only_reuses {
            self.tuning.max_reuse_delay
        } else {
            self.tuning.max_commit_delay
        };
        self.pending_since
            .and_then(|since| since.checked_add(delay))
    }

    /// How long the engine thread may sleep before it takes in what the workers sent (see
    /// [`Tuning::max_nap`]): half the time the `queued` committed attempts keep the
    /// `workers` busy, going by recent attempts, and at most `max_nap`; `None` (wait for the
    /// next message as usual) when attempts are not short, none has ended yet, or the nap
    /// would be shorter than `min_nap`. Napping, the engine is not waiting on the channel, so
    /// the workers' messages wake nobody; it takes them all in when it wakes.
    pub(super) fn nap(&self, workers: usize, queued: usize) -> Option<Duration> {
        let attempt = self
            .recent_attempt_time
            .filter(|time| *time < self.tuning.short_attempt)?;
        let per_worker = u32::try_from(queued / workers.max(1)).unwrap_or(u32::MAX);
        let nap = (attempt.saturating_mul(per_worker) / 2).min(self.tuning.max_nap);
        (nap >= self.tuning.min_nap).then_some(nap)
    }

    /// Committed attempts per worker below which the next commit starts: enough to keep a
    /// worker busy through a commit as long as the recent ones, within the tuning's bounds.
    fn commit_low_water(&self) -> usize {
        let covering_one_commit = match (self.recent_commit_time, self.recent_attempt_time) {
            (Some(commit), Some(attempt)) => {
                let per_commit = commit.as_nanos().div_ceil(attempt.as_nanos().max(1));
                usize::try_from(per_commit)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1)
            }
            _ => 0,
        };
        // Not `clamp`, which panics when its bounds cross: an inconsistent tuning (rejected
        // at compile time anyway) must not be able to crash the engine thread.
        let low = self.tuning.commit_low_water_per_worker;
        let high = self.tuning.commit_high_water_per_worker().max(low);
        covering_one_commit.max(low).min(high)
    }
}

/// `recent` moved 1/8 of the way towards `sample` (or `sample`, the first time); saturating,
/// since an executor may report any duration.
fn moving_average(recent: Option<Duration>, sample: Duration) -> Duration {
    match recent {
        None => sample,
        Some(recent) => recent.saturating_mul(7).saturating_add(sample) / 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn short_attempts_commit_further_ahead_and_long_ones_bring_it_back() {
        let mut pacer = Pacer::new();
        assert_eq!(
            pacer.commit_limit(2),
            2 * (1 + 4),
            "no history: the normal lookahead"
        );
        pacer.attempt_ended(MS);
        assert_eq!(pacer.commit_limit(2), 2 * (1 + 32));
        for _ in 0..40 {
            pacer.attempt_ended(100 * MS);
        }
        assert_eq!(pacer.commit_limit(2), 2 * (1 + 4));
    }

    #[test]
    fn the_low_water_mark_covers_one_recent_commit_within_its_bounds() {
        let mut pacer = Pacer::new();
        assert_eq!(pacer.commit_low_water(), 4, "no history: the minimum");
        pacer.commit_took(3 * MS);
        pacer.attempt_ended(MS / 2);
        assert_eq!(
            pacer.commit_low_water(),
            7,
            "six attempts per commit, plus one"
        );
        pacer.commit_took(Duration::from_secs(3600));
        assert_eq!(
            pacer.commit_low_water(),
            16,
            "at most half the short lookahead"
        );
        let mut instant_attempts = Pacer::new();
        instant_attempts.commit_took(MS);
        instant_attempts.attempt_ended(Duration::ZERO);
        assert_eq!(instant_attempts.commit_low_water(), 16);
    }

    #[test]
    fn a_routine_batch_waits_while_workers_are_busy_but_not_past_its_deadline() {
        let start = Instant::now();
        let mut pacer = Pacer::new();
        pacer.hold(start);
        // Two workers, low water 4 per worker: they must hold more than 2 × (4 + 1).
        assert!(!pacer.may_hold_back(2, 9, start), "the queue may run low");
        assert!(pacer.may_hold_back(2, 10, start));
        assert!(pacer.may_hold_back(2, 10, start + 4 * MS));
        assert!(
            !pacer.may_hold_back(2, 10, start + 5 * MS),
            "waited its longest"
        );
        // Holding again does not move the oldest record's deadline.
        pacer.hold(start + 3 * MS);
        assert_eq!(pacer.hold_deadline(false), Some(start + 5 * MS));
        pacer.release();
        assert_eq!(pacer.hold_deadline(false), None);
        assert!(
            pacer.may_hold_back(2, 10, start + 60 * MS),
            "nothing waits any more"
        );
    }

    #[test]
    fn a_batch_of_reuses_waits_for_company_while_checks_are_in_flight() {
        let start = Instant::now();
        let mut pacer = Pacer::new();
        pacer.hold(start);
        assert!(pacer.may_hold_reuses(100, true, start + 50 * MS));
        assert!(
            !pacer.may_hold_reuses(100, false, start),
            "nothing else in flight: nothing to wait for"
        );
        assert!(!pacer.may_hold_reuses(1024, true, start), "full");
        assert!(pacer.reuses_full(1024) && !pacer.reuses_full(1023));
        assert!(
            !pacer.may_hold_reuses(100, true, start + 200 * MS),
            "waited its longest"
        );
        assert_eq!(pacer.hold_deadline(true), Some(start + 200 * MS));
    }

    #[test]
    fn the_engine_tuning_is_consistent() {
        assert_eq!(TUNING.problem(), None);
    }

    /// Regression: raising the lookahead per worker above 16 (with the low water mark that
    /// follows it) crossed the bounds of a `clamp`, which panicked on the engine thread.
    #[test]
    fn an_inconsistent_tuning_is_reported_and_cannot_crash_the_pacer() {
        let raised = Tuning {
            lookahead_per_worker: 20,
            commit_low_water_per_worker: 20,
            ..TUNING
        };
        assert!(raised.problem().is_some());
        let mut pacer = Pacer::with_tuning(raised);
        assert_eq!(pacer.commit_low_water(), 20);
        pacer.commit_took(3 * MS);
        pacer.attempt_ended(MS / 2);
        assert_eq!(pacer.commit_low_water(), 20);
        assert_eq!(pacer.commit_limit(usize::MAX), usize::MAX, "saturates");
        let zero_delay = Tuning {
            max_commit_delay: Duration::ZERO,
            ..TUNING
        };
        assert!(zero_delay.problem().is_some());
    }

    #[test]
    fn the_engine_naps_only_while_short_attempts_keep_the_workers_busy() {
        let mut pacer = Pacer::new();
        assert_eq!(pacer.nap(2, 64), None, "no attempt has ended yet");
        pacer.attempt_ended(MS);
        // 64 queued for 2 workers of 1 ms attempts: 32 ms of work; half of it, capped.
        assert_eq!(pacer.nap(2, 64), Some(TUNING.max_nap));
        // 4 queued: 2 ms of work, a 1 ms nap.
        assert_eq!(pacer.nap(2, 4), Some(MS));
        // Less than a worker's share queued: the next outcome is wanted at once.
        assert_eq!(pacer.nap(2, 1), None);
        assert_eq!(pacer.nap(2, 0), None);
        assert_eq!(pacer.nap(0, 0), None, "no worker: nothing to divide by");
        // Long attempts end seldom: nothing to gain.
        let mut slow = Pacer::new();
        slow.attempt_ended(TUNING.short_attempt);
        assert_eq!(slow.nap(2, 64), None);
        // Saturates instead of overflowing.
        let mut quick = Pacer::new();
        quick.attempt_ended(TUNING.short_attempt - MS);
        assert_eq!(quick.nap(1, usize::MAX), Some(TUNING.max_nap));
    }

    #[test]
    fn moving_averages_saturate() {
        assert_eq!(moving_average(None, Duration::MAX), Duration::MAX);
        let average = moving_average(Some(Duration::MAX), Duration::MAX);
        assert!(average >= Duration::MAX / 8);
        assert_eq!(moving_average(Some(8 * MS), Duration::ZERO), 7 * MS);
    }
}
