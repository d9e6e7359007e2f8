//! Listing runs with their status, derived from each run's journal (no second source of truth).

use std::collections::BTreeMap;
use std::path::Path;

use apollo_core::Event;
use apollo_core::event::{AttemptStatus, RunFinished, RunKind, RunStatus, Verdict};
use chrono::{DateTime, Utc};

use crate::Record;
use crate::error::StoreError;
use crate::frame::FrameReader;
use crate::lock::LockHolder;
use crate::reader::{JournalReader, ReadOptions, StoredRecord};
use crate::record::decode_record;
use crate::run_id::RunId;
use crate::runs_index::RunsIndex;
use crate::segment::{data_end, list_segment_files, open_segment_for_read};
use crate::state_dir::StateDir;

/// Where a run stands, as its journal tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunState {
    /// No `run_finished` yet, and the apollo holding the state directory's lock is writing it.
    Running,
    /// No `run_finished` (apollo died, or was killed) and nobody is writing it: resumable.
    Incomplete,
    /// Finished: every unit succeeded or skipped itself.
    Succeeded,
    /// Finished: at least one unit failed for good.
    Failed,
    /// Finished: apollo was stopped by a signal.
    Interrupted,
    /// The journal could not be read (see [`RunSummary::problem`]).
    Corrupt,
    /// No `run_finished`, and the apollo that holds (or held) the lock is on another host of
    /// a network filesystem: a reader that never tries the lock
    /// ([`StateDir::never_locking`]) cannot tell whether it still writes the run.
    Unknown,
}

impl RunState {
    /// The state as shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Incomplete => "incomplete",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::Interrupted => "interrupted",
            RunState::Corrupt => "corrupt",
            RunState::Unknown => "unknown",
        }
    }

    /// Whether the run ended: its last `run_started`, `run_resumed` or `run_finished` is a
    /// `run_finished` (hooks and marks recorded after it change nothing).
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunState::Succeeded | RunState::Failed | RunState::Interrupted
        )
    }
}

/// One line of `apollo runs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// The run.
    pub id: RunId,
    /// The pipeline, from `run_started`.
    pub pipeline: Option<String>,
    /// The pipeline's stable identity, from `run_started` (`None` for a journal of format 1.0
    /// or 1.1, whose runs are identified by their pipeline name).
    pub identity: Option<String>,
    /// When `run_started` was written.
    pub started: Option<DateTime<Utc>>,
    /// When `run_finished` was written, if the run is finished.
    pub finished: Option<DateTime<Utc>>,
    /// The timestamp of the last record.
    pub last_record: Option<DateTime<Utc>>,
    /// The state.
    pub state: RunState,
    /// Units in the pipeline (from `run_started`).
    pub n_units: usize,
    /// Units that succeeded.
    pub succeeded: u32,
    /// Units reused from an earlier run (format 1.3), not counted in `succeeded`.
    pub reused: u32,
    /// Units that failed for good (or whose latest attempt failed, for an unfinished run).
    pub failed: u32,
    /// Units skipped.
    pub skipped: u32,
    /// SHA-256 of the definition snapshot blob, from `run_started`.
    pub definition_hash: Option<String>,
    /// Why the journal could not be read, for [`RunState::Corrupt`].
    pub problem: Option<String>,
    /// The run's params, from `run_started` (empty before format 1.3, or when the pipeline
    /// declares none).
    pub params: std::collections::BTreeMap<String, serde_json::Value>,
    /// What kind of run it is, from `run_started` ([`RunStarted::run_kind`]): a reproduction
    /// is never a pipeline's latest run and is left out of `stats`.
    ///
    /// [`RunStarted::run_kind`]: apollo_core::event::RunStarted::run_kind
    pub kind: RunKind,
    /// How its journal was made durable, from `run_started` (`fsync` before format 1.6).
    pub durability: apollo_core::Durability,
    /// How many of its units are in each state of the run model, when known: from the runs
    /// index for a finished run counted before, else from the caller of
    /// [`StateDir::list_runs_counted`] (the store does not fold journals into the model).
    pub counts: Option<apollo_core::UnitCounts>,
    /// The run's deadline, from `run_started` (journal format 1.9; `None` without one).
    pub deadline: Option<DateTime<Utc>>,
    /// A reproduction's verdict, from its `reproduction_compared` (journal format 1.11):
    /// `None` for other runs, and for a reproduction that did not get as far as comparing.
    pub reproduction: Option<apollo_core::event::ReproductionCompared>,
}

