//! What an earlier apollo process already did in a run: the state the engine resumes from.
//!
//! Built by folding the run's journal events in order ([`PriorState::from_events`]); the rules
//! of DESIGN §7 are then applied per unit by the engine:
//!
//! * `succeeded` (or skipped itself, or marked succeeded by a human), the input hash
//!   recomputed now is the same, and its declared outputs are still there with the recorded
//!   hashes → not run again;
//! * succeeded but the input hash changed, or a declared output is missing or changed → run
//!   again when idempotent; an `idempotent: false` unit stops the run for a human
//!   (`OnInputChange::Auto`, the default) unless a `rerun` verdict allowed it; `Rerun` and
//!   `Fail` rerun or stop for every unit;
//! * cut off mid-attempt — started with no finish (apollo died mid-unit), or ended
//!   `interrupted` (Ctrl-C, SIGTERM), `timed_out`, or `failed` by a signal apollo did not
//!   send (killed from outside, a Slurm job gone without its result) → run again
//!   when `idempotent: true`; when `idempotent: false`, nothing runs until a human records a
//!   verdict (`apollo mark`): its side effects may be half done, however it was cut off;
//! * failed, skipped for an upstream failure, or never started → run.

use foldhash::{HashMap, HashSet};

use crate::event::{AttemptStatus, Event, InputComponent, InputManifestRef, Verdict};
use crate::unit_state::awaits_verdict;

/// What the journal says about one unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriorUnitState {
    /// The unit's work is done: it succeeded, skipped itself (exit 77), or a human marked it
    /// succeeded.
    Done {
        /// The attempt that did it.
        attempt: u32,
        /// Its input hash and components when it started.
        input_hash: String,
        /// The input components recorded then.
        inputs: Vec<InputComponent>,
        /// Its output hash (`None` when a human marked it: nothing was measured).
        output_hash: Option<String>,
        /// How: `Succeeded`/`Skipped` from an attempt; `Succeeded` for a human's mark.
        status: AttemptStatus,
        /// Whether the verdict came from `apollo mark`.
        marked: bool,
        /// Whether a human allowed it to run again (`apollo mark --rerun`) although it is not
        /// idempotent, should its inputs or outputs have changed. Used up by its next attempt.
        rerun_allowed: bool,
    },
    /// An attempt started and never finished: apollo died while the unit ran.
    InFlight {
        /// That attempt.
        attempt: u32,
    },
    /// An attempt was cut off after its processes started: it ended `interrupted` (apollo was
    /// stopped by Ctrl-C or SIGTERM), `timed_out`, or `failed` by a signal apollo did not send
    /// ([`crate::event::cut_off_by_signal`]: killed from outside, out of memory, a Slurm job
    /// gone without its result). As half done as one in flight.
    CutOff {
        /// That attempt.
        attempt: u32,
        /// How it ended: [`AttemptStatus::Interrupted`], [`AttemptStatus::TimedOut`] or
        /// [`AttemptStatus::Failed`] (a signal apollo did not send).
        status: AttemptStatus,
    },
    /// It failed, was interrupted, or skipped for an upstream failure: it runs again.
    NotDone,
}

/// One unit's history in the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorUnit {
    /// The highest attempt number recorded (the next attempt is this + 1).
    pub last_attempt: u32,
    /// The state its latest records leave it in.
    pub state: PriorUnitState,
}

/// The state of every unit a run's journal mentions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriorState {
    units: HashMap<String, PriorUnit>,
    /// Per unit, what each of its attempts' `unit_started` recorded (looked up by `&str`: a
    /// resume of 10,000 units folds 20,000 records, and a key to build for each was a tenth of
    /// the fold).
    started: HashMap<String, Vec<(u32, StartedInputs)>>,
    /// Done units whose recorded inputs are in an input manifest not (successfully) read
    /// yet: their `Done::inputs` is empty until [`PriorState::load_input_manifests`].
    manifest_inputs: HashMap<String, ManifestInputs>,
    /// Attempts handed to an external scheduler: they may have run even with no phase
    /// recorded.
    submitted: HashSet<(String, u32)>,
    /// Units reused from an earlier run (`unit_reused`, format 1.3): the run and attempt that
    /// did their work. Such a unit is `Done` with attempt 0 (no attempt of this run did it).
    reused_from: HashMap<String, (String, u32)>,
    /// The run's `deadline:` as its `run_started` resolved it (RFC 3339, UTC).
    run_deadline: Option<String>,
    /// A `run_late` is recorded: the run's `on_late` hook has fired (format 1.10).
    late_recorded: bool,
}

