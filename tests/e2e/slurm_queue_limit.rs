//! The queue limit on a real Slurm cluster (issue 36 item 18): a job held in the queue (here
//! by `--begin=now+1hour` through `extra_args`) is cancelled at the unit's `queue_timeout`,
//! the attempt fails saying how long it waited and Slurm's reason, and the unit's `retries`
//! apply though it is `idempotent: false` (nothing of it ran). Without a cluster: SKIPPED
//! (fails under `CI=true`).

#![allow(clippy::disallowed_methods)] // The test runs squeue.

use crate::slurm_cluster::{cluster, guard};
use crate::support::Apollo;

#[test]
fn a_job_held_in_the_queue_is_cancelled_at_its_queue_timeout_and_retried() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(
        "units:\n  - name: held\n    executor: slurm\n    idempotent: false\n    retries: 1\n    \
         retry_delay: 0s\n    acknowledge: [retry-not-idempotent]\n    \
         resources: {slurm: {queue_timeout: 3s, extra_args: [--begin=now+1hour]}}\n    \
         execute: touch markers/held.ran\n",
    );
    let output = apollo.args(&["run"]).run();
    output.code(1);
    assert!(!apollo.path("markers/held.ran").exists());
    let journal = apollo.journal_text();
    // Both attempts submitted, both failed at the limit: no verdict asked (nothing ran).
    assert_eq!(
        journal.matches(r#""kind":"unit_submitted""#).count(),
        2,
        "{journal}"
    );
    assert!(journal.contains("waited 3s in the queue"), "{journal}");
    assert!(journal.contains("Slurm's reason: BeginTime"), "{journal}");
    let run = &apollo.run_ids()[0];
    for attempt in [1, 2] {
        let dir = apollo.path(&format!(".apollo/runs/{run}/units/held/{attempt}"));
        let job_id = std::fs::read_to_string(dir.join("job_id")).unwrap();
        let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
        assert!(
            stderr.contains(&format!("Slurm job {} waited 3s", job_id.trim())),
            "{stderr}"
        );
        // Cancelled: Slurm no longer has it pending.
        let queue = std::process::Command::new("squeue")
            .args(["--noheader", "--states=PENDING,RUNNING", "--format=%i"])
            .args(["--jobs", job_id.trim()])
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&queue.stdout).trim().is_empty());
    }
}
