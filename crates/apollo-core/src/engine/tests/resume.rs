//! Resuming a run: reuse, in-flight units, changed inputs, `--only`.

use super::*;

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
            inputs_manifest: None,
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
        matches!(error, EngineError::NeedsVerdict { ref unit, attempt: 1, ended: None } if unit == "careful"),
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
fn a_unit_done_earlier_in_the_run_that_this_process_never_reran_is_reported_done_not_unstarted() {
    // `a` succeeded before apollo died; its command changed since, so the resume means to run
    // it again — but the run stops before it starts (here: cancelled at once; in the agreement
    // test: a fail-fast stop). The run holds its success: the report must say so, as the run
    // model does (issue 35: the summary said `not_started`, the model `succeeded`).
    let first = pipeline(vec![unit("a", &[]), unit("b", &["a"])], 1);
    let events = first_run(&first, |name, _, _| if name == "b" { fail() } else { ok() });
    let prior = PriorState::from_events(&events);
    let mut changed = unit("a", &[]);
    changed.execute = Command::Shell("run a, differently".into());
    let pipeline = pipeline(vec![changed, unit("b", &["a"])], 1);
    let mut journal = SharedJournal::default();
    journal.events.lock().unwrap().extend(events);
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let cancel = CancelToken::new();
    cancel.cancel(crate::cancel::CancelLevel::Graceful);
    let report = run_with(
        &pipeline,
        &prior,
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &cancel,
    )
    .unwrap();
    assert!(executor.ran().is_empty());
    assert_eq!(report.units[0].1, UnitResult::Reused, "{:?}", report.units);
    assert_eq!(report.units[1].1, UnitResult::NotRun);
}
