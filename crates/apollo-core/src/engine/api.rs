//! The engine's public vocabulary: how to run ([`EngineOptions`]), where attempts keep their
//! logs ([`AttemptLogs`]), what came of it ([`RunReport`], [`UnitResult`]) and why a run could
//! not proceed ([`EngineError`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::capture::BlobSink;
use crate::dag::DagError;
use crate::event::{AttemptStatus, RunStatus};
use crate::journal::JournalError;
use crate::model::Pipeline;

use super::reuse::Reuse;
use crate::hash_cache::FileHashCache;

/// What to do when a unit that succeeded earlier in the run has different inputs now (or its
/// declared outputs are missing or changed) — DESIGN §17.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnInputChange {
    /// Run an idempotent unit again; stop before a non-idempotent one
    /// ([`EngineError::ChangedNeedsVerdict`]) unless a human allowed its rerun (a `rerun`
    /// verdict). The default.
    #[default]
    Auto,
    /// Run it again, idempotent or not.
    Rerun,
    /// Stop before running it, explaining what changed, whatever the unit.
    Fail,
}

/// How the engine runs.
///
/// Built with [`EngineOptions::new`] and the chainable setters; new options may be added in
/// any release, so the struct cannot be built with a literal outside this crate. The fields
/// stay public for reading and adjusting.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EngineOptions {
    /// The run's id (passed to units as `APOLLO_RUN_ID`).
    pub run_id: String,
    /// Units running at once (at least 1).
    pub max_parallel: usize,
    /// Keep running what does not depend on a failure (like `make -k`).
    pub keep_going: bool,
    /// What to do when a succeeded unit's inputs changed.
    pub on_input_change: OnInputChange,
    /// Run only these units and whatever of their upstream is not done. `None`: every unit.
    pub only: Option<Vec<String>>,
    /// The longest wait between two attempts of a unit that sets no `retry_max_delay` (the
    /// backoff doubles up to this, or up to the unit's `retry_delay` when that is longer).
    pub max_retry_delay: Duration,
    /// Where declared files' bytes are kept as they are hashed (the blob store; see
    /// [`crate::capture`]). `None`: only hashes and manifests are recorded.
    pub capture: Option<Arc<dyn BlobSink>>,
    /// Reuse across runs for `reuse: true` units: where earlier successes are found and how
    /// missing outputs are restored. `None` (the default, and `apollo run --no-reuse`): nothing
    /// is reused from another run.
    pub reuse: Option<Reuse>,
    /// Hashes of files already hashed, by (device, inode, size, mtime, ctime): declared files
    /// whose stamp is unchanged are not read again while deciding (see
    /// [`crate::hash_cache`]). `None` (the default): every file is read.
    pub hash_cache: Option<Arc<dyn FileHashCache>>,
    /// Watching the run's deadline for `on_late`: the predicted finish is evaluated when a unit
    /// ends and when the deadline comes, and the first time the run is late a `run_late` is
    /// recorded and [`Notice::Late`](super::Notice::Late) told. `None` (the default): not
    /// watched. Never when the run recorded `run_late` already (it is once per run).
    pub late: Option<LateWatch>,
}

/// What [`EngineOptions::late`] watches with: the run's deadline and each unit's history.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LateWatch {
    /// The run's deadline.
    pub deadline: chrono::DateTime<chrono::Utc>,
    /// By unit index: the p50 and p95 of its earlier successful attempts, if it has any.
    pub history: Vec<Option<crate::deadline::UnitHistory>>,
}

impl LateWatch {
    /// Watching `deadline` with `history` (by unit index).
    pub fn new(
        deadline: chrono::DateTime<chrono::Utc>,
        history: Vec<Option<crate::deadline::UnitHistory>>,
    ) -> Self {
        Self { deadline, history }
    }
}

impl EngineOptions {
    /// Defaults for a run: the pipeline's `max_parallel`, fail-fast, [`OnInputChange::Auto`].
    pub fn new(run_id: impl Into<String>, pipeline: &Pipeline) -> Self {
        Self {
            run_id: run_id.into(),
            max_parallel: pipeline.max_parallel.max(1),
            keep_going: false,
            on_input_change: OnInputChange::Auto,
            only: None,
            max_retry_delay: Duration::from_secs(300),
            capture: None,
            reuse: None,
            hash_cache: None,
            late: None,
        }
    }

    /// With at most `max_parallel` units running at once (0 is taken as 1).
    pub fn max_parallel(mut self, max_parallel: usize) -> Self {
        self.max_parallel = max_parallel;
        self
    }

