//! The executors a run gets from its [`ExecutorFactory`]: asked for per kind of unit, only for
//! the kinds the pipeline names, and a missing one refused before any unit starts.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use std::sync::Mutex;

use apollo_core::engine::NoObserver;
use apollo_core::event::{AttemptStatus, Event, RunStatus};
use apollo_core::model::ExecutorKind;
use apollo_core::{
    AttemptContext, AttemptOutcome, AttemptRequest, CancelToken, Executor, ExecutorFactory, config,
};
use apollo_store::{Durability, JournalReader, ReadOptions, StateDir};

use crate::{NoSessionObserver, NoStraySweep, Opened, RunSession, RunnerError};

/// Succeeds at every attempt, noting the units it ran.
#[derive(Default)]
struct Noting(Mutex<Vec<String>>);

impl Executor for Noting {
    fn run_attempt(&self, request: &AttemptRequest<'_>, _: &AttemptContext<'_>) -> AttemptOutcome {
        self.0.lock().unwrap().push(request.unit.name.clone());
        AttemptOutcome::nothing_ran(AttemptStatus::Succeeded)
    }
}

/// A factory with a local executor only, noting every kind it is asked for.
#[derive(Default)]
struct LocalOnly {
    local: Noting,
    asked: Mutex<Vec<ExecutorKind>>,
}

impl ExecutorFactory for LocalOnly {
    fn executor(&self, kind: ExecutorKind) -> Option<&dyn Executor> {
        self.asked.lock().unwrap().push(kind);
        (kind == ExecutorKind::Local).then_some(&self.local as &dyn Executor)
    }
}

/// Opens a new run of `yaml` and runs it with `executors`; the state directory too.
fn run_with(
    yaml: &str,
    executors: &dyn ExecutorFactory,
) -> (tempfile::TempDir, Result<crate::FinishedRun, RunnerError>) {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("pipe.yaml");
    std::fs::write(&config_path, yaml).unwrap();
    let loaded = config::load(&config_path).unwrap();
    let session = RunSession::new(
        dir.path().join(".apollo"),
        &config_path,
        &loaded,
        &NoStraySweep,
    )
    .durability(Durability::None);
    let Ok(Opened::Ready(run)) = session.open(&mut NoSessionObserver) else {
        panic!("expected a new run");
    };
    let result = run.run(
        executors,
        &mut NoObserver,
        &CancelToken::new(),
        &mut NoSessionObserver,
    );
    (dir, result)
}

#[test]
fn local_units_run_on_the_factorys_local_executor_and_slurm_is_never_asked_for() {
    let executors = LocalOnly::default();
    let (_dir, result) = run_with(
        "units:\n  - {name: a, execute: 'true'}\n  - {name: b, deps: [a], execute: 'true'}\n",
        &executors,
    );
    assert_eq!(result.unwrap().report.status, Some(RunStatus::Succeeded));
    assert_eq!(*executors.local.0.lock().unwrap(), ["a", "b"]);
    assert_eq!(*executors.asked.lock().unwrap(), [ExecutorKind::Local]);
}

#[test]
fn a_slurm_unit_without_a_slurm_executor_is_refused_before_any_unit_starts() {
    let executors = LocalOnly::default();
    let (dir, result) = run_with(
        "units:\n  - {name: a, execute: 'true'}\n  - {name: align, deps: [a], executor: slurm, execute: 'true'}\n",
        &executors,
    );
    let error = result.unwrap_err();
    let RunnerError::NoExecutor { run, .. } = &error else {
        panic!("expected NoExecutor, got {error:?}");
    };
    assert_eq!(
        error.to_string(),
        format!(
            "run {run} cannot start: unit `align` runs on slurm, and no slurm executor was given"
        )
    );
    // Nothing ran, not even the local unit before it, and the journal holds only the start.
    assert!(executors.local.0.lock().unwrap().is_empty());
    let state = StateDir::open_existing(dir.path().join(".apollo")).unwrap();
    let reader = JournalReader::open(state.run_dir(run).unwrap().path(), ReadOptions::default());
    let events: Vec<Event> = reader
        .unwrap()
        .map(|record| record.unwrap().event)
        .collect();
    assert!(
        matches!(events.as_slice(), [Event::RunStarted(_)]),
        "{events:?}"
    );
}

/// Fails a unit's first attempt; notes, at each later one, the folder the request names for
/// the attempt before it.
#[derive(Default)]
struct FailsOnce(Mutex<Vec<Option<std::path::PathBuf>>>);

impl Executor for FailsOnce {
    fn run_attempt(&self, request: &AttemptRequest<'_>, _: &AttemptContext<'_>) -> AttemptOutcome {
        if request.attempt == 1 {
            return AttemptOutcome::nothing_ran(AttemptStatus::Failed);
        }
        (self.0.lock().unwrap()).push(request.attempt_dir(request.attempt - 1));
        AttemptOutcome::nothing_ran(AttemptStatus::Succeeded)
    }
}

#[test]
fn an_executor_finds_a_fan_out_instances_earlier_attempt_folder_as_the_store_names_it() {
    let executor = FailsOnce::default();
    let (dir, result) = run_with(
        "params:\n  regions: {type: list, default: [eu]}\nunits:\n  - name: load\n    foreach: ${params.regions}\n    retries: 1\n    retry_delay: 0\n    execute: 'true'\n",
        &apollo_core::Dispatch::new(&executor),
    );
    let finished = result.unwrap();
    assert_eq!(finished.report.status, Some(RunStatus::Succeeded));
    let state = StateDir::open_existing(dir.path().join(".apollo")).unwrap();
    let first = state.attempt_dir(&finished.run_id, "load[eu]", 1).unwrap();
    assert!(first.path().ends_with("units/load__eu/1"));
    assert_eq!(*executor.0.lock().unwrap(), [Some(first.into_path())]);
}
