#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod backup;
mod error;
mod fault;
mod frame;
mod fsutil;
mod group;
mod lock;
mod reader;
mod record;
mod retention;
mod run_id;
mod runs;
mod safe_dir;
mod segment;
mod state_dir;
mod verify;
mod writer;

use apollo_core::Event;
use chrono::{DateTime, Utc};

pub use backup::{BackupReport, backup};
pub use error::{ErrorKind, StoreError, Warning, WarningKind};
pub use fault::{FAULT_PLAN_ENV, Fault, FaultErrno, FaultOp, FaultPlan};
pub use group::SharedWriter;
pub use lock::{LockHolder, StateLock};
pub use reader::{JournalReader, ReadOptions};
pub use retention::{PruneOptions, PruneReport, prune};
pub use run_id::RunId;
pub use runs::{RunState, RunSummary};
pub use segment::{FORMAT_MAJOR, FORMAT_MINOR, MAGIC};
pub use state_dir::{RunDir, StateDir, open_regular_file};
pub use verify::{VerifyReport, verify};
pub use writer::{Clock, Durability, JournalWriter, RecoveryReport, TornTail, WriterOptions};

/// One journal record as read back: its sequence number, its timestamp and its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Monotonic from 1 across all segments of a run.
    pub seq: u64,
    /// When the record was appended (UTC, microsecond precision).
    pub ts: DateTime<Utc>,
    /// The event.
    pub event: Event,
}
