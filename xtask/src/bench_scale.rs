//! `cargo xtask bench-scale [--n N] [--rounds R]`: a pipeline of N units (100,000 by default)
//! checked and run, for issue 39's goal 3 (`apollo check` ≤ 0.5 s, the run ≤ 150 MiB RSS).
//!
//! The workload is `../shared/bench/gen.py --shape layered` (N no-op units, two dependencies
//! each). Each round, in a new project (release build): `apollo check` (wall time), then
//! `apollo run -j 2` twice — the first parses the config, the second loads it from the parse
//! cache — each one's peak resident set (`ru_maxrss` of the process, read by `python3`'s
//! `resource` module, which the workload generator already needs). It prints every round's
//! figures, the median check (after one untimed check: the first after a build reads the
//! binary from disk), the largest peak, and the goal's verdict.
#![allow(clippy::disallowed_methods)] // A benchmark driver runs the programs it measures.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::bench_sched::run_checked;

/// Goal 3's budgets.
const CHECK_BUDGET: Duration = Duration::from_millis(500);
const RSS_BUDGET_KIB: u64 = 150 * 1024;

/// Runs a command given after it and prints the peak RSS (KiB) of that process and what it
/// waited for, then the command's exit code.
const PEAK_RSS: &str = "import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)";

fn parse(args: &[&str]) -> Result<(usize, usize), String> {
    crate::bench_slurm::parse_n_rounds(args, (100_000, 3))
}

/// Runs the benchmark; see the module docs.
pub(crate) fn run(root: &Path, args: &[&str]) -> Result<(), String> {
    let (n, rounds) = parse(args)?;
    let generator = root.join("../shared/bench/gen.py");
    if !generator.exists() {
        return Err(format!("{} is missing", generator.display()));
    }
    run_checked(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(root)
            .args(["build", "--release", "--quiet", "-p", "apollo-cli"]),
        "building apollo",
    )?;
    let apollo = root.join("target/release/apollo");
    let work = std::env::temp_dir().join(format!("apollo-bench-scale-{}", std::process::id()));
    run_checked(
        Command::new("python3")
            .arg(&generator)
            .args(["--shape", "layered", "--n", &n.to_string(), "--out"])
            .arg(&work),
        "generating the workload",
    )?;
    let config = work.join("apollo/units.yaml");
    println!("{n} units (layered), `apollo run -j 2`, {rounds} round(s)");
    let (mut checks, mut peaks) = (Vec::new(), Vec::new());
    // Untimed: the first check after a build reads the binary and the config from disk.
    run_checked(
        Command::new(&apollo).arg("check").arg(&config),
        "apollo check",
    )?;
    for round in 0..rounds {
        let project = work.join(format!("round-{round}"));
        std::fs::create_dir_all(&project).map_err(|error| error.to_string())?;
        std::fs::copy(&config, project.join("units.yaml")).map_err(|error| error.to_string())?;
        let check = run_checked(
            Command::new(&apollo)
                .current_dir(&project)
                .args(["check", "units.yaml"]),
            "apollo check",
        )?;
        let parsed = peak_rss(&apollo, &project)?;
        let cached = peak_rss(&apollo, &project)?;
        println!(
            "round {}: check {:.3} s; run peak RSS {parsed} KiB parsed, {cached} KiB from the parse cache",
            round + 1,
            check.as_secs_f64()
        );
        checks.push(check);
        peaks.extend([parsed, cached]);
    }
    let _ = std::fs::remove_dir_all(&work);
    checks.sort();
    let check = checks[checks.len() / 2];
    let peak = peaks.iter().copied().max().unwrap_or(0);
    println!(
        "median check {:.3} s (goal ≤ {:.1} s): {}; largest run peak {peak} KiB = {:.1} MiB (goal ≤ 150 MiB): {}",
        check.as_secs_f64(),
        CHECK_BUDGET.as_secs_f64(),
        verdict(check <= CHECK_BUDGET),
        peak as f64 / 1024.0,
        verdict(peak <= RSS_BUDGET_KIB),
    );
    Ok(())
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

/// The peak RSS in KiB of `apollo run -j 2 units.yaml` in `project`, which must succeed.
fn peak_rss(apollo: &Path, project: &Path) -> Result<u64, String> {
    let output = Command::new("python3")
        .current_dir(project)
        .args(["-c", PEAK_RSS])
        .arg(apollo)
        .args(["run", "-j", "2", "units.yaml"])
        .output()
        .map_err(|error| format!("python3: {error}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut words = text.split_whitespace();
    let (Some(rss), Some("0")) = (words.next(), words.next()) else {
        return Err(format!(
            "apollo run in {} did not succeed: {text}{}",
            project.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    };
    rss.parse().map_err(|_| format!("python3 printed {text}"))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn options_default_to_goal_3s_workload_and_refuse_zero() {
        assert_eq!(parse(&[]), Ok((100_000, 3)));
        assert_eq!(parse(&["--n", "10", "--rounds", "1"]), Ok((10, 1)));
        assert!(parse(&["--n", "0"]).is_err());
        assert!(parse(&["--rounds"]).is_err());
    }
}
