//! Units that misbehave: ignore SIGTERM, leave grandchildren holding stdout, background
//! processes, flood stdout, read stdin, die by a signal, outlive their time limit.

use std::io::Read;
use std::time::Duration;

use apollo_core::event::{AttemptStatus, ExitStatus};
use apollo_core::{CancelLevel, CancelToken, Command, Phase};
use sha2::{Digest, Sha256};

use crate::{Fixture, is_dead, peak_rss_kib, wait_for_file};

/// Run `fixture` while another thread waits for `marker` and then raises `cancel` to `level`.
fn run_cancelled_after(
    fixture: &Fixture,
    marker: &str,
    level: CancelLevel,
) -> apollo_core::AttemptOutcome {
    let cancel = CancelToken::new();
    std::thread::scope(|scope| {
        let marker = fixture.path(marker);
        let canceller = cancel.clone();
        scope.spawn(move || {
            wait_for_file(&marker);
            canceller.cancel(level);
        });
        fixture.run_with(&cancel)
    })
}

#[test]
fn a_unit_ignoring_sigterm_is_sigkilled_after_the_grace() {
    let mut fixture = Fixture::new("trap '' TERM; touch started; while :; do sleep 1; done");
    fixture.unit.kill_grace = Duration::from_millis(300);
    fixture.unit.cleanup = Some(Command::Shell("touch cleaned".to_owned()));
    let outcome = run_cancelled_after(&fixture, "started", CancelLevel::Graceful);
    assert_eq!(outcome.status, AttemptStatus::Interrupted, "{outcome:?}");
    assert_eq!(outcome.exit, Some(ExitStatus::Signal(9)));
    assert_eq!(outcome.failed_phase, Some(Phase::Execute));
    assert!(outcome.phases[0].wall_time >= Duration::from_millis(300));
    assert!(
        fixture.path("cleaned").exists(),
        "cleanup must run after a cancel"
    );
    assert_eq!(outcome.phases[1].exit, Some(ExitStatus::Code(0)));
}

#[test]
fn a_timed_out_unit_ignoring_sigterm_is_sigkilled_and_the_error_names_the_phase() {
    // The 2 s limit is the behaviour under test; the shell arms its trap long before.
    let mut fixture = Fixture::new("trap '' TERM; touch started; while :; do sleep 1; done");
    fixture.unit.timeout = Some(Duration::from_secs(2));
    fixture.unit.kill_grace = Duration::from_millis(300);
    let outcome = fixture.run();
    assert!(fixture.path("started").exists());
    assert_eq!(outcome.status, AttemptStatus::TimedOut, "{outcome:?}");
    assert!(outcome.timed_out);
    assert_eq!(outcome.failed_phase, Some(Phase::Execute));
    assert_eq!(outcome.exit, Some(ExitStatus::Signal(9)));
    assert!(outcome.phases[0].timed_out);
    assert_eq!(
        outcome.error.as_deref(),
        Some(
            "execute timed out after 2s (the unit's limit for prepare + execute); \
             its process group got SIGTERM, then SIGKILL after the 300ms grace"
        )
    );
}

#[test]
fn a_grandchild_holding_stdout_is_gone_after_the_timeout_and_does_not_hang_apollo() {
    // The shell forks a subshell that ignores SIGTERM and keeps stdout open, then waits.
    let mut fixture =
        Fixture::new("(trap '' TERM; echo grandchild; touch gc-started; exec sleep 1000) & wait");
    fixture.unit.timeout = Some(Duration::from_secs(2));
    // A long grace: the leader dies of its SIGTERM, so apollo must not spend it waiting for
    // the grandchild; it kills the grandchild as a leftover at once.
    fixture.unit.kill_grace = Duration::from_secs(60);
    let outcome = fixture.run();
    assert!(fixture.path("gc-started").exists());
    assert_eq!(outcome.status, AttemptStatus::TimedOut, "{outcome:?}");
    assert_eq!(outcome.exit, Some(ExitStatus::Signal(15)));
    assert_eq!(outcome.phases[0].leftovers_killed, 1);
    assert!(outcome.wall_time < Duration::from_secs(60), "{outcome:?}");
    assert_eq!(fixture.read("stdout"), "grandchild\n");
}

