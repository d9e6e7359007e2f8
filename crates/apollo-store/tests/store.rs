//! Integration tests of apollo-store: the journal's promises, attacked.
#![deny(unsafe_code)]
// Allowed only where a libc call has no safe form here.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

mod compat;
mod corruption;
mod counts_cache;
mod faults;
mod journal;
mod lock_wait;
mod retention;
mod reuse_index;
mod state;
mod tamper;
mod torn;
