#![allow(
    clippy::unwrap_used,
    reason = "a test: a failed setup step should panic"
)]
//! The executor against a fake cluster: `sbatch` that runs the wrapper at once in the
//! background, `squeue` that lists what was submitted and counts its calls. No Slurm needed:
//! this checks the wrapper end to end and that polling is batched.
#![forbid(unsafe_code)]

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use apollo_core::event::AttemptStatus;
use apollo_core::{AttemptContext, AttemptRequest, CancelToken, Executor, Unit};
use apollo_slurm::SlurmExecutor;
use support::*;

#[test]
fn twenty_jobs_are_watched_by_one_poller_with_few_squeue_calls() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    // Each attempt a job of its own (arrays: `tests/arrays.rs`).
    let executor = SlurmExecutor::new(fake_cluster(root).job_arrays(false));
    let cancel = CancelToken::new();
    let n_jobs = 20;
    let units: Vec<Unit> = (0..n_jobs)
        .map(|i| {
            unit(
                &format!("u{i}"),
                "echo \"hello $WHO from $APOLLO_UNIT\"; echo oops >&2",
                root,
            )
        })
        .collect();
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = units
            .iter()
            .map(|unit| {
                let (executor, cancel) = (&executor, &cancel);
                scope.spawn(move || {
                    let dir = attempt_dir(root, &unit.name, 1);
                    let request = AttemptRequest::new("r1", unit, 1, &dir);
                    executor.run_attempt(&request, &AttemptContext::new(cancel))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect()
    });
    for (i, outcome) in outcomes.iter().enumerate() {
        assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
        assert_eq!(outcome.phases.len(), 3);
        let stdout =
            std::fs::read_to_string(attempt_dir(root, &format!("u{i}"), 1).join("stdout")).unwrap();
        assert_eq!(stdout, format!("preparing\nhello world from u{i}\n"));
        // The output hash covers what execute printed, as with the local executor.
        assert_eq!(
            outcome.stdout_sha256.as_deref(),
            Some(sha256_hex(format!("hello world from u{i}\n").as_bytes()).as_str())
        );
        assert_eq!(outcome.stderr_bytes, 5);
    }
    assert!(root.join("cleaned").exists());
    let calls = executor.client_calls();
    assert_eq!(calls.sbatch, n_jobs);
    // One poller for all: far fewer squeue calls than jobs (the jobs end in milliseconds,
    // their result files are seen before the first squeue is due).
    assert!(calls.squeue < n_jobs / 2, "{calls}");
}

#[test]
fn a_refused_submission_fails_the_attempt_naming_the_partition() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
    let cancel = CancelToken::new();
    let mut unit = unit("u", "true", root);
    std::sync::Arc::make_mut(&mut unit.resources.slurm).partition = Some("bogus".into());
    let dir = attempt_dir(root, "u", 1);
    let outcome = executor.run_attempt(
        &AttemptRequest::new("r1", &unit, 1, &dir),
        &AttemptContext::new(&cancel),
    );
    assert_eq!(outcome.status, AttemptStatus::Failed);
    let error = outcome.error.unwrap();
    assert!(
        error.starts_with("sbatch refused the job (partition `bogus`): "),
        "{error}"
    );
    assert!(
        error.contains("invalid partition specified: bogus"),
        "{error}"
    );
    assert!(
        std::fs::read_to_string(dir.join("stderr"))
            .unwrap()
            .contains("bogus")
    );
}

