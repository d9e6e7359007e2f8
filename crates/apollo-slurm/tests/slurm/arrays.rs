#![allow(
    clippy::unwrap_used,
    reason = "a test: a failed setup step should panic"
)]
//! Job arrays against the fake cluster (`support`): attempts that become ready together are
//! one `sbatch --array`, in chunks within `MaxArraySize` (10 in the fake `scontrol`), each
//! still its own attempt; exactly once holds per array; a dead apollo's task is found again
//! by its array's name and its task.
#![forbid(unsafe_code)]

use crate::support;

use std::path::Path;
use std::time::Duration;

use apollo_core::event::AttemptStatus;
use apollo_core::{AttemptContext, AttemptEvent, AttemptOutcome, AttemptRequest, CancelToken};
use apollo_core::{Executor, Unit};
use apollo_slurm::SlurmExecutor;
use support::*;

/// The gathering window of these tests, a safety net only: a group closes as soon as it
/// holds a full array, and each test's cluster takes arrays exactly as large as what its
/// attempts fill ([`max_array_size`]), so which attempts meet never depends on how fast a
/// loaded machine starts their threads (a 2 s quiet time once let one of twenty miss its
/// array).
const QUIET: Duration = Duration::from_secs(60);

/// The fake cluster's `MaxArraySize` set to `size`.
fn max_array_size(root: &Path, size: usize) {
    let scontrol = FAKE_SCONTROL.replace("= 10", &format!("= {size}"));
    std::fs::write(root.join("bin/scontrol"), scontrol).unwrap();
}

/// Run attempt 1 of each of `units` at once, each on a thread of its own (as the engine's
/// workers do): their outcomes and reports, in `units`' order.
fn run_together(
    executor: &SlurmExecutor,
    root: &Path,
    units: &[Unit],
) -> Vec<(AttemptOutcome, Vec<AttemptEvent>)> {
    let cancel = CancelToken::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = units
            .iter()
            .map(|unit| {
                let cancel = &cancel;
                scope.spawn(move || {
                    let dir = attempt_dir(root, &unit.name, 1);
                    let reports = Collect::default();
                    let outcome = executor.run_attempt(
                        &AttemptRequest::new("r1", unit, 1, &dir),
                        &AttemptContext::new(cancel).with_reporter(&reports),
                    );
                    let reports = reports.0.lock().unwrap().clone();
                    (outcome, reports)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect()
    })
}

/// The job id each attempt reported as submitted.
fn submitted_ids(results: &[(AttemptOutcome, Vec<AttemptEvent>)]) -> Vec<String> {
    results
        .iter()
        .map(|(_, reports)| match &reports[..] {
            [AttemptEvent::Submitted { job_id, .. }] => job_id.clone(),
            other => panic!("expected one submission: {other:?}"),
        })
        .collect()
}

/// The `--array=0-N` sizes of the fake `sbatch`'s calls (1 for a job of its own).
fn array_sizes(root: &Path) -> Vec<usize> {
    fake_file(root, "sbatch_calls")
        .lines()
        .map(|call| {
            call.split_whitespace()
                .find_map(|arg| arg.strip_prefix("--array=0-"))
                .map_or(1, |last| last.parse::<usize>().unwrap() + 1)
        })
        .collect()
}

#[test]
fn twenty_attempts_ready_together_are_job_arrays_within_max_array_size_each_its_own_attempt() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor =
        SlurmExecutor::new(fake_cluster(root).gather_window(QUIET, Duration::from_secs(60)));
    let units: Vec<Unit> = (0..20)
        .map(|i| {
            unit(
                &format!("u{i}"),
                "echo \"hello $WHO from $APOLLO_UNIT\"; echo oops >&2",
                root,
            )
        })
        .collect();
    let results = run_together(&executor, root, &units);
    for (i, (outcome, _)) in results.iter().enumerate() {
        assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
        let dir = attempt_dir(root, &format!("u{i}"), 1);
        // The task's output is its attempt's, exactly as a job of its own writes it.
        assert_eq!(
            std::fs::read_to_string(dir.join("stdout")).unwrap(),
            format!("preparing\nhello world from u{i}\n")
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("stderr")).unwrap(),
            "oops\n"
        );
        assert_eq!(
            outcome.stdout_sha256.as_deref(),
            Some(sha256_hex(format!("hello world from u{i}\n").as_bytes()).as_str())
        );
    }
    // Every attempt is a task `<array id>_<task>`, as Slurm's tools name it, in its `job_id`,
    // its report and the wrapper's `started`.
    let ids = submitted_ids(&results);
    for (i, id) in ids.iter().enumerate() {
        let (array, task) = id.split_once('_').expect(id);
        assert!(
            array.parse::<u64>().is_ok() && task.parse::<u32>().is_ok(),
            "{id}"
        );
        let dir = attempt_dir(root, &format!("u{i}"), 1);
        assert_eq!(
            std::fs::read_to_string(dir.join("job_id")).unwrap().trim(),
            id
        );
        let started = std::fs::read_to_string(dir.join("started")).unwrap();
        assert!(started.starts_with(&format!("{id} ")), "{started}");
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 20, "{ids:?}");
    // Arrays, each within MaxArraySize (10), holding the 20 attempts between them.
    let sizes = array_sizes(root);
    assert!(sizes.len() < 20, "{sizes:?}");
    assert!(sizes.iter().all(|&size| size <= 10), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), 20);
    let calls = executor.client_calls();
    assert_eq!(calls.sbatch, sizes.len() as u64);
    assert!(calls.squeue < 10, "{calls}");
    // `scontrol show config` was read once, and the default partition (for the cost's
    // record of what each job asked for) once.
    let scontrol = fake_file(root, "scontrol_calls");
    assert_eq!(
        scontrol.lines().filter(|l| *l == "show config").count(),
        1,
        "{scontrol}"
    );
    assert_eq!(
        scontrol
            .lines()
            .filter(|l| *l == "-o show partition")
            .count(),
        1,
        "{scontrol}"
    );
}

