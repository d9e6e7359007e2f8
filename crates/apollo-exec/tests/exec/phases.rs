//! The attempt's shape: phases, env, outputs, statuses, start failures.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use apollo_core::event::{AttemptStatus, ExitStatus};
use apollo_core::{Command, Phase};
use sha2::{Digest, Sha256};

use crate::{Fixture, assert_no_survivors, wait_for_file};

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn phases(outcome: &apollo_core::AttemptOutcome) -> Vec<Phase> {
    outcome.phases.iter().map(|phase| phase.phase).collect()
}

#[test]
fn env_and_outputs_of_all_phases_land_in_the_attempt_files() {
    let mut fixture = Fixture::new(
        "echo \"$APOLLO_RUN_ID $APOLLO_UNIT $APOLLO_ATTEMPT $APOLLO_PHASE $SOURCE\"; echo oops >&2",
    );
    fixture
        .unit
        .env
        .insert("SOURCE".to_owned(), "local".to_owned());
    fixture.unit.prepare = Some(Command::Shell("echo \"prep $APOLLO_PHASE\"".to_owned()));
    fixture.unit.cleanup = Some(Command::Argv(vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        "echo \"clean $APOLLO_PHASE\"; pwd >&2".to_owned(),
    ]));
    let outcome = fixture.run();

    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(outcome.exit, Some(ExitStatus::Code(0)));
    assert_eq!(outcome.error, None);
    assert_eq!(
        phases(&outcome),
        [Phase::Prepare, Phase::Execute, Phase::Cleanup]
    );
    let execute_line = format!("{} unit_under_test 1 execute local\n", fixture.run_id);
    let stdout = fixture.read("stdout");
    assert_eq!(
        stdout,
        format!("prep prepare\n{execute_line}clean cleanup\n")
    );
    let workdir = fixture.dir.path().canonicalize().unwrap();
    assert_eq!(
        fixture.read("stderr"),
        format!("oops\n{}\n", workdir.display())
    );
    assert_eq!(outcome.stdout_bytes, stdout.len() as u64);
    assert_eq!(outcome.stderr_bytes, fixture.read("stderr").len() as u64);
    // The hash covers execute's bytes only, not prepare's or cleanup's.
    assert_eq!(
        outcome.stdout_sha256.as_deref(),
        Some(sha256_hex(execute_line.as_bytes()).as_str())
    );
    for phase in &outcome.phases {
        assert_eq!(phase.exit, Some(ExitStatus::Code(0)));
        assert!(!phase.timed_out);
        assert_eq!(phase.leftovers_killed, 0);
        assert!(phase.offset <= outcome.wall_time);
    }
    assert!(outcome.max_rss_kib > 0, "{outcome:?}");
}

#[test]
fn a_phase_leads_its_own_process_group() {
    let fixture = Fixture::new("cat /proc/self/stat");
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    let stat = fixture.read("stdout");
    let (pid, rest) = stat.split_once(' ').unwrap();
    let fields: Vec<&str> = rest
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    assert!(stat.contains("(cat)"), "{stat}");
    // Its own process group: pgrp == pid.
    assert_eq!(fields[2], pid, "{stat}");
}

#[test]
fn appending_to_existing_log_files_counts_only_this_attempt() {
    let fixture = Fixture::new("printf abc");
    std::fs::write(fixture.path("stdout"), "earlier attempt\n").unwrap();
    let outcome = fixture.run();
    assert_eq!(outcome.stdout_bytes, 3);
    assert_eq!(outcome.stdout_sha256, Some(sha256_hex(b"abc")));
    assert_eq!(fixture.read("stdout"), "earlier attempt\nabc");
}

#[test]
fn exit_77_from_execute_is_skipped_and_cleanup_still_runs() {
    let mut fixture = Fixture::new("exit 77");
    fixture.unit.cleanup = Some(Command::Shell("touch cleaned".to_owned()));
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Skipped, "{outcome:?}");
    assert_eq!(outcome.exit, Some(ExitStatus::Code(77)));
    assert_eq!(outcome.failed_phase, None);
    assert!(fixture.path("cleaned").exists());
}