    /// With `keep_going` on (run what does not depend on a failure) or off (fail fast).
    pub fn keep_going(mut self, keep_going: bool) -> Self {
        self.keep_going = keep_going;
        self
    }

    /// With this policy for succeeded units whose inputs changed.
    pub fn on_input_change(mut self, on_input_change: OnInputChange) -> Self {
        self.on_input_change = on_input_change;
        self
    }

    /// Running only `units` and whatever of their upstream is not done.
    pub fn only(mut self, units: Vec<String>) -> Self {
        self.only = Some(units);
        self
    }

    /// Keeping declared files' bytes in `sink` as they are hashed (each unit's
    /// [`CapturePolicy`](crate::capture::CapturePolicy) says which and up to what size).
    pub fn capture(mut self, sink: Arc<dyn BlobSink>) -> Self {
        self.capture = Some(sink);
        self
    }

    /// Reusing `reuse: true` units' results from earlier runs found through `reuse`.
    pub fn reuse(mut self, reuse: Reuse) -> Self {
        self.reuse = Some(reuse);
        self
    }

    /// Taking declared files' hashes from `cache` while deciding, when their stamp is unchanged.
    pub fn hash_cache(mut self, cache: Arc<dyn FileHashCache>) -> Self {
        self.hash_cache = Some(cache);
        self
    }

    /// Watching the run's deadline through `watch` (see [`EngineOptions::late`]).
    pub fn late(mut self, watch: LateWatch) -> Self {
        self.late = Some(watch);
        self
    }

    /// With at most `max_retry_delay` between two attempts of a unit.
    pub fn max_retry_delay(mut self, max_retry_delay: Duration) -> Self {
        self.max_retry_delay = max_retry_delay;
        self
    }
}

/// Provides the folder an attempt's stdout/stderr go to.
pub trait AttemptLogs: Sync {
    /// The folder for `unit`'s attempt `attempt`. The executor creates it when there is output
    /// to keep.
    fn log_dir(&self, unit: &str, attempt: u32) -> Result<PathBuf, String>;

    /// The run's folder for `executor`'s own files (a Slurm job array's submission: its
    /// index and logs), beside the units' folders. `None` (the default): the executor keeps
    /// them in the attempt's folder.
    fn executor_dir(&self, executor: &str) -> Option<PathBuf> {
        let _ = executor;
        None
    }
}

/// Where a unit ended up in this engine run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitResult {
    /// An attempt in this process succeeded.
    Succeeded {
        /// The attempt.
        attempt: u32,
    },
    /// It skipped itself (exit 77).
    SelfSkipped {
        /// The attempt.
        attempt: u32,
    },
    /// Done earlier in the run; not run again.
    Reused,
    /// Not run: an earlier run's successful attempt with the same inputs stands for it
    /// (`reuse: true`, recorded as `unit_reused`), in this process or an earlier one of the run.
    ReusedFromRun {
        /// The run whose attempt did the work.
        run_id: String,
        /// That attempt.
        attempt: u32,
    },
    /// It failed for good.
    Failed {
        /// Its last attempt.
        attempt: u32,
        /// Where that attempt's logs are.
        log_dir: PathBuf,
        /// The first line of its error, when there is one.
        error: Option<String>,
        /// Whether it is `idempotent: false` and was cut off (timed out, or killed by a signal
        /// apollo did not send): nothing runs again until a human's verdict.
        awaits_verdict: bool,
    },
    /// An upstream unit failed.
    SkippedUpstream {
        /// The upstream unit.
        upstream: String,
    },
    /// Its `when:` was false when the pipeline was loaded: apollo skipped it
    /// ([`Unit::skip_when`](crate::model::Unit::skip_when)); its dependents went on.
    SkippedWhen {
        /// The condition, as recorded.
        condition: String,
    },
    /// It never started (interrupted run, fail-fast stop, `--only`).
    NotRun,
    /// Its attempt was running when the run was stopped (a signal, a fail-fast stop).
    CutOff {
        /// The attempt.
        attempt: u32,
        /// Whether it is `idempotent: false` (and started a process): nothing runs again
        /// until a human's verdict.
        awaits_verdict: bool,
    },
}

