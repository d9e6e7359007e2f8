//! `apollo diff` on two large synthetic runs (not a timed test).
//!
//! `cargo bench -p apollo-replay --bench diff [-- N ...]` (default: 10000 and 100000 units)
//! builds two runs of N units each — one `unit_started`/`unit_finished` pair per unit, with
//! three input components; run B has one unit in a hundred with a changed input file and one
//! in a thousand failed — diffs them with `diff_records` (what `apollo diff` calls) and writes
//! the text table to /dev/null. It prints the time of each step and the peak resident set
//! size (VmHWM) after each size: both must grow linearly with N.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::Instant;

use apollo_core::Phase;
use apollo_core::Record;
use apollo_core::event::*;
use apollo_replay::{diff_records, write_diff_text};
use chrono::{DateTime, Utc};

fn hash(seed: u64) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995;
    let mut out = String::with_capacity(64);
    for _ in 0..4 {
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        out.push_str(&format!("{x:016x}"));
    }
    out
}

/// Run `run` ("a" or "b") of `n_units` units, generated lazily.
fn synthetic_run(
    n_units: usize,
    run: &'static str,
) -> impl Iterator<Item = Result<Record, Infallible>> {
    let base = DateTime::<Utc>::from_timestamp_millis(1_796_004_907_000).unwrap();
    let changed = move |unit_idx: usize| run == "b" && unit_idx % 100 == 7;
    let failed = move |unit_idx: usize| run == "b" && unit_idx % 1000 == 3;
    let names = move |unit_idx: usize| format!("unit_{unit_idx:06}");
    let mut seq = 0u64;
    std::iter::from_fn(move || {
        seq += 1;
        let ts = base + chrono::Duration::milliseconds(seq as i64);
        let body = seq - 2;
        let event = if seq == 1 {
            Event::RunStarted(RunStarted {
                run_id: format!("20261130T021507Z-{run}"),
                pipeline: "bench".into(),
                config_path: "pipeline.yaml".into(),
                config_hash: hash(1),
                definition_hash: hash(2),
                apollo_version: "0.1.0".into(),
                host: "bench-host".into(),
                pid: 4242,
                units: (0..n_units).map(names).collect(),
                identity: None,
                params: Default::default(),
                run_kind: apollo_core::event::RunKind::Run,
                durability: apollo_core::Durability::Fsync,
                deadlines: None,
            })
        } else if body < 2 * n_units as u64 {
            let unit_idx = (body / 2) as usize;
            let seed = unit_idx as u64 * 10;
            if body.is_multiple_of(2) {
                let file_seed = seed + 3 + u64::from(changed(unit_idx));
                let inputs = vec![
                    InputComponent {
                        kind: InputKind::Command,
                        name: "execute".into(),
                        hash: hash(seed + 1),
                    },
                    InputComponent {
                        kind: InputKind::Env,
                        name: "REGION".into(),
                        hash: hash(seed + 2),
                    },
                    InputComponent {
                        kind: InputKind::File,
                        name: format!("data/{}.csv", names(unit_idx)),
                        hash: hash(file_seed),
                    },
                ];
                Event::UnitStarted(UnitStarted {
                    unit: names(unit_idx),
                    attempt: 1,
                    input_hash: hash(file_seed + 5),
                    inputs,
                    inputs_manifest: None,
                })
            } else {
                let failed = failed(unit_idx);
                Event::UnitFinished(UnitFinished {
                    unit: names(unit_idx),
                    attempt: 1,
                    status: if failed {
                        AttemptStatus::Failed
                    } else {
                        AttemptStatus::Succeeded
                    },
                    exit: Some(ExitStatus::Code(i32::from(failed))),
                    failed_phase: failed.then_some(Phase::Execute),
                    timed_out: false,
                    duration_ms: 20 + seq % 50,
                    queued_ms: 0,
                    output_hash: (!failed).then(|| hash(seed + 9)),
                    stdout_bytes: 1200,
                    stderr_bytes: 0,
                    user_cpu_ms: 5,
                    sys_cpu_ms: 1,
                    max_rss_kib: 10_240,
                    leftovers_killed: 0,
                    phases: vec![PhaseRecord {
                        phase: Phase::Execute,
                        offset_ms: 1,
                        duration_ms: 18,
                        exit: Some(ExitStatus::Code(i32::from(failed))),
                        timed_out: false,
                    }],
                    error: failed.then(|| "exit 1: connection reset by peer".to_owned()),
                })
            }
        } else if body == 2 * n_units as u64 {
            Event::RunFinished(RunFinished {
                status: RunStatus::Succeeded,
                succeeded: n_units as u32,
                failed: 0,
                skipped: 0,
                reused: 0,
            })
        } else {
            return None;
        };
        Some(Ok(Record { seq, ts, event }))
    })
}

/// Peak resident set size of this process so far, in KiB.
fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![10_000, 100_000]
    } else {
        sizes
    };
    println!("apollo-replay diff bench: diff_records + write_diff_text to /dev/null");
    println!("  start: VmHWM {} KiB", vm_hwm_kib());
    for n_units in sizes {
        let start = Instant::now();
        let diff = diff_records(synthetic_run(n_units, "a"), synthetic_run(n_units, "b")).unwrap();
        let diffed = start.elapsed();
        let mut out = BufWriter::new(File::create("/dev/null").unwrap());
        write_diff_text(&diff, &mut out, false).unwrap();
        out.flush().unwrap();
        let total = start.elapsed();
        let n_changed = diff.changed_units().count();
        let expected = (0..n_units)
            .filter(|unit_idx| unit_idx % 100 == 7 || unit_idx % 1000 == 3)
            .count();
        assert_eq!(n_changed, expected);
        println!(
            "  {n_units:>7} units: diff {:>9.1} ms, with text {:>9.1} ms, {n_changed} changed, VmHWM {} KiB",
            diffed.as_secs_f64() * 1e3,
            total.as_secs_f64() * 1e3,
            vm_hwm_kib()
        );
    }
}
