//! Journal benchmarks (not timed tests): figures printed as ratios to a baseline measured in
//! the same run.
//!
//! ```text
//! cargo bench -p apollo-store --bench journal
//! APOLLO_BENCH_DIR=/some/disk APOLLO_BENCH_SECONDS=3 APOLLO_BENCH_READ_RECORDS=1000000 cargo bench -p apollo-store --bench journal
//! ```
//!
//! 1. Durable appends/s with one writer, and with 8 threads appending through the group
//!    commit, each against a bare `write + fdatasync` loop of same-sized lines on the same disk,
//!    the three interleaved in 100 ms slices so drifting fsync latency affects them alike.
//! 2. Reading 1,000,000 records: time, records/s, and the peak resident memory of the read
//!    (VmHWM from /proc/self/status, reset before the read through /proc/self/clear_refs).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use apollo_core::Phase;
use apollo_core::event::{AttemptStatus, Event, ExitStatus, PhaseRecord, UnitFinished};
use apollo_store::{
    Durability, JournalReader, JournalWriter, ReadOptions, SharedWriter, WriterOptions,
};

fn event(n: u64) -> Event {
    Event::UnitFinished(UnitFinished {
        unit: format!("unit_{}", n % 1000),
        attempt: 1,
        status: AttemptStatus::Succeeded,
        exit: Some(ExitStatus::Code(0)),
        failed_phase: None,
        timed_out: false,
        duration_ms: n % 5000,
        queued_ms: 0,
        output_hash: Some("ab".repeat(32)),
        stdout_bytes: 1234,
        stderr_bytes: 0,
        user_cpu_ms: 3,
        sys_cpu_ms: 1,
        max_rss_kib: 2048,
        leftovers_killed: 0,
        phases: vec![PhaseRecord {
            phase: Phase::Execute,
            offset_ms: 0,
            duration_ms: n % 5000,
            exit: Some(ExitStatus::Code(0)),
            timed_out: false,
        }],
        error: None,
    })
}

