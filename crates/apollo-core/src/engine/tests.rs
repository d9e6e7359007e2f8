//! Engine tests with a fake executor and an in-memory journal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::event::{ExitStatus, UnitMarked, Verdict};
use crate::model::Command;

fn unit(name: &str, deps: &[&str]) -> Unit {
    Unit {
        name: name.into(),
        deps: deps.iter().map(|dep| (*dep).to_owned()).collect(),
        timeout: None,
        retries: 0,
        retry_delay: Duration::ZERO,
        kill_grace: Duration::from_secs(1),
        prepare: None,
        execute: Command::Shell(format!("run {name}")),
        cleanup: None,
        inputs: vec![],
        outputs: vec![],
        env: BTreeMap::new(),
        workdir: PathBuf::from("/nonexistent"),
        idempotent: true,
    }
}

fn pipeline(units: Vec<Unit>, max_parallel: usize) -> Pipeline {
    Pipeline {
        name: "test".into(),
        config_path: PathBuf::from("/nonexistent/pipeline.yaml"),
        base_dir: PathBuf::from("/nonexistent"),
        max_parallel,
        units,
    }
}

/// A journal shared with the fake executor, so the executor can check the write-ahead rule.
#[derive(Clone, Default)]
struct SharedJournal {
    events: Arc<Mutex<Vec<Event>>>,
    /// Fail the append with this index (0-based), and every later one.
    fail_from: Option<usize>,
    appends: usize,
}

impl Journal for SharedJournal {
    fn append(&mut self, events: &[Event]) -> Result<(), JournalError> {
        if self
            .fail_from
            .is_some_and(|fail_from| self.appends >= fail_from)
        {
            return Err(JournalError::msg("injected failure"));
        }
        self.appends += 1;
        self.events.lock().unwrap().extend_from_slice(events);
        Ok(())
    }
}

type Behaviour =
    dyn Fn(&str, u32, &CancelToken) -> (AttemptStatus, Option<ExitStatus>) + Send + Sync;

struct FakeExecutor {
    journal: Arc<Mutex<Vec<Event>>>,
    behaviour: Box<Behaviour>,
    ran: Mutex<Vec<(String, u32)>>,
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
        }
    }

    fn ran(&self) -> Vec<(String, u32)> {
        self.ran.lock().unwrap().clone()
    }
}

impl Executor for FakeExecutor {
    fn run_attempt(&self, request: &AttemptRequest<'_>, cancel: &CancelToken) -> AttemptOutcome {
        {
            // Write-ahead: this attempt's start, and every dependency's finish, are durable.
            let events = self.journal.lock().unwrap();
            assert!(
                events
                    .iter()
                    .any(|event| matches!(event, Event::UnitStarted(started)
                    if started.unit == request.unit.name && started.attempt == request.attempt)),
                "unit_started of {} #{} not durable before the attempt ran",
                request.unit.name,
                request.attempt
            );
            for dep in &request.unit.deps {
                assert!(
                    events
                        .iter()
                        .any(|event| matches!(event, Event::UnitFinished(finished)
                        if &finished.unit == dep && finished.status.satisfies_dependents())),
                    "{}'s dependency {dep} has no durable successful unit_finished",
                    request.unit.name
                );
            }
        }
        self.ran
            .lock()
            .unwrap()
            .push((request.unit.name.clone(), request.attempt));
        let (status, exit) = (self.behaviour)(&request.unit.name, request.attempt, cancel);
        let mut outcome = failed_to_start(String::new());
        outcome.status = status;
        outcome.exit = exit;
        outcome.error = (status != AttemptStatus::Succeeded).then(|| format!("{status:?}"));
        outcome.stdout_sha256 = Some(hash::sha256_hex(request.unit.name.as_bytes()));
        outcome
    }
}

struct TempLogs;

