//! `apollo serve` at scale (not a timed test): the runs page of a state directory with 1,000
//! runs, and the page of a 10,000-unit run, over loopback HTTP.
//!
//! `cargo bench -p apollo-serve --bench serve` makes one real run of a small pipeline, then
//! writes 1,000 runs and one 10,000-unit run from its records (each run its own journal,
//! through the store's writer, without fsyncs), serves the state directory and times:
//!
//! * `/` and `/api/runs`: the first request (no runs index: `serve` never writes one, it
//!   folds each journal once and remembers the counts by journal length), the following ones,
//!   and with a runs index written by the CLI's `apollo runs`;
//! * `/runs/{id}` of the 10,000-unit run (its first 500 units), `/api/runs/{id}`, and the
//!   Gantt report `/runs/{id}/report`;
//! * the process's peak memory (VmHWM) after each step.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub, dead_code)]

#[path = "../tests/serve/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use apollo_core::Event;
use apollo_store::{
    Durability, JournalReader, JournalWriter, ReadOptions, StateDir, WriterOptions,
};
use common::{Served, project, run_pipeline};

const PIPELINE: &str = "\
name: bench
params:
  day: {default: \"2026-12-01\"}
units:
  - name: fetch
    execute: echo fetched
  - name: clean
    deps: [fetch]
    execute: echo cleaned
  - name: report
    deps: [clean]
    execute: echo reported
";

const N_RUNS: usize = 1_000;
const N_UNITS: usize = 10_000;

fn events_of(state: &StateDir, run: &apollo_store::RunId) -> Vec<serde_json::Value> {
    JournalReader::open(state.run_dir(run).unwrap().path(), ReadOptions::default())
        .unwrap()
        .map(|record| serde_json::to_value(record.unwrap().event).unwrap())
        .collect()
}

fn write_run(state: &StateDir, events: &[serde_json::Value], source: &str) -> String {
    let id = state.new_run_id();
    let run_dir = state.create_run(&id).unwrap();
    let options = WriterOptions::default().durability(Durability::None);
    let mut writer = JournalWriter::create(run_dir.path(), id.as_str(), options).unwrap();
    let events: Vec<Event> = events
        .iter()
        .map(|event| {
            let text = event.to_string().replace(source, id.as_str());
            serde_json::from_str(&text).unwrap()
        })
        .collect();
    writer.append_batch(&events).unwrap();
    id.as_str().to_owned()
}

/// The source run's records with every unit event repeated for `n` units `u00000`….
fn many_units(events: &[serde_json::Value], n: usize) -> Vec<serde_json::Value> {
    let names: Vec<String> = (0..n).map(|index| format!("u{index:05}")).collect();
    let mut out = Vec::new();
    for event in events {
        match event["kind"].as_str() {
            Some("run_started") => {
                let mut started = event.clone();
                started["units"] = serde_json::json!(names);
                out.push(started);
            }
            Some("unit_started" | "unit_finished") if event["unit"] == "fetch" => {
                for name in &names {
                    let mut copy = event.clone();
                    copy["unit"] = serde_json::json!(name);
                    out.push(copy);
                }
            }
            Some("unit_started" | "unit_finished" | "unit_files") => {}
            _ => out.push(event.clone()),
        }
    }
    out
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// The median and the slowest of `n` requests of `path` (each must answer 200), and the
/// answer's size.
fn time(served: &Served, path: &str, n: usize) -> (Duration, Duration, usize) {
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..n {
        let start = Instant::now();
        let body = served.ok(path);
        times.push(start.elapsed());
        size = body.len();
    }
    times.sort();
    (times[times.len() / 2], times[times.len() - 1], size)
}

fn report(what: &str, (median, slowest, size): (Duration, Duration, usize)) {
    println!(
        "{what:<48} median {:>8.1} ms  slowest {:>8.1} ms  {:>8} KiB  peak RSS {:.0} MiB",
        median.as_secs_f64() * 1000.0,
        slowest.as_secs_f64() * 1000.0,
        size / 1024,
        peak_rss_mib()
    );
}

fn main() {
    let (dir, config) = project(PIPELINE);
    run_pipeline(&config);
    let state_dir = dir.path().join(".apollo");
    let state = StateDir::open_existing(&state_dir).unwrap();
    let source = state.run_ids().unwrap()[0].clone();
    let events = events_of(&state, &source);
    let start = Instant::now();
    for _ in 1..N_RUNS {
        write_run(&state, &events, source.as_str());
    }
    let big = write_run(&state, &many_units(&events, N_UNITS), source.as_str());
    println!(
        "wrote {} runs (one of {N_UNITS} units) in {:.1} s",
        N_RUNS + 1,
        start.elapsed().as_secs_f64()
    );

    let served = Served::start(&state_dir);
    report("/ (first request, no runs index)", time(&served, "/", 1));
    report("/ (counts remembered)", time(&served, "/", 20));
    report(
        "/api/runs (counts remembered)",
        time(&served, "/api/runs", 20),
    );
    report("/?q=2026&page=3", time(&served, "/?q=2026&page=3", 20));
    drop(served);
    // The CLI's `apollo runs` keeps what it learned in the runs index.
    apollo_runner::read::list_runs(&state, true).unwrap();
    let served = Served::start(&state_dir);
    report(
        "/ (first request, runs index written by the CLI)",
        time(&served, "/", 1),
    );
    report("/ (runs index)", time(&served, "/", 20));
    report(
        &format!("/runs/{{{N_UNITS}-unit run}}"),
        time(&served, &format!("/runs/{big}"), 10),
    );
    report(
        &format!("/runs/{{{N_UNITS}-unit run}}?page=20"),
        time(&served, &format!("/runs/{big}?page=20"), 10),
    );
    report(
        &format!("/api/runs/{{{N_UNITS}-unit run}}"),
        time(&served, &format!("/api/runs/{big}"), 10),
    );
    report(
        &format!("/runs/{{{N_UNITS}-unit run}}/units/u09999"),
        time(&served, &format!("/runs/{big}/units/u09999"), 10),
    );
    report(
        &format!("/runs/{{{N_UNITS}-unit run}}/report"),
        time(&served, &format!("/runs/{big}/report"), 3),
    );
}