#[test]
fn processes_left_in_the_group_by_a_successful_unit_are_killed_and_reported() {
    let mut fixture = Fixture::new("sleep 1000 & echo $! > bg.pid; sleep 1000 & echo done");
    fixture.unit.cleanup = Some(Command::Shell("sleep 1000 &".to_owned()));
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(outcome.phases[0].leftovers_killed, 2);
    assert_eq!(outcome.phases[1].leftovers_killed, 1);
    let background: u32 = fixture.read("bg.pid").trim().parse().unwrap();
    assert!(is_dead(background));
    assert_eq!(outcome.stdout_sha256.as_deref().map(str::len), Some(64));
}

#[test]
fn parallel_attempts_kill_only_their_own_leftovers() {
    let fixtures: Vec<Fixture> = (0..4)
        .map(|_| Fixture::new("sleep 1000 & sleep 1000 & echo ok"))
        .collect();
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = fixtures
            .iter()
            .map(|fixture| scope.spawn(|| fixture.run()))
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect()
    });
    for outcome in outcomes {
        assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
        assert_eq!(outcome.phases[0].leftovers_killed, 2);
    }
}

#[test]
fn two_hundred_megabytes_of_stdout_keep_apollo_s_memory_flat() {
    const SIZE: u64 = 200_000_000;
    let fixture = Fixture::new("head -c 200000000 /dev/zero");
    let peak_before = peak_rss_kib();
    let outcome = fixture.run();
    let peak_after = peak_rss_kib();
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(outcome.stdout_bytes, SIZE);
    assert_eq!(
        std::fs::metadata(fixture.path("stdout")).unwrap().len(),
        SIZE
    );
    // Loading the output would add ~195 MiB; streaming adds a 64 KiB buffer.
    assert!(
        peak_after.saturating_sub(peak_before) < 32 * 1024,
        "peak RSS grew from {peak_before} KiB to {peak_after} KiB"
    );
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(fixture.path("stdout")).unwrap();
    let mut buffer = vec![0_u8; 1 << 20];
    loop {
        let read = file.read(&mut buffer).unwrap();
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    let expected: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(outcome.stdout_sha256, Some(expected));
}

#[test]
fn a_unit_reading_stdin_gets_end_of_file_at_once() {
    let fixture = Fixture::new("cat; read line; echo \"read status $?\"");
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(fixture.read("stdout"), "read status 1\n");
}

#[test]
fn a_unit_killed_by_a_signal_reports_that_signal() {
    let fixture = Fixture::new("kill -USR1 $$");
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert_eq!(outcome.exit, Some(ExitStatus::Signal(10)));
    assert!(!outcome.timed_out);
    assert_eq!(
        outcome.error.as_deref(),
        Some("execute was killed by SIGUSR1")
    );
}

#[test]
fn cancelling_interrupts_execute_and_still_runs_cleanup() {
    let mut fixture = Fixture::new("touch started; exec sleep 1000");
    fixture.unit.cleanup = Some(Command::Shell("touch cleaned".to_owned()));
    let outcome = run_cancelled_after(&fixture, "started", CancelLevel::Graceful);
    assert_eq!(outcome.status, AttemptStatus::Interrupted, "{outcome:?}");
    assert_eq!(outcome.exit, Some(ExitStatus::Signal(15)));
    assert!(!outcome.timed_out);
    assert!(fixture.path("cleaned").exists());
    assert_eq!(
        outcome.error.as_deref(),
        Some("execute was interrupted: apollo is stopping (SIGTERM)")
    );
}

#[test]
fn an_immediate_cancel_kills_without_grace() {
    let mut fixture = Fixture::new("trap '' TERM; touch started; while :; do sleep 1; done");
    fixture.unit.kill_grace = Duration::from_secs(1000);
    fixture.unit.cleanup = Some(Command::Shell("touch cleaned".to_owned()));
    let outcome = run_cancelled_after(&fixture, "started", CancelLevel::Immediate);
    assert_eq!(outcome.status, AttemptStatus::Interrupted, "{outcome:?}");
    assert_eq!(outcome.exit, Some(ExitStatus::Signal(9)));
    assert!(fixture.path("cleaned").exists());
}

#[test]
fn a_second_cancel_cuts_a_graceful_stop_short() {
    let mut fixture = Fixture::new("trap '' TERM; touch started; while :; do sleep 1; done");
    fixture.unit.kill_grace = Duration::from_secs(1000);
    let cancel = CancelToken::new();
    let outcome = std::thread::scope(|scope| {
        let marker = fixture.path("started");
        let canceller = cancel.clone();
        scope.spawn(move || {
            wait_for_file(&marker);
            canceller.cancel(CancelLevel::Graceful);
            canceller.cancel(CancelLevel::Immediate);
        });
        fixture.run_with(&cancel)
    });
    assert_eq!(outcome.status, AttemptStatus::Interrupted, "{outcome:?}");
    assert_eq!(outcome.exit, Some(ExitStatus::Signal(9)));
}

#[test]
fn a_cancel_during_prepare_never_starts_execute_but_runs_cleanup() {
    let mut fixture = Fixture::new("touch executed");
    fixture.unit.prepare = Some(Command::Shell("touch prepared; exec sleep 1000".to_owned()));
    fixture.unit.cleanup = Some(Command::Shell("touch cleaned".to_owned()));
    let outcome = run_cancelled_after(&fixture, "prepared", CancelLevel::Graceful);
    assert_eq!(outcome.status, AttemptStatus::Interrupted, "{outcome:?}");
    assert_eq!(outcome.failed_phase, Some(Phase::Prepare));
    assert!(!fixture.path("executed").exists());
    assert!(fixture.path("cleaned").exists());
}

#[test]
fn an_already_cancelled_attempt_starts_nothing() {
    let mut fixture = Fixture::new("touch executed");
    fixture.unit.cleanup = Some(Command::Shell("touch cleaned".to_owned()));
    let cancel = CancelToken::new();
    cancel.cancel(CancelLevel::Graceful);
    let outcome = fixture.run_with(&cancel);
    assert_eq!(outcome.status, AttemptStatus::Interrupted);
    assert!(outcome.phases.is_empty());
    assert!(!fixture.path("executed").exists());
    assert!(!fixture.path("cleaned").exists());
}

#[test]
fn the_timeout_covers_prepare_and_names_it() {
    let mut fixture = Fixture::new("touch executed");
    fixture.unit.prepare = Some(Command::Shell("exec sleep 1000".to_owned()));
    fixture.unit.cleanup = Some(Command::Shell("touch cleaned".to_owned()));
    fixture.unit.timeout = Some(Duration::from_millis(300));
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::TimedOut, "{outcome:?}");
    assert_eq!(outcome.failed_phase, Some(Phase::Prepare));
    assert!(
        outcome
            .error
            .as_deref()
            .unwrap()
            .starts_with("prepare timed out after 300ms")
    );
    assert!(!fixture.path("executed").exists());
    assert!(fixture.path("cleaned").exists());
}