impl AttemptLogs for TempLogs {
    fn log_dir(&self, unit: &str, attempt: u32) -> Result<PathBuf, String> {
        Ok(Path::new("/logs").join(unit).join(attempt.to_string()))
    }
}

fn ok() -> (AttemptStatus, Option<ExitStatus>) {
    (AttemptStatus::Succeeded, Some(ExitStatus::Code(0)))
}

fn fail() -> (AttemptStatus, Option<ExitStatus>) {
    (AttemptStatus::Failed, Some(ExitStatus::Code(1)))
}

fn run_with(
    pipeline: &Pipeline,
    prior: &PriorState,
    options: &EngineOptions,
    journal: &mut SharedJournal,
    executor: &FakeExecutor,
    cancel: &CancelToken,
) -> Result<RunReport, EngineError> {
    run(
        pipeline,
        prior,
        options,
        journal,
        executor,
        &TempLogs,
        cancel,
        &mut NoObserver,
    )
}

fn kinds(journal: &SharedJournal) -> Vec<String> {
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

#[test]
fn a_chain_runs_in_order_with_each_step_recorded_around_it() {
    let pipeline = pipeline(
        vec![unit("a", &[]), unit("b", &["a"]), unit("c", &["b"])],
        2,
    );
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    assert_eq!(
        executor.ran(),
        vec![("a".into(), 1), ("b".into(), 1), ("c".into(), 1)]
    );
    assert_eq!(
        kinds(&journal),
        vec![
            "unit_started a",
            "unit_finished a",
            "unit_started b",
            "unit_finished b",
            "unit_started c",
            "unit_finished c",
            "run_finished"
        ]
    );
}

#[test]
fn only_idempotent_units_are_committed_ahead_of_a_free_worker() {
    let mut careful = unit("careful", &[]);
    careful.idempotent = false;
    let pipeline = pipeline(vec![unit("first", &[]), careful], 1);
    let mut journal = SharedJournal::default();
    let events = Arc::clone(&journal.events);
    let executor = FakeExecutor::new(&journal, move |name, _, _| {
        if name == "first" {
            // While `first` runs, `careful` must not be recorded as started yet.
            let started_careful = events.lock().unwrap().iter().any(
                |event| matches!(event, Event::UnitStarted(started) if started.unit == "careful"),
            );
            assert!(
                !started_careful,
                "a non-idempotent unit was committed ahead"
            );
        }
        ok()
    });
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
}

#[test]
fn independent_units_start_in_config_order_up_to_max_parallel() {
    let units = (0..6).map(|i| unit(&format!("u{i}"), &[])).collect();
    let pipeline = pipeline(units, 1);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    let order: Vec<String> = executor.ran().into_iter().map(|(name, _)| name).collect();
    assert_eq!(order, vec!["u0", "u1", "u2", "u3", "u4", "u5"]);
}

#[test]
fn a_failed_attempt_is_retried_as_a_new_attempt() {
    let mut flaky = unit("flaky", &[]);
    flaky.retries = 2;
    let pipeline = pipeline(vec![flaky, unit("after", &["flaky"])], 2);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |name, attempt, _| {
        if name == "flaky" && attempt < 3 {
            fail()
        } else {
            ok()
        }
    });
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    assert_eq!(
        executor.ran(),
        vec![
            ("flaky".into(), 1),
            ("flaky".into(), 2),
            ("flaky".into(), 3),
            ("after".into(), 1)
        ]
    );
}

#[test]
fn backoff_doubles_and_is_capped() {
    let mut flaky = unit("flaky", &[]);
    flaky.retry_delay = Duration::from_secs(1);
    let cap = Duration::from_secs(5);
    let delays: Vec<u64> = (1..=5)
        .map(|retry| backoff(&flaky, retry, cap).as_secs())
        .collect();
    assert_eq!(delays, vec![1, 2, 4, 5, 5]);
}

