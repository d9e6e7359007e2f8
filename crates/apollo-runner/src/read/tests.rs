//! The read side on a real run: it opens, lists, folds, tails and diffs without writing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use apollo_core::engine::NoObserver;
use apollo_core::{CancelToken, UnitState, config};
use apollo_exec::{ExecOptions, ProcessExecutor};
use apollo_store::StateDir;

use super::*;
use crate::{NoSessionObserver, Opened, RunSession, SweepError};

fn no_sweep(_: &RunId) -> Result<u32, SweepError> {
    Ok(0)
}

/// A project with one finished run of `talk` (stdout `hello\nworld\n`, stderr `oops\n`).
fn one_run() -> (tempfile::TempDir, StateDir, RunId) {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("pipe.yaml");
    std::fs::write(
        &config_path,
        "units:\n  - name: talk\n    execute: printf 'hello\\nworld\\n'; echo oops >&2\n",
    )
    .unwrap();
    let loaded = config::load(&config_path).unwrap();
    let sweep = no_sweep;
    let session = RunSession::new(dir.path().join(".apollo"), &config_path, &loaded, &sweep)
        .durability(apollo_store::Durability::None);
    let Opened::Ready(run) = session.open(&mut NoSessionObserver).unwrap() else {
        panic!("a new run");
    };
    let executor = ProcessExecutor::new(ExecOptions::default());
    let finished = run
        .run(
            &apollo_core::Dispatch::new(&executor),
            &mut NoObserver,
            &CancelToken::new(),
            &mut NoSessionObserver,
        )
        .unwrap();
    let state = open(&dir.path().join(".apollo")).unwrap().unwrap();
    (dir, state, finished.run_id)
}

#[test]
fn the_read_side_reads_a_run_without_writing() {
    let (dir, state, run) = one_run();
    assert!(
        open(dir.path()).unwrap().is_none(),
        "no runs/ folder, no state directory"
    );
    let index = state.path().join("index").join("runs");
    let index_before = index.exists();

    let mut cache = RunsCache::default();
    let now = chrono::Utc::now();
    let first: Vec<RunLine> = (cache.refresh(&state).unwrap().iter())
        .map(|entry| entry.line(None, now))
        .collect();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].counts.get(UnitState::Succeeded), 1);
    let again: Vec<RunLine> = (cache.refresh(&state).unwrap().iter())
        .map(|entry| entry.line(None, now))
        .collect();
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        serde_json::to_value(&first).unwrap(),
        "the second listing remembers"
    );
    assert_eq!(index.exists(), index_before, "listing wrote the runs index");
    // The same line as `apollo runs` gives.
    let runs = list_runs(&state, false).unwrap();
    let lines = run_lines(&state, &runs, now);
    assert_eq!(
        serde_json::to_value(&lines).unwrap(),
        serde_json::to_value(&first).unwrap()
    );
    assert_eq!(runs_document(&lines)["schema"], RUNS_SCHEMA);

    let model = run_model(&state, &run).unwrap();
    assert!(!model.timeline.live, "no apollo holds the lock");
    assert!(live_holder_pid(&state, &run).is_none());
    let unit = model.timeline.unit("talk").unwrap();
    assert_eq!(model.timeline.state_of(unit), UnitState::Succeeded);
    let summary = state.run_summary(&run).unwrap();
    assert_eq!(
        show_run_document(&run, &summary, &model.timeline, None)["schema"],
        SHOW_RUN_SCHEMA
    );
    let document = show_unit_document(&state, &run, (unit, UnitState::Succeeded), None, None, None);
    assert_eq!(document["attempts"][0]["state"], "succeeded");

    let end = tail(&state, &run, ("talk", 1), LogStream::Stdout, 6)
        .unwrap()
        .unwrap();
    assert_eq!((end.bytes.as_slice(), end.len), (&b"world\n"[..], 12));
    let whole = tail(&state, &run, ("talk", 1), LogStream::Stderr, 1 << 20)
        .unwrap()
        .unwrap();
    assert_eq!(whole.bytes, b"oops\n");
    assert!(
        tail(&state, &run, ("../x", 1), LogStream::Stdout, 6).is_err(),
        "not a folder name"
    );
    assert!(journal_len(&state, &run).unwrap() > 0);

    let (diff, warnings) = diff(&state, &run, &run).unwrap();
    assert!(diff.is_same() && warnings.is_empty());
    assert_eq!(run_started(&state, &run).unwrap().run_id, run.as_str());
    let definition = definition(&state, &run).unwrap();
    assert_eq!(definition.units[0].name, "talk");
    let recorded = recorded_files(&state, &run, "talk").unwrap();
    assert!(recorded.definition.is_some());
}
