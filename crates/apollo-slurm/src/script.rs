//! The wrapper script: one per attempt, in the attempt's folder (on the shared filesystem),
//! submitted with `sbatch`. On the compute node it runs the unit's `when: {command}` (if any:
//! a false or broken one and nothing else runs) → prepare → execute → cleanup in the
//! unit's workdir with the unit's env, as apollo-exec would, and leaves beside itself what
//! apollo needs to record the attempt — whether or not apollo is alive to watch:
//!
//! * `started` — `<job id> <epoch ms>`, when the job began (timeouts count from here; a job
//!   array's task writes its id as `<array id>_<task>`);
//! * `phases` — one line per phase that ran: `<phase> <exit status> <start ms> <end ms>`
//!   (`when` for the condition: how apollo tells its skip from execute's own exit 77)
//!   (the status as the shell reports it: 128 + n for signal n);
//! * `result` — written last (to a temporary name, then renamed: it exists only complete):
//!   `end <ms>`, `signal <n>` (the signal that stopped the wrapper, 0 for none),
//!   `execute_stdout <start> <end>` (the byte range of `stdout` that execute wrote, whose
//!   hash is the output hash of a unit without declared outputs), `error <text>` when the
//!   workdir could not be entered, then `cpu` and the shell's `times` (user and system time
//!   of the phases' processes).
//!
//! The job's stdout and stderr are the attempt's `stdout` and `stderr` files (`sbatch
//! --output/--error`), where `apollo logs` reads them.
//!
//! A signal (Slurm's time limit, `scancel --signal=TERM`) is passed on to the running phase;
//! the wrapper then runs cleanup (if prepare or execute started) and writes its result.
//! Cleanup runs under coreutils' `timeout` at the unit's `cleanup_timeout` (its line in
//! `phases` then ends with `timeout`).

use std::fmt::Write as _;
use std::path::Path;

use apollo_core::model::{Command, Phase, Unit};

/// The wrapper's file name in the attempt folder.
pub(crate) const SCRIPT: &str = "slurm.sh";
/// The file apollo writes the job id to once `sbatch` returned.
pub(crate) const JOB_ID: &str = "job_id";
/// Written by the wrapper when the job starts.
pub(crate) const STARTED: &str = "started";
/// Appended by the wrapper as each phase ends.
pub(crate) const PHASES: &str = "phases";
/// Written by the wrapper when it is done.
pub(crate) const RESULT: &str = "result";

/// The attempt `attempt` of `unit` in run `run_id`, its files in `dir`.
#[derive(Debug, Clone, Copy)]
pub struct WrapperSpec<'a> {
    /// The run's id.
    pub run_id: &'a str,
    /// The unit.
    pub unit: &'a Unit,
    /// The attempt number.
    pub attempt: u32,
    /// The attempt's folder (absolute, on the shared filesystem).
    pub dir: &'a Path,
}

