//! Engine tests with a fake executor and an in-memory journal. The helpers are here; the
//! tests are grouped by what they exercise.

mod cut_off;
mod durability;
mod executors;
mod failures;
mod hashing;
mod late;
mod needs_human;
mod records;
mod rehash;
mod resume;
mod reuse;
mod reuse_check;
mod reuse_source;
mod scheduling;
mod sim;
mod worker_protocol;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::workers::failed_to_start;
use super::*;
use crate::cancel::CancelLevel;
use crate::event::{AttemptStatus, Event, ExitStatus, RunStatus, UnitMarked, UnitStarted, Verdict};
use crate::executor::{AttemptContext, AttemptEvent, AttemptOutcome, AttemptRequest};
use crate::hash;
use crate::journal::JournalError;
use crate::model::{Command, Unit};

pub(super) fn unit(name: &str, deps: &[&str]) -> Unit {
    Unit {
        skip_when: None,
        when_command: None,
        log_limit: None,
        queue_timeout: None,
        deadline: None,
        name: name.into(),
        deps: deps.iter().map(|dep| (*dep).to_owned()).collect(),
        timeout: None,
        retries: 0,
        retry_delay: Duration::ZERO,
        retry_on_exit: Vec::new(),
        retry_max_delay: None,
        kill_grace: Duration::from_secs(1),
        prepare: None,
        execute: Command::Shell(format!("run {name}")),
        cleanup: None,
        cleanup_timeout: crate::model::DEFAULT_CLEANUP_TIMEOUT,
        inputs: vec![],
        outputs: vec![],
        env: BTreeMap::new(),
        workdir: PathBuf::from("/nonexistent"),
        idempotent: true,
        capture: Default::default(),
        reuse: false,
        executor: crate::model::ExecutorKind::Local,
        resources: crate::model::Resources::default(),
        secrets: BTreeMap::new(),
    }
}

pub(super) fn pipeline(units: Vec<Unit>, max_parallel: usize) -> Pipeline {
    Pipeline {
        name: "test".into(),
        config_path: PathBuf::from("/nonexistent/pipeline.yaml"),
        base_dir: PathBuf::from("/nonexistent"),
        max_parallel,
        units,
        hooks: Vec::new(),
        capacity: crate::model::Capacity::default(),
        max_jobs: None,
        blob_store_max: None,
        durability: None,
        sync_interval: None,
        cost: None,
        journal_segment_size: None,
        deadline: None,
    }
}

/// A journal shared with the fake executor, so the executor can check the write-ahead rule.
#[derive(Clone, Default)]
pub(super) struct SharedJournal {
    events: Arc<Mutex<Vec<Event>>>,
    /// Fail the append with this index (0-based), and every later one.
    fail_from: Option<usize>,
    appends: usize,
    /// Input manifests stored, by SHA-256.
    manifests: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    /// Refuse to store input manifests.
    refuse_manifests: bool,
    /// Appended unsynced and not yet made durable by an `append`: not in `events` (which is
    /// what survives a crash, and what the write-ahead rule is checked against).
    unsynced: Vec<Event>,
    /// Every append that went through: whether it was durable, and how many events it had.
    appended: Vec<(bool, usize)>,
    /// The units whose `unit_started` went through [`Journal::append_strict`].
    started_strictly: Vec<String>,
}

impl Journal for SharedJournal {
    fn append_unsynced(&mut self, events: &[Event]) -> Result<(), JournalError> {
        if self
            .fail_from
            .is_some_and(|fail_from| self.appends >= fail_from)
        {
            return Err(JournalError::msg("injected failure"));
        }
        self.appends += 1;
        self.appended.push((false, events.len()));
        self.unsynced.extend_from_slice(events);
        Ok(())
    }

    fn append(&mut self, events: &[Event]) -> Result<(), JournalError> {
        if self
            .fail_from
            .is_some_and(|fail_from| self.appends >= fail_from)
        {
            return Err(JournalError::msg("injected failure"));
        }
        // A record naming an input manifest comes after the manifest is durable.
        for event in events {
            if let Event::UnitStarted(started) = event
                && let Some(manifest) = &started.inputs_manifest
                && !self
                    .manifests
                    .lock()
                    .unwrap()
                    .contains_key(&manifest.sha256)
            {
                return Err(JournalError::msg(format!(
                    "unit_started of {} names input manifest {} before it was stored",
                    started.unit, manifest.sha256
                )));
            }
        }
        self.appends += 1;
        self.appended.push((true, events.len()));
        let mut durable = self.events.lock().unwrap();
        durable.append(&mut self.unsynced);
        durable.extend_from_slice(events);
        Ok(())
    }

