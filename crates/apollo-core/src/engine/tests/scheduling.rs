//! Order, parallelism, retries, self-skips, and the write-ahead rule under load.

use std::sync::{Arc, Mutex};

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

/// Sets the scheduler's test-only hook that leaves `unit_started` records out of its commits,
/// for as long as it lives.
struct BreakWriteAhead;

impl BreakWriteAhead {
    fn new() -> Self {
        scheduler::BREAK_WRITE_AHEAD.set(true);
        Self
    }
}

impl Drop for BreakWriteAhead {
    fn drop(&mut self) {
        scheduler::BREAK_WRITE_AHEAD.set(false);
    }
}

#[test]
fn a_write_ahead_violation_inside_a_worker_is_recorded_not_swallowed() {
    let pipeline = pipeline(vec![unit("a", &[]), unit("b", &["a"])], 1);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let report = {
        let _broken = BreakWriteAhead::new();
        run(
            &pipeline,
            &PriorState::empty(),
            &EngineOptions::new("r", &pipeline),
            &mut journal,
            &executor,
            &TempLogs,
            &CancelToken::new(),
            &mut NoObserver,
        )
        .unwrap()
    };
    // The run itself cannot tell: only the executor's check, read after the run, sees it.
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    assert_eq!(
        executor.take_violations(),
        [
            "unit_started of a #1 not durable before the attempt ran",
            "unit_started of b #1 not durable before the attempt ran"
        ]
    );
    assert!(!kinds(&journal).contains(&"unit_started a".to_owned()));
}

/// Records the notices about `unit_submitted` records, and checks they are durable.
struct SubmissionObserver {
    events: Arc<Mutex<Vec<Event>>>,
    submitted: Vec<String>,
}

impl Observer for SubmissionObserver {
    fn notice(&mut self, notice: &Notice<'_>) {
        if let Notice::Submitted {
            unit,
            attempt,
            executor,
            job_id,
        } = notice
        {
            let durable = self.events.lock().unwrap().iter().any(|event| {
                matches!(event, Event::UnitSubmitted(submitted)
                    if submitted.unit == *unit && submitted.job_id == *job_id)
            });
            assert!(
                durable,
                "{unit}'s submission reported before it was durable"
            );
            self.submitted
                .push(format!("{unit} #{attempt} {executor} {job_id}"));
        }
    }
}

#[test]
fn a_job_id_an_attempt_reports_is_journaled_between_its_start_and_its_end() {
    let mut remote = unit("remote", &[]);
    remote.retries = 1;
    let pipeline = pipeline(vec![remote, unit("after", &["remote"])], 1);
    let mut journal = SharedJournal::default();
    let mut executor = FakeExecutor::new(&journal, |name, attempt, _| {
        if name == "remote" && attempt == 1 {
            fail()
        } else {
            ok()
        }
    });
    executor.submits_as.insert("remote".into(), "4242".into());
    let mut observer = SubmissionObserver {
        events: Arc::clone(&journal.events),
        submitted: Vec::new(),
    };
    let report = run(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &TempLogs,
        &CancelToken::new(),
        &mut observer,
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    assert_eq!(
        kinds(&journal),
        [
            "unit_started remote",
            "unit_submitted remote",
            "unit_finished remote",
            "unit_started remote",
            "unit_submitted remote",
            "unit_finished remote",
            "unit_started after",
            "unit_finished after",
            "run_finished"
        ]
    );
    assert_eq!(
        observer.submitted,
        ["remote #1 fake 4242", "remote #2 fake 4242"]
    );
    // A resume sees a submitted attempt without an end as in flight, like any other.
    let events = journal.events.lock().unwrap().clone();
    let prior = PriorState::from_events(&events[..2]);
    assert!(matches!(
        prior.unit("remote").map(|prior_unit| &prior_unit.state),
        Some(crate::resume::PriorUnitState::InFlight { attempt: 1 })
    ));
}