/// What a `unit_started` recorded about its inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StartedInputs {
    input_hash: String,
    inputs: Vec<InputComponent>,
    manifest: Option<InputManifestRef>,
}

/// A done unit's inputs kept in a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ManifestInputs {
    reference: InputManifestRef,
    /// Why it could not be read, once a read failed.
    unreadable: Option<String>,
}

impl PriorState {
    /// Nothing happened yet: a fresh run.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Fold a run's events, in journal order.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut state = Self::default();
        for event in events {
            state.apply(event);
        }
        state
    }

    /// Apply one more event.
    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::UnitStarted(started) => {
                let recorded = StartedInputs {
                    input_hash: started.input_hash.clone(),
                    inputs: started.inputs.clone(),
                    manifest: started.inputs_manifest.clone(),
                };
                match self.started.get_mut(&started.unit) {
                    Some(attempts) => {
                        // A repeated attempt number (never written by apollo) keeps the last.
                        attempts.retain(|(attempt, _)| *attempt != started.attempt);
                        attempts.push((started.attempt, recorded));
                    }
                    None => {
                        self.started
                            .insert(started.unit.clone(), vec![(started.attempt, recorded)]);
                    }
                }
                let unit = self.unit_mut(&started.unit);
                unit.last_attempt = unit.last_attempt.max(started.attempt);
                unit.state = PriorUnitState::InFlight {
                    attempt: started.attempt,
                };
            }
            Event::UnitFinished(finished) => {
                let recorded = self
                    .started_inputs(&finished.unit, finished.attempt)
                    .cloned();
                self.note_manifest(
                    &finished.unit,
                    recorded.as_ref(),
                    finished.status.satisfies_dependents(),
                );
                // An attempt with no phase and no submission never started a process: whatever
                // stopped it, nothing of it can be half done.
                let ran = !finished.phases.is_empty()
                    || (!self.submitted.is_empty()
                        && self
                            .submitted
                            .contains(&(finished.unit.clone(), finished.attempt)));
                let unit = self.unit_mut(&finished.unit);
                unit.last_attempt = unit.last_attempt.max(finished.attempt);
                unit.state = match (finished.status, recorded) {
                    (status, Some(recorded)) if status.satisfies_dependents() => {
                        PriorUnitState::Done {
                            attempt: finished.attempt,
                            input_hash: recorded.input_hash,
                            inputs: recorded.inputs,
                            output_hash: finished.output_hash.clone(),
                            status,
                            marked: false,
                            rerun_allowed: false,
                        }
                    }
                    // Interrupted, timed out, or killed by a signal apollo did not send: as half
                    // done (the one rule, `unit_state::awaits_verdict`).
                    (status, _) if awaits_verdict(Some((status, finished.exit)), ran) => {
                        PriorUnitState::CutOff {
                            attempt: finished.attempt,
                            status,
                        }
                    }
                    _ => PriorUnitState::NotDone,
                };
            }
            Event::UnitSkipped(skipped) => {
                self.manifest_inputs.remove(&skipped.unit);
                self.unit_mut(&skipped.unit).state = PriorUnitState::NotDone;
            }
            Event::UnitMarked(marked) => {
                let recorded = self.started_inputs(&marked.unit, marked.attempt).cloned();
                // A `rerun` verdict on the done attempt keeps the unit done (below), and with
                // it the manifest of its recorded inputs.
                let stays_done = marked.verdict == Verdict::Rerun
                    && matches!(
                        self.units.get(&marked.unit).map(|unit| &unit.state),
                        Some(PriorUnitState::Done { attempt, .. }) if *attempt == marked.attempt
                    );
                if !stays_done {
                    self.note_manifest(
                        &marked.unit,
                        recorded.as_ref(),
                        marked.verdict == Verdict::Succeeded,
                    );
                }
                let unit = self.unit_mut(&marked.unit);
                unit.state = match (marked.verdict, recorded, &mut unit.state) {
                    // Allowing a rerun of a done unit keeps it done (nothing to redo if nothing
                    // changed) and lets it run again if something did.
                    (
                        Verdict::Rerun,
                        _,
                        PriorUnitState::Done {
                            attempt,
                            rerun_allowed,
                            ..
                        },
                    ) if *attempt == marked.attempt => {
                        *rerun_allowed = true;
                        return;
                    }
                    (Verdict::Succeeded, Some(recorded), _) => PriorUnitState::Done {
                        attempt: marked.attempt,
                        input_hash: recorded.input_hash,
                        inputs: recorded.inputs,
                        output_hash: None,
                        status: AttemptStatus::Succeeded,
                        marked: true,
                        rerun_allowed: false,
                    },
                    _ => PriorUnitState::NotDone,
                };
            }
            // A submission changes nothing: the attempt stays in flight until it finishes.
            Event::UnitSubmitted(submitted) => {
                self.submitted
                    .insert((submitted.unit.clone(), submitted.attempt));
                // A job reattached to ran under the inputs of the attempt that submitted it:
                // its outcome is recorded under those (issue 36), whatever was hashed when
                // this attempt started.
                if let Some(from) = submitted.reattached_from
                    && let Some(earlier) = self.started_inputs(&submitted.unit, from).cloned()
                    && let Some(attempts) = self.started.get_mut(&submitted.unit)
                    && let Some((_, recorded)) = attempts
                        .iter_mut()
                        .find(|(attempt, _)| *attempt == submitted.attempt)
                {
                    *recorded = earlier;
                }
            }
            // Reused from an earlier run: done, with no attempt of this run.
            Event::UnitReused(reused) => {
                self.manifest_inputs.remove(&reused.unit);
                self.reused_from.insert(
                    reused.unit.clone(),
                    (reused.from_run.clone(), reused.from_attempt),
                );
                self.unit_mut(&reused.unit).state = PriorUnitState::Done {
                    attempt: 0,
                    input_hash: reused.input_hash.clone(),
                    inputs: reused.inputs.clone(),
                    output_hash: Some(reused.output_hash.clone()),
                    status: AttemptStatus::Succeeded,
                    marked: false,
                    rerun_allowed: false,
                };
                return;
            }
            // Every unit of the run will be mentioned: room for them at once.
            Event::RunStarted(run_started) => {
                self.units.reserve(run_started.units.len());
                self.started.reserve(run_started.units.len());
                self.run_deadline =
                    (run_started.deadlines.as_ref()).and_then(|deadlines| deadlines.run.clone());
            }
            Event::RunResumed(_)
            | Event::RunFinished(_)
            | Event::UnitFiles(_)
            | Event::RunReproduces(_)
            | Event::HookFinished(_)
            | Event::ReproductionCompared(_) => {}
            Event::RunLate(_) => self.late_recorded = true,
        }
        // Any other record about the unit ends what a reuse said about it.
        if let Some(unit) = event.unit()
            && !self.reused_from.is_empty()
        {
            self.reused_from.remove(unit);
        }
    }

    /// The run's deadline as its `run_started` resolved it (RFC 3339, UTC; read it with
    /// [`crate::deadline::from_journal`]), when it set one.
    pub fn run_deadline(&self) -> Option<&str> {
        self.run_deadline.as_deref()
    }

    /// Whether the run recorded `run_late` (its `on_late` hook fired; it fires once per run).
    pub fn late_recorded(&self) -> bool {
        self.late_recorded
    }

    /// Whether `unit`'s attempt `attempt` was handed to an external scheduler (a
    /// `unit_submitted` record): its job may outlive the apollo that submitted it.
    pub fn was_submitted(&self, unit: &str, attempt: u32) -> bool {
        !self.submitted.is_empty() && self.submitted.contains(&(unit.to_owned(), attempt))
    }

    /// The earlier run and attempt a unit done in this run was reused from, when its latest
    /// record is a `unit_reused`.
    pub fn reused_from(&self, unit: &str) -> Option<(&str, u32)> {
        self.reused_from
            .get(unit)
            .map(|(run, attempt)| (run.as_str(), *attempt))
    }

    /// Keep track of whether `unit`, now done (`done`) by the attempt that recorded
    /// `recorded`, has its inputs in a manifest.
    fn note_manifest(&mut self, unit: &str, recorded: Option<&StartedInputs>, done: bool) {
        match recorded.and_then(|recorded| recorded.manifest.as_ref()) {
            Some(reference) if done => {
                self.manifest_inputs.insert(
                    unit.to_owned(),
                    ManifestInputs {
                        reference: reference.clone(),
                        unreadable: None,
                    },
                );
            }
            _ => {
                self.manifest_inputs.remove(unit);
            }
        }
    }

    /// Read the input manifests of done units (their recorded inputs, kept outside the
    /// journal because they were too large for a record) with `load`, which reads a manifest
    /// of this run or says why it cannot. A manifest that cannot be read leaves the unit's
    /// recorded inputs unknown: a change of its input hash is then explained by that
    /// ([`PriorState::unknown_inputs`]) rather than component by component.
    pub fn load_input_manifests(
        &mut self,
        mut load: impl FnMut(&InputManifestRef) -> Result<Vec<InputComponent>, String>,
    ) {
        let names: Vec<String> = (self.manifest_inputs.iter())
            .filter(|(_, manifest)| manifest.unreadable.is_none())
            .map(|(name, _)| name.clone())
            .collect();
        for name in names {
            let Some(manifest) = self.manifest_inputs.get_mut(&name) else {
                continue;
            };
            match load(&manifest.reference) {
                Ok(inputs) => {
                    self.manifest_inputs.remove(&name);
                    if let Some(PriorUnit {
                        state: PriorUnitState::Done { inputs: done, .. },
                        ..
                    }) = self.units.get_mut(&name)
                    {
                        *done = inputs;
                    }
                }
                Err(error) => manifest.unreadable = Some(error),
            }
        }
    }

    /// Why a done unit's recorded input components are not known, when they are in an input
    /// manifest that was not read or could not be.
    pub fn unknown_inputs(&self, unit: &str) -> Option<String> {
        let manifest = self.manifest_inputs.get(unit)?;
        Some(match &manifest.unreadable {
            Some(error) => format!(
                "its recorded input list ({} components) cannot be read: {error}",
                manifest.reference.count
            ),
            None => format!(
                "its recorded input list ({} components, input manifest {}) was not read",
                manifest.reference.count, manifest.reference.sha256
            ),
        })
    }

    /// What the `unit_started` of `unit`'s `attempt` recorded.
    fn started_inputs(&self, unit: &str, attempt: u32) -> Option<&StartedInputs> {
        let attempts = self.started.get(unit)?;
        attempts
            .iter()
            .find(|(number, _)| *number == attempt)
            .map(|(_, recorded)| recorded)
    }

    fn unit_mut(&mut self, name: &str) -> &mut PriorUnit {
        self.units.entry(name.to_owned()).or_insert(PriorUnit {
            last_attempt: 0,
            state: PriorUnitState::NotDone,
        })
    }

    /// The unit's history, if the journal mentions it.
    pub fn unit(&self, name: &str) -> Option<&PriorUnit> {
        self.units.get(name)
    }

    /// How many of `names` are done.
    pub fn count_done<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> usize {
        names
            .into_iter()
            .filter(|name| {
                matches!(
                    self.unit(name),
                    Some(PriorUnit {
                        state: PriorUnitState::Done { .. },
                        ..
                    })
                )
            })
            .count()
    }

    /// Whether nothing was recorded about any unit.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }
}

#[cfg(test)]
mod tests;
