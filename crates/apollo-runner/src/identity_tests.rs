//! Run selection by the state directory's creation order and the pipeline's stable identity
//! (issue 12, deliverable 1).

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use std::path::{Path, PathBuf};

use apollo_core::event::{Event, RunFinished, RunStarted, RunStatus};
use apollo_core::{Loaded, config};
use apollo_store::{Durability, JournalWriter, RunId, StateDir, WriterOptions};

use crate::{NoSessionObserver, NoStraySweep, Opened, Opening, RunSession, RunTarget, RunnerError};

const PIPELINE: &str = "units:\n  - name: a\n    execute: 'true'\n";

/// A config file at `path` (its folders created) and the pipeline loaded from it.
fn config_at(path: &Path, text: &str) -> Loaded {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    config::load(path).unwrap()
}

fn session<'a>(state_dir: &Path, config_path: &Path, loaded: &'a Loaded) -> RunSession<'a> {
    RunSession::new(state_dir, config_path, loaded, &NoStraySweep).durability(Durability::None)
}

/// Opens a session and leaves its run incomplete (nothing run after `run_started` or
/// `run_resumed`); returns the run and whether it was started or resumed.
fn open_and_drop(session: RunSession<'_>) -> Result<(RunId, Opening), RunnerError> {
    match session.open(&mut NoSessionObserver)? {
        Opened::Ready(run) => Ok((run.run_id().clone(), run.opening())),
        Opened::NothingToResume(run) => panic!("nothing to resume in {run}"),
    }
}

/// Writes a finished run of `pipeline` whose id says it started at `started` (a clock ahead).
fn write_finished_run(
    state_dir: &Path,
    id: &RunId,
    pipeline: &str,
    identity: Option<String>,
    status: Option<RunStatus>,
) {
    let state = StateDir::open_or_create(state_dir).unwrap();
    let run = state.create_run(id).unwrap();
    let options = WriterOptions::default().durability(Durability::None);
    let mut writer = JournalWriter::create(run.path(), id.as_str(), options).unwrap();
    let mut events = vec![Event::RunStarted(RunStarted {
        run_id: id.to_string(),
        pipeline: pipeline.to_owned(),
        config_path: "/elsewhere/pipeline.yaml".to_owned(),
        config_hash: "0".repeat(64),
        definition_hash: "0".repeat(64),
        apollo_version: "0.0.0".to_owned(),
        host: "test".to_owned(),
        pid: 1,
        units: vec!["a".to_owned()],
        identity,
        params: Default::default(),
        run_kind: apollo_core::event::RunKind::Run,
        durability: apollo_core::Durability::Fsync,
        deadlines: None,
    })];
    if let Some(status) = status {
        events.push(Event::RunFinished(RunFinished {
            status,
            succeeded: 1,
            failed: 0,
            skipped: 0,
            reused: 0,
        }));
    }
    writer.append_batch(&events).unwrap();
}

#[test]
fn after_the_clock_steps_back_the_incomplete_run_is_still_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join(".apollo");
    let config_path = dir.path().join("pipeline.yaml");
    let loaded = config_at(&config_path, PIPELINE);
    let identity = session(&state_dir, &config_path, &loaded).identity();
    // A run made while the clock was far ahead, which succeeded.
    let state = StateDir::open_or_create(&state_dir).unwrap();
    let ahead: RunId = "29991231T235959Z-0001".parse().unwrap();
    write_finished_run(
        &state_dir,
        &ahead,
        "pipeline",
        Some(identity),
        Some(RunStatus::Succeeded),
    );
    // The clock stepped back: the next run's id sorts before it, and the run is cut off.
    let (cut_off, opening) = open_and_drop(session(&state_dir, &config_path, &loaded)).unwrap();
    assert_eq!(opening, Opening::Started);
    assert!(cut_off < ahead, "the id sorts by the (stepped back) clock");
    assert_eq!(
        state.run_ids().unwrap(),
        vec![ahead.clone(), cut_off.clone()]
    );
    // It is still the latest run, and `apollo run` resumes it.
    let (resumed, opening) = open_and_drop(session(&state_dir, &config_path, &loaded)).unwrap();
    assert_eq!((resumed, opening), (cut_off, Opening::Resumed));
}

