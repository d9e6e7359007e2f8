//! The read side of a state directory (DESIGN §18 "Where the read side lives"): everything a
//! view of runs needs — the CLI's `runs`, `show`, `logs` and `diff`, `apollo serve` — without
//! the lock and without writing.
//!
//! apollo-replay folds records into the run model ([`Timeline`]) and knows no files; this
//! module does the I/O around it: it opens a state directory, lists its runs with the model's
//! counts, reads a run's journal into the model with [`Timeline::live`] set from whether the
//! apollo writing it is alive, finds an attempt's captured output, and compares two runs. A
//! view never reads a journal or builds a run's path itself: it calls these.
//!
//! ```no_run
//! use apollo_runner::RunSelector;
//! use apollo_runner::read;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let state = read::open(".apollo".as_ref())?.ok_or("no state directory here")?;
//! let run = "latest".parse::<RunSelector>()?.resolve(&state)?;
//! let model = read::run_model(&state, &run)?;
//! println!("{run}: {} units, live: {}", model.timeline.units.len(), model.timeline.live);
//! # Ok(())
//! # }
//! ```

mod cost;
mod documents;
mod files;
mod runs_cache;
mod stats;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use apollo_core::event::{Event, RunStarted};
use apollo_store::{JournalReader, ReadOptions, RunId, RunSummary, StateDir, StoreError, Warning};

pub use apollo_replay::RunCost;
pub use apollo_replay::{Attempt, AttemptState, RunDiff, Timeline, UnitTimeline};
pub use apollo_store::AttemptDir;
pub use cost::{CostReads, UnitCostStats, run_cost, unit_cost_stats};
pub use documents::{
    RUNS_SCHEMA, RunLine, SHOW_RUN_SCHEMA, SHOW_UNIT_SCHEMA, add_costs, deadline_json,
    run_cost_json, run_lines, runs_document, show_run_document, show_unit_document,
};
pub use files::{
    LogStream, RecordedFiles, Tail, attempt_dir, journal_len, recorded_files, runs_fingerprint,
    tail,
};
pub use runs_cache::{RunEntry, RunsCache};
pub use stats::{UnitStats, timeouts, unit_stats};

/// Opens the state directory at `path` for reading, creating nothing and taking no lock.
/// `None` when there is no state directory there (no `runs/` folder).
pub fn open(path: &Path) -> Result<Option<StateDir>, StoreError> {
    if !path.join("runs").is_dir() {
        return Ok(None);
    }
    StateDir::open_existing(path).map(Some)
}

/// [`open`] for a long-lived reader polling beside a writer (`apollo serve`): the handle
/// never takes or tries the lock, not even on a network filesystem, where `/proc/locks`
/// cannot say whether an apollo on another host holds it ([`StateDir::never_locking`]):
/// the holder recorded in the lock file answers — its pid when it is on this host — and a
/// run whose writer cannot be checked from here is [`apollo_store::RunState::Unknown`].
pub fn open_never_locking(path: &Path) -> Result<Option<StateDir>, StoreError> {
    Ok(open(path)?.map(StateDir::never_locking))
}

/// The runs of `state`, oldest first, each with the run model's counts
/// ([`RunSummary::counts`]): from the runs index for a finished run counted before, else
/// folded from its journal. With `keep_index`, what the listing learned is kept in the runs
/// index (the CLI's `apollo runs`); a reader that never writes into the state directory
/// (`apollo serve`) passes false.
pub fn list_runs(state: &StateDir, keep_index: bool) -> Result<Vec<RunSummary>, StoreError> {
    state.list_runs_counted_with(
        &mut |id| {
            run_model(state, id)
                .ok()
                .map(|model| model.timeline.counts())
        },
        keep_index,
    )
}

/// The pid of the apollo holding the state directory's lock now (writing a run), if one is.
pub fn writer_pid(state: &StateDir) -> Option<u32> {
    state
        .lock_holder()
        .ok()
        .flatten()
        .and_then(|holder| holder.pid)
}