impl RunSummary {
    /// The pipeline this run is a run of: its identity (the config file's, DESIGN §18), or, for
    /// a run recorded without one (format 1.0/1.1), its name alone.
    pub fn pipeline_key(&self) -> (bool, &str) {
        match &self.identity {
            Some(identity) => (true, identity.as_str()),
            None => (false, self.pipeline.as_deref().unwrap_or("")),
        }
    }
}

/// The latest run of each pipeline among `summaries` (oldest first, as
/// [`StateDir::list_runs`] lists them: the state directory's creation order, never the clock).
/// The one rule of "latest" for retention and blob eviction: a reproduction is never a
/// pipeline's latest run (the runner's run selection and `latest~N` agree, see
/// `apollo_runner::selector`).
pub(crate) fn latest_runs(summaries: &[RunSummary]) -> std::collections::BTreeSet<&RunId> {
    let mut latest = std::collections::BTreeMap::new();
    for summary in summaries.iter().filter(|summary| summary.kind.is_run()) {
        latest.insert(summary.pipeline_key(), &summary.id);
    }
    latest.into_values().collect()
}

/// The first record of a run (its `run_started`), reading only the first segment's start.
pub(crate) fn first_record(run_dir: &Path) -> Result<Option<Record>, StoreError> {
    JournalReader::open(run_dir, ReadOptions::default())?
        .next()
        .transpose()
}

mod memo;
mod tail;
pub use memo::{Listed, RunsMemo};
pub(crate) use tail::tail;

/// Unit counts of an unfinished run — succeeded, failed, skipped, reused — from each unit's
/// latest outcome.
fn count_units(run_dir: &Path) -> Result<(u32, u32, u32, u32), StoreError> {
    #[derive(Clone, Copy)]
    enum Outcome {
        Succeeded,
        Failed,
        Skipped,
        Running,
        Reused,
    }
    let mut latest: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut reader = JournalReader::open(run_dir, ReadOptions::default())?;
    while let Some(stored) = reader.next_stored() {
        // The records a journal is mostly made of, undecoded (the same checks as decoding).
        let record = match stored? {
            StoredRecord::Verbatim(verbatim) => {
                let outcome = match verbatim.status() {
                    None => Outcome::Running,
                    Some("succeeded") => Outcome::Succeeded,
                    Some("skipped") => Outcome::Skipped,
                    Some(_) => Outcome::Failed,
                };
                latest.insert(verbatim.unit().to_owned(), outcome);
                continue;
            }
            StoredRecord::Decoded(record) => record,
        };
        let outcome = match &record.event {
            Event::UnitStarted(_) => Outcome::Running,
            Event::UnitFinished(finished) => match finished.status {
                AttemptStatus::Succeeded => Outcome::Succeeded,
                AttemptStatus::Skipped => Outcome::Skipped,
                _ => Outcome::Failed,
            },
            Event::UnitSkipped(_) => Outcome::Skipped,
            Event::UnitReused(_) => Outcome::Reused,
            Event::UnitMarked(marked) => match marked.verdict {
                Verdict::Succeeded => Outcome::Succeeded,
                Verdict::Failed => Outcome::Failed,
                // Allowing a rerun changes no outcome until the unit runs again.
                Verdict::Rerun => continue,
            },
            _ => continue,
        };
        if let Some(unit) = record.event.unit() {
            latest.insert(unit.to_owned(), outcome);
        }
    }
    let mut counts = (0, 0, 0, 0);
    for outcome in latest.values() {
        match outcome {
            Outcome::Succeeded => counts.0 += 1,
            Outcome::Failed => counts.1 += 1,
            Outcome::Skipped => counts.2 += 1,
            Outcome::Reused => counts.3 += 1,
            Outcome::Running => {}
        }
    }
    Ok(counts)
}

/// Whether the lock holder is another process writing run `id` (or an unknown run); for a
/// reader that never locks, any process, this one included.
pub(crate) fn held_for(holder: Option<&LockHolder>, id: &RunId) -> bool {
    match holder {
        Some(holder) if holder.for_reader || holder.pid != Some(std::process::id()) => {
            holder.run.as_deref().is_none_or(|run| run == id.as_str())
        }
        _ => false,
    }
}

pub(crate) fn summarize(
    state: &StateDir,
    id: &RunId,
    holder: Option<&LockHolder>,
    acknowledged: bool,
) -> RunSummary {
    summarize_counting(state, id, holder, acknowledged, true)
}