#[test]
fn a_finished_job_is_reattached_from_its_files_without_a_new_submission() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
    let cancel = CancelToken::new();
    let unit = unit("u", "echo once >>ledger", root);
    let first = attempt_dir(root, "u", 1);
    let outcome = executor.run_attempt(
        &AttemptRequest::new("r1", &unit, 1, &first),
        &AttemptContext::new(&cancel),
    );
    assert_eq!(outcome.status, AttemptStatus::Succeeded);
    // A new apollo resumes: attempt 2, with attempt 1 left in flight.
    let executor = SlurmExecutor::new(fake_cluster(root));
    let second = attempt_dir(root, "u", 2);
    let reports = Collect::default();
    let outcome = executor.run_attempt(
        &AttemptRequest::new("r1", &unit, 2, &second)
            .with_in_flight(Some(1))
            .with_attempt_dirs(&support::Beside(&second)),
        &AttemptContext::new(&cancel).with_reporter(&reports),
    );
    assert_eq!(outcome.status, AttemptStatus::Succeeded);
    assert_eq!(executor.client_calls().sbatch, 0);
    assert_eq!(
        std::fs::read_to_string(root.join("ledger")).unwrap(),
        "once\n"
    );
    let reports = reports.0.lock().unwrap();
    assert!(
        matches!(
            &reports[..],
            [apollo_core::AttemptEvent::Reattached { attempt: 1, .. }]
        ),
        "{reports:?}"
    );
    assert_eq!(
        std::fs::read_to_string(second.join("stdout")).unwrap(),
        "preparing\n"
    );
}

#[test]
fn a_job_slurm_lost_without_a_result_runs_again_as_a_fresh_job() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root).lost_after_polls(1));
    let cancel = CancelToken::new();
    let unit = unit("u", "echo again >>ledger", root);
    // What a dead apollo left: a submitted attempt whose job Slurm no longer knows.
    let first = attempt_dir(root, "u", 1);
    std::fs::create_dir_all(&first).unwrap();
    std::fs::write(first.join("slurm.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(first.join("job_id"), "999999\n").unwrap();
    let second = attempt_dir(root, "u", 2);
    let reports = Collect::default();
    let outcome = executor.run_attempt(
        &AttemptRequest::new("r1", &unit, 2, &second)
            .with_in_flight(Some(1))
            .with_attempt_dirs(&support::Beside(&second)),
        &AttemptContext::new(&cancel).with_reporter(&reports),
    );
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(executor.client_calls().sbatch, 1);
    assert_eq!(
        std::fs::read_to_string(root.join("ledger")).unwrap(),
        "again\n"
    );
    let reports = reports.0.lock().unwrap();
    assert!(
        matches!(&reports[..], [apollo_core::AttemptEvent::Submitted { .. }]),
        "{reports:?}"
    );
}

#[test]
fn a_submission_whose_answer_was_lost_is_found_under_its_token_and_adopted_never_submitted_twice() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
    plan(root, &["lost-answer"]);
    let unit = careful("pay", "echo paid >>ledger", root);
    let dir = attempt_dir(root, "pay", 1);
    let (outcome, reports) = run_one(&executor, &unit, &dir, 1, None);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(outcome.needs_human, None);
    assert_eq!(executor.client_calls().sbatch, 1);
    assert_eq!(
        std::fs::read_to_string(root.join("ledger")).unwrap(),
        "paid\n"
    );
    // The token is in the job name and the comment, and the adopted job is the one recorded.
    let token = std::fs::read_to_string(dir.join("token")).unwrap();
    let token = token.trim();
    assert_eq!(token.len(), 16);
    let calls = fake_file(root, "sbatch_calls");
    assert!(
        calls.contains(&format!("--job-name=apollo:r1:pay:1:{token}"))
            && calls.contains(&format!("--comment=apollo-token:{token}")),
        "{calls}"
    );
    let queue = fake_file(root, "queue");
    let job_id = queue.split('|').next().unwrap();
    assert!(
        matches!(&reports[..], [apollo_core::AttemptEvent::Submitted { job_id: id, .. }] if id == job_id),
        "{reports:?}"
    );
    // Nothing was cancelled: the job found is the attempt's job.
    assert_eq!(fake_file(root, "scancel_calls"), "");
}

