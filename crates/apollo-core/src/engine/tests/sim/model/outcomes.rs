//! The simulated workers' outcomes, drawn at random, and the engine taking them in through the
//! real [`outcome::take`]: the unit done, a retry after a backoff on the simulated clock, a
//! failure for good with its downstream skipped and fail-fast, a stop for a human.

use std::time::Duration;

use super::{Message, Record, Sim, Unit, ledger};
use crate::engine::outcome::{self, Ended, Next, Standing};
use crate::event::AttemptStatus;

/// An attempt halted before any process of it started (a stopped run's queued job).
pub(super) fn halted() -> Ended {
    Ended {
        status: AttemptStatus::Interrupted,
        started: false,
        needs_human: None,
        killed_from_outside: false,
        exit_retried: true,
    }
}

impl Sim {
    /// A worker's attempt ends: a success (or a skip, exit 77) once its unit's failures are
    /// used up, else a failure of a random kind; cut off when the run was cancelled.
    pub(super) fn worker_ends(&mut self, worker: usize) {
        let Some((unit, attempt)) = self.workers[worker].take() else {
            return;
        };
        let ended = |status, needs_human, killed_from_outside| Ended {
            status,
            started: true,
            needs_human,
            killed_from_outside,
            exit_retried: true,
        };
        let ended = if self.cancelled && self.rng.chance(50) {
            ended(AttemptStatus::Interrupted, None, false)
        } else if attempt <= self.units[unit].failures {
            match self.rng.below(20) {
                0 => ended(AttemptStatus::Failed, Some(self.rng.chance(50)), false),
                1 | 2 => ended(AttemptStatus::Failed, None, true),
                3..=5 => ended(AttemptStatus::TimedOut, None, false),
                _ => ended(AttemptStatus::Failed, None, false),
            }
        } else if self.rng.chance(10) {
            ended(AttemptStatus::Skipped, None, false)
        } else {
            ended(AttemptStatus::Succeeded, None, false)
        };
        self.channel.push_back(Message::Done {
            unit,
            attempt,
            ended,
        });
    }

    /// Take every message waiting in (as the engine's `take_in` after its `select!`).
    pub(super) fn take_in(&mut self) -> Result<(), String> {
        while let Some(message) = self.channel.pop_front() {
            match message {
                Message::Hashed { unit } => self.take_hashed(unit)?,
                Message::Done {
                    unit,
                    attempt,
                    ended,
                } => self.finish_attempt(unit, attempt, &ended)?,
            }
        }
        Ok(())
    }

    /// As `Scheduler::finish_attempt`: ask [`outcome::take`], carry the answer out.
    fn finish_attempt(&mut self, unit: usize, attempt: u32, ended: &Ended) -> Result<(), String> {
        ledger(self.ledger.ended_at_worker(unit))?;
        if ended.status != AttemptStatus::Interrupted || ended.started {
            self.pacer
                .attempt_ended(Duration::from_micros(self.rng.below(20_000) as u64));
        }
        let sim = self.units[unit];
        let taken = outcome::take(
            ended,
            &Standing {
                idempotent: sim.kind.idempotent,
                attempts_here: self.attempts_here[unit],
                retries: sim.retries,
                backoff: crate::engine::retry::backoff_from(
                    sim.retry_delay,
                    self.attempts_here[unit],
                    self.max_retry_delay,
                ),
                has_last_failure: self.last_failure[unit],
                stopping: self.stopped,
                cancelled: self.cancelled,
                failed_any: self.failed_any,
                keep_going: self.keep_going,
            },
        );
        if taken.ask.is_some() {
            self.asked_human = true;
            self.stop()?;
        }
        if ended.needs_human.is_some() {
            self.last_failure[unit] = false;
        }
        let ok = matches!(taken.next, Next::Done { .. });
        if taken.record {
            self.batch.push(Record::Finished {
                unit,
                attempt,
                ok,
                status: ended.status,
                started: ended.started,
                signal: ended.killed_from_outside,
            });
            self.urgent |= !ok || !sim.kind.idempotent;
        }
        match taken.next {
            Next::Done { .. } => {
                self.state[unit] = Unit::Done;
                self.last_failure[unit] = false;
                self.queue.complete(&self.dag, unit);
            }
            Next::LeftInFlight | Next::FailedWaiting => {
                self.state[unit] = Unit::Waiting;
                self.last_failure[unit] = false;
            }
            Next::NotRun | Next::CutOff => self.state[unit] = Unit::Waiting,
            Next::LastFailureStands => {
                self.state[unit] = Unit::Failed;
                self.last_failure[unit] = false;
            }
            Next::Retry { delay } => {
                self.retries.schedule(unit, self.now() + delay);
                self.state[unit] = Unit::RetryWait;
                self.last_failure[unit] = true;
            }
            Next::Failed => {
                self.state[unit] = Unit::Failed;
                self.failed_any = true;
            }
        }
        if taken.skip_downstream {
            self.skip_downstream(unit);
        }
        if taken.fail_fast {
            self.fail_fast()?;
        }
        Ok(())
    }

    fn skip_downstream(&mut self, failed: usize) {
        for unit in self.dag.downstream(failed) {
            if self.state[unit] == Unit::Waiting {
                self.state[unit] = Unit::Skipped;
            }
        }
    }

    /// Fail-fast (as `Scheduler::fail_fast`): nothing new starts; units waiting for a retry
    /// fail for good.
    fn fail_fast(&mut self) -> Result<(), String> {
        self.stop()?;
        for unit in 0..self.units.len() {
            if matches!(self.state[unit], Unit::RetryWait | Unit::Waiting)
                && self.last_failure[unit]
            {
                self.last_failure[unit] = false;
                self.state[unit] = Unit::Failed;
                self.skip_downstream(unit);
            }
        }
        Ok(())
    }

    /// Retries due on the simulated clock go back to the ready queue: whether any did.
    pub(super) fn release_due_retries(&mut self) -> bool {
        let mut released = false;
        while let Some(unit) = self.retries.pop_due(self.now()) {
            self.state[unit] = Unit::Waiting;
            self.queue.requeue(unit);
            released = true;
        }
        released
    }

    /// A stop: start nothing more; the batch's starts are taken back, retries forgotten.
    pub(super) fn stop(&mut self) -> Result<(), String> {
        self.stopped = true;
        self.retries.clear();
        for (unit, attempt) in std::mem::take(&mut self.batch_jobs) {
            ledger(self.ledger.taken_back(unit))?;
            self.batch
                .retain(|record| *record != Record::Started { unit, attempt });
            self.last_attempt[unit] -= 1;
            self.attempts_here[unit] -= 1;
        }
        Ok(())
    }
}
