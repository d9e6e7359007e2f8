//! DESIGN §7 and §17 "Input changes": a non-idempotent unit is never run again behind a
//! human's back — not after it was cut off (crash, Ctrl-C, SIGTERM, timeout), and not because
//! its inputs changed after it succeeded; a done unit whose declared outputs are missing or
//! changed is not reused.

use super::*;

/// `name`, declaring `outputs` relative to `base_dir`.
fn unit_in(base_dir: &Path, name: &str, deps: &[&str], outputs: &[&str]) -> Unit {
    let mut unit = unit(name, deps);
    unit.workdir = base_dir.to_path_buf();
    unit.outputs = outputs.iter().map(|output| (*output).to_owned()).collect();
    unit
}

fn pipeline_in(base_dir: &Path, units: Vec<Unit>) -> Pipeline {
    let mut pipeline = pipeline(units, 1);
    pipeline.base_dir = base_dir.to_path_buf();
    pipeline.config_path = base_dir.join("pipeline.yaml");
    pipeline
}

/// Resume `pipeline` from `events` with `options`: the result and what ran.
fn resume(
    pipeline: &Pipeline,
    events: &[Event],
    options: &EngineOptions,
    behaviour: impl Fn(&str, u32, &CancelToken) -> (AttemptStatus, Option<ExitStatus>)
    + Send
    + Sync
    + 'static,
) -> (Result<RunReport, EngineError>, Vec<(String, u32)>) {
    let prior = PriorState::from_events(events);
    let mut journal = SharedJournal::default();
    journal.events.lock().unwrap().extend_from_slice(events);
    let executor = FakeExecutor::new(&journal, behaviour);
    let result = run_with(
        pipeline,
        &prior,
        options,
        &mut journal,
        &executor,
        &CancelToken::new(),
    );
    (result, executor.ran())
}

#[test]
fn a_non_idempotent_unit_cut_off_by_a_signal_or_its_timeout_needs_a_verdict() {
    for cut_off in [AttemptStatus::Interrupted, AttemptStatus::TimedOut] {
        let mut careful = unit("careful", &[]);
        careful.idempotent = false;
        let pipeline = pipeline(vec![unit("a", &[]), careful, unit("b", &["careful"])], 1);
        let events = first_run(&pipeline, move |name, _, _| {
            if name == "careful" {
                (cut_off, None)
            } else {
                ok()
            }
        });
        let options = EngineOptions::new("r", &pipeline);
        let (result, ran) = resume(&pipeline, &events, &options, |_, _, _| ok());
        let error = result.unwrap_err();
        assert!(
            matches!(&error, EngineError::NeedsVerdict { unit, attempt: 1, .. } if unit == "careful"),
            "{cut_off:?}: {error}"
        );
        assert!(ran.is_empty(), "{cut_off:?}: nothing may run: {ran:?}");

        // Not even `--on-input-change=rerun` lets it through: only a verdict does.
        let mut options = EngineOptions::new("r", &pipeline);
        options.on_input_change = OnInputChange::Rerun;
        let (result, ran) = resume(&pipeline, &events, &options, |_, _, _| ok());
        assert!(result.is_err(), "{cut_off:?}");
        assert!(ran.is_empty(), "{cut_off:?}: {ran:?}");
    }
}

#[test]
fn an_idempotent_unit_cut_off_by_its_timeout_simply_runs_again() {
    let pipeline = pipeline(vec![unit("a", &[]), unit("b", &["a"])], 1);
    let events = first_run(&pipeline, |name, _, _| {
        if name == "a" {
            (AttemptStatus::TimedOut, None)
        } else {
            ok()
        }
    });
    let options = EngineOptions::new("r", &pipeline);
    let (result, ran) = resume(&pipeline, &events, &options, |_, _, _| ok());
    assert_eq!(result.unwrap().status, Some(RunStatus::Succeeded));
    assert_eq!(ran, vec![("a".into(), 2), ("b".into(), 1)]);
}

#[test]
fn an_attempt_stopped_before_its_process_started_needs_no_verdict() {
    // A committed attempt halted before its turn is recorded `interrupted` with no phase:
    // nothing of it ran, so nothing can be half done.
    let mut careful = unit("careful", &[]);
    careful.idempotent = false;
    let pipeline = pipeline(vec![careful], 1);
    let mut events = vec![Event::UnitStarted(UnitStarted {
        unit: "careful".into(),
        attempt: 1,
        input_hash: "x".into(),
        inputs: vec![],
        inputs_manifest: None,
    })];
    let mut outcome = failed_to_start("not started".into());
    outcome.status = AttemptStatus::Interrupted;
    let settled = super::super::record::settle(&outcome, None);
    events.push(Event::UnitFinished(super::super::record::unit_finished(
        &pipeline.units[0],
        1,
        &settled,
        &outcome,
        Duration::ZERO,
    )));
    let options = EngineOptions::new("r", &pipeline);
    let (result, ran) = resume(&pipeline, &events, &options, |_, _, _| ok());
    assert_eq!(result.unwrap().status, Some(RunStatus::Succeeded));
    assert_eq!(ran, vec![("careful".into(), 2)]);
}