/// The pid of the apollo writing `run` now, if one is (`Some(0)` when the lock's holder did
/// not record its pid).
pub fn live_holder_pid(state: &StateDir, run: &RunId) -> Option<u32> {
    let holder = state.lock_holder().ok()??;
    if holder
        .run
        .as_deref()
        .is_some_and(|holder_run| holder_run != run.as_str())
    {
        return None;
    }
    holder.pid.or(Some(0))
}

/// A reader of every record of a run, and the run's folder.
pub fn read_records(
    state: &StateDir,
    run: &RunId,
    options: ReadOptions,
) -> Result<(JournalReader, PathBuf), StoreError> {
    let run_dir = state.run_dir(run)?;
    let path = run_dir.path().to_path_buf();
    let reader = JournalReader::open(&path, options)?;
    Ok((reader, path))
}

/// A run's model and what reading its journal noticed.
#[derive(Debug)]
#[non_exhaustive]
pub struct RunModel {
    /// The run model: the journal folded once, with [`Timeline::live`] set from the state
    /// directory's lock.
    pub timeline: Timeline,
    /// Torn tails and salvaged records the reader stepped over (a view shows them).
    pub warnings: Vec<Warning>,
    /// The pipeline hooks that ran (`hook_finished`), in journal order.
    pub hooks: Vec<apollo_core::event::HookFinished>,
}

/// The run model of `run` ([`RunModel`]). Every view that shows a run's states or counts
/// renders this.
pub fn run_model(state: &StateDir, run: &RunId) -> Result<RunModel, StoreError> {
    let (mut reader, _) = read_records(state, run, ReadOptions::default())?;
    let mut hooks = Vec::new();
    let mut timeline = Timeline::from_records(reader.by_ref().inspect(|record| {
        if let Ok(record) = record
            && let Event::HookFinished(hook) = &record.event
        {
            hooks.push(hook.clone());
        }
    }))?;
    timeline.live = live_holder_pid(state, run).is_some();
    if timeline.may_await_verdict() {
        timeline.set_not_idempotent(not_idempotent(state, run).iter().map(String::as_str));
    }
    Ok(RunModel {
        timeline,
        warnings: reader.take_warnings(),
        hooks,
    })
}

/// The run model of a run whose engine this process has just stopped (the run ended, or a
/// resume was refused before anything ran): [`run_model`], with nothing of the run running
/// although the lock may still be held by this process. What a run's end reports (its
/// summary, the hook summary) when the engine gave no report of its own.
pub fn stopped_run_model(state: &StateDir, run: &RunId) -> Result<RunModel, StoreError> {
    let mut model = run_model(state, run)?;
    model.timeline.live = false;
    Ok(model)
}

