//! A done unit's declared outputs, checked before the resume policy ([`super::policy`])
//! decides about it: are they still as recorded, and which output hash a unit a human marked
//! succeeded hands its dependents. The check reads files, so the engine runs it on its hashing
//! threads and the preflight and the planner on the calling thread, always within the unit's
//! timeout and the run's cancellation ([`unit_limits`]).

use std::path::Path;

use crate::cancel::CancelToken;
use crate::event::AttemptStatus;
use crate::hash;
use crate::model::Unit;
use crate::resume::{PriorState, PriorUnitState};

/// The output hash of a unit skipped because its `when:` was false (an expression at load,
/// or its `when: {command}` when it ran): fixed by the condition's text, so its dependents'
/// inputs change only when the condition does.
pub(super) fn when_false_hash(unit: &Unit) -> String {
    let condition = (unit.skip_when.clone())
        .or_else(|| {
            unit.when_command
                .as_ref()
                .map(crate::model::Command::display)
        })
        .unwrap_or_default();
    hash::sha256_hex(format!("when false: {condition}").as_bytes())
}

/// What the output check of a done unit found (see [`check_outputs`]).
#[derive(Debug, Default)]
pub(super) struct OutputCheck {
    /// What became of its declared outputs, as phrases ("output data/x.csv is missing",
    /// "output data/x.csv changed", "outputs cannot be read: … did not finish within the
    /// unit's timeout of 2s"); empty when they are as recorded.
    pub(super) changes: Vec<String>,
    /// For a unit a human marked succeeded (no recorded output hash): its declared outputs'
    /// hash as they are now, which its dependents are handed (see [`reused_output_hash`]).
    pub(super) marked_hash: Option<String>,
}

/// Whether `unit` needs an output check before it is decided: it is done in `prior` and
/// declares outputs. Cheap (no I/O, no allocation): the engine asks it of every unit it starts,
/// and only a unit that needs one goes to a hashing thread for it.
pub(super) fn needs_output_check(prior: &PriorState, unit: &Unit) -> bool {
    !unit.outputs.is_empty()
        && matches!(
            prior.unit(&unit.name).map(|prior_unit| &prior_unit.state),
            Some(PriorUnitState::Done { .. })
        )
}

/// What became of a done unit's declared outputs since it succeeded, hashed within `limits`
/// (the unit's timeout and the run's cancellation). Nothing to compare when it declares no
/// outputs (its stdout stood for them) or skipped itself. A unit a human marked succeeded has
/// no recorded hash: only missing outputs count, and its outputs are hashed for its dependents
/// ([`OutputCheck::marked_hash`]).
///
/// **Outputs that cannot be hashed in time count as changed.** A done unit whose outputs are
/// not hashed within its timeout (or cannot be read) is not known to be intact, so it is not
/// reused: an idempotent unit runs again, a non-idempotent one stops the run for a human's
/// verdict (as any change does under [`OnInputChange::Auto`]). For a marked unit, only a
/// timeout counts so (an output that cannot be read leaves the verdict's fixed hash, as
/// before). A cancellation is `Err`: the unit is then not decided at all.
///
/// Reads the files: the engine calls it on a hashing thread, never on its own thread.
pub(super) fn check_outputs(
    prior: &PriorState,
    unit: &Unit,
    base_dir: &Path,
    limits: &hash::Limits<'_>,
) -> Result<OutputCheck, hash::HashError> {
    let Some(PriorUnitState::Done {
        output_hash,
        status,
        ..
    }) = prior.unit(&unit.name).map(|prior_unit| &prior_unit.state)
    else {
        return Ok(OutputCheck::default());
    };
    if unit.outputs.is_empty() {
        return Ok(OutputCheck::default());
    }
    let mut outputs: Vec<&str> = unit.outputs.iter().map(String::as_str).collect();
    outputs.sort();
    outputs.dedup();
    let succeeded = *status == AttemptStatus::Succeeded;
    if !succeeded && output_hash.is_some() {
        // A self-skip recorded its stdout's hash: nothing of its outputs to compare.
        return Ok(OutputCheck::default());
    }
    if succeeded {
        let missing: Vec<String> = outputs
            .iter()
            .filter(|output| !hash::declared_output_exists(base_dir, output))
            .map(|output| format!("output {output} is missing"))
            .collect();
        if !missing.is_empty() {
            return Ok(OutputCheck {
                changes: missing,
                marked_hash: None,
            });
        }
    }
    let now = match hash::output_hash_within(unit, base_dir, limits) {
        // Cancelled, or not read on the engine thread: nothing is known yet.
        Err(error) if error.cancelled() || error.not_read_here() => return Err(error),
        now => now,
    };
    let changes = match (output_hash, now) {
        (Some(recorded), Ok(Some(now))) if &now == recorded => Vec::new(),
        (Some(_), Ok(_)) if outputs.len() == 1 => vec![format!("output {} changed", outputs[0])],
        (Some(_), Ok(_)) => vec![format!("outputs changed (one of {})", outputs.join(", "))],
        (Some(_), Err(error)) => vec![format!("outputs cannot be read: {error}")],
        (None, Ok(now)) => {
            return Ok(OutputCheck {
                changes: Vec::new(),
                marked_hash: now,
            });
        }
        (None, Err(error)) if error.timed_out() => {
            vec![format!("outputs cannot be read: {error}")]
        }
        (None, Err(_)) => Vec::new(),
    };
    Ok(OutputCheck {
        changes,
        marked_hash: None,
    })
}

/// The limits of checking `unit`'s outputs or hashing its inputs before it is decided: its
/// timeout, and `cancel`.
pub(super) fn unit_limits<'a>(unit: &Unit, cancel: &'a CancelToken) -> hash::Limits<'a> {
    hash::Limits::new(cancel, unit.timeout, unit.timeout)
}

/// The output hash a reused unit hands its dependents: the recorded one, or — for a human's
/// verdict, which measured nothing — its declared outputs' hash as [`check_outputs`] found it
/// (`marked_hash`), else a fixed value standing for the verdict. Reads nothing.
pub(super) fn reused_output_hash(
    prior: &PriorState,
    unit: &Unit,
    marked_hash: Option<String>,
) -> String {
    match prior.unit(&unit.name).map(|prior_unit| &prior_unit.state) {
        Some(PriorUnitState::Done {
            output_hash: Some(output_hash),
            ..
        }) => output_hash.clone(),
        Some(PriorUnitState::Done { attempt, .. }) => {
            marked_hash.unwrap_or_else(|| hash::sha256_hex(format!("marked {attempt}").as_bytes()))
        }
        _ => String::new(),
    }
}
