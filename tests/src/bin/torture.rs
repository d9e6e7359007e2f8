//! `torture`: Apollo-11's crash-injection harness (issue 7; `cargo xtask torture` runs it).
//!
//! Each iteration generates a pipeline (mixed durations, parallel branches, flaky, failing and
//! timing-out units with retries, one non-idempotent unit), runs `apollo run`, SIGKILLs it at
//! a random moment, and starts it again, until a run completes. Then it checks the promises:
//!
//! 1. every attempt a unit executed was durably recorded as started first (write-ahead);
//! 2. no attempt executed twice, and nothing executed after a unit's success was recorded:
//!    a unit runs again only when apollo died while it was in flight;
//! 3. every unit ends succeeded in the one run (the run completes and is correct);
//! 4. `apollo verify` passes (torn tails allowed: apollo was killed);
//! 5. no unit process is alive.
//!
//! Usage: `torture --apollo PATH [--iterations N] [--seed S] [--workdir DIR]`. Prints
//! iterations, kills, resumes, violations; exits 1 when any invariant was violated.
#![allow(clippy::disallowed_methods)] // A harness that runs the binary under test.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use apollo_core::event::{AttemptStatus, Event, Verdict};
use apollo_store::{JournalReader, ReadOptions};

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

#[derive(Debug)]
struct Args {
    apollo: PathBuf,
    iterations: u64,
    seed: u64,
    workdir: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        apollo: PathBuf::new(),
        iterations: 20,
        seed: 1,
        workdir: None,
    };
    let mut iter = std::env::args().skip(1);
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
            "--workdir" => args.workdir = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                return Err(
                    "usage: torture --apollo PATH [--iterations N] [--seed S] [--workdir DIR]"
                        .into(),
                );
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.apollo.as_os_str().is_empty() {
        return Err("--apollo PATH is required".into());
    }
    Ok(args)
}

#[derive(Debug, Default)]
struct Totals {
    kills: u64,
    resumes: u64,
    verdicts: u64,
    violations: Vec<String>,
}

/// The unit script: records each execution's start and end with its attempt number.
const UNIT_SCRIPT: &str = r#"#!/bin/sh
# unit NAME MODE MILLIS
name=$1; mode=$2; ms=$3
dir=$(cd "$(dirname "$0")/.." && pwd)
echo "$APOLLO_ATTEMPT" >> "$dir/counts/$name.start"
case "$mode" in
  flaky)   if [ $((APOLLO_ATTEMPT % 2)) -eq 1 ]; then exit 1; fi ;;
  failing) if [ -e "$dir/fail/$name" ]; then exit 1; fi ;;
  slow)    if [ "$APOLLO_ATTEMPT" -eq 1 ]; then ms=5000; fi ;;
esac
sleep "$(awk "BEGIN { print $ms / 1000 }")"
echo "$APOLLO_ATTEMPT" >> "$dir/counts/$name.done"
"#;

fn generate(rng: &mut Rng, dir: &Path) -> std::io::Result<Vec<String>> {
    let n_units = 6 + rng.below(7);
    let mut yaml = String::from(
        "name: torture\nmax_parallel: 3\ndefaults:\n  retries: 1\n  retry_delay: 10ms\n  kill_grace: 200ms\nunits:\n",
    );
    let mut names = Vec::new();
    let mut non_idempotent_placed = false;
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
        if mode == "slow" {
            let _ = writeln!(yaml, "    timeout: 300ms");
        }
        if mode == "failing" {
            let _ = writeln!(yaml, "    retries: 0");
        }
        if !non_idempotent_placed && mode == "normal" && rng.chance(40) {
            let _ = writeln!(yaml, "    idempotent: false\n    retries: 0");
            non_idempotent_placed = true;
        }
        names.push(name);
    }
    std::fs::write(dir.join("apollo.yaml"), yaml)?;
    Ok(names)
}

