//! Apollo-11's crash-injection harness (issue 7): the `torture` binary of this package runs it
//! (`cargo xtask torture` builds and starts that), and the `reliability` test runs a bounded
//! version in-process with [`run`].
//!
//! Each iteration generates a pipeline (mixed durations, parallel branches, flaky, failing and
//! timing-out units with retries, one non-idempotent unit), runs `apollo run`, SIGKILLs it at
//! a random moment, and starts it again, until a run completes (failing units are then made
//! to pass; a non-idempotent unit cut off gets the verdict a careful human would give through
//! `apollo mark`). Then it checks the promises:
//!
//! 1. every attempt a unit executed was recorded as started first (write-ahead): the unit
//!    itself looks for its `unit_started` in the journal the moment it begins;
//! 2. no attempt executed twice, and nothing executed after a unit's success was recorded:
//!    a unit runs again only when apollo died while it was in flight;
//! 3. every unit ends succeeded in the one run (the run completes and is correct; a run that a
//!    kill abandoned before its first record may exist beside it, with nothing started in it);
//! 4. `apollo verify` passes (torn tails allowed: apollo was killed);
//! 5. no unit process is alive (every process carries the iteration's environment tag).
//!
//! State-dir tampering and clock steps (issue 12), drawn from a generator of their own (so a
//! seed's pipelines and kill delays stay those of the kill-only harness), each with its check:
//!
//! 6. **lock symlink**: between invocations `.apollo/lock` becomes a symbolic link to a victim
//!    file: `apollo run` exits 2 and the victim is never written (checked at the end too);
//! 7. **plants**: a FIFO or a link to `/dev/zero` as the next segment or as
//!    `journal/last_segment` of the latest run: `run`, `verify` and `replay` each end within
//!    a deadline with a non-zero exit and a message, `runs` lists the run as corrupt; then the
//!    plant is removed and the run resumes (checks 1–4 see no redone success);
//! 8. **deletion mid-run**: instead of a SIGKILL, the lock file is deleted or the run folder
//!    moved away (and back once apollo exited) while apollo runs: apollo exits 6 (or 0/1 when
//!    the tampering came after its last commit; 2 when the folder went before apollo opened
//!    it; 5 when it came while apollo refused the run it had read for a human's verdict),
//!    starts nothing unrecorded (check 1) and the next run redoes no success (check 2);
//! 9. **clock steps**: every invocation's journal clock (`APOLLO_CLOCK_OFFSET`) is stepped back
//!    by 1–30 hours from the previous one with 35% chance (often across a UTC day), and with
//!    20% chance keeps stepping back by 1–120 minutes at every reading during the run (the
//!    journal rotates at each UTC day it crosses): the incomplete run is still the one resumed
//!    (check 3: no run abandoned with attempts in it), nothing is redone, `verify` passes.
//! 10. **reuse**: half the iterations (drawn apart, so a seed's kill delays stay the same)
//!     generate `reuse: true` units with declared outputs (the non-idempotent one `reuse:
//!     false`) and, once the first run completed and passed checks 1–5, run the same pipeline
//!     again — a new run, killed, tampered with and resumed the same way: it ends succeeded,
//!     every reusable unit is recorded reused in it and **executed not once more**, nothing
//!     executed before its `unit_started` was durable, `verify` passes, no process is left.
//!
//! 11. **Slurm** (`--slurm`, where a cluster answers): about a third of the units run as jobs
//!     of the local cluster (`executor: slurm`), the non-idempotent one too, and kills come up
//!     to 2 s in, while jobs run: a job apollo died with is reattached (by a later attempt, to
//!     the job whose end is unrecorded: `slurm::count_and_check_jobs`), never run again (checks
//!     1–5; a verdict after `scancel`, as a human's), and no job of a done run stays queued.
//!     In half the iterations the first kill is aimed: sent as soon as the journal shows an
//!     idempotent unit's job submitted and not ended, and a resume must reattach to exactly
//!     that job (`slurm::aims_reattached`).
//!
//! Only the kill moment is random; everything else waits for apollo to exit. Each iteration's
//! generator is seeded from (seed, index), so `--seed S --first I --iterations 1` replays
//! iteration I alone.
//!
//! Usage of the binary: `torture --apollo PATH [--iterations N] [--seed S] [--first I]
//! [--workdir DIR] [--durability fsync|batched]` (the mode every generated pipeline asks for
//! with `durability:`; the pipelines are the same either way). Prints iterations, kills, resumes, violations; exits 1 when any invariant
//! was violated (the iteration's folder is kept for inspection), 2 on bad usage.
#![allow(clippy::disallowed_methods)] // A harness that runs the binary under test.

