//! [`RunSession`]: what to run and how, and [`RunSession::open`], which does everything up to
//! the engine in the one right order.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use apollo_core::engine::{self, EngineOptions, OnInputChange};
use apollo_core::event::{Event, RunResumed, RunStarted};
use apollo_core::{CancelToken, Loaded, PriorState};
use apollo_store::{
    Durability, JournalReader, JournalWriter, ReadOptions, Record, RunId, StateDir, WriterOptions,
};

use crate::deadlines::at_start;
use crate::error::{ParamDifference, RunnerError};
use crate::identity::pipeline_identity;
use crate::notice::{SessionNotice, SessionObserver, report_warnings, sweep_and_report};
use crate::open_run::{OpenRun, OpenRunParts, Opening};
use crate::reuse::{hash_cache_for, reuse_for};
use crate::select::{PipelineKey, RunTarget, Selection, select};
#[cfg(test)]
pub(crate) use crate::snapshot::definition_snapshot;
pub(crate) use crate::snapshot::{definition_snapshot_hash, write_definition_snapshot};
use crate::state::{Folded, acquire_lock, fold_journal};
use crate::sweep::{StraySweep, SweepReason};

/// A run of one pipeline in one state directory, configured and not yet opened.
///
/// Build it with [`RunSession::new`] and the setters, then [`open`](RunSession::open) it
/// (which takes the lock and records the start or resume) and [`run`](OpenRun::run) what it
/// opened. See the crate docs for the order of the steps and why.
#[must_use = "a session does nothing until it is opened"]
pub struct RunSession<'a> {
    state_dir: PathBuf,
    config_path: PathBuf,
    loaded: &'a Loaded,
    sweep: &'a dyn StraySweep,
    /// Runs the pipeline's hooks when the session stops for a human before the run starts.
    hook_executor: Option<&'a dyn apollo_core::Executor>,
    target: RunTarget,
    wait_for_lock: bool,
    writer_options: WriterOptions,
    keep_going: bool,
    on_input_change: OnInputChange,
    only: Vec<String>,
    max_parallel: Option<usize>,
    max_retry_delay: Option<Duration>,
    reuse: bool,
    state_dir_mode: Option<apollo_core::sharing::Sharing>,
}

impl std::fmt::Debug for RunSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSession")
            .field("state_dir", &self.state_dir)
            .field("config_path", &self.config_path)
            .field("pipeline", &self.loaded.pipeline.name)
            .field("target", &self.target)
            .field("wait_for_lock", &self.wait_for_lock)
            .field("writer_options", &self.writer_options)
            .finish_non_exhaustive()
    }
}

impl<'a> RunSession<'a> {
    /// A session for the pipeline `loaded` (read from `config_path`, which is recorded in the
    /// run) in the state directory `state_dir` (created if missing). `sweep` kills what units
    /// of earlier runs left running; it must match the executor the session will run with.
    ///
    /// Defaults: [`RunTarget::LatestIfIncomplete`], fail at once if the state directory is
    /// locked, the journal written as the pipeline's `durability:` and `sync_interval:` say
    /// (else fsync'd), fail-fast, `OnInputChange::Auto`, every unit, the pipeline's
    /// `max_parallel`.
    pub fn new(
        state_dir: impl Into<PathBuf>,
        config_path: impl Into<PathBuf>,
        loaded: &'a Loaded,
        sweep: &'a dyn StraySweep,
    ) -> Self {
        Self {
            state_dir: state_dir.into(),
            config_path: config_path.into(),
            loaded,
            sweep,
            hook_executor: None,
            target: RunTarget::default(),
            wait_for_lock: false,
            writer_options: crate::pipeline_writer_options(&loaded.pipeline),
            keep_going: false,
            on_input_change: OnInputChange::Auto,
            only: Vec::new(),
            max_parallel: None,
            max_retry_delay: None,
            reuse: true,
            state_dir_mode: None,
        }
    }