#[test]
fn a_when_command_runs_first_and_when_false_skips_the_attempt_without_cleanup() {
    let mut fixture = Fixture::new("echo ran > ran");
    fixture.unit.cleanup = Some(Command::Shell("echo cleaned > cleaned".to_owned()));
    fixture.unit.when_command = Some(Command::Shell("echo \"$APOLLO_PHASE\"; test -e go".into()));
    let skipped = fixture.run();
    assert_eq!(skipped.status, AttemptStatus::Skipped, "{skipped:?}");
    assert_eq!(
        (skipped.exit, skipped.error.as_deref()),
        (Some(ExitStatus::Code(1)), None)
    );
    assert!(skipped.when_false());
    assert_eq!(phases(&skipped), [Phase::When]);
    assert!(!fixture.path("ran").exists() && !fixture.path("cleaned").exists());
    assert_eq!(fixture.read("stdout"), "when\n");

    std::fs::write(fixture.path("go"), "").unwrap();
    let ran = fixture.run();
    assert_eq!(ran.status, AttemptStatus::Succeeded, "{ran:?}");
    assert_eq!(phases(&ran), [Phase::When, Phase::Execute, Phase::Cleanup]);
    assert!(fixture.path("ran").exists() && fixture.path("cleaned").exists());

    // A condition that cannot start is a failure, not a skip.
    fixture.unit.when_command = Some(Command::Argv(vec!["./no-such-condition".into()]));
    let broken = fixture.run();
    assert_eq!(broken.status, AttemptStatus::Failed, "{broken:?}");
    assert_eq!(broken.failed_phase, Some(Phase::When));
}

#[test]
fn failing_prepare_skips_execute_but_not_cleanup() {
    let mut fixture = Fixture::new("touch executed");
    fixture.unit.prepare = Some(Command::Shell("exit 3".to_owned()));
    fixture.unit.cleanup = Some(Command::Shell("touch cleaned".to_owned()));
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert_eq!(outcome.failed_phase, Some(Phase::Prepare));
    assert_eq!(outcome.exit, Some(ExitStatus::Code(3)));
    assert_eq!(phases(&outcome), [Phase::Prepare, Phase::Cleanup]);
    assert_eq!(outcome.stdout_sha256, None);
    assert_eq!(outcome.error.as_deref(), Some("prepare exited with code 3"));
    assert!(!fixture.path("executed").exists());
    assert!(fixture.path("cleaned").exists());
}

#[test]
fn failing_execute_still_runs_cleanup_and_a_failing_cleanup_fails_the_attempt() {
    let mut fixture = Fixture::new("exit 5");
    fixture.unit.cleanup = Some(Command::Shell("touch cleaned; exit 6".to_owned()));
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert_eq!(outcome.failed_phase, Some(Phase::Execute));
    assert_eq!(outcome.exit, Some(ExitStatus::Code(5)));
    assert_eq!(
        outcome.error.as_deref(),
        Some("execute exited with code 5; cleanup exited with code 6")
    );
    assert!(fixture.path("cleaned").exists());

    let mut fixture = Fixture::new("true");
    fixture.unit.cleanup = Some(Command::Shell("exit 6".to_owned()));
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert_eq!(outcome.failed_phase, Some(Phase::Cleanup));
    assert_eq!(outcome.exit, Some(ExitStatus::Code(6)));
}

#[test]
fn a_command_that_does_not_exist_fails_with_a_clear_error() {
    let mut fixture = Fixture::new("apollo-no-such-command --flag");
    fixture.unit.cleanup = Some(Command::Shell("touch cleaned".to_owned()));
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert_eq!(outcome.failed_phase, Some(Phase::Execute));
    assert_eq!(outcome.exit, None);
    assert_eq!(outcome.stdout_sha256, None);
    assert_eq!(
        outcome.error.as_deref(),
        Some("execute could not start: command not found: apollo-no-such-command")
    );
    assert!(fixture.path("cleaned").exists());

    // The same string through the shell (direct exec off) is the shell's 127.
    let mut fixture = Fixture::new("apollo-no-such-command --flag");
    fixture.options.direct_exec = false;
    let outcome = fixture.run();
    assert_eq!(outcome.exit, Some(ExitStatus::Code(127)));

    // Through the shell, the shell's own 127 is reported with a hint.
    let fixture = Fixture::new("apollo-no-such-command; exit $?");
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert_eq!(outcome.exit, Some(ExitStatus::Code(127)));
    assert!(outcome.error.unwrap().contains("command not found"));
    assert!(fixture.read("stderr").contains("apollo-no-such-command"));
}

