//! `cargo xtask bench-sched [--n N] [--rounds R] [--shapes chain,wide,layered]`: the
//! scheduling benchmark of issue 5.
//!
//! For each shape it generates a no-op workload with `../shared/bench/gen.py` (N units of
//! `execute: "true"`), then times, alternating in each round so both see the same machine:
//!
//! * the floor: `dagrun -j2 -m spawn` (`../shared/bench/dagrun.c`, built here with `cc -O2`),
//!   a C runner with 2 workers and no state;
//! * `apollo run` with 2 workers and the default durable journal (a new state directory each
//!   round);
//! * `apollo run --durability none`, to show what the journal costs;
//! * the peers on the same graph: `make -j2` (phony targets) and `ninja -j2` (outputs never
//!   written, its log removed before each round), when they are installed (`apt-get install
//!   make ninja-build`; a missing one is said, and its column left out).
//!
//! It prints the median of each and the ratio to the floor. Then it times how long
//! `apollo run` takes to decide that an incomplete run whose N units all succeeded has
//! nothing left to do (the resume decision), `apollo resume` of a finished run, and, for
//! contrast, ninja deciding that nothing is left to do on the same graph (`ninja-stamp`: every
//! unit writes its stamp, then ninja runs again).
#![allow(clippy::disallowed_methods)] // A benchmark driver runs the programs it measures.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Options {
    n_units: usize,
    rounds: usize,
    shapes: Vec<String>,
}

