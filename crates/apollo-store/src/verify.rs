//! `apollo verify`: read a whole journal and report every problem.

use std::path::Path;

use crate::error::{StoreError, Warning, WarningKind};
use crate::reader::{JournalReader, ReadOptions};

/// The integrity report of one run's journal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Segment files.
    pub n_segments: usize,
    /// Good records read.
    pub n_records: u64,
    /// The last good record's seq.
    pub last_seq: Option<u64>,
    /// A torn tail (a warning: what an unfinished write leaves, never acknowledged; the next
    /// writer cuts it). A damaged last record that was written whole is a corruption instead.
    pub torn_tail: Option<Warning>,
    /// Every corruption found (bad records, gaps, missing or misnumbered segments, bad
    /// headers), each with file, offset and seq.
    pub corruptions: Vec<Warning>,
}

impl VerifyReport {
    /// No corruption (a torn tail is allowed).
    pub fn is_clean(&self) -> bool {
        self.corruptions.is_empty()
    }
}

/// Reads the whole journal of the run in `run_dir` in salvage mode and reports what it found.
/// Errors only when the journal cannot be read at all (I/O, a newer format, no journal).
pub fn verify(run_dir: &Path) -> Result<VerifyReport, StoreError> {
    let mut reader = JournalReader::open(
        run_dir,
        ReadOptions {
            salvage: true,
            ..ReadOptions::default()
        },
    )?;
    let mut report = VerifyReport {
        n_segments: reader.n_segments(),
        ..VerifyReport::default()
    };
    // Records in the writer's exact form are checked without being decoded into events: the
    // same checks, less work (see `JournalReader::next_stored`).
    while let Some(record) = reader.next_stored() {
        let seq = record?.seq();
        report.n_records += 1;
        report.last_seq = Some(seq);
    }
    for warning in reader.take_warnings() {
        match warning.kind {
            WarningKind::TornTail => report.torn_tail = Some(warning),
            _ => report.corruptions.push(warning),
        }
    }
    Ok(report)
}

impl crate::StateDir {
    /// [`verify`] for one run of this state directory, knowing what the journal alone cannot
    /// tell: a run whose `run_started` was acknowledged (see
    /// [`StateDir::acknowledged_runs`](crate::StateDir::acknowledged_runs)) and that holds
    /// no record — its journal cut back to its segment header, emptied or removed — is
    /// [`StoreError::Corruption`], never a clean run of no records.
    pub fn verify_run(&self, id: &crate::RunId) -> Result<VerifyReport, StoreError> {
        let run_dir = self.run_dir(id)?;
        let lost = || {
            StoreError::corruption(
                run_dir.path().join("journal"),
                0,
                None,
                crate::runs::LOST_RECORDS,
            )
        };
        match verify(run_dir.path()) {
            Ok(report) if report.n_records == 0 && self.acknowledged_runs()?.contains(id) => {
                Err(lost())
            }
            Err(StoreError::NotFound { .. }) if self.acknowledged_runs()?.contains(id) => {
                Err(lost())
            }
            result => result,
        }
    }
}
