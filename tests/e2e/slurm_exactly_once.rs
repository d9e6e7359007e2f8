//! Exactly once on a real Slurm cluster (issue 36), what
//! `crates/apollo-slurm/tests/slurm/fake_cluster.rs` proves against a fake `sbatch`. A wrapper
//! `sbatch` put first on apollo's `PATH` (and only apollo's) stands between apollo and the real
//! one, counting the calls and failing some as a loaded or unreachable controller does. What
//! ran is read back from the cluster (`squeue --states=all`: the test cluster keeps ended jobs
//! listed for `MinJobAge`, 300 s) and from a ledger the unit appends to. Without a cluster:
//! SKIPPED (fails under `CI=true`).

#![allow(clippy::disallowed_methods)] // The tests run squeue and scancel.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::slurm_cluster::{cluster, guard};
use crate::support::{Apollo, Output};

/// The absolute path of `program` on the test's own `PATH` (resolved before apollo's `PATH`
/// puts a wrapper of the same name first).
fn real_program(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH is set");
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

/// Writes `bin-wrap/sbatch`: the first `failures` calls print `message` on stderr and exit 1,
/// after running the real `sbatch` when `submit_first` (its answer then lost); later calls are
/// the real `sbatch`. Each call appends its start time (epoch seconds) to `bin-wrap/calls`.
/// Returns the `PATH` apollo runs with.
fn wrap_sbatch(apollo: &Apollo, failures: u32, submit_first: bool, message: &str) -> String {
    let real = real_program("sbatch");
    let submit = if submit_first {
        format!("  '{}' \"$@\" >/dev/null || exit $?\n", real.display())
    } else {
        String::new()
    };
    let script = format!(
        "#!/bin/sh\ndir=$(dirname \"$0\")\ndate +%s.%N >> \"$dir/calls\"\n\
         if [ \"$(wc -l < \"$dir/calls\")\" -le {failures} ]; then\n{submit}  \
         echo 'sbatch: error: {message}' >&2\n  exit 1\nfi\nexec '{}' \"$@\"\n",
        real.display()
    );
    apollo.file("bin-wrap/sbatch", &script);
    let wrapper = apollo.path("bin-wrap/sbatch");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::var("PATH").expect("PATH is UTF-8");
    format!("{}:{path}", apollo.path("bin-wrap").display())
}

/// When the wrapper was called (epoch seconds), in order.
fn sbatch_call_times(apollo: &Apollo) -> Vec<f64> {
    std::fs::read_to_string(apollo.path("bin-wrap/calls"))
        .unwrap_or_default()
        .lines()
        .map(|line| line.trim().parse().unwrap())
        .collect()
}

/// How many times the wrapper was called.
fn sbatch_calls(apollo: &Apollo) -> usize {
    sbatch_call_times(apollo).len()
}

/// The cluster's jobs (queued, running or ended) of `unit` in `run`: (job id, state).
fn cluster_jobs(run: &str, unit: &str) -> Vec<(String, String)> {
    let output = Command::new("squeue")
        .args(["--me", "--noheader", "--states=all", "--format=%i|%T|%j"])
        .output()
        .unwrap();
    let prefix = format!("apollo:{run}:{unit}:");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '|');
            let (id, state, name) = (fields.next()?, fields.next()?, fields.next()?);
            name.trim()
                .starts_with(&prefix)
                .then(|| (id.trim().to_owned(), state.trim().to_owned()))
        })
        .collect()
}

/// The `unit_submitted` job ids of the journal.
fn submitted_job_ids(apollo: &Apollo) -> Vec<String> {
    apollo
        .journal_text()
        .lines()
        .filter_map(|line| line.splitn(3, ' ').nth(2))
        .filter_map(|json| serde_json::from_str::<serde_json::Value>(json).ok())
        .filter(|record| record["kind"] == "unit_submitted")
        .filter_map(|record| record["job_id"].as_str().map(str::to_owned))
        .collect()
}

