//! Reliability attacks on the real `apollo` binary (issue 7; figures in docs/reliability-log.md):
//!
//! * `torture` — the crash-injection harness (`tests/src/torture.rs`), a bounded run in-process:
//!   SIGKILL apollo at random moments, resume, check the invariants;
//! * `faults` — the N-th journal write or fsync fails (ENOSPC, EIO), swept over every N a
//!   real run reaches: exit 6, nothing acknowledged lost, the next run resumes;
//! * `full_disk` — the state directory on a 1 MiB tmpfs that a unit fills mid-run.
//!
//! `cargo xtask torture` is the long run.
#![deny(unsafe_code)] // Allowed only where a libc call has no safe form here.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

mod support;

mod faults;
mod full_disk;
mod torture;
