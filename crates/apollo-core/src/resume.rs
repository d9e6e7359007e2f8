//! What an earlier apollo process already did in a run: the state the engine resumes from.
//!
//! Built by folding the run's journal events in order ([`PriorState::from_events`]); the rules
//! of DESIGN §7 are then applied per unit by the engine:
//!
//! * `succeeded` (or skipped itself, or marked succeeded by a human) and the input hash
//!   recomputed now is the same → not run again;
//! * succeeded but the input hash changed → run again (or stop, with `--on-input-change=fail`);
//! * started with no finish (apollo died mid-unit) → run again when `idempotent: true`; when
//!   `idempotent: false`, nothing runs until a human records a verdict (`apollo mark`);
//! * failed, skipped for an upstream failure, or never started → run.

use std::collections::HashMap;

use crate::event::{AttemptStatus, Event, InputComponent, InputManifestRef, Verdict};

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
    },
    /// An attempt started and never finished: apollo died while the unit ran.
    InFlight {
        /// That attempt.
        attempt: u32,
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
    started: HashMap<(String, u32), StartedInputs>,
    /// Done units whose recorded inputs are in an input manifest not (successfully) read
    /// yet: their `Done::inputs` is empty until [`PriorState::load_input_manifests`].
    manifest_inputs: HashMap<String, ManifestInputs>,
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
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::UnitStarted(started) => {
                self.started.insert(
                    (started.unit.clone(), started.attempt),
                    StartedInputs {
                        input_hash: started.input_hash.clone(),
                        inputs: started.inputs.clone(),
                        manifest: started.inputs_manifest.clone(),
                    },
                );
                let unit = self.unit_mut(&started.unit);
                unit.last_attempt = unit.last_attempt.max(started.attempt);
                unit.state = PriorUnitState::InFlight {
                    attempt: started.attempt,
                };
            }
            Event::UnitFinished(finished) => {
                let recorded = self
                    .started
                    .get(&(finished.unit.clone(), finished.attempt))
                    .cloned();
                self.note_manifest(
                    &finished.unit,
                    recorded.as_ref(),
                    finished.status.satisfies_dependents(),
                );
                let unit = self.unit_mut(&finished.unit);
                unit.last_attempt = unit.last_attempt.max(finished.attempt);
                unit.state = match (finished.status.satisfies_dependents(), recorded) {
                    (true, Some(recorded)) => PriorUnitState::Done {
                        attempt: finished.attempt,
                        input_hash: recorded.input_hash,
                        inputs: recorded.inputs,
                        output_hash: finished.output_hash.clone(),
                        status: finished.status,
                        marked: false,
                    },
                    _ => PriorUnitState::NotDone,
                };
            }
            Event::UnitSkipped(skipped) => {
                self.manifest_inputs.remove(&skipped.unit);
                self.unit_mut(&skipped.unit).state = PriorUnitState::NotDone;
            }
            Event::UnitMarked(marked) => {
                let recorded = self
                    .started
                    .get(&(marked.unit.clone(), marked.attempt))
                    .cloned();
                self.note_manifest(
                    &marked.unit,
                    recorded.as_ref(),
                    marked.verdict == Verdict::Succeeded,
                );
                let unit = self.unit_mut(&marked.unit);
                unit.state = match (marked.verdict, recorded) {
                    (Verdict::Succeeded, Some(recorded)) => PriorUnitState::Done {
                        attempt: marked.attempt,
                        input_hash: recorded.input_hash,
                        inputs: recorded.inputs,
                        output_hash: None,
                        status: AttemptStatus::Succeeded,
                        marked: true,
                    },
                    _ => PriorUnitState::NotDone,
                };
            }
            // A submission changes nothing: the attempt stays in flight until it finishes.
            Event::RunStarted(_)
            | Event::RunResumed(_)
            | Event::UnitSubmitted(_)
            | Event::RunFinished(_) => {}
        }
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
mod tests {
    use super::*;
    use crate::event::{UnitFinished, UnitMarked, UnitStarted};

    fn started(unit: &str, attempt: u32) -> Event {
        Event::UnitStarted(UnitStarted {
            unit: unit.into(),
            attempt,
            input_hash: format!("in{attempt}"),
            inputs: vec![],
            inputs_manifest: None,
        })
    }

    fn finished(unit: &str, attempt: u32, status: AttemptStatus) -> Event {
        Event::UnitFinished(UnitFinished {
            unit: unit.into(),
            attempt,
            status,
            exit: None,
            failed_phase: None,
            timed_out: false,
            duration_ms: 1,
            queued_ms: 0,
            output_hash: Some("out".into()),
            stdout_bytes: 0,
            stderr_bytes: 0,
            user_cpu_ms: 0,
            sys_cpu_ms: 0,
            max_rss_kib: 0,
            leftovers_killed: 0,
            phases: vec![],
            error: None,
        })
    }

    #[test]
    fn latest_record_decides() {
        let events = vec![
            started("a", 1),
            finished("a", 1, AttemptStatus::Failed),
            started("a", 2),
            finished("a", 2, AttemptStatus::Succeeded),
            started("b", 1),
        ];
        let state = PriorState::from_events(&events);
        let a = state.unit("a").unwrap();
        assert_eq!(a.last_attempt, 2);
        assert!(matches!(&a.state, PriorUnitState::Done { input_hash, .. } if input_hash == "in2"));
        assert_eq!(
            state.unit("b").unwrap().state,
            PriorUnitState::InFlight { attempt: 1 }
        );
        assert_eq!(state.count_done(["a", "b", "c"]), 1);
    }

    #[test]
    fn a_human_verdict_settles_an_in_flight_unit() {
        let mut state = PriorState::from_events(&[started("b", 3)]);
        state.apply(&Event::UnitMarked(UnitMarked {
            unit: "b".into(),
            attempt: 3,
            verdict: Verdict::Succeeded,
            by: "ops".into(),
            note: None,
        }));
        assert!(matches!(
            state.unit("b").unwrap().state,
            PriorUnitState::Done { marked: true, .. }
        ));
    }
}