#[test]
fn a_lost_array_answer_is_found_under_its_token_and_the_array_adopted() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor =
        SlurmExecutor::new(fake_cluster(root).gather_window(QUIET, Duration::from_secs(60)));
    plan(root, &["lost-answer"]);
    max_array_size(root, 3);
    let units: Vec<Unit> = (0..3)
        .map(|i| unit(&format!("u{i}"), "echo once >>ledger", root))
        .collect();
    let results = run_together(&executor, root, &units);
    for (outcome, _) in &results {
        assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    }
    assert_eq!(executor.client_calls().sbatch, 1);
    assert_eq!(
        std::fs::read_to_string(root.join("ledger")).unwrap(),
        "once\nonce\nonce\n"
    );
    let ids = submitted_ids(&results);
    let arrays: std::collections::BTreeSet<&str> =
        ids.iter().map(|id| id.split('_').next().unwrap()).collect();
    assert_eq!(arrays.len(), 1, "{ids:?}");
    // The adoption is said beside each attempt's output.
    let stderr = std::fs::read_to_string(attempt_dir(root, "u0", 1).join("stderr")).unwrap();
    assert!(stderr.contains("adopted"), "{stderr}");
}

#[test]
fn a_lost_array_whose_token_stays_unknown_leaves_every_task_in_doubt_when_one_is_not_idempotent() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor =
        SlurmExecutor::new(fake_cluster(root).gather_window(QUIET, Duration::from_secs(60)));
    plan(root, &["lost-job"]);
    max_array_size(root, 2);
    let units = vec![
        unit("u0", "echo ran >>ledger", root),
        careful("pay", "echo ran >>ledger", root),
    ];
    let results = run_together(&executor, root, &units);
    assert_eq!(executor.client_calls().sbatch, 1);
    let token = std::fs::read_to_string(attempt_dir(root, "pay", 1).join("token")).unwrap();
    for (outcome, reports) in &results {
        let human = outcome.needs_human.as_ref().expect("in doubt");
        assert!(human.left_in_flight, "{human:?}");
        assert!(human.reason.contains(token.trim()), "{}", human.reason);
        assert!(human.reason.contains("@array"), "{}", human.reason);
        assert!(reports.is_empty(), "{reports:?}");
    }
    assert!(!root.join("ledger").exists());
    // Nothing was cancelled: what to do with the array is the human's call.
    assert_eq!(fake_file(root, "scancel_calls"), "");
}