#[test]
fn sbatch_connect_failures_are_retried_with_backoff_and_the_job_runs_once() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
    plan(root, &["connect-failure", "connect-failure", "ok"]);
    let unit = careful("pay", "echo paid >>ledger", root);
    let dir = attempt_dir(root, "pay", 1);
    let (outcome, _) = run_one(&executor, &unit, &dir, 1, None);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(executor.client_calls().sbatch, 3);
    assert_eq!(
        std::fs::read_to_string(root.join("ledger")).unwrap(),
        "paid\n"
    );
    assert_eq!(fake_file(root, "queue").lines().count(), 1);
}

#[test]
fn sbatch_connect_failures_fail_the_attempt_only_after_the_give_up_time() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let options = fake_cluster(root).submit_retry(
        Duration::from_millis(10),
        Duration::from_millis(20),
        Duration::from_millis(100),
    );
    let executor = SlurmExecutor::new(options);
    plan(root, &["connect-failure"; 100]);
    let unit = unit("u", "true", root);
    let (outcome, _) = run_one(&executor, &unit, &attempt_dir(root, "u", 1), 1, None);
    assert_eq!(outcome.status, AttemptStatus::Failed);
    let error = outcome.error.unwrap();
    assert!(
        error.contains("connect failure") && error.contains("tried"),
        "{error}"
    );
    // How many tries fit in the time depends on the machine's load: not asserted here (the
    // retries themselves are, above).
}

#[test]
fn a_lost_answer_whose_token_stays_unknown_stops_a_non_idempotent_unit_naming_the_token() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
    plan(root, &["lost-job", "ok"]);
    let unit = careful("pay", "echo paid >>ledger", root);
    let dir = attempt_dir(root, "pay", 1);
    let (outcome, reports) = run_one(&executor, &unit, &dir, 1, None);
    let token = std::fs::read_to_string(dir.join("token")).unwrap();
    let needs_human = outcome.needs_human.expect("stops for a human");
    assert!(needs_human.left_in_flight);
    assert!(
        needs_human.reason.contains(token.trim()),
        "{}",
        needs_human.reason
    );
    assert!(
        needs_human.reason.contains("Socket timed out"),
        "{}",
        needs_human.reason
    );
    // Submitted once, never again.
    assert_eq!(executor.client_calls().sbatch, 1);
    assert!(reports.is_empty(), "{reports:?}");
    assert!(!root.join("ledger").exists());
}

#[test]
fn a_lost_answer_whose_token_stays_unknown_resubmits_an_idempotent_unit_under_a_new_token() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
    plan(root, &["lost-job", "ok"]);
    let unit = unit("u", "echo ran >>ledger", root);
    let dir = attempt_dir(root, "u", 1);
    let (outcome, _) = run_one(&executor, &unit, &dir, 1, None);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(executor.client_calls().sbatch, 2);
    assert_eq!(
        std::fs::read_to_string(root.join("ledger")).unwrap(),
        "ran\n"
    );
    // The lost submission is cancelled by its name, should it appear after all; the second
    // went under another token.
    let calls = fake_file(root, "sbatch_calls");
    let names: Vec<&str> = calls
        .split_whitespace()
        .filter_map(|arg| arg.strip_prefix("--job-name="))
        .collect();
    assert_eq!(names.len(), 2);
    assert_ne!(names[0], names[1]);
    assert_eq!(
        fake_file(root, "scancel_calls").trim(),
        format!("--name={}", names[0])
    );
}

#[test]
fn a_job_that_started_and_ended_without_its_result_is_cut_off_not_did_not_start() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root).lost_after_polls(1));
    plan(root, &["cut-off"]);
    let unit = careful("pay", "echo paid >>ledger", root);
    let (outcome, _) = run_one(&executor, &unit, &attempt_dir(root, "pay", 1), 1, None);
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert_eq!(
        outcome.exit,
        Some(apollo_core::event::ExitStatus::Signal(9))
    );
    let error = outcome.error.unwrap();
    assert!(
        error.contains("NODE_FAIL")
            && error.contains("cut off")
            && !error.contains("did not start"),
        "{error}"
    );
    assert!(apollo_core::event::cut_off_by_signal(
        outcome.status,
        outcome.exit
    ));
}

