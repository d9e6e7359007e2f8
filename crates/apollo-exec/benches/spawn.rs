//! Per-attempt overhead of `ProcessExecutor` against bare spawns, measured in the same run.
//!
//! `cargo bench -p apollo-exec --bench spawn` (release). Rounds alternate the variants so that
//! machine noise (other builds on a shared box) hits them all alike; the figures are the median
//! round's microseconds per operation, and ratios to the bare `Command::new("true").status()`
//! baseline.
#![deny(unsafe_code)]
// Allowed only where a libc call has no safe form here.

// A benchmark of spawning must spawn: the bare baselines call `Command::new` themselves.
#![allow(clippy::disallowed_methods)]
#![allow(missing_docs)]

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apollo_core::{AttemptContext, AttemptRequest, CancelToken, Executor, Unit};
use apollo_exec::{ExecOptions, ProcessExecutor};

/// One way of running `true` once.
type Variant<'a> = Box<dyn Fn() + 'a>;

const ROUNDS: usize = 21;
const PER_ROUND: u32 = 100;

fn unit(execute: apollo_core::Command, workdir: &std::path::Path) -> Unit {
    Unit {
        skip_when: None,
        when_command: None,
        log_limit: None,
        queue_timeout: None,
        deadline: None,
        name: "bench".to_owned(),
        deps: vec![],
        timeout: Some(Duration::from_secs(60)),
        retries: 0,
        retry_delay: Duration::from_secs(1),
        retry_on_exit: Vec::new(),
        retry_max_delay: None,
        kill_grace: Duration::from_secs(5),
        prepare: None,
        execute,
        cleanup: None,
        cleanup_timeout: apollo_core::model::DEFAULT_CLEANUP_TIMEOUT,
        inputs: vec![],
        outputs: vec![],
        env: Default::default(),
        workdir: workdir.to_owned(),
        idempotent: true,
        capture: Default::default(),
        reuse: false,
        executor: apollo_core::model::ExecutorKind::Local,
        resources: apollo_core::model::Resources::default(),
        secrets: Default::default(),
    }
}

/// CPU time (user + system) used so far by this process and its reaped children, in µs.
/// Unlike wall time it barely moves when other builds share the machine.
#[allow(unsafe_code)] // getrusage(2).
fn cpu_micros() -> f64 {
    let mut total = 0.0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: rusage is plain data; getrusage fills it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer for the duration of the call.
        unsafe { libc::getrusage(who, &mut usage) };
        for time in [usage.ru_utime, usage.ru_stime] {
            total += time.tv_sec as f64 * 1e6 + time.tv_usec as f64;
        }
    }
    total
}

fn bare_status() {
    let status = Command::new("true").status().expect("spawn true");
    assert!(status.success());
}

/// What the executor's spawn does, minus supervision: new group, /dev/null stdin, files as
/// stdout/stderr, with or without a `pre_exec` hook setting PDEATHSIG (which makes std fork
/// instead of posix_spawn: what apollo-exec did before its guard process; kept as a reference).
#[allow(unsafe_code)] // The pre_exec baseline.
fn grouped_status(with_pre_exec: bool, out: &std::fs::File) {
    let mut command = Command::new("true");
    command
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(out.try_clone().expect("dup"))
        .process_group(0);
    if with_pre_exec {
        let parent = std::process::id();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    libc::_exit(125);
                }
                Ok(())
            });
        }
    }
    assert!(command.status().expect("spawn").success());
}