#[test]
fn a_lost_array_of_idempotent_units_is_cancelled_by_name_and_submitted_again_under_a_new_token() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor =
        SlurmExecutor::new(fake_cluster(root).gather_window(QUIET, Duration::from_secs(60)));
    plan(root, &["lost-job", "ok"]);
    max_array_size(root, 3);
    let units: Vec<Unit> = (0..3)
        .map(|i| unit(&format!("u{i}"), "echo once >>ledger", root))
        .collect();
    let results = run_together(&executor, root, &units);
    for (outcome, _) in &results {
        assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    }
    let calls = fake_file(root, "sbatch_calls");
    let names: Vec<&str> = calls
        .lines()
        .filter_map(|call| {
            call.split_whitespace()
                .find_map(|arg| arg.strip_prefix("--job-name="))
        })
        .collect();
    assert_eq!(names.len(), 2, "{calls}");
    assert_ne!(names[0], names[1]);
    assert_eq!(
        fake_file(root, "scancel_calls").trim(),
        format!("--name={}", names[0])
    );
    assert_eq!(
        std::fs::read_to_string(root.join("ledger")).unwrap(),
        "once\nonce\nonce\n"
    );
}

#[test]
fn a_task_a_dead_apollo_left_running_is_found_by_its_arrays_name_and_its_task() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
    let name = "apollo:r1:@array:2:00000000000000ab";
    // What a dead apollo left: task 1 of an array, submitted (no `job_id` yet), running;
    // task 0 of the same array (another unit's) is listed too.
    let first = attempt_dir(root, "u", 1);
    std::fs::create_dir_all(&first).unwrap();
    std::fs::write(first.join("slurm.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(first.join("token"), "00000000000000ab\n").unwrap();
    std::fs::write(first.join("array"), format!("1 {name}\n")).unwrap();
    std::fs::write(
        root.join("bin/queue"),
        format!("77_0|RUNNING|{name}\n77_1|RUNNING|{name}\n"),
    )
    .unwrap();
    let second = attempt_dir(root, "u", 2);
    let unit = unit("u", "true", root);
    let (outcome, reports) = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| run_one(&executor, &unit, &second, 2, Some(1)));
        // Once it found its task in the queue (its pointer at attempt 1 then names the task;
        // it is written bare when the takeover begins), the job ends: its wrapper leaves its
        // files.
        let marker = second.join("reattached");
        while !std::fs::read_to_string(&marker).is_ok_and(|text| text.contains("job 77_1")) {
            assert!(
                !waiting.is_finished(),
                "the attempt ended before it reattached"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        std::fs::write(
            first.join("phases"),
            format!("execute 0 {now_ms} {now_ms}\n"),
        )
        .unwrap();
        std::fs::write(
            first.join("result"),
            format!("end {now_ms}\nsignal 0\ncpu\n0m0.00s 0m0.00s\n0m0.00s 0m0.00s\n"),
        )
        .unwrap();
        waiting.join().unwrap()
    });
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(executor.client_calls().sbatch, 0);
    assert_eq!(
        reports,
        [AttemptEvent::reattached("slurm", "77_1", 1)],
        "task 1, not task 0"
    );
}
