//! [`RunSession::plan`]: what opening and running the session would do, decided without
//! taking the lock, recovering or writing anything.

use apollo_core::engine::{self, Planned};
use apollo_core::{CancelToken, PriorState};
use apollo_store::{RunId, StateDir, WriterOptions};

use crate::error::RunnerError;
use crate::notice::SessionObserver;
use crate::reuse::{hash_cache_for, reuse_for};
use crate::select::{Selection, select};
use crate::session::RunSession;
use crate::state::fold_prior;

/// A dry run's answer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Plan {
    /// The run that would be resumed; `None`: a new run would start.
    pub resumes: Option<RunId>,
    /// Each unit, in config order, and what would happen to it.
    pub units: Vec<(String, Planned)>,
}

impl Plan {
    /// How many units would (or may) run.
    pub fn n_to_run(&self) -> usize {
        self.units
            .iter()
            .filter(|(_, planned)| planned.runs())
            .count()
    }
}

impl RunSession<'_> {
    /// The run [`open`](RunSession::open) would resume and the params its `run_started`
    /// recorded; `None` when it would start a new run. Read only, like [`plan`](Self::plan):
    /// a caller loads the pipeline again with these params for a resume that keeps them
    /// (a resume with other params is refused, [`RunnerError::ParamsChanged`]).
    pub fn recorded_params(
        &self,
    ) -> Result<Option<(RunId, apollo_core::config::Params)>, RunnerError> {
        if !self.state_dir().join("runs").is_dir() {
            return Ok(None);
        }
        let state = StateDir::open_existing(self.state_dir())?;
        let identity = self.identity();
        let run = match select(&state, self.target_ref(), self.key(&identity))? {
            Selection::New(_) => return Ok(None),
            Selection::Resume(run) | Selection::Succeeded(run) => run,
        };
        let run_dir = state.run_dir(&run)?;
        let mut reader = apollo_store::JournalReader::open(
            run_dir.path(),
            apollo_store::ReadOptions::default(),
        )?;
        let params = match reader.next().transpose()? {
            Some(apollo_store::Record {
                event: apollo_core::Event::RunStarted(started),
                ..
            }) => started.params,
            _ => apollo_core::config::Params::new(),
        };
        Ok(Some((run, params)))
    }

    /// What [`open`](RunSession::open) and [`run`](crate::OpenRun::run) would do, read only:
    /// no lock, no recovery, nothing written (a state directory that does not exist is not
    /// created). A named run that already succeeded is planned as a resume of it.
    pub fn plan(&self, observer: &mut dyn SessionObserver) -> Result<Plan, RunnerError> {
        let pipeline = &self.loaded().pipeline;
        let state = self
            .state_dir()
            .join("runs")
            .is_dir()
            .then(|| StateDir::open_existing(self.state_dir()))
            .transpose()?;
        let identity = self.identity();
        let resumes = match &state {
            None => None,
            Some(state) => match select(state, self.target_ref(), self.key(&identity))? {
                Selection::New(_) => None,
                Selection::Resume(run) | Selection::Succeeded(run) => Some(run),
            },
        };
        let prior = match (&state, &resumes) {
            (Some(state), Some(run)) => {
                let (prior, recorded) = fold_prior(state, run, observer)?;
                let differences =
                    crate::session::param_differences(&recorded.params, &self.loaded().params);
                if !differences.is_empty() {
                    return Err(RunnerError::ParamsChanged {
                        run: run.clone(),
                        differences,
                        recorded: recorded.params,
                    });
                }
                prior
            }
            _ => PriorState::empty(),
        };
        let mut options = self.engine_options(resumes.as_ref().map_or("", RunId::as_str));
        if let Some(state) = state.as_ref().filter(|_| self.reuse_enabled()) {
            // Read only: the index is brought up to date in memory, not written.
            options.reuse = reuse_for(
                state,
                pipeline,
                &identity,
                resumes.as_ref(),
                false,
                observer,
            )
            .map(|(reuse, _)| reuse);
            if let Some(cache) = hash_cache_for(state, pipeline) {
                options.hash_cache = Some(cache);
            }
        }
        let units =
            // Hashes within each unit's timeout; SIGTERM and Ctrl-C end `--dry-run` by their
            // default action (no handlers are installed for it), so the token stays down.
            engine::dry_run(pipeline, &prior, &options, &CancelToken::new()).map_err(|source| RunnerError::Plan {
                run: resumes.clone(),
                source,
            })?;
        Ok(Plan { resumes, units })
    }
}

/// The journal's options a pipeline asks for: its `durability:` (default `fsync`) and
/// `sync_interval:` (default [`apollo_store::DEFAULT_SYNC_INTERVAL`]).
pub fn pipeline_writer_options(pipeline: &apollo_core::Pipeline) -> WriterOptions {
    WriterOptions::default()
        .durability(pipeline.durability.unwrap_or_default())
        .sync_interval(
            pipeline
                .sync_interval
                .unwrap_or(apollo_store::DEFAULT_SYNC_INTERVAL),
        )
}
