//! The ordering guarantees of a session, checked with a fake executor that reads the journal
//! back from disk at every attempt, and a fake sweep that logs when it runs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use apollo_core::engine::NoObserver;
use apollo_core::event::{AttemptStatus, Event, ExitStatus, RunStatus, UnitStarted, Verdict};
use apollo_core::{
    AttemptOutcome, AttemptRequest, CancelToken, EngineError, Executor, Loaded, config,
};
use apollo_store::{
    Durability, JournalReader, JournalWriter, ReadOptions, RunId, StateDir, WriterOptions,
};

use crate::{
    MarkRequest, NoSessionObserver, Opened, Opening, PreviousOutcome, RunSession, RunTarget,
    RunnerError, SweepError, mark,
};

/// What happened, in order: sweeps and attempts.
type Log = Arc<Mutex<Vec<String>>>;

/// Runs nothing; at each attempt reads the run's journal from disk and records (never
/// asserts: a panic in a worker would be turned into a failed attempt) every way in which it
/// is not what the write-ahead rule promises.
struct FakeExecutor {
    state_dir: PathBuf,
    failing: HashSet<String>,
    log: Log,
    violations: Mutex<Vec<String>>,
}

impl FakeExecutor {
    fn new(state_dir: &Path, failing: &[&str], log: &Log) -> Self {
        Self {
            state_dir: state_dir.to_path_buf(),
            failing: failing.iter().map(|unit| (*unit).to_owned()).collect(),
            log: Arc::clone(log),
            violations: Mutex::new(Vec::new()),
        }
    }

    fn check_journal(&self, request: &AttemptRequest<'_>) -> Result<(), String> {
        let run_dir = self.state_dir.join("runs").join(request.run_id);
        let reader = JournalReader::open(&run_dir, ReadOptions::default())
            .map_err(|error| format!("cannot read the journal: {error}"))?;
        let events: Vec<Event> = reader
            .map(|record| record.map(|record| record.event))
            .collect::<Result<_, _>>()
            .map_err(|error| format!("cannot read a record: {error}"))?;
        match events.first() {
            Some(Event::RunStarted(started)) if started.run_id == request.run_id => {}
            other => {
                return Err(format!(
                    "the first record is {other:?}, not its run_started"
                ));
            }
        }
        let started = events.iter().any(|event| {
            matches!(event, Event::UnitStarted(started)
                if started.unit == request.unit.name && started.attempt == request.attempt)
        });
        if !started {
            return Err(format!(
                "{} attempt {} is not recorded as started",
                request.unit.name, request.attempt
            ));
        }
        Ok(())
    }

    fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }
}

impl Executor for FakeExecutor {
    fn run_attempt(
        &self,
        request: &AttemptRequest<'_>,
        _context: &apollo_core::AttemptContext<'_>,
    ) -> AttemptOutcome {
        if let Err(violation) = self.check_journal(request) {
            self.violations.lock().unwrap().push(violation);
        }
        self.log
            .lock()
            .unwrap()
            .push(format!("attempt {} {}", request.unit.name, request.attempt));
        let fails = self.failing.contains(&request.unit.name);
        let mut outcome = AttemptOutcome::nothing_ran(if fails {
            AttemptStatus::Failed
        } else {
            AttemptStatus::Succeeded
        });
        outcome.exit = Some(ExitStatus::Code(i32::from(fails)));
        outcome
    }
}

/// A sweep that logs the run it was asked about.
fn logging_sweep(log: &Log) -> impl Fn(&RunId) -> Result<u32, SweepError> + use<> {
    let log = Arc::clone(log);
    move |run: &RunId| {
        log.lock().unwrap().push(format!("sweep {run}"));
        Ok(0)
    }
}

struct Project {
    dir: tempfile::TempDir,
    config_path: PathBuf,
    loaded: Loaded,
}

