//! Killing what a previous apollo process left running: processes that still carry a run's
//! `APOLLO_RUN_ID` after the apollo that ran them died (`kill -9`, power cut of the parent
//! only, a crash). The executor's guard kills each running phase's process group with apollo,
//! but not what left the group (`setsid`, daemons), nor a phase spawned in the microseconds
//! before its group entered the guard's table; resume calls [`kill_stray_processes`] before
//! running anything again.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::process::{Pid, PidfdFlags, Signal};

use crate::pidfds::{reap_if_child, wait_all_exited};
use crate::procfs::{self, EnvMatch};

/// The environment entry apollo-slurm's wrapper gives a job's processes: the sweep never kills
/// a process carrying it.
pub const CLUSTER_JOB_MARKER: &[u8] = b"APOLLO_EXECUTOR=slurm";

/// How long to wait for SIGKILLed strays to be gone (only a process stuck in uninterruptible
/// sleep takes more than an instant).
const STRAY_EXIT_SAFETY_NET: Duration = Duration::from_secs(10);

/// Failure to look for or kill a run's stray processes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StrayError {
    /// `/proc` could not be listed.
    #[error("failed to list /proc while looking for processes of run {run_id}")]
    ScanProc {
        /// The run whose processes were looked for.
        run_id: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Processes of the run that apollo may not signal (another user's): named, for their
    /// owner or root to stop. The others were killed and are gone.
    #[error(
        "{processes}: {} to another user, and apollo may not signal {}; its owner or root must stop {} (run {run_id}{})",
        if *n_unsignalled == 1 { "it belongs" } else { "they belong" },
        if *n_unsignalled == 1 { "it" } else { "them" },
        if *n_unsignalled == 1 { "it" } else { "them" },
        if *n_killed > 0 { format!("; {n_killed} other{} killed", if *n_killed == 1 { "" } else { "s" }) } else { String::new() }
    )]
    NotSignalled {
        /// The run whose processes were looked for.
        run_id: String,
        /// Each one not signalled: `process 1234 (sleep, uid 1001)`, comma-separated.
        processes: String,
        /// How many were not signalled.
        n_unsignalled: usize,
        /// How many others were killed.
        n_killed: u32,
    },
    /// Some strays were killed but did not exit in time.
    #[error("failed to see processes of run {run_id} exit after SIGKILL")]
    StillRunning {
        /// The run whose processes were killed.
        run_id: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// The value of `APOLLO_RUN_KEY` a unit of run `run_id` of the state directory `state_dir`
/// gets: 32 hex digits of a SHA-256 over both. A run id is unique within its state directory
/// only (two projects started in the same second may pick the same one); the key tells their
/// processes apart, so a sweep never kills another project's units.
pub fn run_key(state_dir: Option<&Path>, run_id: &str) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut material = b"apollo run key\0".to_vec();
    if let Some(state_dir) = state_dir {
        material.extend_from_slice(state_dir.as_os_str().as_bytes());
    }
    material.push(0);
    material.extend_from_slice(run_id.as_bytes());
    let mut key = apollo_core::hash::sha256_hex(&material);
    key.truncate(32);
    key
}

/// [`kill_stray_processes`] for a run of the state directory `state_dir`: what units started
/// by a [`ProcessExecutor`](crate::ProcessExecutor) with that
/// [`state_dir`](crate::ExecOptions::state_dir) left running (matched by their
/// `APOLLO_RUN_KEY`, see [`run_key`]).
pub fn kill_stray_processes_in(state_dir: &Path, run_id: &str) -> Result<u32, StrayError> {
    sweep(run_id, &run_key(Some(state_dir), run_id))
}

/// SIGKILL every live process whose environment has the `APOLLO_RUN_KEY` of `run_id` started
/// by an executor without a state directory (see [`run_key`]; other than the calling process),
/// wait until they are gone, and return how many there were.
///
/// Call it when resuming `run_id`, **before** starting any attempt of it: the attempts this
/// process starts carry the same id. Every process a unit starts inherits the variable, in its
/// group or not (`setsid`, daemons), unless it deliberately cleared its environment; only
/// processes of the same user are visible. Each match is pinned with a pidfd and checked again
/// through it before being signalled, so a recycled pid is never hit. A live process whose
/// environment reads empty (as it does for an instant between `execve`s) is looked at again
/// for up to 50 ms after the scan.
pub fn kill_stray_processes(run_id: &str) -> Result<u32, StrayError> {
    sweep(run_id, &run_key(None, run_id))
}

