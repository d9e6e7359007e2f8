//! DESIGN §18 "Exactly once": an attempt killed by a signal apollo did not send is cut off,
//! as half done as one apollo's death cut off; a Slurm attempt apollo's death left in flight
//! after its submission is handed to its executor to reattach (not run twice, not refused);
//! an attempt that needs a human stops the run, and one in doubt is left in flight.

use super::*;
use crate::event::UnitSubmitted;
use crate::executor::NeedsHuman;
use crate::model::ExecutorKind;
use crate::resume::PriorUnitState;

fn careful(retries: u32) -> Unit {
    let mut careful = unit("careful", &[]);
    careful.idempotent = false;
    careful.retries = retries;
    careful.retry_delay = Duration::ZERO;
    careful
}

fn run_fresh(
    pipeline: &Pipeline,
    executor: &FakeExecutor,
    journal: &mut SharedJournal,
) -> Result<RunReport, EngineError> {
    run_with(
        pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", pipeline),
        journal,
        executor,
        &CancelToken::new(),
    )
}

#[test]
fn a_non_idempotent_unit_killed_by_a_signal_apollo_did_not_send_is_not_retried_and_needs_a_verdict()
{
    let pipeline = pipeline(vec![careful(2), unit("after", &["careful"])], 1);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |name, _, _| {
        if name == "careful" {
            (AttemptStatus::Failed, Some(ExitStatus::Signal(9)))
        } else {
            ok()
        }
    });
    let error = run_fresh(&pipeline, &executor, &mut journal).unwrap_err();
    assert!(
        matches!(&error, EngineError::NeedsVerdict { unit, attempt: 1, ended: Some(AttemptStatus::Failed) } if unit == "careful"),
        "{error}"
    );
    assert!(
        error.to_string().contains("signal apollo did not send"),
        "{error}"
    );
    // Not retried although it has retries left, and nothing downstream ran.
    assert_eq!(executor.ran(), vec![("careful".into(), 1)]);
    // The next resume asks again, before anything runs.
    let events = journal.events.lock().unwrap().clone();
    let prior = PriorState::from_events(&events);
    assert_eq!(
        prior.unit("careful").unwrap().state,
        PriorUnitState::CutOff {
            attempt: 1,
            status: AttemptStatus::Failed
        }
    );
    let mut resumed = SharedJournal::default();
    resumed.events.lock().unwrap().extend(events);
    let again = FakeExecutor::new(&resumed, |_, _, _| ok());
    let error = run_with(
        &pipeline,
        &prior,
        &EngineOptions::new("r", &pipeline),
        &mut resumed,
        &again,
        &CancelToken::new(),
    )
    .unwrap_err();
    assert!(matches!(error, EngineError::NeedsVerdict { .. }), "{error}");
    assert!(again.ran().is_empty());
}

#[test]
fn an_idempotent_unit_killed_by_a_signal_is_retried_and_a_plain_failure_of_a_careful_one_too() {
    let mut flaky = unit("flaky", &[]);
    flaky.retries = 1;
    flaky.retry_delay = Duration::ZERO;
    let pipeline = pipeline(vec![flaky, careful(1)], 1);
    let mut journal = SharedJournal::default();
    // `flaky` (idempotent) is killed; `careful` exits 1 (its own verdict on itself): both are
    // retried.
    let executor = FakeExecutor::new(&journal, |name, attempt, _| match (name, attempt) {
        ("flaky", 1) => (AttemptStatus::Failed, Some(ExitStatus::Signal(9))),
        ("careful", 1) => fail(),
        _ => ok(),
    });
    let report = run_fresh(&pipeline, &executor, &mut journal).unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    let mut ran = executor.ran();
    ran.sort();
    assert_eq!(
        ran,
        vec![
            ("careful".into(), 1),
            ("careful".into(), 2),
            ("flaky".into(), 1),
            ("flaky".into(), 2)
        ]
    );
}

fn slurm_careful() -> Unit {
    let mut unit = careful(0);
    unit.executor = ExecutorKind::Slurm;
    unit
}

