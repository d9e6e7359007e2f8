//! [`OpenRun`]: a run recorded as started or resumed, holding the lock, ready for the engine;
//! and [`FinishedRun`], what running it gave.

use apollo_core::dispatch::{Dispatch, ExecutorFactory};
use apollo_core::engine::{self, EngineOptions, Notice, Observer, Planned, RunReport};
use apollo_core::event::RunStatus;
use apollo_core::{CancelToken, Loaded, PriorState};
use apollo_store::{JournalWriter, RunId, StateDir, StateLock};

use crate::error::RunnerError;
use crate::hooks::{RunEnd, run_hooks};
use crate::logs::RunLogs;
use crate::notice::{SessionNotice, SessionObserver, sweep_and_report};
use crate::reuse::Recording;
use crate::sweep::{StraySweep, SweepReason};

/// Whether [`RunSession::open`](crate::RunSession::open) started a run or resumed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Opening {
    /// A new run; its `run_started` is durable.
    Started,
    /// An earlier run; its `run_resumed` is durable and its prior state folded.
    Resumed,
}

pub(crate) struct OpenRunParts<'a> {
    pub(crate) loaded: &'a Loaded,
    pub(crate) sweep: &'a dyn StraySweep,
    pub(crate) state: StateDir,
    pub(crate) lock: StateLock,
    pub(crate) run_id: RunId,
    pub(crate) journal: JournalWriter,
    pub(crate) prior: PriorState,
    pub(crate) options: EngineOptions,
    pub(crate) opening: Opening,
    /// The pipeline's identity (see [`RunSession::identity`](crate::RunSession::identity)).
    pub(crate) identity: String,
    /// The file hash cache the engine decides with, saved after the run.
    pub(crate) hash_cache: Option<std::sync::Arc<apollo_store::HashCache>>,
    /// The reuse index the engine's reuse came from, written back after a new run.
    pub(crate) reuse_index: Option<crate::reuse::KeptIndex>,
    /// The blob store the engine captures into (a clone: it counts what the run added).
    pub(crate) blobs: apollo_store::BlobStore,
}

/// A run that is recorded as started or resumed, under the state directory's lock: the only
/// way to get one is [`RunSession::open`](crate::RunSession::open), and the only thing to do
/// with it is [`run`](OpenRun::run) it (or drop it, which releases the lock and leaves the run
/// incomplete, to be resumed later).
#[must_use = "an open run does nothing until it is run"]
pub struct OpenRun<'a> {
    // Boxed: the journal writer makes the parts large, and `Opened` should stay small.
    parts: Box<OpenRunParts<'a>>,
}

impl std::fmt::Debug for OpenRun<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenRun")
            .field("run_id", &self.parts.run_id)
            .field("opening", &self.parts.opening)
            .field("state_dir", &self.parts.state.path())
            .finish_non_exhaustive()
    }
}

impl<'a> OpenRun<'a> {
    pub(crate) fn new(parts: OpenRunParts<'a>) -> Self {
        Self {
            parts: Box::new(parts),
        }
    }

    /// The run's id.
    pub fn run_id(&self) -> &RunId {
        &self.parts.run_id
    }

    /// Whether the run is new or resumed.
    pub fn opening(&self) -> Opening {
        self.parts.opening
    }

    /// The state directory.
    pub fn state_dir(&self) -> &StateDir {
        &self.parts.state
    }

    /// What the run's journal held before this session (empty for a new run).
    pub fn prior(&self) -> &PriorState {
        &self.parts.prior
    }

    /// How many of the pipeline's units are already done earlier in the run (succeeded,
    /// skipped themselves, or reused from an earlier run).
    pub fn n_done(&self) -> usize {
        let pipeline = &self.parts.loaded.pipeline;
        self.parts
            .prior
            .count_done(pipeline.units.iter().map(|unit| unit.name.as_str()))
    }

    /// How many units take part: every unit, or with [`only`](crate::RunSession::only) the
    /// named ones and their upstream.
    pub fn n_units_in_scope(&self) -> usize {
        let pipeline = &self.parts.loaded.pipeline;
        if self.parts.options.only.is_none() {
            return pipeline.units.len();
        }
        // Only the scope is wanted; the hashing it does is bounded by each unit's timeout.
        engine::dry_run(
            pipeline,
            &self.parts.prior,
            &self.parts.options,
            &CancelToken::new(),
        )
        .map(|plan| {
            plan.iter()
                .filter(|(_, planned)| !matches!(planned, Planned::OutOfScope))
                .count()
        })
        .unwrap_or(pipeline.units.len())
    }