#[test]
fn cleanup_has_its_own_limit() {
    let mut fixture = Fixture::new("true");
    fixture.unit.cleanup = Some(Command::Shell("exec sleep 1000".to_owned()));
    fixture.unit.cleanup_timeout = Duration::from_millis(300);
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::TimedOut, "{outcome:?}");
    assert_eq!(outcome.failed_phase, Some(Phase::Cleanup));
    assert_eq!(outcome.exit, Some(ExitStatus::Signal(15)));
    assert!(
        outcome
            .error
            .as_deref()
            .unwrap()
            .starts_with("cleanup timed out after 300ms (the unit's `cleanup_timeout`)"),
        "{outcome:?}"
    );
}

#[test]
fn a_stopped_unit_is_woken_to_handle_its_sigterm_within_the_grace() {
    let mut fixture = Fixture::new(
        "trap 'touch got-term; exit 3' TERM; echo $$ > started; kill -STOP $$; exit 0",
    );
    // Without the SIGCONT that follows SIGTERM, the SIGTERM would stay pending until the
    // SIGKILL a minute later, and the unit would die of that instead.
    fixture.unit.kill_grace = Duration::from_secs(60);
    let cancel = CancelToken::new();
    let outcome = std::thread::scope(|scope| {
        let marker = fixture.path("started");
        let canceller = cancel.clone();
        scope.spawn(move || {
            wait_for_file(&marker);
            let pid = loop {
                if let Ok(pid) = std::fs::read_to_string(&marker)
                    .unwrap()
                    .trim()
                    .parse::<u32>()
                {
                    break pid;
                }
            };
            // Synchronise on the unit being stopped, not on time.
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            loop {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
                if stat
                    .rsplit_once(')')
                    .unwrap()
                    .1
                    .trim_start()
                    .starts_with('T')
                {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the unit never stopped"
                );
                std::thread::sleep(Duration::from_millis(2));
            }
            canceller.cancel(CancelLevel::Graceful);
        });
        fixture.run_with(&cancel)
    });
    assert_eq!(outcome.status, AttemptStatus::Interrupted, "{outcome:?}");
    assert_eq!(outcome.exit, Some(ExitStatus::Code(3)));
    assert!(fixture.path("got-term").exists());
}

