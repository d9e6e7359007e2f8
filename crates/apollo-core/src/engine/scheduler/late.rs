//! Watching the run's deadline for `on_late` (issue 40 item 3): the predicted finish
//! ([`crate::deadline::predict`]) is evaluated when a unit ends and when the deadline comes (a
//! timer in the scheduler's wait, [`LateWatcher::next_due`]); the first time the run is late,
//! `run_late` is made durable and the observer told ([`Notice::Late`]). Once per run: a run
//! whose journal holds a `run_late` is not watched again.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::super::admission::Append;
use super::super::api::LateWatch;
use super::super::units::State;
use super::Scheduler;
use super::command::Appending;
use crate::deadline::{Progress, is_late, predict, to_journal};
use crate::event::{Event, RunLate};
use crate::resume::PriorState;

/// The scheduler's side of [`LateWatch`].
pub(super) struct LateWatcher<'a> {
    watch: &'a LateWatch,
    /// When the deadline comes, on the engine's clock.
    due: Instant,
    /// A unit ended since the last evaluation (or none was made yet).
    check_due: bool,
}

impl<'a> LateWatcher<'a> {
    /// The watcher for `watch`, unless the run recorded `run_late` already. It evaluates at
    /// its first [`Scheduler::check_late`], which sets its timer from the wall clock.
    pub(super) fn new(
        watch: Option<&'a LateWatch>,
        prior: &PriorState,
        now: Instant,
    ) -> Option<Self> {
        let watch = watch.filter(|_| !prior.late_recorded())?;
        Some(Self {
            watch,
            due: now,
            check_due: true,
        })
    }

    /// When the engine must wake to evaluate again: when the deadline comes.
    pub(super) fn next_due(&self) -> Instant {
        self.due
    }

    /// A unit ended: evaluate again before the next wait.
    pub(super) fn unit_ended(&mut self) {
        self.check_due = true;
    }
}

impl Scheduler<'_> {
    /// Evaluates the predicted finish when a unit ended since the last time, or the deadline
    /// has come (`now` on the engine's clock, `wall_now` on the wall clock the deadline is
    /// on); the first time the run is late, asks for `run_late` to be appended (strict: durable
    /// at once; the observer is told once it is) and stops watching. Once the run stops
    /// starting units it stops watching (the run is ending; its timer must not keep waking the
    /// wait).
    pub(in crate::engine) fn check_late(&mut self, now: Instant, wall_now: DateTime<Utc>) {
        debug_assert!(self.appending.is_none());
        self.now = now;
        let Some(watcher) = &mut self.late else {
            return;
        };
        if self.stop_starting {
            self.late = None;
            return;
        }
        if !(watcher.check_due || now >= watcher.due) {
            return;
        }
        watcher.check_due = false;
        let (watch, deadline) = (watcher.watch, watcher.watch.deadline);
        // The timer again from the wall clock, which the deadline is on: should it lag the
        // engine's clock, the wait wakes once more when the deadline comes, never in a spin.
        let until = (deadline - wall_now).to_std().unwrap_or_default();
        watcher.due = now + until.max(Duration::from_millis(10));
        let progress: Vec<Progress> = (0..self.units.len())
            .map(|unit_idx| {
                let slot = &self.units[unit_idx];
                match slot.state {
                    _ if !self.in_scope[unit_idx] => Progress::Done,
                    State::Done | State::Failed | State::Skipped => Progress::Done,
                    State::Running => Progress::Running {
                        elapsed: (slot.attempt_began)
                            .map_or(Duration::ZERO, |began| now.saturating_duration_since(began)),
                    },
                    State::Waiting | State::Hashing | State::RetryWait => Progress::Waiting,
                }
            })
            .collect();
        let prediction = predict(self.dag, &watch.history, &progress, wall_now);
        if !is_late(&prediction, deadline, wall_now) {
            return;
        }
        self.late = None;
        let names = |indices: &[usize]| -> Vec<String> {
            (indices.iter())
                .map(|&unit_idx| self.pipeline.units[unit_idx].name.clone())
                .collect()
        };
        let record = RunLate {
            deadline: to_journal(deadline),
            predicted_finish: to_journal(prediction.finish_p50.max(wall_now)),
            predicted_finish_p95: to_journal(prediction.finish_p95.max(wall_now)),
            critical_path: names(&prediction.critical_path),
            no_history: names(&prediction.no_history),
        };
        self.emit_append(
            vec![Event::RunLate(record.clone())],
            Append::Strict,
            Appending::Late(Box::new(record)),
        );
    }
}