    fn append_strict(&mut self, events: &[Event]) -> Result<(), JournalError> {
        self.append(events)?;
        self.started_strictly
            .extend(events.iter().filter_map(|event| match event {
                Event::UnitStarted(started) => Some(started.unit.clone()),
                _ => None,
            }));
        Ok(())
    }

    fn store_input_manifest(&mut self, sha256: &str, bytes: &[u8]) -> Result<(), JournalError> {
        if self.refuse_manifests {
            return Err(JournalError::caused_by(std::io::Error::other(
                "no space left on device (injected)",
            )));
        }
        self.manifests
            .lock()
            .unwrap()
            .insert(sha256.to_owned(), bytes.to_vec());
        Ok(())
    }
}

pub(super) type Behaviour =
    dyn Fn(&str, u32, &CancelToken) -> (AttemptStatus, Option<ExitStatus>) + Send + Sync;

/// An executor that runs nothing: each attempt does what the test's behaviour says. It checks
/// the write-ahead rule where it could be broken — when an attempt starts — and **records**
/// every violation instead of panicking: a panic inside a worker becomes a failed attempt
/// (the engine catches it), which a test expecting failures would never notice. Every run
/// through [`run_with`] asserts the list empty afterwards, and so does dropping the executor.
pub(super) struct FakeExecutor {
    journal: Arc<Mutex<Vec<Event>>>,
    behaviour: Box<Behaviour>,
    ran: Mutex<Vec<(String, u32)>>,
    violations: Mutex<Vec<String>>,
    /// Units whose attempts report being submitted to a cluster as the given job id, as a
    /// remote executor would.
    submits_as: BTreeMap<String, String>,
    /// Units whose attempts end needing a human (as a Slurm submission in doubt does).
    needs_human: BTreeMap<String, crate::executor::NeedsHuman>,
    /// The attempts an earlier apollo left in flight, as the engine handed them over.
    in_flight_seen: Mutex<Vec<(String, Option<u32>)>>,
    /// The wall time each attempt reports (default: none), which the engine's pacing reads.
    wall_time: Duration,
}

impl FakeExecutor {
    fn new(
        journal: &SharedJournal,
        behaviour: impl Fn(&str, u32, &CancelToken) -> (AttemptStatus, Option<ExitStatus>)
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self {
            journal: Arc::clone(&journal.events),
            behaviour: Box::new(behaviour),
            ran: Mutex::new(Vec::new()),
            violations: Mutex::new(Vec::new()),
            submits_as: BTreeMap::new(),
            needs_human: BTreeMap::new(),
            in_flight_seen: Mutex::new(Vec::new()),
            wall_time: Duration::ZERO,
        }
    }

    fn ran(&self) -> Vec<(String, u32)> {
        self.ran.lock().unwrap().clone()
    }

    /// The write-ahead violations seen so far, taken out of the list.
    fn take_violations(&self) -> Vec<String> {
        std::mem::take(&mut *self.violations.lock().unwrap())
    }

    #[track_caller]
    fn assert_no_violations(&self) {
        let violations = self.take_violations();
        assert!(
            violations.is_empty(),
            "write-ahead rule broken: {violations:#?}"
        );
    }

    /// Write-ahead: this attempt's start, and every dependency's successful finish, are
    /// durable before the attempt runs.
    fn check_write_ahead(&self, request: &AttemptRequest<'_>) {
        let events = self.journal.lock().unwrap();
        let mut violations = Vec::new();
        let started = events.iter().any(|event| {
            matches!(event, Event::UnitStarted(started)
                if started.unit == request.unit.name && started.attempt == request.attempt)
        });
        if !started {
            violations.push(format!(
                "unit_started of {} #{} not durable before the attempt ran",
                request.unit.name, request.attempt
            ));
        }
        for dep in &request.unit.deps {
            // A dependency reused from an earlier run satisfies it as a success does.
            let finished = events.iter().any(|event| {
                matches!(event, Event::UnitFinished(finished)
                    if &finished.unit == dep && finished.status.satisfies_dependents())
                    || matches!(event, Event::UnitReused(reused) if &reused.unit == dep)
            });
            if !finished {
                violations.push(format!(
                    "{}'s dependency {dep} has no durable successful unit_finished",
                    request.unit.name
                ));
            }
        }
        drop(events);
        self.violations.lock().unwrap().extend(violations);
    }
}