/// The wrapper script's text.
pub fn wrapper_script(spec: &WrapperSpec<'_>) -> String {
    let WrapperSpec {
        run_id,
        unit,
        attempt,
        dir,
    } = *spec;
    let mut env_words = String::new();
    for (key, value) in [
        ("APOLLO_RUN_ID", run_id.to_owned()),
        ("APOLLO_UNIT", unit.name.clone()),
        ("APOLLO_ATTEMPT", attempt.to_string()),
        // apollo's stray sweep leaves processes carrying it alone (`apollo_exec::CLUSTER_JOB_MARKER`).
        ("APOLLO_EXECUTOR", "slurm".to_owned()),
    ]
    .into_iter()
    .chain(
        unit.env
            .iter()
            .map(|(key, value)| (key.as_str(), value.clone())),
    ) {
        let _ = write!(env_words, " {}", quote(&format!("{key}={value}")));
    }
    let run_line = |phase: Phase, command: &Command| {
        format!(
            "run {phase} env{env_words} {} {}",
            quote(&format!("APOLLO_PHASE={phase}")),
            command_words(command)
        )
    };
    let mut script = String::new();
    let _ = writeln!(script, "#!/bin/sh");
    let _ = writeln!(
        script,
        "# Written by apollo for unit `{}`, attempt {attempt} of run {run_id}.\n\
         # apollo records the attempt from the files this script leaves beside itself.",
        unit.name
    );
    let _ = writeln!(script, "dir={}", quote(&dir.display().to_string()));
    script.push_str(BODY_START);
    if !unit.secrets.is_empty() {
        // The values, from the attempt's 0600 file (never this script: slurmctld keeps it),
        // exported for every phase; the file is gone before anything of the unit runs.
        let _ = writeln!(
            script,
            "if [ -f \"$dir/secrets\" ]; then . \"$dir/secrets\"; rm -f \"$dir/secrets\"; else \
             echo \"apollo: the attempt's secrets file is missing\" >&2; \
             finish \"the attempt's secrets file is missing\"; exit 1; fi"
        );
    }
    let _ = writeln!(
        script,
        "cd {} || {{ echo \"apollo: cannot enter the unit's workdir\" >&2; \
         finish 'cannot enter the workdir {}'; exit 1; }}",
        quote(&unit.workdir.display().to_string()),
        unit.workdir
            .display()
            .to_string()
            .replace(['\'', '\n'], "?")
    );
    let _ = writeln!(script, "ran=0\nok=1\nskipped=0");
    if let Some(condition) = &unit.when_command {
        // The condition first, a phase of its own: its `when` line in `phases` tells apollo
        // a false one (its skip) from execute's own exit 77. Nothing else runs after it. A
        // false condition (an exit other than 126 and 127, not a signal or the timeout: the
        // rule of `PhaseOutcome::condition_false`) ends the job as a success to Slurm too, so
        // `sacct` says COMPLETED of a unit apollo skipped, not FAILED.
        let _ = writeln!(
            script,
            "{} || {{ c=$?; ok=0; if [ \"$c\" -ne 126 ] && [ \"$c\" -ne 127 ] && [ \"$c\" -lt 128 ]; then skipped=1; fi; }}",
            run_line(Phase::When, condition)
        );
    }
    if let Some(prepare) = &unit.prepare {
        let _ = writeln!(
            script,
            "ran=1\n{} || ok=0",
            run_line(Phase::Prepare, prepare)
        );
    }
    let _ = writeln!(
        script,
        "if [ \"$ok\" = 1 ] && [ \"$signal\" = 0 ]; then\n  ran=1\n  out_start=$(size \"$dir/stdout\")\n  {}\n  status=$?\n  out_end=$(size \"$dir/stdout\")\nfi",
        run_line(Phase::Execute, &unit.execute)
    );
    if let Some(cleanup) = &unit.cleanup {
        // Cleanup's own limit (`cleanup_timeout`), kept by coreutils' `timeout` on the node.
        let _ = writeln!(
            script,
            "if [ \"$ran\" = 1 ]; then\n  limit={} limit_ms={} grace={}\n  {} || cleanup_failed=1\n  limit=\nfi",
            seconds(unit.cleanup_timeout),
            unit.cleanup_timeout.as_millis(),
            seconds(unit.kill_grace.max(std::time::Duration::from_millis(1))),
            run_line(Phase::Cleanup, cleanup)
        );
    }
    script.push_str(BODY_END);
    script
}