/// An I/O error of the harness itself, with the line it happened on: "could not complete:
/// No such file or directory" alone says nothing about what was missing.
macro_rules! io {
    () => {
        |error: std::io::Error| format!("torture.rs:{}: {error}", line!())
    };
}

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use apollo_core::event::{AttemptStatus, Event, RunStatus, Verdict};
use apollo_store::{JournalReader, ReadOptions};

mod check;
mod runs;
pub mod slurm;
mod summary;
mod tamper;

pub use summary::Summary;

use check::{check, tagged_processes};
use runs::{
    has_record, has_segment, latest_run_dir, latest_run_finished, latest_run_succeeded, lines_of,
};
use tamper::tamper_between;

/// splitmix64: a tiny, seedable, good-enough generator (no dependency for the harness).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// What to run: which apollo, how many iterations, from which seed.
#[derive(Debug)]
pub struct Options {
    /// The `apollo` binary under test (absolute: apollo runs in each project folder).
    pub apollo: PathBuf,
    /// How many iterations.
    pub iterations: u64,
    /// The seed every iteration's generator derives from.
    pub seed: u64,
    /// The index of the first iteration (to replay one iteration of a long run alone).
    pub first: u64,
    /// Where the iterations' project folders go (default: a folder in the temp dir).
    pub workdir: Option<PathBuf>,
    /// The durability mode every generated pipeline asks for (`durability:`), or none: the
    /// default, fsync. `None` is not a pipeline's setting and is refused.
    pub durability: Option<apollo_core::Durability>,
    /// Whether about a third of the units run on the local Slurm cluster (`executor: slurm`).
    pub slurm: bool,
}

