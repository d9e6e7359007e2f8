use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::{Prediction, Progress, UnitHistory, is_late, predict};
use crate::dag::Dag;

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-12-04T05:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn secs(p50: u64, p95: u64) -> Option<UnitHistory> {
    Some(UnitHistory {
        p50: Duration::from_secs(p50),
        p95: Duration::from_secs(p95),
    })
}

fn after(seconds: i64) -> DateTime<Utc> {
    now() + TimeDelta::seconds(seconds)
}

/// start → (left, right) → join.
fn diamond() -> Dag {
    Dag::from_deps(vec![vec![], vec![0], vec![0], vec![1, 2]])
}

#[test]
fn a_diamond_waiting_to_start_takes_its_longer_branch() {
    let history = [secs(10, 20), secs(30, 40), secs(50, 60), secs(5, 100)];
    let prediction = predict(&diamond(), &history, &[Progress::Waiting; 4], now());
    assert_eq!(
        prediction,
        Prediction {
            finish_p50: after(10 + 50 + 5),
            finish_p95: after(20 + 60 + 100),
            critical_path: vec![0, 2, 3],
            no_history: vec![],
            units_left: true,
        }
    );
}

#[test]
fn a_running_unit_weighs_what_is_left_of_its_p50_and_never_less_than_nothing() {
    let history = [secs(10, 20), secs(30, 40), secs(50, 60), secs(5, 100)];
    let progress = [
        Progress::Done,
        Progress::Running {
            elapsed: Duration::from_secs(25),
        },
        // Past its p50 (and p95): it weighs nothing, the other branch wins.
        Progress::Running {
            elapsed: Duration::from_secs(70),
        },
        Progress::Waiting,
    ];
    let prediction = predict(&diamond(), &history, &progress, now());
    assert_eq!(prediction.finish_p50, after(5 + 5));
    assert_eq!(prediction.finish_p95, after(15 + 100));
    assert_eq!(prediction.critical_path, vec![1, 3]);
}

#[test]
fn units_without_history_weigh_nothing_and_are_named() {
    let history = [secs(10, 20), None, secs(3, 4), None];
    let prediction = predict(&diamond(), &history, &[Progress::Waiting; 4], now());
    assert_eq!(prediction.finish_p50, after(13));
    assert_eq!(prediction.finish_p95, after(24));
    assert_eq!(prediction.critical_path, vec![0, 2, 3]);
    assert_eq!(prediction.no_history, vec![1, 3]);
    // Shorter history and progress slices: the missing units have none, and are done.
    let prediction = predict(&diamond(), &history[..1], &[Progress::Waiting], now());
    assert_eq!(prediction.finish_p50, after(10));
    assert_eq!(prediction.critical_path, vec![0]);
}

#[test]
fn a_run_with_nothing_left_finishes_now_and_is_never_late() {
    let history = [secs(10, 20), secs(30, 40), secs(50, 60), secs(5, 100)];
    let prediction = predict(&diamond(), &history, &[Progress::Done; 4], now());
    assert_eq!(prediction.finish_p50, now());
    assert!(prediction.critical_path.is_empty());
    assert!(!prediction.units_left);
    assert!(!is_late(&prediction, after(-3600), now()));
}

#[test]
fn late_when_the_p50_finish_passes_the_deadline_or_the_deadline_came_with_units_left() {
    let history = [secs(10, 20), secs(30, 40), secs(50, 60), secs(5, 100)];
    let prediction = predict(&diamond(), &history, &[Progress::Waiting; 4], now());
    assert!(is_late(&prediction, after(64), now()));
    assert!(!is_late(&prediction, after(65), now()));
    // The p95 figure alone never makes a run late.
    assert!(!is_late(&prediction, after(100), now()));
    // Nothing known of the units left, but the deadline has come.
    let unknown = predict(&diamond(), &[], &[Progress::Waiting; 4], now());
    assert_eq!(unknown.finish_p50, now());
    assert!(!is_late(&unknown, after(1), now()));
    assert!(is_late(&unknown, now(), now()));
}
