//! End-to-end tests of the `apollo` binary: crash, kill, resume, signals, locking, the
//! bundled example. Every test gets its own project folder; see `support.rs`.
#![deny(unsafe_code)] // Allowed only where a libc call has no safe form here.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

mod support;

mod agreement;
mod agreement_more;
mod agreement_views;
mod bisect;
mod capture;
mod cost;
mod counts;
mod deadlines;
mod durability;
mod evict;
mod example;
mod export;
mod hashing;
mod held_still;
mod identity;
mod lifecycle;
mod live;
mod log_limit;
mod machine_output;
mod needs_human;
mod operator;
mod params;
mod permissions;
mod records;
mod replay;
mod reproduce_isolated;
mod reproduction;
mod resources;
mod restores;
mod resume;
mod retry_keys;
mod reuse;
mod run;
mod secrets;
mod sharing;
mod signals;
mod slurm;
mod slurm_arrays;
mod slurm_cluster;
mod slurm_exactly_once;
mod slurm_log_limit;
mod slurm_queue_limit;
mod slurm_reattach_changed;
mod slurm_secrets;
mod state_dir;
mod values;
mod verdict_summary;
mod when;
