//! The fake cluster the executor's tests run against: `sbatch` that runs the wrapper (or each
//! task of a job array) at once in the background, `squeue` that lists what was submitted and
//! counts its calls, `scancel` and `scontrol` that note their calls. No Slurm needed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use apollo_core::{AttemptContext, AttemptRequest, CancelToken, Command, Executor, Unit};
use apollo_slurm::{SlurmExecutor, SlurmOptions};

pub(crate) const FAKE_SBATCH: &str = r#"#!/bin/sh
# A fake sbatch: runs the script at once, in the background, as Slurm would on a node. Line N
# of `plan` (if any) says what its N-th call does:
#   ok               queue the job and run it (the default)
#   lost-answer      queue and run the job, then fail as a loaded controller does
#   lost-job         fail the same way without queueing anything
#   connect-failure  fail without reaching the controller
#   cut-off          queue the job, which starts and dies at once without its result
#   hang             queue and run the job, then hang until apollo's client timeout kills it
#   pending          queue the job, which stays PENDING (reason BeginTime) until cancelled
fake=$(dirname "$0")
echo "$@" >>"$fake/sbatch_calls"
n=$(wc -l <"$fake/sbatch_calls" | tr -d ' ')
mode=$(sed -n "${n}p" "$fake/plan" 2>/dev/null)
for arg in "$@"; do
  case "$arg" in
    --job-name=*) name=${arg#--job-name=} ;;
    --output=*) out=${arg#--output=} ;;
    --error=*) err=${arg#--error=} ;;
    --chdir=*) dir=${arg#--chdir=} ;;
    --array=0-*) last=${arg#--array=0-} ;;
    --partition=bogus) echo "sbatch: error: invalid partition specified: bogus" >&2; exit 1 ;;
    -*) ;;
    *) script=$arg ;;
  esac
done
lost="sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"
case "$mode" in
  connect-failure)
    echo "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)" >&2
    exit 1 ;;
  lost-job) echo "$lost" >&2; exit 1 ;;
esac
id=$$
if [ "$mode" = cut-off ]; then
  echo "$id $(date +%s%3N)" >"$dir/started"
  echo "$id|NODE_FAIL|$name" >>"$fake/queue"
  echo "$id"
  exit 0
fi
if [ "$mode" = pending ]; then
  echo "$id|PENDING|$name" >>"$fake/queue"
  echo "$id"
  exit 0
fi
if [ -n "${last:-}" ]; then
  # A job array: one line and one run per task.
  for task in $(seq 0 "$last"); do echo "${id}_$task|RUNNING|$name" >>"$fake/queue"; done
  for task in $(seq 0 "$last"); do
    log=$(echo "$out" | sed "s/%a/$task/")
    SLURM_JOB_ID=$id$task SLURM_ARRAY_JOB_ID=$id SLURM_ARRAY_TASK_ID=$task sh "$script" </dev/null >>"$log" 2>&1 &
  done
else
  echo "$id|RUNNING|$name" >>"$fake/queue"
  SLURM_JOB_ID=$id sh "$script" </dev/null >>"$out" 2>>"$err" &
fi
if [ "$mode" = lost-answer ]; then echo "$lost" >&2; exit 1; fi
if [ "$mode" = hang ]; then exec sleep 600; fi
echo "$id"
"#;

