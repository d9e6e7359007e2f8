//! What apollo-exec does to and expects from its host process: descriptors it must not leak,
//! closed standard descriptors. Each scenario that looks at
//! process-wide state (the descriptor table, fds 0–2) runs in a child process of its own, so
//! the tests running in parallel threads of this binary neither disturb it nor are disturbed.

// The tests re-run this test binary as a child process.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use apollo_core::Command;
use apollo_core::event::AttemptStatus;
use apollo_exec::ProcessExecutor;

use crate::Fixture;

/// Set in the child process: the test to act out, and where to write its verdict.
const CHILD_TEST: &str = "APOLLO_EXEC_HOST_TEST";
const CHILD_VERDICT: &str = "APOLLO_EXEC_HOST_VERDICT";

/// Run `scenario` in a fresh child process running only the test `name` (its full path, as
/// `cargo test -- --exact` wants it); fail with the scenario's message if it failed. The child
/// writes its verdict to a file, because the scenario may close its stdout and stderr.
fn in_own_process(name: &str, scenario: impl FnOnce() -> Result<(), String>) {
    if std::env::var(CHILD_TEST).as_deref() == Ok(name) {
        let verdict = match scenario() {
            Ok(()) => "ok".to_owned(),
            Err(message) => message,
        };
        let path = std::env::var_os(CHILD_VERDICT).expect("the verdict file's path");
        std::fs::write(path, verdict).expect("write the verdict");
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    let verdict_path = dir.path().join("verdict");
    let status = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", name, "--test-threads=1", "--nocapture"])
        .env(CHILD_TEST, name)
        .env(CHILD_VERDICT, &verdict_path)
        // Its harness's report would read like this binary's own; the verdict says it all.
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run the test in a child process");
    let verdict = std::fs::read_to_string(&verdict_path)
        .unwrap_or_else(|error| format!("the child left no verdict ({error}); it ended {status}"));
    assert_eq!(verdict, "ok");
    assert!(status.success(), "{status}");
}

/// The descriptors this process has open.
fn open_descriptors() -> Vec<String> {
    let mut fds: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .expect("list /proc/self/fd")
        .map(|entry| {
            let entry = entry.expect("an entry of /proc/self/fd");
            entry.file_name().to_string_lossy().into_owned()
        })
        .collect();
    fds.sort();
    fds
}

#[test]
fn a_spawn_that_fails_before_exec_leaves_no_descriptor_behind() {
    in_own_process(
        "host::a_spawn_that_fails_before_exec_leaves_no_descriptor_behind",
        || {
            let mut fixture = Fixture::new("true");
            // Named log files: opened and closed by each attempt, none kept for reuse.
            fixture.unit.idempotent = false;
            let not_executable = fixture.path("not-executable");
            std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
            let no_shebang = fixture.path("no-shebang");
            std::fs::write(&no_shebang, "true\n").unwrap();
            std::fs::set_permissions(&no_shebang, std::fs::Permissions::from_mode(0o755)).unwrap();
            let executor = ProcessExecutor::new(fixture.options.clone());
            // The first attempt opens what the executor keeps for all (guard, /dev/null, ...).
            let warm_up = fixture.run_on(&executor, &fixture.path("logs/0"));
            if warm_up.status != AttemptStatus::Succeeded {
                return Err(format!("the warm-up failed: {warm_up:?}"));
            }
            let before = open_descriptors();
            let cases = [
                ("a missing program", fixture.path("missing"), false),
                ("a file that is not executable", not_executable, false),
                ("a script without #!", no_shebang, true),
            ];
            for (index, (what, program, runs)) in cases.into_iter().enumerate() {
                fixture.unit.execute = Command::Argv(vec![program.display().to_string()]);
                let outcome = fixture.run_on(&executor, &fixture.path(&format!("logs/{index}")));
                let ran = outcome.status == AttemptStatus::Succeeded;
                if ran != runs {
                    return Err(format!("{what}: unexpected outcome {outcome:?}"));
                }
                let after = open_descriptors();
                if after != before {
                    return Err(format!(
                        "{what} changed the open descriptors from {before:?} to {after:?}"
                    ));
                }
            }
            Ok(())
        },
    );
}

#[test]
#[allow(unsafe_code)] // Closes this process's fds 0-2.
fn closed_standard_descriptors_get_dev_null_and_output_still_lands_in_its_files() {
    in_own_process(
        "host::closed_standard_descriptors_get_dev_null_and_output_still_lands_in_its_files",
        || {
            let mut fixture = Fixture::new("echo out; echo err >&2");
            // Named log files: without the fix they would be opened onto fds 0 and 1.
            fixture.unit.idempotent = false;
            for fd in 0..=2 {
                // SAFETY: the child process owns its standard descriptors and nothing in it
                // uses them meanwhile (one test runs, on this thread).
                unsafe { libc::close(fd) };
            }
            let executor = ProcessExecutor::new(fixture.options.clone());
            for fd in 0..=2 {
                let target = std::fs::read_link(format!("/proc/self/fd/{fd}"))
                    .map_err(|error| format!("fd {fd} is still closed: {error}"))?;
                if target != Path::new("/dev/null") {
                    return Err(format!("fd {fd} is {}", target.display()));
                }
            }
            let outcome = fixture.run_on(&executor, fixture.dir.path());
            if outcome.status != AttemptStatus::Succeeded {
                return Err(format!("the attempt failed: {outcome:?}"));
            }
            let (out, err) = (fixture.read("stdout"), fixture.read("stderr"));
            if (out.as_str(), err.as_str()) != ("out\n", "err\n") {
                return Err(format!("stdout {out:?}, stderr {err:?}"));
            }
            Ok(())
        },
    );
}

#[test]
fn a_missing_requirement_skips_visibly_but_fails_under_ci() {
    const NAME: &str = "host::a_missing_requirement_skips_visibly_but_fails_under_ci";
    if std::env::var_os("APOLLO_EXEC_NEEDS_PROBE").is_some() {
        // The child: a requirement this machine lacks.
        assert!(!crate::needs("a probe that never works", false));
        return;
    }
    let run = |ci: &str| {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--test-threads=1"])
            .env("APOLLO_EXEC_NEEDS_PROBE", "1")
            .env("CI", ci)
            .output()
            .unwrap()
    };
    let local = run("");
    assert!(local.status.success(), "{local:?}");
    assert!(
        String::from_utf8_lossy(&local.stderr).contains("SKIPPED: needs a probe that never works"),
        "{local:?}"
    );
    let ci = run("true");
    assert!(
        !ci.status.success(),
        "under CI=true a skip must fail: {ci:?}"
    );
}
