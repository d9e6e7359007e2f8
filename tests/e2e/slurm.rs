//! The Slurm executor against a real cluster (issue 15): `ci/slurm-up.sh` brings up a
//! single-node one. Without a cluster each test prints `SKIPPED: needs a Slurm cluster` and
//! passes, except under `CI=true`, where it fails.
//!
//! No job outlives its test: [`JobGuard`] cancels every job of the test's runs when dropped.
#![allow(clippy::disallowed_methods)] // Tests run squeue.

use std::path::Path;
use std::process::Command;

use crate::slurm_cluster::{JobGuard, cluster, guard};
use crate::support::Apollo;

/// The kinds of a journal's records, in order.
fn record_kinds(journal: &str) -> Vec<String> {
    journal
        .lines()
        .filter_map(|line| line.splitn(3, ' ').nth(2))
        .filter_map(|json| serde_json::from_str::<serde_json::Value>(json).ok())
        .filter_map(|record| record["kind"].as_str().map(str::to_owned))
        .collect()
}

fn journal_of(state: &Path) -> String {
    let mut text = String::new();
    for run in std::fs::read_dir(state.join("runs")).unwrap() {
        let journal = run.unwrap().path().join("journal");
        let mut segments: Vec<_> = std::fs::read_dir(journal)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
            .collect();
        segments.sort();
        for segment in segments {
            text.push_str(&std::fs::read_to_string(segment).unwrap());
        }
    }
    text
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A copy of the bundled example in a fresh project; on Slurm when `on_slurm`.
fn bundled_example(on_slurm: bool) -> Apollo {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let apollo = Apollo::new();
    copy_dir(&repo.join("config"), &apollo.path("config"));
    let _ = std::fs::remove_dir_all(apollo.path("config/.apollo"));
    copy_dir(&repo.join("units"), &apollo.path("units"));
    copy_dir(&repo.join("data/raw"), &apollo.path("data/raw"));
    if on_slurm {
        let config = std::fs::read_to_string(apollo.path("config/pipeline.yaml")).unwrap();
        let config = config.replacen("defaults:\n", "defaults:\n  executor: slurm\n", 1);
        assert!(config.contains("executor: slurm"));
        std::fs::write(apollo.path("config/pipeline.yaml"), config).unwrap();
    }
    apollo
}

#[test]
fn the_bundled_example_on_slurm_gives_the_same_outputs_and_journal_shape_as_local() {
    if !cluster() {
        return;
    }
    let mut local = bundled_example(false);
    local.args(&["run"]).run().code(0);
    let mut slurm = bundled_example(true);
    let _guard = JobGuard {
        state_dir: slurm.path("config/.apollo"),
    };
    let output = slurm.args(&["run", "--explain"]).run();
    output.code(0);
    // At most one sbatch per unit of the example (instances ready together share an array).
    let n_units = record_kinds(&journal_of(&local.path("config/.apollo")))
        .iter()
        .filter(|kind| *kind == "unit_started")
        .count();
    let sbatch: usize = output
        .stderr
        .split(" sbatch,")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|count| count.parse().ok())
        .expect("the Slurm client calls line");
    assert!(
        (1..=n_units).contains(&sbatch),
        "{n_units} units: {}",
        output.stderr
    );
    for file in [
        "data/out/summary.csv",
        "data/work/clean.csv",
        "data/work/fetched.csv",
    ] {
        assert_eq!(
            std::fs::read_to_string(slurm.path(file)).unwrap(),
            std::fs::read_to_string(local.path(file)).unwrap(),
            "{file}"
        );
    }
    let local_kinds = record_kinds(&journal_of(&local.path("config/.apollo")));
    let slurm_journal = journal_of(&slurm.path("config/.apollo"));
    let slurm_kinds = record_kinds(&slurm_journal);
    assert_eq!(
        slurm_kinds
            .iter()
            .filter(|kind| *kind == "unit_submitted")
            .count(),
        n_units
    );
    // The same records but `unit_submitted`, in an order that may differ where units ran in
    // parallel (the example's fan-out instances).
    let mut without_submissions: Vec<_> = slurm_kinds
        .into_iter()
        .filter(|kind| kind != "unit_submitted")
        .collect();
    let mut local_kinds = local_kinds;
    without_submissions.sort();
    local_kinds.sort();
    assert_eq!(without_submissions, local_kinds);
    // The same output hashes: the wrapper hands apollo what local runs would.
    let output_hashes = |journal: &str| -> std::collections::BTreeSet<String> {
        journal
            .lines()
            .filter_map(|line| line.splitn(3, ' ').nth(2))
            .filter_map(|json| serde_json::from_str::<serde_json::Value>(json).ok())
            .filter(|record| record["kind"] == "unit_finished")
            .map(|record| record["unit"].to_string() + " " + &record["output_hash"].to_string())
            .collect::<std::collections::BTreeSet<String>>()
    };
    assert_eq!(
        output_hashes(&slurm_journal),
        output_hashes(&journal_of(&local.path("config/.apollo")))
    );
    // `apollo logs` finds the job's output.
    let logs = slurm
        .args(&[
            "logs",
            "--state-dir",
            "config/.apollo",
            "latest",
            "fetch_data",
        ])
        .run();
    logs.code(0);
    assert!(logs.stdout.contains("rows"), "{}", logs.stdout);
}

