//! `log_limit:` on a real Slurm cluster (issue 36, item 18): what
//! `crates/apollo-slurm/tests/slurm/limits.rs` proves against a fake one. The job writes its
//! logs on the shared filesystem without apollo in the way; apollo cuts them when it collects
//! the job — also when the job ended while apollo was dead and the resume collects it — and
//! `apollo logs` says the log was capped. Without a cluster: SKIPPED (fails under `CI=true`).

use crate::slurm_cluster::{cluster, guard};
use crate::support::{Apollo, SAFETY_TIMEOUT};

/// `chatty` prints about 1.2 MB on stdout, 64 KiB allowed, then runs `then`.
fn config(then: &str) -> String {
    format!(
        "units:\n  - name: chatty\n    executor: slurm\n    log_limit: 64KiB\n    \
         execute: seq 1 200000; echo 'the last words'; echo small >&2{then}\n"
    )
}

/// The stored log of `chatty`'s attempt `attempt` in `run` is capped: its head, the marker and
/// its last lines, within the limit; `apollo logs` shows it and says it was capped; its stderr,
/// within the limit, is whole and says nothing of a cap.
#[track_caller]
fn assert_capped(apollo: &mut Apollo, run: &str, attempt: u32) {
    let attempt = attempt.to_string();
    let stored = apollo.path(&format!(".apollo/runs/{run}/units/chatty/{attempt}/stdout"));
    let size = std::fs::metadata(&stored).unwrap().len();
    assert!(
        size < 64 * 1024 + 100,
        "{} is {size} bytes",
        stored.display()
    );
    let logs = apollo
        .args(&["logs", run, "chatty", "--attempt", &attempt])
        .run();
    logs.code(0);
    let head: String = logs.stdout.chars().take(200).collect();
    assert!(head.contains("1\n2\n3\n"), "{head}");
    assert!(
        logs.stdout.ends_with("200000\nthe last words\n"),
        "{}",
        &logs.stdout[logs.stdout.len().saturating_sub(200)..]
    );
    assert!(logs.stdout.len() < 64 * 1024 + 100, "{}", logs.stdout.len());
    assert!(
        logs.stdout.contains(" bytes cut: log_limit 64 KiB]\n"),
        "no marker"
    );
    assert!(
        logs.stderr.contains("capped") && logs.stderr.contains("log_limit 64 KiB"),
        "{}",
        logs.stderr
    );
    let stderr = apollo
        .args(&["logs", run, "chatty", "--attempt", &attempt, "--stderr"])
        .run();
    stderr.code(0);
    assert_eq!(stderr.stdout, "small\n");
    assert!(!stderr.stderr.contains("capped"), "{}", stderr.stderr);
}

#[test]
fn a_jobs_log_over_its_limit_is_stored_capped_and_logs_says_so() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(&config(""));
    apollo.args(&["run"]).run().code(0);
    let run = apollo.run_ids().pop().unwrap();
    assert_capped(&mut apollo, &run, 1);
}

#[test]
fn a_jobs_log_over_its_limit_is_capped_when_the_resume_collects_a_job_that_ended_while_apollo_was_dead()
 {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(&config("; bin/block chatty"));
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("chatty.started");
    apollo.wait_for_journal(r#""kind":"unit_submitted""#);
    running.kill9();
    apollo.release("chatty.release");
    let run = apollo.run_ids().pop().unwrap();
    let result = apollo.path(&format!(".apollo/runs/{run}/units/chatty/1/result"));
    let deadline = std::time::Instant::now() + SAFETY_TIMEOUT;
    while !result.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the job never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    apollo.args(&["run"]).run().code(0);
    assert!(apollo.journal_text().contains(r#""reattached_from":1"#));
    // The attempt that reattached, and the one whose job wrote the log (the same file).
    assert_capped(&mut apollo, &run, 2);
    assert_capped(&mut apollo, &run, 1);
}
