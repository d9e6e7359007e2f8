//! Which run a session works on: a new one, the pipeline's latest incomplete one, or a named
//! one. Shared by [`RunSession::open`](crate::RunSession::open) and the dry-run planner so
//! both choose alike.

use std::collections::HashSet;
use std::path::Path;

use apollo_core::Event;
use apollo_core::event::RunStarted;
use apollo_store::{JournalReader, ReadOptions, Record, RunId, RunState, StateDir, StoreError};

use crate::error::RunnerError;

/// The run a session opens.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RunTarget {
    /// The pipeline's latest run if it is incomplete (no `run_finished`, or finished failed or
    /// interrupted), else a new run: what `apollo run` does. "The pipeline" is its stable
    /// identity ([`pipeline_identity`](crate::pipeline_identity)) and "latest" is by the state
    /// directory's creation order, not by the clock.
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
    /// Start a new run. With the pipeline's latest run when the selection read it (it is
    /// finished; what its units left running is swept before the new run starts).
    New(Option<RunId>),
    /// Resume this run.
    Resume(RunId),
    /// The named run succeeded: nothing to resume.
    Succeeded(RunId),
}

/// The pipeline a session runs, as run selection sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PipelineKey<'a> {
    /// Its name.
    pub(crate) name: &'a str,
    /// Its stable identity (see [`pipeline_identity`](crate::pipeline_identity)).
    pub(crate) identity: &'a str,
    /// Its config file, as given (for messages).
    pub(crate) config_path: &'a Path,
}

impl PipelineKey<'_> {
    /// Whether a run that recorded this `run_started` is a run of this pipeline: same
    /// identity, or, for a run recorded before identities (format 1.0/1.1), same name.
    pub(crate) fn owns(&self, started: &RunStarted) -> bool {
        match &started.identity {
            Some(identity) => identity == self.identity,
            None => started.pipeline == self.name,
        }
    }
}

/// Resolves `target` for `pipeline` in `state`. Whether another apollo on this host is still
/// running a run to resume (its lock file deleted, so the lock did not stop this one) is
/// checked as its journal is folded ([`fold_journal`](crate::state::fold_journal)).
pub(crate) fn select(
    state: &StateDir,
    target: &RunTarget,
    pipeline: PipelineKey<'_>,
) -> Result<Selection, RunnerError> {
    let selection = match target {
        RunTarget::Fresh => Selection::New(None),
        RunTarget::Named(run) => {
            let (run_state, _) = state.run_state(run)?;
            if run_state == RunState::Succeeded {
                Selection::Succeeded(run.clone())
            } else {
                Selection::Resume(run.clone())
            }
        }
        RunTarget::LatestIfIncomplete => {
            // The run this pipeline last started, whose folder went away (a `mv`, an `rm -rf`
            // of one run): which units it did is unknown, so starting over would be silent.
            if let Some(recorded) = state.recorded_latest_run(pipeline.identity)? {
                if let Err(StoreError::NotFound { .. }) = state.run_dir(&recorded) {
                    return Err(RunnerError::MissingRun {
                        folder: state.run_path(&recorded),
                        run: recorded,
                        pipeline: pipeline.name.to_owned(),
                    });
                }
                // Its journal lost its records (cut back to the segment header, emptied,
                // removed): the run exists, so neither an older run nor a new one stands in.
                if let (RunState::Corrupt, problem) = state.run_state(&recorded)? {
                    return Err(RunnerError::UnreadableRun {
                        run: recorded,
                        pipeline: pipeline.name.to_owned(),
                        problem: problem.unwrap_or_default(),
                    });
                }
            }
            let Some(run) = latest_run(state, pipeline)? else {
                return Ok(Selection::New(None));
            };
            let (run_state, problem) = state.run_state(&run)?;
            match run_state {
                RunState::Succeeded => Selection::New(Some(run)),
                RunState::Corrupt => {
                    return Err(RunnerError::UnreadableRun {
                        run,
                        pipeline: pipeline.name.to_owned(),
                        problem: problem.unwrap_or_default(),
                    });
                }
                _ => Selection::Resume(run),
            }
        }
    };
    Ok(selection)
}

/// The newest run of `pipeline` in the state directory's creation order (never by the
/// clock: see [`StateDir::run_ids`]). A newer run whose start cannot be read is an error, not
/// a run to skip: it may be this pipeline's incomplete run, and skipping it would start over
/// what it left half done. A run with no record at all (apollo died between creating it and
/// writing `run_started`) did nothing and is skipped.
///
/// When no run of this identity exists but the newest run of another identity with the same
/// name is unfinished (another config file of that name, or this one moved away from its state
/// directory), that is [`RunnerError::IdentityMismatch`]: neither resumed nor started over
/// silently.
fn latest_run(state: &StateDir, pipeline: PipelineKey<'_>) -> Result<Option<RunId>, RunnerError> {
    let mut seen_identities = HashSet::new();
    let mut same_name_unfinished: Option<(RunId, String)> = None;
    for run in state.run_ids()?.into_iter().rev() {
        let unidentified = |problem: String| RunnerError::UnidentifiedRun {
            run: run.clone(),
            pipeline: pipeline.name.to_owned(),
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
                if pipeline.owns(&started) {
                    return Ok(Some(run));
                }
                if same_name_unfinished.is_none()
                    && started.pipeline == pipeline.name
                    && seen_identities.insert(started.identity.clone())
                    && matches!(
                        state.run_state(&run)?.0,
                        RunState::Incomplete | RunState::Failed | RunState::Interrupted
                    )
                {
                    same_name_unfinished = Some((run.clone(), started.config_path.clone()));
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
    match same_name_unfinished {
        Some((run, recorded_config)) => Err(RunnerError::IdentityMismatch {
            run,
            pipeline: pipeline.name.to_owned(),
            recorded_config,
            config: pipeline.config_path.display().to_string(),
        }),
        None => Ok(None),
    }
}