    /// Runs the pipeline's hooks (`on_failure`, `on_finish`, with `APOLLO_RUN_STATUS`
    /// `needs_human`) through `executor` when [`open`](Self::open) refuses to resume because a
    /// human's verdict is needed: that stop happens before the run starts, so without this
    /// nobody would be told of it. Each hook's end is recorded in the run's journal. (Once a run
    /// is open, [`OpenRun::run`](crate::OpenRun::run) runs them through its factory's local
    /// executor.)
    pub fn hooks_executor(mut self, executor: &'a dyn apollo_core::Executor) -> Self {
        self.hook_executor = Some(executor);
        self
    }

    /// Which run to open.
    pub fn target(mut self, target: RunTarget) -> Self {
        self.target = target;
        self
    }

    /// Wait for another process holding the state directory's lock, instead of failing with
    /// a [`StoreError`](apollo_store::StoreError) of kind [`ErrorKind::Locked`](apollo_store::ErrorKind::Locked).
    pub fn wait_for_lock(mut self, wait: bool) -> Self {
        self.wait_for_lock = wait;
        self
    }

    /// The pipeline this session runs.
    pub fn pipeline(&self) -> &'a apollo_core::Pipeline {
        &self.loaded.pipeline
    }

    /// How the run's journal is written (durability, injected faults for tests). Replaces the
    /// options taken from the pipeline (see [`crate::pipeline_writer_options`]).
    pub fn writer_options(mut self, options: WriterOptions) -> Self {
        self.writer_options = options;
        self
    }

    /// Who may use the state directory when this session makes it (`--state-dir-mode`; `None`:
    /// private). An existing state directory keeps its own: asking for another is an error.
    pub fn state_dir_mode(mut self, sharing: Option<apollo_core::sharing::Sharing>) -> Self {
        self.state_dir_mode = sharing;
        self
    }

    /// Shorthand for the writer options' durability. [`Durability::None`] is for tests and
    /// benchmarks only: a crash may lose acknowledged records.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.writer_options.durability = durability;
        self
    }

    /// Keep running every unit that does not depend on a failed one (like `make -k`).
    pub fn keep_going(mut self, keep_going: bool) -> Self {
        self.keep_going = keep_going;
        self
    }

    /// What to do when a unit that succeeded earlier in the run has different inputs now.
    pub fn on_input_change(mut self, on_input_change: OnInputChange) -> Self {
        self.on_input_change = on_input_change;
        self
    }

    /// Run only these units and whatever of their upstream is not done (empty: every unit).
    pub fn only(mut self, units: Vec<String>) -> Self {
        self.only = units;
        self
    }

    /// Units running at once (at least 1; default: the pipeline's `max_parallel`).
    pub fn max_parallel(mut self, max_parallel: usize) -> Self {
        self.max_parallel = Some(max_parallel.max(1));
        self
    }

    /// The longest wait between two attempts of a unit.
    pub fn max_retry_delay(mut self, delay: Duration) -> Self {
        self.max_retry_delay = Some(delay);
        self
    }

    /// Whether `reuse: true` units may be reused from earlier runs of the pipeline (default
    /// `true`; `false` is `apollo run --no-reuse`: everything not done in this run runs).
    pub fn reuse(mut self, reuse: bool) -> Self {
        self.reuse = reuse;
        self
    }

    /// Whether reuse across runs is on (see [`Self::reuse`]).
    pub(crate) fn reuse_enabled(&self) -> bool {
        self.reuse
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The loaded pipeline.
    pub fn loaded(&self) -> &'a Loaded {
        self.loaded
    }

    pub(crate) fn target_ref(&self) -> &RunTarget {
        &self.target
    }

    /// The pipeline's stable identity in the state directory (see [`pipeline_identity`]).
    pub fn identity(&self) -> String {
        pipeline_identity(&self.state_dir, &self.config_path, self.loaded)
    }

    /// The hooks for a resume the preflight refused for a human's verdict (see
    /// [`Self::hooks_executor`]), recorded in `journal`; nothing for any other refusal.
    fn hooks_for_refusal(
        &self,
        state: &StateDir,
        run_id: &RunId,
        refusal: &apollo_core::EngineError,
        journal: &mut JournalWriter,
        observer: &mut dyn SessionObserver,
    ) {
        let Some(executor) = self.hook_executor else {
            return;
        };
        if !crate::hooks::needs_human(refusal) {
            return;
        }
        let end = crate::hooks::RunEnd {
            run_id,
            state,
            status: "needs_human",
            report: None,
            needs_verdict: crate::hooks::verdict_unit(refusal),
            late: None,
        };
        // Refused before the engine started: no stop can be asked of this session yet.
        let cancel = CancelToken::new();
        for outcome in
            crate::hooks::run_hooks(&self.loaded.pipeline, &end, executor, journal, &cancel)
        {
            observer.notice(&SessionNotice::Hook(&outcome));
        }
    }

    /// The pipeline as run selection sees it, for `identity` (from [`Self::identity`]).
    pub(crate) fn key<'s>(&'s self, identity: &'s str) -> PipelineKey<'s> {
        PipelineKey {
            name: &self.loaded.pipeline.name,
            identity,
            config_path: &self.config_path,
        }
    }

    /// The engine options for `run_id` (empty for a plan of a new run).
    pub(crate) fn engine_options(&self, run_id: &str) -> EngineOptions {
        let pipeline = &self.loaded.pipeline;
        let mut options = EngineOptions::new(run_id, pipeline);
        options.keep_going = self.keep_going;
        options.on_input_change = self.on_input_change;
        if !self.only.is_empty() {
            options.only = Some(self.only.clone());
        }
        if let Some(max_parallel) = self.max_parallel {
            options.max_parallel = max_parallel;
        }
        if let Some(delay) = self.max_retry_delay {
            options.max_retry_delay = delay;
        }
        options
    }

    /// Opens the run: takes the state directory's lock, chooses or creates the run, snapshots
    /// the definition, folds what the run already did, sweeps what the previous apollo left
    /// running, checks that the run can proceed (a non-idempotent unit cut off mid-attempt
    /// needs a human verdict first), and records `run_started` or `run_resumed` — in that
    /// order (see the crate docs). Nothing has run yet when it returns; the lock is held until
    /// the returned [`OpenRun`] is run or dropped.
    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    pub fn open(self, observer: &mut dyn SessionObserver) -> Result<Opened<'a>, RunnerError> {
        let pipeline = &self.loaded.pipeline;
        let state = StateDir::open_or_create_as(&self.state_dir, self.state_dir_mode)?;
        let mut lock = acquire_lock(&state, self.wait_for_lock, observer)?;
        let identity = self.identity();
        let mut latest = None;
        let resume = match select(&state, &self.target, self.key(&identity))? {
            Selection::New(found) => {
                latest = found;
                None
            }
            // Folded first, in one read of its journal that also refuses a run a live
            // apollo still runs: before anything is written (the reuse index, the
            // definition snapshot, the recovery).
            Selection::Resume(run) => {
                let folded = fold_journal(&state, &run)?;
                Some((run, folded))
            }
            Selection::Succeeded(run) => return Ok(Opened::NothingToResume(run)),
        };
        // Earlier runs' successes, for `reuse: true` units: the index is brought up to date
        // (and rewritten) before this run is created or resumed, so that apollo killed while
        // it writes the index leaves no run behind.
        let (reuse, hash_cache) = if self.reuse && pipeline.units.iter().any(|unit| unit.reuse) {
            // The file hash cache is read beside the index (a few milliseconds each at
            // 10,000 units).
            std::thread::scope(|scope| {
                let hash_cache = scope.spawn(|| hash_cache_for(&state, pipeline));
                let reuse = reuse_for(
                    &state,
                    pipeline,
                    &identity,
                    resume.as_ref().map(|(run, _)| run),
                    true,
                    observer,
                );
                let hash_cache = hash_cache
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (reuse, hash_cache)
            })
        } else {
            (None, None)
        };

        // The definition the run executes, kept so that `show` and a later diff can tell what
        // it was even after the config file changed.
        let definition_hash = match self.loaded.definition_hash.as_deref() {
            // Known from the parse cache, and kept by an earlier run: nothing to write.
            Some(known) if state.has_blob(known) => known.to_owned(),
            // A load with warnings is never cached, so its snapshot's hash is not known, but an
            // earlier run of the same config may have kept the snapshot: hashed first, and
            // written only if it was not.
            None if !self.loaded.warnings.is_empty() => {
                let hash = definition_snapshot_hash(pipeline).map_err(RunnerError::Snapshot)?;
                state.put_blob_streamed(&lock, Some(&hash), |out| {
                    write_definition_snapshot(pipeline, out)
                })?
            }
            // Streamed (the snapshot of 100,000 units is ~40 MB, never held in memory), and
            // hashed as it is written when the parse cache did not know its hash (a first run).
            known => state
                .put_blob_streamed(&lock, known, |out| write_definition_snapshot(pipeline, out))?,
        };
        let config_hash = self.loaded.config_hash();
        let host = apollo_store::process::host_name();
        let units: Vec<String> = pipeline
            .units
            .iter()
            .map(|unit| unit.name.clone())
            .collect();

        // A restore SIGKILLed beside an output left its temporary file (issue 36 item 7).
        let removed = crate::restore_temps::remove_stale(pipeline, SystemTime::now());
        if !removed.is_empty() {
            observer.notice(&SessionNotice::RestoreTempsRemoved { paths: &removed });
        }
        let (run_id, journal, prior, opening) = match resume {
            None => {
                // Refuse what the engine would refuse before a run exists: an unknown unit
                // in `only` must not leave an empty run behind to be resumed. (The preflight
                // hashes within each unit's timeout; it runs before the CLI installs its
                // signal handlers, so SIGTERM and Ctrl-C end apollo here by their default
                // action, and its token is never raised.)
                engine::preflight(
                    pipeline,
                    &PriorState::empty(),
                    &self.engine_options(""),
                    &CancelToken::new(),
                )
                .map_err(|source| RunnerError::NotStarted { source })?;
                // What units of the pipeline's previous run left running must not race the
                // new run's units.
                // (The selection usually read which it is already: its first record names
                // every unit, 90 KB at 10,000 units.)
                if let Some(previous) = latest.or_else(|| previous_run(&state, self.key(&identity)))
                {
                    sweep_and_report(self.sweep, &previous, SweepReason::PreviousRun, observer);
                }
                let run_id = state.new_run_id();
                let run_dir = state.create_run(&run_id)?;
                let mut journal = JournalWriter::create(
                    run_dir.path(),
                    run_id.as_str(),
                    self.writer_options.clone(),
                )?;
                // Every commit from now on checks that the lock file and the run folder are still
                // the ones this session opened (a `git clean` of the state directory mid-run).
                journal.watch_lock(&lock)?;
                let deadlines = at_start(pipeline, &self.writer_options);
                journal.append_batch(&[Event::RunStarted(RunStarted {
                    run_id: run_id.to_string(),
                    pipeline: pipeline.name.clone(),
                    config_path: absolute(&self.config_path).display().to_string(),
                    config_hash,
                    definition_hash,
                    apollo_version: env!("CARGO_PKG_VERSION").to_owned(),
                    host,
                    pid: std::process::id(),
                    units,
                    identity: Some(identity.clone()),
                    params: self.loaded.params.clone(),
                    run_kind: apollo_core::event::RunKind::Run,
                    durability: self.writer_options.durability,
                    deadlines,
                })])?;
                lock.set_run(&run_id)?;
                (run_id, journal, PriorState::empty(), Opening::Started)
            }
            Some((
                run_id,
                Folded {
                    prior,
                    recorded,
                    reader,
                },
            )) => {
                let run_dir = state.run_dir(&run_id)?;
                // One read of the journal: the fold's reader hands the writer its last
                // segment, whose torn tail (if any) the writer then cuts off.
                let (mut journal, recovery) = JournalWriter::open_for_append_after(
                    reader,
                    run_dir.path(),
                    self.writer_options.clone(),
                )?;
                journal.watch_lock(&lock)?;
                report_warnings(&recovery.warnings, observer);
                let differences = param_differences(&recorded.params, &self.loaded.params);
                if !differences.is_empty() {
                    return Err(RunnerError::ParamsChanged {
                        run: run_id,
                        differences,
                        recorded: recorded.params,
                    });
                }
                if let Some(recorded) = recorded
                    .pipeline
                    .filter(|recorded| *recorded != pipeline.name)
                {
                    return Err(RunnerError::PipelineMismatch {
                        run: run_id,
                        recorded,
                        pipeline: pipeline.name.clone(),
                    });
                }
                // What the previous apollo's units left running (whatever escaped its guard)
                // must not race their own rerun, nor a human's look at what they did.
                sweep_and_report(self.sweep, &run_id, SweepReason::BeforeResume, observer);
                // Refuse before recording a resume that cannot proceed (a human verdict is
                // needed, say): each refusal would otherwise add a `run_resumed` record.
                if let Err(source) = engine::preflight(
                    pipeline,
                    &prior,
                    &self.engine_options(run_id.as_str()),
                    &CancelToken::new(),
                ) {
                    self.hooks_for_refusal(&state, &run_id, &source, &mut journal, observer);
                    return Err(RunnerError::Engine {
                        run: run_id.clone(),
                        source,
                    });
                }
                lock.set_run(&run_id)?;
                journal.append_batch(&[Event::RunResumed(RunResumed {
                    config_hash,
                    definition_hash,
                    apollo_version: env!("CARGO_PKG_VERSION").to_owned(),
                    host,
                    pid: std::process::id(),
                    units,
                })])?;
                (run_id, journal, prior, Opening::Resumed)
            }
        };
        // Which run this pipeline last started, for the next selection to notice that its
        // folder went away (the journal's `run_started` is durable by now: a crash before this
        // leaves the previous run named, which the next selection finds and passes over).
        if state.recorded_latest_run(&identity).ok().flatten().as_ref() != Some(&run_id) {
            state.set_latest_run(&identity, &run_id)?;
        }
        // Declared files are kept in the state directory's blob store as they are hashed
        // (each unit's `capture:` says which).
        let blobs = state.blob_store(self.writer_options.durability)?;
        // What an apollo killed mid-capture or mid-restore left in `blobs/tmp` goes now: this
        // process holds the lock, so no other is writing there (best effort: a failure only
        // leaves the files for `prune`).
        let _ = blobs.sweep_temporary();
        let mut options = self
            .engine_options(run_id.as_str())
            .capture(std::sync::Arc::new(blobs.clone()));
        let (reuse, reuse_index) = reuse.unzip();
        options.reuse = reuse;
        options.hash_cache = hash_cache.clone().map(|cache| cache as _);
        Ok(Opened::Ready(OpenRun::new(OpenRunParts {
            loaded: self.loaded,
            sweep: self.sweep,
            state,
            lock,
            run_id,
            journal,
            prior,
            options,
            opening,
            identity,
            hash_cache,
            reuse_index,
            blobs,
        })))
    }
}