fn sweep(run_id: &str, key: &str) -> Result<u32, StrayError> {
    let needle = format!("APOLLO_RUN_KEY={key}");
    let killed =
        kill_processes_with_env(needle.as_bytes()).map_err(|source| StrayError::ScanProc {
            run_id: run_id.to_owned(),
            source,
        })?;
    let unsignalled = killed.unsignalled.clone();
    let n_killed =
        killed
            .wait(STRAY_EXIT_SAFETY_NET)
            .map_err(|source| StrayError::StillRunning {
                run_id: run_id.to_owned(),
                source,
            })?;
    if unsignalled.is_empty() {
        return Ok(n_killed);
    }
    Err(StrayError::NotSignalled {
        run_id: run_id.to_owned(),
        n_unsignalled: unsignalled.len(),
        processes: unsignalled.join(", "),
        n_killed,
    })
}

/// Processes killed by [`kill_processes_with_env`], to wait for, and those it may not signal.
struct KilledProcesses {
    pidfds: Vec<OwnedFd>,
    /// Each match the kernel would not let apollo signal (EPERM: another user's), named.
    unsignalled: Vec<String>,
}

impl KilledProcesses {
    /// Wait up to `limit` for all of them to exit, reap those that are our children (orphans
    /// handed to this process, the child subreaper); return how many there were.
    fn wait(self, limit: Duration) -> io::Result<u32> {
        wait_all_exited(&self.pidfds, limit)?;
        for pidfd in &self.pidfds {
            reap_if_child(pidfd);
        }
        Ok(u32::try_from(self.pidfds.len()).unwrap_or(u32::MAX))
    }
}

/// How long processes whose environment read empty are looked at again: one caught between
/// `execve`s shows its environment within microseconds (see [`procfs::EnvMatch::Empty`]); one
/// with an empty environment never does.
const EMPTY_ENVIRONMENT_PATIENCE: Duration = Duration::from_millis(50);

/// SIGKILL every live process (but this one) whose environment holds the entry `entry`
/// (`NAME=value`, exactly). Each candidate is pinned with a pidfd, and its environment read
/// again after pinning, so a pid recycled between the scan and the signal is left alone. A
/// live process (not a kernel thread) whose environment reads empty may be between `execve`s
/// at that instant: it is looked at again after the scan, for a while.
fn kill_processes_with_env(entry: &[u8]) -> io::Result<KilledProcesses> {
    kill_processes_with_env_read_by(entry, &|pid, entries| procfs::env_match(pid, entries))
}

/// [`kill_processes_with_env`], reading environments with `read` (tests stand in for the
/// kernel's timing with it).
fn kill_processes_with_env_read_by(
    entry: &[u8],
    read: &dyn Fn(Pid, &[&[u8]]) -> EnvMatch,
) -> io::Result<KilledProcesses> {
    let own_pid = rustix::process::getpid();
    let mut found = KilledProcesses {
        pidfds: Vec::new(),
        unsignalled: Vec::new(),
    };
    let mut empty = Vec::new();
    for pid in procfs::all_pids()? {
        if pid != own_pid {
            look_at(pid, entry, read, &mut found, &mut empty);
        }
    }
    let start = Instant::now();
    while !empty.is_empty() && start.elapsed() < EMPTY_ENVIRONMENT_PATIENCE {
        std::thread::sleep(Duration::from_micros(200));
        for pid in std::mem::take(&mut empty) {
            look_at(pid, entry, read, &mut found, &mut empty);
        }
    }
    Ok(found)
}

/// `process 1234 (sleep, uid 1001)`: a process apollo may not signal, for a message.
fn describe_process(pid: Pid) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let proc_dir = format!("/proc/{}", pid.as_raw_nonzero());
    let name = std::fs::read_to_string(format!("{proc_dir}/comm"))
        .map(|name| name.trim_end().to_owned())
        .unwrap_or_else(|_| "?".to_owned());
    match std::fs::metadata(&proc_dir) {
        Ok(meta) => format!(
            "process {} ({name}, uid {})",
            pid.as_raw_nonzero(),
            meta.uid()
        ),
        Err(_) => format!("process {} ({name})", pid.as_raw_nonzero()),
    }
}