#[test]
fn a_timeout_cancels_the_job_and_is_recorded_timed_out() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(
        "units:\n  - name: slow\n    executor: slurm\n    timeout: 2s\n    kill_grace: 1s\n    \
         execute: bin/block slow\n    cleanup: touch markers/cleaned\n",
    );
    let output = apollo.args(&["run"]).run();
    output.code(1);
    let journal = apollo.journal_text();
    assert!(journal.contains(r#""status":"timed_out""#), "{journal}");
    assert!(apollo.path("markers/slow.started").exists());
    // The wrapper passed the signal on and ran cleanup before Slurm ended the job.
    assert!(apollo.path("markers/cleaned").exists());
    // The job is over by the time apollo returns.
    let job_id = std::fs::read_to_string(apollo.path(&format!(
        ".apollo/runs/{}/units/slow/1/job_id",
        apollo.run_ids()[0]
    )))
    .unwrap();
    let queue = Command::new("squeue")
        .args([
            "--noheader",
            "--states=PENDING,RUNNING",
            "--format=%i",
            "--jobs",
            job_id.trim(),
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&queue.stdout).trim().is_empty());
}

#[test]
fn a_failing_job_is_retried() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(
        "units:\n  - name: flaky\n    executor: slurm\n    retries: 1\n    retry_delay: 0s\n    \
         execute: bin/count flaky && [ \"$APOLLO_ATTEMPT\" -ge 2 ]\n",
    );
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("flaky"), 2);
    let kinds = record_kinds(&apollo.journal_text());
    assert_eq!(
        kinds
            .iter()
            .filter(|kind| *kind == "unit_submitted")
            .count(),
        2
    );
    let journal = apollo.journal_text();
    assert!(journal.contains(r#""status":"failed""#));
    assert!(journal.contains(r#""status":"succeeded""#));
}

const FIVE_BLOCKING_JOBS: &str = "max_parallel: 1\nmax_jobs: 5\ndefaults: {executor: slurm}\nunits:\n\
  - {name: j1, execute: 'echo $APOLLO_UNIT >> ledger; bin/block j1'}\n\
  - {name: j2, execute: 'echo $APOLLO_UNIT >> ledger; bin/block j2'}\n\
  - {name: j3, execute: 'echo $APOLLO_UNIT >> ledger; bin/block j3'}\n\
  - {name: j4, execute: 'echo $APOLLO_UNIT >> ledger; bin/block j4'}\n\
  - {name: j5, execute: 'echo $APOLLO_UNIT >> ledger; bin/block j5'}\n";

#[test]
fn apollo_killed_with_five_jobs_running_reattaches_to_all_of_them_on_resume() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(FIVE_BLOCKING_JOBS);
    let running = apollo.args(&["run"]).spawn();
    for job in 1..=5 {
        apollo.wait_for_marker(&format!("j{job}.started"));
    }
    running.kill9();
    // Two finish while apollo is dead; three are still running when it comes back.
    apollo.release("j1.release");
    apollo.release("j2.release");
    let output = {
        let resumed = apollo.args(&["run", "--explain"]).spawn();
        apollo.wait_for_journal(r#""reattached_from":1"#);
        for job in 3..=5 {
            apollo.release(&format!("j{job}.release"));
        }
        resumed.wait()
    };
    output.code(0);
    // Each job ran once: none was submitted again.
    let mut ledger: Vec<String> = std::fs::read_to_string(apollo.path("ledger"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    ledger.sort();
    assert_eq!(ledger, ["j1", "j2", "j3", "j4", "j5"]);
    assert!(output.stderr.contains(" 0 sbatch,"), "{}", output.stderr);
    let journal = apollo.journal_text();
    assert_eq!(
        journal.matches(r#""reattached_from":1"#).count(),
        5,
        "{journal}"
    );
    let succeeded = journal
        .lines()
        .filter(|line| {
            line.contains(r#""kind":"unit_finished""#) && line.contains(r#""status":"succeeded""#)
        })
        .count();
    assert_eq!(succeeded, 5);
    // `apollo replay` and `apollo show` show them as reattached.
    let replay = apollo.args(&["replay"]).run();
    assert_eq!(
        replay.stdout.matches("reattached").count(),
        5,
        "{}",
        replay.stdout
    );
    let show = apollo.args(&["show", "latest", "j3"]).run();
    assert!(
        show.stdout
            .contains("reattached (submitted by attempt 1 before apollo died)"),
        "{}",
        show.stdout
    );
}

#[test]
fn a_job_that_finished_while_apollo_was_dead_is_recorded_from_its_files() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(
        "units:\n  - name: long\n    executor: slurm\n    \
         execute: 'echo ran >> ledger; bin/block long; echo done'\n  \
         - name: after\n    deps: [long]\n    execute: bin/count after\n",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("long.started");
    running.kill9();
    apollo.release("long.release");
    let run = apollo.run_ids().pop().unwrap();
    let result = apollo.path(&format!(".apollo/runs/{run}/units/long/1/result"));
    let deadline = std::time::Instant::now() + crate::support::SAFETY_TIMEOUT;
    while !result.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the job never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert_eq!(
        std::fs::read_to_string(apollo.path("ledger")).unwrap(),
        "ran\n"
    );
    assert!(output.stderr.contains(" 0 sbatch,"), "{}", output.stderr);
    assert_eq!(apollo.count("after"), 1);
    let journal = apollo.journal_text();
    assert!(journal.contains(r#""reattached_from":1"#), "{journal}");
    // Its stdout, read from the job's files, is under the new attempt too.
    let logs = apollo
        .args(&["logs", "latest", "long", "--attempt", "2"])
        .run();
    assert!(logs.stdout.contains("done"), "{logs:?}");
}

#[test]
fn sbatch_refusing_a_bad_partition_fails_the_unit_with_a_message_naming_it() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(
        "units:\n  - name: nowhere\n    executor: slurm\n    \
         resources: {slurm: {partition: no-such-partition}}\n    execute: 'true'\n",
    );
    let output = apollo.args(&["run"]).run();
    output.code(1);
    let everything = format!("{}{}", output.stdout, output.stderr);
    assert!(
        everything.contains("sbatch refused the job (partition `no-such-partition`)"),
        "{everything}"
    );
    assert!(apollo.journal_text().contains("invalid partition"));
}

#[test]
fn local_and_slurm_units_mix_in_one_dag() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(
        "units:\n  - {name: first, execute: 'echo first ${SLURM_JOB_ID:-local} >> order'}\n  \
         - {name: middle, deps: [first], executor: slurm, resources: {cpus: 1, memory: 50M}, \
            execute: 'echo middle ${SLURM_JOB_ID:-local} >> order'}\n  \
         - {name: last, deps: [middle], execute: 'echo last ${SLURM_JOB_ID:-local} >> order'}\n",
    );
    apollo.args(&["run"]).run().code(0);
    let order = std::fs::read_to_string(apollo.path("order")).unwrap();
    let lines: Vec<&str> = order.lines().collect();
    assert_eq!(lines.len(), 3, "{order}");
    assert_eq!(lines[0], "first local");
    assert!(
        lines[1].starts_with("middle ") && lines[1] != "middle local",
        "{order}"
    );
    assert_eq!(lines[2], "last local");
}

#[test]
fn ctrl_c_cancels_the_job_unless_told_to_detach_then_the_resume_reattaches() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(
        "units:\n  - name: stays\n    executor: slurm\n    resources: {slurm: {on_stop: detach}}\n    \
         execute: 'echo ran >> ledger; bin/block stays'\n  \
         - name: goes\n    executor: slurm\n    kill_grace: 1s\n    \
         execute: 'bin/block goes'\n    cleanup: touch markers/goes.cleaned\n",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("stays.started");
    apollo.wait_for_marker("goes.started");
    running.signal(libc::SIGINT);
    running.wait().code(130);
    // The cancelled job's wrapper got SIGTERM and ran cleanup; the detached one runs on.
    assert!(apollo.path("markers/goes.cleaned").exists());
    let run = apollo.run_ids().pop().unwrap();
    let stays_dir = apollo.path(&format!(".apollo/runs/{run}/units/stays/1"));
    let job_id = std::fs::read_to_string(stays_dir.join("job_id")).unwrap();
    let queue = Command::new("squeue")
        .args(["--noheader", "--format=%T", "--jobs", job_id.trim()])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&queue.stdout).trim(), "RUNNING");
    assert!(!stays_dir.join("result").exists());

    let resumed = apollo.args(&["run", "--explain"]).spawn();
    apollo.wait_for_journal(r#""reattached_from":1"#);
    apollo.release("stays.release");
    apollo.release("goes.release");
    let output = resumed.wait();
    output.code(0);
    assert_eq!(
        std::fs::read_to_string(apollo.path("ledger")).unwrap(),
        "ran\n"
    );
    // `goes` was cancelled, so it ran again as a new job; `stays` was reattached.
    assert!(output.stderr.contains(" 1 sbatch,"), "{}", output.stderr);
}

/// A non-idempotent unit on Slurm that records its start and end in `ledger`, with its job
/// id, and blocks in between until released.
const PAY_ON_SLURM: &str = "units:\n  - name: pay\n    executor: slurm\n    idempotent: false\n    \
     execute: 'echo start $SLURM_JOB_ID >> ledger; bin/block pay; echo end $SLURM_JOB_ID >> ledger'\n";

/// Start `apollo run` and SIGKILL it once `pay`'s job runs and its submission is recorded.
fn kill_apollo_while_pay_runs(apollo: &mut Apollo) -> String {
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("pay.started");
    apollo.wait_for_journal(r#""kind":"unit_submitted""#);
    running.kill9();
    let run = apollo.run_ids().pop().unwrap();
    std::fs::read_to_string(apollo.path(&format!(".apollo/runs/{run}/units/pay/1/job_id")))
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn a_non_idempotent_job_running_when_apollo_was_killed_is_reattached_not_run_twice() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(PAY_ON_SLURM);
    let job_id = kill_apollo_while_pay_runs(&mut apollo);
    let output = {
        let resumed = apollo.args(&["run", "--explain"]).spawn();
        apollo.wait_for_journal(r#""reattached_from":1"#);
        apollo.release("pay.release");
        resumed.wait()
    };
    output.code(0);
    assert!(output.stderr.contains(" 0 sbatch,"), "{}", output.stderr);
    assert_eq!(
        std::fs::read_to_string(apollo.path("ledger")).unwrap(),
        format!("start {job_id}\nend {job_id}\n")
    );
}

#[test]
fn mark_rerun_while_the_first_job_still_runs_does_not_start_a_second_job() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(PAY_ON_SLURM);
    let job_id = kill_apollo_while_pay_runs(&mut apollo);
    apollo
        .args(&["mark", "latest", "pay", "--rerun"])
        .run()
        .code(0);
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(5);
    let everything = format!("{}{}", output.stdout, output.stderr);
    assert!(
        everything.contains(&format!("job {job_id}"))
            && everything.contains("still running")
            && everything.contains(&format!("scancel {job_id}")),
        "{everything}"
    );
    assert!(output.stderr.contains(" 0 sbatch,"), "{}", output.stderr);
    // The first job is alone, and still runs.
    assert_eq!(
        std::fs::read_to_string(apollo.path("ledger")).unwrap(),
        format!("start {job_id}\n")
    );
    let queue = Command::new("squeue")
        .args(["--noheader", "--format=%T", "--jobs", &job_id])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&queue.stdout).trim(), "RUNNING");
    apollo.release("pay.release");
}

#[test]
fn the_verdict_asked_for_a_detached_non_idempotent_job_says_it_still_runs_and_how_to_end_it() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(&PAY_ON_SLURM.replace(
        "    idempotent: false\n",
        "    idempotent: false\n    resources: {slurm: {on_stop: detach}}\n",
    ));
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("pay.started");
    apollo.wait_for_journal(r#""kind":"unit_submitted""#);
    running.signal(libc::SIGINT);
    running.wait().code(130);
    let run = apollo.run_ids().pop().unwrap();
    let job_id =
        std::fs::read_to_string(apollo.path(&format!(".apollo/runs/{run}/units/pay/1/job_id")))
            .unwrap();
    let job_id = job_id.trim();
    let refused = apollo.args(&["run"]).run();
    refused.code(5);
    assert!(
        refused
            .stderr
            .contains(&format!("its Slurm job {job_id} is still running"))
            && refused.stderr.contains(&format!("`scancel {job_id}`")),
        "{}",
        refused.stderr
    );
    apollo.release("pay.release");
}

/// A fake controller on `PATH` (no cluster needed): `sbatch` follows `fake/plan`, one line per
/// call (`ok`: queue and run the job at once; `lost-job`: fail with "Socket timed out on
/// send/recv operation" without queueing; `connect-failure`), `squeue` lists `fake/queue`,
/// `scontrol` says `MessageTimeout = 1 sec` (a 2 s lookup window).
fn fake_controller(apollo: &mut Apollo, plan: &[&str]) {
    apollo.file(
        "fake/sbatch",
        r#"#!/bin/sh
fake=$(dirname "$0")
echo "$@" >>"$fake/sbatch_calls"
n=$(wc -l <"$fake/sbatch_calls" | tr -d ' ')
mode=$(sed -n "${n}p" "$fake/plan")
for arg in "$@"; do
  case "$arg" in
    --job-name=*) name=${arg#--job-name=} ;;
    --output=*) out=${arg#--output=} ;;
    --error=*) err=${arg#--error=} ;;
    -*) ;;
    *) script=$arg ;;
  esac
done
case "$mode" in
  lost-job) echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2; exit 1 ;;
  connect-failure) echo "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)" >&2; exit 1 ;;
esac
echo "$$|RUNNING|$name" >>"$fake/queue"
SLURM_JOB_ID=$$ sh "$script" </dev/null >>"$out" 2>>"$err"
echo "$$"
"#,
    );
    apollo.file(
        "fake/squeue",
        "#!/bin/sh\ncat \"$(dirname \"$0\")/queue\" 2>/dev/null || true\n",
    );
    apollo.file(
        "fake/scancel",
        "#!/bin/sh\necho \"$@\" >>\"$(dirname \"$0\")/scancel_calls\"\n",
    );
    apollo.file(
        "fake/scontrol",
        "#!/bin/sh\necho 'MessageTimeout          = 1 sec'\n",
    );
    apollo.file("fake/plan", &(plan.join("\n") + "\n"));
    for program in ["sbatch", "squeue", "scancel", "scontrol"] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            apollo.path(&format!("fake/{program}")),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    let path = format!(
        "{}:{}",
        apollo.path("fake").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    apollo.envs(&[("PATH", &path)]);
}

#[test]
fn a_lost_sbatch_answer_whose_token_stays_unknown_stops_a_non_idempotent_unit_with_exit_5_naming_it()
 {
    let mut apollo = Apollo::new();
    fake_controller(&mut apollo, &["lost-job", "ok"]);
    apollo.config(
        "units:\n  - name: pay\n    executor: slurm\n    idempotent: false\n    \
         execute: 'echo paid >> ledger'\n",
    );
    let stopped = apollo.args(&["run"]).run();
    stopped.code(5);
    let run = apollo.run_ids().pop().unwrap();
    let token =
        std::fs::read_to_string(apollo.path(&format!(".apollo/runs/{run}/units/pay/1/token")))
            .unwrap();
    assert!(
        stopped.stderr.contains(token.trim()) && stopped.stderr.contains("Socket timed out"),
        "{}",
        stopped.stderr
    );
    // Submitted once; no end recorded: the attempt stays in flight for a verdict.
    assert_eq!(
        std::fs::read_to_string(apollo.path("fake/sbatch_calls"))
            .unwrap()
            .lines()
            .count(),
        1
    );
    let kinds = record_kinds(&apollo.journal_text());
    assert!(kinds.contains(&"unit_started".to_owned()), "{kinds:?}");
    assert!(!kinds.contains(&"unit_finished".to_owned()), "{kinds:?}");
    assert!(!apollo.path("ledger").exists());
    // The next run asks for a verdict, and says what is known of the job.
    let again = apollo.args(&["run"]).run();
    again.code(5);
    assert!(
        again.stderr.contains("never got a job id")
            && again
                .stderr
                .contains(&format!("apollo:{run}:pay:1:{}", token.trim())),
        "{}",
        again.stderr
    );
    // The human looked: no such job. The next run submits it, once.
    apollo
        .args(&["mark", "latest", "pay", "--failed"])
        .run()
        .code(0);
    apollo.args(&["run"]).run().code(0);
    assert_eq!(
        std::fs::read_to_string(apollo.path("ledger")).unwrap(),
        "paid\n"
    );
}

#[test]
fn sbatch_connect_failures_are_retried_and_the_run_succeeds() {
    let mut apollo = Apollo::new();
    fake_controller(&mut apollo, &["connect-failure", "connect-failure", "ok"]);
    apollo.config(
        "units:\n  - name: pay\n    executor: slurm\n    idempotent: false\n    \
         execute: 'echo paid >> ledger'\n",
    );
    apollo.args(&["run"]).run().code(0);
    assert_eq!(
        std::fs::read_to_string(apollo.path("ledger")).unwrap(),
        "paid\n"
    );
    assert_eq!(
        std::fs::read_to_string(apollo.path("fake/sbatch_calls"))
            .unwrap()
            .lines()
            .count(),
        3
    );
}