fn parse(args: &[&str]) -> Result<Options, String> {
    let mut options = Options {
        n_units: 10_000,
        rounds: 3,
        shapes: vec!["chain".into(), "wide".into(), "layered".into()],
    };
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let value = iter.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match *flag {
            "--n" => options.n_units = value.parse().map_err(|_| "--n takes a number")?,
            "--rounds" => options.rounds = value.parse().map_err(|_| "--rounds takes a number")?,
            "--shapes" => options.shapes = value.split(',').map(str::to_owned).collect(),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

fn run_checked(command: &mut Command, what: &str) -> Result<Duration, String> {
    let started = Instant::now();
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|error| format!("{what}: {error}"))?;
    let elapsed = started.elapsed();
    if !status.success() {
        return Err(format!("{what} failed: {status}"));
    }
    Ok(elapsed)
}

/// Whether `program` is on `PATH` (it answers `--version`).
fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// Runs the benchmark; see the module docs.
pub(crate) fn run(root: &Path, args: &[&str]) -> Result<(), String> {
    let options = parse(args)?;
    let bench_dir = root.join("../shared/bench");
    if !bench_dir.join("dagrun.c").exists() {
        return Err(format!(
            "{} has no dagrun.c: the floor runner is needed",
            bench_dir.display()
        ));
    }
    let work = std::env::temp_dir().join(format!("apollo-bench-sched-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(|error| error.to_string())?;
    let dagrun = work.join("dagrun");
    run_checked(
        Command::new("cc")
            .arg("-O2")
            .arg("-o")
            .arg(&dagrun)
            .arg(bench_dir.join("dagrun.c")),
        "building dagrun",
    )?;
    run_checked(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(root)
            .args(["build", "--release", "--quiet", "-p", "apollo-cli"]),
        "building apollo",
    )?;
    let apollo = root.join("target/release/apollo");
    let make = installed("make");
    let ninja = installed("ninja");
    for (tool, found, package) in [("make", make, "make"), ("ninja", ninja, "ninja-build")] {
        if !found {
            println!("{tool} is not installed (apt-get install {package}): its column is left out");
        }
    }
    println!(
        "{} units, 2 workers, {} rounds alternating between the tools, median wall time, ratio to the floor",
        options.n_units, options.rounds
    );
    for shape in &options.shapes {
        let workload = work.join(shape);
        run_checked(
            Command::new("python3")
                .arg(bench_dir.join("gen.py"))
                .args([
                    "--shape",
                    shape,
                    "--n",
                    &options.n_units.to_string(),
                    "--out",
                ])
                .arg(&workload),
            "generating the workload",
        )?;
        let config = workload.join("apollo/units.yaml");
        let text = std::fs::read_to_string(&config).map_err(|error| error.to_string())?;
        std::fs::write(
            &config,
            text.replacen("units:", "max_parallel: 2\nunits:", 1),
        )
        .map_err(|error| error.to_string())?;
        let (mut floor, mut durable, mut volatile) = (Vec::new(), Vec::new(), Vec::new());
        let (mut make_times, mut ninja_times) = (Vec::new(), Vec::new());
        for round in 0..options.rounds {
            if make {
                make_times.push(run_checked(
                    Command::new("make")
                        .args(["-s", "-j2", "-C"])
                        .arg(workload.join("make")),
                    "make",
                )?);
            }
            if ninja {
                let _ = std::fs::remove_file(workload.join("ninja/.ninja_log"));
                ninja_times.push(run_checked(
                    Command::new("ninja")
                        .args(["-j2", "-C"])
                        .arg(workload.join("ninja")),
                    "ninja",
                )?);
            }
            floor.push(run_checked(
                Command::new(&dagrun)
                    .args(["-j2", "-m", "spawn"])
                    .arg(workload.join("limit/units.tsv")),
                "dagrun",
            )?);
            let state: PathBuf = work.join(format!("state-{shape}-{round}"));
            durable.push(run_checked(
                Command::new(&apollo)
                    .arg("--state-dir")
                    .arg(&state)
                    .arg("run")
                    .arg(&config),
                "apollo run",
            )?);
            let state_none = work.join(format!("state-{shape}-{round}-none"));
            volatile.push(run_checked(
                Command::new(&apollo)
                    .arg("--state-dir")
                    .arg(&state_none)
                    .args(["run", "--durability", "none"])
                    .arg(&config),
                "apollo run --durability none",
            )?);
        }
        let (floor, durable, volatile) = (median(floor), median(durable), median(volatile));
        let ratio = |time: Duration| time.as_secs_f64() / floor.as_secs_f64();
        let mut line = format!(
            "{shape:>8}: floor {:>6.2}s | apollo {:>6.2}s = {:.2}x | apollo --durability none {:>6.2}s = {:.2}x",
            floor.as_secs_f64(),
            durable.as_secs_f64(),
            ratio(durable),
            volatile.as_secs_f64(),
            ratio(volatile)
        );
        for (tool, times) in [("make -j2", make_times), ("ninja -j2", ninja_times)] {
            if !times.is_empty() {
                let time = median(times);
                line.push_str(&format!(
                    " | {tool} {:>6.2}s = {:.2}x",
                    time.as_secs_f64(),
                    ratio(time)
                ));
            }
        }
        println!("{line}");
    }
    // The resume decision: an incomplete run whose units all succeeded (its run_finished
    // record removed), then `apollo run` must decide that nothing is left to do.
    let shape = options
        .shapes
        .first()
        .cloned()
        .unwrap_or_else(|| "wide".into());
    let config = work.join(&shape).join("apollo/units.yaml");
    let state = work.join(format!("state-{shape}-0"));
    let journal = first_run_journal(&state)?;
    let text = std::fs::read_to_string(&journal).map_err(|error| error.to_string())?;
    let finished = strip_last_line(&text);
    std::fs::write(&journal, finished).map_err(|error| error.to_string())?;
    let decide = run_checked(
        Command::new(&apollo)
            .arg("--state-dir")
            .arg(&state)
            .arg("run")
            .arg(&config),
        "apollo run (resume)",
    )?;
    let resume_finished = run_checked(
        Command::new(&apollo)
            .arg("--state-dir")
            .arg(&state)
            .args(["resume", "latest", "--config"])
            .arg(&config),
        "apollo resume",
    )?;
    let mut line = format!(
        "resume of an incomplete {shape} run whose {} units all succeeded: {:.3}s; `apollo resume` of a finished run: {:.3}s",
        options.n_units,
        decide.as_secs_f64(),
        resume_finished.as_secs_f64()
    );
    if ninja {
        // ninja-stamp: every unit writes its stamp, so a second ninja has nothing to do.
        let stamps = work.join(&shape).join("ninja-stamp");
        run_checked(
            Command::new("ninja").args(["-j2", "-C"]).arg(&stamps),
            "ninja (stamps)",
        )?;
        let no_op = run_checked(
            Command::new("ninja").args(["-j2", "-C"]).arg(&stamps),
            "ninja (no-op)",
        )?;
        line.push_str(&format!(
            "; ninja's no-op on the same graph: {:.3}s (apollo's decision = {:.1}x)",
            no_op.as_secs_f64(),
            decide.as_secs_f64() / no_op.as_secs_f64()
        ));
    }
    println!("{line}");
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

fn first_run_journal(state: &Path) -> Result<PathBuf, String> {
    let runs = state.join("runs");
    let run = std::fs::read_dir(&runs)
        .map_err(|error| format!("{}: {error}", runs.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .next()
        .ok_or("no run recorded")?;
    let mut segments: Vec<PathBuf> = std::fs::read_dir(run.join("journal"))
        .map_err(|error| error.to_string())?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    segments.sort();
    segments
        .pop()
        .ok_or_else(|| "no journal segment".to_owned())
}

fn strip_last_line(text: &str) -> &str {
    let body = text.strip_suffix('\n').unwrap_or(text);
    match body.rfind('\n') {
        Some(end) => &text[..=end],
        None => text,
    }
}
