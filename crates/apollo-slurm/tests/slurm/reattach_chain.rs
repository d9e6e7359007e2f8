#![allow(
    clippy::unwrap_used,
    reason = "a test: a failed setup step should panic"
)]
//! An apollo that dies while an attempt is taking over an earlier attempt's job (issue 36,
//! found by the torture harness's kills aimed at running jobs): the next attempt must take
//! over the same job — never submit a second one beside it, never run a non-idempotent unit's
//! job again.
#![forbid(unsafe_code)]

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use apollo_core::event::AttemptStatus;
use apollo_core::{AttemptContext, AttemptRequest, CancelToken, Executor};
use apollo_slurm::SlurmExecutor;
use support::*;

/// `squeue` that, while `bin/block` exists, says so (`bin/blocked`) and waits: the moment an
/// attempt asks Slurm about the job it took over is held still.
const BLOCKING_SQUEUE: &str = r#"#!/bin/sh
fake=$(dirname "$0")
if [ -f "$fake/block" ]; then
  : >"$fake/blocked"
  while [ -f "$fake/block" ]; do sleep 0.01; done
fi
exec "$fake/squeue.real" "$@"
"#;

/// Wait for `path` to exist (the safety net is generous: a loaded machine).
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Copy the files of `from` (one level) into a fresh `to`.
fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn an_attempt_killed_while_taking_over_a_job_leaves_the_next_one_that_job_never_a_second() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let options = fake_cluster(root);
    let bin = root.join("bin");
    std::fs::rename(bin.join("squeue"), bin.join("squeue.real")).unwrap();
    std::fs::write(bin.join("squeue"), BLOCKING_SQUEUE).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join("squeue"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    // Attempt 1's job of a unit that must not run twice is queued, not started yet; apollo
    // died.
    let first = crate::fake_cluster::earlier_attempt(root, "pay", 1, "4242", false);
    std::fs::write(
        bin.join("queue"),
        "4242|PENDING|apollo:r1:pay:1:00000000000000aa\n",
    )
    .unwrap();
    let unit = careful("pay", "echo paid >>ledger", root);
    // A new apollo resumes: attempt 2 takes the job over, and asks Slurm about it...
    std::fs::write(bin.join("block"), "").unwrap();
    let second = attempt_dir(root, "pay", 2);
    let executor = SlurmExecutor::new(options.clone());
    let taking_over = std::thread::scope(|scope| {
        let attempt = scope.spawn(|| {
            let cancel = CancelToken::new();
            executor.run_attempt(
                &AttemptRequest::new("r1", &unit, 2, &second).with_in_flight(Some(1)),
                &AttemptContext::new(&cancel),
            )
        });
        wait_for(&bin.join("blocked"));
        // ...and dies here: what it left on disk is all the next apollo has.
        let at_death = root.join("attempt-2-at-death");
        copy_dir(&second, &at_death);
        // Meanwhile the job runs and ends (its side effect done once), as on the cluster.
        std::fs::write(first.join("started"), "4242 1000\n").unwrap();
        std::fs::write(root.join("ledger"), "paid\n").unwrap();
        std::fs::write(first.join("phases"), "execute 0 1000 2000\n").unwrap();
        std::fs::write(first.join("result"), "end 2000\nsignal 0\ncpu\n").unwrap();
        std::fs::write(
            bin.join("queue"),
            "4242|COMPLETED|apollo:r1:pay:1:00000000000000aa\n",
        )
        .unwrap();
        std::fs::remove_file(bin.join("block")).unwrap();
        attempt.join().unwrap();
        at_death
    });
    copy_dir(&taking_over, &second);
    // The third apollo: attempt 3, with attempt 2 the one left in flight.
    let executor = SlurmExecutor::new(options);
    let (outcome, reports) = run_one(&executor, &unit, &attempt_dir(root, "pay", 3), 3, Some(2));
    assert_eq!(
        executor.client_calls().sbatch,
        0,
        "a second job was submitted"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("ledger")).unwrap(),
        "paid\n",
        "the unit's job ran twice"
    );
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert!(
        matches!(
            &reports[..],
            [apollo_core::AttemptEvent::Reattached { attempt: 1, .. }]
        ),
        "{reports:?}"
    );
}