#[test]
fn two_config_files_of_one_name_never_resume_each_others_runs() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join(".apollo");
    // Both are named `pipeline` (the file stem).
    let config_a = dir.path().join("a/pipeline.yaml");
    let config_b = dir.path().join("b/pipeline.yaml");
    let loaded_a = config_at(&config_a, PIPELINE);
    let loaded_b = config_at(&config_b, PIPELINE);
    assert_ne!(
        session(&state_dir, &config_a, &loaded_a).identity(),
        session(&state_dir, &config_b, &loaded_b).identity()
    );
    let (run_a, _) = open_and_drop(session(&state_dir, &config_a, &loaded_a)).unwrap();

    // B has no run; A's unfinished run of the same name is neither resumed nor skipped.
    let error = open_and_drop(session(&state_dir, &config_b, &loaded_b)).unwrap_err();
    match &error {
        RunnerError::IdentityMismatch {
            run,
            recorded_config,
            config,
            ..
        } => {
            assert_eq!(run, &run_a);
            assert!(recorded_config.ends_with("a/pipeline.yaml"), "{error}");
            assert!(config.ends_with("b/pipeline.yaml"), "{error}");
        }
        other => panic!("expected IdentityMismatch, got {other:?}"),
    }
    // `Fresh` starts B's own run; from then on each resumes its own.
    let (run_b, opening) =
        open_and_drop(session(&state_dir, &config_b, &loaded_b).target(RunTarget::Fresh)).unwrap();
    assert_eq!(opening, Opening::Started);
    let (again_b, opening) = open_and_drop(session(&state_dir, &config_b, &loaded_b)).unwrap();
    assert_eq!((&again_b, opening), (&run_b, Opening::Resumed));
    let (again_a, opening) = open_and_drop(session(&state_dir, &config_a, &loaded_a)).unwrap();
    assert_eq!((&again_a, opening), (&run_a, Opening::Resumed));
}

#[test]
fn a_project_moved_with_its_state_directory_keeps_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("old");
    let config_path = project.join("pipeline.yaml");
    let loaded = config_at(&config_path, PIPELINE);
    let (run, _) = open_and_drop(session(&project.join(".apollo"), &config_path, &loaded)).unwrap();
    let moved = dir.path().join("new");
    std::fs::rename(&project, &moved).unwrap();
    let config_path = moved.join("pipeline.yaml");
    let loaded = config::load(&config_path).unwrap();
    let (resumed, opening) =
        open_and_drop(session(&moved.join(".apollo"), &config_path, &loaded)).unwrap();
    assert_eq!((resumed, opening), (run, Opening::Resumed));
}

#[test]
fn an_explicit_id_names_the_pipeline_wherever_its_config_is() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join(".apollo");
    let text = format!("id: nightly-etl\n{PIPELINE}");
    let first: PathBuf = dir.path().join("pipeline.yaml");
    let loaded = config_at(&first, &text);
    assert_eq!(
        session(&state_dir, &first, &loaded).identity(),
        "id:nightly-etl"
    );
    let (run, _) = open_and_drop(session(&state_dir, &first, &loaded)).unwrap();
    let second = dir.path().join("moved/elsewhere.yaml");
    let loaded = config_at(&second, &text.replace("units:", "name: pipeline\nunits:"));
    let (resumed, opening) = open_and_drop(session(&state_dir, &second, &loaded)).unwrap();
    assert_eq!((resumed, opening), (run, Opening::Resumed));
}

#[test]
fn a_run_recorded_before_identities_is_identified_by_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join(".apollo");
    let config_path = dir.path().join("pipeline.yaml");
    let loaded = config_at(&config_path, PIPELINE);
    let state = StateDir::open_or_create(&state_dir).unwrap();
    let legacy = state.new_run_id();
    // Unfinished, no identity (format 1.1).
    write_finished_run(&state_dir, &legacy, "pipeline", None, None);
    let (resumed, opening) = open_and_drop(session(&state_dir, &config_path, &loaded)).unwrap();
    assert_eq!((resumed, opening), (legacy, Opening::Resumed));
    // A run of another name (no identity either) is not this pipeline's.
    let other = dir.path().join("other.yaml");
    let loaded_other = config_at(&other, PIPELINE);
    let (run, opening) = open_and_drop(session(&state_dir, &other, &loaded_other)).unwrap();
    assert_eq!(opening, Opening::Started);
    assert!(state.run_ids().unwrap().contains(&run));
}