/// The definition snapshot `run` started with (the resolved pipeline: commands, env,
/// workdirs, deps), when its blob is still kept and reads.
pub fn definition(state: &StateDir, run: &RunId) -> Option<apollo_core::Pipeline> {
    let started = run_started(state, run).ok()?;
    let bytes = state.read_blob(&started.definition_hash).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The definition snapshot `run` last used, as stored (the one its latest `run_started` or
/// `run_resumed` names; `apollo show RUN --definition`); `None` when no record names one.
pub fn last_definition_snapshot(
    state: &StateDir,
    run: &RunId,
) -> Result<Option<Vec<u8>>, StoreError> {
    let (reader, _) = read_records(state, run, ReadOptions::default())?;
    let mut hash = None;
    for record in reader {
        match record?.event {
            Event::RunStarted(started) => hash = Some(started.definition_hash),
            Event::RunResumed(resumed) => hash = Some(resumed.definition_hash),
            _ => {}
        }
    }
    hash.map(|hash| state.read_blob(&hash)).transpose()
}

/// The units of `run`'s definition that are `idempotent: false` (none when the definition's
/// blob is gone: the run model then shows their cut-off attempts as cut off), read without
/// building the whole pipeline.
fn not_idempotent(state: &StateDir, run: &RunId) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct UnitsOnly {
        units: Vec<UnitOnly>,
    }
    #[derive(serde::Deserialize)]
    struct UnitOnly {
        name: String,
        #[serde(default = "idempotent_by_default")]
        idempotent: bool,
    }
    fn idempotent_by_default() -> bool {
        true
    }
    let Some(bytes) = run_started(state, run)
        .ok()
        .and_then(|started| state.read_blob(&started.definition_hash).ok())
    else {
        return Vec::new();
    };
    serde_json::from_slice::<UnitsOnly>(&bytes)
        .map(|definition| definition.units)
        .unwrap_or_default()
        .into_iter()
        .filter(|unit| !unit.idempotent)
        .map(|unit| unit.name)
        .collect()
}

/// The `run_started` event of a run.
pub fn run_started(state: &StateDir, run: &RunId) -> Result<RunStarted, StoreError> {
    let (mut reader, path) = read_records(state, run, ReadOptions::default())?;
    if let Some(record) = reader.next()
        && let Event::RunStarted(started) = record?.event
    {
        return Ok(started);
    }
    Err(StoreError::Corruption {
        path,
        offset: 0,
        seq: Some(1),
        what: "the run's first record is not `run_started`".to_owned(),
    })
}

/// Two runs compared unit by unit (`apollo diff A B`), and what reading their journals
/// noticed. Input lists too large for a record are read from their run's manifest files; a
/// command that changed only because values are now quoted says so.
pub fn diff(
    state: &StateDir,
    run_a: &RunId,
    run_b: &RunId,
) -> Result<(RunDiff, Vec<Warning>), StoreError> {
    let (mut reader_a, _) = read_records(state, run_a, ReadOptions::default())?;
    let (mut reader_b, _) = read_records(state, run_b, ReadOptions::default())?;
    // Input lists too large for a record are in their run's manifest files; a run an apollo
    // is writing now shows its unfinished units running.
    let manifests = DiffReads {
        run_dirs: [run_a, run_b].map(|run| state.run_path(run)),
        live: [run_a, run_b].map(|run| live_holder_pid(state, run).is_some()),
    };
    let mut diff =
        apollo_replay::diff_records_with_manifests(&mut reader_a, &mut reader_b, &manifests)?;
    // A command that changed only because values are now quoted says so (DESIGN §18): read
    // run B's definition only when a command changed.
    let command_changed = diff.units.iter().any(|unit| {
        (unit.input_changes.iter())
            .any(|change| change.kind == apollo_core::event::InputKind::Command)
    });
    if command_changed && let Some(commands) = files::definition_commands(state, run_b) {
        diff.mark_quoting_changes(&|unit, phase| {
            commands.get(&(unit.to_owned(), phase.to_owned())).cloned()
        });
        // And what each command was and is (`param threshold: 60 → 70` shows in the command).
        let before = files::definition_commands(state, run_a).unwrap_or_default();
        diff.describe_commands(&|side, unit, phase| {
            let commands = if side == apollo_replay::Side::A {
                &before
            } else {
                &commands
            };
            commands.get(&(unit.to_owned(), phase.to_owned())).cloned()
        });
    }
    let mut warnings = reader_a.take_warnings();
    warnings.extend(reader_b.take_warnings());
    Ok((diff, warnings))
}

/// What [`diff`] reads besides the two journals: their input manifests, and whether an apollo
/// is writing each run now.
struct DiffReads {
    run_dirs: [std::path::PathBuf; 2],
    live: [bool; 2],
}

impl apollo_replay::ManifestLoader for DiffReads {
    fn load(
        &self,
        side: apollo_replay::Side,
        reference: &apollo_core::event::InputManifestRef,
    ) -> Result<Vec<apollo_core::event::InputComponent>, String> {
        let index = usize::from(side != apollo_replay::Side::A);
        apollo_store::read_input_manifest(&self.run_dirs[index], reference)
            .map_err(|error| error.to_string())
    }

    fn is_live(&self, side: apollo_replay::Side) -> bool {
        self.live[usize::from(side != apollo_replay::Side::A)]
    }
}
