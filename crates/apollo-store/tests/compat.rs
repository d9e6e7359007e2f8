//! Compatibility: a state directory written by the first released journal format (1.0, wave 1)
//! stays readable by this build (DESIGN §17). The fixture under `tests/fixtures/format-1.0/` is
//! the real state directory of a two-unit run made by that apollo: `transform` failed, and the
//! run was resumed and succeeded. It is never regenerated: it is what users have on disk.

use std::path::{Path, PathBuf};

use apollo_core::Event;
use apollo_store::{ReadOptions, RunId, RunState, StateDir, verify};

use crate::support::{copy_dir, read_all};

const RUN: &str = "20261201T063045Z-2075";

/// A private copy of the fixture, so that nothing a reader might write touches the original.
fn fixture_state_dir(into: &Path) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format-1.0");
    let state = into.join(".apollo");
    copy_dir(&fixture.join("runs"), &state.join("runs"));
    copy_dir(&fixture.join("blobs"), &state.join("blobs"));
    state
}

#[test]
fn a_format_1_0_journal_reads_record_by_record() {
    let dir = tempfile::tempdir().unwrap();
    let state = fixture_state_dir(dir.path());
    let (records, warnings) = read_all(&state.join("runs").join(RUN), ReadOptions::default());
    let records = records.unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let kinds: Vec<&str> = records
        .iter()
        .map(|record| match &record.event {
            Event::RunStarted(_) => "run_started",
            Event::RunResumed(_) => "run_resumed",
            Event::UnitStarted(_) => "unit_started",
            Event::UnitFinished(_) => "unit_finished",
            Event::RunFinished(_) => "run_finished",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "unit_started",
            "unit_finished",
            "unit_started",
            "unit_finished",
            "run_finished",
            "run_resumed",
            "unit_started",
            "unit_finished",
            "run_finished",
        ]
    );
    let seqs: Vec<u64> = records.iter().map(|record| record.seq).collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<u64>>());
    // `params` (format 1.3) is absent from a 1.0 `run_started`: the run had none.
    let Event::RunStarted(started) = &records[0].event else {
        panic!("the first record is run_started");
    };
    assert!(started.params.is_empty(), "{:?}", started.params);
}

#[test]
fn a_format_1_0_state_directory_verifies_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let state = fixture_state_dir(dir.path());
    let report = verify(&state.join("runs").join(RUN)).unwrap();
    assert!(report.corruptions.is_empty(), "{:?}", report.corruptions);
    assert!(report.torn_tail.is_none(), "{:?}", report.torn_tail);
    assert_eq!((report.n_segments, report.n_records), (1, 10));

    let state = StateDir::open_existing(&state).unwrap();
    let runs = state.list_runs().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    assert_eq!(run.id, RUN.parse::<RunId>().unwrap());
    assert_eq!(run.pipeline.as_deref(), Some("wave1"));
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert_eq!((run.n_units, run.succeeded, run.failed), (2, 2, 0));
}
