//! A unit's `cleanup_timeout` on Slurm: the wrapper's watchdog stops a cleanup that runs too
//! long, and the attempt is recorded timed out in its cleanup phase, as apollo-exec records it.

use std::time::Duration;

use apollo_core::event::{AttemptStatus, ExitStatus};
use apollo_core::model::{Command, Phase};
use apollo_slurm::SlurmExecutor;

use crate::support::*;

#[test]
fn a_cleanup_over_its_cleanup_timeout_is_stopped_and_times_the_attempt_out() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
    let mut unit = unit("u", "echo done", root);
    unit.cleanup = Some(Command::Shell(
        "echo $$ > cleanup.pid; exec sleep 1000".to_owned(),
    ));
    unit.cleanup_timeout = Duration::from_millis(300);
    unit.kill_grace = Duration::from_millis(100);
    let (outcome, _) = run_one(&executor, &unit, &attempt_dir(root, "u", 1), 1, None);
    assert_eq!(outcome.status, AttemptStatus::TimedOut, "{outcome:?}");
    assert_eq!(outcome.failed_phase, Some(Phase::Cleanup));
    assert_eq!(outcome.exit, Some(ExitStatus::Signal(15)));
    let error = outcome.error.as_deref().unwrap_or_default();
    assert!(error.contains("the unit's `cleanup_timeout`"), "{error}");
    let cleanup = outcome.phases.last().unwrap();
    assert!(
        cleanup.phase == Phase::Cleanup && cleanup.timed_out,
        "{cleanup:?}"
    );
    // The cleanup's process is gone.
    let pid = std::fs::read_to_string(root.join("cleanup.pid")).unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "cleanup {pid} still runs"
    );
}

#[test]
fn a_cleanup_within_its_limit_is_not_marked() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
    let mut unit = unit("u", "echo done", root);
    unit.cleanup_timeout = Duration::from_secs(30);
    let (outcome, _) = run_one(&executor, &unit, &attempt_dir(root, "u", 1), 1, None);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert!(outcome.phases.iter().all(|phase| !phase.timed_out));
    assert!(root.join("cleaned").exists());
}
