#![allow(
    clippy::unwrap_used,
    reason = "a test: a failed setup step should panic"
)]
//! The executor against a fake cluster: `sbatch` that runs the wrapper at once in the
//! background, `squeue` that lists what was submitted and counts its calls. No Slurm needed:
//! this checks the wrapper end to end and that polling is batched.

use std::path::{Path, PathBuf};
use std::time::Duration;

use apollo_core::event::AttemptStatus;
use apollo_core::{AttemptContext, AttemptRequest, CancelToken, Command, Executor, Unit};
use apollo_slurm::{SlurmExecutor, SlurmOptions};

const FAKE_SBATCH: &str = r#"#!/bin/sh
# A fake sbatch: runs the script at once, in the background, as Slurm would on a node.
fake=$(dirname "$0")
for arg in "$@"; do
  case "$arg" in
    --job-name=*) name=${arg#--job-name=} ;;
    --output=*) out=${arg#--output=} ;;
    --error=*) err=${arg#--error=} ;;
    --partition=bogus) echo "sbatch: error: invalid partition specified: bogus" >&2; exit 1 ;;
    -*) ;;
    *) script=$arg ;;
  esac
done
id=$$
echo "$id|RUNNING|$name" >>"$fake/queue"
SLURM_JOB_ID=$id sh "$script" </dev/null >>"$out" 2>>"$err" &
echo "$id"
"#;

const FAKE_SQUEUE: &str = r#"#!/bin/sh
fake=$(dirname "$0")
echo call >>"$fake/squeue_calls"
cat "$fake/queue" 2>/dev/null || true
"#;

const FAKE_SCANCEL: &str = "#!/bin/sh\necho \"$@\" >>\"$(dirname \"$0\")/scancel_calls\"\n";

fn fake_cluster(dir: &Path) -> SlurmOptions {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, text) in [
        ("sbatch", FAKE_SBATCH),
        ("squeue", FAKE_SQUEUE),
        ("scancel", FAKE_SCANCEL),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    SlurmOptions::default()
        .programs(bin.join("sbatch"), bin.join("squeue"), bin.join("scancel"))
        .queue_interval(Duration::from_millis(200), Duration::from_secs(2))
        .files_interval(Duration::from_millis(20), Duration::from_millis(200))
}

fn unit(name: &str, execute: &str, workdir: &Path) -> Unit {
    Unit {
        name: name.into(),
        deps: vec![],
        timeout: Some(Duration::from_secs(600)),
        retries: 0,
        retry_delay: Duration::from_secs(1),
        kill_grace: Duration::from_secs(5),
        prepare: Some(Command::Shell("echo preparing".into())),
        execute: Command::Shell(execute.into()),
        cleanup: Some(Command::Argv(vec!["touch".into(), "cleaned".into()])),
        inputs: vec![],
        outputs: vec![],
        env: [("WHO".to_owned(), "world".to_owned())].into(),
        workdir: workdir.to_owned(),
        idempotent: true,
        executor: apollo_core::model::ExecutorKind::Slurm,
        resources: Default::default(),
        capture: Default::default(),
        reuse: false,
        secrets: Default::default(),
    }
}

/// The attempt's folder in apollo's layout; its run's `units/` exists, as apollo-store makes
/// it (an executor creates the unit's and the attempt's folders only).
fn attempt_dir(root: &Path, unit: &str, attempt: u32) -> PathBuf {
    std::fs::create_dir_all(root.join("units")).unwrap();
    root.join("units").join(unit).join(attempt.to_string())
}

#[test]
fn twenty_jobs_are_watched_by_one_poller_with_few_squeue_calls() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
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
    unit.resources.slurm.partition = Some("bogus".into());
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
        &AttemptRequest::new("r1", &unit, 2, &second).with_in_flight(Some(1)),
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
        &AttemptRequest::new("r1", &unit, 2, &second).with_in_flight(Some(1)),
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

#[derive(Default)]
struct Collect(std::sync::Mutex<Vec<apollo_core::AttemptEvent>>);

impl apollo_core::AttemptReporter for Collect {
    fn report(&self, event: apollo_core::AttemptEvent) {
        self.0.lock().unwrap().push(event);
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    apollo_core::hash::sha256_hex(bytes)
}
