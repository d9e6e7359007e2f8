//! Session errors as CLI errors: the exit code's variant, and the advice that names a flag
//! or a command (which the library leaves out).

use apollo_core::EngineError;
use apollo_core::event::AttemptStatus;
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
        error @ RunnerError::ReproduceSideEffects { .. } => CliError::Usage {
            message: format!(
                "{error}; `--allow-side-effects` runs it all the same, or reproduce a unit upstream of it"
            ),
        },
        error @ RunnerError::Bisect { .. } => CliError::Usage {
            message: format!(
                "{error}
  = help: {}",
                if error.to_string().contains("`idempotent: false`") {
                    "nothing was run; `--allow-side-effects` runs it all the same"
                } else {
                    "nothing more was run; `apollo show RUN UNIT` lists what an attempt recorded"
                }
            ),
        },
        error @ RunnerError::MissingRun { .. } => CliError::CorruptRun {
            message: format!(
                "{error}; put it back to resume it, or start a new run with `apollo run --fresh` (what it did is unknown, so apollo does not start over on its own)"
            ),
        },
        RunnerError::UnidentifiedRun {
            run,
            pipeline,
            problem,
        } => CliError::CorruptRun {
            message: format!(
                "run {run} cannot be read, so whether it is the latest run of `{pipeline}` is unknown: {problem}; inspect it with `apollo verify {run}`, or start a new run with `apollo run --fresh`"
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
        RunnerError::IdentityMismatch {
            run,
            pipeline,
            recorded_config,
            config,
        } => CliError::Usage {
            message: format!(
                "run {run} of a pipeline named `{pipeline}` is unfinished, but it was started from {recorded_config}, not from {config}; to continue it with this config: `apollo resume {run}`; to start a new run of this config: `apollo run --fresh`"
            ),
        },
        RunnerError::RunInUse { .. } => CliError::RunInUse {
            message: format!(
                "{error}; its lock file was deleted or replaced: wait for it to finish (or stop it) before running again"
            ),
        },
        RunnerError::Snapshot(error) => CliError::Usage {
            message: format!("cannot snapshot the pipeline definition: {error}"),
        },
        RunnerError::Engine { run, source } => engine_error(source, run.as_str()),
        RunnerError::NotStarted { source } => engine_error(source, "(new)"),
        RunnerError::Plan { run, source } => {
            engine_error(source, run.as_ref().map_or("(new)", |run| run.as_str()))
        }
        RunnerError::ParamsChanged { .. } => CliError::Usage {
            message: format!(
                "{error}; a resume keeps the params its run started with: give the same values (or none, to take the recorded ones), or start a new run with `apollo run --fresh`"
            ),
        },
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
                "unit `{unit}` of run {run} {previous} (attempt {attempt}): `apollo mark` is for an attempt that was cut off mid-run (and `--rerun` for a unit that succeeded); to override a recorded outcome anyway, add --force"
            ),
        },
        other => CliError::Usage {
            message: other.to_string(),
        },
    }
}

fn engine_error(error: EngineError, run_id: &str) -> CliError {
    match error {
        EngineError::NeedsVerdict {
            unit,
            attempt,
            ended,
        } => CliError::NeedsVerdict {
            run: run_id.to_owned(),
            unit,
            attempt,
            how: match ended {
                None => "was running when apollo stopped",
                Some(AttemptStatus::TimedOut) => "was cut off by its timeout",
                Some(AttemptStatus::Failed) => {
                    "was cut off by a signal apollo did not send (killed from outside, out of memory, or its Slurm job ended without its result)"
                }
                Some(_) => "was interrupted when apollo was stopped (Ctrl-C or SIGTERM)",
            }
            .to_owned(),
            job: None,
        },
        EngineError::NeedsHuman {
            unit,
            attempt,
            reason,
            left_in_flight,
        } => CliError::NeedsHuman {
            run: run_id.to_owned(),
            unit,
            attempt,
            reason,
            left_in_flight,
        },
        EngineError::ChangedNeedsVerdict {
            unit,
            attempt,
            changes,
        } => CliError::ChangedNeedsVerdict {
            run: run_id.to_owned(),
            unit,
            attempt,
            changes,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Exit;

    #[test]
    fn an_unreadable_latest_run_is_exit_3_naming_the_run_and_fresh() {
        let run: apollo_store::RunId = "20261130T021507Z-3f9a".parse().unwrap();
        for error in [
            RunnerError::UnidentifiedRun {
                run: run.clone(),
                pipeline: "etl".to_owned(),
                problem: "journal corrupt".to_owned(),
            },
            RunnerError::UnreadableRun {
                run: run.clone(),
                pipeline: "etl".to_owned(),
                problem: "journal corrupt".to_owned(),
            },
        ] {
            let error = runner_error(error);
            assert_eq!(error.exit(), Exit::Corruption);
            let message = error.to_string();
            for part in [run.as_str(), "journal corrupt", "apollo run --fresh"] {
                assert!(message.contains(part), "{message}");
            }
        }
    }

    #[test]
    fn a_needed_verdict_keeps_its_run_for_the_advice() {
        let run: apollo_store::RunId = "20261130T021507Z-3f9a".parse().unwrap();
        let error = runner_error(RunnerError::Engine {
            run: run.clone(),
            source: EngineError::NeedsVerdict {
                unit: "deploy".to_owned(),
                attempt: 2,
                ended: Some(AttemptStatus::TimedOut),
            },
        });
        assert_eq!(error.exit(), Exit::VerdictNeeded);
        assert!(
            matches!(&error, CliError::NeedsVerdict { run: r, unit, attempt: 2, .. } if r == run.as_str() && unit == "deploy")
        );
        assert!(
            error.to_string().contains("cut off by its timeout"),
            "{error}"
        );
    }
}