/// The unit's state in `apollo show latest --format json`.
fn shown_state(apollo: &mut Apollo, unit: &str) -> String {
    let show = apollo.args(&["show", "latest", "--format", "json"]).run();
    show.code(0);
    let show: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
    let units = show["units"].as_array().cloned().unwrap_or_default();
    units
        .iter()
        .find(|entry| entry["unit"] == unit)
        .and_then(|entry| entry["status"].as_str())
        .unwrap_or_else(|| panic!("{unit} not in show: {show:#}"))
        .to_owned()
}

/// The `N sbatch,` count of `run --explain`'s client calls line.
fn sbatch_count(output: &Output) -> usize {
    output
        .stderr
        .split(" sbatch,")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no client calls line: {}", output.stderr))
}

/// The ledger's lines (`pay` appends one each time it runs).
fn ledger(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("ledger"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

const PAY: &str = "units:\n  - name: pay\n    executor: slurm\n    idempotent: false\n    \
                   execute: 'echo \"paid $SLURM_JOB_ID\" >> ledger'\n";

#[test]
fn sbatchs_answer_lost_after_queueing_the_job_is_found_by_token_and_adopted_not_resubmitted() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(PAY);
    let path = wrap_sbatch(
        &apollo,
        1,
        true,
        "Batch job submission failed: Socket timed out on send/recv operation",
    );
    apollo.envs(&[("PATH", &path)]);
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert_eq!(sbatch_count(&output), 1, "{}", output.stderr);
    assert_eq!(sbatch_calls(&apollo), 1);
    // The cluster ran one job, the one apollo recorded, and the unit ran once in it.
    let run = apollo.run_ids().pop().unwrap();
    let jobs = cluster_jobs(&run, "pay");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].1, "COMPLETED", "{jobs:?}");
    assert_eq!(submitted_job_ids(&apollo), [jobs[0].0.clone()]);
    assert_eq!(ledger(apollo.root()), [format!("paid {}", jobs[0].0)]);
    let stderr =
        std::fs::read_to_string(apollo.path(&format!(".apollo/runs/{run}/units/pay/1/stderr")))
            .unwrap();
    assert!(
        stderr.contains(&format!(
            "job {} was found under the submission's token and adopted",
            jobs[0].0
        )),
        "{stderr}"
    );
    assert_eq!(shown_state(&mut apollo, "pay"), "succeeded");
}

#[test]
fn sbatch_connect_failures_are_retried_with_backoff_and_the_job_runs_once() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(PAY);
    let path = wrap_sbatch(
        &apollo,
        2,
        false,
        "Batch job submission failed: Unable to contact slurm controller (connect failure)",
    );
    apollo.envs(&[("PATH", &path)]);
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    // Two failures, then the real sbatch: three calls, one job.
    assert_eq!(sbatch_count(&output), 3, "{}", output.stderr);
    let times = sbatch_call_times(&apollo);
    assert_eq!(times.len(), 3, "{times:?}");
    // Backing off: 1 s, then 2 s (SlurmOptions::submit_backoff), the pause between the calls.
    assert!(
        times[1] - times[0] >= 0.9 && times[2] - times[1] >= 1.9,
        "{times:?}"
    );
    let run = apollo.run_ids().pop().unwrap();
    let jobs = cluster_jobs(&run, "pay");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].1, "COMPLETED", "{jobs:?}");
    assert_eq!(submitted_job_ids(&apollo), [jobs[0].0.clone()]);
    assert_eq!(ledger(apollo.root()), [format!("paid {}", jobs[0].0)]);
    assert_eq!(shown_state(&mut apollo, "pay"), "succeeded");
}

/// Waits until `path` exists (a safety timeout only: the wait is on the file).
#[track_caller]
fn wait_for_file(path: &Path) {
    let deadline = std::time::Instant::now() + crate::support::SAFETY_TIMEOUT;
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The processes of `job_id`'s batch step on this node (`scontrol listpids`): the wrapper (the
/// batch script, local id 0) and the others.
fn job_pids(job_id: &str) -> (Option<String>, Vec<String>) {
    let output = Command::new("scontrol")
        .args(["listpids", job_id])
        .output()
        .unwrap();
    let mut wrapper = None;
    let mut others = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            [pid, _, "batch", "0", ..] => wrapper = Some(pid.to_owned()),
            [pid, ..] => others.push(pid.to_owned()),
            [] => {}
        }
    }
    (wrapper, others)
}