#[test]
fn a_timed_out_non_idempotent_unit_is_not_retried_within_the_run() {
    let mut careful = unit("careful", &[]);
    careful.idempotent = false;
    careful.retries = 2;
    let mut flaky = unit("flaky", &[]);
    flaky.idempotent = false;
    flaky.retries = 1;
    let pipeline = pipeline(vec![careful, flaky], 1);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |name, attempt, _| match (name, attempt) {
        ("careful", _) => (AttemptStatus::TimedOut, None),
        ("flaky", 1) => fail(),
        _ => ok(),
    });
    let mut options = EngineOptions::new("r", &pipeline);
    options.keep_going = true;
    options.max_retry_delay = Duration::ZERO;
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
    // A non-zero exit is the unit's own verdict: its retries apply. A timeout cut it off.
    assert_eq!(
        executor.ran(),
        vec![
            ("careful".into(), 1),
            ("flaky".into(), 1),
            ("flaky".into(), 2)
        ]
    );
}

#[test]
fn a_done_non_idempotent_unit_whose_env_changed_stops_for_a_human_by_default() {
    let mut careful = unit("careful", &[]);
    careful.idempotent = false;
    let original = pipeline(vec![careful, unit("b", &["careful"])], 1);
    let events = first_run(
        &original,
        |name, _, _| if name == "b" { fail() } else { ok() },
    );
    let mut changed = original.clone();
    changed.units[0].env.insert("UNRELATED".into(), "1".into());

    let options = EngineOptions::new("r", &changed);
    let (result, ran) = resume(&changed, &events, &options, |_, _, _| ok());
    let error = result.unwrap_err();
    assert!(
        matches!(&error, EngineError::ChangedNeedsVerdict { unit, attempt: 1, changes }
            if unit == "careful" && changes == &["env UNRELATED added"]),
        "{error}"
    );
    assert!(ran.is_empty(), "{ran:?}");

    let mut options = EngineOptions::new("r", &changed);
    options.on_input_change = OnInputChange::Rerun;
    let (result, ran) = resume(&changed, &events, &options, |_, _, _| ok());
    result.unwrap();
    assert_eq!(ran, vec![("careful".into(), 2), ("b".into(), 2)]);
}

#[test]
fn a_done_non_idempotent_unit_whose_upstream_output_changed_stops_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_path_buf();
    let mut careful = unit_in(&base, "careful", &["a"], &[]);
    careful.idempotent = false;
    let original = pipeline_in(
        &base,
        vec![
            unit_in(&base, "a", &[], &["a.out"]),
            careful,
            unit("gate", &["careful"]),
        ],
    );
    let writes = |base: PathBuf, content: &'static str| {
        move |name: &str, _: u32, _: &CancelToken| {
            if name == "a" {
                std::fs::write(base.join("a.out"), content).unwrap();
            }
            if name == "gate" { fail() } else { ok() }
        }
    };
    let events = first_run(&original, writes(base.clone(), "v1"));
    let mut changed = original.clone();
    changed.units[0].execute = Command::Shell("run a --v2".into());

    let options = EngineOptions::new("r", &changed);
    let (result, ran) = resume(&changed, &events, &options, writes(base.clone(), "v2"));
    let error = result.unwrap_err();
    assert!(
        matches!(&error, EngineError::ChangedNeedsVerdict { unit, changes, .. }
            if unit == "careful" && changes == &["upstream a output changed"]),
        "{error}"
    );
    assert_eq!(ran, vec![("a".into(), 2)], "careful must not run again");
}

