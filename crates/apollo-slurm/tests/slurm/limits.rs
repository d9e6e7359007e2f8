#![allow(
    clippy::unwrap_used,
    reason = "a test: a failed setup step should panic"
)]
//! The queue limit (`queue_timeout:`) and the log cap (`log_limit:`), issue 36 item 18, against
//! the fake cluster. The queue limit: a job still
//! pending at the limit is cancelled and its attempt fails saying so; a job that started is
//! never cancelled by it.

use std::time::Duration;

use apollo_core::event::AttemptStatus;
use apollo_slurm::SlurmExecutor;

use crate::support::*;

#[test]
fn a_job_still_pending_at_its_queue_timeout_is_cancelled_and_the_attempt_says_why() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root).job_arrays(false));
    plan(root, &["pending"]);
    let mut unit = careful("held", "touch ran", root);
    unit.queue_timeout = Some(Duration::from_secs(1));
    let dir = attempt_dir(root, "held", 1);
    let (outcome, _) = run_one(&executor, &unit, &dir, 1, None);

    assert_eq!(outcome.status, AttemptStatus::Failed, "{outcome:?}");
    // Nothing of it ran: no phase, no exit, no signal (not cut off: retries apply).
    assert!(outcome.phases.is_empty(), "{outcome:?}");
    assert_eq!(outcome.exit, None);
    assert!(outcome.needs_human.is_none());
    let job_id = std::fs::read_to_string(dir.join("job_id")).unwrap();
    let job_id = job_id.trim();
    let error = outcome.error.clone().unwrap();
    for needle in [
        format!("Slurm job {job_id} waited 1s in the queue"),
        "Slurm's reason: BeginTime".to_owned(),
        "scancel".to_owned(),
        "raise `queue_timeout`".to_owned(),
    ] {
        assert!(error.contains(&needle), "`{needle}` in: {error}");
    }
    assert_eq!(fake_file(root, "scancel_calls").trim(), job_id);
    // Where `apollo logs` and the failure tail look.
    let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
    assert!(stderr.contains("waited 1s in the queue"), "{stderr}");
    assert!(!root.join("ran").exists());
    // Marked cancelled: a later resume never reattaches to it.
    assert!(dir.join("cancelled").exists());
}

#[test]
fn a_job_that_started_is_never_cancelled_by_its_queue_timeout() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root).job_arrays(false));
    // Runs well past its queue limit (the fake starts every job at once).
    let mut unit = unit("long", "sleep 3; echo done", root);
    unit.queue_timeout = Some(Duration::from_secs(1));
    let dir = attempt_dir(root, "long", 1);
    let (outcome, _) = run_one(&executor, &unit, &dir, 1, None);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(fake_file(root, "scancel_calls"), "");
}

/// `log_limit` on Slurm: the job writes its logs on the shared filesystem; apollo cuts them
/// when it collects the job, keeping the head, a marker and the last lines.
#[test]
fn a_jobs_log_over_its_limit_is_cut_when_the_job_is_collected() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root).job_arrays(false));
    let mut unit = unit(
        "chatty",
        "seq 1 100000; echo 'last line'; echo 'small' >&2",
        root,
    );
    unit.log_limit = Some(16 * 1024);
    let dir = attempt_dir(root, "chatty", 1);
    let (outcome, _) = run_one(&executor, &unit, &dir, 1, None);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    let stdout = std::fs::read_to_string(dir.join("stdout")).unwrap();
    assert!(stdout.starts_with("preparing\n1\n2\n"), "{}", &stdout[..20]);
    assert!(stdout.ends_with("100000\nlast line\n"));
    assert!(stdout.contains(" bytes cut: log_limit 16 KiB]\n"));
    assert!(stdout.len() < 16 * 1024 + 100);
    assert_eq!(outcome.stdout_bytes, stdout.len() as u64);
    let (cut, limit) = apollo_exec::log_cap::read_capped(&dir, "stdout").unwrap();
    assert_eq!(limit, 16 * 1024);
    assert!(stdout.contains(&format!("[apollo: {cut} bytes cut")));
    assert_eq!(apollo_exec::log_cap::read_capped(&dir, "stderr"), None);
}

/// A job that ended while apollo was dead is collected by the resume's reattaching attempt:
/// its logs are cut then, as any collected job's (they were stored whole before).
#[test]
fn a_jobs_log_over_its_limit_is_cut_when_a_reattaching_attempt_collects_it() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root).job_arrays(false));
    let mut unit = unit("chatty", "seq 1 100000; echo 'last line'", root);
    // The job ran and ended with nothing collecting it (apollo dead): its log is whole.
    let first = attempt_dir(root, "chatty", 1);
    let (outcome, _) = run_one(&executor, &unit, &first, 1, None);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert!(std::fs::metadata(first.join("stdout")).unwrap().len() > 16 * 1024);
    // The resume's attempt reattaches to it and finds it ended.
    unit.log_limit = Some(16 * 1024);
    let executor = SlurmExecutor::new(fake_cluster(root).job_arrays(false));
    let second = attempt_dir(root, "chatty", 2);
    let (outcome, reports) = run_one(&executor, &unit, &second, 2, Some(1));
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(reports.len(), 1, "reattached: {reports:?}");
    for dir in [&first, &second] {
        let stdout = std::fs::read_to_string(dir.join("stdout")).unwrap();
        assert!(stdout.ends_with("100000\nlast line\n"));
        assert!(stdout.contains(" bytes cut: log_limit 16 KiB]\n"));
        assert!(stdout.len() < 16 * 1024 + 100, "{}", stdout.len());
    }
    assert_eq!(
        outcome.stdout_bytes,
        std::fs::metadata(second.join("stdout")).unwrap().len()
    );
    let capped = apollo_exec::log_cap::read_capped(&second, "stdout").unwrap();
    assert_eq!(capped.1, 16 * 1024);
    assert_eq!(
        apollo_exec::log_cap::read_capped(&first, "stdout"),
        Some(capped)
    );
    // apollo dies again before recording that end: the next resume collects the job once
    // more, and its logs keep the cut they have (a second cut would drop the marker's count).
    let cut_once = std::fs::read_to_string(first.join("stdout")).unwrap();
    let third = attempt_dir(root, "chatty", 3);
    let (outcome, _) = run_one(&executor, &unit, &third, 3, Some(2));
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(third.join("stdout")).unwrap(),
        cut_once
    );
    assert_eq!(outcome.stdout_bytes, cut_once.len() as u64);
    for dir in [&first, &third] {
        assert_eq!(
            apollo_exec::log_cap::read_capped(dir, "stdout"),
            Some(capped)
        );
    }
}
