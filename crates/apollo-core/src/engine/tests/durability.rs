//! Durability: the write-ahead rule under load, notices only once durable, the rule's checker
//! itself, and what attempts report while they run.

use std::sync::{Arc, Mutex};

use super::*;

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

#[test]
fn a_unit_that_must_not_run_twice_or_goes_to_slurm_is_started_by_a_strict_append_only() {
    let mut must_not_run_twice = unit("n", &["a"]);
    must_not_run_twice.idempotent = false;
    let mut on_slurm = unit("s", &["a"]);
    on_slurm.executor = crate::model::ExecutorKind::Slurm;
    let pipeline = pipeline(
        vec![
            unit("a", &[]),
            must_not_run_twice,
            on_slurm,
            unit("b", &["n", "s"]),
        ],
        2,
    );
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
    let strictly = &journal.started_strictly;
    assert!(strictly.contains(&"n".to_owned()), "{strictly:?}");
    assert!(strictly.contains(&"s".to_owned()), "{strictly:?}");
    // `a` starts alone, `b` after both: routine batches.
    assert!(!strictly.contains(&"a".to_owned()), "{strictly:?}");
    assert!(!strictly.contains(&"b".to_owned()), "{strictly:?}");
}

#[test]
fn a_pipeline_of_idempotent_local_units_appends_nothing_strictly() {
    let pipeline = pipeline(vec![unit("a", &[]), unit("b", &["a"]), unit("c", &[])], 2);
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
    assert!(journal.started_strictly.is_empty());
}
