//! A unit done in the prior state whose declared output takes too long to re-hash on resume:
//! the check runs on the hashing threads within the unit's timeout while other units go on,
//! and a cancellation stops it at once.

use super::hashing::{finished, kinds_of};
use super::*;

/// What [`resume_guarded`] saw: the engine's result, the events it added, the attempts run.
type Resumed = (
    Result<RunReport, EngineError>,
    Vec<Event>,
    Vec<(String, u32)>,
);

/// Resume the run `prior_events` recorded with `behaviour`, on a thread of its own, and fail
/// (not hang) if the engine has not returned within a generous safety net.
fn resume_guarded(
    pipeline: Pipeline,
    prior_events: Vec<Event>,
    behaviour: impl Fn(&str, u32, &CancelToken) -> (AttemptStatus, Option<ExitStatus>)
    + Send
    + Sync
    + 'static,
) -> Resumed {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let engine = std::thread::spawn(move || {
        let prior = PriorState::from_events(&prior_events);
        let mut journal = SharedJournal::default();
        journal
            .events
            .lock()
            .unwrap()
            .extend(prior_events.iter().cloned());
        let executor = FakeExecutor::new(&journal, behaviour);
        let result = run_with(
            &pipeline,
            &prior,
            &EngineOptions::new("r", &pipeline),
            &mut journal,
            &executor,
            &CancelToken::new(),
        );
        let events = journal.events.lock().unwrap()[prior_events.len()..].to_vec();
        let _ = tx.send((result, events, executor.ran()));
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(resumed) => resumed,
        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(engine.join().unwrap_err())
        }
        Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
            panic!("the engine did not return within 120 s: it blocks on a done unit's output")
        }
    }
}

/// A first run in which `writer` (declaring `out.bin`, written small) succeeded and `other`
/// failed; then `out.bin` grows into a 1 TiB sparse file that takes minutes to hash.
fn writer_done_then_output_huge(dir: &Path, writer: Unit) -> (Pipeline, Vec<Event>) {
    std::fs::write(dir.join("out.bin"), b"small").unwrap();
    let mut pipeline = pipeline(
        vec![
            Unit {
                outputs: vec!["out.bin".into()],
                ..writer
            },
            unit("other", &[]),
        ],
        2,
    );
    pipeline.base_dir = dir.to_owned();
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(
        &journal,
        |name, _, _| {
            if name == "other" { fail() } else { ok() }
        },
    );
    let mut options = EngineOptions::new("r", &pipeline);
    options.keep_going = true;
    let _ = run_with(
        &pipeline,
        &PriorState::empty(),
        &options,
        &mut journal,
        &executor,
        &CancelToken::new(),
    );
    let events = journal.events.lock().unwrap().clone();
    assert_eq!(finished(&events, "writer").status, AttemptStatus::Succeeded);
    std::fs::File::options()
        .write(true)
        .open(dir.join("out.bin"))
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    (pipeline, events)
}

#[test]
fn a_done_unit_s_output_not_rehashed_within_its_timeout_reruns_it_while_others_commit() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Unit {
        timeout: Some(Duration::from_secs(2)),
        ..unit("writer", &[])
    };
    let (pipeline, prior_events) = writer_done_then_output_huge(dir.path(), writer);
    let out = dir.path().join("out.bin");
    let (result, events, ran) = resume_guarded(pipeline, prior_events, move |name, _, _| {
        if name == "writer" {
            // The rerun writes its output anew.
            std::fs::write(&out, b"small").unwrap();
        }
        ok()
    });
    let report = result.unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    // `other` started, ran and committed while `writer`'s output was being re-hashed on a
    // hashing thread (`writer` comes first in config order): the re-hash blocked no one.
    // Outputs not hashed in time count as changed: the idempotent `writer` ran again.
    assert_eq!(
        kinds_of(&events),
        vec![
            "unit_started other",
            "unit_finished other",
            "unit_started writer",
            "unit_files writer",
            "unit_finished writer",
            "run_finished"
        ]
    );
    assert_eq!(ran, vec![("other".into(), 2), ("writer".into(), 2)]);
    assert_eq!(finished(&events, "writer").status, AttemptStatus::Succeeded);
}

#[test]
fn a_done_non_idempotent_unit_whose_output_is_not_rehashed_in_time_stops_for_a_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Unit {
        timeout: Some(Duration::from_secs(2)),
        idempotent: false,
        capture: Default::default(),
        executor: crate::model::ExecutorKind::Local,
        resources: crate::model::Resources::default(),
        ..unit("writer", &[])
    };
    let (pipeline, prior_events) = writer_done_then_output_huge(dir.path(), writer);
    let (result, events, ran) = resume_guarded(pipeline, prior_events, |_, _, _| ok());
    match result {
        Err(EngineError::ChangedNeedsVerdict { unit, changes, .. }) => {
            assert_eq!(unit, "writer");
            assert_eq!(changes.len(), 1, "{changes:?}");
            assert!(
                changes[0].contains(
                    "out.bin`: hashing it did not finish within the unit's timeout of 2s"
                ),
                "{changes:?}"
            );
        }
        other => panic!("expected a stop for a verdict, got {other:?}"),
    }
    assert!(events.is_empty(), "{:?}", kinds_of(&events));
    assert!(ran.is_empty());
}

#[test]
fn a_cancellation_stops_the_rehash_of_a_done_unit_s_output_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // No timeout: only the cancellation, raised while the output is being re-hashed, ends it.
    let (pipeline, prior_events) = writer_done_then_output_huge(dir.path(), unit("writer", &[]));
    let (result, events, ran) = resume_guarded(pipeline, prior_events, |_, _, cancel| {
        cancel.cancel(CancelLevel::Graceful);
        ok()
    });
    let report = result.unwrap();
    assert_eq!(report.status, Some(RunStatus::Interrupted));
    // Never decided here: what the run holds of it is its earlier success (as the run model
    // says), not "not run".
    assert_eq!(report.units[0].1, UnitResult::Reused);
    // The unit being checked was never decided nor started: no record of it.
    assert_eq!(
        kinds_of(&events),
        vec!["unit_started other", "unit_finished other", "run_finished"]
    );
    assert_eq!(ran, vec![("other".into(), 2)]);
}
