//! Which run a session works on: a new one, the pipeline's latest incomplete one, or a named
//! one. Shared by [`RunSession::open`](crate::RunSession::open) and the dry-run planner so
//! both choose alike.

use apollo_core::Event;
use apollo_store::{JournalReader, ReadOptions, Record, RunId, RunState, StateDir};

use crate::error::RunnerError;

/// The run a session opens.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RunTarget {
    /// The pipeline's latest run if it is incomplete (no `run_finished`, or finished failed or
    /// interrupted), else a new run: what `apollo run` does.
    #[default]
    LatestIfIncomplete,
    /// Always a new run.
    Fresh,
    /// This run (`apollo resume RUN`); one that succeeded has nothing to resume.
    Named(RunId),
}

/// What the target resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Selection {
    /// Start a new run.
    New,
    /// Resume this run.
    Resume(RunId),
    /// The named run succeeded: nothing to resume.
    Succeeded(RunId),
}

/// Resolves `target` for `pipeline` in `state`.
pub(crate) fn select(
    state: &StateDir,
    target: &RunTarget,
    pipeline: &str,
) -> Result<Selection, RunnerError> {
    match target {
        RunTarget::Fresh => Ok(Selection::New),
        RunTarget::Named(run) => {
            let summary = state.run_summary(run)?;
            Ok(if summary.state == RunState::Succeeded {
                Selection::Succeeded(run.clone())
            } else {
                Selection::Resume(run.clone())
            })
        }
        RunTarget::LatestIfIncomplete => {
            let Some(run) = latest_run(state, pipeline)? else {
                return Ok(Selection::New);
            };
            let summary = state.run_summary(&run)?;
            match summary.state {
                RunState::Succeeded => Ok(Selection::New),
                RunState::Corrupt => Err(RunnerError::UnreadableRun {
                    run,
                    pipeline: pipeline.to_owned(),
                    problem: summary.problem.unwrap_or_default(),
                }),
                _ => Ok(Selection::Resume(run)),
            }
        }
    }
}

/// The newest run of `pipeline`, newest first by id. A newer run whose start cannot be read
/// is an error, not a run to skip: it may be this pipeline's incomplete run, and skipping it
/// would start over what it left half done. A run with no record at all (apollo died between
/// creating it and writing `run_started`) did nothing and is skipped.
fn latest_run(state: &StateDir, pipeline: &str) -> Result<Option<RunId>, RunnerError> {
    for run in state.run_ids()?.into_iter().rev() {
        let unidentified = |problem: String| RunnerError::UnidentifiedRun {
            run: run.clone(),
            pipeline: pipeline.to_owned(),
            problem,
        };
        let first = state
            .run_dir(&run)
            .and_then(|run_dir| JournalReader::open(run_dir.path(), ReadOptions::default()))
            .and_then(|mut reader| reader.next().transpose());
        match first {
            Ok(None) => {}
            Ok(Some(Record {
                event: Event::RunStarted(started),
                ..
            })) => {
                if started.pipeline == pipeline {
                    return Ok(Some(run));
                }
            }
            Ok(Some(record)) => {
                return Err(unidentified(format!(
                    "its first record (seq {}) is not `run_started`",
                    record.seq
                )));
            }
            Err(error) => return Err(unidentified(error.to_string())),
        }
    }
    Ok(None)
}