fn lines_of(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .map(|text| {
            text.lines()
                .filter_map(|line| line.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn apollo(args: &Args, dir: &Path) -> Command {
    let mut command = Command::new(&args.apollo);
    command
        .current_dir(dir)
        .env("CI", "true")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    command
}

/// One iteration: run, kill, resume until done; then check. Returns violations.
fn iteration(
    args: &Args,
    rng: &mut Rng,
    dir: &Path,
    totals: &mut Totals,
) -> Result<Vec<String>, String> {
    let io = |error: std::io::Error| error.to_string();
    for sub in ["bin", "counts", "fail"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(io)?;
    }
    std::fs::write(dir.join("bin/unit"), UNIT_SCRIPT).map_err(io)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("bin/unit"), std::fs::Permissions::from_mode(0o755))
            .map_err(io)?;
    }
    let names = generate(rng, dir).map_err(io)?;
    let max_kills = 1 + rng.below(4);
    let mut kills = 0;
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if Instant::now() > deadline {
            return Err("the run did not complete within 300 s".into());
        }
        let mut child = apollo(args, dir)
            .arg("run")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io)?;
        if kills > 0 {
            totals.resumes += 1;
        }
        if kills < max_kills {
            // The attack: a random moment, not a synchronisation.
            std::thread::sleep(Duration::from_millis(rng.below(400)));
            if child.try_wait().map_err(io)?.is_none() {
                let _ = child.kill();
                let _ = child.wait();
                kills += 1;
                totals.kills += 1;
                continue;
            }
        }
        let output = child.wait_with_output().map_err(io)?;
        match output.status.code() {
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
                let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
                let (unit, attempt) = parse_verdict_request(&stderr)
                    .ok_or_else(|| format!("exit 5 without a unit named:\n{stderr}"))?;
                let finished =
                    lines_of(&dir.join("counts").join(format!("{unit}.done"))).contains(&attempt);
                let verdict = if finished { "--succeeded" } else { "--failed" };
                let status = apollo(args, dir)
                    .args(["mark", "latest", &unit, verdict])
                    .stdout(Stdio::null())
                    .status()
                    .map_err(io)?;
                if !status.success() {
                    return Err(format!("apollo mark latest {unit} {verdict} failed"));
                }
                totals.verdicts += 1;
            }
            other => {
                return Err(format!(
                    "apollo run exited {other:?}:\n{}",
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
        }
    }
    check(args, dir, &names)
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

fn check(args: &Args, dir: &Path, names: &[String]) -> Result<Vec<String>, String> {
    let mut violations = Vec::new();
    let runs_dir = dir.join(".apollo/runs");
    let runs: Vec<PathBuf> = std::fs::read_dir(&runs_dir)
        .map_err(|error| format!("{}: {error}", runs_dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .collect();
    if runs.len() != 1 {
        violations.push(format!(
            "expected the one run to be resumed throughout, found {} runs",
            runs.len()
        ));
    }
    let Some(run_dir) = runs.first() else {
        return Ok(violations);
    };

    let mut started: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut success: BTreeMap<String, u32> = BTreeMap::new();
    let reader =
        JournalReader::open(run_dir, ReadOptions::default()).map_err(|error| error.to_string())?;
    for record in reader {
        let record = record.map_err(|error| error.to_string())?;
        match record.event {
            Event::UnitStarted(event) => {
                started.entry(event.unit).or_default().insert(event.attempt);
            }
            Event::UnitFinished(event)
                if matches!(
                    event.status,
                    AttemptStatus::Succeeded | AttemptStatus::Skipped
                ) =>
            {
                success.insert(event.unit, event.attempt);
            }
            Event::UnitMarked(event) if event.verdict == Verdict::Succeeded => {
                success.insert(event.unit, event.attempt);
            }
            _ => {}
        }
    }
    for name in names {
        let executed = lines_of(&dir.join("counts").join(format!("{name}.start")));
        let recorded = started.get(name).cloned().unwrap_or_default();
        let mut seen = BTreeSet::new();
        for attempt in &executed {
            if !recorded.contains(attempt) {
                violations.push(format!(
                    "{name}: attempt {attempt} executed without a durable unit_started"
                ));
            }
            if !seen.insert(*attempt) {
                violations.push(format!("{name}: attempt {attempt} executed twice"));
            }
        }
        match success.get(name) {
            None => violations.push(format!(
                "{name}: no success recorded although the run completed"
            )),
            Some(&success_attempt) => {
                if let Some(later) = executed.iter().find(|&&attempt| attempt > success_attempt) {
                    violations.push(format!(
                        "{name}: attempt {later} executed after attempt {success_attempt}'s success was recorded"
                    ));
                }
            }
        }
    }
    let verify = apollo(args, dir)
        .arg("verify")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|error| error.to_string())?;
    if !verify.status.success() {
        violations.push(format!(
            "apollo verify failed: {}",
            String::from_utf8_lossy(&verify.stderr)
        ));
    }
    let survivors = processes_mentioning(dir);
    if !survivors.is_empty() {
        violations.push(format!("unit processes still alive: {survivors:?}"));
    }
    Ok(violations)
}

/// Pids of processes whose command line mentions `dir` (units run `DIR/bin/unit`).
fn processes_mentioning(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|cmdline| String::from_utf8_lossy(&cmdline).contains(&needle))
                .unwrap_or(false)
        })
        .collect()
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("torture: {message}");
            return ExitCode::from(2);
        }
    };
    let base = match &args.workdir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("apollo-torture-{}", std::process::id())),
    };
    let mut rng = Rng(args.seed);
    let mut totals = Totals::default();
    let started = Instant::now();
    for iteration_idx in 0..args.iterations {
        let dir = base.join(format!("iteration-{iteration_idx:04}"));
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(error) = std::fs::create_dir_all(&dir) {
            eprintln!("torture: cannot create {}: {error}", dir.display());
            return ExitCode::from(2);
        }
        match iteration(&args, &mut rng, &dir, &mut totals) {
            Ok(violations) => {
                for violation in &violations {
                    eprintln!(
                        "violation in iteration {iteration_idx} ({}): {violation}",
                        dir.display()
                    );
                }
                let clean = violations.is_empty();
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
            }
        }
    }
    let _ = std::fs::remove_dir(&base);
    println!(
        "iterations {}, kills {}, resumes {}, human verdicts {}, violations {} (seed {}, {:.1}s)",
        args.iterations,
        totals.kills,
        totals.resumes,
        totals.verdicts,
        totals.violations.len(),
        args.seed,
        started.elapsed().as_secs_f64()
    );
    if totals.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