/// Why a run whose `run_started` was acknowledged (see [`StateDir::acknowledged_runs`]) has
/// no record to read.
pub(crate) const LOST_RECORDS: &str = "its journal holds no record, though its `run_started` was \
    acknowledged (the pipeline's `latest/` file names this run): the journal was cut back to \
    its segment header, emptied, or removed";

/// [`summarize`]; without `count`, an unfinished run's units are not counted (its counts stay
/// zero), which spares a pass that decodes its whole journal. An `acknowledged` run (see
/// [`StateDir::acknowledged_runs`]) with no record is [`RunState::Corrupt`].
fn summarize_counting(
    state: &StateDir,
    id: &RunId,
    holder: Option<&LockHolder>,
    acknowledged: bool,
    count: bool,
) -> RunSummary {
    let mut summary = RunSummary {
        id: id.clone(),
        pipeline: None,
        identity: None,
        started: None,
        finished: None,
        last_record: None,
        state: RunState::Incomplete,
        n_units: 0,
        succeeded: 0,
        reused: 0,
        failed: 0,
        skipped: 0,
        definition_hash: None,
        problem: None,
        params: std::collections::BTreeMap::new(),
        kind: RunKind::Run,
        durability: apollo_core::Durability::Fsync,
        counts: None,
        deadline: None,
        reproduction: None,
    };
    let run_dir = state.runs_dir().join(id.as_str());
    let result = (|| -> Result<(), StoreError> {
        let first = match first_record(&run_dir) {
            // The run folder itself gone (moved away meanwhile) is not found, not damage.
            Ok(None) | Err(StoreError::NotFound { .. }) if acknowledged && run_dir.is_dir() => {
                return Err(StoreError::corruption(
                    run_dir.join("journal"),
                    0,
                    None,
                    LOST_RECORDS,
                ));
            }
            first => first?,
        };
        if let Some(first) = first {
            summary.started = Some(first.ts);
            if let Event::RunStarted(started) = &first.event {
                summary.pipeline = Some(started.pipeline.clone());
                summary.identity = started.identity.clone();
                summary.n_units = started.units.len();
                summary.definition_hash = Some(started.definition_hash.clone());
                summary.params = started.params.clone();
                summary.kind = started.run_kind();
                summary.durability = started.durability;
                summary.deadline = (started.deadlines.as_ref())
                    .and_then(|deadlines| deadlines.run.as_deref())
                    .and_then(apollo_core::deadline::from_journal);
            }
        }
        let tail = tail(&run_dir)?;
        summary.last_record = tail.last_ts;
        summary.reproduction = tail.compared;
        match tail.finished {
            Some((ts, finished)) => {
                summary.finished = Some(ts);
                summary.state = match finished.status {
                    RunStatus::Succeeded => RunState::Succeeded,
                    RunStatus::Failed => RunState::Failed,
                    RunStatus::Interrupted => RunState::Interrupted,
                };
                summary.succeeded = finished.succeeded;
                summary.reused = finished.reused;
                summary.failed = finished.failed;
                summary.skipped = finished.skipped;
            }
            None => {
                summary.state = match holder {
                    Some(holder) if held_for(Some(holder), id) && holder.unverified => {
                        RunState::Unknown
                    }
                    _ if held_for(holder, id) => RunState::Running,
                    _ => RunState::Incomplete,
                };
                if count {
                    (
                        summary.succeeded,
                        summary.failed,
                        summary.skipped,
                        summary.reused,
                    ) = count_units(&run_dir)?;
                }
            }
        }
        Ok(())
    })();
    if let Err(error) = result {
        // A run being written may have no segment yet; that is not corruption.
        if !(held_for(holder, id) && matches!(error, StoreError::NotFound { .. })) {
            summary.state = RunState::Corrupt;
            summary.problem = Some(error.to_string());
        } else {
            summary.state = RunState::Running;
        }
    }
    summary
}

