//! apollo-exec seen from outside the supervising process: when apollo is SIGKILLed, the process
//! groups of the units it was running die too (its guard process kills them), instead of running
//! on unsupervised; what left the group is swept by `kill_stray_processes` on resume.
#![deny(unsafe_code)]
// Allowed only where a libc call has no safe form here.

// The test must start the stand-in supervisor itself.
#![allow(clippy::disallowed_methods)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

/// Wait until `path` exists (a marker the unit creates), with a generous safety net.
fn wait_for_file(path: &Path, supervisor: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        if let Ok(Some(status)) = supervisor.try_wait() {
            panic!("the supervisor ended early with {status}");
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until `pid` runs `program` (its `comm`). A process that `$!` named may still be between
/// its shell's fork and the `execve`s of `setsid` and then `sleep`; while the kernel swaps the
/// memory image in, `/proc/<pid>/environ` reads empty (the sweep looks at such processes again,
/// but the checks below want the process as it will stay).
fn wait_for_program(pid: u32, program: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let wanted = format!("{program}\n");
    while std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .as_deref()
        != Some(&wanted)
    {
        assert!(Instant::now() < deadline, "{pid} never ran {program}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .expect("read a pid marker")
        .trim()
        .parse()
        .expect("a pid in the marker")
}

/// The children of `pid` (over all its threads).
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("list the tasks") {
        let path = task.expect("a task entry").path().join("children");
        if let Ok(list) = std::fs::read_to_string(path) {
            found.extend(
                list.split_whitespace()
                    .map(|pid| pid.parse::<u32>().expect("a child pid")),
            );
        }
    }
    found
}

/// A process pinned by a pidfd: signals and waits reach exactly it, even once its pid is
/// recycled. Dropping it SIGKILLs the process, so nothing outlives the test, pass or fail.
struct Pinned {
    pidfd: OwnedFd,
}

#[allow(unsafe_code)] // pidfd_open(2), poll(2).
impl Pinned {
    fn new(name: &'static str, pid: u32) -> Pinned {
        // SAFETY: pidfd_open returns a new fd or -1.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        assert!(
            raw >= 0,
            "pidfd_open({name}): {}",
            std::io::Error::last_os_error()
        );
        Pinned {
            // SAFETY: a fresh fd from the kernel, owned by nobody else.
            pidfd: unsafe { OwnedFd::from_raw_fd(raw as i32) },
        }
    }

    /// Whether it exits within `timeout_ms` (a safety net: it is expected to be dead already or
    /// to die at once).
    fn exits_within(&self, timeout_ms: i32) -> bool {
        let mut poll = libc::pollfd {
            fd: self.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut poll, 1, timeout_ms) == 1 }
    }
}

#[allow(unsafe_code)] // close(2) of the pidfd.
impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: the pidfd pins the process; this kills exactly it (or nothing, if gone).
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                0,
                0,
            )
        };
    }
}

#[allow(unsafe_code)] // pidfd_send_signal(2).
impl Pinned {
    /// SIGKILL it now.
    fn kill(&self) {
        // SAFETY: the pidfd pins the process; this kills exactly it (or nothing, if gone).
        let sent = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                0,
                0,
            )
        };
        assert_eq!(sent, 0, "{}", std::io::Error::last_os_error());
    }
}

/// The supervisor's children named `apollo-guard`.
fn guards_of(supervisor: u32) -> Vec<u32> {
    children(supervisor)
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .ok()
                .as_deref()
                == Some("apollo-guard\n")
        })
        .collect()
}

/// Start the supervisor and wait until its unit runs.
fn start_supervisor(dir: &Path, run_id: &str) -> std::process::Child {
    let mut supervisor = std::process::Command::new(env!("CARGO_BIN_EXE_exec_supervisor"))
        .arg(dir)
        .arg(run_id)
        .spawn()
        .expect("start the supervisor");
    wait_for_file(&dir.join("leader.pid"), &mut supervisor);
    supervisor
}