impl Drop for FakeExecutor {
    fn drop(&mut self) {
        // A test that ran the engine without `run_with` is checked here; not while a test is
        // already failing, where a second panic would abort.
        if !std::thread::panicking() {
            self.assert_no_violations();
        }
    }
}

impl Executor for FakeExecutor {
    fn run_attempt(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
    ) -> AttemptOutcome {
        self.check_write_ahead(request);
        self.ran
            .lock()
            .unwrap()
            .push((request.unit.name.clone(), request.attempt));
        self.in_flight_seen
            .lock()
            .unwrap()
            .push((request.unit.name.clone(), request.in_flight));
        if let Some(job_id) = self.submits_as.get(&request.unit.name) {
            context.report(AttemptEvent::submitted("fake", job_id.clone()));
        }
        let (status, exit) =
            (self.behaviour)(&request.unit.name, request.attempt, context.cancel());
        let mut outcome = failed_to_start(String::new());
        outcome.status = status;
        outcome.exit = exit;
        outcome.wall_time = self.wall_time;
        // The attempt's process ran (an attempt with no phase never started anything); a
        // unit with a `when: {command}` that skips was skipped by it.
        let by_condition = status == AttemptStatus::Skipped && request.unit.when_command.is_some();
        outcome.phases.push(crate::executor::PhaseOutcome {
            phase: if by_condition {
                crate::model::Phase::When
            } else {
                crate::model::Phase::Execute
            },
            offset: Duration::ZERO,
            wall_time: Duration::ZERO,
            exit,
            timed_out: status == AttemptStatus::TimedOut,
            leftovers_killed: 0,
            error: None,
        });
        outcome.error = (status != AttemptStatus::Succeeded).then(|| format!("{status:?}"));
        outcome.stdout_sha256 = Some(hash::sha256_hex(request.unit.name.as_bytes()));
        outcome.needs_human = self.needs_human.get(&request.unit.name).cloned();
        outcome
    }
}

pub(super) struct TempLogs;

impl AttemptLogs for TempLogs {
    fn log_dir(&self, unit: &str, attempt: u32) -> Result<PathBuf, String> {
        Ok(Path::new("/logs").join(unit).join(attempt.to_string()))
    }
}

pub(super) fn ok() -> (AttemptStatus, Option<ExitStatus>) {
    (AttemptStatus::Succeeded, Some(ExitStatus::Code(0)))
}

pub(super) fn fail() -> (AttemptStatus, Option<ExitStatus>) {
    (AttemptStatus::Failed, Some(ExitStatus::Code(1)))
}

/// Run the engine with `executor`, then assert that no attempt saw the write-ahead rule
/// broken.
#[track_caller]
pub(super) fn run_with(
    pipeline: &Pipeline,
    prior: &PriorState,
    options: &EngineOptions,
    journal: &mut SharedJournal,
    executor: &FakeExecutor,
    cancel: &CancelToken,
) -> Result<RunReport, EngineError> {
    let result = run(
        pipeline,
        prior,
        options,
        journal,
        executor,
        &TempLogs,
        cancel,
        &mut NoObserver,
    );
    executor.assert_no_violations();
    result
}

pub(super) fn kinds(journal: &SharedJournal) -> Vec<String> {
    journal
        .events
        .lock()
        .unwrap()
        .iter()
        .map(|event| {
            format!("{} {}", event.kind(), event.unit().unwrap_or(""))
                .trim()
                .to_owned()
        })
        .collect()
}

/// Run `pipeline` once with `behaviour`, returning the journal's events.
pub(super) fn first_run(
    pipeline: &Pipeline,
    behaviour: impl Fn(&str, u32, &CancelToken) -> (AttemptStatus, Option<ExitStatus>)
    + Send
    + Sync
    + 'static,
) -> Vec<Event> {
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, behaviour);
    let _ = run_with(
        pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    );
    journal.events.lock().unwrap().clone()
}