/// An earlier attempt `attempt` of `unit` whose job `job_id` was submitted (and, with
/// `started`, began) and left no result, as a dead apollo leaves it.
pub(crate) fn earlier_attempt(
    root: &Path,
    unit: &str,
    attempt: u32,
    job_id: &str,
    started: bool,
) -> PathBuf {
    let dir = attempt_dir(root, unit, attempt);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("slurm.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(dir.join("job_id"), format!("{job_id}\n")).unwrap();
    std::fs::write(dir.join("token"), "00000000000000aa\n").unwrap();
    if started {
        // Now: the unit's timeout counts from here.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        std::fs::write(dir.join("started"), format!("{job_id} {now_ms}\n")).unwrap();
    }
    dir
}

#[test]
fn a_fresh_job_is_refused_while_an_earlier_attempts_job_still_runs_after_mark_rerun() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
    // Attempt 1's job runs on (apollo died; a human marked the unit `--rerun`).
    earlier_attempt(root, "pay", 1, "4242", true);
    std::fs::write(
        root.join("bin/queue"),
        "4242|RUNNING|apollo:r1:pay:1:00000000000000aa\n",
    )
    .unwrap();
    let unit = careful("pay", "echo paid >>ledger", root);
    let dir = attempt_dir(root, "pay", 2);
    let (outcome, reports) = run_one(&executor, &unit, &dir, 2, None);
    let needs_human = outcome.needs_human.expect("refused for a human");
    assert!(!needs_human.left_in_flight);
    assert!(
        needs_human.reason.contains("job 4242") && needs_human.reason.contains("scancel 4242"),
        "{}",
        needs_human.reason
    );
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert!(outcome.phases.is_empty());
    assert_eq!(executor.client_calls().sbatch, 0);
    assert!(reports.is_empty());
    // Once the job has ended, the next attempt goes ahead.
    std::fs::write(
        root.join("bin/queue"),
        "4242|COMPLETED|apollo:r1:pay:1:00000000000000aa\n",
    )
    .unwrap();
    let (outcome, _) = run_one(&executor, &unit, &attempt_dir(root, "pay", 3), 3, None);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(executor.client_calls().sbatch, 1);
}

#[test]
fn a_non_idempotent_job_that_started_and_vanished_while_apollo_was_dead_is_cut_off_not_resubmitted()
{
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root).lost_after_polls(1));
    earlier_attempt(root, "pay", 1, "999999", true);
    let unit = careful("pay", "echo paid >>ledger", root);
    let (outcome, reports) = run_one(&executor, &unit, &attempt_dir(root, "pay", 2), 2, Some(1));
    assert_eq!(outcome.status, AttemptStatus::Failed, "{outcome:?}");
    assert_eq!(
        outcome.exit,
        Some(apollo_core::event::ExitStatus::Signal(9))
    );
    assert!(
        outcome.error.as_deref().unwrap_or("").contains("cut off"),
        "{outcome:?}"
    );
    assert_eq!(executor.client_calls().sbatch, 0);
    assert!(!root.join("ledger").exists());
    assert!(
        matches!(
            &reports[..],
            [apollo_core::AttemptEvent::Reattached { attempt: 1, .. }]
        ),
        "{reports:?}"
    );
}

#[test]
fn an_sbatch_that_hangs_after_queueing_is_killed_and_its_job_adopted_not_cancelled() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    // The client timeout is what is tested: the fake sbatch never answers. Generous, so that
    // even a loaded machine's fake sbatch queues the job before it is killed.
    let executor = SlurmExecutor::new(fake_cluster(root).client_timeout(Duration::from_secs(3)));
    plan(root, &["hang"]);
    let unit = careful("pay", "echo paid >>ledger", root);
    let (outcome, _) = run_one(&executor, &unit, &attempt_dir(root, "pay", 1), 1, None);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(executor.client_calls().sbatch, 1);
    assert_eq!(
        std::fs::read_to_string(root.join("ledger")).unwrap(),
        "paid\n"
    );
    assert_eq!(fake_file(root, "scancel_calls"), "");
}
