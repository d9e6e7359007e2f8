//! The run folders of an iteration, as the harness orders and reads them.

use std::path::{Path, PathBuf};

use apollo_core::event::{Event, RunStatus};
use apollo_store::{JournalReader, ReadOptions};

/// The latest run folder that has a journal (by name, as the rest of the harness orders).
pub(super) fn latest_run_dir(dir: &Path) -> Result<Option<PathBuf>, String> {
    let runs_dir = dir.join(".apollo/runs");
    let mut runs: Vec<PathBuf> = match std::fs::read_dir(&runs_dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|run| has_segment(run) && has_record(run))
            .collect(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("{}: {error}", runs_dir.display())),
    };
    runs.sort();
    Ok(runs.pop())
}

/// The latest run after `floor` (all runs without one). In a reuse phase the harness moves only
/// the phase's own run away: moving the first phase's run (before the new one has a record)
/// takes away what reuse reads, and a miss is then the right answer (seed 5, iteration 14).
pub(super) fn latest_run_after(
    dir: &Path,
    floor: Option<&Path>,
) -> Result<Option<PathBuf>, String> {
    let latest = latest_run_dir(dir)?;
    Ok(latest.filter(|run| floor.is_none_or(|floor| run.as_path() > floor)))
}

/// Whether `run` has a segment file (a run whose creation a kill cut short has none, and
/// apollo ignores it).
pub(super) fn has_segment(run: &Path) -> bool {
    std::fs::read_dir(run.join("journal")).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|entry| entry.file_name().to_string_lossy().ends_with(".log"))
    })
}

/// Whether `run`'s journal holds a record (a run killed before its `run_started` was written
/// holds a header only, and apollo does not count it as a run).
pub(super) fn has_record(run: &Path) -> bool {
    JournalReader::open(run, ReadOptions::default()).is_ok_and(|mut reader| reader.next().is_some())
}

/// The numbers a unit appended to one of its counts files (one per line).
pub(super) fn lines_of(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .map(|text| {
            text.lines()
                .filter_map(|line| line.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the latest run's journal ends with a `run_finished` (of any status).
pub(super) fn latest_run_finished(dir: &Path) -> Result<bool, String> {
    let Some(latest) = latest_run_dir(dir)? else {
        return Ok(false);
    };
    let reader = JournalReader::open(&latest, ReadOptions::default())
        .map_err(|error| format!("{}: {error}", latest.display()))?;
    let mut finished = false;
    for record in reader {
        let record = record.map_err(|error| format!("{}: {error}", latest.display()))?;
        match record.event {
            Event::RunFinished(_) => finished = true,
            Event::RunResumed(_) => finished = false,
            _ => {}
        }
    }
    Ok(finished)
}

/// Whether the latest run's journal ends with `run_finished` succeeded (read without
/// modifying it: a torn tail is left for apollo to cut).
pub(super) fn latest_run_succeeded(dir: &Path, floor: Option<&Path>) -> Result<bool, String> {
    let runs_dir = dir.join(".apollo/runs");
    let mut runs: Vec<PathBuf> = match std::fs::read_dir(&runs_dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|run| run.join("journal").exists())
            .collect(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(format!("{}: {error}", runs_dir.display())),
    };
    runs.sort();
    // A run of an earlier phase (a run that completed before) is not this phase's.
    let Some(latest) = runs
        .last()
        .filter(|latest| floor.is_none_or(|floor| *latest > floor))
    else {
        return Ok(false);
    };
    let reader = JournalReader::open(latest, ReadOptions::default())
        .map_err(|error| format!("{}: {error}", latest.display()))?;
    let mut succeeded = false;
    for record in reader {
        let record = record.map_err(|error| format!("{}: {error}", latest.display()))?;
        match record.event {
            Event::RunFinished(event) => succeeded = event.status == RunStatus::Succeeded,
            Event::RunResumed(_) => succeeded = false,
            _ => {}
        }
    }
    Ok(succeeded)
}