#[test]
fn a_killed_guard_is_replaced_while_the_unit_runs_and_the_new_one_kills_the_unit_with_apollo() {
    let dir = tempfile::tempdir().unwrap();
    let run_id = format!("guard-test-{}", std::process::id());
    let mut supervisor = start_supervisor(dir.path(), &run_id);
    let leader_pid = read_pid(&dir.path().join("leader.pid"));
    let leader = Pinned::new("leader", leader_pid);
    let child = Pinned::new(
        "child in the group",
        read_pid(&dir.path().join("child.pid")),
    );
    let escaped_pid = read_pid(&dir.path().join("escaped.pid"));
    let escaped = Pinned::new("child out of the group", escaped_pid);
    // Out of the group for good (not still in `setsid`, before its `setsid()`).
    wait_for_program(escaped_pid, "sleep");
    let first = guards_of(supervisor.id());
    assert_eq!(first.len(), 1, "{first:?}");
    let first_guard = Pinned::new("first guard", first[0]);

    // Someone kills the guard while the unit runs (a `kill -9` by hand, the OOM killer).
    first_guard.kill();
    assert!(first_guard.exits_within(30_000));
    // apollo notices at once (the running phase polls the guard's pidfd) and starts another.
    let deadline = Instant::now() + Duration::from_secs(60);
    let second = loop {
        let guards: Vec<u32> = guards_of(supervisor.id())
            .into_iter()
            .filter(|&pid| pid != first[0])
            .collect();
        if let Some(&guard) = guards.first() {
            break guard;
        }
        if let Ok(Some(status)) = supervisor.try_wait() {
            panic!("the supervisor ended early with {status}");
        }
        assert!(
            Instant::now() < deadline,
            "no new guard: the unit runs unsupervised"
        );
        std::thread::sleep(Duration::from_millis(2));
    };
    let second_guard = Pinned::new("second guard", second);

    supervisor.kill().unwrap();
    supervisor.wait().unwrap();

    // The new guard knows the unit's group (the table carried over).
    assert!(
        leader.exits_within(30_000),
        "the unit outlived its SIGKILLed supervisor after its guard was replaced"
    );
    assert!(
        child.exits_within(30_000),
        "the unit's child outlived its supervisor"
    );
    assert!(
        second_guard.exits_within(30_000),
        "the guard outlived its supervisor"
    );
    assert_eq!(apollo_exec::kill_stray_processes(&run_id).unwrap(), 1);
    assert!(escaped.exits_within(30_000));
}

#[test]
fn sigkilling_the_supervisor_kills_its_unit_s_group_and_the_strays_are_swept_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let run_id = format!("supervisor-test-{}", std::process::id());
    let mut supervisor = std::process::Command::new(env!("CARGO_BIN_EXE_exec_supervisor"))
        .arg(dir.path())
        .arg(&run_id)
        .spawn()
        .unwrap();
    wait_for_file(&dir.path().join("leader.pid"), &mut supervisor);
    let leader_pid = read_pid(&dir.path().join("leader.pid"));
    let child_pid = read_pid(&dir.path().join("child.pid"));
    let escaped_pid = read_pid(&dir.path().join("escaped.pid"));
    // Pin everything before killing the supervisor.
    let leader = Pinned::new("leader", leader_pid);
    let child = Pinned::new("child in the group", child_pid);
    let escaped = Pinned::new("child out of the group", escaped_pid);
    wait_for_program(escaped_pid, "sleep");
    // The unit runs under the supervisor, in its own group, and so does its first child.
    let fields = stat_fields(leader_pid).expect("the unit is running");
    assert_eq!(fields[1], supervisor.id().to_string(), "parent");
    assert_eq!(fields[2], leader_pid.to_string(), "process group");
    let child_fields = stat_fields(child_pid).expect("the child is running");
    assert_eq!(child_fields[2], leader_pid.to_string(), "child's group");
    // The supervisor has one more child: the executor's guard.
    let helpers: Vec<u32> = children(supervisor.id())
        .into_iter()
        .filter(|&pid| pid != leader_pid)
        .collect();
    assert_eq!(helpers.len(), 1, "{helpers:?}");
    let helper = Pinned::new("guard", helpers[0]);
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{}/comm", helpers[0])).unwrap(),
        "apollo-guard\n"
    );

    supervisor.kill().unwrap();
    supervisor.wait().unwrap();

    // Safety nets only: the guard sees its lifeline break as soon as the supervisor is gone.
    assert!(
        leader.exits_within(30_000),
        "the unit outlived its SIGKILLed supervisor"
    );
    assert!(
        child.exits_within(30_000),
        "the unit's child outlived its SIGKILLed supervisor"
    );
    assert!(
        helper.exits_within(30_000),
        "the guard outlived its supervisor"
    );
    // Dead: gone, or a zombie waiting for init.
    for pid in [leader_pid, child_pid] {
        if let Some(fields) = stat_fields(pid) {
            assert_eq!(fields[0], "Z", "{fields:?}");
        }
    }

    // What left the group on purpose is beyond the guard: it runs on, orphaned, until resume
    // sweeps the run's strays.
    assert!(!escaped.exits_within(0), "the escaped child is still there");
    assert_eq!(apollo_exec::kill_stray_processes(&run_id).unwrap(), 1);
    assert!(escaped.exits_within(30_000));
}
