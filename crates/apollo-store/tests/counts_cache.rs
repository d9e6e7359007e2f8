//! The runs index keeps the run model's counts of a finished run (`list_runs_counted`): a
//! listing of many finished runs counts each once, and a run that changes is counted again.

use apollo_core::UnitState;
use apollo_core::event::RunStatus;
use apollo_store::{JournalWriter, RunId, StateDir};

use crate::support::*;

fn finished_run(state: &StateDir, id: &str) -> RunId {
    let id: RunId = id.parse().unwrap();
    let run = state.create_run(&id).unwrap();
    let mut writer = JournalWriter::create(run.path(), id.as_str(), fast()).unwrap();
    writer
        .append_batch(&[run_started(id.as_str(), "etl")])
        .unwrap();
    writer
        .append_batch(&[run_finished(RunStatus::Succeeded)])
        .unwrap();
    id
}

#[test]
fn a_finished_run_is_counted_once_and_again_when_its_journal_changes() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let id = finished_run(&state, "20261203T010000Z-0001");
    let folds = std::cell::Cell::new(0);
    let mut count = |_: &RunId| {
        folds.set(folds.get() + 1);
        Some(
            [UnitState::Succeeded, UnitState::Skipped]
                .into_iter()
                .collect(),
        )
    };
    let first = state.list_runs_counted(&mut count).unwrap();
    let second = state.list_runs_counted(&mut count).unwrap();
    assert_eq!(
        folds.get(),
        1,
        "the second listing read the counts from the index"
    );
    assert_eq!(first, second);
    let counts = second[0].counts.unwrap();
    assert_eq!(counts.get(UnitState::Skipped), 1);

    // A resume changes the journal: the cached counts are not used.
    let (mut writer, _) =
        JournalWriter::open_for_append(state.run_dir(&id).unwrap().path(), fast()).unwrap();
    writer
        .append_batch(&[run_finished(RunStatus::Succeeded)])
        .unwrap();
    drop(writer);
    state.list_runs_counted(&mut count).unwrap();
    assert_eq!(folds.get(), 2);
}
