//! Session errors as CLI errors: the exit code's variant, and the advice that names a flag
//! or a command (which the library leaves out).

use apollo_core::EngineError;
use apollo_runner::RunnerError;

use crate::error::CliError;

/// `error` with the CLI's advice.
pub(crate) fn runner_error(error: RunnerError) -> CliError {
    match error {
        RunnerError::Store(error) => CliError::Store(error),
        RunnerError::UnreadableRun {
            run,
            pipeline,
            problem,
        } => CliError::CorruptRun {
            message: format!(
                "the latest run {run} of `{pipeline}` cannot be read: {problem}; inspect it with `apollo verify {run}`, or start a new run with `apollo run --fresh`"
            ),
        },
        RunnerError::PipelineMismatch {
            run,
            recorded,
            pipeline,
        } => CliError::Usage {
            message: format!(
                "run {run} is a run of pipeline `{recorded}`, not `{pipeline}`; pass its config with `--config`"
            ),
        },
        RunnerError::Snapshot(error) => CliError::Usage {
            message: format!("cannot snapshot the pipeline definition: {error}"),
        },
        RunnerError::Engine { run, source } => engine_error(source, run.as_str()),
        RunnerError::Plan { run, source } => {
            engine_error(source, run.as_ref().map_or("(new)", |run| run.as_str()))
        }
        RunnerError::UnitNotStarted { run, unit } => CliError::Usage {
            message: format!(
                "run {run} has no record of unit `{unit}`: only a unit that started can be marked (`apollo show {run} UNIT` shows a unit's attempts)"
            ),
        },
        RunnerError::OutcomeRecorded {
            run,
            unit,
            attempt,
            previous,
        } => CliError::Usage {
            message: format!(
                "unit `{unit}` of run {run} {previous} (attempt {attempt}): `apollo mark` is for an attempt that was cut off mid-run; to override a recorded outcome anyway, add --force"
            ),
        },
        other => CliError::Usage {
            message: other.to_string(),
        },
    }
}

fn engine_error(error: EngineError, run_id: &str) -> CliError {
    match error {
        EngineError::NeedsVerdict { unit, attempt } => CliError::NeedsVerdict {
            run: run_id.to_owned(),
            unit,
            attempt,
        },
        EngineError::InputsChanged { unit, changes } => CliError::InputsChanged {
            run: run_id.to_owned(),
            unit,
            changes,
        },
        EngineError::Journal(error) => CliError::Journal(error),
        other => CliError::Usage {
            message: other.to_string(),
        },
    }
}
