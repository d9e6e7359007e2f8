//! Which runs `prune` deletes: the `--keep-*` rules together.

use apollo_core::event::RunStatus;
use apollo_store::{PruneOptions, StateDir, prune};
use chrono::{TimeZone, Utc};

use crate::state::make_run;

/// The rules add up (issue 36 item 18): a run goes only when no rule given keeps it. With
/// `--keep-days 0` no run is kept for its age, so `--keep-runs N --keep-days 0` is
/// `--keep-runs N`; with `--keep-days 7` the runs of the last week are kept too.
#[test]
fn prune_deletes_a_run_only_when_no_rule_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let ids = [
        "20261101T010000Z-0001",
        "20261126T010000Z-0001",
        "20261128T010000Z-0001",
        "20261129T010000Z-0001",
    ];
    let runs: Vec<_> = ids
        .iter()
        .map(|id| make_run(&state, id, "etl", Some(RunStatus::Succeeded)))
        .collect();
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap();
    let options = PruneOptions::default().keep_runs(1).keep_days(7);
    let report = prune(&state, options, now).unwrap();
    assert_eq!(report.deleted, [runs[0].clone()]);
    let options = PruneOptions::default().keep_runs(2).keep_days(0);
    let report = prune(&state, options, now).unwrap();
    assert_eq!(report.deleted, [runs[1].clone()]);
    assert_eq!(state.run_ids().unwrap(), [runs[2].clone(), runs[3].clone()]);
}

/// One rule of "latest" (issue 35): prune keeps each pipeline's latest run, eviction protects
/// the same runs, and a reproduction is never a pipeline's latest run (nor its own pipeline's:
/// with no rule keeping it, it goes like any older run).
#[test]
fn the_latest_run_of_each_pipeline_is_kept_and_a_reproduction_is_never_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let done = Some(RunStatus::Succeeded);
    let old_etl = make_run(&state, "20261101T010000Z-0001", "etl", done);
    let etl = make_run(&state, "20261102T010000Z-0001", "etl", done);
    let deploy = make_run(&state, "20261103T010000Z-0001", "deploy", done);
    let reproduction = make_reproduction(&state, "20261104T010000Z-0001", "etl");
    assert_eq!(state.latest_run("etl").unwrap(), Some(etl.clone()));
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap();
    let report = prune(&state, PruneOptions::default().keep_days(0), now).unwrap();
    let mut kept = report.kept_latest.clone();
    kept.sort();
    assert_eq!(kept, [etl, deploy]);
    assert_eq!(report.deleted, [old_etl, reproduction], "{report:?}");
}

/// A reproduction of pipeline `name`'s unit, as `apollo reproduce` records it.
fn make_reproduction(state: &StateDir, id: &str, name: &str) -> apollo_store::RunId {
    use apollo_core::event::{Event, RunKind};
    use apollo_store::JournalWriter;
    let id: apollo_store::RunId = id.parse().unwrap();
    let run = state.create_run(&id).unwrap();
    let mut started = crate::support::run_started(id.as_str(), name);
    if let Event::RunStarted(started) = &mut started {
        started.run_kind = RunKind::Reproduction;
        started.identity = Some(format!("reproduce:{name}"));
    }
    // Stamped at the run id's time, as make_run's records are.
    let clock = crate::support::ManualClock::new();
    clock.set(id.started_at());
    let options = crate::support::fast().clock(clock.clock());
    let mut writer = JournalWriter::create(run.path(), id.as_str(), options).unwrap();
    writer.append_batch(&[started]).unwrap();
    writer
        .append_batch(&[crate::support::run_finished(RunStatus::Succeeded)])
        .unwrap();
    id
}