pub(crate) const FAKE_SQUEUE: &str = r#"#!/bin/sh
fake=$(dirname "$0")
echo call >>"$fake/squeue_calls"
case "$*" in
  *%r*)
    # `--job=ID --format=%T|%r`: the job's state and Slurm's reason for it.
    for arg in "$@"; do case "$arg" in --job=*) job=${arg#--job=} ;; esac; done
    grep "^$job|" "$fake/queue" | tail -n 1 | cut -d'|' -f2 | sed 's/$/|BeginTime/'
    exit 0 ;;
esac
cat "$fake/queue" 2>/dev/null || true
"#;

/// A fake `scancel`: notes its calls; a job still pending leaves the queue as `CANCELLED` (a
/// running one is left to end by itself).
pub(crate) const FAKE_SCANCEL: &str = r#"#!/bin/sh
fake=$(dirname "$0")
echo "$@" >>"$fake/scancel_calls"
for job; do :; done
[ -f "$fake/queue" ] && sed -i "s/^$job|PENDING|/$job|CANCELLED|/" "$fake/queue"
exit 0
"#;

/// A fake `scontrol show config`: a cluster whose job arrays hold 10 tasks at most.
pub(crate) const FAKE_SCONTROL: &str = "#!/bin/sh\necho \"$@\" >>\"$(dirname \"$0\")/scontrol_calls\"\n\
echo 'MaxArraySize            = 10'\necho 'MessageTimeout          = 10 sec'\n";

/// What the fake `sbatch`'s calls do, one line per call (see [`FAKE_SBATCH`]).
pub(crate) fn plan(root: &Path, calls: &[&str]) {
    std::fs::write(root.join("bin/plan"), calls.join("\n") + "\n").unwrap();
}

/// The fake controller's files: `queue`, `sbatch_calls`, `scancel_calls`.
pub(crate) fn fake_file(root: &Path, name: &str) -> String {
    std::fs::read_to_string(root.join("bin").join(name)).unwrap_or_default()
}

pub(crate) fn fake_cluster(dir: &Path) -> SlurmOptions {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, text) in [
        ("sbatch", FAKE_SBATCH),
        ("squeue", FAKE_SQUEUE),
        ("scancel", FAKE_SCANCEL),
        ("scontrol", FAKE_SCONTROL),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    SlurmOptions::default()
        .programs(bin.join("sbatch"), bin.join("squeue"), bin.join("scancel"))
        .scontrol(bin.join("scontrol"))
        .queue_interval(Duration::from_millis(200), Duration::from_secs(2))
        .files_interval(Duration::from_millis(20), Duration::from_millis(200))
        // The lookup after a lost answer is short here: the fake controller answers at once.
        .token_lookup_window(Duration::from_millis(300))
        .submit_retry(
            Duration::from_millis(10),
            Duration::from_millis(40),
            Duration::from_secs(60),
        )
}

pub(crate) fn unit(name: &str, execute: &str, workdir: &Path) -> Unit {
    Unit {
        skip_when: None,
        when_command: None,
        log_limit: None,
        queue_timeout: None,
        deadline: None,
        name: name.into(),
        deps: vec![],
        timeout: Some(Duration::from_secs(600)),
        retries: 0,
        retry_delay: Duration::from_secs(1),
        retry_on_exit: Vec::new(),
        retry_max_delay: None,
        kill_grace: Duration::from_secs(5),
        prepare: Some(Command::Shell("echo preparing".into())),
        execute: Command::Shell(execute.into()),
        cleanup: Some(Command::Argv(vec!["touch".into(), "cleaned".into()])),
        cleanup_timeout: apollo_core::model::DEFAULT_CLEANUP_TIMEOUT,
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
pub(crate) fn attempt_dir(root: &Path, unit: &str, attempt: u32) -> PathBuf {
    std::fs::create_dir_all(root.join("units")).unwrap();
    root.join("units").join(unit).join(attempt.to_string())
}

#[derive(Default)]
pub(crate) struct Collect(pub(crate) std::sync::Mutex<Vec<apollo_core::AttemptEvent>>);

impl apollo_core::AttemptReporter for Collect {
    fn report(&self, event: apollo_core::AttemptEvent) {
        self.0.lock().unwrap().push(event);
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    apollo_core::hash::sha256_hex(bytes)
}

pub(crate) fn careful(name: &str, execute: &str, workdir: &Path) -> Unit {
    let mut unit = unit(name, execute, workdir);
    unit.idempotent = false;
    unit
}

pub(crate) fn run_one(
    executor: &SlurmExecutor,
    unit: &Unit,
    dir: &Path,
    attempt: u32,
    in_flight: Option<u32>,
) -> (apollo_core::AttemptOutcome, Vec<apollo_core::AttemptEvent>) {
    let cancel = CancelToken::new();
    let reports = Collect::default();
    let outcome = executor.run_attempt(
        &AttemptRequest::new("r1", unit, attempt, dir)
            .with_in_flight(in_flight)
            .with_attempt_dirs(&Beside(dir)),
        &AttemptContext::new(&cancel).with_reporter(&reports),
    );
    let reports = reports.0.lock().unwrap().clone();
    (outcome, reports)
}

/// The engine's names for a unit's attempt folders in these tests: the folders beside `.0`,
/// named by attempt number (as apollo-store lays them out).
pub(crate) struct Beside<'p>(pub(crate) &'p Path);

impl apollo_core::engine::AttemptLogs for Beside<'_> {
    fn log_dir(&self, _unit: &str, attempt: u32) -> Result<PathBuf, String> {
        let parent = self.0.parent().ok_or("an attempt folder with no parent")?;
        Ok(parent.join(attempt.to_string()))
    }
}
