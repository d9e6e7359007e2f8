//! What a reproduction starts from: the recorded attempt, the definition it ran with, and the
//! refusals that come before anything runs.

use std::path::{Path, PathBuf};

use apollo_core::Pipeline;
use apollo_core::hash;
use apollo_store::StateDir;

use super::{Recorded, ReproduceRequest, inside, read_recorded};
use crate::error::RunnerError;

/// The unit `request` would reproduce, as its attempt's definition snapshot recorded it, and
/// the project it ran in: for a caller that must prepare something before the unit runs (the
/// `apollo` binary reads the secrets it receives, from their recorded sources). Refuses what
/// [`reproduce`] refuses, before anything runs.
///
/// # Errors
///
/// As [`reproduce`]'s, before the run.
pub fn reproduced_unit(
    request: &ReproduceRequest,
) -> Result<(apollo_core::Unit, PathBuf), RunnerError> {
    let prepared = prepare(request)?;
    Ok((prepared.unit, prepared.project))
}

/// A refusal to reproduce `request`'s attempt, for `problem`.
pub(crate) fn refused(request: &ReproduceRequest, problem: String) -> RunnerError {
    RunnerError::Reproduce {
        run: request.run.clone(),
        unit: request.unit.clone(),
        problem,
    }
}

/// What a reproduction starts from: the recorded attempt, its definition, and the checks
/// that it may run.
pub(crate) struct Prepared {
    pub(crate) state: StateDir,
    pub(crate) recorded: Recorded,
    pub(crate) attempt: u32,
    pub(crate) definition: Pipeline,
    pub(crate) unit: apollo_core::Unit,
    pub(crate) project: PathBuf,
    /// The unit's workdir relative to the project.
    pub(crate) workdir: PathBuf,
}

/// Reads the recorded attempt and its definition, and refuses what must not run.
pub(crate) fn prepare(request: &ReproduceRequest) -> Result<Prepared, RunnerError> {
    let refuse = |problem: String| refused(request, problem);
    let state = StateDir::open_existing(&request.state_dir)?;
    let original_dir = state.run_dir(&request.run)?;
    let recorded = read_recorded(original_dir.path(), &request.unit)?;
    let attempt = match request.attempt {
        Some(attempt) => attempt,
        None => *(recorded.definition_of_attempt.keys().next_back())
            .ok_or_else(|| refuse("the run has no attempt of it".to_owned()))?,
    };
    let definition_hash = recorded
        .definition_of_attempt
        .get(&attempt)
        .ok_or_else(|| refuse(format!("the run has no attempt {attempt} of it")))?;
    let snapshot = state
        .read_blob(definition_hash)
        .map_err(|error| refuse(format!("its definition snapshot cannot be read: {error}")))?;
    let definition: Pipeline = serde_json::from_slice(&snapshot)
        .map_err(|error| refuse(format!("its definition snapshot does not decode: {error}")))?;
    let unit = (definition.units.iter())
        .find(|unit| unit.name == request.unit)
        .cloned()
        .ok_or_else(|| refuse("the run's definition snapshot has no such unit".to_owned()))?;
    let project = definition.base_dir.clone();
    // A unit that must not run twice (a charge, a mail, a deploy) is not run again unless
    // asked: a scratch directory holds its files, not what it does to the world (issue 36:
    // reproduce re-ran an `idempotent: false` unit without a word).
    if !unit.idempotent && !request.allow_side_effects {
        return Err(RunnerError::ReproduceSideEffects {
            run: request.run.clone(),
            unit: request.unit.clone(),
        });
    }

    // Everything the unit writes must land in the scratch directory.
    let workdir = inside(&project, &unit.workdir).ok_or_else(|| {
        refuse(format!(
            "its workdir {} is outside the project {}: it would run outside the scratch directory",
            unit.workdir.display(),
            project.display()
        ))
    })?;
    for output in &unit.outputs {
        if inside(&project, &project.join(output)).is_none() {
            return Err(refuse(format!(
                "its output `{output}` is outside the project: reproducing it would write there"
            )));
        }
    }
    // The recorded manifest names folders to create and files to read in the scratch
    // directory: a damaged or altered record must not name them elsewhere.
    // A genuine record names an output inside the project relative to it; an absolute one,
    // even of the project's own file, would make `scratch.join` name the original.
    for output in recorded.outputs.get(&attempt).into_iter().flatten() {
        if Path::new(&output.path).is_absolute()
            || !hash::declares_output(&unit, &project, &output.path)
        {
            return Err(refuse(format!(
                "the run recorded `{}` as an output of attempt {attempt}, which is not among \
                 its declared outputs: the record was damaged or altered, and nothing was run",
                output.path
            )));
        }
    }

    Ok(Prepared {
        state,
        recorded,
        attempt,
        definition,
        unit,
        project,
        workdir,
    })
}