impl StateDir {
    /// Every run, oldest first (in creation order, see [`StateDir::run_ids`]), with its state derived from its journal: the first record of
    /// the first segment and the tail of the last one (a full read only for unfinished runs,
    /// to count their units). A journal that cannot be read gives [`RunState::Corrupt`] and
    /// the reason, not an error.
    ///
    /// A finished run whose journal is unchanged since an earlier listing comes from the runs
    /// index (`index/runs`, see `runs_index`) without opening its journal; what a listing reads
    /// from journals it adds there (when the state directory is writable).
    pub fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.list_runs_counted(&mut |_| None)
    }

    /// [`list_runs`](Self::list_runs), each run with its [`RunSummary::counts`]: from the
    /// runs index when it holds them for an unchanged finished run, else from `count` (the
    /// caller folds the run's journal into the run model). A finished run's counts are then
    /// kept in the index, under the same stamps as its summary, so a listing of many finished
    /// runs reads no journal.
    pub fn list_runs_counted(
        &self,
        count: &mut dyn FnMut(&RunId) -> Option<apollo_core::UnitCounts>,
    ) -> Result<Vec<RunSummary>, StoreError> {
        self.list_runs_counted_with(count, true)
    }

    /// [`list_runs_counted`](Self::list_runs_counted), keeping what it learned in the runs
    /// index only when `keep_index` is true. A reader that must never write into the state
    /// directory (`apollo serve`, a read-only `backup` copy) passes false: it still uses what
    /// the index holds, and reads the journals of the runs it lacks.
    pub fn list_runs_counted_with(
        &self,
        count: &mut dyn FnMut(&RunId) -> Option<apollo_core::UnitCounts>,
        keep_index: bool,
    ) -> Result<Vec<RunSummary>, StoreError> {
        let mut index = RunsIndex::load(self.path());
        let summaries = self.list_with_index(&mut index, count)?;
        if keep_index {
            index.save(self.path());
        }
        Ok(summaries)
    }

    fn list_with_index(
        &self,
        index: &mut RunsIndex,
        count: &mut dyn FnMut(&RunId) -> Option<apollo_core::UnitCounts>,
    ) -> Result<Vec<RunSummary>, StoreError> {
        let holder = self.lock_holder()?;
        let acknowledged = self.acknowledged_runs()?;
        let runs = self.ordered_runs(index)?;
        index.keep_only(&runs.iter().map(|run| run.id.clone()).collect::<Vec<_>>());
        let summaries = runs
            .into_iter()
            .map(|run| match run.cached {
                Some(summary) if !held_for(holder.as_ref(), &run.id) => *summary,
                _ => {
                    let run_dir = self.runs_dir().join(run.id.as_str());
                    let before = RunsIndex::stamps(&run_dir);
                    let summary = summarize(
                        self,
                        &run.id,
                        holder.as_ref(),
                        acknowledged.contains(&run.id),
                    );
                    let after = RunsIndex::stamps(&run_dir);
                    index.learn(&run_dir, run.sequence, &summary, before, after);
                    summary
                }
            })
            .collect::<Vec<RunSummary>>();
        let summaries = (summaries.into_iter())
            .map(|mut summary| {
                if summary.counts.is_none() {
                    summary.counts = count(&summary.id);
                    index.learn_counts(&summary.id, summary.counts);
                }
                summary
            })
            .collect();
        Ok(summaries)
    }

    /// The summary of one run.
    pub fn run_summary(&self, id: &RunId) -> Result<RunSummary, StoreError> {
        self.run_dir(id)?;
        let holder = self.lock_holder()?;
        let acknowledged = self.acknowledged_runs()?.contains(id);
        Ok(summarize(self, id, holder.as_ref(), acknowledged))
    }

    /// The state of one run ([`RunSummary::state`]) and, for a [`RunState::Corrupt`] one, what
    /// is wrong ([`RunSummary::problem`]): [`run_summary`](Self::run_summary) without counting
    /// an unfinished run's units, which would decode its whole journal (deciding whether to
    /// resume a run needs only its state).
    pub fn run_state(&self, id: &RunId) -> Result<(RunState, Option<String>), StoreError> {
        self.run_dir(id)?;
        let holder = self.lock_holder()?;
        let acknowledged = self.acknowledged_runs()?.contains(id);
        let summary = summarize_counting(self, id, holder.as_ref(), acknowledged, false);
        Ok((summary.state, summary.problem))
    }

    /// The newest run (in creation order, see [`StateDir::run_ids`]) whose `run_started` names
    /// the pipeline `pipeline`, whatever its identity, reading only each run's first record,
    /// newest first.
    pub fn latest_run(&self, pipeline: &str) -> Result<Option<RunId>, StoreError> {
        let summaries = self.list_runs()?;
        let named: Vec<RunSummary> = (summaries.into_iter())
            .filter(|summary| summary.pipeline.as_deref() == Some(pipeline))
            .collect();
        Ok(latest_runs(&named).into_iter().next_back().cloned())
    }
}