impl Project {
    /// `a` then `b` (which depends on `a`); `b` is `idempotent: false` when asked.
    fn new(b_idempotent: bool) -> Self {
        Self::with_config(&format!(
            "units:\n  - name: a\n    execute: 'true'\n  - name: b\n    deps: [a]\n    execute: 'true'\n    idempotent: {b_idempotent}\n"
        ))
    }

    fn with_config(yaml: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("pipe.yaml");
        std::fs::write(&config_path, yaml).unwrap();
        let loaded = config::load(&config_path).unwrap();
        Self {
            dir,
            config_path,
            loaded,
        }
    }

    /// The config replaced by `yaml` (same file, same state directory).
    fn reconfigure(&mut self, yaml: &str) {
        std::fs::write(&self.config_path, yaml).unwrap();
        self.loaded = config::load(&self.config_path).unwrap();
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.path().join(".apollo")
    }

    fn session<'a>(&'a self, sweep: &'a dyn crate::StraySweep) -> RunSession<'a> {
        RunSession::new(self.state_dir(), &self.config_path, &self.loaded, sweep)
            .durability(Durability::None)
    }

    /// A session with `sweep`, opened, ready to run.
    fn open_ready<'a>(&'a self, sweep: &'a dyn crate::StraySweep) -> crate::OpenRun<'a> {
        ready(self.session(sweep).open(&mut NoSessionObserver).unwrap())
    }

    fn events(&self, run: &RunId) -> Vec<Event> {
        let run_dir = self.state_dir().join("runs").join(run.as_str());
        JournalReader::open(&run_dir, ReadOptions::default())
            .unwrap()
            .map(|record| record.unwrap().event)
            .collect()
    }
}

/// Runs `run` with `executor`, no observers and a cancel token nobody raises.
fn run_quietly(
    run: crate::OpenRun<'_>,
    executor: &dyn apollo_core::Executor,
) -> Result<crate::FinishedRun, crate::RunnerError> {
    run.run(
        &apollo_core::Dispatch::new(executor),
        &mut NoObserver,
        &CancelToken::new(),
        &mut NoSessionObserver,
    )
}

