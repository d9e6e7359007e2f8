//! `apollo serve`'s memory against the number of runs (not a timed test).
//!
//! `cargo bench -p apollo-serve --bench memory [-- 100 1000 5000]` makes one real run of a
//! 3-unit pipeline, then, for each count, a state directory with that many runs (written from
//! its records through the store's writer, without fsyncs). For each it starts a server in a
//! child process (this same program, so the figures are the server's alone), requests `/`,
//! `/?page=2`, `/runs/latest`, `/history?pipeline=bench` and every page of `/api/runs`, twice,
//! and reads the child's peak (VmHWM) and resident (VmRSS) memory from `/proc/PID/status`.
//! The last line gives the growth per run between the smallest and the largest count.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub, dead_code)]

#[path = "../tests/serve/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;

use apollo_core::Event;
use apollo_store::{
    Durability, JournalReader, JournalWriter, ReadOptions, StateDir, WriterOptions,
};
use common::{project, run_pipeline};

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

/// Set in the child: the state directory to serve.
const CHILD: &str = "APOLLO_SERVE_MEMORY_BENCH_STATE_DIR";
const CHILD_TOKEN: &str = "APOLLO_SERVE_MEMORY_BENCH_TOKEN";

fn events_of(state: &StateDir, run: &apollo_store::RunId) -> Vec<String> {
    JournalReader::open(state.run_dir(run).unwrap().path(), ReadOptions::default())
        .unwrap()
        .map(|record| serde_json::to_string(&record.unwrap().event).unwrap())
        .collect()
}

/// Writes run number `index` (ids one second apart: no listing of `runs/` per new id).
fn write_run(state: &StateDir, events: &[String], source: &str, index: usize) {
    let base = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap();
    let time = base.to_utc() + chrono::Duration::seconds(i64::try_from(index).unwrap());
    let id = apollo_store::RunId::from_parts(time, 0);
    let run_dir = state.create_run(&id).unwrap();
    let options = WriterOptions::default().durability(Durability::None);
    let mut writer = JournalWriter::create(run_dir.path(), id.as_str(), options).unwrap();
    let events: Vec<Event> = (events.iter())
        .map(|event| serde_json::from_str(&event.replace(source, id.as_str())).unwrap())
        .collect();
    writer.append_batch(&events).unwrap();
}

/// `VmHWM` and `VmRSS` of process `pid`, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        (status.lines())
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// The child: serves `state_dir` until its stdin closes, after printing its address.
fn child(state_dir: &Path) {
    let token =
        apollo_serve::Token::from_file(Path::new(&std::env::var(CHILD_TOKEN).unwrap())).unwrap();
    let server = apollo_serve::Server::bind(apollo_serve::Options::new(state_dir, token)).unwrap();
    println!("{}", server.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        let _ = stop.send(());
    });
    server
        .run_until(async move {
            let _ = stopped.await;
        })
        .unwrap();
}

/// Serves `state_dir` in a child process, requests the pages, and gives its memory: resident
/// after the first listing, then peak and resident after every page.
fn measure(state_dir: &Path, n_runs: usize) -> (u64, u64, u64) {
    let token_file = state_dir.parent().unwrap().join("token");
    let token = "bench-token-0123456789abcdef0123456789abcdef";
    std::fs::write(&token_file, token).unwrap();
    // The bench runs its own server, not a unit: apollo-exec's process rules are for units.
    #[allow(clippy::disallowed_methods)]
    let mut server = std::process::Command::new(std::env::current_exe().unwrap())
        .env(CHILD, state_dir)
        .env(CHILD_TOKEN, &token_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut address = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut address)
        .unwrap();
    let address = address.trim().parse().unwrap();
    let bearer = format!("Bearer {token}");
    let get = |path: &str| {
        let response = common::get(address, path, &[("Authorization", &bearer)]);
        assert_eq!(response.status, 200, "GET {path}: {}", response.body);
        response.body
    };
    get("/");
    let listed = memory_kib(server.id());
    for _ in 0..2 {
        for path in [
            "/",
            "/?page=2",
            "/?q=2026",
            "/runs/latest",
            "/history?pipeline=bench",
        ] {
            get(path);
        }
        let mut page = 1;
        loop {
            let body: serde_json::Value =
                serde_json::from_str(&get(&format!("/api/runs?page={page}"))).unwrap();
            if body["next"].is_null() {
                // Before paging, the document held every run and no total.
                if !body["total"].is_null() {
                    assert_eq!(body["total"], n_runs, "{}", body["schema"]);
                }
                break;
            }
            page += 1;
        }
    }
    let (peak, resident) = memory_kib(server.id());
    server.stdin.take().unwrap().write_all(b"stop\n").unwrap();
    server.wait().unwrap();
    (listed.1, peak, resident)
}

fn main() {
    if let Some(state_dir) = std::env::var_os(CHILD) {
        child(Path::new(&state_dir));
        return;
    }
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let counts = if counts.is_empty() {
        vec![100, 1_000, 5_000]
    } else {
        counts
    };
    let (dir, config) = project(PIPELINE);
    run_pipeline(&config);
    let state = StateDir::open_existing(dir.path().join(".apollo")).unwrap();
    let source = state.run_ids().unwrap()[0].clone();
    let events = events_of(&state, &source);
    let mut figures = Vec::new();
    for &n_runs in &counts {
        let scratch = tempfile::tempdir().unwrap();
        let state_dir = scratch.path().join(".apollo");
        let copy = StateDir::open_or_create(&state_dir).unwrap();
        for index in 0..n_runs {
            write_run(&copy, &events, source.as_str(), index);
        }
        let (listed, peak, resident) = measure(&state_dir, n_runs);
        println!(
            "{n_runs:>6} runs: resident after the first listing {:>6.1} MiB; after every page twice: peak (VmHWM) {:>6.1} MiB, resident (VmRSS) {:>6.1} MiB",
            listed as f64 / 1024.0,
            peak as f64 / 1024.0,
            resident as f64 / 1024.0
        );
        figures.push((n_runs, peak, resident));
    }
    if let (Some(first), Some(last)) = (figures.first(), figures.last())
        && last.0 > first.0
    {
        let per_run = |a: u64, b: u64| (b as f64 - a as f64) * 1024.0 / (last.0 - first.0) as f64;
        println!(
            "growth per run from {} to {} runs: peak {:.0} B, resident {:.0} B",
            first.0,
            last.0,
            per_run(first.1, last.1),
            per_run(first.2, last.2)
        );
    }
}
