//! Watching the deadline for `on_late`: `run_late` once per run, durable before it is told,
//! when the deadline comes with units left (the timer in the scheduler's wait) or the
//! predicted finish passes it; never again once recorded.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use chrono::{TimeDelta, Utc};

use super::*;
use crate::deadline::UnitHistory;
use crate::engine::api::LateWatch;

/// Counts `Notice::Late`, checking that its record is durable when told.
struct LateNotices {
    events: Arc<Mutex<Vec<Event>>>,
    told: Vec<crate::event::RunLate>,
}

impl Observer for LateNotices {
    fn notice(&mut self, notice: &Notice<'_>) {
        if let Notice::Late { record } = notice {
            let durable = (self.events.lock().unwrap().iter())
                .any(|event| matches!(event, Event::RunLate(late) if late == *record));
            assert!(durable, "run_late told before it was durable");
            self.told.push((*record).clone());
        }
    }
}

fn run_late_records(journal: &SharedJournal) -> Vec<crate::event::RunLate> {
    (journal.events.lock().unwrap().iter())
        .filter_map(|event| match event {
            Event::RunLate(late) => Some(late.clone()),
            _ => None,
        })
        .collect()
}

fn hours(n: u64) -> Option<UnitHistory> {
    Some(UnitHistory {
        p50: Duration::from_secs(3600 * n),
        p95: Duration::from_secs(3600 * 2 * n),
    })
}

fn run_watched(
    pipeline: &Pipeline,
    prior: &PriorState,
    watch: LateWatch,
    journal: &mut SharedJournal,
    executor: &FakeExecutor,
) -> Vec<crate::event::RunLate> {
    let options = EngineOptions::new("r", pipeline).late(watch);
    let mut observer = LateNotices {
        events: Arc::clone(&journal.events),
        told: Vec::new(),
    };
    let report = run(
        pipeline,
        prior,
        &options,
        journal,
        executor,
        &TempLogs,
        &CancelToken::new(),
        &mut observer,
    )
    .unwrap();
    executor.assert_no_violations();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    observer.told
}

#[test]
fn the_deadline_coming_while_a_unit_runs_records_run_late_once_on_the_timer() {
    // `slow` has no history (the prediction is "now"): only the deadline's coming makes the
    // run late, and `slow` ends only once `run_late` is recorded — no unit end can have
    // triggered the evaluation that found it.
    let pipeline = pipeline(vec![unit("slow", &[]), unit("after", &["slow"])], 1);
    let mut journal = SharedJournal::default();
    let events = Arc::clone(&journal.events);
    let executor = FakeExecutor::new(&journal, move |unit, _, _| {
        if unit == "slow" {
            let give_up = Instant::now() + Duration::from_secs(60);
            while !(events.lock().unwrap().iter()).any(|event| matches!(event, Event::RunLate(_))) {
                assert!(Instant::now() < give_up, "run_late never came");
                std::thread::yield_now();
            }
        }
        ok()
    });
    let deadline = Utc::now() + TimeDelta::milliseconds(100);
    let watch = LateWatch::new(deadline, vec![None, None]);
    let told = run_watched(
        &pipeline,
        &PriorState::empty(),
        watch,
        &mut journal,
        &executor,
    );
    let recorded = run_late_records(&journal);
    assert_eq!(told, recorded);
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].critical_path, ["slow", "after"]);
    assert_eq!(recorded[0].no_history, ["slow", "after"]);
    assert_eq!(
        recorded[0].deadline,
        crate::deadline::to_journal(deadline),
        "{recorded:?}"
    );
}

#[test]
fn a_predicted_finish_past_the_deadline_is_late_at_once_and_only_once() {
    let pipeline = pipeline(
        vec![unit("a", &[]), unit("b", &["a"]), unit("c", &["a"])],
        1,
    );
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let deadline = Utc::now() + TimeDelta::hours(2);
    let watch = LateWatch::new(deadline, vec![hours(1), hours(1), hours(3)]);
    let told = run_watched(
        &pipeline,
        &PriorState::empty(),
        watch,
        &mut journal,
        &executor,
    );
    let recorded = run_late_records(&journal);
    assert_eq!((told.len(), recorded.len()), (1, 1), "{recorded:?}");
    assert_eq!(recorded[0].critical_path, ["a", "c"]);
    let predicted = crate::deadline::from_journal(&recorded[0].predicted_finish).unwrap();
    assert!(predicted > deadline + TimeDelta::hours(1), "{predicted}");
    // Recorded before any unit ended: the evaluation at the start (the first wait) found it.
    let kinds = kinds(&journal);
    let position = |kind: &str| kinds.iter().position(|seen| seen.starts_with(kind));
    assert!(
        position("run_late") < position("unit_finished"),
        "{kinds:?}"
    );
}

#[test]
fn a_run_that_recorded_run_late_is_not_watched_again() {
    let pipeline = pipeline(vec![unit("a", &[])], 1);
    let prior = PriorState::from_events(&[Event::RunLate(crate::event::RunLate::default())]);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let watch = LateWatch::new(Utc::now() - TimeDelta::hours(1), vec![hours(5)]);
    let told = run_watched(&pipeline, &prior, watch, &mut journal, &executor);
    assert!(told.is_empty());
    assert!(run_late_records(&journal).is_empty());
}

#[test]
fn a_run_on_time_records_nothing() {
    let pipeline = pipeline(vec![unit("a", &[]), unit("b", &["a"])], 1);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let watch = LateWatch::new(Utc::now() + TimeDelta::hours(3), vec![hours(1), hours(1)]);
    let told = run_watched(
        &pipeline,
        &PriorState::empty(),
        watch,
        &mut journal,
        &executor,
    );
    assert!(told.is_empty());
    assert!(run_late_records(&journal).is_empty());
}