/// What [`RunSession::open`] found.
///
/// Deliberately exhaustive: a caller must handle every outcome, and a new one would be a
/// breaking change that callers should notice.
#[derive(Debug)]
#[must_use = "an opened run does nothing until it is run"]
pub enum Opened<'a> {
    /// The run is recorded as started or resumed; run it.
    Ready(OpenRun<'a>),
    /// The named run already succeeded: nothing to resume (nothing was written).
    NothingToResume(RunId),
}

/// The params whose value differs between a run's record and this session, by name.
pub(crate) fn param_differences(
    recorded: &apollo_core::config::Params,
    given: &apollo_core::config::Params,
) -> Vec<ParamDifference> {
    let mut names: Vec<&String> = recorded.keys().chain(given.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|name| recorded.get(*name) != given.get(*name))
        .map(|name| ParamDifference {
            name: name.clone(),
            recorded: recorded.get(name).cloned(),
            given: given.get(name).cloned(),
        })
        .collect()
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The newest run of this pipeline (by identity, in creation order), whose strays a new
/// run sweeps first. Runs that cannot be read are passed over here: selection has already
/// refused what it could not read, and this is only about processes to kill.
fn previous_run(state: &StateDir, pipeline: PipelineKey<'_>) -> Option<RunId> {
    state.run_ids().ok()?.into_iter().rev().find(|run| {
        let first = state
            .run_dir(run)
            .and_then(|run_dir| JournalReader::open(run_dir.path(), ReadOptions::default()))
            .and_then(|mut reader| reader.next().transpose());
        matches!(first, Ok(Some(Record { event: Event::RunStarted(started), .. })) if pipeline.owns(&started))
    })
}
