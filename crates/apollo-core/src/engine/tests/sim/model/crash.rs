//! A simulated crash of apollo and the resume after it, through the real resume code: what
//! was appended and not yet durable is lost with everything in memory; the durable prefix,
//! turned into the journal's real records, is folded into a [`PriorState`], the real
//! [`check_in_flight`] says whether the run may go on, and the real resume policy
//! ([`decide`]) says which units run again. Checked here: the resume stops for a human
//! exactly when a non-idempotent unit has a durable start without an end, or an end that cut
//! it off after its processes started (and then for that unit); otherwise the run goes on
//! and (checked where attempts run) nothing whose success is durable runs again, while an
//! idempotent unit left in flight runs again (the run must end with it done or failed).

use super::{Pacer, Record, RetryQueue, Sim, Unit};
use crate::dag::ReadyQueue;
use crate::engine::EngineError;
use crate::engine::OnInputChange;
use crate::engine::ledger::Ledger;
use crate::engine::policy::{Decision, check_in_flight, decide};
use crate::event::{
    AttemptStatus, Event, ExitStatus, PhaseRecord, UnitFinished, UnitReused, UnitStarted,
};
use crate::model::Phase;
use crate::resume::{PriorState, PriorUnitState};

impl Sim {
    fn name(&self, unit: usize) -> &str {
        &self.pipeline.units[unit].name
    }

    /// The durable journal as the real records apollo would have written.
    fn events(&self) -> Vec<Event> {
        self.journal
            .iter()
            .map(|record| match *record {
                Record::Started { unit, attempt } => Event::UnitStarted(UnitStarted {
                    unit: self.name(unit).to_owned(),
                    attempt,
                    input_hash: format!("h{unit}"),
                    inputs: Vec::new(),
                    inputs_manifest: None,
                }),
                Record::Finished {
                    unit,
                    attempt,
                    ok,
                    status,
                    started,
                    signal,
                } => {
                    let exit = Some(match (signal, status) {
                        (true, _) => ExitStatus::Signal(9),
                        (false, AttemptStatus::Skipped) => ExitStatus::Code(77),
                        (false, _) => ExitStatus::Code(if ok { 0 } else { 1 }),
                    });
                    let timed_out = status == AttemptStatus::TimedOut;
                    let phases = if started {
                        vec![PhaseRecord {
                            phase: Phase::Execute,
                            offset_ms: 0,
                            duration_ms: 1,
                            exit,
                            timed_out,
                        }]
                    } else {
                        Vec::new()
                    };
                    Event::UnitFinished(UnitFinished {
                        unit: self.name(unit).to_owned(),
                        attempt,
                        status,
                        exit: if started { exit } else { None },
                        failed_phase: None,
                        timed_out,
                        duration_ms: 1,
                        queued_ms: 0,
                        output_hash: ok.then(|| format!("o{unit}")),
                        stdout_bytes: 0,
                        stderr_bytes: 0,
                        user_cpu_ms: 0,
                        sys_cpu_ms: 0,
                        max_rss_kib: 0,
                        leftovers_killed: 0,
                        phases,
                        error: None,
                    })
                }
                Record::Reused { unit } => Event::UnitReused(UnitReused {
                    unit: self.name(unit).to_owned(),
                    from_run: "earlier".into(),
                    from_attempt: 1,
                    input_hash: format!("h{unit}"),
                    inputs: Vec::new(),
                    output_hash: format!("o{unit}"),
                    restored: Vec::new(),
                }),
            })
            .collect()
    }

    /// The first non-idempotent unit (in the pipeline's order) the durable journal leaves
    /// half done: its last record a start, or an end that cut it off after it started
    /// (interrupted, timed out, or killed by a signal apollo did not send).
    fn half_done(&self) -> Option<usize> {
        (0..self.units.len()).find(|&unit| {
            !self.units[unit].kind.idempotent
                && self
                    .journal
                    .iter()
                    .rev()
                    .find_map(|record| match *record {
                        Record::Started { unit: u, .. } if u == unit => Some(true),
                        Record::Finished {
                            unit: u,
                            status,
                            started,
                            signal,
                            ..
                        } if u == unit => Some(
                            started
                                && (matches!(
                                    status,
                                    AttemptStatus::Interrupted | AttemptStatus::TimedOut
                                ) || (status == AttemptStatus::Failed && signal)),
                        ),
                        _ => None,
                    })
                    .unwrap_or(false)
        })
    }

    /// What a resume from the durable journal would find, checked against the journal:
    /// the prior state, and whether it stops for a human. Asked after every durable commit
    /// (a crash may come right after any of them) and at each crash.
    pub(super) fn resume_from_journal(&self) -> Result<(PriorState, bool), String> {
        let prior = PriorState::from_events(&self.events());
        let found = check_in_flight(&self.pipeline, &prior, &vec![true; self.units.len()]);
        let half_done = self.half_done();
        match (&found, half_done) {
            (Ok(()), None) => Ok((prior, false)),
            (Err(EngineError::NeedsVerdict { unit, .. }), Some(expected))
                if unit == self.name(expected) =>
            {
                Ok((prior, true))
            }
            _ => Err(format!(
                "a resume would say {found:?}, but the durable journal leaves {half_done:?} \
                 half done"
            )),
        }
    }

    /// apollo dies here; a new apollo resumes the run from the durable journal.
    pub(super) fn crash(&mut self) -> Result<(), String> {
        self.crashes += 1;
        let n_units = self.units.len();
        let (prior, asks) = self.resume_from_journal()?;
        // Everything in memory is gone: the new apollo knows only the journal.
        self.ledger = Ledger::new(n_units);
        self.pacer = Pacer::with_tuning(self.tuning);
        self.unsynced.clear();
        self.unsynced_since = None;
        self.queue = ReadyQueue::new(&self.dag, |_| false);
        self.batch.clear();
        self.batch_jobs.clear();
        self.urgent = false;
        self.committing = None;
        self.jobs.clear();
        self.workers.iter_mut().for_each(|worker| *worker = None);
        self.at_hashers.clear();
        self.channel.clear();
        self.retries = RetryQueue::default();
        self.cancelled = false;
        self.failed_any = false;
        for unit in 0..n_units {
            self.last_attempt[unit] = prior
                .unit(self.name(unit))
                .map_or(0, |prior| prior.last_attempt);
            self.attempts_here[unit] = 0;
            self.last_failure[unit] = false;
            self.stashed[unit] = false;
            self.state[unit] = Unit::Waiting;
        }
        self.prior = prior;
        // A half-done non-idempotent unit: the resume stops before anything runs.
        self.stopped = asks;
        self.asked_human = asks;
        Ok(())
    }

    /// The journal before this apollo holds the unit's success.
    pub(super) fn prior_done(&self, unit: usize) -> bool {
        matches!(
            self.prior.unit(self.name(unit)).map(|prior| &prior.state),
            Some(PriorUnitState::Done { .. })
        )
    }

    /// The resume policy decides the unit is done already (its inputs unchanged).
    pub(super) fn decided_done(&self, unit: usize) -> bool {
        if self.break_resume {
            return false;
        }
        let decision = decide(
            &self.prior,
            &self.pipeline.units[unit],
            &format!("h{unit}"),
            &[],
            &[],
            OnInputChange::Auto,
        );
        matches!(decision, Decision::Reuse { .. })
    }
}
