//! The per-unit table: where each unit of the pipeline stands in this engine run, by unit
//! index, and the run's final counts taken from it.

use std::ops::{Index, IndexMut};

use std::time::Duration;

use super::api::UnitResult;
use super::reuse::ReuseCheck;
use crate::event::AttemptStatus;
use crate::event::InputComponent;
use crate::event::{RunFinished, RunStatus};
use crate::model::Pipeline;
use crate::resume::{PriorState, PriorUnitState};

/// Where a unit is in the scheduler's hands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Not running: waiting for its dependencies, for its turn, or never to run (out of
    /// scope, stopped).
    Waiting,
    /// Its input files are being hashed, before its attempt is decided and committed.
    Hashing,
    /// An attempt is committed or running.
    Running,
    /// Its latest attempt failed; a retry is due later.
    RetryWait,
    /// Succeeded, skipped itself, or reused: its dependents may run.
    Done,
    /// Failed for good.
    Failed,
    /// Will not run: an upstream failed.
    Skipped,
}

/// One unit's row.
#[derive(Debug)]
pub(super) struct UnitSlot {
    pub(super) state: State,
    /// Its result, once it has one (`None` ends up as [`UnitResult::NotRun`]).
    pub(super) result: Option<UnitResult>,
    /// The output hash it hands its dependents, once done.
    pub(super) output_hash: Option<String>,
    /// The last attempt number used (continues across resumes of the run).
    pub(super) last_attempt: u32,
    /// Attempts made by this process (the retry budget is per process).
    pub(super) attempts_here: u32,
    /// Its latest attempt in this process failed and it waits for a retry: if the run stops
    /// after a failure, this is its result. Boxed: rare, and a result is 56 bytes, held
    /// for every unit of the run.
    pub(super) last_failure: Option<Box<UnitResult>>,
    /// When its latest attempt in this process began (for the predicted finish).
    pub(super) attempt_began: Option<std::time::Instant>,
    /// A reuse check found it must run, while no place among the running was free: its input
    /// components, that check and the time hashing took, used when it is started.
    #[allow(clippy::type_complexity)]
    pub(super) stashed: Option<
        Box<(
            Vec<InputComponent>,
            crate::hash::HashedFiles,
            ReuseCheck,
            Duration,
        )>,
    >,
}

impl UnitSlot {
    /// Number a new attempt (after the last one of the run) and count it against this
    /// process's retry budget.
    pub(super) fn begin_attempt(&mut self) -> u32 {
        self.last_attempt += 1;
        self.attempts_here += 1;
        self.state = State::Running;
        self.attempt_began = Some(std::time::Instant::now());
        self.last_attempt
    }

    /// Undo [`begin_attempt`](Self::begin_attempt) for an attempt whose `unit_started` was
    /// never written.
    pub(super) fn take_back_attempt(&mut self) {
        self.last_attempt -= 1;
        self.attempts_here -= 1;
        self.state = if self.last_failure.is_some() {
            State::RetryWait
        } else {
            State::Waiting
        };
    }
}

/// Every unit's row, in config order.
#[derive(Debug)]
pub(super) struct UnitTable {
    slots: Vec<UnitSlot>,
}

impl UnitTable {
    /// Every unit waiting, with attempt numbers continuing from `prior`.
    pub(super) fn new(pipeline: &Pipeline, prior: &PriorState) -> Self {
        let slots = pipeline
            .units
            .iter()
            .map(|unit| UnitSlot {
                state: State::Waiting,
                result: None,
                output_hash: None,
                last_attempt: prior
                    .unit(&unit.name)
                    .map_or(0, |prior_unit| prior_unit.last_attempt),
                attempts_here: 0,
                last_failure: None,
                attempt_began: None,
                stashed: None,
            })
            .collect();
        Self { slots }
    }

    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether every unit is done (succeeded, skipped itself, or reused).
    pub(super) fn all_done(&self) -> bool {
        self.slots.iter().all(|slot| slot.state == State::Done)
    }