fn ready(opened: Opened<'_>) -> crate::OpenRun<'_> {
    match opened {
        Opened::Ready(run) => run,
        other => panic!("expected a run to run, got {other:?}"),
    }
}

#[test]
fn run_started_is_durable_before_the_first_attempt_and_the_last_sweep_follows_the_engine() {
    let project = Project::new(true);
    let log = Log::default();
    let sweep = logging_sweep(&log);
    let executor = FakeExecutor::new(&project.state_dir(), &[], &log);
    let run = project.open_ready(&sweep);
    assert_eq!(run.opening(), Opening::Started);
    let run_id = run.run_id().clone();
    // Before the engine: the journal holds exactly `run_started`, and no sweep ran (no
    // previous run of this pipeline).
    assert!(matches!(
        project.events(&run_id).as_slice(),
        [Event::RunStarted(started)] if started.run_id == run_id.as_str()
    ));
    assert!(log.lock().unwrap().is_empty());

    let finished = run_quietly(run, &executor).unwrap();
    assert_eq!(executor.violations(), Vec::<String>::new());
    assert_eq!(finished.run_id, run_id);
    assert_eq!(finished.report.status, Some(RunStatus::Succeeded));
    assert_eq!(
        *log.lock().unwrap(),
        ["attempt a 1", "attempt b 1", &format!("sweep {run_id}")]
    );
}

#[test]
fn a_new_run_sweeps_the_previous_run_before_it_records_run_started() {
    let project = Project::new(true);
    let log = Log::default();
    let sweep = logging_sweep(&log);
    let executor = FakeExecutor::new(&project.state_dir(), &[], &log);
    let first = project.open_ready(&sweep);
    let first_id = first.run_id().clone();
    run_quietly(first, &executor).unwrap();
    log.lock().unwrap().clear();

    // The first run succeeded: `LatestIfIncomplete` starts a new one, after sweeping the old.
    let second = project.open_ready(&sweep);
    assert_ne!(second.run_id(), &first_id);
    assert_eq!(*log.lock().unwrap(), [format!("sweep {first_id}")]);
}

#[test]
fn resume_folds_prior_state_and_runs_only_what_is_not_done() {
    let project = Project::new(true);
    let log = Log::default();
    let sweep = logging_sweep(&log);
    let failing_b = FakeExecutor::new(&project.state_dir(), &["b"], &log);
    let first = project.open_ready(&sweep);
    let run_id = first.run_id().clone();
    let finished = run_quietly(first, &failing_b).unwrap();
    assert_eq!(finished.report.status, Some(RunStatus::Failed));
    log.lock().unwrap().clear();

    let executor = FakeExecutor::new(&project.state_dir(), &[], &log);
    let resumed = project.open_ready(&sweep);
    assert_eq!(resumed.opening(), Opening::Resumed);
    assert_eq!(resumed.run_id(), &run_id);
    assert_eq!(resumed.n_done(), 1);
    assert!(matches!(
        project.events(&run_id).last(),
        Some(Event::RunResumed(_))
    ));
    let finished = run_quietly(resumed, &executor).unwrap();
    assert_eq!(executor.violations(), Vec::<String>::new());
    assert_eq!(finished.report.status, Some(RunStatus::Succeeded));
    assert_eq!(
        *log.lock().unwrap(),
        [
            format!("sweep {run_id}"),
            "attempt b 2".to_owned(),
            format!("sweep {run_id}")
        ]
    );
}

#[test]
fn a_run_that_starts_no_attempt_is_swept_before_it_resumes_and_not_after() {
    let project = Project::new(true);
    let log = Log::default();
    let sweep = logging_sweep(&log);
    let executor = FakeExecutor::new(&project.state_dir(), &[], &log);
    let first = project.open_ready(&sweep);
    let run_id = first.run_id().clone();
    run_quietly(first, &executor).unwrap();
    // apollo died after every unit succeeded, before `run_finished`: cut it off.
    let journal = project
        .state_dir()
        .join("runs")
        .join(run_id.as_str())
        .join("journal/000001.log");
    let bytes = std::fs::read(&journal).unwrap();
    let body = &bytes[..bytes.len() - 1];
    let last_line = body.iter().rposition(|&byte| byte == b'\n').unwrap() + 1;
    assert!(String::from_utf8_lossy(&body[last_line..]).contains("run_finished"));
    std::fs::write(&journal, &bytes[..last_line]).unwrap();
    log.lock().unwrap().clear();

    let resumed = project.open_ready(&sweep);
    assert_eq!(resumed.opening(), Opening::Resumed);
    let finished = run_quietly(resumed, &executor).unwrap();
    assert_eq!(finished.report.status, Some(RunStatus::Succeeded));
    // What the apollo that died left is swept before the run goes on; this process started
    // nothing, so there is nothing of its own to sweep after.
    assert_eq!(*log.lock().unwrap(), [format!("sweep {run_id}")]);
}

/// A run whose non-idempotent `b` was cut off mid-attempt (apollo died). Its recorded input
/// hash is the one `b` has once `a` ran (the fake executor's `a` prints nothing), so a
/// verdict that `b` succeeded leaves nothing changed to run it again for.
fn run_with_b_in_flight(project: &Project) -> RunId {
    let run = project.open_ready(&crate::NoStraySweep);
    let run_id = run.run_id().clone();
    drop(run);
    let run_dir = project.state_dir().join("runs").join(run_id.as_str());
    let (mut journal, _) =
        JournalWriter::open_for_append(&run_dir, WriterOptions::default()).unwrap();
    let pipeline = &project.loaded.pipeline;
    let b = &pipeline.units[1];
    let empty_stdout = apollo_core::hash::sha256_hex(b"");
    let inputs =
        apollo_core::hash::input_components(b, &pipeline.base_dir, &[("a", &empty_stdout)])
            .unwrap();
    journal
        .append_batch(&[Event::UnitStarted(UnitStarted {
            unit: "b".to_owned(),
            attempt: 1,
            input_hash: apollo_core::hash::combine_components(&inputs),
            inputs,
            inputs_manifest: None,
        })])
        .unwrap();
    run_id
}

#[test]
fn the_sweep_runs_before_preflight_refuses_and_a_refusal_records_nothing() {
    let project = Project::new(false);
    let run_id = run_with_b_in_flight(&project);
    let n_events = project.events(&run_id).len();
    let log = Log::default();
    let sweep = logging_sweep(&log);

    let error = project
        .session(&sweep)
        .open(&mut NoSessionObserver)
        .unwrap_err();
    let RunnerError::Engine {
        run,
        source: EngineError::NeedsVerdict { unit, attempt, .. },
    } = &error
    else {
        panic!("expected a verdict to be needed, got {error:?}");
    };
    assert_eq!((run, unit.as_str(), *attempt), (&run_id, "b", 1));
    assert_eq!(*log.lock().unwrap(), [format!("sweep {run_id}")]);
    assert_eq!(project.events(&run_id).len(), n_events, "no run_resumed");

    // A human's verdict lets the next session proceed, without running `b` again.
    let state = StateDir::open_existing(project.state_dir()).unwrap();
    let marked = mark(
        &state,
        &run_id,
        &MarkRequest::new("b", Verdict::Succeeded).by("tester"),
        &mut NoSessionObserver,
    )
    .unwrap();
    assert_eq!(
        (marked.attempt, marked.previous),
        (1, PreviousOutcome::InFlight)
    );
    let executor = FakeExecutor::new(&project.state_dir(), &[], &log);
    let resumed = project.open_ready(&sweep);
    let finished = run_quietly(resumed, &executor).unwrap();
    assert_eq!(finished.report.status, Some(RunStatus::Succeeded));
    // The verdict was that `b`'s work is done: it did not run again.
    assert!(
        !log.lock()
            .unwrap()
            .iter()
            .any(|line| line.starts_with("attempt b")),
        "{:?}",
        log.lock().unwrap()
    );
}

#[test]
fn a_verdict_on_a_unit_with_an_outcome_needs_force() {
    let project = Project::new(true);
    let log = Log::default();
    let sweep = logging_sweep(&log);
    let executor = FakeExecutor::new(&project.state_dir(), &[], &log);
    let run = project.open_ready(&sweep);
    let run_id = run.run_id().clone();
    run.run(
        &apollo_core::Dispatch::new(&executor),
        &mut NoObserver,
        &CancelToken::new(),
        &mut NoSessionObserver,
    )
    .unwrap();
    let state = StateDir::open_existing(project.state_dir()).unwrap();
    let request = MarkRequest::new("a", Verdict::Failed);
    let error = mark(&state, &run_id, &request, &mut NoSessionObserver).unwrap_err();
    assert!(
        matches!(
            error,
            RunnerError::OutcomeRecorded {
                previous: PreviousOutcome::Succeeded,
                attempt: 1,
                ..
            }
        ),
        "{error:?}"
    );
    let error = mark(
        &state,
        &run_id,
        &MarkRequest::new("nope", Verdict::Failed),
        &mut NoSessionObserver,
    )
    .unwrap_err();
    assert!(
        matches!(error, RunnerError::UnitNotStarted { .. }),
        "{error:?}"
    );
    mark(
        &state,
        &run_id,
        &request.force(true),
        &mut NoSessionObserver,
    )
    .unwrap();
    assert!(matches!(
        project.events(&run_id).last(),
        Some(Event::UnitMarked(_))
    ));
}

#[test]
fn a_named_run_that_succeeded_has_nothing_to_resume_and_plan_reads_only() {
    let project = Project::new(true);
    let log = Log::default();
    let sweep = logging_sweep(&log);
    // No state directory yet: the plan is a new run, and creates nothing.
    let plan = project
        .session(&sweep)
        .plan(&mut NoSessionObserver)
        .unwrap();
    assert_eq!((plan.resumes.as_ref(), plan.n_to_run()), (None, 2));
    assert!(!project.state_dir().exists());

    let executor = FakeExecutor::new(&project.state_dir(), &[], &log);
    let run = project.open_ready(&sweep);
    let run_id = run.run_id().clone();
    run.run(
        &apollo_core::Dispatch::new(&executor),
        &mut NoObserver,
        &CancelToken::new(),
        &mut NoSessionObserver,
    )
    .unwrap();
    let opened = project
        .session(&sweep)
        .target(RunTarget::Named(run_id.clone()))
        .open(&mut NoSessionObserver)
        .unwrap();
    assert!(matches!(&opened, Opened::NothingToResume(run) if *run == run_id));
    let plan = project
        .session(&sweep)
        .target(RunTarget::Named(run_id.clone()))
        .plan(&mut NoSessionObserver)
        .unwrap();
    assert_eq!((plan.n_to_run(), plan.resumes), (0, Some(run_id)));
}

#[test]
fn an_unreadable_latest_run_is_an_error_not_a_new_run() {
    let project = Project::new(true);
    let run = project.open_ready(&crate::NoStraySweep);
    let run_id = run.run_id().clone();
    drop(run);
    // Flip a bit in the middle of the segment (its header or `run_started`) and append a
    // copy of the original: a bad record followed by good ones is corruption, not a torn tail.
    let journal = project
        .state_dir()
        .join("runs")
        .join(run_id.as_str())
        .join("journal");
    let segment = std::fs::read_dir(&journal)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "log"))
        .unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    let copy = bytes.clone();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    bytes.extend_from_slice(&copy);
    std::fs::write(&segment, bytes).unwrap();

    let error = project
        .session(&crate::NoStraySweep)
        .open(&mut NoSessionObserver)
        .unwrap_err();
    // `latest/` names it as this pipeline's latest run, so it is known to be this pipeline's.
    assert!(
        matches!(&error, RunnerError::UnreadableRun { run, .. } if *run == run_id),
        "{error:?}"
    );
    // Without that record, whose run it is cannot be read.
    std::fs::remove_dir_all(project.state_dir().join("latest")).unwrap();
    let error = project
        .session(&crate::NoStraySweep)
        .open(&mut NoSessionObserver)
        .unwrap_err();
    assert!(
        matches!(&error, RunnerError::UnidentifiedRun { run, .. } if *run == run_id),
        "{error:?}"
    );
    // `Fresh` is the way past it, and leaves the damaged run as it is.
    let fresh = ready(
        project
            .session(&crate::NoStraySweep)
            .target(RunTarget::Fresh)
            .open(&mut NoSessionObserver)
            .unwrap(),
    );
    assert_ne!(fresh.run_id(), &run_id);
}