    /// The options the engine will run with (its `run_id` is this run's).
    pub fn engine_options(&self) -> &EngineOptions {
        &self.parts.options
    }

    /// The executors of the run's units, asked of `executors` before anything runs: a unit
    /// whose executor is missing would only fail, attempt after attempt, with its dependents
    /// not run.
    fn dispatch<'e>(
        &self,
        executors: &'e dyn ExecutorFactory,
    ) -> Result<Dispatch<'e>, RunnerError> {
        Dispatch::for_pipeline(executors, &self.parts.loaded.pipeline).map_err(|missing| {
            RunnerError::NoExecutor {
                run: self.parts.run_id.clone(),
                missing,
            }
        })
    }

    /// Runs the engine, each unit's attempts going to the executor `executors` gives for its
    /// kind (`executor: local | slurm`; the hooks to the local one), telling `observer` what
    /// happens to each unit, until every unit in scope is done, a unit fails for good (without
    /// `keep_going`), or `cancel` is raised; then sweeps what the run's units left running
    /// outside their process groups (also when the engine failed; not when no attempt was
    /// started: every unit was reused or done before), and releases the lock.
    ///
    /// `executors` is asked once for each kind the pipeline's units name, before any unit
    /// starts, and never for another (see [`ExecutorFactory`]). A kind it has none of is
    /// [`RunnerError::NoExecutor`]: nothing runs, and the run stays incomplete, to be resumed.
    ///
    /// The engine writes every unit record and `run_finished`; see `apollo_core::engine::run`.
    pub fn run(
        self,
        executors: &dyn ExecutorFactory,
        observer: &mut dyn Observer,
        cancel: &CancelToken,
        session_observer: &mut dyn SessionObserver,
    ) -> Result<FinishedRun, RunnerError> {
        let dispatch = self.dispatch(executors)?;
        let executor = &dispatch;
        let OpenRunParts {
            loaded,
            sweep,
            state,
            lock,
            run_id,
            mut journal,
            prior,
            options,
            opening,
            identity,
            hash_cache,
            reuse_index,
            blobs,
        } = *self.parts;
        let logs = RunLogs {
            run: state.run_dir(&run_id)?,
        };
        let n_units = loaded.pipeline.units.len();
        let mut recording = recording(&mut journal, reuse_index.as_ref(), opening, n_units);
        let options = crate::late::watched(options, &state, &loaded.pipeline, &run_id, &identity);
        // `on_late` runs on a thread of its own while the run goes on (see `late.rs`).
        let (late_sender, late_hook) = crate::late::hook(
            &options,
            &loaded.pipeline,
            &state,
            &run_id,
            executor,
            cancel,
        );
        let mut observer = NoteStarts::new(observer, late_sender);
        let (result, late_fired) = crate::late::beside(late_hook, || {
            let result = engine::run(
                &loaded.pipeline,
                &prior,
                &options,
                &mut recording,
                executor,
                &logs,
                cancel,
                &mut observer,
            );
            // The run is over: a hook thread still waiting for `run_late` stops waiting.
            observer.late = None;
            result
        });
        let appended = recording.into_appended();
        // Every attempt is over: a process of this run still alive left its process group.
        // When this process started no attempt (every unit reused or done before), there is
        // none: what earlier processes of the run left was swept before it was resumed. (A
        // sweep reads every process's environment: on a busy machine, the longest part of a
        // no-op run's end.)
        if observer.started {
            sweep_and_report(sweep, &run_id, SweepReason::AfterRun, session_observer);
        }
        crate::late::record(late_fired, &mut journal, session_observer);
        // The run has ended (or stopped for a human): its hooks run, still under the lock.
        if let Some(end_status) = hook_status(&result) {
            let end = RunEnd {
                run_id: &run_id,
                state: &state,
                status: end_status,
                report: result.as_ref().ok(),
                needs_verdict: result.as_ref().err().and_then(crate::hooks::verdict_unit),
                late: None,
            };
            for outcome in run_hooks(&loaded.pipeline, &end, executor, &mut journal, cancel) {
                session_observer.notice(&SessionNotice::Hook(&outcome));
            }
        }
        crate::reuse::save_hash_cache(&state, hash_cache.as_deref());
        // The run's captures are durable: the store is brought under `blob_store_max`, still
        // under the lock (no other apollo is capturing meanwhile).
        crate::evict::after_run(
            &state,
            &loaded.pipeline,
            &blobs,
            &run_id,
            &lock,
            session_observer,
        );
        drop(journal);
        drop(options);
        // A resumed run's prior state has a few allocations per unit and attempt (for 10,000
        // units, freeing it was a tenth of deciding that nothing was left to do).
        drop_in_background(prior);
        if let Some(index) = reuse_index {
            // A new run is covered by the reuse index now, from what it appended (a resumed
            // run's journal also holds what earlier processes did: the next refresh reads it).
            let index = match (opening, appended) {
                (Opening::Started, Some(appended)) => index.cover(&state, &run_id, appended),
                _ => index,
            };
            // Tens of thousands of small allocations for a large pipeline: freed on another
            // thread, after the run is over.
            drop_in_background(index);
        }
        drop(lock);
        if let Ok(report) = &result
            && report.status == Some(RunStatus::Succeeded)
        {
            // Best effort: left behind, it names a run that exists and succeeded, which the
            // next selection passes over.
            let _ = state.clear_latest_run(&identity, &run_id);
        }
        match result {
            Ok(report) => Ok(FinishedRun {
                run_id,
                opening,
                report,
            }),
            Err(source) => Err(RunnerError::Engine {
                run: run_id,
                source,
            }),
        }
    }
}