fn seconds() -> Duration {
    let secs = std::env::var("APOLLO_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(2.0);
    Duration::from_secs_f64(secs)
}

fn bench_dir() -> PathBuf {
    std::env::var_os("APOLLO_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// Bare `write(line) + fdatasync` in a loop: the floor any durable journal pays per append.
struct Baseline {
    file: std::fs::File,
    line: Vec<u8>,
}

impl Baseline {
    fn new(dir: &Path, line_len: usize) -> Self {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("baseline.log"))
            .unwrap();
        let mut line = vec![b'x'; line_len - 1];
        line.push(b'\n');
        Self { file, line }
    }

    fn run(&mut self, slice: Duration) -> u64 {
        let start = Instant::now();
        let mut n = 0;
        while start.elapsed() < slice {
            self.file.write_all(&self.line).unwrap();
            self.file.sync_data().unwrap();
            n += 1;
        }
        n
    }
}

fn one_writer(writer: &mut JournalWriter, slice: Duration, next: &mut u64) -> u64 {
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < slice {
        writer.append_batch(&[event(*next)]).unwrap();
        *next += 1;
        n += 1;
    }
    n
}

/// 8 threads appending through one SharedWriter for `slice`; returns the appends made.
fn concurrent(shared: &Arc<SharedWriter>, n_threads: usize, slice: Duration) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..n_threads)
        .map(|t| {
            let (shared, stop, total) = (shared.clone(), stop.clone(), total.clone());
            std::thread::spawn(move || {
                let mut n = t as u64 * 1_000_000_000;
                while !stop.load(Ordering::Relaxed) {
                    shared.append(&event(n)).unwrap();
                    n += 1;
                    total.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(slice);
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    total.load(Ordering::Relaxed)
}

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn read_million(dir: &Path, n_records: u64) {
    let run = dir.join("read");
    let options = WriterOptions::default().durability(Durability::None);
    let mut writer = JournalWriter::create(&run, "bench", options).unwrap();
    let write_start = Instant::now();
    let mut batch = Vec::with_capacity(1000);
    let mut n = 0;
    while n < n_records {
        batch.clear();
        for _ in 0..1000.min(n_records - n) {
            batch.push(event(n));
            n += 1;
        }
        writer.append_batch(&batch).unwrap();
    }
    drop(writer);
    let write_secs = write_start.elapsed().as_secs_f64();
    let bytes: u64 = std::fs::read_dir(run.join("journal"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let n_segments = std::fs::read_dir(run.join("journal")).unwrap().count();
    let reset = reset_hwm();
    let before = vm_hwm_kib();
    let start = Instant::now();
    let mut count = 0u64;
    let mut last_seq = 0;
    for record in JournalReader::open(&run, ReadOptions::default()).unwrap() {
        let record = record.unwrap();
        last_seq = record.seq;
        count += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let after = vm_hwm_kib();
    assert_eq!((count, last_seq), (n_records, n_records));
    println!(
        "read {count} records ({:.1} MiB, {n_segments} segments): {secs:.2} s, {:.0} records/s (written with durability=none in {write_secs:.2} s)",
        bytes as f64 / 1048576.0,
        count as f64 / secs
    );
    println!(
        "peak RSS (VmHWM) {} before the read, {} during it{}",
        before.map_or("?".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
        after.map_or("?".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
        if reset {
            " (peak reset before the read)"
        } else {
            " (peak could not be reset: includes the write phase)"
        }
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` would run this too: keep it short.
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let budget = if quick {
        Duration::from_millis(200)
    } else {
        seconds()
    };
    let n_records = if quick {
        10_000
    } else {
        std::env::var("APOLLO_BENCH_READ_RECORDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1_000_000)
    };
    let dir = tempfile::tempdir_in(bench_dir()).unwrap();
    // The size of a framed record, so the baseline writes lines of the same size.
    let line_len = {
        let probe = dir.path().join("probe");
        let options = WriterOptions::default().durability(Durability::None);
        let mut writer = JournalWriter::create(&probe, "bench", options).unwrap();
        // The writer allocates a segment ahead in zeros: measure to the last non-zero byte.
        let data_len = |path: &Path| {
            let bytes = std::fs::read(path).unwrap();
            bytes
                .iter()
                .rposition(|&byte| byte != 0)
                .map_or(0, |at| at + 1)
        };
        let before = data_len(writer.segment_path());
        writer.append_batch(&[event(1234)]).unwrap();
        data_len(writer.segment_path()) - before
    };
    println!(
        "journal benchmarks in {} ({} s per figure, record {} bytes)",
        dir.path().display(),
        budget.as_secs_f64(),
        line_len
    );
    // The disk is shared with other work, and fsync latency drifts a lot: the three loops run
    // in interleaved slices of 100 ms, so each ratio compares like with like.
    let slice = Duration::from_millis(100);
    let n_rounds = (budget.as_millis() / slice.as_millis()).max(1) as u32;
    let mut baseline = Baseline::new(dir.path(), line_len);
    let mut writer =
        JournalWriter::create(&dir.path().join("one"), "bench", WriterOptions::default()).unwrap();
    let shared = Arc::new(
        JournalWriter::create(&dir.path().join("eight"), "bench", WriterOptions::default())
            .unwrap()
            .into_shared(),
    );
    let (mut n_base, mut n_one, mut n_eight, mut next) = (0, 0, 0, 0);
    for _ in 0..n_rounds {
        n_base += baseline.run(slice);
        n_one += one_writer(&mut writer, slice, &mut next);
        n_eight += concurrent(&shared, 8, slice);
    }
    let secs = (slice * n_rounds).as_secs_f64();
    let (base, one, eight) = (
        n_base as f64 / secs,
        n_one as f64 / secs,
        n_eight as f64 / secs,
    );
    println!("baseline write+fdatasync loop:        {base:>9.0} /s  (1.00x)");
    println!(
        "JournalWriter, 1 writer:              {one:>9.0} /s  ({:.2}x baseline)",
        one / base
    );
    println!(
        "SharedWriter, 8 concurrent appenders: {eight:>9.0} /s  ({:.2}x baseline; {:.1} appends per fdatasync)",
        eight / base,
        n_eight as f64 / shared.n_commits().max(1) as f64
    );
    read_million(dir.path(), n_records);
}
