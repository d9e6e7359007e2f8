//! Which run a session works on: a new one, the pipeline's latest incomplete one, or a named
//! one. Shared by [`RunSession::open`](crate::RunSession::open) and the dry-run planner so
//! both choose alike.

use apollo_store::{RunId, RunState, StateDir};

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
            let Some(run) = state.latest_run(pipeline)? else {
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
