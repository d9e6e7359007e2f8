//! Failures, fail-fast, keep-going, cancellation, journal errors, executor panics.

use super::*;

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

/// Found by the torture harness's reuse mix (2026-12-03): the journal failed while more
/// attempts were committed than workers could take. A worker that reported a halted attempt
/// and found no acknowledgement (abandoned on the journal error) stopped taking jobs, so the
/// attempts still queued were never reported and the engine waited for them forever.
#[test]
fn a_journal_failure_with_attempts_queued_beyond_the_workers_ends_the_run() {
    let units = (0..8).map(|i| unit(&format!("u{i}"), &[])).collect();
    let pipeline = pipeline(units, 1);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut journal = SharedJournal {
            fail_from: Some(1),
            ..SharedJournal::default()
        };
        // A failure waits for the scheduler's acknowledgement, which the journal error
        // abandons: the worker must still report the attempts queued behind it.
        let executor = FakeExecutor::new(
            &journal,
            |name, _, _| if name == "u0" { fail() } else { ok() },
        );
        let options = EngineOptions::new("r", &pipeline);
        let cancel = CancelToken::new();
        let result = run_with(
            &pipeline,
            &PriorState::empty(),
            &options,
            &mut journal,
            &executor,
            &cancel,
        );
        let _ = done_tx.send((result.map(|_| ()), executor.ran().len()));
    });
    // A safety net, not a synchronisation: the run ends at once when it ends at all.
    let (result, ran) = done_rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the engine returned (it used to wait forever)");
    assert!(matches!(result, Err(EngineError::Journal(_))), "{result:?}");
    assert!(
        ran <= 1,
        "nothing starts after the journal failed: {ran} ran"
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
