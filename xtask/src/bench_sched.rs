//! `cargo xtask bench-sched [--n N] [--rounds R] [--shapes chain,wide,layered] [--no-op no]`:
//! the scheduling benchmark of issue 5.
//!
//! For each shape it generates a no-op workload with `../shared/bench/gen.py` (N units of
//! `execute: "true"`), then times, alternating in each round so both see the same machine:
//!
//! * the floor: `dagrun -j2 -m spawn` (`../shared/bench/dagrun.c`, built here with `cc -O2`),
//!   a C runner with 2 workers and no state;
//! * `apollo run` with 2 workers and the default durable journal (a new state directory each
//!   round);
//! * `apollo run --durability batched` (records synced within 10 ms off the critical path,
//!   issue 39) and `apollo run --durability none`, to show what the journal's syncs cost;
//! * the peers on the same graph: `make -j2` (phony targets) and `ninja -j2` (outputs never
//!   written, its log removed before each round), when they are installed (`apt-get install
//!   make ninja-build`; a missing one is said, and its column left out).
//!
//! It prints the median of each and the ratio to the floor; for the chain, also one sync of this
//! disk measured in the same rounds (a 200-byte append and its `fdatasync`) against what `fsync`
//! adds over `none` per link (issue 39's goal 2). Then, on the first shape's graph
//! and alternating in each round (five per round of the shapes, fifteen at least: each takes
//! tens of milliseconds, and three of them were too few to tell on a shared machine), it times
//! the no-op decisions: how long `apollo run` takes to
//! decide that an incomplete run whose N units all succeeded has nothing left to do (the
//! resume decision, issue 17), a second `apollo run` of the graph with `reuse: true` and one
//! output per unit (every unit reused, issue 13), and ninja deciding that nothing is left to do
//! on the same graph (`ninja-stamp`: every unit writes its stamp, then ninja runs again); and
//! `apollo resume` of a finished run (left out with `--no-op no`).
#![allow(clippy::disallowed_methods)] // A benchmark driver runs the programs it measures.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Options {
    n_units: usize,
    rounds: usize,
    shapes: Vec<String>,
    /// Time the no-op decisions after the shapes.
    no_op: bool,
}

