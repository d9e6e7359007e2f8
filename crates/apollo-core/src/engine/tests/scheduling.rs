//! Order, parallelism, retries, self-skips.

use std::sync::Arc;

use super::*;

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
fn retry_on_exit_retries_only_listed_codes_and_timeouts_follow_retries() {
    let mut picky = unit("picky", &[]);
    picky.retries = 5;
    picky.retry_on_exit = vec![75];
    let pipeline = pipeline(vec![picky], 1);
    let mut journal = SharedJournal::default();
    // 1: exit 75 (listed) → retried; 2: timed out → retried (`retries` decides); 3: exit 1
    // (not listed) → fails for good, though retries are left.
    let executor = FakeExecutor::new(&journal, |_, attempt, _| match attempt {
        1 => (AttemptStatus::Failed, Some(ExitStatus::Code(75))),
        2 => (AttemptStatus::TimedOut, Some(ExitStatus::Signal(15))),
        _ => fail(),
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
    let attempts: Vec<u32> = executor.ran().into_iter().map(|(_, n)| n).collect();
    assert_eq!(attempts, vec![1, 2, 3]);
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

#[test]
fn a_false_when_command_is_recorded_as_apollos_skip_after_the_attempt_and_dependents_go_on() {
    let mut branch = unit("branch", &[]);
    branch.when_command = Some(crate::model::Command::Shell("test -e new".into()));
    let pipeline = pipeline(vec![branch, unit("after", &["branch"])], 1);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |name, _, _| {
        if name == "branch" {
            (AttemptStatus::Skipped, Some(ExitStatus::Code(1)))
        } else {
            ok()
        }
    });
    let options = EngineOptions::new("r", &pipeline);
    let cancel = CancelToken::new();
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &options,
        &mut journal,
        &executor,
        &cancel,
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    let condition = "test -e new".to_owned();
    assert_eq!(
        report.units[0].1,
        UnitResult::SkippedWhen {
            condition: condition.clone()
        }
    );
    assert_eq!(report.units[1].1, UnitResult::Succeeded { attempt: 1 });
    let events = journal.events.lock().unwrap().clone();
    let finished = (events.iter())
        .position(
            |event| matches!(event, Event::UnitFinished(f) if f.unit == "branch" && f.when_false()),
        )
        .expect("the attempt's end");
    let skipped = Event::UnitSkipped(crate::event::UnitSkipped {
        unit: "branch".into(),
        reason: crate::event::SkipReason::When { condition },
    });
    assert_eq!(events[finished + 1], skipped);
}

/// Runs `n` idempotent units whose attempts take 2 ms and report 1 ms (short attempts, see
/// `Pacer::nap`) on 2 workers — after, with `careful`, a non-idempotent unit that holds a
/// worker until all of them are done — and returns the naps the engine took.
fn naps_over_short_attempts(n: usize, careful: bool) -> usize {
    let mut units: Vec<Unit> = (0..n).map(|idx| unit(&format!("u{idx}"), &[])).collect();
    if careful {
        let mut careful = unit("careful", &[]);
        careful.idempotent = false;
        units.insert(0, careful);
    }
    let pipeline = pipeline(units, 2);
    let mut journal = SharedJournal::default();
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = Arc::clone(&done);
    // The sleep is the attempts' work (the workers' queue stays long), not a synchronization.
    let mut executor = FakeExecutor::new(&journal, move |name, _, _| {
        if name == "careful" {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while seen.load(std::sync::atomic::Ordering::SeqCst) < n {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the others never ended"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        } else {
            std::thread::sleep(Duration::from_millis(2));
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        ok()
    });
    executor.wall_time = Duration::from_millis(1);
    super::scheduler::NAPS.set(0);
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
    assert_eq!(done.load(std::sync::atomic::Ordering::SeqCst), n);
    super::scheduler::NAPS.get()
}

#[test]
fn the_engine_naps_while_short_attempts_are_queued_but_not_while_a_non_idempotent_one_runs() {
    // Idempotent units are committed ahead: the workers' queue is long, the engine sleeps
    // between intakes instead of waking for each outcome.
    assert!(naps_over_short_attempts(100, false) > 0);
    // The same queue behind a non-idempotent attempt at the other worker: its end is taken in
    // (and recorded) at once.
    assert_eq!(naps_over_short_attempts(100, true), 0);
}

/// Found by the simulation (`sim/`, seed 97): the local limit was taken once per turn, so
/// attempts decided in the same turn after a non-idempotent unit was sent to be hashed were
/// committed ahead, and its start then waited in the workers' queue behind them — a durable
/// `unit_started` without a process about to exist, which after a crash asks a human.
#[test]
fn a_non_idempotent_unit_being_hashed_is_not_queued_behind_attempts_committed_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small"), b"data").unwrap();
    let careful = Unit {
        idempotent: false,
        inputs: vec!["small".into()],
        ..unit("careful", &[])
    };
    let mut pipeline = pipeline(vec![careful, unit("a", &[]), unit("b", &[])], 1);
    pipeline.base_dir = dir.path().to_owned();
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
    let order: Vec<String> = executor.ran().into_iter().map(|(name, _)| name).collect();
    assert_eq!(order, vec!["careful", "a", "b"]);
    let starts: Vec<String> = kinds(&journal)
        .into_iter()
        .filter(|kind| kind.starts_with("unit_started"))
        .collect();
    assert_eq!(starts[0], "unit_started careful");
}
