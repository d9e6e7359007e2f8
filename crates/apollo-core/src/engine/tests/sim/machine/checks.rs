//! The journal's checks, a crash and the resume after it, and the end's checks.
//!
//! A crash loses everything in memory and what was not durable: the outstanding append is
//! durable or lost (a crash between its sync and its return, or before the sync), records
//! appended unsynced survive as a random prefix (the journal drops a torn tail). The durable
//! journal is folded into the real [`PriorState`]; the real [`check_in_flight`] says whether
//! the run may go on — it must stop for a human exactly when a non-idempotent unit is left
//! half done (its last record a start, or an end that cut it off after its process started),
//! and then name it; a new machine resumes from that journal alone.

use super::{MachineSim, Process, Worker};
use crate::engine::EngineError;
use crate::engine::api::{RunReport, UnitResult};
use crate::engine::policy::check_in_flight;
use crate::event::{AttemptStatus, Event, ExitStatus};
use crate::resume::PriorState;

impl MachineSim {
    /// Every `unit_started` in `events` comes after the success (or reuse) of each of its
    /// dependencies, in what was appended before or earlier in `events`.
    pub(super) fn check_append(&self, events: &[Event]) -> Result<(), String> {
        let before = self.durable.iter().chain(&self.unsynced);
        let mut done: Vec<bool> = vec![false; self.pipeline.units.len()];
        let index = |name: &str| {
            self.pipeline
                .units
                .iter()
                .position(|unit| unit.name == name)
        };
        for event in before.chain(events) {
            match event {
                Event::UnitFinished(finished) if finished.status.satisfies_dependents() => {
                    if let Some(unit) = index(&finished.unit) {
                        done[unit] = true;
                    }
                }
                Event::UnitReused(reused) => {
                    if let Some(unit) = index(&reused.unit) {
                        done[unit] = true;
                    }
                }
                Event::UnitStarted(started) => {
                    let Some(unit) = index(&started.unit) else {
                        return Err(format!("a start of an unknown unit {}", started.unit));
                    };
                    if let Some(&dep) = self.dag.deps(unit).iter().find(|&&dep| !done[dep]) {
                        return Err(format!(
                            "u{unit} attempt {} appended before u{dep} succeeded",
                            started.attempt
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The first non-idempotent unit (in the pipeline's order) the durable journal leaves
    /// half done: its last record a start, or an end that cut it off after its process started
    /// (interrupted, timed out, or killed by a signal apollo did not send).
    fn half_done(&self) -> Option<usize> {
        (0..self.pipeline.units.len()).find(|&unit_idx| {
            let unit = &self.pipeline.units[unit_idx];
            !unit.idempotent
                && (self.durable.iter().rev())
                    .find_map(|event| match event {
                        Event::UnitStarted(started) if started.unit == unit.name => Some(true),
                        Event::UnitFinished(finished) if finished.unit == unit.name => Some(
                            !finished.phases.is_empty()
                                && (matches!(
                                    finished.status,
                                    AttemptStatus::Interrupted | AttemptStatus::TimedOut
                                ) || (finished.status == AttemptStatus::Failed
                                    && matches!(finished.exit, Some(ExitStatus::Signal(_))))),
                        ),
                        _ => None,
                    })
                    .unwrap_or(false)
        })
    }

    /// What a resume from the durable journal would find, checked against the journal: the
    /// prior state, and whether it stops for a human. Asked after every durable append (a
    /// crash may come right after any of them) and at each crash.
    pub(super) fn check_resume(&self) -> Result<(PriorState, bool), String> {
        let prior = PriorState::from_events(&self.durable);
        let in_scope = vec![true; self.pipeline.units.len()];
        let found = check_in_flight(&self.pipeline, &prior, &in_scope);
        let half_done = self.half_done();
        match (&found, half_done) {
            (Ok(()), None) => Ok((prior, false)),
            (Err(EngineError::NeedsVerdict { unit, .. }), Some(expected))
                if *unit == self.pipeline.units[expected].name =>
            {
                Ok((prior, true))
            }
            _ => Err(format!(
                "a resume would say {found:?}, but the durable journal leaves {half_done:?} \
                 half done"
            )),
        }
    }

    /// apollo dies here: the prior state a new apollo resumes from.
    pub(super) fn crash(&mut self) -> Result<PriorState, String> {
        self.crashes += 1;
        if let Some((events, _)) = self.appending.take()
            && self.rng.chance(50)
        {
            // Synced, and apollo died before it heard so.
            self.check_append(&events)?;
            let unsynced = std::mem::take(&mut self.unsynced);
            self.durable.extend(unsynced);
            self.durable.extend(events);
        }
        let kept = self.rng.below(self.unsynced.len() + 1);
        let unsynced = std::mem::take(&mut self.unsynced);
        self.durable.extend(unsynced.into_iter().take(kept));
        let (prior, asks) = self.check_resume()?;
        self.jobs.clear();
        self.workers
            .iter_mut()
            .for_each(|worker| *worker = Worker::Idle);
        self.at_hashers.clear();
        self.channel.clear();
        self.cancelled = false;
        // A half-done non-idempotent unit: the resume stops before anything runs.
        self.asked_human = asks;
        Ok(prior)
    }

    /// The run ended (`report`: `None` when it stopped for a human): nothing is in flight, and
    /// unless it was cancelled or failed fast, every unit whose dependencies are done is done
    /// or failed.
    pub(super) fn check_end(
        &self,
        report: Option<&RunReport>,
        process: &Process,
    ) -> Result<(), String> {
        if !self.jobs.is_empty()
            || !self.channel.is_empty()
            || !self.at_hashers.is_empty()
            || self
                .workers
                .iter()
                .any(|worker| matches!(worker, Worker::Running(_)))
        {
            return Err("the run ended with work in flight".into());
        }
        let Some(report) = report else {
            return Ok(());
        };
        let results = Self::results(report);
        let failed = |result: &UnitResult| matches!(result, UnitResult::Failed { .. });
        if process.cancel.is_cancelled() || (!self.keep_going && results.iter().any(|r| failed(r)))
        {
            return Ok(());
        }
        let done = |result: &UnitResult| {
            matches!(
                result,
                UnitResult::Succeeded { .. }
                    | UnitResult::SelfSkipped { .. }
                    | UnitResult::Reused
                    | UnitResult::ReusedFromRun { .. }
            )
        };
        for (unit, result) in results.iter().enumerate() {
            let deps_done = self.dag.deps(unit).iter().all(|&dep| done(results[dep]));
            if deps_done && !done(result) && !failed(result) {
                return Err(format!(
                    "u{unit} ended {result:?} though its dependencies are done"
                ));
            }
        }
        Ok(())
    }
}