#[test]
fn an_unknown_only_unit_is_refused_before_a_run_exists() {
    let project = Project::new(true);
    let error = project
        .session(&crate::NoStraySweep)
        .only(vec!["nope".to_owned()])
        .open(&mut NoSessionObserver)
        .unwrap_err();
    assert!(
        matches!(
            &error,
            RunnerError::NotStarted {
                source: EngineError::UnknownUnit { unit }
            } if unit == "nope"
        ),
        "{error:?}"
    );
    let state = StateDir::open_existing(project.state_dir()).unwrap();
    assert_eq!(state.run_ids().unwrap(), Vec::<RunId>::new());
}

/// `a` writes nothing itself (the fake executor runs nothing): its declared output `a.out` is
/// put in place by the test. `b`, not idempotent, depends on it; `gate` fails until told.
fn changing_upstream_config(a_command: &str, gate_fails: bool) -> String {
    format!(
        "units:\n  - name: a\n    execute: '{a_command}'\n    outputs: [a.out]\n  - name: b\n    deps: [a]\n    execute: 'true'\n    idempotent: false\n  - name: gate\n    deps: [b]\n    execute: '{}'\n",
        if gate_fails { "false" } else { "true" }
    )
}

#[test]
fn every_stop_for_a_changed_non_idempotent_unit_is_swept_before_it_returns() {
    let mut project = Project::with_config(&changing_upstream_config("true", true));
    std::fs::write(project.dir.path().join("a.out"), "v1").unwrap();
    let log = Log::default();
    let sweep = logging_sweep(&log);
    let executor = FakeExecutor::new(&project.state_dir(), &["gate"], &log);
    let run = project.open_ready(&sweep);
    let run_id = run.run_id().clone();
    let finished = run_quietly(run, &executor).unwrap();
    assert_eq!(finished.report.status, Some(RunStatus::Failed));
    log.lock().unwrap().clear();

    // 1. Known before anything runs (b's own command changed): the preflight refuses, after
    //    the sweep, and records nothing.
    project.reconfigure(&changing_upstream_config("true", false).replacen(
        "execute: 'true'\n    idempotent",
        "execute: 'true # v2'\n    idempotent",
        1,
    ));
    let n_events = project.events(&run_id).len();
    let error = project
        .session(&sweep)
        .open(&mut NoSessionObserver)
        .unwrap_err();
    assert!(
        matches!(
            error.engine_error(),
            Some(EngineError::ChangedNeedsVerdict { unit, changes, .. })
                if unit == "b" && changes == &["command execute changed"]
        ),
        "{error:?}"
    );
    assert_eq!(*log.lock().unwrap(), [format!("sweep {run_id}")]);
    assert_eq!(project.events(&run_id).len(), n_events, "no run_resumed");
    log.lock().unwrap().clear();

    // 2. Found by the engine once `a` ran again with another output: the run stops before
    //    `b`, and the last sweep comes before the error is returned.
    project.reconfigure(&changing_upstream_config("true # v2", false));
    std::fs::write(project.dir.path().join("a.out"), "v2").unwrap();
    let executor = FakeExecutor::new(&project.state_dir(), &[], &log);
    let run = project.open_ready(&sweep);
    let error = run_quietly(run, &executor).unwrap_err();
    assert!(
        matches!(
            error.engine_error(),
            Some(EngineError::ChangedNeedsVerdict { unit, changes, .. })
                if unit == "b" && changes == &["upstream a output changed"]
        ),
        "{error:?}"
    );
    assert_eq!(
        *log.lock().unwrap(),
        [
            format!("sweep {run_id}"),
            "attempt a 2".to_owned(),
            format!("sweep {run_id}")
        ]
    );
    log.lock().unwrap().clear();

    // 3. A human allows exactly `b` to run again: no force needed for a unit that succeeded.
    let state = StateDir::open_existing(project.state_dir()).unwrap();
    let marked = mark(
        &state,
        &run_id,
        &MarkRequest::new("b", Verdict::Rerun).by("tester"),
        &mut NoSessionObserver,
    )
    .unwrap();
    assert_eq!(
        (marked.attempt, marked.previous),
        (1, PreviousOutcome::Succeeded)
    );
    let run = project.open_ready(&sweep);
    let finished = run_quietly(run, &executor).unwrap();
    assert_eq!(finished.report.status, Some(RunStatus::Succeeded));
    assert_eq!(
        *log.lock().unwrap(),
        [
            format!("sweep {run_id}"),
            "attempt b 2".to_owned(),
            "attempt gate 2".to_owned(),
            format!("sweep {run_id}")
        ]
    );
}