/// Kill `pid` (pinned in `pidfds`) if its environment holds `entry`; add it to `empty` if that
/// read empty and it is a live process that has an environment.
fn look_at(
    pid: Pid,
    entry: &[u8],
    read: &dyn Fn(Pid, &[&[u8]]) -> EnvMatch,
    found: &mut KilledProcesses,
    empty: &mut Vec<Pid>,
) {
    let entries = [entry];
    let mut retry_if_live = |pid| {
        if procfs::read_stat_head(pid).is_some_and(|head| !head.is_dead() && !head.kernel_thread) {
            empty.push(pid);
        }
    };
    match read(pid, &entries) {
        EnvMatch::All => {}
        EnvMatch::Empty => return retry_if_live(pid),
        EnvMatch::Not | EnvMatch::Unreadable => return,
    }
    // A cluster job's processes (on a node that is also this machine) are not strays: they
    // outlive apollo on purpose and a resume reattaches to them (DESIGN §17).
    if read(pid, &[CLUSTER_JOB_MARKER]) == EnvMatch::All {
        return;
    }
    let Ok(pidfd) = rustix::process::pidfd_open(pid, PidfdFlags::empty()) else {
        return;
    };
    // The pidfd now names one process for good; if the pid was recycled in between, the new
    // process will not have the entry (or is a legitimate match itself).
    match read(pid, &entries) {
        EnvMatch::All => {}
        EnvMatch::Empty => return retry_if_live(pid),
        EnvMatch::Not | EnvMatch::Unreadable => return,
    }
    if procfs::is_alive(pid) {
        match rustix::process::pidfd_send_signal(&pidfd, Signal::KILL) {
            Ok(()) => found.pidfds.push(pidfd),
            // Another user's: named, never fatal (DESIGN §18).
            Err(rustix::io::Errno::PERM) => found.unsignalled.push(describe_process(pid)),
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt as _;

    #[test]
    fn a_process_whose_environment_reads_empty_during_the_scan_is_looked_at_again() {
        // A stray whose `/proc/<pid>/environ` reads empty the first time, as it does for a
        // process between `execve`s (the kernel's timing, stood in for by the reader).
        let run_id = format!("strays-unit-test-{}", std::process::id());
        #[allow(clippy::disallowed_methods)]
        let child = std::process::Command::new("sleep")
            .arg("1000")
            .env("APOLLO_RUN_ID", &run_id)
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = Pid::from_child(&child);
        let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty()).unwrap();
        // Not waited for by `child`: the sweep reaps it.
        drop(child);
        let own = || rustix::process::getpid().as_raw_pid();
        let needle = format!("APOLLO_RUN_ID={run_id}");
        // Wait until it runs `sleep` (until then it carries the test's environment too).
        while procfs::env_match(pid, &[needle.as_bytes()]) != EnvMatch::All {
            std::thread::yield_now();
        }
        let first_read = std::sync::atomic::AtomicBool::new(true);
        let read = |candidate: Pid, entries: &[&[u8]]| {
            if candidate == pid && first_read.swap(false, std::sync::atomic::Ordering::SeqCst) {
                return EnvMatch::Empty;
            }
            procfs::env_match(candidate, entries)
        };
        let killed = kill_processes_with_env_read_by(needle.as_bytes(), &read)
            .unwrap()
            .wait(STRAY_EXIT_SAFETY_NET)
            .unwrap();
        // The sweep reaped it (our child); whatever happened, it is gone after this, through
        // the pidfd (its pid may be free already).
        let _ = rustix::process::pidfd_send_signal(&pidfd, Signal::KILL);
        crate::pidfds::reap_if_child(&pidfd);
        assert_eq!(killed, 1, "the stray was missed");
        assert!(!first_read.load(std::sync::atomic::Ordering::SeqCst));
        assert!(
            !std::path::Path::new(&format!("/proc/{}", pid.as_raw_pid())).exists()
                || procfs::read_stat_head(pid).is_some_and(|head| head.parent != own()),
            "the killed stray was left a zombie"
        );
    }
}
