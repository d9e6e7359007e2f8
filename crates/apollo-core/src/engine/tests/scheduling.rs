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
