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

/// Format 1.3 adds `unit_reused` and the `reused` count of `run_finished`: both read back as
/// written, and a `run_finished` written before 1.3 (no `reused`) reads as 0 reused.
#[test]
fn a_format_1_3_unit_reused_record_round_trips_and_older_run_finished_reads_as_none_reused() {
    use apollo_core::event::{InputComponent, InputKind, RunFinished, RunStatus, UnitReused};
    use apollo_store::JournalWriter;

    let dir = tempfile::tempdir().unwrap();
    let reused = Event::UnitReused(UnitReused {
        unit: "fetch".into(),
        from_run: "20261130T021507Z-3f9a".into(),
        from_attempt: 2,
        input_hash: "a".repeat(64),
        inputs: vec![InputComponent {
            kind: InputKind::File,
            name: "data/raw.csv".into(),
            hash: "b".repeat(64),
        }],
        output_hash: "c".repeat(64),
    });
    let finished = Event::RunFinished(RunFinished {
        status: RunStatus::Succeeded,
        succeeded: 1,
        failed: 0,
        skipped: 0,
        reused: 1,
    });
    let mut writer =
        JournalWriter::create(dir.path(), "20261201T000000Z-0001", crate::support::fast()).unwrap();
    writer
        .append_batch(&[reused.clone(), finished.clone()])
        .unwrap();
    drop(writer);
    let (records, _) = read_all(dir.path(), ReadOptions::default());
    let events: Vec<Event> = records
        .unwrap()
        .into_iter()
        .map(|record| record.event)
        .collect();
    assert_eq!(events, [reused, finished]);

    let old: RunFinished =
        serde_json::from_str(r#"{"status":"succeeded","succeeded":2,"failed":0,"skipped":0}"#)
            .unwrap();
    assert_eq!(old.reused, 0);
}
