//! End-to-end tests of the `apollo` binary: crash, kill, resume, signals, locking, the
//! bundled example. Every test gets its own project folder; see `support.rs`.

mod support;

mod example;
mod resume;
mod run;
mod signals;