#[test]
fn a_timed_out_non_idempotent_unit_is_swept_and_refused_until_marked() {
    let project = Project::new(false);
    let run = project.open_ready(&crate::NoStraySweep);
    let run_id = run.run_id().clone();
    drop(run);
    let run_dir = project.state_dir().join("runs").join(run_id.as_str());
    let (mut journal, _) =
        JournalWriter::open_for_append(&run_dir, WriterOptions::default()).unwrap();
    let finished: Event = serde_json::from_value(serde_json::json!({
        "kind": "unit_finished", "unit": "b", "attempt": 1, "status": "timed_out",
        "exit": {"signal": 15}, "failed_phase": "execute", "timed_out": true,
        "duration_ms": 30000, "output_hash": null, "stdout_bytes": 0, "stderr_bytes": 0,
        "user_cpu_ms": 0, "sys_cpu_ms": 0, "max_rss_kib": 0, "leftovers_killed": 0,
        "phases": [{"phase": "execute", "offset_ms": 0, "duration_ms": 30000,
                    "exit": {"signal": 15}, "timed_out": true}],
        "error": "timed out after 30s"
    }))
    .unwrap();
    journal
        .append_batch(&[
            Event::UnitStarted(UnitStarted {
                unit: "b".to_owned(),
                attempt: 1,
                input_hash: "00".repeat(32),
                inputs: Vec::new(),
                inputs_manifest: None,
            }),
            finished,
        ])
        .unwrap();
    drop(journal);
    let log = Log::default();
    let sweep = logging_sweep(&log);
    let error = project
        .session(&sweep)
        .open(&mut NoSessionObserver)
        .unwrap_err();
    assert!(
        matches!(
            error.engine_error(),
            Some(EngineError::NeedsVerdict { unit, attempt: 1, ended: Some(AttemptStatus::TimedOut) })
                if unit == "b"
        ),
        "{error:?}"
    );
    assert_eq!(*log.lock().unwrap(), [format!("sweep {run_id}")]);
    let state = StateDir::open_existing(project.state_dir()).unwrap();
    let marked = mark(
        &state,
        &run_id,
        &MarkRequest::new("b", Verdict::Failed),
        &mut NoSessionObserver,
    )
    .unwrap();
    assert_eq!(marked.previous, PreviousOutcome::TimedOut);
}