#[test]
fn a_failure_skips_downstream_and_stops_new_starts() {
    let pipeline = pipeline(vec![unit("a", &[]), unit("b", &["a"]), unit("c", &[])], 1);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(
        &journal,
        |name, _, _| if name == "a" { fail() } else { ok() },
    );
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Failed));
    assert_eq!(executor.ran(), vec![("a".into(), 1)]);
    assert_eq!(
        report.units[1].1,
        UnitResult::SkippedUpstream {
            upstream: "a".into()
        }
    );
    assert_eq!(report.units[2].1, UnitResult::NotRun);
    // `c` was committed ahead (in the same batch as `a`) while `a` ran; the failure halted it before
    // its turn, so it is recorded as interrupted without ever having a process.
    assert_eq!(
        kinds(&journal),
        vec![
            "unit_started a",
            "unit_started c",
            "unit_finished a",
            "unit_skipped b",
            "unit_finished c",
            "run_finished"
        ]
    );
    let events = journal.events.lock().unwrap();
    assert!(
        events
            .iter()
            .any(|event| matches!(event, Event::UnitFinished(finished)
        if finished.unit == "c" && finished.status == AttemptStatus::Interrupted))
    );
}

#[test]
fn keep_going_runs_everything_that_does_not_depend_on_the_failure() {
    let pipeline = pipeline(
        vec![
            unit("a", &[]),
            unit("b", &["a"]),
            unit("c", &[]),
            unit("d", &["c"]),
        ],
        1,
    );
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(
        &journal,
        |name, _, _| if name == "a" { fail() } else { ok() },
    );
    let mut options = EngineOptions::new("r", &pipeline);
    options.keep_going = true;
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &options,
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Failed));
    assert_eq!(
        executor.ran(),
        vec![("a".into(), 1), ("c".into(), 1), ("d".into(), 1)]
    );
}

#[test]
fn a_unit_that_skips_itself_satisfies_its_dependents() {
    let pipeline = pipeline(vec![unit("branch", &[]), unit("after", &["branch"])], 1);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |name, _, _| {
        if name == "branch" {
            (AttemptStatus::Skipped, Some(ExitStatus::Code(77)))
        } else {
            ok()
        }
    });
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    assert_eq!(report.units[0].1, UnitResult::SelfSkipped { attempt: 1 });
    assert_eq!(report.units[1].1, UnitResult::Succeeded { attempt: 1 });
}

