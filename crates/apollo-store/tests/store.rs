//! Integration tests of apollo-store: the journal's promises, attacked.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

mod compat;
mod corruption;
mod faults;
mod journal;
mod lock_wait;
mod reuse_index;
mod state;
mod tamper;
mod torn;
