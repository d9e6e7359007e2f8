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
