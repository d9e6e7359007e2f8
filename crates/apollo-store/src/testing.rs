//! Testing aids: fault injection, an injectable clock, and where to switch fsync off.
//!
//! These hooks ship in the library and in the `apollo` binary on purpose: the binary that
//! `cargo install` builds is the one the end-to-end tests exercise (DESIGN §17), so the hooks
//! cannot be behind a feature the tests would have to turn on. None of them is active unless
//! asked for, and none should be used outside tests and benchmarks:
//!
//! * [`FaultPlan`] (with [`Fault`], [`FaultOp`], [`FaultErrno`]) fails the N-th write or fsync
//!   of a [`JournalWriter`](crate::JournalWriter), set through
//!   [`WriterOptions::faults`](crate::WriterOptions::faults). A failed write first writes half
//!   of its buffer, as a full disk can, so torn-tail recovery is exercised too. Plans parse
//!   from text such as `write:5:ENOSPC,fsync:3:EIO`; the `apollo` binary reads one from the
//!   environment variable [`FAULT_PLAN_ENV`] (`APOLLO_FAULTS`).
//! * [`Clock`] is where a writer gets the time of each record, set through
//!   [`WriterOptions::clock`](crate::WriterOptions::clock); a test moves it by hand to cross a
//!   UTC day (segments rotate at midnight) or to make timestamps reproducible.
//! * [`Durability::None`](crate::Durability::None) skips every fsync, for fast tests and
//!   benchmarks. A crash may then lose acknowledged records: never use it for real runs.
//!
//! # Example
//!
//! ```
//! use apollo_store::testing::{FaultErrno, FaultOp, FaultPlan};
//! use apollo_store::{ErrorKind, JournalWriter, WriterOptions};
//! use apollo_core::event::{Event, RunFinished, RunStatus};
//!
//! # let temp = tempfile::tempdir().expect("temp dir");
//! let plan: FaultPlan = "write:3:ENOSPC".parse()?;
//! assert_eq!(plan, FaultPlan::fail(FaultOp::Write, 3, FaultErrno::Enospc));
//!
//! // The segment header and the space allocated after it are writes 1 and 2, so the first
//! // append is the write that fails.
//! let options = WriterOptions::default().faults(plan);
//! let mut writer = JournalWriter::create(temp.path(), "20261130T021507Z-3f9a", options)?;
//! let event = Event::RunFinished(RunFinished {
//!     status: RunStatus::Succeeded, succeeded: 0, failed: 0, skipped: 0, reused: 0,
//! });
//! let error = writer.append_batch(&[event]).unwrap_err();
//! assert_eq!(error.kind(), ErrorKind::Io);
//! # Ok::<(), apollo_store::StoreError>(())
//! ```

pub use crate::fault::{FAULT_FIRED, FAULT_PLAN_ENV, Fault, FaultErrno, FaultOp, FaultPlan};
pub use crate::writer::Clock;
