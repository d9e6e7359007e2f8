//! The stray sweep and run ids shared by two state directories: two projects whose runs
//! started in the same second can give them the same id (`20261204T030000Z-1a2b`), so the
//! sweep matches a key of the state directory and the run, not the id alone.

use apollo_core::CancelToken;
use apollo_core::event::AttemptStatus;
use apollo_exec::ExecOptions;

use crate::Fixture;

/// A unit that leaves a process outside its group and without its unit's marker, so that
/// only a run's stray sweep can find it (see `misbehaving.rs`).
const ESCAPE: &str = "setsid env -u APOLLO_UNIT sh -c 'touch escaped; exec sleep 1000' & \
                      while [ ! -e escaped ]; do sleep 0.01; done";

#[test]
fn the_sweep_of_a_run_never_kills_a_process_of_another_state_dir_s_run_with_the_same_id() {
    let mut mine = Fixture::new(ESCAPE);
    let mut other = Fixture::new(ESCAPE);
    other.run_id = mine.run_id.clone();
    let (my_state, other_state) = (mine.path("project/.apollo"), other.path("project/.apollo"));
    mine.options = ExecOptions::default().state_dir(&my_state);
    other.options = ExecOptions::default().state_dir(&other_state);
    for fixture in [&mine, &other] {
        let outcome = fixture.run_unchecked(&CancelToken::new());
        assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    }
    let escaped = crate::processes_of_run(&mine.run_id);
    assert_eq!(escaped.len(), 2, "{escaped:?}");

    let killed = apollo_exec::kill_stray_processes_in(&my_state, &mine.run_id).unwrap();
    let left = crate::processes_of_run(&mine.run_id);
    // Swept before asserting, so that a failure leaves nothing behind.
    let killed_after = apollo_exec::kill_stray_processes_in(&other_state, &other.run_id).unwrap();
    assert_eq!(killed, 1, "only this state directory's process");
    assert_eq!(
        left.len(),
        1,
        "the other project's process lives on: {left:?}"
    );
    assert_eq!(killed_after, 1);
    crate::assert_no_survivors(&mine.run_id);
}