#[test]
fn a_file_that_is_not_executable_fails_with_a_clear_error() {
    let fixture = Fixture::new("unused");
    let script = fixture.path("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut fixture = fixture;
    fixture.unit.execute = Command::Argv(vec!["./script.sh".to_owned()]);
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert_eq!(outcome.exit, None);
    let error = outcome.error.unwrap();
    assert!(
        error.starts_with("execute could not start: permission denied: "),
        "{error}"
    );
    assert!(error.contains("script.sh"), "{error}");
}

#[test]
fn a_script_without_a_shebang_still_runs_when_exec_d_directly() {
    let mut fixture = Fixture::new("./plain-script arg");
    let script = fixture.path("plain-script");
    std::fs::write(&script, "echo \"ran with $1\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    fixture.unit.env.insert("UNUSED".to_owned(), "x".to_owned());
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(fixture.read("stdout"), "ran with arg\n");
}

#[test]
fn a_bad_workdir_fails_every_phase_with_a_clear_error() {
    let mut fixture = Fixture::new("true");
    let missing = fixture.path("does-not-exist");
    fixture.unit.workdir = missing.clone();
    fixture.unit.cleanup = Some(Command::Shell("true".to_owned()));
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert_eq!(outcome.failed_phase, Some(Phase::Execute));
    let expected = format!(
        "execute could not start: working directory {} is not usable: No such file or directory (os error 2)",
        missing.display()
    );
    assert!(
        outcome.error.as_deref().unwrap().starts_with(&expected),
        "{outcome:?}"
    );
    assert_eq!(phases(&outcome), [Phase::Execute, Phase::Cleanup]);
}

#[test]
fn an_unusable_log_dir_fails_the_attempt_without_starting_anything() {
    let mut fixture = Fixture::new("touch executed");
    fixture.unit.cleanup = Some(Command::Shell("touch cleaned".to_owned()));
    // A folder cannot be created under a file.
    std::fs::write(fixture.path("a-file"), "").unwrap();
    let log_dir = fixture.path("a-file/logs");
    let request = apollo_core::AttemptRequest::new(&fixture.run_id, &fixture.unit, 1, &log_dir);
    let outcome = apollo_core::Executor::run_attempt(
        &apollo_exec::ProcessExecutor::default(),
        &request,
        &apollo_core::AttemptContext::new(&apollo_core::CancelToken::new()),
    );
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert!(outcome.phases.is_empty());
    assert!(outcome.error.unwrap().starts_with("cannot open "));
    assert!(!fixture.path("executed").exists());
    assert!(!fixture.path("cleaned").exists());
}

#[test]
fn cpu_time_is_measured() {
    // A busy loop in the shell itself, bounded by work rather than time.
    let fixture = Fixture::new("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done");
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Succeeded);
    assert!(
        outcome.user_cpu + outcome.sys_cpu > Duration::ZERO,
        "{outcome:?}"
    );
}

#[test]
fn output_files_are_named_only_when_written_to_or_once_the_attempt_ran_a_while() {
    let mut fixture = Fixture::new("true");
    // No naming by time in this part: only what the attempt wrote decides.
    fixture.options.name_output_after = Duration::from_secs(3600);
    let log_dir = fixture.path("logs/quiet/1");
    let outcome = fixture.run_in(&log_dir);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert!(
        std::fs::read_dir(fixture.path("logs"))
            .unwrap()
            .next()
            .is_none(),
        "a silent attempt names nothing"
    );

    fixture.unit.execute = Command::Shell("echo out; echo err >&2".to_owned());
    let log_dir = fixture.path("logs/loud/1");
    let outcome = fixture.run_in(&log_dir);
    assert_eq!(outcome.stdout_bytes, 4);
    assert_eq!(
        std::fs::read_to_string(log_dir.join("stdout")).unwrap(),
        "out\n"
    );
    assert_eq!(
        std::fs::read_to_string(log_dir.join("stderr")).unwrap(),
        "err\n"
    );

    // A unit that is not idempotent gets its files at once.
    fixture.unit.execute = Command::Shell("true".to_owned());
    fixture.unit.idempotent = false;
    let log_dir = fixture.path("logs/careful/1");
    fixture.run_in(&log_dir);
    assert_eq!(std::fs::read(log_dir.join("stdout")).unwrap(), b"");

    // An attempt that runs longer than `name_output_after` finds its (empty) file named
    // while it runs.
    fixture.unit.idempotent = true;
    fixture.options.name_output_after = Duration::ZERO;
    let log_dir = fixture.path("logs/waits/1");
    fixture.unit.execute = Command::Shell(format!(
        "i=0; while [ ! -e {}/stdout ]; do i=$((i+1)); [ $i -gt 6000 ] && exit 1; sleep 0.01; done",
        log_dir.display()
    ));
    let outcome = fixture.run_in(&log_dir);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
}

/// Whether `O_TMPFILE` and write leases work in `dir` (ext4, xfs, btrfs, tmpfs); elsewhere
/// log files are named at once and the tests of unnamed files have nothing to check (they
/// skip, see [`crate::needs`]).
#[allow(unsafe_code)] // Probes O_TMPFILE.
fn unnamed_files_work(dir: &std::path::Path) -> bool {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let works = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
        // Reuse also needs write leases (`/proc/sys/fs/leases-enable`).
        // SAFETY: fcntl on a descriptor we own.
        .is_ok_and(|file| unsafe {
            libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) == 0
        });
    crate::needs(
        &format!("O_TMPFILE and write leases in {}", dir.display()),
        works,
    )
}

