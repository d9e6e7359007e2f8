//! The resume policy of DESIGN §7 as pure functions: which units take part, whether a unit
//! cut off mid-attempt stops the run, and whether a unit runs again. The scheduler applies
//! them as units become ready; the dry-run planner ([`super::dry_run`]) applies the same
//! functions to say what a run would do, so the two cannot disagree.

use std::path::Path;

use super::api::EngineError;
use crate::dag::Dag;
use crate::event::InputComponent;
use crate::hash;
use crate::model::{Pipeline, Unit};
use crate::resume::{PriorState, PriorUnitState};

/// Why a unit runs, or why it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// It succeeded earlier in this run and its inputs are the same: not run again.
    Reuse {
        /// The attempt that succeeded.
        attempt: u32,
        /// Whether that success was a human's verdict.
        marked: bool,
    },
    /// It never ran in this run.
    FirstRun,
    /// It succeeded earlier but its inputs changed (the phrases name what).
    InputsChanged(Vec<String>),
    /// It was running when apollo stopped, and is idempotent.
    WasInFlight {
        /// The attempt that was cut off.
        attempt: u32,
    },
    /// Its latest attempt did not succeed (failed, timed out, interrupted, or skipped because
    /// an upstream failed).
    PreviouslyNotDone {
        /// The latest attempt.
        attempt: u32,
    },
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decision::Reuse {
                attempt,
                marked: false,
            } => {
                write!(
                    f,
                    "succeeded earlier in this run (attempt {attempt}), inputs unchanged: not run again"
                )
            }
            Decision::Reuse {
                attempt,
                marked: true,
            } => {
                write!(
                    f,
                    "marked succeeded by a human (attempt {attempt}), inputs unchanged: not run again"
                )
            }
            Decision::FirstRun => f.write_str("has not run yet in this run"),
            Decision::InputsChanged(changes) => write!(f, "runs again: {}", changes.join(", ")),
            Decision::WasInFlight { attempt } => write!(
                f,
                "was running (attempt {attempt}) when apollo stopped; idempotent → runs again"
            ),
            Decision::PreviouslyNotDone { attempt } => {
                write!(f, "attempt {attempt} did not succeed: runs again")
            }
        }
    }
}

/// Which units take part, by unit index: all, or those named by `only` plus their upstream.
pub(super) fn scope(
    pipeline: &Pipeline,
    dag: &Dag,
    only: Option<&[String]>,
) -> Result<Vec<bool>, EngineError> {
    let Some(only) = only else {
        return Ok(vec![true; pipeline.units.len()]);
    };
    let mut roots = Vec::with_capacity(only.len());
    for name in only {
        let unit_idx = pipeline
            .unit_index(name)
            .ok_or_else(|| EngineError::UnknownUnit { unit: name.clone() })?;
        roots.push(unit_idx);
    }
    let mut in_scope = vec![false; pipeline.units.len()];
    for unit_idx in dag.upstream_closure(&roots) {
        in_scope[unit_idx] = true;
    }
    Ok(in_scope)
}

/// DESIGN §7: a non-idempotent unit cut off mid-attempt stops the run before anything runs.
pub(super) fn check_in_flight(
    pipeline: &Pipeline,
    prior: &PriorState,
    in_scope: &[bool],
) -> Result<(), EngineError> {
    for (unit, _) in pipeline
        .units
        .iter()
        .zip(in_scope)
        .filter(|(_, in_scope)| **in_scope)
    {
        if let Some(prior_unit) = prior.unit(&unit.name)
            && let PriorUnitState::InFlight { attempt } = prior_unit.state
            && !unit.idempotent
        {
            return Err(EngineError::NeedsVerdict {
                unit: unit.name.clone(),
                attempt,
            });
        }
    }
    Ok(())
}

/// The resume rules of DESIGN §7 for one unit whose input hash is known.
pub(super) fn decide(
    prior: &PriorState,
    unit: &Unit,
    input_hash: &str,
    inputs: &[InputComponent],
) -> Decision {
    let Some(prior_unit) = prior.unit(&unit.name) else {
        return Decision::FirstRun;
    };
    match &prior_unit.state {
        PriorUnitState::Done {
            attempt,
            input_hash: old_hash,
            inputs: old_inputs,
            marked,
            ..
        } => {
            if old_hash == input_hash {
                Decision::Reuse {
                    attempt: *attempt,
                    marked: *marked,
                }
            } else {
                let mut changes = match prior.unknown_inputs(&unit.name) {
                    Some(why) => vec![format!("input hash changed ({why})")],
                    None => hash::describe_input_changes(old_inputs, inputs),
                };
                if changes.is_empty() {
                    changes.push("input hash changed".to_owned());
                }
                Decision::InputsChanged(changes)
            }
        }
        PriorUnitState::InFlight { attempt } => Decision::WasInFlight { attempt: *attempt },
        PriorUnitState::NotDone if prior_unit.last_attempt == 0 => Decision::FirstRun,
        PriorUnitState::NotDone => Decision::PreviouslyNotDone {
            attempt: prior_unit.last_attempt,
        },
    }
}

/// The output hash a reused unit hands its dependents: the recorded one, or — for a human's
/// verdict, which measured nothing — the declared outputs as they are now, else a fixed value
/// standing for the verdict.
pub(super) fn reused_output_hash(prior: &PriorState, unit: &Unit, base_dir: &Path) -> String {
    match prior.unit(&unit.name).map(|prior_unit| &prior_unit.state) {
        Some(PriorUnitState::Done {
            output_hash: Some(output_hash),
            ..
        }) => output_hash.clone(),
        Some(PriorUnitState::Done { attempt, .. }) => hash::output_hash(unit, base_dir)
            .ok()
            .flatten()
            .unwrap_or_else(|| hash::sha256_hex(format!("marked {attempt}").as_bytes())),
        _ => String::new(),
    }
}