/// Whether process `pid` is gone (or a zombie: dead, not yet reaped).
fn is_gone(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            == Some("Z")
    })
}

/// SIGKILLs the job's processes as the OOM killer or a node failure does: the wrapper first,
/// so that nothing of it runs after (it writes no result), then the unit's processes it
/// leaves. Not `scancel --signal=KILL --full`: slurmctld turns a SIGKILL of a running job into
/// its cancellation, whose SIGTERM lets the wrapper write its result (a signal apollo did not
/// send: `signal 15`).
fn kill_job_processes(job_id: &str) {
    let (wrapper, others) = job_pids(job_id);
    let wrapper = wrapper.unwrap_or_else(|| panic!("no batch script of job {job_id} listed"));
    let kill = |pid: &str| {
        Command::new("kill")
            .args(["-KILL", pid])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
    };
    assert!(kill(&wrapper).success());
    let deadline = std::time::Instant::now() + crate::support::SAFETY_TIMEOUT;
    while !is_gone(&wrapper) {
        assert!(std::time::Instant::now() < deadline, "the wrapper lives on");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for pid in others {
        let _ = kill(&pid);
    }
}

#[test]
fn a_non_idempotent_job_killed_mid_execute_is_cut_off_and_needs_a_verdict_never_resubmitted() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    // A retry allowed: the cut-off job must still not be run again without a verdict. The
    // unit's `bin/block` by its absolute path, so that a process of it left alive is found.
    apollo.config(&format!(
        "units:\n  - name: pay\n    executor: slurm\n    idempotent: false\n    retries: 1\n    \
         retry_delay: 0s\n    acknowledge: [retry-not-idempotent]\n    \
         execute: 'echo \"paid $SLURM_JOB_ID\" >> ledger; {}/bin/block pay'\n",
        apollo.root().display()
    ));
    // The wrapper only counts the calls.
    let path = wrap_sbatch(&apollo, 0, false, "");
    apollo.envs(&[("PATH", &path)]);
    let running = apollo.args(&["run", "--explain"]).spawn();
    // The unit's side effect ran and the wrapper recorded the start; the job then dies as an
    // OOM kill or a node failure kills it, without the wrapper's result.
    apollo.wait_for_marker("pay.started");
    let run = apollo.run_ids().pop().unwrap();
    let attempt = apollo.path(&format!(".apollo/runs/{run}/units/pay/1"));
    wait_for_file(&attempt.join("started"));
    let started = std::fs::read_to_string(attempt.join("started")).unwrap();
    let job_id = started.split_whitespace().next().unwrap().to_owned();
    kill_job_processes(&job_id);
    let output = running.wait();
    output.code(5);
    assert_eq!(sbatch_count(&output), 1, "{}", output.stderr);
    assert!(!attempt.join("result").exists());
    let journal = apollo.journal_text();
    assert!(
        journal.contains("without the wrapper's result after it started")
            && journal.contains("cut off"),
        "{journal}"
    );
    assert!(!journal.contains("did not start"), "{journal}");
    assert_eq!(submitted_job_ids(&apollo), [job_id.as_str()]);
    assert_eq!(shown_state(&mut apollo, "pay"), "needs_verdict");
    // The next run refuses too, submitting nothing.
    apollo.args(&["run"]).run().code(5);
    assert_eq!(sbatch_calls(&apollo), 1);
    let jobs = cluster_jobs(&run, "pay");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].0, job_id);
    assert_eq!(ledger(apollo.root()), [format!("paid {job_id}")]);
    // The kill reached the unit's processes: nothing of the job lives on.
    apollo.assert_no_processes_left();
}
