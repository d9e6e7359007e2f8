//! Replay throughput and memory on large synthetic journals (not a timed test).
//!
//! `cargo bench -p apollo-replay --bench replay` generates runs of 100,000 and 1,000,000
//! records (unit_started / unit_finished pairs, four units in flight at a time, realistic
//! hashes, inputs and phases) lazily, and renders them to /dev/null through a `BufWriter`:
//!
//! * baseline: serde_json serialising the same records (what any streaming consumer pays);
//! * text: `write_text` (the `apollo replay` default); json: `write_json`; chrome-trace:
//!   `write_chrome_trace`;
//! * peak memory (VmHWM) after the 100k and after the 1M runs: the streaming renderers must
//!   not grow with the journal's length. A `Timeline` (what chrome-trace and HTML build) is
//!   measured last, for contrast, since it holds one entry per attempt (only the HTML report
//!   needs one).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use apollo_core::Phase;
use apollo_core::Record;
use apollo_core::event::*;
use apollo_replay::{Filter, TextOptions, Timeline, write_chrome_trace, write_json, write_text};
use chrono::{DateTime, Utc};

const N_UNITS: usize = 500;
const IN_FLIGHT: u64 = 4;

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

/// A lazily generated run of `n_records` records: run_started, then attempts with
/// `IN_FLIGHT` running at once (each start is followed, `IN_FLIGHT` records later, by the
/// finish of the oldest attempt), then run_finished.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
fn synthetic_run(n_records: u64) -> impl Iterator<Item = Result<Record, Infallible>> {
    let base = DateTime::<Utc>::from_timestamp_millis(1_796_004_907_000).unwrap();
    let units: Vec<String> = (0..N_UNITS).map(|i| format!("unit_{i:04}")).collect();
    let n_attempts = (n_records.saturating_sub(2)) / 2;
    let mut next_start = 0u64;
    let mut next_finish = 0u64;
    let mut seq = 0u64;
    std::iter::from_fn(move || {
        seq += 1;
        let ts = base + chrono::Duration::milliseconds(seq as i64 * 7);
        let event = if seq == 1 {
            Event::RunStarted(RunStarted {
                run_id: "20261130T021507Z-3f9a".into(),
                pipeline: "bench".into(),
                config_path: "pipeline.yaml".into(),
                config_hash: hash(1),
                definition_hash: hash(2),
                apollo_version: "0.1.0".into(),
                host: "bench-host".into(),
                pid: 4242,
                units: units.clone(),
                identity: None,
                params: Default::default(),
                run_kind: apollo_core::event::RunKind::Run,
                durability: apollo_core::Durability::Fsync,
                deadlines: None,
            })
        } else if next_finish >= n_attempts {
            if seq > n_attempts * 2 + 2 {
                return None;
            }
            Event::RunFinished(RunFinished {
                status: RunStatus::Succeeded,
                succeeded: N_UNITS as u32,
                failed: 0,
                skipped: 0,
                reused: 0,
            })
        } else if next_start < n_attempts && next_start - next_finish < IN_FLIGHT {
            let attempt = next_start;
            next_start += 1;
            let unit = &units[(attempt as usize) % N_UNITS];
            Event::UnitStarted(UnitStarted {
                unit: unit.clone(),
                attempt: 1 + (attempt / N_UNITS as u64) as u32,
                input_hash: hash(attempt),
                inputs: vec![
                    InputComponent {
                        kind: InputKind::Command,
                        name: "execute".into(),
                        hash: hash(attempt + 1),
                    },
                    InputComponent {
                        kind: InputKind::File,
                        name: format!("data/{unit}.csv"),
                        hash: hash(attempt + 2),
                    },
                ],
                inputs_manifest: None,
            })
        } else {
            let attempt = next_finish;
            next_finish += 1;
            let failed = attempt.is_multiple_of(97);
            let duration_ms = 20 + attempt % 50;
            Event::UnitFinished(UnitFinished {
                unit: units[(attempt as usize) % N_UNITS].clone(),
                attempt: 1 + (attempt / N_UNITS as u64) as u32,
                status: if failed {
                    AttemptStatus::Failed
                } else {
                    AttemptStatus::Succeeded
                },
                exit: Some(ExitStatus::Code(i32::from(failed))),
                failed_phase: failed.then_some(Phase::Execute),
                timed_out: false,
                duration_ms,
                queued_ms: 0,
                output_hash: (!failed).then(|| hash(attempt + 3)),
                stdout_bytes: 1200,
                stderr_bytes: 0,
                user_cpu_ms: 5,
                sys_cpu_ms: 1,
                max_rss_kib: 10_240,
                leftovers_killed: 0,
                phases: vec![
                    PhaseRecord {
                        phase: Phase::Execute,
                        offset_ms: 1,
                        duration_ms: duration_ms - 4,
                        exit: Some(ExitStatus::Code(i32::from(failed))),
                        timed_out: false,
                    },
                    PhaseRecord {
                        phase: Phase::Cleanup,
                        offset_ms: duration_ms - 3,
                        duration_ms: 2,
                        exit: Some(ExitStatus::Code(0)),
                        timed_out: false,
                    },
                ],
                error: failed.then(|| "exit 1: connection reset by peer".to_owned()),
            })
        };
        Some(Ok(Record { seq, ts, event }))
    })
}

