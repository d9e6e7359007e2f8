//! Taking an attempt's outcome in: its record, its unit's next state, and what a failure
//! does to the rest of the run (downstream skipped, fail-fast).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Scheduler, checked};
use crate::engine::api::EngineError;
use crate::engine::api::UnitResult;
use crate::engine::observer::{HeldNotice, Observer};
use crate::engine::outcome::{self, AskHuman, Ended, Next, Standing};
use crate::engine::record::{self, first_line};
use crate::engine::retry::{backoff, retried_exit};
use crate::engine::units::State;
use crate::engine::workers::{Done, FromWorker};
use crate::event::{
    AttemptStatus, FileSide, SkipReason, UnitFiles, UnitSkipped, cut_off_by_signal,
};
use crate::executor::AttemptEvent;
use crate::unit_state::awaits_verdict;

impl Scheduler<'_> {
    /// Take a worker's (or a hashing thread's) message in, at `now`.
    pub(in crate::engine) fn take_in(
        &mut self,
        message: FromWorker,
        now: Instant,
        observer: &mut dyn Observer,
    ) {
        self.now = now;
        match message {
            FromWorker::Done(done) => {
                if let Some(watcher) = &mut self.late {
                    watcher.unit_ended();
                }
                self.finish_attempt(done);
            }
            FromWorker::Hashed(hashed) => self.take_hashed(hashed, observer),
            FromWorker::Report {
                unit_idx,
                attempt,
                event,
            } => self.take_report(unit_idx, attempt, event),
        }
    }

    /// Queue what a running attempt reported. It is never held back for company: a remote
    /// job's id is what lets a later apollo find the job again.
    fn take_report(&mut self, unit_idx: usize, attempt: u32, event: AttemptEvent) {
        let unit = self.pipeline.units[unit_idx].name.clone();
        let submitted = event.into_submitted(unit, attempt);
        let notice = HeldNotice::Submitted {
            unit_idx,
            record: Box::new(submitted.clone()),
        };
        self.batch.push_submitted(submitted, notice);
    }

    /// Take an attempt's outcome in: settle it, ask [`outcome::take`] what follows, and carry
    /// that out — its `unit_finished` queued, its unit's next state, its dependents ready, a
    /// retry scheduled, or a failure's consequences (downstream skipped, fail-fast).
    pub(super) fn finish_attempt(&mut self, done: Done) {
        let Done {
            worker,
            unit_idx,
            attempt,
            queued,
            log_dir,
            outcome,
            outputs,
            output_files,
            awaits_ack,
        } = done;
        checked(if worker.is_some() {
            self.ledger.ended_at_worker(unit_idx)
        } else {
            self.ledger.ended_without_worker(unit_idx)
        });
        // Only attempts a worker ran say how long attempts take (not one the engine failed
        // itself, nor one halted before it started).
        let ran = worker.is_some()
            && !(outcome.status == AttemptStatus::Interrupted && outcome.phases.is_empty());
        if ran {
            self.pacer.attempt_ended(outcome.wall_time);
        }
        let unit = &self.pipeline.units[unit_idx];
        let mut settled = record::settle(&outcome, outputs);
        if outcome.when_false() {
            settled.output_hash = Some(crate::engine::outputs::when_false_hash(unit));
        }
        let taken = outcome::take(
            &Ended {
                status: settled.status,
                started: !outcome.phases.is_empty(),
                needs_human: outcome
                    .needs_human
                    .as_ref()
                    .map(|human| human.left_in_flight),
                killed_from_outside: cut_off_by_signal(settled.status, outcome.exit),
                exit_retried: retried_exit(unit, outcome.exit),
            },
            &self.standing(unit_idx),
        );
        // A non-idempotent unit cut off (timed out, killed from outside) waits for a human's
        // verdict: its result says so (`UnitState::NeedsVerdict`, the one rule).
        let awaits = !unit.idempotent
            && outcome.needs_human.is_none()
            && awaits_verdict(
                Some((settled.status, outcome.exit)),
                !outcome.phases.is_empty(),
            );
        if let Some(ask) = taken.ask {
            self.human_needed
                .get_or_insert(match (ask, &outcome.needs_human) {
                    (AskHuman::NeedsHuman, Some(needs_human)) => EngineError::NeedsHuman {
                        unit: unit.name.clone(),
                        attempt,
                        reason: needs_human.reason.clone(),
                        left_in_flight: needs_human.left_in_flight,
                    },
                    _ => EngineError::NeedsVerdict {
                        unit: unit.name.clone(),
                        attempt,
                        ended: Some(AttemptStatus::Failed),
                    },
                });
            self.stop();
        }
        if outcome.needs_human.is_some() {
            // Nothing is retried: the run stops for a human (exit 5).
            self.units[unit_idx].last_failure = None;
        }
        if taken.record {
            let record = record::unit_finished(unit, attempt, &settled, &outcome, queued);
            let retry_in =
                self.settle_unit(unit_idx, attempt, taken.next, (&settled, awaits), &log_dir);
            let notice = HeldNotice::Finished {
                unit_idx,
                record: Box::new(record.clone()),
                retry_in,
                log_dir,
            };
            // The outputs' manifest goes just before the record of the success it belongs to.
            if settled.status == AttemptStatus::Succeeded && !output_files.is_empty() {
                self.batch.push_files(UnitFiles {
                    unit: unit.name.clone(),
                    attempt,
                    side: FileSide::Outputs,
                    files: output_files,
                    manifest: None,
                });
            }
            self.batch.push_finished(record, notice, unit.idempotent);
            if outcome.when_false() && taken.next == (Next::Done { skipped: true }) {
                self.skip_by_condition(unit_idx);
            }
        } else {
            self.settle_unit(unit_idx, attempt, taken.next, (&settled, awaits), &log_dir);
        }
        if taken.skip_downstream {
            self.skip_downstream(unit_idx);
        }
        if taken.fail_fast {
            self.fail_fast();
        }
        // The worker may go on once every outcome at hand is taken in (see `Acks::send_due`).
        if let Some(worker_idx) = worker.filter(|_| awaits_ack) {
            self.out.push(super::Command::Ack(worker_idx));
        }
    }

    /// Where `unit_idx` and the run stand as its attempt's outcome is taken in.
    fn standing(&self, unit_idx: usize) -> Standing {
        let unit = &self.pipeline.units[unit_idx];
        let slot = &self.units[unit_idx];
        Standing {
            idempotent: unit.idempotent,
            attempts_here: slot.attempts_here,
            retries: unit.retries,
            backoff: backoff(
                unit,
                slot.attempts_here,
                self.options.max_retry_delay,
                &self.options.run_id,
            ),
            has_last_failure: slot.last_failure.is_some(),
            stopping: self.stop_starting,
            cancelled: self.cancel.is_cancelled(),
            failed_any: self.failed_any,
            keep_going: self.options.keep_going,
        }
    }

    /// Carry out `next` on the unit's slot (its state and result) and the queues: a done unit's
    /// dependents become ready, a retry is scheduled (returns its delay), a failure is counted.
    fn settle_unit(
        &mut self,
        unit_idx: usize,
        attempt: u32,
        next: Next,
        (settled, awaits_verdict): (&record::Settled, bool),
        log_dir: &std::path::Path,
    ) -> Option<Duration> {
        let failure = || UnitResult::Failed {
            attempt,
            log_dir: log_dir.to_path_buf(),
            error: settled.error.as_deref().map(first_line),
            awaits_verdict,
        };
        let idempotent = self.pipeline.units[unit_idx].idempotent;
        let slot = &mut self.units[unit_idx];
        let (state, result) = match next {
            Next::LeftInFlight => (State::Waiting, UnitResult::NotRun),
            Next::Done { skipped } => {
                slot.output_hash = settled.output_hash.clone();
                self.queue.complete(self.dag, unit_idx);
                let result = if skipped {
                    UnitResult::SelfSkipped { attempt }
                } else {
                    UnitResult::Succeeded { attempt }
                };
                (State::Done, result)
            }
            Next::NotRun => (State::Waiting, UnitResult::NotRun),
            Next::CutOff => (
                State::Waiting,
                UnitResult::CutOff {
                    attempt,
                    awaits_verdict: !idempotent,
                },
            ),
            Next::LastFailureStands => {
                let result = slot
                    .last_failure
                    .take()
                    .map_or_else(failure, |result| *result);
                (State::Failed, result)
            }
            Next::FailedWaiting => (State::Waiting, failure()),
            Next::Retry { delay } => {
                self.retries.schedule(unit_idx, self.now + delay);
                slot.last_failure = Some(Box::new(failure()));
                slot.state = State::RetryWait;
                return Some(delay);
            }
            Next::Failed => {
                self.failed_any = true;
                (State::Failed, failure())
            }
        };
        let slot = &mut self.units[unit_idx];
        slot.state = state;
        slot.result = Some(result);
        if matches!(
            next,
            Next::LeftInFlight | Next::Done { .. } | Next::FailedWaiting
        ) {
            slot.last_failure = None;
        }
        None
    }

    /// Record every unit downstream of a failed unit as skipped.
    pub(super) fn skip_downstream(&mut self, failed_idx: usize) {
        let upstream = &self.pipeline.units[failed_idx].name;
        for unit_idx in self.dag.downstream(failed_idx) {
            if !self.in_scope[unit_idx] || self.units[unit_idx].state != State::Waiting {
                continue;
            }
            let slot = &mut self.units[unit_idx];
            slot.state = State::Skipped;
            slot.result = Some(UnitResult::SkippedUpstream {
                upstream: upstream.clone(),
            });
            let skipped = UnitSkipped {
                unit: self.pipeline.units[unit_idx].name.clone(),
                reason: SkipReason::UpstreamFailed {
                    upstream: upstream.clone(),
                },
            };
            let notice = HeldNotice::Skipped {
                unit_idx,
                upstream: upstream.clone(),
            };
            self.batch.push_skipped(skipped, notice);
        }
    }

    /// Fail-fast: start nothing new; units waiting for a retry fail for good.
    fn fail_fast(&mut self) {
        self.stop_starting = true;
        self.halt.store(true, Ordering::SeqCst);
        self.retries.clear();
        self.drop_pending_starts();
        // Units whose last attempt failed and that wait for a retry — in the retry queue, or
        // already released to the ready queue — will not get it: they failed.
        for unit_idx in 0..self.units.len() {
            let slot = &mut self.units[unit_idx];
            if !matches!(slot.state, State::RetryWait | State::Waiting) {
                continue;
            }
            if let Some(result) = slot.last_failure.take() {
                slot.state = State::Failed;
                slot.result = Some(*result);
                self.skip_downstream(unit_idx);
            }
        }
    }
}
