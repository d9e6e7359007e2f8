//! Integration tests of apollo-slurm against a fake cluster (`support`): the wrapper end to end,
//! exactly once, job arrays and secrets. One binary (each suite a module), so the suite links
//! once.
#![forbid(unsafe_code)]
#![allow(
    clippy::unwrap_used,
    reason = "a test: a failed setup step should panic"
)]

mod support;

mod arrays;
mod cleanup;
mod fake_cluster;
mod limits;
mod reattach_chain;
mod secrets;