fn dev_null() -> BufWriter<File> {
    BufWriter::with_capacity(64 * 1024, File::create("/dev/null").unwrap())
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

fn time(label: &str, n_records: u64, run: impl FnOnce()) -> Duration {
    let start = Instant::now();
    run();
    let elapsed = start.elapsed();
    println!(
        "  {label:<28} {n_records:>9} records  {:>8.1} ms  {:>6.2} M records/s",
        elapsed.as_secs_f64() * 1e3,
        n_records as f64 / elapsed.as_secs_f64() / 1e6
    );
    elapsed
}

fn main() {
    println!("apollo-replay bench: render to /dev/null through a 64 KiB BufWriter");
    println!("  start: VmHWM {} KiB", vm_hwm_kib());
    let mut hwm_after = Vec::new();
    for n_records in [100_000u64, 1_000_000] {
        time("generate only", n_records, || {
            let n_seen = synthetic_run(n_records)
                .filter(|record| record.is_ok())
                .count();
            assert_eq!(n_seen as u64, n_records);
        });
        let baseline = time("baseline: serde_json", n_records, || {
            let mut out = dev_null();
            for record in synthetic_run(n_records) {
                let record = record.unwrap();
                serde_json::to_writer(&mut out, &record.event).unwrap();
                out.write_all(b"\n").unwrap();
            }
            out.flush().unwrap();
        });
        let text = time("write_text", n_records, || {
            write_text(
                synthetic_run(n_records),
                dev_null(),
                &TextOptions::default(),
            )
            .unwrap();
        });
        let json = time("write_json", n_records, || {
            write_json(synthetic_run(n_records), dev_null(), &Filter::all()).unwrap();
        });
        let chrome = time("write_chrome_trace", n_records, || {
            write_chrome_trace(synthetic_run(n_records), dev_null(), &Filter::all()).unwrap();
        });
        let hwm = vm_hwm_kib();
        println!(
            "  => text {:.2}x, json {:.2}x, chrome-trace {:.2}x the baseline's time; VmHWM {hwm} KiB",
            text.as_secs_f64() / baseline.as_secs_f64(),
            json.as_secs_f64() / baseline.as_secs_f64(),
            chrome.as_secs_f64() / baseline.as_secs_f64()
        );
        hwm_after.push(hwm);
    }
    println!(
        "streaming memory: VmHWM after 100k = {} KiB, after 1M = {} KiB (growth {} KiB)",
        hwm_after[0],
        hwm_after[1],
        hwm_after[1].saturating_sub(hwm_after[0])
    );
    let n_records = 1_000_000;
    time("Timeline::from_records", n_records, || {
        let timeline = Timeline::from_records(synthetic_run(n_records)).unwrap();
        assert_eq!(timeline.n_lanes, IN_FLIGHT as usize);
    });
    println!(
        "  for contrast, a Timeline of 1M records (~500k attempts): VmHWM {} KiB",
        vm_hwm_kib()
    );
}