#[test]
fn a_rerun_verdict_lets_exactly_that_unit_run_again_once() {
    let mut careful = unit("careful", &[]);
    careful.idempotent = false;
    let mut other = unit("other", &[]);
    other.idempotent = false;
    let original = pipeline(vec![careful, other, unit("gate", &["careful", "other"])], 1);
    let mut events = first_run(
        &original,
        |name, _, _| if name == "gate" { fail() } else { ok() },
    );
    let mut changed = original.clone();
    changed.units[0].env.insert("NEW".into(), "1".into());
    events.push(Event::UnitMarked(UnitMarked {
        unit: "careful".into(),
        attempt: 1,
        verdict: Verdict::Rerun,
        by: "ops".into(),
        note: None,
    }));
    let options = EngineOptions::new("r", &changed);
    let prior = PriorState::from_events(&events);
    let mut journal = SharedJournal::default();
    journal.events.lock().unwrap().extend_from_slice(&events);
    let executor = FakeExecutor::new(
        &journal,
        |name, _, _| {
            if name == "gate" { fail() } else { ok() }
        },
    );
    run_with(
        &changed,
        &prior,
        &options,
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    // `other` did not change: the verdict on `careful` says nothing about it.
    assert_eq!(
        executor.ran(),
        vec![("careful".into(), 2), ("gate".into(), 2)]
    );

    // The allowance was used up by that attempt: the next change asks again.
    let events = journal.events.lock().unwrap().clone();
    let mut changed_again = changed.clone();
    changed_again.units[0].env.insert("NEW".into(), "2".into());
    let (result, ran) = resume(&changed_again, &events, &options, |_, _, _| ok());
    let error = result.unwrap_err();
    assert!(
        matches!(&error, EngineError::ChangedNeedsVerdict { unit, attempt: 2, .. } if unit == "careful"),
        "{error}"
    );
    assert!(ran.is_empty(), "{ran:?}");
}

#[test]
fn a_done_unit_whose_declared_output_is_missing_or_changed_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_path_buf();
    let pipeline = pipeline_in(
        &base,
        vec![
            unit_in(&base, "a", &[], &["data/a.csv"]),
            unit("gate", &["a"]),
        ],
    );
    std::fs::create_dir_all(base.join("data")).unwrap();
    let writes = |base: PathBuf| {
        move |name: &str, _: u32, _: &CancelToken| {
            if name == "a" {
                std::fs::write(base.join("data/a.csv"), "a\n").unwrap();
            }
            if name == "gate" { fail() } else { ok() }
        }
    };
    let events = first_run(&pipeline, writes(base.clone()));
    let options = EngineOptions::new("r", &pipeline);

    std::fs::remove_file(base.join("data/a.csv")).unwrap();
    let prior = PriorState::from_events(&events);
    let plan = dry_run(&pipeline, &prior, &options, &CancelToken::new()).unwrap();
    assert!(matches!(
        &plan[0].1,
        Planned::Decided(Decision::InputsChanged(_))
    ));
    let (_, ran) = resume(&pipeline, &events, &options, writes(base.clone()));
    assert_eq!(ran, vec![("a".into(), 2), ("gate".into(), 2)]);

    std::fs::write(base.join("data/a.csv"), "edited by hand\n").unwrap();
    let plan = dry_run(&pipeline, &prior, &options, &CancelToken::new()).unwrap();
    assert_eq!(
        plan[0].1.to_string(),
        "runs again: output data/a.csv changed"
    );
    let (_, ran) = resume(&pipeline, &events, &options, writes(base.clone()));
    assert_eq!(ran, vec![("a".into(), 2), ("gate".into(), 2)]);

    std::fs::remove_file(base.join("data/a.csv")).unwrap();
    let plan = dry_run(&pipeline, &prior, &options, &CancelToken::new()).unwrap();
    assert_eq!(
        plan[0].1.to_string(),
        "runs again: output data/a.csv is missing"
    );
}

#[test]
fn a_done_non_idempotent_unit_whose_output_is_missing_needs_a_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_path_buf();
    let mut careful = unit_in(&base, "careful", &[], &["sent.txt"]);
    careful.idempotent = false;
    let pipeline = pipeline_in(&base, vec![careful, unit("gate", &["careful"])]);
    let writes = |base: PathBuf| {
        move |name: &str, _: u32, _: &CancelToken| {
            if name == "careful" {
                std::fs::write(base.join("sent.txt"), "sent\n").unwrap();
            }
            if name == "gate" { fail() } else { ok() }
        }
    };
    let events = first_run(&pipeline, writes(base.clone()));
    std::fs::remove_file(base.join("sent.txt")).unwrap();
    let options = EngineOptions::new("r", &pipeline);
    let (result, ran) = resume(&pipeline, &events, &options, writes(base.clone()));
    let error = result.unwrap_err();
    assert!(
        matches!(&error, EngineError::ChangedNeedsVerdict { unit, changes, .. }
            if unit == "careful" && changes == &["output sent.txt is missing"]),
        "{error}"
    );
    assert!(ran.is_empty(), "{ran:?}");
}