    /// The `run_finished` record of a run that ended with `status`.
    pub(super) fn run_finished(&self, status: RunStatus) -> RunFinished {
        let count = |predicate: &dyn Fn(&UnitSlot) -> bool| {
            u32::try_from(self.slots.iter().filter(|slot| predicate(slot)).count())
                .unwrap_or(u32::MAX)
        };
        RunFinished {
            status,
            succeeded: count(&|slot| {
                matches!(
                    slot.result,
                    Some(UnitResult::Succeeded { .. } | UnitResult::Reused)
                )
            }),
            failed: count(&|slot| slot.state == State::Failed),
            skipped: count(&|slot| {
                matches!(
                    slot.result,
                    Some(
                        UnitResult::SelfSkipped { .. }
                            | UnitResult::SkippedWhen { .. }
                            | UnitResult::SkippedUpstream { .. }
                    )
                )
            }),
            reused: count(&|slot| matches!(slot.result, Some(UnitResult::ReusedFromRun { .. }))),
        }
    }

    /// Each unit's result, in config order; the table is emptied. Made in the table's own
    /// memory (`collect` reuses a `Vec`'s buffer for an `enumerate().map()` of its `into_iter`
    /// when the new items are no larger): 100,000 results are not 8 MB more at the run's end,
    /// and each slot's own memory (its output hash) is freed as its result is made.
    ///
    /// A unit this process never started whose last attempt in the run was cut off (apollo
    /// died or was stopped while it ran) is reported cut off, not "not run": it did start in
    /// this run, and the run model (`show`, `runs`, JUnit, replay) says `cut_off` of it. Issue
    /// 35, found by tests/e2e/agreement.rs: a resume after a kill that stopped fail-fast
    /// before restarting it summed the unit up as `not_started`.
    pub(super) fn take_results(
        &mut self,
        pipeline: &Pipeline,
        prior: &PriorState,
    ) -> Vec<(String, UnitResult)> {
        const _: () = assert!(
            size_of::<(String, UnitResult)>() <= size_of::<UnitSlot>()
                && align_of::<(String, UnitResult)>() == align_of::<UnitSlot>()
        );
        let name = |idx: usize| {
            (pipeline.units.get(idx)).map_or_else(String::new, |unit| unit.name.clone())
        };
        std::mem::take(&mut self.slots)
            .into_iter()
            .enumerate()
            .map(|(idx, slot)| {
                let unit = name(idx);
                let result = slot.result.unwrap_or_else(|| {
                    let state = prior.unit(&unit).map(|prior| &prior.state);
                    match state {
                        Some(
                            PriorUnitState::InFlight { attempt }
                            | PriorUnitState::CutOff {
                                attempt,
                                status: AttemptStatus::Interrupted,
                            },
                        ) if slot.attempts_here == 0 => UnitResult::CutOff {
                            attempt: *attempt,
                            // Such a unit of `idempotent: false` stops a resume before any
                            // unit runs; this one will simply run again.
                            awaits_verdict: false,
                        },
                        // Done earlier in the run and not run again here (the resume meant to,
                        // its inputs having changed, but stopped first): what the run holds of
                        // it is that success, as for a unit reused on resume.
                        Some(PriorUnitState::Done { .. }) if slot.attempts_here == 0 => {
                            done_earlier(prior, &unit)
                        }
                        _ => UnitResult::NotRun,
                    }
                });
                (unit, result)
            })
            .collect()
    }
}

impl Index<usize> for UnitTable {
    type Output = UnitSlot;

    fn index(&self, unit_idx: usize) -> &UnitSlot {
        &self.slots[unit_idx]
    }
}

impl IndexMut<usize> for UnitTable {
    fn index_mut(&mut self, unit_idx: usize) -> &mut UnitSlot {
        &mut self.slots[unit_idx]
    }
}

/// The result of `unit`, done earlier in the run and not run by this process: reused from
/// the run it was reused from, skipped by itself, or done earlier. The run's counts are one set
/// whichever process of the run ends it (issue 35: after a resume, units that had exited 77
/// were counted succeeded).
pub(super) fn done_earlier(prior: &PriorState, unit: &str) -> UnitResult {
    if let Some((run_id, attempt)) = prior.reused_from(unit) {
        return UnitResult::ReusedFromRun {
            run_id: run_id.to_owned(),
            attempt,
        };
    }
    match prior.unit(unit).map(|prior| &prior.state) {
        Some(PriorUnitState::Done {
            status: AttemptStatus::Skipped,
            attempt,
            ..
        }) => UnitResult::SelfSkipped { attempt: *attempt },
        _ => UnitResult::Reused,
    }
}
