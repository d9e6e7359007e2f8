//! The run folders of an iteration, as the harness orders and reads them.

use std::path::{Path, PathBuf};

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