/// A script that starts a process out of the unit's group and session (`setsid`), records its
/// pid in `escaped.pid` once it runs `sleep` (so no sweep meets it between `execve`s), then
/// goes on with `rest`.
fn escaping(rest: &str) -> String {
    format!(
        "setsid sh -c 'echo $$ > escaped.tmp; exec sleep 1000' & \
         while [ ! -s escaped.tmp ] || [ \"$(cat /proc/$(cat escaped.tmp)/comm)\" != sleep ]; \
         do sleep 0.01; done; mv escaped.tmp escaped.pid; {rest}"
    )
}

/// Whether `pid` is gone for good: dead and reaped (not a zombie waiting for this process,
/// which is the child subreaper its orphans fall to).
fn is_reaped(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            let mut fields = rest.split_whitespace();
            let state = fields.next().unwrap_or("");
            let parent = fields.next().unwrap_or("");
            // A zombie of someone else (a recycled pid is alive, or not ours) is not our leak.
            !(state == "Z" && parent == std::process::id().to_string())
        }
    }
}

#[test]
fn a_process_that_leaves_the_group_is_killed_at_the_attempt_s_end_after_cleanup() {
    let mut fixture = Fixture::new(&escaping("true"));
    fixture.unit.cleanup = Some(Command::Shell(
        "if kill -0 \"$(cat escaped.pid)\"; then touch alive-at-cleanup; fi".to_owned(),
    ));
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert!(
        fixture.path("alive-at-cleanup").exists(),
        "cleanup may still talk to what execute left running"
    );
    let escaped: u32 = fixture.read("escaped.pid").trim().parse().unwrap();
    assert!(is_dead(escaped));
    assert!(is_reaped(escaped), "the escaped process is left a zombie");
    // Counted with the last phase's leftovers.
    assert_eq!(
        outcome.phases.last().unwrap().leftovers_killed,
        1,
        "{outcome:?}"
    );
    // Nothing left for the run's sweep.
    assert_eq!(
        apollo_exec::kill_stray_processes(&fixture.run_id).unwrap(),
        0
    );
}