/// Run `pipeline` once with `behaviour`, returning the journal's events.
fn first_run(
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

#[test]
fn resume_skips_done_units_and_continues_attempt_numbers() {
    let pipeline = pipeline(
        vec![unit("a", &[]), unit("b", &["a"]), unit("c", &["b"])],
        1,
    );
    let events = first_run(
        &pipeline,
        |name, _, _| if name == "b" { fail() } else { ok() },
    );
    let prior = PriorState::from_events(&events);
    let mut journal = SharedJournal::default();
    journal.events.lock().unwrap().extend(events);
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let report = run_with(
        &pipeline,
        &prior,
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    assert_eq!(executor.ran(), vec![("b".into(), 2), ("c".into(), 1)]);
    assert_eq!(report.units[0].1, UnitResult::Reused);
}

#[test]
fn an_in_flight_idempotent_unit_reruns_and_a_non_idempotent_one_needs_a_verdict() {
    let mut careful = unit("careful", &[]);
    careful.idempotent = false;
    let pipeline = pipeline(vec![unit("a", &[]), careful], 1);
    let in_flight = |unit: &str| {
        Event::UnitStarted(UnitStarted {
            unit: unit.into(),
            attempt: 1,
            input_hash: "x".into(),
            inputs: vec![],
        })
    };
    let prior = PriorState::from_events(&[in_flight("a"), in_flight("careful")]);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let error = run_with(
        &pipeline,
        &prior,
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap_err();
    assert!(
        matches!(error, EngineError::NeedsVerdict { ref unit, attempt: 1 } if unit == "careful"),
        "{error}"
    );
    assert!(
        executor.ran().is_empty(),
        "nothing may run before the verdict"
    );

    let mut events = vec![in_flight("a"), in_flight("careful")];
    events.push(Event::UnitMarked(UnitMarked {
        unit: "careful".into(),
        attempt: 1,
        verdict: Verdict::Failed,
        by: "ops".into(),
        note: None,
    }));
    let prior = PriorState::from_events(&events);
    journal.events.lock().unwrap().extend(events);
    let report = run_with(
        &pipeline,
        &prior,
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    assert_eq!(executor.ran(), vec![("a".into(), 2), ("careful".into(), 2)]);
}

#[test]
fn a_changed_command_reruns_a_done_unit_or_stops_when_asked() {
    let original = pipeline(vec![unit("a", &[]), unit("b", &["a"])], 1);
    let events = first_run(
        &original,
        |name, _, _| if name == "b" { fail() } else { ok() },
    );
    let prior = PriorState::from_events(&events);
    let mut changed = original.clone();
    changed.units[0].execute = Command::Shell("run a --differently".into());

    let mut journal = SharedJournal::default();
    journal.events.lock().unwrap().extend(events.clone());
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let mut options = EngineOptions::new("r", &changed);
    options.on_input_change = OnInputChange::Fail;
    let error = run_with(
        &changed,
        &prior,
        &options,
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap_err();
    assert!(
        matches!(&error, EngineError::InputsChanged { unit, changes } if unit == "a" && changes == &["command execute changed"]),
        "{error}"
    );
    assert!(executor.ran().is_empty());

    options.on_input_change = OnInputChange::Rerun;
    run_with(
        &changed,
        &prior,
        &options,
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(executor.ran(), vec![("a".into(), 2), ("b".into(), 2)]);
}

#[test]
fn only_runs_the_named_units_and_their_upstream_and_leaves_the_run_open() {
    let pipeline = pipeline(
        vec![unit("a", &[]), unit("b", &["a"]), unit("c", &["a"])],
        1,
    );
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let mut options = EngineOptions::new("r", &pipeline);
    options.only = Some(vec!["b".into()]);
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &options,
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, None);
    assert_eq!(executor.ran(), vec![("a".into(), 1), ("b".into(), 1)]);
    assert!(!kinds(&journal).contains(&"run_finished".to_owned()));
}

#[test]
fn cancellation_interrupts_running_units_and_starts_nothing_new() {
    let pipeline = pipeline(vec![unit("a", &[]), unit("b", &["a"])], 1);
    let mut journal = SharedJournal::default();
    let cancel = CancelToken::new();
    let executor = FakeExecutor::new(&journal, |_, _, cancel| {
        // The unit "runs" until apollo is told to stop.
        cancel.cancel(CancelLevel::Graceful);
        (AttemptStatus::Interrupted, Some(ExitStatus::Signal(15)))
    });
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &cancel,
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Interrupted));
    assert_eq!(executor.ran(), vec![("a".into(), 1)]);
    assert_eq!(
        kinds(&journal),
        vec!["unit_started a", "unit_finished a", "run_finished"]
    );
}

#[test]
fn a_journal_failure_stops_the_run_before_anything_unrecorded_runs() {
    let pipeline = pipeline(vec![unit("a", &[]), unit("b", &["a"])], 1);
    let mut journal = SharedJournal {
        fail_from: Some(1),
        ..SharedJournal::default()
    };
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let error = run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap_err();
    assert!(matches!(error, EngineError::Journal(_)));
    assert_eq!(
        executor.ran(),
        vec![("a".into(), 1)],
        "b must not start: a's finish was never durable"
    );
}

#[test]
fn a_unit_waiting_for_its_retry_fails_for_good_when_fail_fast_stops_the_run() {
    // One slot. `flaky` (not idempotent, so never committed ahead) fails and waits for its
    // retry; meanwhile `slow`, committed ahead, fails for good and stops the run.
    let mut flaky = unit("flaky", &[]);
    flaky.idempotent = false;
    flaky.retries = 1;
    let pipeline = pipeline(vec![flaky, unit("slow", &[]), unit("after", &["flaky"])], 1);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |name, _, _| {
        if name == "flaky" || name == "slow" {
            fail()
        } else {
            ok()
        }
    });
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Failed));
    assert!(
        matches!(report.units[0].1, UnitResult::Failed { attempt: 1, .. }),
        "{:?}",
        report.units[0]
    );
    assert_eq!(
        report.units[2].1,
        UnitResult::SkippedUpstream {
            upstream: "flaky".into()
        }
    );
    let events = journal.events.lock().unwrap();
    let finished = events.iter().find_map(|event| match event {
        Event::RunFinished(finished) => Some(finished.clone()),
        _ => None,
    });
    assert_eq!(finished.map(|finished| finished.failed), Some(2));
}

