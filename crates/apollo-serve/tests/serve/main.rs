//! Integration tests of apollo-serve: the HTTP endpoints, live pages and the browser flows.
//! One binary (each suite a module), so the suite links once.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

mod common;

mod browser;
mod browser_flow;
mod browser_live;
mod deadlines;
mod http;
mod live;
mod restores;
mod secrets;
