//! The resume policy of DESIGN §7 and §17 as functions: which units take part, whether a unit
//! cut off mid-attempt stops the run, whether a done unit runs again, is reused, or stops the
//! run for a human (its inputs or declared outputs changed and it is not idempotent), and
//! whether a failed attempt may be retried. The scheduler applies them as units become ready;
//! the preflight and the dry-run planner ([`super::dry_run`]) apply the same functions to say
//! what a run would do, so they cannot disagree.
//!
//! [`decide`] is pure; what it needs from the file system — the input components and
//! [`check_outputs`] — is computed by the caller, where files are hashed: the engine on its
//! hashing threads, the preflight and the planner on the calling thread, always within the
//! unit's timeout and the run's cancellation ([`unit_limits`]).
//!
//! **A done unit's outputs that cannot be hashed in time count as changed.** They are not
//! known to be intact, so the unit is not reused: an idempotent unit runs again (its attempt
//! gets the full timeout: the check is not taken off it), a non-idempotent one stops the run
//! for a human's verdict ("outputs cannot be read: … did not finish within the unit's
//! timeout"). A cancellation leaves the unit undecided; the engine then never starts it.

use super::api::{EngineError, OnInputChange};
use crate::cancel::CancelToken;
use crate::dag::Dag;
use crate::event::{AttemptStatus, InputComponent};
use crate::hash;
use crate::model::{Pipeline, Unit};
use crate::resume::{PriorState, PriorUnitState};