/// Parses the binary's arguments (without the program name).
pub fn parse_args(arguments: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut args = Options {
        apollo: PathBuf::new(),
        iterations: 20,
        seed: 1,
        first: 0,
        workdir: None,
        durability: None,
        slurm: false,
    };
    let mut iter = arguments.into_iter();
    while let Some(flag) = iter.next() {
        let mut value = || iter.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--apollo" => args.apollo = PathBuf::from(value()?),
            "--iterations" => {
                args.iterations = value()?
                    .parse()
                    .map_err(|_| "--iterations takes a number")?
            }
            "--seed" => args.seed = value()?.parse().map_err(|_| "--seed takes a number")?,
            "--first" => args.first = value()?.parse().map_err(|_| "--first takes a number")?,
            "--workdir" => args.workdir = Some(PathBuf::from(value()?)),
            "--slurm" => args.slurm = true,
            "--durability" => {
                args.durability = Some(match value()?.as_str() {
                    "fsync" => apollo_core::Durability::Fsync,
                    "batched" => apollo_core::Durability::Batched,
                    other => {
                        return Err(format!("--durability takes fsync or batched, not {other}"));
                    }
                });
            }
            "-h" | "--help" => {
                return Err(
                    "usage: torture --apollo PATH [--iterations N] [--seed S] [--first I] [--workdir DIR] [--durability fsync|batched] [--slurm]"
                        .into(),
                );
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.apollo.as_os_str().is_empty() {
        return Err("--apollo PATH is required".into());
    }
    // apollo runs with the project folder as its cwd: a relative path would not resolve there.
    args.apollo = std::fs::canonicalize(&args.apollo)
        .map_err(|error| format!("--apollo {}: {error}", args.apollo.display()))?;
    Ok(args)
}

/// The unit script: records each execution's start and end with its attempt number.
const UNIT_SCRIPT: &str = r#"#!/bin/sh
# unit NAME MODE MILLIS
name=$1; mode=$2; ms=$3
dir=$(cd "$(dirname "$0")/.." && pwd)
echo "$APOLLO_ATTEMPT" >> "$dir/counts/$name.start"
# Write-ahead, checked at the moment of execution: unit_started must already be in the journal.
# (Regular files only: the harness plants FIFOs and links to /dev/zero as segments.)
if ! for f in "$dir"/.apollo/runs/*/journal/*.log "$dir"/.apollo-moved/*/journal/*.log; do
      if [ -f "$f" ]; then cat "$f"; fi
    done 2>/dev/null \
    | grep -qF "\"kind\":\"unit_started\",\"unit\":\"$name\",\"attempt\":$APOLLO_ATTEMPT,"; then
  # While the harness moves the run folder away and back, the globs above can miss it: such an
  # attempt is only checked against the final journal (it must hold its unit_started).
  if [ -e "$dir/moving" ]; then
    echo "$APOLLO_ATTEMPT" >> "$dir/counts/$name.unchecked"
  else
    echo "$APOLLO_ATTEMPT" >> "$dir/counts/$name.unlogged"
  fi
fi
case "$mode" in
  flaky)   if [ $((APOLLO_ATTEMPT % 2)) -eq 1 ]; then exit 1; fi ;;
  failing) if [ -e "$dir/fail/$name" ]; then exit 1; fi ;;
  slow)    if [ "$APOLLO_ATTEMPT" -eq 1 ]; then ms=5000; fi ;;
esac
sleep "$(awk "BEGIN { print $ms / 1000 }")"
# Its declared output (under `reuse: true`): the same bytes every time.
mkdir -p "$dir/out" && echo "$name" > "$dir/out/$name"
echo "$APOLLO_ATTEMPT" >> "$dir/counts/$name.done"
"#;

/// A generated pipeline: its units' names, and the one that is `idempotent: false`, if any.
type Generated = (Vec<String>, Option<String>);

fn generate(
    rng: &mut Rng,
    dir: &Path,
    durability: Option<apollo_core::Durability>,
    reuse: bool,
    slurm: bool,
) -> std::io::Result<Generated> {
    // Which units run on Slurm: drawn apart, so a seed's pipelines stay those without.
    let mut on_slurm = Rng(rng.0 ^ 0x51A2_B3C4_D000_0001);
    let n_units = 6 + rng.below(7);
    let mut yaml = String::from(
        "name: torture\nmax_parallel: 3\ndefaults:\n  retries: 1\n  retry_delay: 10ms\n  kill_grace: 200ms\n",
    );
    // The same pipeline whatever the mode (the generator draws nothing for it).
    if reuse {
        yaml.push_str("  reuse: true\n");
    }
    if let Some(durability) = durability {
        let _ = writeln!(yaml, "durability: {durability}");
    }
    yaml.push_str("units:\n");
    let mut names = Vec::new();
    let mut non_idempotent = None;
    for unit_idx in 0..n_units {
        let name = format!("u{unit_idx:02}");
        let mut deps = BTreeSet::new();
        if unit_idx > 0 {
            for _ in 0..rng.below(3) {
                deps.insert(format!("u{:02}", rng.below(unit_idx)));
            }
        }
        let mode = match rng.below(10) {
            0 | 1 => "flaky",
            2 => "failing",
            3 => "slow",
            _ => "normal",
        };
        if mode == "failing" {
            std::fs::write(dir.join("fail").join(&name), b"")?;
        }
        let millis = rng.below(80);
        let _ = writeln!(yaml, "  - name: {name}");
        let deps: Vec<String> = deps.into_iter().collect();
        let _ = writeln!(yaml, "    deps: [{}]", deps.join(", "));
        let _ = writeln!(yaml, "    execute: ./bin/unit {name} {mode} {millis}");
        // A job's start takes the cluster's scheduling: a slow unit's timeout is 3 s there.
        let slurm_unit = slurm && on_slurm.chance(35);
        if slurm_unit {
            yaml.push_str("    executor: slurm\n");
        }
        if reuse {
            let _ = writeln!(yaml, "    outputs: [out/{name}]");
        }
        if mode == "slow" {
            let timeout = if slurm_unit { "3s" } else { "300ms" };
            let _ = writeln!(yaml, "    timeout: {timeout}");
        }
        if mode == "failing" {
            let _ = writeln!(yaml, "    retries: 0");
        }
        if non_idempotent.is_none() && mode == "normal" && rng.chance(40) {
            let _ = writeln!(yaml, "    idempotent: false\n    retries: 0");
            if reuse {
                let _ = writeln!(yaml, "    reuse: false");
            }
            non_idempotent = Some(name.clone());
        }
        names.push(name);
    }
    std::fs::write(dir.join("apollo.yaml"), yaml)?;
    Ok((names, non_idempotent))
}

/// The environment variable that tags every process of an iteration (apollo passes its
/// environment on to units, and they to what they fork), to find survivors afterwards.
const TAG_VAR: &str = "APOLLO_TORTURE_ITERATION";

fn apollo(args: &Options, dir: &Path) -> Command {
    let mut command = Command::new(&args.apollo);
    command
        .current_dir(dir)
        .env("CI", "true")
        .env("NO_COLOR", "1")
        .env_remove("APOLLO_STATE_DIR")
        .env_remove("APOLLO_FAULTS")
        .env(TAG_VAR, dir)
        .stdin(Stdio::null());
    command
}

/// How long one apollo invocation may take before the harness calls it hung: a safety net
/// for a loaded machine, far above what a generated pipeline needs.
const HANG_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a process of an iteration may take to exit after its apollo was killed (its guard
/// kills the units' groups asynchronously): a safety net for a loaded machine, not a delay.
const SURVIVOR_GRACE: Duration = Duration::from_secs(30);

/// Wait for `child`, killing it (and reporting a hang) after [`HANG_TIMEOUT`].
fn wait_bounded(child: &mut Child) -> Result<ExitStatus, String> {
    let deadline = Instant::now() + HANG_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().map_err(|error| error.to_string())? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("apollo did not exit within {HANG_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One iteration: run, kill, resume until done; then check. Returns violations.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
fn iteration(
    args: &Options,
    rng: &mut Rng,
    dir: &Path,
    totals: &mut Summary,
) -> Result<Vec<String>, String> {
    for sub in ["bin", "counts", "fail"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(io!())?;
    }
    std::fs::write(dir.join("bin/unit"), UNIT_SCRIPT).map_err(io!())?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("bin/unit"), std::fs::Permissions::from_mode(0o755))
            .map_err(io!())?;
    }
    // Whether the pipeline's units are `reuse: true` and the iteration runs it a second time
    // (check 10): drawn without advancing `rng`, so a seed's kill delays stay the same.
    let reuse = Rng(rng.0 ^ 0x4E05_E5EE_D000_0001).chance(50);
    let (names, not_reused) =
        generate(rng, dir, args.durability, reuse, args.slurm).map_err(io!())?;
    // The state-dir tampering and clock steps draw from their own generator, so the pipeline
    // and the kill delays of a seed stay those of the kill-only harness.
    let mut trng = Rng(rng.next() ^ 0x7A4D_9E11_C10C_5EED);
    // With `--slurm`, half the iterations aim their first kill at a running job (check 11:
    // it must be reattached to), drawn without advancing `rng`.
    let aim_at_job = args.slurm && Rng(rng.0 ^ 0x0A1B_2C3D_4E5F_6071).chance(50);
    let mut aims: Vec<slurm::Aim> = Vec::new();
    let mut violations = Vec::new();
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, VICTIM).map_err(io!())?;
    let mut clock_offset: i64 = 0;
    let mut max_kills = 1 + rng.below(4);
    let mut kills = 0;
    let mut invocation = 0u32;
    let mut stale_lock_refusals = 0u32;
    let mut deadline = Instant::now() + Duration::from_secs(300);
    // The second phase of a reuse iteration, once the first run completed.
    let mut phase: Option<check::ReusePhase> = None;
    let mut phase_invocation = 0u32;
    loop {
        let floor = phase.as_ref().map(|phase| phase.floor.clone());
        loop {
            if Instant::now() > deadline {
                return Err("the run did not complete within 300 s".into());
            }
            invocation += 1;
            phase_invocation += 1;
            // Clock steps: back by hours (often across a UTC day) from the last invocation's, and
            // sometimes stepping back at every reading during the run.
            if invocation > 1 && trng.chance(35) {
                clock_offset -= 3600 * (1 + trng.below(30) as i64);
                totals.clock_steps += 1;
            }
            let clock_step: i64 = if trng.chance(20) {
                totals.stepping_clocks += 1;
                -(60 + trng.below(7200) as i64)
            } else {
                0
            };
            let clock = format!("{clock_offset},{clock_step}");
            // State-dir tampering between invocations (the run is incomplete here).
            if phase_invocation > 1 {
                tamper_between(args, &mut trng, dir, &clock, totals, &mut violations)?;
            }
            // stderr to a file: nothing to drain while the harness sleeps before its kill.
            let stderr_path = dir.join(format!("apollo-{invocation:03}.stderr"));
            let stderr_file = std::fs::File::create(&stderr_path).map_err(io!())?;
            let mut child = apollo(args, dir)
                .env(CLOCK_VAR, &clock)
                .arg("run")
                .stdout(Stdio::null())
                .stderr(stderr_file)
                .spawn()
                .map_err(io!())?;
            if invocation > 1 {
                totals.resumes += 1;
            }
            let mut tampered_mid_run = None;
            let mut moved = None;
            if aim_at_job
                && kills == 0
                && phase.is_none()
                && let Some(aim) = slurm::await_running_job(dir, not_reused.as_deref(), &mut child)?
            {
                let _ = child.kill();
                let _ = child.wait();
                kills += 1;
                totals.kills += 1;
                totals.aimed_kills += 1;
                aims.push(aim);
                continue;
            }
            if kills < max_kills {
                // The attack: a random moment, not a synchronisation (on a cluster, where a job
                // takes a second to start, five times later: the same draw, kills mid-job).
                let delay = rng.below(400) * if args.slurm { 5 } else { 1 };
                std::thread::sleep(Duration::from_millis(delay));
                let action = trng.below(100);
                if child.try_wait().map_err(io!())?.is_some() {
                    // Already done: nothing to attack.
                } else if action < 12 {
                    // Delete the lock file under the running apollo.
                    if std::fs::remove_file(dir.join(".apollo/lock")).is_ok() {
                        tampered_mid_run = Some("its lock file was deleted");
                        totals.lock_deletions += 1;
                        kills += 1;
                    }
                } else if action < 24
                    && let Some(run) = runs::latest_run_after(dir, floor.as_deref())?
                {
                    // Move the whole run folder away (as `git clean` or a careless `mv` would);
                    // it comes back once apollo exited, so the journal's promises stay checkable.
                    let aside = dir.join(".apollo-moved");
                    std::fs::create_dir_all(&aside).map_err(io!())?;
                    std::fs::write(dir.join("moving"), b"").map_err(io!())?;
                    let to = aside.join(run.file_name().unwrap_or_default());
                    if std::fs::rename(&run, &to).is_ok() {
                        moved = Some((run, to));
                        tampered_mid_run = Some("its run folder was moved away");
                        totals.run_folder_moves += 1;
                        kills += 1;
                    } else {
                        std::fs::remove_file(dir.join("moving"))
                            .map_err(|error| format!("removing the `moving` marker: {error}"))?;
                    }
                } else {
                    let _ = child.kill();
                    let _ = child.wait();
                    kills += 1;
                    totals.kills += 1;
                    // Killed after it had recorded the run's success (while it fsynced or printed
                    // its summary): the run is complete, and `apollo run` would rightly start a
                    // new one. Look, as an operator would (`apollo runs`), before running again.
                    if latest_run_succeeded(dir, floor.as_deref())? {
                        totals.killed_after_success += 1;
                        break;
                    }
                    continue;
                }
            }
            let status = wait_bounded(&mut child)?;
            let moved_back = moved.is_some();
            if let Some((run, to)) = moved.take() {
                if std::fs::symlink_metadata(&run).is_ok() {
                    // An executor creates an attempt's log folder and its parent only, never the
                    // run folder above them: a run folder that came back while the real one was
                    // away is apollo writing where it has no business. Keep it aside for
                    // inspection and put the real run folder back.
                    totals.recreated_run_folders += 1;
                    violations.push(format!(
                    "{} came back while the run folder was moved away (invocation {invocation})",
                    run.display()
                ));
                    let stray = to.with_extension(format!("recreated-{invocation}"));
                    std::fs::rename(&run, &stray).map_err(|error| {
                        format!("moving the recreated {}: {error}", run.display())
                    })?;
                }
                std::fs::rename(&to, &run)
                    .map_err(|error| format!("cannot move {} back: {error}", to.display()))?;
                std::fs::remove_file(dir.join("moving"))
                    .map_err(|error| format!("removing the `moving` marker: {error}"))?;
            }
            let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            if let Some(what) = tampered_mid_run {
                match status.code() {
                    // Stopped, as it must be: resume.
                    Some(6) => continue,
                    // The run folder went away before apollo had opened it (it was still choosing the
                    // run, or had not looked yet): refused, exit 2 or 3 (the latest run cannot be
                    // read, or is missing), nothing started (the final check sees any fresh run).
                    Some(2 | 3)
                        if moved_back
                            && (stderr.contains("not found") || stderr.contains("is missing")) =>
                    {
                        totals.tampered_before_open += 1;
                        continue;
                    }
                    // The tampering came after the run's last commit: apollo rightly finished.
                    Some(0 | 1) if latest_run_finished(dir)? => totals.tampered_after_finish += 1,
                    // The tampering came after apollo had read the run it resumes, while it refused
                    // it for a human's verdict (a non-idempotent unit cut off mid-attempt): that
                    // refusal starts nothing and records no resume, so it stands; the verdict is
                    // given below as for any exit 5.
                    Some(5) if parse_verdict_request(&stderr).is_some() => {
                        totals.tampered_during_refusal += 1;
                    }
                    other => {
                        violations.push(format!(
                            "apollo run exited {other:?} after {what} mid-run, not 6:\n{stderr}"
                        ));
                        if other != Some(0) && other != Some(1) {
                            continue;
                        }
                    }
                }
            }
            match status.code() {
                Some(0) => break,
                // A unit failed for good: make the failing units pass, and resume.
                Some(1) => {
                    for name in &names {
                        let _ = std::fs::remove_file(dir.join("fail").join(name));
                    }
                }
                // A non-idempotent unit was in flight: decide as a careful human would, from
                // whether its execution finished.
                Some(5) => {
                    let (unit, attempt) = parse_verdict_request(&stderr)
                        .ok_or_else(|| format!("exit 5 without a unit named:\n{stderr}"))?;
                    // As a careful human would: a cluster job of it that may still run is
                    // ended first (`scancel`), then its files tell whether it finished.
                    if args.slurm {
                        // A job a kill was aimed at and no resume has reattached to yet is
                        // ended here by the "human": nothing is left to reattach to.
                        aims.retain(slurm::reattached);
                        slurm::end_jobs(dir)?;
                        // A job of an earlier attempt was still queued (an `sbatch` in flight
                        // when apollo died submitted it after): ended, the run carries on.
                        if stderr.contains("will not start a second job") {
                            continue;
                        }
                    }
                    // Attempt numbers start again in a new run: only this phase's ends count.
                    let done_before = (phase.as_ref())
                        .and_then(|phase| phase.before.get(&unit))
                        .map_or(0, |before| before.2);
                    let finished = lines_of(&dir.join("counts").join(format!("{unit}.done")))
                        .iter()
                        .skip(done_before)
                        .any(|done| *done == attempt);
                    let verdict = if finished { "--succeeded" } else { "--failed" };
                    let output = apollo(args, dir)
                        .args(["mark", "latest", &unit, verdict])
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped())
                        .output()
                        .map_err(io!())?;
                    if !output.status.success() {
                        return Err(format!(
                            "apollo mark latest {unit} {verdict} failed: {}",
                            String::from_utf8_lossy(&output.stderr)
                        ));
                    }
                    totals.verdicts += 1;
                }
                // Refused: the state directory is locked. Only a killed apollo's lock can be in
                // the way (the harness runs one apollo at a time): fine only if that apollo is dead.
                Some(4) if kills > 0 && stale_lock_refusals < MAX_STALE_LOCK_REFUSALS => {
                    if let Some(pid) = parse_lock_holder(&stderr)
                        && process_alive(pid)
                    {
                        return Err(format!(
                            "the state directory is locked by pid {pid}, which is alive after the \
                         harness killed and reaped its apollo:\n{stderr}"
                        ));
                    }
                    // Who held it: evidence for finding 3 of docs/reliability-log.md.
                    let holders: Vec<String> = tagged_processes(dir)
                        .into_iter()
                        .map(|(pid, cmdline)| {
                            let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
                                .map(|exe| exe.display().to_string())
                                .unwrap_or_else(|_| "?".into());
                            format!("pid {pid} exe {exe} cmdline `{}`", cmdline.trim())
                        })
                        .collect();
                    eprintln!(
                        "note: apollo refused with exit 4 after a kill (stale lock); tagged \
                     processes alive then: {holders:?}"
                    );
                    stale_lock_refusals += 1;
                    totals.stale_lock_refusals += 1;
                    // Not a resume: apollo refused before touching the run.
                    totals.resumes -= 1;
                }
                other => {
                    return Err(format!("apollo run exited {other:?}:\n{stderr}"));
                }
            }
        }
        if args.slurm {
            violations.extend(slurm::none_left(dir)?);
        }
        if let Some(phase) = &phase {
            violations.extend(check::check_reuse(args, dir, &names, phase, totals)?);
            break;
        }
        violations.extend(check(args, dir, &names, totals)?);
        if !reuse || !violations.is_empty() {
            break;
        }
        // Check 10: the same pipeline again, nothing changed: a new run, attacked the same way.
        let floor = latest_run_dir(dir)?.ok_or("no run after the first phase")?;
        let before = (names.iter())
            .map(|name| {
                let counts = dir.join("counts");
                let n = |kind: &str| lines_of(&counts.join(format!("{name}.{kind}"))).len();
                (name.clone(), (n("start"), n("unlogged"), n("done")))
            })
            .collect();
        phase = Some(check::ReusePhase {
            floor,
            before,
            not_reused: not_reused.clone(),
        });
        totals.reuse_phases += 1;
        (kills, max_kills, phase_invocation) = (0, 1 + rng.below(4), 0);
        deadline = Instant::now() + Duration::from_secs(300);
    }
    violations.extend(slurm::count_and_check_jobs(dir, &mut totals.slurm_jobs));
    violations.extend(slurm::aims_reattached(&aims));
    if std::fs::read(&victim).map_err(io!())? != VICTIM.as_bytes() {
        violations.push(format!(
            "{} (a lock file's link target) was written",
            victim.display()
        ));
    }
    Ok(violations)
}

/// What the lock file's victim holds: it must never change.
const VICTIM: &str = "a file that is not apollo's\n";

/// The testing hook that offsets apollo's journal clock (`SECONDS,STEP`).
const CLOCK_VAR: &str = "APOLLO_CLOCK_OFFSET";

/// How many times one iteration retries `apollo run` refused because a killed apollo's lock
/// was still held (each refusal is a fresh process, so this bounds the wait to well under a
/// second of real time per kill on any machine where a process exits at all).
const MAX_STALE_LOCK_REFUSALS: u32 = 1000;

/// The pid in `locked by another apollo (pid N ...`.
fn parse_lock_holder(stderr: &str) -> Option<u32> {
    let start = stderr.find("(pid ")? + "(pid ".len();
    let digits: String = stderr[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Whether `pid` is a live, non-zombie process.
fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

/// Find `apollo mark RUN UNIT` in the message and the attempt number.
fn parse_verdict_request(stderr: &str) -> Option<(String, u32)> {
    let unit_start = stderr.find("unit `")? + "unit `".len();
    let unit_end = unit_start + stderr[unit_start..].find('`')?;
    let unit = stderr[unit_start..unit_end].to_owned();
    let attempt_start = stderr.find("(attempt ")? + "(attempt ".len();
    let attempt_end = attempt_start + stderr[attempt_start..].find(')')?;
    Some((unit, stderr[attempt_start..attempt_end].parse().ok()?))
}

/// Runs the iterations of `args`, printing progress and violations on stderr as they happen.
/// `Err` when the harness itself cannot work (its folders cannot be created).
pub fn run(args: &Options) -> Result<Summary, String> {
    let base = match &args.workdir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("apollo-torture-{}", std::process::id())),
    };
    let mut totals = Summary::default();
    let started = Instant::now();
    for iteration_idx in args.first..args.first.saturating_add(args.iterations) {
        // One generator per iteration, from (seed, index): iteration I of seed S generates the
        // same pipeline and kill delays whatever happened before it, so `--first I
        // --iterations 1` replays it alone.
        let mut rng = Rng(args.seed ^ Rng(iteration_idx).next());
        let dir = base.join(format!("iteration-{iteration_idx:04}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
        let done = iteration_idx - args.first;
        if done > 0 && done.is_multiple_of(50) {
            eprintln!(
                "torture: {done} of {} iterations, {} kills, {} resumes, {} violations so far \
                 ({:.0}s)",
                args.iterations,
                totals.kills,
                totals.resumes,
                totals.violations.len(),
                started.elapsed().as_secs_f64()
            );
        }
        match iteration(args, &mut rng, &dir, &mut totals) {
            Ok(violations) => {
                for violation in &violations {
                    eprintln!(
                        "violation in iteration {iteration_idx} ({}; replay it with --seed {} \
                         --first {iteration_idx} --iterations 1): {violation}",
                        dir.display(),
                        args.seed
                    );
                }
                let clean = violations.is_empty();
                if !clean {
                    totals.failed_iterations += 1;
                }
                totals.violations.extend(violations);
                if clean {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
            Err(error) => {
                eprintln!(
                    "iteration {iteration_idx} ({}) could not complete: {error}",
                    dir.display()
                );
                totals.violations.push(error);
                totals.failed_iterations += 1;
            }
        }
    }
    let _ = std::fs::remove_dir(&base);
    totals.iterations = args.iterations;
    totals.seed = args.seed;
    totals.elapsed = started.elapsed();
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_unit_and_attempt_from_apollos_verdict_request() {
        let stderr = "error: unit `u03` (attempt 2) of run 20261130T044015Z-1966 was running when \
                      apollo stopped, and it is `idempotent: false`: …\n  = help: …";
        assert_eq!(parse_verdict_request(stderr), Some(("u03".to_owned(), 2)));
        assert_eq!(parse_verdict_request("error: something else"), None);
    }

    #[test]
    fn reads_the_lock_holders_pid() {
        let stderr = "error: state directory is locked by another apollo (pid 32431 on vm, lock \
                      file ./.apollo/lock)";
        assert_eq!(parse_lock_holder(stderr), Some(32431));
        assert_eq!(parse_lock_holder("error: locked"), None);
    }

    #[test]
    fn the_generator_is_deterministic_and_spreads() {
        let first: Vec<u64> = (0..5).map(|_| Rng(42).below(1000)).collect();
        assert!(first.iter().all(|&value| value == first[0]));
        let mut rng = Rng(42);
        let values: BTreeSet<u64> = (0..100).map(|_| rng.below(1000)).collect();
        assert!(values.len() > 80, "{} distinct values of 100", values.len());
    }

    #[test]
    fn a_generated_pipeline_is_valid() {
        let dir = std::env::temp_dir().join(format!("torture-unit-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("fail")).expect("fail dir");
        let (names, _) = generate(&mut Rng(3), &dir, None, true, false).expect("generate");
        let loaded = apollo_core::config::load(&dir.join("apollo.yaml"));
        let _ = std::fs::remove_dir_all(&dir);
        let loaded = loaded.expect("the generated config loads");
        let loaded_names: Vec<&str> = loaded
            .pipeline
            .units
            .iter()
            .map(|unit| unit.name.as_str())
            .collect();
        assert_eq!(loaded_names, names);
    }
}