#[test]
fn a_panicking_executor_fails_the_attempt_instead_of_hanging_the_run() {
    let pipeline = pipeline(vec![unit("boom", &[]), unit("after", &["boom"])], 2);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |name, _, _| {
        if name == "boom" {
            panic!("executor bug");
        }
        ok()
    });
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Failed));
    match &report.units[0].1 {
        UnitResult::Failed {
            error: Some(error), ..
        } => assert!(error.contains("executor bug"), "{error}"),
        other => panic!("unexpected {other:?}"),
    }
}

/// Asserts that every outcome it is told about is already in the journal.
struct DurableOnlyObserver {
    events: Arc<Mutex<Vec<Event>>>,
    reported: usize,
}

impl Observer for DurableOnlyObserver {
    fn notice(&mut self, notice: &Notice<'_>) {
        let recorded =
            |wanted: &dyn Fn(&Event) -> bool| self.events.lock().unwrap().iter().any(wanted);
        match notice {
            Notice::Finished { unit, record, .. } => {
                assert!(
                    recorded(&|event| matches!(event, Event::UnitFinished(finished)
                        if finished.unit == *unit && finished.attempt == record.attempt)),
                    "{unit} reported finished before its record was durable"
                );
                self.reported += 1;
            }
            Notice::Skipped { unit, .. } => {
                assert!(
                    recorded(
                        &|event| matches!(event, Event::UnitSkipped(skipped) if skipped.unit == *unit)
                    ),
                    "{unit} reported skipped before its record was durable"
                );
                self.reported += 1;
            }
            _ => {}
        }
    }
}

#[test]
fn outcomes_are_reported_only_once_the_journal_holds_them() {
    let pipeline = pipeline(
        vec![
            unit("a", &[]),
            unit("b", &[]),
            unit("c", &["a"]),
            unit("d", &["b"]),
        ],
        2,
    );
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(
        &journal,
        |name, _, _| if name == "b" { fail() } else { ok() },
    );
    let mut observer = DurableOnlyObserver {
        events: Arc::clone(&journal.events),
        reported: 0,
    };
    let mut options = EngineOptions::new("r", &pipeline);
    options.keep_going = true;
    run(
        &pipeline,
        &PriorState::empty(),
        &options,
        &mut journal,
        &executor,
        &TempLogs,
        &CancelToken::new(),
        &mut observer,
    )
    .unwrap();
    assert_eq!(observer.reported, 4, "a, b, c finished and d skipped");
}