#[test]
fn a_process_that_leaves_the_group_is_killed_at_the_unit_s_timeout_before_cleanup() {
    let mut fixture = Fixture::new(&escaping("exec sleep 1000"));
    fixture.unit.timeout = Some(Duration::from_secs(3));
    fixture.unit.kill_grace = Duration::ZERO;
    fixture.unit.cleanup = Some(Command::Shell(
        "if kill -0 \"$(cat escaped.pid)\"; then touch alive-at-cleanup; fi".to_owned(),
    ));
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::TimedOut, "{outcome:?}");
    let escaped: u32 = fixture.read("escaped.pid").trim().parse().unwrap();
    assert!(
        !fixture.path("alive-at-cleanup").exists(),
        "the escaped process outlived its unit's timeout"
    );
    assert!(is_reaped(escaped), "the escaped process is left a zombie");
}

#[test]
fn an_attempt_s_end_kills_only_its_own_escaped_processes() {
    // Two attempts of one executor: the first ends while the second's escaped process runs.
    let executor = apollo_exec::ProcessExecutor::new(apollo_exec::ExecOptions::default());
    let first = Fixture::new(&escaping("true"));
    let mut second = Fixture::new(&escaping(
        "touch ready; while [ ! -e release ]; do sleep 0.01; done",
    ));
    second.unit.name = "the_other_unit".to_owned();
    std::thread::scope(|scope| {
        let other = scope.spawn(|| second.run_on(&executor, second.dir.path()));
        wait_for_file(&second.path("ready"));
        let outcome = first.run_on(&executor, first.dir.path());
        let first_left = crate::processes_of_run(&first.run_id);
        let others: u32 = second.read("escaped.pid").trim().parse().unwrap();
        let still_running = !is_dead(others);
        // Let the second attempt end before any assertion, so a failure cannot hang the test.
        std::fs::write(second.path("release"), "").unwrap();
        let other_outcome = other.join().unwrap();
        crate::assert_no_survivors(&first.run_id);
        assert!(first_left.is_empty(), "{first_left:?}");
        assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
        assert!(
            still_running,
            "another attempt's escaped process was killed"
        );
        assert_eq!(
            other_outcome.status,
            AttemptStatus::Succeeded,
            "{other_outcome:?}"
        );
    });
    crate::assert_no_survivors(&second.run_id);
}

#[test]
fn a_process_that_drops_its_unit_s_marker_escapes_the_attempt_but_not_kill_stray_processes() {
    // The attempt's end kills the escaped processes that still carry its unit's and attempt's
    // variables; one that removed them (but kept `APOLLO_RUN_ID`) is left to the run's sweep.
    let fixture = Fixture::new(
        "setsid env -u APOLLO_UNIT sh -c 'touch escaped; exec sleep 1000' & \
         while [ ! -e escaped ]; do sleep 0.01; done",
    );
    let outcome = fixture.run_unchecked(&CancelToken::new());
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(outcome.phases[0].leftovers_killed, 0);
    let escaped = crate::processes_of_run(&fixture.run_id);
    assert_eq!(escaped.len(), 1, "the documented limitation: {escaped:?}");

    let killed = apollo_exec::kill_stray_processes(&fixture.run_id).unwrap();
    assert_eq!(killed, 1);
    assert!(is_dead(escaped[0]));
    crate::assert_no_survivors(&fixture.run_id);
    // Nothing left: a second sweep finds nothing.
    assert_eq!(
        apollo_exec::kill_stray_processes(&fixture.run_id).unwrap(),
        0
    );
}

#[test]
fn a_background_job_the_unit_never_waited_for_is_reaped_not_left_a_zombie() {
    // The job exits (almost always) before the unit, whose shell became `sleep`, which never
    // waits for it: it stays a zombie of the unit, which is handed to apollo (the child
    // subreaper) when the unit exits. (Should it still run then, it is a leftover, killed and
    // reaped as such.)
    let fixture = Fixture::new("true & echo $! > job.pid; exec sleep 0.3");
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    let job: u32 = fixture.read("job.pid").trim().parse().unwrap();
    assert!(is_reaped(job), "the unit's zombie was left to apollo");
}
