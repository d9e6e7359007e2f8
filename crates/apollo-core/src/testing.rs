//! Testing aids shared by every Apollo crate's tests (and usable by a consumer's).
//!
//! One policy for a test that needs something a machine may lack — Chromium, root, a
//! filesystem with `O_TMPFILE`, a Slurm cluster: [`require`] checks it once, at the top of
//! the test.
//!
//! * **Available**: the test runs.
//! * **Missing on a developer's machine**: the test prints a visible line such as
//!   `SKIPPED: needs chromium (apt-get install chromium)` and passes, so `cargo test` on a
//!   fresh machine is green and says what it did not check.
//! * **Missing under `CI=true`**: the test fails. CI provisions everything the suite needs,
//!   so a missing tool there is a broken CI machine, not a reason to check less.
//!
//! The line is written straight to the process's standard error, past the test harness's
//! output capture, so it shows in an ordinary `cargo test` run.
//!
//! # Example
//!
//! ```
//! fn chromium_on_path() -> bool {
//!     std::env::var_os("PATH").is_some_and(|path| {
//!         std::env::split_paths(&path).any(|dir| dir.join("chromium").is_file())
//!     })
//! }
//!
//! # if std::env::var("CI").is_ok_and(|ci| ci == "true") { return; }
//! if !apollo_core::testing::require(chromium_on_path(), "chromium", "apt-get install chromium") {
//!     return; // skipped, and said so
//! }
//! // ... drive the browser ...
//! ```

use std::io::Write;

/// Whether the test may go on: `true` when `available`; otherwise prints `SKIPPED: needs
/// WHAT (HOW_TO_GET_IT)` and returns `false`, or panics when the environment variable `CI` is
/// `true` (see the [module docs](self)).
///
/// `what` names the missing thing (`chromium`, `root`, `O_TMPFILE on /tmp`); `how_to_get_it`
/// says how to provide it (`apt-get install chromium`, `run as root`).
#[must_use = "a test that does not return when `require` says no runs without what it needs"]
#[track_caller]
pub fn require(available: bool, what: &str, how_to_get_it: &str) -> bool {
    match verdict(available, on_ci()) {
        Verdict::Run => true,
        Verdict::Fail => panic!(
            "{}, and CI=true: a CI machine must provide it",
            missing(what, how_to_get_it)
        ),
        Verdict::Skip => {
            let test = std::thread::current()
                .name()
                .map(|name| format!(" in {name}"))
                .unwrap_or_default();
            // Straight to the stream, not through `eprintln!`: the test harness captures the
            // macros' output of passing tests, and a skip must be seen.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: {}{test}",
                missing(what, how_to_get_it)
            );
            false
        }
    }
}

/// Whether the tests run under CI (`CI=true`), where nothing may be skipped.
pub fn on_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true" || value == "1")
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Run,
    Skip,
    Fail,
}

fn verdict(available: bool, on_ci: bool) -> Verdict {
    match (available, on_ci) {
        (true, _) => Verdict::Run,
        (false, false) => Verdict::Skip,
        (false, true) => Verdict::Fail,
    }
}

fn missing(what: &str, how_to_get_it: &str) -> String {
    format!("needs {what} ({how_to_get_it})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_runs_missing_skips_locally_and_fails_under_ci() {
        assert_eq!(verdict(true, false), Verdict::Run);
        assert_eq!(verdict(true, true), Verdict::Run);
        assert_eq!(verdict(false, false), Verdict::Skip);
        assert_eq!(verdict(false, true), Verdict::Fail);
        assert!(require(true, "nothing", "nothing to do"));
    }

    #[test]
    fn the_message_names_what_is_missing_and_how_to_get_it() {
        assert_eq!(
            missing("chromium", "apt-get install chromium"),
            "needs chromium (apt-get install chromium)"
        );
    }
}