impl UnitResult {
    /// The unit's state in the one closed set every view prints.
    pub fn state(&self) -> crate::UnitState {
        use crate::UnitState;
        match self {
            UnitResult::Succeeded { .. } => UnitState::Succeeded,
            UnitResult::SelfSkipped { .. } => UnitState::Skipped,
            UnitResult::Reused => UnitState::AlreadyDone,
            UnitResult::ReusedFromRun { .. } => UnitState::Reused,
            UnitResult::Failed {
                awaits_verdict: true,
                ..
            }
            | UnitResult::CutOff {
                awaits_verdict: true,
                ..
            } => UnitState::NeedsVerdict,
            UnitResult::Failed { .. } => UnitState::Failed,
            UnitResult::SkippedUpstream { .. } => UnitState::UpstreamFailed,
            UnitResult::SkippedWhen { .. } => UnitState::SkippedWhen,
            UnitResult::CutOff { .. } => UnitState::CutOff,
            UnitResult::NotRun => UnitState::NotStarted,
        }
    }
}

/// The outcome of [`run`](super::run).
#[derive(Debug, Clone)]
pub struct RunReport {
    /// How the run ended; `None` when `only` left units of the pipeline undone (the run stays
    /// open and the next `apollo run` resumes it).
    pub status: Option<RunStatus>,
    /// Each unit's result, in config order.
    pub units: Vec<(String, UnitResult)>,
}

impl RunReport {
    /// How many units ended in a state matching `predicate`.
    pub fn count(&self, predicate: impl Fn(&UnitResult) -> bool) -> usize {
        self.units
            .iter()
            .filter(|(_, result)| predicate(result))
            .count()
    }
}

/// Why a run could not proceed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The pipeline's graph is broken (validation should have caught it).
    #[error(transparent)]
    Graph(#[from] DagError),
    /// `only` names a unit that does not exist.
    #[error("the units selected to run include `{unit}`, which the pipeline does not have")]
    UnknownUnit {
        /// The name given.
        unit: String,
    },
    /// A non-idempotent unit was cut off mid-attempt (apollo died, was stopped, or the unit
    /// timed out): a human must decide.
    #[error(
        "unit `{unit}` (attempt {attempt}) {}, and it is not idempotent: its side effects may be half done",
        cut_off_text(*ended)
    )]
    NeedsVerdict {
        /// The unit.
        unit: String,
        /// The attempt that was cut off.
        attempt: u32,
        /// How it ended: `None` — it never did (apollo died while it ran);
        /// [`AttemptStatus::Interrupted`], [`AttemptStatus::TimedOut`], or
        /// [`AttemptStatus::Failed`] (killed by a signal apollo did not send).
        ended: Option<AttemptStatus>,
    },
    /// An attempt could not settle without a human ([`crate::NeedsHuman`]): a Slurm
    /// submission whose job cannot be found, or a job of an earlier attempt that still runs.
    #[error("unit `{unit}` (attempt {attempt}) needs a human: {reason}")]
    NeedsHuman {
        /// The unit.
        unit: String,
        /// The attempt.
        attempt: u32,
        /// What happened (the executor's words).
        reason: String,
        /// Whether the attempt was left in flight (no end recorded: a verdict settles it).
        left_in_flight: bool,
    },
    /// With [`OnInputChange::Fail`]: a unit that succeeded has different inputs (or outputs)
    /// now.
    #[error("unit `{unit}` succeeded earlier in this run but {}", changes.join(", "))]
    InputsChanged {
        /// The unit.
        unit: String,
        /// What changed.
        changes: Vec<String>,
    },
    /// With [`OnInputChange::Auto`]: a non-idempotent unit that succeeded has different inputs
    /// (or outputs) now; running it again needs a human's permission.
    #[error(
        "unit `{unit}` succeeded earlier in this run (attempt {attempt}) and is not idempotent, but {}",
        changes.join(", ")
    )]
    ChangedNeedsVerdict {
        /// The unit.
        unit: String,
        /// The attempt that succeeded.
        attempt: u32,
        /// What changed ("env FOO added", "upstream fetch output changed", "output x is
        /// missing").
        changes: Vec<String>,
    },
    /// Appending to the journal failed; running units were stopped.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// How a cut-off attempt ended, as words after "unit `x` (attempt n)".
fn cut_off_text(ended: Option<AttemptStatus>) -> &'static str {
    match ended {
        None => "was running when apollo stopped",
        Some(AttemptStatus::TimedOut) => "was cut off by its timeout",
        Some(AttemptStatus::Failed) => {
            "was cut off by a signal apollo did not send (killed from outside, out of memory, or its Slurm job ended without its result)"
        }
        Some(_) => "was interrupted when apollo was stopped (Ctrl-C or SIGTERM)",
    }
}
