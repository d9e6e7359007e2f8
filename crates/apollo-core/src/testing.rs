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
//! output capture, so it shows in an ordinary `cargo test` run; under `cargo xtask test`
//! (the README's test command) it is also noted in the file [`SKIPPED_LOG`] names, and
//! the list is printed at the end.
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
            let line = format!("SKIPPED: {}{test}", missing(what, how_to_get_it));
            let _ = writeln!(std::io::stderr(), "{line}");
            note_skip(&line);
            false
        }
    }
}

/// The environment variable naming the file where each skip is also noted, one line each
/// (`cargo xtask test` sets it and prints the list at its end, after every suite ran).
pub const SKIPPED_LOG: &str = "XTASK_SKIPPED_LOG";

/// Appends `line` to the [`SKIPPED_LOG`] file, if one is named. Best effort: a skip is
/// already on standard error, and a test never fails for its note.
fn note_skip(line: &str) {
    let Some(path) = std::env::var_os(SKIPPED_LOG) else {
        return;
    };
    // One `write` of a whole line with O_APPEND: lines of tests running in parallel (and of
    // several test binaries) never interleave.
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(format!("{line}\n").as_bytes());
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

/// One journal event of every kind, one JSON object per line: the kinds a journal is mostly
/// made of in several shapes (an escaped unit name, a non-ASCII one, an input manifest, a
/// failure, a skip by exit 77), each other kind once. A fixture for code that reads, copies
/// or renders journals: decode each line as an [`Event`](crate::Event).
pub const EVERY_KIND_JSONL: &str = r#"
{"kind":"run_started","run_id":"r","pipeline":"p","config_path":"c.yaml","config_hash":"h","definition_hash":"d","apollo_version":"0.1.0","host":"h","pid":1,"units":["a","b\"q","c","d","e","é"],"identity":"p@c.yaml","params":{"day":"2026-11-30","n":1.5}}
{"kind":"run_reproduces","run":"r0","unit":"a","attempt":1,"scratch":"/tmp/s"}
{"kind":"unit_started","unit":"a","attempt":1,"input_hash":"ih","inputs":[{"kind":"command","name":"execute","hash":"x"},{"kind":"file","name":"in.csv","hash":"y"}]}
{"kind":"unit_files","unit":"a","attempt":1,"side":"inputs","files":[{"path":"in.csv","sha256":"s","size":3,"mode":420}]}
{"kind":"unit_submitted","unit":"a","attempt":1,"executor":"slurm","job_id":"42","reattached_from":1}
{"kind":"unit_finished","unit":"a","attempt":1,"status":"failed","exit":{"signal":9},"failed_phase":"execute","timed_out":true,"duration_ms":1000,"queued_ms":3,"output_hash":null,"stdout_bytes":1,"stderr_bytes":2,"user_cpu_ms":3,"sys_cpu_ms":4,"max_rss_kib":5,"leftovers_killed":1,"phases":[{"phase":"execute","offset_ms":0,"duration_ms":1000,"exit":null,"timed_out":true}],"error":"timed out\nafter 1s"}
{"kind":"unit_started","unit":"b\"q","attempt":2,"input_hash":"ih","inputs":[],"inputs_manifest":{"sha256":"m","count":100000}}
{"kind":"unit_files","unit":"b\"q","attempt":2,"side":"outputs","files":[],"manifest":{"sha256":"m","count":7}}
{"kind":"unit_finished","unit":"b\"q","attempt":2,"status":"succeeded","exit":{"code":0},"failed_phase":null,"timed_out":false,"duration_ms":5,"output_hash":"oh","stdout_bytes":0,"stderr_bytes":0,"user_cpu_ms":0,"sys_cpu_ms":0,"max_rss_kib":0,"leftovers_killed":0,"phases":[],"error":null}
{"kind":"unit_started","unit":"c","attempt":1,"input_hash":"ih","inputs":[{"kind":"upstream","name":"a","hash":"oh"}]}
{"kind":"unit_finished","unit":"c","attempt":1,"status":"skipped","exit":{"code":77},"failed_phase":null,"timed_out":false,"duration_ms":5,"output_hash":null,"stdout_bytes":0,"stderr_bytes":0,"user_cpu_ms":0,"sys_cpu_ms":0,"max_rss_kib":0,"leftovers_killed":0,"phases":[{"phase":"prepare","offset_ms":0,"duration_ms":1,"exit":{"code":0},"timed_out":false},{"phase":"execute","offset_ms":1,"duration_ms":4,"exit":{"code":77},"timed_out":false}],"error":null}
{"kind":"unit_finished","unit":"é","attempt":3,"status":"skipped","exit":{"code":77},"failed_phase":null,"timed_out":false,"duration_ms":5,"output_hash":null,"stdout_bytes":0,"stderr_bytes":0,"user_cpu_ms":0,"sys_cpu_ms":0,"max_rss_kib":0,"leftovers_killed":0,"phases":[],"error":null}
{"kind":"unit_skipped","unit":"c","reason":"upstream_failed","upstream":"a"}
{"kind":"unit_skipped","unit":"d","reason":"interrupted"}
{"kind":"unit_reused","unit":"e","from_run":"r0","from_attempt":1,"input_hash":"ih","output_hash":"oh"}
{"kind":"unit_marked","unit":"a","attempt":1,"verdict":"succeeded","by":"me","note":null}
{"kind":"run_finished","status":"failed","succeeded":1,"failed":1,"skipped":2,"reused":1}
{"kind":"hook_finished","hook":"on_failure","run_status":"failed","status":"succeeded","exit":{"code":0},"duration_ms":1,"error":null}
{"kind":"run_resumed","config_hash":"h","definition_hash":"d","apollo_version":"0.1.0","host":"h","pid":2,"units":["a"]}
"#;

mod records;
pub use records::every_field_of_every_kind;

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