fn parse(args: &[&str]) -> Result<Options, String> {
    let mut options = Options {
        n_units: 10_000,
        rounds: 3,
        shapes: vec!["chain".into(), "wide".into(), "layered".into()],
        no_op: true,
    };
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let value = iter.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match *flag {
            "--n" => options.n_units = value.parse().map_err(|_| "--n takes a number")?,
            "--rounds" => options.rounds = value.parse().map_err(|_| "--rounds takes a number")?,
            "--shapes" => options.shapes = value.split(',').map(str::to_owned).collect(),
            "--no-op" => {
                options.no_op = match *value {
                    "yes" => true,
                    "no" => false,
                    _ => return Err("--no-op takes yes or no".into()),
                }
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

/// Runs `command` (its stdout discarded), which must succeed: how long it took.
pub(crate) fn run_checked(command: &mut Command, what: &str) -> Result<Duration, String> {
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

/// How many appends [`time_one_sync`] makes.
const SYNCS: u32 = 500;

/// What one chain link's sync costs on this disk now: the median time of a 200-byte append and
/// its `fdatasync`, in a file beside the state directories, with a pause between them as a
/// chain link has (a sync right after another finds nothing queued and is quicker).
fn time_one_sync(work: &Path) -> Result<Duration, String> {
    use std::os::unix::fs::FileExt;
    let path = work.join("sync-probe");
    let file =
        std::fs::File::create(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    let record = [b'x'; 200];
    let mut times = Vec::new();
    for i in 0..SYNCS {
        std::thread::sleep(Duration::from_micros(500));
        let started = Instant::now();
        file.write_all_at(&record, u64::from(i) * 200)
            .and_then(|()| file.sync_data())
            .map_err(|error| format!("{}: {error}", path.display()))?;
        times.push(started.elapsed());
    }
    let _ = std::fs::remove_file(&path);
    Ok(median(times))
}

/// Issue 39's goal 2 for the chain: what `fsync` adds over `none` per link, against one sync
/// measured in the same rounds (the goal: no more than one sync per link and 5% of `none`).
fn sync_line(sync: Duration, fsync: Duration, none: Duration, links: usize) -> String {
    let links = links.max(1) as f64;
    let added = (fsync.as_secs_f64() - none.as_secs_f64()) / links;
    let allowed = sync.as_secs_f64() + 0.05 * none.as_secs_f64() / links;
    format!(
        "   chain: one sync (200-byte append + fdatasync, median) {:.0} µs | fsync adds {:.0} µs per link over none | goal 2 allows {:.0} µs: {}",
        sync.as_secs_f64() * 1e6,
        added * 1e6,
        allowed * 1e6,
        if added <= allowed { "met" } else { "not met" }
    )
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// Runs the benchmark; see the module docs.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
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
        let mut batched = Vec::new();
        let (mut make_times, mut ninja_times) = (Vec::new(), Vec::new());
        let mut syncs = Vec::new();
        for round in 0..options.rounds {
            if shape == "chain" {
                syncs.push(time_one_sync(&work)?);
            }
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
            let state_batched = work.join(format!("state-{shape}-{round}-batched"));
            batched.push(run_checked(
                Command::new(&apollo)
                    .arg("--state-dir")
                    .arg(&state_batched)
                    .args(["run", "--durability", "batched"])
                    .arg(&config),
                "apollo run --durability batched",
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
        let batched = median(batched);
        let ratio = |time: Duration| time.as_secs_f64() / floor.as_secs_f64();
        let mut line = format!(
            "{shape:>8}: floor {:>6.2}s | apollo {:>6.2}s = {:.2}x | apollo --durability batched {:>6.2}s = {:.2}x | apollo --durability none {:>6.2}s = {:.2}x",
            floor.as_secs_f64(),
            durable.as_secs_f64(),
            ratio(durable),
            batched.as_secs_f64(),
            ratio(batched),
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
        if !syncs.is_empty() {
            println!(
                "{}",
                sync_line(median(syncs), durable, volatile, options.n_units)
            );
        }
    }
    if !options.no_op {
        let _ = std::fs::remove_dir_all(&work);
        return Ok(());
    }
    // The resume decision: an incomplete run whose units all succeeded (its run_finished
    // record removed), then `apollo run` must decide that nothing is left to do; and, on the
    // same graph, ninja deciding it has nothing to do (`ninja-stamp`: every unit wrote its
    // stamp) and a second `apollo run` of the graph with `reuse: true` and one output per unit.
    // Rounds alternate between them.
    let shape = options
        .shapes
        .first()
        .cloned()
        .unwrap_or_else(|| "wide".into());
    let config = work.join(&shape).join("apollo/units.yaml");
    let state = work.join(format!("state-{shape}-0"));
    let journal = first_run_journal(&state)?;
    let text = std::fs::read_to_string(&journal).map_err(|error| error.to_string())?;
    let unfinished = strip_last_line(&text).to_owned();
    let reuse_dir = work.join(&shape).join("apollo-reuse");
    std::fs::create_dir_all(reuse_dir.join("stamps")).map_err(|error| error.to_string())?;
    let reuse_config = reuse_dir.join("units.yaml");
    std::fs::write(
        &reuse_config,
        reusable(&std::fs::read_to_string(&config).map_err(|error| error.to_string())?),
    )
    .map_err(|error| error.to_string())?;
    let reuse_run = || {
        run_checked(
            Command::new(&apollo).arg("run").arg(&reuse_config),
            "apollo run (reuse)",
        )
    };
    reuse_run()?;
    reuse_run()?;
    let stamps = work.join(&shape).join("ninja-stamp");
    if ninja {
        run_checked(
            Command::new("ninja").args(["-j2", "-C"]).arg(&stamps),
            "ninja (stamps)",
        )?;
    }
    let (mut decide, mut reuse_no_op, mut ninja_no_op) = (Vec::new(), Vec::new(), Vec::new());
    // A no-op takes tens of milliseconds, where a shape's run takes seconds: on a shared
    // machine the median of three of them moved by a third from one run of the benchmark to
    // the next, so the no-op decisions get more rounds (fifteen at least), still alternating.
    let no_op_rounds = no_op_rounds(options.rounds);
    for _ in 0..no_op_rounds {
        std::fs::write(&journal, &unfinished).map_err(|error| error.to_string())?;
        decide.push(run_checked(
            Command::new(&apollo)
                .arg("--state-dir")
                .arg(&state)
                .arg("run")
                .arg(&config),
            "apollo run (resume)",
        )?);
        reuse_no_op.push(reuse_run()?);
        if ninja {
            ninja_no_op.push(run_checked(
                Command::new("ninja").args(["-j2", "-C"]).arg(&stamps),
                "ninja (no-op)",
            )?);
        }
    }
    let (decide, reuse_no_op) = (median(decide), median(reuse_no_op));
    let resume_finished = run_checked(
        Command::new(&apollo)
            .arg("--state-dir")
            .arg(&state)
            .args(["resume", "latest", "--config"])
            .arg(&config),
        "apollo resume",
    )?;
    println!(
        "no-op decisions on the {shape} graph of {} units (median of {} rounds):",
        options.n_units, no_op_rounds
    );
    let versus = |time: Duration| match ninja_no_op.is_empty() {
        true => String::new(),
        false => format!(
            " = {:.1}x ninja's no-op",
            time.as_secs_f64() / median(ninja_no_op.clone()).as_secs_f64()
        ),
    };
    println!(
        "  resume of an incomplete run whose units all succeeded: {:.3}s{}",
        decide.as_secs_f64(),
        versus(decide)
    );
    println!(
        "  second run with `reuse: true` and one output per unit (all reused): {:.3}s{}",
        reuse_no_op.as_secs_f64(),
        versus(reuse_no_op)
    );
    println!(
        "  `apollo resume` of a finished run: {:.3}s",
        resume_finished.as_secs_f64()
    );
    if !ninja_no_op.is_empty() {
        println!(
            "  ninja's no-op on the same graph: {:.3}s",
            median(ninja_no_op).as_secs_f64()
        );
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// How many rounds the no-op decisions get when the shapes get `rounds`.
fn no_op_rounds(rounds: usize) -> usize {
    rounds.saturating_mul(5).max(15)
}

/// The generated `units.yaml` with `reuse: true` and one declared output per unit, which its
/// command writes (the reuse no-op benchmark of issue 13).
fn reusable(units_yaml: &str) -> String {
    let mut out = String::from("defaults:\n  reuse: true\n");
    for line in units_yaml.lines() {
        if line.trim_start().starts_with("execute:") {
            out.push_str("    outputs: [\"stamps/${unit.name}\"]\n");
            out.push_str("    execute: \": > stamps/$APOLLO_UNIT\"\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
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