/// Shared helpers and the start of the job (fixed text).
const BODY_START: &str = r#"now() { date +%s%3N; }
size() { if [ -f "$1" ]; then wc -c <"$1" | tr -d ' '; else echo 0; fi; }
signal=0
child=
status=0
on_signal() {
  signal=$1
  if [ -n "$child" ]; then kill -"$2" "$child" 2>/dev/null; fi
}
trap 'on_signal 15 TERM' TERM
trap 'on_signal 2 INT' INT
trap 'on_signal 10 USR1' USR1
# run PHASE COMMAND...: run it in the background (so a signal reaches the trap at once), wait
# for it even across signals, append its line to `phases`. With `$limit` set (seconds, and
# `$limit_ms`), under `timeout`, which stops the command's group at it (SIGTERM, `$grace`,
# SIGKILL): the line then ends with `timeout`, and a 124 is recorded as the SIGTERM it was.
run() {
  phase=$1
  shift
  start=$(now)
  if [ -n "${limit:-}" ]; then
    timeout -s TERM -k "$grace" "$limit" "$@" </dev/null &
  else
    "$@" </dev/null &
  fi
  child=$!
  while :; do
    wait "$child"
    code=$?
    if [ "$code" -gt 128 ] && kill -0 "$child" 2>/dev/null; then continue; fi
    break
  done
  child=
  end=$(now)
  mark=
  if [ -n "${limit:-}" ] && { [ "$code" = 124 ] || { [ "$code" = 137 ] && [ $((end - start)) -ge "$limit_ms" ]; }; }; then
    mark=" timeout"
    if [ "$code" = 124 ]; then code=143; fi
  fi
  echo "$phase $code $start $end$mark" >>"$dir/phases"
  return "$code"
}
finish() {
  {
    echo "end $(now)"
    echo "signal $signal"
    if [ -n "${out_end:-}" ]; then echo "execute_stdout $out_start $out_end"; fi
    if [ -n "${1:-}" ]; then echo "error $1"; fi
    echo "cpu"
    times
  } >"$dir/result.tmp" && mv -f "$dir/result.tmp" "$dir/result"
}
# A job array's task is `<array id>_<task>` to Slurm's tools (`squeue --array`, `scancel`).
job=${SLURM_JOB_ID:-}
if [ -n "${SLURM_ARRAY_JOB_ID:-}" ] && [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
  job="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
fi
echo "$job $(now)" >"$dir/started.tmp" && mv -f "$dir/started.tmp" "$dir/started"
"#;

/// The end: the result file, and the exit status Slurm shows for the job.
const BODY_END: &str = r#"finish
if [ "$skipped" = 1 ]; then exit 0; fi
if [ "$ok" != 1 ]; then exit 1; fi
if [ -n "${cleanup_failed:-}" ] && [ "$status" = 0 ]; then exit 1; fi
exit "$status"
"#;

/// A duration as `sleep` takes it: whole seconds, or seconds with milliseconds.
fn seconds(duration: std::time::Duration) -> String {
    let millis = duration.as_millis();
    if millis.is_multiple_of(1000) {
        (millis / 1000).to_string()
    } else {
        format!("{}.{:03}", millis / 1000, millis % 1000)
    }
}

/// A command as shell words: a shell string runs under `/bin/sh -c` (as apollo-exec does), an
/// argument vector is exec'd as written.
fn command_words(command: &Command) -> String {
    match command {
        Command::Shell(script) => format!("/bin/sh -c {}", quote(script)),
        Command::Argv(argv) => argv
            .iter()
            .map(|arg| quote(arg))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// `text` as one single-quoted shell word.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::unit;
    use std::path::PathBuf;

    #[test]
    fn the_marker_the_stray_sweep_spares_is_in_every_phases_env() {
        let script = wrapper_script(&WrapperSpec {
            run_id: "r1",
            unit: &unit(Command::Shell("true".into())),
            attempt: 1,
            dir: Path::new("/d"),
        });
        let marker = std::str::from_utf8(apollo_exec::CLUSTER_JOB_MARKER).unwrap();
        assert!(script.contains(&quote(marker)));
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(quote("a'b"), r"'a'\''b'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn the_script_runs_the_phases_with_the_units_env_and_markers() {
        let mut unit = unit(Command::Shell("echo \"$GREETING\" > out".into()));
        unit.prepare = Some(Command::Argv(vec![
            "mkdir".into(),
            "-p".into(),
            "x y".into(),
        ]));
        unit.cleanup = Some(Command::Shell("rm -f tmp".into()));
        let dir = PathBuf::from("/shared/.apollo/runs/r1/units/align/2");
        let script = wrapper_script(&WrapperSpec {
            run_id: "r1",
            unit: &unit,
            attempt: 2,
            dir: &dir,
        });
        assert!(script.starts_with("#!/bin/sh\n"));
        assert!(script.contains("dir='/shared/.apollo/runs/r1/units/align/2'\n"));
        assert!(script.contains("cd '/tmp' ||"));
        let env = "env 'APOLLO_RUN_ID=r1' 'APOLLO_UNIT=align' 'APOLLO_ATTEMPT=2' 'APOLLO_EXECUTOR=slurm' 'GREETING=it'\\''s me'";
        assert!(
            script.contains(&format!(
                "run prepare {env} 'APOLLO_PHASE=prepare' 'mkdir' '-p' 'x y' || ok=0"
            )),
            "{script}"
        );
        assert!(script.contains(&format!(
            "run execute {env} 'APOLLO_PHASE=execute' /bin/sh -c 'echo \"$GREETING\" > out'"
        )));
        assert!(script.contains(&format!(
            "run cleanup {env} 'APOLLO_PHASE=cleanup' /bin/sh -c 'rm -f tmp'"
        )));
        assert!(!script.contains("run when"));
        let (prepare, execute, cleanup) = (
            script.find("run prepare").unwrap(),
            script.find("run execute").unwrap(),
            script.find("run cleanup").unwrap(),
        );
        assert!(prepare < execute && execute < cleanup);
    }

    #[test]
    fn a_when_command_runs_first_and_nothing_else_runs_when_it_fails() {
        let mut unit = unit(Command::Shell("make".into()));
        unit.when_command = Some(Command::Shell("test -s new.csv".into()));
        let script = wrapper_script(&WrapperSpec {
            run_id: "r1",
            unit: &unit,
            attempt: 1,
            dir: Path::new("/d"),
        });
        let when = script.find("run when env").unwrap();
        assert!(script[when..].starts_with("run when env 'APOLLO_RUN_ID=r1'"));
        assert!(
            script.contains("'APOLLO_PHASE=when' /bin/sh -c 'test -s new.csv' || { c=$?; ok=0;")
        );
        assert!(when < script.find("run execute").unwrap());
    }
}
