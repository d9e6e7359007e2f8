//! The crate's one error type.

use apollo_core::EngineError;
use apollo_store::{RunId, StoreError};

use crate::mark::PreviousOutcome;

/// Why a session (or a verdict) could not go ahead.
///
/// Messages state facts; what a user should type next (a flag, a command) is for the program
/// that embeds the session to add.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerError {
    /// The state directory or a journal failed: locked, corrupt, I/O.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The pipeline needs an executor the program did not give (a Slurm unit, and no Slurm
    /// executor): nothing ran, and the run stays incomplete.
    #[error("run {run} cannot start: {missing}")]
    NoExecutor {
        /// The run.
        run: RunId,
        /// Which executor, and who needs it.
        missing: apollo_core::MissingExecutor,
    },
    /// The run the pipeline last started has no folder any more (moved or deleted), so
    /// whether it must be resumed is unknown.
    #[error(
        "the latest run {run} of `{pipeline}` is missing: its folder {} was moved or deleted",
        folder.display()
    )]
    MissingRun {
        /// The run.
        run: RunId,
        /// The pipeline.
        pipeline: String,
        /// Where its folder was.
        folder: std::path::PathBuf,
    },
    /// The pipeline's latest run cannot be read, so whether it must be resumed is unknown.
    #[error("the latest run {run} of `{pipeline}` cannot be read: {problem}")]
    UnreadableRun {
        /// The run.
        run: RunId,
        /// The pipeline.
        pipeline: String,
        /// What is wrong with its journal.
        problem: String,
    },
    /// A run newer than every readable run of the pipeline cannot be read far enough to tell
    /// which pipeline it belongs to: it may be the pipeline's latest, incomplete run.
    #[error(
        "run {run} cannot be read, so whether it is the latest run of `{pipeline}` is unknown: {problem}"
    )]
    UnidentifiedRun {
        /// The run.
        run: RunId,
        /// The pipeline.
        pipeline: String,
        /// What is wrong with its journal.
        problem: String,
    },
    /// The run to resume was started by another pipeline.
    #[error("run {run} is a run of pipeline `{recorded}`, not `{pipeline}`")]
    PipelineMismatch {
        /// The run.
        run: RunId,
        /// The pipeline its `run_started` names.
        recorded: String,
        /// The pipeline the session was given.
        pipeline: String,
    },
    /// No run of the session's pipeline identity exists, but an unfinished run of a pipeline
    /// with the same name and another identity (another config file, or an `id:`) does: it is
    /// neither resumed nor started over without a human saying which.
    #[error(
        "run {run} of a pipeline named `{pipeline}` is unfinished, but it was started from {recorded_config}, not from {config}"
    )]
    IdentityMismatch {
        /// The unfinished run.
        run: RunId,
        /// The pipeline's name.
        pipeline: String,
        /// The config file its `run_started` names.
        recorded_config: String,
        /// The config file the session was given.
        config: String,
    },
    /// The run to resume is still being run by another apollo on this host (its lock file was
    /// deleted or replaced, so the lock did not stop this session).
    #[error("run {run} is still being run by apollo pid {pid} on {host}")]
    RunInUse {
        /// The run.
        run: RunId,
        /// The process id of the apollo running it.
        pid: u32,
        /// This host.
        host: String,
    },
    /// The pipeline definition could not be serialized for its snapshot (a path that is not
    /// UTF-8, which JSON cannot hold).
    #[error("cannot snapshot the pipeline definition")]
    Snapshot(#[source] std::io::Error),
    /// The engine refused to run, or stopped (a human verdict is needed, inputs changed, the
    /// journal could not be written).
    #[error("run {run} could not proceed")]
    Engine {
        /// The run.
        run: RunId,
        /// Why.
        #[source]
        source: EngineError,
    },
    /// The engine refused to start a new run (a unit named in `only` does not exist, the
    /// graph is broken); nothing was recorded.
    #[error("cannot start a run")]
    NotStarted {
        /// Why.
        #[source]
        source: EngineError,
    },
    /// The run to resume was started with other params: a resume keeps a run's params.
    #[error(
        "run {run} was started with other params: {}",
        list_differences(differences)
    )]
    ParamsChanged {
        /// The run.
        run: RunId,
        /// The params that differ, by name.
        differences: Vec<ParamDifference>,
        /// Every param the run recorded (to load the pipeline with them and open again).
        recorded: apollo_core::config::Params,
    },
    /// A dry run could not be planned.
    #[error("cannot plan the run")]
    Plan {
        /// The run that would be resumed, if any.
        run: Option<RunId>,
        /// Why.
        #[source]
        source: EngineError,
    },
    /// The unit to reproduce is `idempotent: false`, and running it again was not allowed
    /// ([`ReproduceRequest::allow_side_effects`](crate::ReproduceRequest::allow_side_effects)).
    #[error(
        "cannot reproduce unit `{unit}` of run {run}: it is `idempotent: false`, and running it again repeats what it does outside its files (a charge, a mail, a deploy)"
    )]
    ReproduceSideEffects {
        /// The original run.
        run: RunId,
        /// The unit.
        unit: String,
    },
    /// A recorded attempt cannot be reproduced (no such unit or attempt, no definition
    /// snapshot, an output outside the scratch directory…).
    #[error("cannot reproduce unit `{unit}` of run {run}: {problem}")]
    Reproduce {
        /// The original run.
        run: RunId,
        /// The unit.
        unit: String,
        /// What stands in the way.
        problem: String,
    },
    /// A bisect cannot start, or one of its steps cannot be built (an input whose blob is
    /// gone, a unit that must not run twice, no attempt of the unit in a run…).
    #[error("cannot bisect unit `{unit}` between runs {good} and {bad}: {problem}")]
    Bisect {
        /// The run where the unit's output was as wanted.
        good: RunId,
        /// The run where it was not.
        bad: RunId,
        /// The unit.
        unit: String,
        /// What stands in the way.
        problem: String,
    },
    /// A verdict names a unit of which the run has no record.
    #[error("run {run} has no record of unit `{unit}`: only a unit that started can be marked")]
    UnitNotStarted {
        /// The run.
        run: RunId,
        /// The unit named.
        unit: String,
    },
    /// A verdict is for an attempt that was cut off; this unit's last attempt has an outcome
    /// (and the request was not forced).
    #[error("unit `{unit}` of run {run} {previous} (attempt {attempt})")]
    OutcomeRecorded {
        /// The run.
        run: RunId,
        /// The unit.
        unit: String,
        /// Its last attempt.
        attempt: u32,
        /// What that attempt's records say.
        previous: PreviousOutcome,
    },
}

/// One param whose value for a resume differs from the run's recorded one.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamDifference {
    /// The param.
    pub name: String,
    /// Its value in the run's `run_started` (`None`: the run had no such param).
    pub recorded: Option<serde_json::Value>,
    /// Its value now (`None`: the pipeline no longer declares it).
    pub given: Option<serde_json::Value>,
}

impl std::fmt::Display for ParamDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |value: &Option<serde_json::Value>| match value {
            Some(value) => value.to_string(),
            None => "(none)".to_owned(),
        };
        write!(
            f,
            "`{}` was {}, now {}",
            self.name,
            show(&self.recorded),
            show(&self.given)
        )
    }
}

fn list_differences(differences: &[ParamDifference]) -> String {
    differences
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl RunnerError {
    /// The engine's error, when the engine (or its planner) refused or stopped.
    pub fn engine_error(&self) -> Option<&EngineError> {
        match self {
            RunnerError::Engine { source, .. }
            | RunnerError::NotStarted { source }
            | RunnerError::Plan { source, .. } => Some(source),
            _ => None,
        }
    }
}