pub(super) use super::in_flight::check_in_flight;
pub(super) use super::outputs::{
    OutputCheck, check_outputs, needs_output_check, reused_output_hash, unit_limits,
};

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
    /// It never ran in this run, and an earlier run's successful attempt with the same input
    /// hash stands for it, its declared outputs on disk as that attempt left them
    /// (`reuse: true`): not run, recorded `unit_reused`.
    Reused {
        /// The run whose attempt did the work.
        run_id: String,
        /// That attempt.
        attempt: u32,
        /// The declared outputs put back from the blob store to reuse it (relative to the
        /// project, sorted; empty when none was missing or changed) — in a plan, the ones
        /// that would be.
        restored: Vec<String>,
    },
    /// It never ran in this run and says `reuse: true`, but no earlier success can stand for
    /// it: it runs. The phrase says why ("input file data/raw.csv changed since run …
    /// attempt 1", "output out/x.csv differs from the recorded one", "no earlier success").
    NotReused(String),
    /// It succeeded earlier but its inputs, or its declared outputs, changed (the phrases
    /// name what: "env FOO added", "upstream fetch output changed", "output data/x.csv is
    /// missing"): it runs again.
    InputsChanged(Vec<String>),
    /// It succeeded earlier and its inputs or declared outputs changed, but it may not run
    /// again without a human: it is not idempotent (under [`OnInputChange::Auto`]), or
    /// [`OnInputChange::Fail`] stops for every unit. The run stops before it.
    ChangedNeedsVerdict {
        /// The attempt that succeeded.
        attempt: u32,
        /// What changed, as for [`Decision::InputsChanged`].
        changes: Vec<String>,
        /// Why it may not run: `true` — it is not idempotent; `false` — changes stop every
        /// unit ([`OnInputChange::Fail`]).
        not_idempotent: bool,
    },
    /// It was running when apollo stopped, and is idempotent — or runs on Slurm with its
    /// submission recorded, and its executor reattaches to the job.
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
            // Attempt 0: the unit was reused from an earlier run (`unit_reused`).
            Decision::Reuse {
                attempt: 0,
                marked: false,
            } => f.write_str("reused from an earlier run, inputs unchanged: not run again"),
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
            Decision::Reused {
                run_id,
                attempt,
                restored,
            } => {
                write!(
                    f,
                    "reused: inputs identical to run {run_id} attempt {attempt}"
                )?;
                if !restored.is_empty() {
                    write!(f, "; restored {}", restored.join(", "))?;
                }
                Ok(())
            }
            Decision::NotReused(why) => write!(f, "runs, not reused: {why}"),
            Decision::InputsChanged(changes) => write!(f, "runs again: {}", changes.join(", ")),
            Decision::ChangedNeedsVerdict {
                changes,
                not_idempotent: true,
                ..
            } => write!(
                f,
                "succeeded earlier, not idempotent, and {}: the run stops for a human's verdict",
                changes.join(", ")
            ),
            Decision::ChangedNeedsVerdict {
                changes,
                not_idempotent: false,
                ..
            } => write!(
                f,
                "succeeded earlier, and {}: the run stops (on input change: fail)",
                changes.join(", ")
            ),
            Decision::WasInFlight { attempt } => write!(
                f,
                "was running (attempt {attempt}) when apollo stopped → runs again (a cluster job still there is reattached to)"
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

impl Decision {
    /// Whether the unit runs (now or once its upstream ran).
    pub fn runs(&self) -> bool {
        !matches!(
            self,
            Decision::Reuse { .. } | Decision::Reused { .. } | Decision::ChangedNeedsVerdict { .. }
        )
    }

    /// Whether the decision stops the run for a human.
    pub fn stops_run(&self) -> bool {
        matches!(self, Decision::ChangedNeedsVerdict { .. })
    }

    /// The error a stopping decision ends the run with.
    pub(super) fn stop_error(&self, unit: &str) -> Option<EngineError> {
        match self {
            Decision::ChangedNeedsVerdict {
                attempt,
                changes,
                not_idempotent: true,
            } => Some(EngineError::ChangedNeedsVerdict {
                unit: unit.to_owned(),
                attempt: *attempt,
                changes: changes.clone(),
            }),
            Decision::ChangedNeedsVerdict { changes, .. } => Some(EngineError::InputsChanged {
                unit: unit.to_owned(),
                changes: changes.clone(),
            }),
            _ => None,
        }
    }
}

/// DESIGN §17: a done non-idempotent unit whose inputs or outputs changed, found before
/// anything runs. Only what can be known now is checked: the unit's own components (commands,
/// env, input files), its declared outputs, and the outputs its done dependencies recorded. A
/// change that comes from an upstream unit that runs in this session is found by the engine
/// when the unit becomes ready (and the run stops then). Under [`OnInputChange::Rerun`] there
/// is nothing to check.
///
/// It runs on the calling thread, before the engine starts, so it hashes within each unit's
/// [`unit_limits`]: a file that never ends takes at most the unit's timeout, and `cancel`
/// (SIGTERM, Ctrl-C) stops it at once — then nothing is decided here and the engine, seeing
/// the same cancellation, starts nothing.
pub(super) fn check_changed(
    pipeline: &Pipeline,
    dag: &Dag,
    prior: &PriorState,
    in_scope: &[bool],
    on_input_change: OnInputChange,
    cancel: &CancelToken,
) -> Result<(), EngineError> {
    if on_input_change == OnInputChange::Rerun {
        return Ok(());
    }
    for (unit_idx, unit) in pipeline.units.iter().enumerate() {
        if !in_scope[unit_idx] || unit.idempotent {
            continue;
        }
        if cancel.is_cancelled() {
            return Ok(());
        }
        if let Some(error) = known_change(pipeline, dag, prior, unit_idx, on_input_change, cancel)
            .and_then(|decision| decision.stop_error(&unit.name))
        {
            return Err(error);
        }
    }
    Ok(())
}

/// The decision for a done unit from what is known before anything runs: its own components,
/// its declared outputs, and the outputs its dependencies recorded. `None` when it is not done
/// or a dependency is not done (it runs first; the engine decides once its output is known),
/// and when `cancel` stopped the hashing. Files are hashed within each unit's [`unit_limits`].
pub(super) fn known_change(
    pipeline: &Pipeline,
    dag: &Dag,
    prior: &PriorState,
    unit_idx: usize,
    on_input_change: OnInputChange,
    cancel: &CancelToken,
) -> Option<Decision> {
    let unit = &pipeline.units[unit_idx];
    let is_done = |name: &str| {
        matches!(
            prior.unit(name).map(|prior_unit| &prior_unit.state),
            Some(PriorUnitState::Done { .. })
        )
    };
    if !is_done(&unit.name) {
        return None;
    }
    let mut upstream = Vec::with_capacity(dag.deps(unit_idx).len());
    for &dep_idx in dag.deps(unit_idx) {
        let dep = &pipeline.units[dep_idx];
        if !is_done(&dep.name) {
            return None;
        }
        // Only a human's verdict, which recorded no output hash, needs the outputs read.
        let recorded = matches!(
            prior.unit(&dep.name).map(|prior_unit| &prior_unit.state),
            Some(PriorUnitState::Done {
                output_hash: Some(_),
                ..
            })
        );
        let marked_hash = if recorded {
            None
        } else {
            check_outputs(prior, dep, &pipeline.base_dir, &unit_limits(dep, cancel))
                .ok()?
                .marked_hash
        };
        upstream.push((
            dep.name.as_str(),
            reused_output_hash(prior, dep, marked_hash),
        ));
    }
    let upstream: Vec<(&str, &str)> = upstream
        .iter()
        .map(|(name, hash)| (*name, hash.as_str()))
        .collect();
    // An input that cannot be read now is the engine's to report (a failed attempt).
    let limits = unit_limits(unit, cancel);
    let inputs =
        hash::input_components_within(unit, &pipeline.base_dir, &upstream, &limits).ok()?;
    let outputs = check_outputs(prior, unit, &pipeline.base_dir, &limits).ok()?;
    Some(decide(
        prior,
        unit,
        &hash::combine_components(&inputs),
        &inputs,
        &outputs.changes,
        on_input_change,
    ))
}

/// The resume rules of DESIGN §7 and §17 for one unit whose input hash is known:
/// `output_changes` are what [`check_outputs`] found.
pub(super) fn decide(
    prior: &PriorState,
    unit: &Unit,
    input_hash: &str,
    inputs: &[InputComponent],
    output_changes: &[String],
    on_input_change: OnInputChange,
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
            rerun_allowed,
            ..
        } => {
            if old_hash == input_hash && output_changes.is_empty() {
                return Decision::Reuse {
                    attempt: *attempt,
                    marked: *marked,
                };
            }
            let mut changes = if old_hash == input_hash {
                Vec::new()
            } else {
                match prior.unknown_inputs(&unit.name) {
                    Some(why) => vec![format!("input hash changed ({why})")],
                    None => {
                        let mut changes = hash::describe_input_changes(old_inputs, inputs);
                        hash::explain_quoting_changes(&mut changes, unit, old_inputs);
                        changes
                    }
                }
            };
            if changes.is_empty() && old_hash != input_hash {
                changes.push("input hash changed".to_owned());
            }
            changes.extend_from_slice(output_changes);
            let stops = match on_input_change {
                OnInputChange::Rerun => false,
                OnInputChange::Fail => true,
                OnInputChange::Auto => !unit.idempotent && !rerun_allowed,
            };
            if stops {
                Decision::ChangedNeedsVerdict {
                    attempt: *attempt,
                    changes,
                    not_idempotent: on_input_change == OnInputChange::Auto,
                }
            } else {
                Decision::InputsChanged(changes)
            }
        }
        PriorUnitState::InFlight { attempt } => Decision::WasInFlight { attempt: *attempt },
        PriorUnitState::CutOff { attempt, .. } => Decision::PreviouslyNotDone { attempt: *attempt },
        PriorUnitState::NotDone if prior_unit.last_attempt == 0 => Decision::FirstRun,
        PriorUnitState::NotDone => Decision::PreviouslyNotDone {
            attempt: prior_unit.last_attempt,
        },
    }
}

/// Whether a failed attempt of a unit (`idempotent` or not) that ended `status` may be retried within the run (its
/// `retries`). A timeout cuts a non-idempotent unit off half done, as a crash would: it is not
/// retried behind a human's back — it fails for good, and the next run asks for a verdict. A
/// non-zero exit is the unit's own verdict on itself, so its retries apply (`apollo check`
/// warns about `idempotent: false` with `retries`).
pub(super) fn may_retry(idempotent: bool, status: AttemptStatus) -> bool {
    idempotent || status != AttemptStatus::TimedOut
}
