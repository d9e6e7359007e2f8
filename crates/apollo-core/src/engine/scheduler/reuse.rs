//! Reuse in the scheduler: a unit done without an attempt, either in the prior state of this
//! run (an earlier invocation) or from an earlier run's success with the same inputs
//! (`reuse: true`, its `unit_reused` record).

use super::Scheduler;
use crate::engine::api::UnitResult;
use crate::engine::observer::HeldNotice;
use crate::engine::outputs::when_false_hash;
use crate::engine::policy::{Decision, reused_output_hash};
use crate::engine::reuse::{ReuseCandidate, ReuseCheck, reused};
use crate::engine::units::State;
use crate::event::{InputComponent, SkipReason, UnitReused, UnitSkipped, UnitStarted};
use crate::input_manifest;

impl Scheduler<'_> {
    pub(super) fn reuse(&mut self, unit_idx: usize, marked_hash: Option<String>) {
        let unit = &self.pipeline.units[unit_idx];
        let slot = &mut self.units[unit_idx];
        slot.output_hash = Some(reused_output_hash(self.prior, unit, marked_hash));
        slot.state = State::Done;
        // As the end's report says of a unit done earlier in the run (`units::done_earlier`).
        slot.result = Some(crate::engine::units::done_earlier(self.prior, &unit.name));
        self.queue.complete(self.dag, unit_idx);
    }

    /// Record `unit_idx` as skipped because its `when:` was false at load (its `unit_skipped`
    /// goes in the batch, reason `when`) and let its dependents go on with a fixed output hash:
    /// like a unit that skipped itself, it satisfies them.
    pub(super) fn skip_when(&mut self, unit_idx: usize) {
        let unit = &self.pipeline.units[unit_idx];
        let condition = unit.skip_when.clone().unwrap_or_default();
        let skipped = UnitSkipped {
            unit: unit.name.clone(),
            reason: SkipReason::When {
                condition: condition.clone(),
            },
        };
        self.batch
            .push_skipped(skipped, HeldNotice::SkippedWhen { unit_idx });
        let slot = &mut self.units[unit_idx];
        slot.output_hash = Some(when_false_hash(unit));
        slot.state = State::Done;
        slot.result = Some(UnitResult::SkippedWhen { condition });
        self.queue.complete(self.dag, unit_idx);
    }

    /// Record `unit_idx`, whose attempt just ended skipped by its `when: {command}` (its
    /// `unit_finished` is in the batch), as skipped by apollo: `unit_skipped` with reason
    /// `when` and the condition's text follows that record, and its dependents go on.
    pub(super) fn skip_by_condition(&mut self, unit_idx: usize) {
        let unit = &self.pipeline.units[unit_idx];
        let condition = unit
            .when_command
            .as_ref()
            .map(crate::model::Command::display)
            .unwrap_or_default();
        let skipped = UnitSkipped {
            unit: unit.name.clone(),
            reason: SkipReason::When {
                condition: condition.clone(),
            },
        };
        self.batch
            .push_skipped(skipped, HeldNotice::SkippedWhen { unit_idx });
        // Its output hash (settled by `finish_attempt`) is the same as after a false expression.
        self.units[unit_idx].result = Some(UnitResult::SkippedWhen { condition });
    }

    /// Record `unit_idx` as reused from an earlier run's `candidate` (its `unit_reused` goes
    /// in the batch) and let its dependents go on with the recorded output hash. Its
    /// dependents' `unit_started` can only follow it in the journal.
    pub(super) fn reuse_from_run(
        &mut self,
        unit_idx: usize,
        candidate: ReuseCandidate,
        input_hash: String,
        inputs: Vec<InputComponent>,
    ) {
        let unit = &self.pipeline.units[unit_idx];
        // An input list too large for a record is left out (the input hash stays).
        let started = UnitStarted {
            unit: unit.name.clone(),
            attempt: 0,
            input_hash,
            inputs,
            inputs_manifest: None,
        };
        let inputs = if input_manifest::fits_in_record(&started) {
            started.inputs
        } else {
            Vec::new()
        };
        let record = UnitReused {
            unit: started.unit,
            from_run: candidate.run_id.clone(),
            from_attempt: candidate.attempt,
            input_hash: started.input_hash,
            inputs,
            output_hash: candidate.output_hash.clone(),
            restored: candidate.restored.clone(),
        };
        self.batch.push_reused(
            record,
            HeldNotice::Reused {
                unit_idx,
                from_run: candidate.run_id.clone(),
                from_attempt: candidate.attempt,
                restored: candidate.restored,
            },
        );
        let slot = &mut self.units[unit_idx];
        slot.output_hash = Some(candidate.output_hash);
        slot.state = State::Done;
        slot.result = Some(UnitResult::ReusedFromRun {
            run_id: candidate.run_id,
            attempt: candidate.attempt,
        });
        self.queue.complete(self.dag, unit_idx);
    }
}

/// The decision for a unit that had a reuse check: a first run becomes [`Decision::Reused`]
/// (with the candidate) or [`Decision::NotReused`]; any other decision stands.
pub(super) fn with_reuse(
    decision: Decision,
    reuse_check: Option<ReuseCheck>,
) -> (Decision, Option<ReuseCandidate>) {
    match (decision, reuse_check) {
        (Decision::FirstRun, Some(ReuseCheck::Reusable(candidate))) => {
            (reused(candidate.clone()), Some(candidate))
        }
        (Decision::FirstRun, Some(ReuseCheck::NotReused(why))) => (Decision::NotReused(why), None),
        (decision, _) => (decision, None),
    }
}
