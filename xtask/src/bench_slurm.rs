//! `cargo xtask bench-slurm [--n N] [--rounds R]`: fan-out on the Slurm executor at scale
//! (issue 39 goal 4), on the cluster of this machine (`sudo bash ci/slurm-up.sh`).
//!
//! A pipeline of one `foreach` of N instances (1,000 by default) of `execute: "true"` on
//! Slurm, `max_jobs: N`, is run with `apollo run --explain` (release build, a new project each
//! time), alternating in each round between
//!
//! * **arrays** — the default: the instances ready together go as job arrays;
//! * **one job each** — `APOLLO_SLURM_ARRAYS=off`: one `sbatch` per instance.
//!
//! For each it prints the run's wall time, the submission time (from the first instance's
//! `unit_started` to the last one's `unit_submitted`, by the journal's timestamps) and the
//! Slurm client calls apollo counted (`sbatch`, `squeue`, `scancel`). Every run must succeed
//! with N instances succeeded; the cluster's `MaxArraySize` is printed with the figures.
#![allow(clippy::disallowed_methods)] // A benchmark driver runs the programs it measures.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Figures {
    wall: Duration,
    submission: Duration,
    sbatch: u64,
    squeue: u64,
    scancel: u64,
}

/// `--n N --rounds R`, each at least 1, else `defaults`.
pub(crate) fn parse_n_rounds(
    args: &[&str],
    defaults: (usize, usize),
) -> Result<(usize, usize), String> {
    let (mut n, mut rounds) = defaults;
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let value = iter.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match *flag {
            "--n" => n = value.parse().map_err(|_| "--n takes a number")?,
            "--rounds" => rounds = value.parse().map_err(|_| "--rounds takes a number")?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if n == 0 || rounds == 0 {
        return Err("--n and --rounds must be at least 1".into());
    }
    Ok((n, rounds))
}

/// Runs the benchmark; see the module docs.
pub(crate) fn run(root: &Path, args: &[&str]) -> Result<(), String> {
    let (n, rounds) = parse_n_rounds(args, (1000, 1))?;
    let config = Command::new("scontrol")
        .args(["show", "config"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .ok_or("no Slurm cluster answers `scontrol show config`: start one with `sudo bash ci/slurm-up.sh`")?;
    let config = String::from_utf8_lossy(&config.stdout).into_owned();
    let max_array_size = config
        .lines()
        .find(|line| line.trim_start().starts_with("MaxArraySize"))
        .and_then(|line| line.split('=').nth(1))
        .map_or("unknown", str::trim)
        .to_owned();
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(root)
        .args(["build", "--release", "--quiet", "-p", "apollo-cli"])
        .status()
        .map_err(|error| format!("building apollo: {error}"))?;
    if !status.success() {
        return Err(format!("building apollo failed: {status}"));
    }
    let apollo = root.join("target/release/apollo");
    let work = std::env::temp_dir().join(format!("apollo-bench-slurm-{}", std::process::id()));
    let mut arrays = Vec::new();
    let mut singles = Vec::new();
    for round in 0..rounds {
        for (arrays_on, into) in [(true, &mut arrays), (false, &mut singles)] {
            let project = work.join(format!(
                "{round}-{}",
                if arrays_on { "arrays" } else { "jobs" }
            ));
            into.push(one_run(&apollo, &project, n, arrays_on)?);
            let _ = std::fs::remove_dir_all(&project);
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    println!(
        "{n}-instance foreach of `true` on Slurm (MaxArraySize {max_array_size}, max_jobs {n}), \
         {rounds} round(s) alternating, median of each figure"
    );
    println!(
        "{:<16} {:>10} {:>12} {:>7} {:>7} {:>8}",
        "", "wall", "submission", "sbatch", "squeue", "scancel"
    );
    for (label, figures) in [("job arrays", &arrays), ("one job each", &singles)] {
        let wall = median(figures.iter().map(|f| f.wall).collect());
        let submission = median(figures.iter().map(|f| f.submission).collect());
        let calls = |pick: fn(&Figures) -> u64| median(figures.iter().map(pick).collect());
        println!(
            "{label:<16} {:>9.2}s {:>11.2}s {:>7} {:>7} {:>8}",
            wall.as_secs_f64(),
            submission.as_secs_f64(),
            calls(|f| f.sbatch),
            calls(|f| f.squeue),
            calls(|f| f.scancel),
        );
    }
    Ok(())
}

fn median<T: Ord + Copy + Default>(mut samples: Vec<T>) -> T {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// One `apollo run --explain` of the fan-out in a new project at `project`.
fn one_run(apollo: &Path, project: &Path, n: usize, arrays: bool) -> Result<Figures, String> {
    std::fs::create_dir_all(project).map_err(|error| error.to_string())?;
    let config = format!(
        "name: bench-slurm\nmax_jobs: {n}\ndefaults: {{executor: slurm, timeout: 10m}}\nunits:\n  - name: fan\n    \
         foreach: [{}]\n    execute: \"true\"\n",
        (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
    );
    std::fs::write(project.join("pipeline.yaml"), config).map_err(|error| error.to_string())?;
    let started = Instant::now();
    let output = Command::new(apollo)
        .current_dir(project)
        .args(["run", "--explain"])
        .env("APOLLO_SLURM_ARRAYS", if arrays { "on" } else { "off" })
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("running apollo: {error}"))?;
    let wall = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || !stdout.contains(&format!(" {n} succeeded")) {
        return Err(format!(
            "the run in {} did not succeed: {}\n{stdout}{stderr}",
            project.display(),
            output.status
        ));
    }
    // `slurm: 5 Slurm client calls: 2 sbatch, 3 squeue, 0 scancel`
    let line = stderr
        .lines()
        .find(|line| line.starts_with("slurm: "))
        .ok_or("no `slurm:` line in apollo's output")?;
    let counts = line.rsplit(": ").next().unwrap_or("");
    let count = |what: &str| -> u64 {
        counts
            .split(", ")
            .filter_map(|part| part.trim().split_once(' '))
            .find(|(_, name)| *name == what)
            .and_then(|(number, _)| number.parse().ok())
            .unwrap_or(0)
    };
    Ok(Figures {
        wall,
        submission: submission_time(project)?,
        sbatch: count("sbatch"),
        squeue: count("squeue"),
        scancel: count("scancel"),
    })
}

/// From the first `unit_started` to the last `unit_submitted` in the project's one run.
fn submission_time(project: &Path) -> Result<Duration, String> {
    let runs = project.join(".apollo/runs");
    let run = std::fs::read_dir(&runs)
        .map_err(|error| format!("{}: {error}", runs.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.is_dir())
        .ok_or("no run in the project")?;
    let mut segments: Vec<_> = std::fs::read_dir(run.join("journal"))
        .map_err(|error| error.to_string())?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    segments.sort();
    let (mut first_start, mut last_submit) = (None::<f64>, None::<f64>);
    for segment in segments {
        let text = std::fs::read_to_string(&segment).map_err(|error| error.to_string())?;
        for line in text.lines() {
            let Some(at) = timestamp(line) else { continue };
            if line.contains(r#""kind":"unit_started""#) {
                first_start = Some(first_start.map_or(at, |first| first.min(at)));
            } else if line.contains(r#""kind":"unit_submitted""#) {
                last_submit = Some(last_submit.map_or(at, |last| last.max(at)));
            }
        }
    }
    match (first_start, last_submit) {
        (Some(first), Some(last)) => Ok(Duration::from_secs_f64((last - first).max(0.0))),
        _ => Err("the journal has no unit_started or unit_submitted".into()),
    }
}

/// A record's `"ts":"2026-12-03T22:07:47.864478Z"` as seconds since the month began (a run
/// of this benchmark does not span a month's end).
fn timestamp(line: &str) -> Option<f64> {
    let ts = line.split(r#""ts":""#).nth(1)?.get(..26)?;
    let day: f64 = ts.get(8..10)?.parse().ok()?;
    let hours: f64 = ts.get(11..13)?.parse().ok()?;
    let minutes: f64 = ts.get(14..16)?.parse().ok()?;
    let seconds: f64 = ts.get(17..26)?.parse().ok()?;
    Some(((day * 24.0 + hours) * 60.0 + minutes) * 60.0 + seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_timestamp_is_read_to_the_microsecond() {
        let line = r#"{"seq":2,"ts":"2026-12-03T22:07:47.864478Z","kind":"unit_started"}"#;
        let at = timestamp(line).unwrap();
        assert!((at - (((3.0 * 24.0 + 22.0) * 60.0 + 7.0) * 60.0 + 47.864478)).abs() < 1e-6);
    }
}