#[test]
fn many_very_short_attempts_keep_the_write_ahead_rule_while_sharing_fsyncs() {
    // Ten layers of forty units, each depending on two units of the layer before: the fake
    // executor returns at once, so attempts are "very short", starts are committed 32
    // ahead and routine records wait for the workers' queue to run low. The executor checks
    // the write-ahead rule (its start and its dependencies' finishes durable) every time.
    let mut units = Vec::new();
    for layer in 0..10 {
        for index in 0..40 {
            let deps: Vec<String> = if layer == 0 {
                Vec::new()
            } else {
                vec![
                    format!("u{}_{}", layer - 1, index),
                    format!("u{}_{}", layer - 1, (index + 1) % 40),
                ]
            };
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            units.push(unit(&format!("u{layer}_{index}"), &deps));
        }
    }
    let pipeline = pipeline(units, 2);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    let mut ran = executor.ran();
    ran.sort();
    ran.dedup();
    assert_eq!(ran.len(), 400, "every unit ran exactly once");
    assert_eq!(executor.ran().len(), 400);
    assert!(
        journal.appends < 400,
        "{} appends for 400 units",
        journal.appends
    );
}

/// Fails `bad`, succeeds everything else, and remembers what it ran.
#[derive(Default)]
struct FailsBad {
    ran: Mutex<Vec<String>>,
}

impl Executor for FailsBad {
    fn run_attempt(&self, request: &AttemptRequest<'_>, _cancel: &CancelToken) -> AttemptOutcome {
        self.ran.lock().unwrap().push(request.unit.name.clone());
        let (status, exit) = if request.unit.name == "bad" {
            fail()
        } else {
            ok()
        };
        let mut outcome = failed_to_start(String::new());
        outcome.status = status;
        outcome.exit = exit;
        outcome
    }
}

/// Runs `worker` on two jobs (`bad`, then `next`), each with `halt_on_failure`, and returns
/// whether `halt` was up when `bad`'s outcome arrived, the second outcome's status, and what
/// ran.
fn worker_after_a_failure(halt_on_failure: bool) -> (bool, AttemptStatus, Vec<String>) {
    let pipeline = pipeline(vec![unit("bad", &[]), unit("next", &[])], 2);
    let executor = FailsBad::default();
    let cancel = CancelToken::new();
    let halt = AtomicBool::new(false);
    let (job_tx, job_rx) = crossbeam_channel::unbounded();
    let (done_tx, done_rx) = crossbeam_channel::unbounded();
    let (ack_tx, ack_rx) = crossbeam_channel::bounded(1);
    for unit_idx in 0..2 {
        job_tx
            .send(Job {
                unit_idx,
                attempt: 1,
                committed_at: Instant::now(),
                halt_on_failure,
            })
            .unwrap();
    }
    drop(job_tx);
    let (halted, second) = std::thread::scope(|scope| {
        scope.spawn(|| {
            let context = WorkerContext {
                worker_idx: 0,
                pipeline: &pipeline,
                run_id: "r",
                executor: &executor,
                logs: &TempLogs,
                cancel: &cancel,
                halt: &halt,
            };
            worker(context, &job_rx, &done_tx, &ack_rx);
        });
        let first: Done = done_rx.recv().unwrap();
        assert_eq!(first.outcome.status, AttemptStatus::Failed);
        // `halt` is raised before the outcome is sent, or not at all.
        let halted = halt.load(Ordering::SeqCst);
        ack_tx.send(()).unwrap();
        let second: Done = done_rx.recv().unwrap();
        if second.awaits_ack {
            ack_tx.send(()).unwrap();
        }
        (halted, second.outcome.status)
    });
    let ran = executor.ran.lock().unwrap().clone();
    (halted, second, ran)
}

#[test]
fn a_worker_whose_attempt_fails_for_good_halts_attempts_committed_ahead_itself() {
    // Fail-fast, no retry left: no other attempt starts, even before the engine has read
    // the failure (it may be in an fsync).
    let (halted, second, ran) = worker_after_a_failure(true);
    assert!(halted);
    assert_eq!(second, AttemptStatus::Interrupted);
    assert_eq!(ran, ["bad"]);
    // A retry left, or --keep-going: the failure does not stop the run by itself.
    let (halted, second, ran) = worker_after_a_failure(false);
    assert!(!halted);
    assert_eq!(second, AttemptStatus::Succeeded);
    assert_eq!(ran, ["bad", "next"]);
}
