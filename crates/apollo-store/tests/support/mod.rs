//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use apollo_core::event::{Event, RunFinished, RunStarted, RunStatus, SkipReason, UnitSkipped};
use apollo_store::testing::Clock;
use apollo_store::{Durability, JournalReader, ReadOptions, Record, StoreError, WriterOptions};
use chrono::{DateTime, TimeZone, Utc};

/// A small event whose unit name carries `n`.
pub(crate) fn event(n: u64) -> Event {
    Event::UnitSkipped(UnitSkipped {
        unit: format!("unit_{n}"),
        reason: SkipReason::UpstreamFailed {
            upstream: "fetch".to_owned(),
        },
    })
}

pub(crate) fn run_started(run_id: &str, pipeline: &str) -> Event {
    Event::RunStarted(RunStarted {
        run_id: run_id.to_owned(),
        pipeline: pipeline.to_owned(),
        config_path: "pipeline.yaml".to_owned(),
        config_hash: "c".repeat(64),
        definition_hash: "d".repeat(64),
        apollo_version: "0.1.0".to_owned(),
        host: "test".to_owned(),
        pid: 1,
        units: vec!["a".to_owned(), "b".to_owned()],
        identity: None,
        params: Default::default(),
        run_kind: apollo_core::event::RunKind::Run,
        durability: apollo_core::Durability::Fsync,
        deadlines: None,
    })
}

pub(crate) fn run_finished(status: RunStatus) -> Event {
    Event::RunFinished(RunFinished {
        status,
        succeeded: 2,
        failed: 0,
        skipped: 0,
        reused: 0,
    })
}

/// Fast writer options: no fsync.
pub(crate) fn fast() -> WriterOptions {
    WriterOptions::default().durability(Durability::None)
}

/// A clock the test moves by hand.
#[derive(Clone)]
pub(crate) struct ManualClock(pub(crate) Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    pub(crate) fn new() -> Self {
        Self(Arc::new(Mutex::new(
            Utc.with_ymd_and_hms(2026, 11, 30, 23, 0, 0).unwrap(),
        )))
    }

    pub(crate) fn clock(&self) -> Clock {
        let time = self.0.clone();
        Arc::new(move || *time.lock().unwrap())
    }

    pub(crate) fn set(&self, time: DateTime<Utc>) {
        *self.0.lock().unwrap() = time;
    }

    pub(crate) fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

/// Reads a run fully; returns the records, or the first error.
pub(crate) fn read_all(
    run_dir: &Path,
    options: ReadOptions,
) -> (Result<Vec<Record>, StoreError>, Vec<apollo_store::Warning>) {
    let mut reader = match JournalReader::open(run_dir, options) {
        Ok(reader) => reader,
        Err(error) => return (Err(error), Vec::new()),
    };
    let records: Result<Vec<Record>, StoreError> = (&mut reader).collect();
    (records, reader.take_warnings())
}

pub(crate) fn segment(run_dir: &Path, number: u64) -> PathBuf {
    run_dir.join("journal").join(format!("{number:06}.log"))
}

/// Frames a payload exactly as the journal does (an independent implementation of the
/// documented format).
pub(crate) fn frame(payload: &str) -> Vec<u8> {
    let body = format!("{} {payload}", payload.len());
    let crc = crc32c::crc32c(body.as_bytes());
    let masked = crc.rotate_right(15).wrapping_add(0xa282_ead8);
    format!("{masked:08x} {body}\n").into_bytes()
}

/// Where a segment's records end: after its last non-zero byte (zeros after it are space the
/// writer allocated ahead).
pub(crate) fn data_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .rposition(|&byte| byte != 0)
        .map_or(0, |last| last + 1)
}

/// The byte ranges of the frames (lines) of a segment file.
pub(crate) fn line_ranges(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    for (index, byte) in bytes.iter().enumerate() {
        if *byte == b'\n' {
            ranges.push(start..index + 1);
            start = index + 1;
        }
    }
    ranges
}

/// Copies a folder tree.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