#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_dir = dir.path().join("logs");
    std::fs::create_dir(&log_dir).expect("log dir");
    let out = std::fs::File::create(dir.path().join("out")).expect("out file");
    let cancel = CancelToken::new();
    let direct = ProcessExecutor::new(ExecOptions::default());
    let via_shell = ProcessExecutor::new(ExecOptions::default().direct_exec(false));
    let true_shell = unit(apollo_core::Command::Shell("true".to_owned()), dir.path());
    let run = |executor: &ProcessExecutor, unit: &Unit| {
        let request = AttemptRequest::new("bench", unit, 1, &log_dir);
        let outcome = executor.run_attempt(&request, &AttemptContext::new(&cancel));
        assert_eq!(outcome.status, apollo_core::event::AttemptStatus::Succeeded);
    };

    let variants: Vec<(&str, Variant<'_>)> = vec![
        (
            "bare Command::new(\"true\").status() [posix_spawn]",
            Box::new(bare_status),
        ),
        (
            "group+files, no pre_exec [posix_spawn]",
            Box::new(|| grouped_status(false, &out)),
        ),
        (
            "group+files+PDEATHSIG pre_exec [fork+exec]",
            Box::new(|| grouped_status(true, &out)),
        ),
        (
            "ProcessExecutor `true` (direct exec)",
            Box::new(|| run(&direct, &true_shell)),
        ),
        (
            "ProcessExecutor `true` via /bin/sh -c",
            Box::new(|| run(&via_shell, &true_shell)),
        ),
    ];
    // `SPAWN_BENCH_ONLY=<index>` runs one variant alone, e.g. under `strace -c -f`.
    if let Some(only) = std::env::var("SPAWN_BENCH_ONLY")
        .ok()
        .and_then(|index| index.parse::<usize>().ok())
    {
        let (name, variant) = &variants[only];
        for _ in 0..PER_ROUND {
            variant();
        }
        println!("ran {PER_ROUND} x {name}");
        return;
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut cpu_totals: Vec<f64> = vec![0.0; variants.len()];
    // Warm-up: page cache, PATH lookups, allocator.
    for (_, variant) in &variants {
        for _ in 0..20 {
            variant();
        }
    }
    for _ in 0..ROUNDS {
        for (index, (_, variant)) in variants.iter().enumerate() {
            let cpu_start = cpu_micros();
            let start = Instant::now();
            for _ in 0..PER_ROUND {
                variant();
            }
            samples[index].push(start.elapsed().as_secs_f64() * 1e6 / f64::from(PER_ROUND));
            cpu_totals[index] += cpu_micros() - cpu_start;
        }
    }
    for round in &mut samples {
        round.sort_by(f64::total_cmp);
    }
    let medians: Vec<f64> = samples.iter().map(|round| round[round.len() / 2]).collect();
    // On a shared machine the fastest round is the least disturbed one: report it too.
    let minimums: Vec<f64> = samples.iter().map(|round| round[0]).collect();
    let cpu: Vec<f64> = cpu_totals
        .iter()
        .map(|total| total / (ROUNDS as f64 * f64::from(PER_ROUND)))
        .collect();
    println!(
        "{ROUNDS} alternating rounds x {PER_ROUND} ops; per op (ratio to bare status()): \
         wall median round | wall fastest round | CPU (parent + children)"
    );
    for (index, (name, _)) in variants.iter().enumerate() {
        println!(
            "{:7.1} µs {:4.2}x | {:7.1} µs {:4.2}x | {:7.1} µs {:4.2}x  {name}",
            medians[index],
            medians[index] / medians[0],
            minimums[index],
            minimums[index] / minimums[0],
            cpu[index],
            cpu[index] / cpu[0]
        );
    }
    println!(
        "CPU: executor overhead over a bare spawn {:+.1} µs/attempt; PDEATHSIG pre_exec {:+.1} µs/spawn",
        cpu[3] - cpu[0],
        cpu[2] - cpu[1]
    );
    println!(
        "median: executor overhead over a bare spawn {:+.1} µs/attempt; PDEATHSIG pre_exec {:+.1} µs/spawn",
        medians[3] - medians[0],
        medians[2] - medians[1]
    );
    println!(
        "fastest: executor overhead over a bare spawn {:+.1} µs/attempt; PDEATHSIG pre_exec {:+.1} µs/spawn",
        minimums[3] - minimums[0],
        minimums[2] - minimums[1]
    );
}
