//! The in-flight rule of DESIGN §7 and §18: a non-idempotent unit cut off mid-attempt stops
//! the run for a human before anything runs — except a Slurm job apollo's death left running
//! after its submission was recorded, which its executor reattaches to.

use super::api::EngineError;
use crate::model::{ExecutorKind, Pipeline};
use crate::resume::{PriorState, PriorUnitState};

/// DESIGN §7: a non-idempotent unit cut off mid-attempt — apollo died while it ran, or it was
/// interrupted (Ctrl-C, SIGTERM), timed out, or killed by a signal apollo did not send after
/// its processes started — stops the run before anything runs, until a human records a
/// verdict. Except a Slurm attempt apollo's death left in flight after its submission was
/// recorded: its job may still run, and the executor reattaches to it (DESIGN §18). No `--on-input-change` mode
/// overrides this: the question is not whether its inputs changed but whether its side
/// effects happened.
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
        if unit.idempotent {
            continue;
        }
        let ended = match prior.unit(&unit.name).map(|prior_unit| &prior_unit.state) {
            // A job handed to a cluster scheduler outlives the apollo that submitted it:
            // reattaching to it (waiting for it, or recording how it ended) is not running it
            // twice. Its executor does that, and stops the run for a human itself when the job
            // is gone without a result after it started (DESIGN §18).
            Some(PriorUnitState::InFlight { attempt })
                if unit.executor == ExecutorKind::Slurm
                    && prior.was_submitted(&unit.name, *attempt) =>
            {
                continue;
            }
            Some(PriorUnitState::InFlight { attempt }) => (*attempt, None),
            Some(PriorUnitState::CutOff { attempt, status }) => (*attempt, Some(*status)),
            _ => continue,
        };
        return Err(EngineError::NeedsVerdict {
            unit: unit.name.clone(),
            attempt: ended.0,
            ended: ended.1,
        });
    }
    Ok(())
}