/// The journal as the engine appends to it: with a reuse index to write back (a new run), the
/// records it appends are kept for it.
fn recording<'j>(
    journal: &'j mut JournalWriter,
    reuse_index: Option<&'j crate::reuse::KeptIndex>,
    opening: Opening,
    n_units: usize,
) -> Recording<'j> {
    let keep = reuse_index
        .filter(|_| opening == Opening::Started)
        .map(crate::reuse::KeptIndex::source);
    let mut recording = Recording::new(journal, keep);
    if keep.is_some() {
        // About a record kept per unit (a reuse, or a start): reserved once, not grown.
        recording.reserve(n_units);
    }
    recording
}

/// Frees `value` on a thread of its own, so that whoever waits for the run does not wait for
/// its memory to be given back (a process that exits meanwhile just ends the thread).
fn drop_in_background<T: Send + 'static>(value: T) {
    // When no thread can be started, the closure is dropped, and `value` with it.
    let _ = std::thread::Builder::new()
        .name("apollo-free".into())
        .spawn(move || drop(value));
}

/// The `APOLLO_RUN_STATUS` hooks get for how the engine ended, if hooks run at all: not for
/// a run left open (`--only`) nor when the engine could not go on (the journal failed).
fn hook_status(result: &Result<RunReport, engine::EngineError>) -> Option<&'static str> {
    match result {
        Ok(report) => report.status.map(|status| status.as_str()),
        Err(error) if crate::hooks::needs_human(error) => Some("needs_human"),
        Err(_) => None,
    }
}

/// What [`OpenRun::run`] gave: the run and how each unit ended.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FinishedRun {
    /// The run.
    pub run_id: RunId,
    /// Whether it was started or resumed by this session.
    pub opening: Opening,
    /// The engine's report: the run's status and each unit's result.
    pub report: RunReport,
}

/// Passes the engine's notices on, noting whether it handed any attempt to the executor (it
/// says [`Notice::Started`] or [`Notice::Submitted`] before it does).
/// A `run_late` goes to the `on_late` hook's thread.
struct NoteStarts<'o> {
    inner: &'o mut dyn Observer,
    started: bool,
    late: Option<std::sync::mpsc::Sender<apollo_core::event::RunLate>>,
}

impl<'o> NoteStarts<'o> {
    fn new(
        inner: &'o mut dyn Observer,
        late: Option<std::sync::mpsc::Sender<apollo_core::event::RunLate>>,
    ) -> Self {
        Self {
            inner,
            started: false,
            late,
        }
    }
}

impl Observer for NoteStarts<'_> {
    fn notice(&mut self, notice: &Notice<'_>) {
        self.started |= matches!(notice, Notice::Started { .. } | Notice::Submitted { .. });
        if let (Notice::Late { record }, Some(late)) = (notice, &self.late) {
            // Best effort: a hook thread that is gone has nothing to run.
            let _ = late.send((*record).clone());
        }
        self.inner.notice(notice);
    }

    fn flush(&mut self) {
        self.inner.flush();
    }
}
