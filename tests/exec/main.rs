//! apollo-exec seen from outside the supervising process: when apollo is SIGKILLed, the units
//! it was running die too (`PR_SET_PDEATHSIG`), instead of running on unsupervised.

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

fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

#[test]
fn sigkilling_the_supervisor_kills_its_unit_and_the_strays_are_swept_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let run_id = format!("supervisor-test-{}", std::process::id());
    let mut supervisor = std::process::Command::new(env!("CARGO_BIN_EXE_exec_supervisor"))
        .arg(dir.path())
        .arg(&run_id)
        .spawn()
        .unwrap();
    wait_for_file(&dir.path().join("leader.pid"), &mut supervisor);
    let leader: u32 = std::fs::read_to_string(dir.path().join("leader.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The unit runs under the supervisor, in its own group.
    let fields = stat_fields(leader).expect("the unit is running");
    assert_eq!(fields[1], supervisor.id().to_string(), "parent");
    assert_eq!(fields[2], leader.to_string(), "process group");

    // Pin the unit's identity before killing its supervisor.
    // SAFETY: pidfd_open returns a new fd or -1.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, leader, 0) };
    assert!(raw >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh fd from the kernel, owned by nobody else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };

    supervisor.kill().unwrap();
    supervisor.wait().unwrap();

    let mut poll = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Safety net only: the unit gets SIGKILL as soon as its parent is gone.
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut poll, 1, 30_000) };
    let alive = ready != 1;
    if alive {
        // Do not leave it behind even when failing.
        // SAFETY: the pidfd pins the process; this kills exactly it.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                libc::SIGKILL,
                0,
                0,
            )
        };
    }
    assert!(!alive, "the unit outlived its SIGKILLed supervisor");
    // Dead: gone, or a zombie waiting for init.
    if let Some(fields) = stat_fields(leader) {
        assert_eq!(fields[0], "Z", "{fields:?}");
    }

    // The leader's own child is not covered by the parent-death signal: it runs on, orphaned,
    // until resume sweeps the run's strays.
    let child: u32 = std::fs::read_to_string(dir.path().join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let child_fields = stat_fields(child).expect("the orphaned child is still there");
    assert_ne!(child_fields[0], "Z");
    assert_eq!(apollo_exec::kill_stray_processes(&run_id).unwrap(), 1);
    if let Some(fields) = stat_fields(child) {
        assert_eq!(fields[0], "Z", "{fields:?}");
    }
}