fn in_flight_events(submitted: bool) -> Vec<Event> {
    let mut events = vec![Event::UnitStarted(UnitStarted {
        unit: "careful".into(),
        attempt: 1,
        input_hash: "x".into(),
        inputs: vec![],
        inputs_manifest: None,
    })];
    if submitted {
        events.push(Event::UnitSubmitted(UnitSubmitted {
            unit: "careful".into(),
            attempt: 1,
            executor: "slurm".into(),
            job_id: "63".into(),
            reattached_from: None,
            partition: None,
            nodes: None,
            mem_mib: None,
        }));
    }
    events
}

#[test]
fn a_non_idempotent_slurm_job_left_in_flight_by_apollos_death_is_reattached_not_refused() {
    let pipeline = pipeline(vec![slurm_careful()], 1);
    let events = in_flight_events(true);
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
    // The executor was handed the attempt in flight, to reattach to its job.
    assert_eq!(
        *executor.in_flight_seen.lock().unwrap(),
        vec![("careful".to_owned(), Some(1))]
    );
}

#[test]
fn a_non_idempotent_slurm_attempt_whose_submission_was_never_recorded_needs_a_verdict() {
    // apollo died between `sbatch` and `unit_submitted`: whether a job exists is not known
    // from the journal, so a human decides (the executor's token lookup is for the next
    // attempt, after the verdict).
    let pipeline = pipeline(vec![slurm_careful()], 1);
    let events = in_flight_events(false);
    let prior = PriorState::from_events(&events);
    let error = preflight(
        &pipeline,
        &prior,
        &EngineOptions::new("r", &pipeline),
        &CancelToken::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            error,
            EngineError::NeedsVerdict {
                attempt: 1,
                ended: None,
                ..
            }
        ),
        "{error}"
    );
    // A local non-idempotent unit in flight is refused as before, submitted or not.
    let mut local = pipeline.clone();
    local.units[0].executor = ExecutorKind::Local;
    let prior = PriorState::from_events(&in_flight_events(true));
    assert!(
        preflight(
            &local,
            &prior,
            &EngineOptions::new("r", &local),
            &CancelToken::new()
        )
        .is_err()
    );
}

#[test]
fn an_attempt_in_doubt_is_left_in_flight_and_stops_the_run_for_a_human() {
    let pipeline = pipeline(vec![slurm_careful(), unit("after", &["careful"])], 1);
    let mut journal = SharedJournal::default();
    let mut executor = FakeExecutor::new(&journal, |_, _, _| (AttemptStatus::Interrupted, None));
    executor.needs_human.insert(
        "careful".into(),
        NeedsHuman::in_doubt("sbatch's answer was lost; no job with token t0k3n is known"),
    );
    let error = run_fresh(&pipeline, &executor, &mut journal).unwrap_err();
    assert!(
        matches!(&error, EngineError::NeedsHuman { unit, attempt: 1, left_in_flight: true, reason } if unit == "careful" && reason.contains("t0k3n")),
        "{error}"
    );
    // No end recorded: the attempt stays in flight, and the run is not finished.
    assert_eq!(kinds(&journal), vec!["unit_started careful"]);
    let prior = PriorState::from_events(&journal.events.lock().unwrap().clone());
    assert_eq!(
        prior.unit("careful").unwrap().state,
        PriorUnitState::InFlight { attempt: 1 }
    );
}

#[test]
fn an_attempt_that_refused_to_start_beside_a_running_job_is_recorded_failed_and_not_retried() {
    let mut refusing = slurm_careful();
    refusing.idempotent = true;
    refusing.retries = 3;
    refusing.retry_delay = Duration::ZERO;
    let pipeline = pipeline(vec![refusing], 1);
    let mut journal = SharedJournal::default();
    let mut executor = FakeExecutor::new(&journal, |_, _, _| fail());
    executor.needs_human.insert(
        "careful".into(),
        NeedsHuman::refused("attempt 1's Slurm job 63 is still running (`scancel 63`)"),
    );
    let error = run_fresh(&pipeline, &executor, &mut journal).unwrap_err();
    assert!(
        matches!(&error, EngineError::NeedsHuman { left_in_flight: false, reason, .. } if reason.contains("scancel 63")),
        "{error}"
    );
    assert_eq!(executor.ran(), vec![("careful".into(), 1)]);
    assert_eq!(
        kinds(&journal),
        vec!["unit_started careful", "unit_finished careful"]
    );
}