/// A definition snapshot leaves out what a unit leaves at its default (its capture policy,
/// executor and resources were half of a plain unit's snapshot), keeps what it sets, and
/// reads back as the same pipeline; so does a snapshot with every field written out, as
/// they were before.
#[test]
fn a_definition_snapshot_leaves_out_the_defaults_and_reads_back_the_same_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.yaml");
    std::fs::write(
        &path,
        "units:\n  - name: plain\n    execute: \"true\"\n  - name: sized\n    execute: \"true\"\n    capture: none\n    resources: {cpus: 2}\n",
    )
    .unwrap();
    let pipeline = config::load(&path).unwrap().pipeline;
    let snapshot = crate::session::definition_snapshot(&pipeline).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&snapshot).unwrap();
    let (plain, sized) = (&value["units"][0], &value["units"][1]);
    for field in ["capture", "executor", "resources"] {
        assert!(
            plain.get(field).is_none(),
            "{field} at its default: {plain}"
        );
    }
    assert_eq!(sized["resources"]["cpus"], 2, "{sized}");
    assert_eq!(sized["capture"]["mode"], "none", "{sized}");
    let read: apollo_core::Pipeline = serde_json::from_slice(&snapshot).unwrap();
    assert_eq!(read, pipeline);

    let mut every_field = value.clone();
    every_field["units"][0]["capture"] =
        serde_json::to_value(apollo_core::capture::CapturePolicy::default()).unwrap();
    every_field["units"][0]["executor"] = "local".into();
    every_field["units"][0]["resources"] =
        serde_json::to_value(apollo_core::model::Resources::default()).unwrap();
    let read: apollo_core::Pipeline = serde_json::from_value(every_field).unwrap();
    assert_eq!(read, pipeline);
}