#[test]
fn silent_attempts_reuse_files_but_not_one_an_escaped_process_still_writes_to() {
    let mut fixture = Fixture::new("true");
    if !unnamed_files_work(fixture.dir.path()) {
        return;
    }
    fixture.options.name_output_after = Duration::from_secs(3600);
    let executor = apollo_exec::ProcessExecutor::new(fixture.options.clone());
    for unit in ["a", "b", "c"] {
        let outcome = fixture.run_on(&executor, &fixture.path(&format!("logs/{unit}/1")));
        assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    }
    assert!(
        std::fs::read_dir(fixture.path("logs"))
            .unwrap()
            .next()
            .is_none(),
        "silent attempts name nothing"
    );

    // This attempt leaves a process outside its group (it ends once that process has left the
    // group) that writes once `go` exists. It drops `APOLLO_UNIT`, so the attempt's end does not
    // kill it (see `escaped`): the run's stray sweep does.
    fixture.unit.execute = Command::Shell(
        "setsid env -u APOLLO_UNIT sh -c 'touch escaped; while [ ! -e go ]; do sleep 0.01; done; echo late; \
         touch wrote' & while [ ! -e escaped ]; do sleep 0.01; done"
            .to_owned(),
    );
    let escaped_from = fixture.path("logs/escapes/1");
    fixture.run_on(&executor, &escaped_from);
    // The file it holds is not handed to the next attempt.
    fixture.unit.execute = Command::Shell("true".to_owned());
    let next = fixture.path("logs/next/1");
    fixture.run_on(&executor, &next);
    std::fs::write(fixture.path("go"), "").unwrap();
    wait_for_file(&fixture.path("wrote"));
    // Its late output goes to the attempt it came from, at the latest when the executor goes.
    fixture.run_on(&executor, &fixture.path("logs/last/1"));
    drop(executor);
    assert_eq!(fixture.read("logs/escapes/1/stdout"), "late\n");
    assert!(!next.exists(), "the next attempt got a file of its own");
    apollo_exec::kill_stray_processes(&fixture.run_id).unwrap();
    assert_no_survivors(&fixture.run_id);
}

#[test]
fn a_program_in_path_that_is_not_executable_is_permission_denied_not_missing() {
    let mut fixture = Fixture::new("unused");
    std::fs::create_dir(fixture.path("bin")).unwrap();
    std::fs::write(fixture.path("bin/mytool"), "#!/bin/sh\n").unwrap();
    fixture
        .unit
        .env
        .insert("PATH".to_owned(), fixture.path("bin").display().to_string());
    fixture.unit.execute = Command::Argv(vec!["mytool".to_owned()]);
    let outcome = fixture.run();
    let error = outcome.error.unwrap();
    assert!(
        error.starts_with("execute could not start: permission denied: mytool"),
        "{error}"
    );
}

#[test]
fn a_child_starts_with_no_blocked_signals_and_sigpipe_at_default() {
    // The test harness, like apollo, ignores SIGPIPE; the unit must not inherit that, nor the
    // fully blocked mask apollo's thread holds while it clones.
    let mut fixture = Fixture::new("unused");
    fixture.unit.execute = Command::Argv(["cat", "/proc/self/status"].map(str::to_owned).to_vec());
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    let status = fixture.read("stdout");
    let mask = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|value| u64::from_str_radix(value.trim(), 16).unwrap())
            .unwrap()
    };
    assert_eq!(mask("SigBlk:"), 0, "{status}");
    let sigpipe_bit = 1 << (libc::SIGPIPE - 1);
    assert_eq!(mask("SigIgn:") & sigpipe_bit, 0, "{status}");
}

#[test]
#[allow(unsafe_code)] // signal(2) to ignore SIGXFSZ here.
fn a_signal_apollo_ignores_is_at_its_default_in_the_child() {
    // DESIGN §17: a unit starts with every signal at its default, SIGXFSZ included (a unit
    // that outgrows a file size limit dies of it instead of seeing EFBIG). No other test uses
    // SIGXFSZ.
    // SAFETY: setting a disposition to SIG_IGN; no handler runs.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let mut fixture = Fixture::new("unused");
    fixture.unit.execute = Command::Argv(["cat", "/proc/self/status"].map(str::to_owned).to_vec());
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    let status = fixture.read("stdout");
    let ignored = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .map(|value| u64::from_str_radix(value.trim(), 16).unwrap())
        .unwrap();
    assert_eq!(ignored, 0, "{status}");
}

#[test]
fn a_child_in_a_pipeline_dies_quietly_of_sigpipe() {
    let fixture = Fixture::new("yes | head -n 1");
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(fixture.read("stdout"), "y\n");
    assert_eq!(
        fixture.read("stderr"),
        "",
        "yes saw EPIPE instead of dying of SIGPIPE"
    );
}
