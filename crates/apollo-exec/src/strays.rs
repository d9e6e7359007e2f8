//! Killing what a previous apollo process left running: processes that still carry a run's
//! `APOLLO_RUN_ID` after the apollo that ran them died (`kill -9`, power cut of the parent
//! only, a crash). The executor's guard kills each running phase's process group with apollo,
//! but not what left the group (`setsid`, daemons), nor a phase spawned in the microseconds
//! before its group entered the guard's table; resume calls [`kill_stray_processes`] before
//! running anything again.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::process::{PidfdFlags, Signal};

use crate::pidfds::wait_all_exited;
use crate::procfs;

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

/// SIGKILL every live process whose environment has `APOLLO_RUN_ID=<run_id>` (other than the
/// calling process), wait until they are gone, and return how many there were.
///
/// Call it when resuming `run_id`, **before** starting any attempt of it: the attempts this
/// process starts carry the same id. Every process a unit starts inherits the variable, in its
/// group or not (`setsid`, daemons), unless it deliberately cleared its environment; only
/// processes of the same user are visible. Each match is pinned with a pidfd and checked again
/// through it before being signalled, so a recycled pid is never hit.
pub fn kill_stray_processes(run_id: &str) -> Result<u32, StrayError> {
    let needle = format!("APOLLO_RUN_ID={run_id}");
    kill_processes_with_env(needle.as_bytes())
        .map_err(|source| StrayError::ScanProc {
            run_id: run_id.to_owned(),
            source,
        })?
        .wait(STRAY_EXIT_SAFETY_NET)
        .map_err(|source| StrayError::StillRunning {
            run_id: run_id.to_owned(),
            source,
        })
}

/// Processes killed by [`kill_processes_with_env`], to wait for.
struct KilledProcesses {
    pidfds: Vec<OwnedFd>,
}

impl KilledProcesses {
    /// Wait up to `limit` for all of them to exit; return how many there were.
    fn wait(self, limit: Duration) -> io::Result<u32> {
        wait_all_exited(&self.pidfds, limit)?;
        Ok(u32::try_from(self.pidfds.len()).unwrap_or(u32::MAX))
    }
}

/// SIGKILL every live process (but this one) whose environment holds the entry `entry`
/// (`NAME=value`, exactly). Each candidate is pinned with a pidfd, and its environment read
/// again after pinning, so a pid recycled between the scan and the signal is left alone.
fn kill_processes_with_env(entry: &[u8]) -> io::Result<KilledProcesses> {
    let own_pid = rustix::process::getpid();
    let mut pidfds = Vec::new();
    for pid in procfs::all_pids()? {
        if pid == own_pid || !procfs::has_env_entry(pid, entry) {
            continue;
        }
        let Ok(pidfd) = rustix::process::pidfd_open(pid, PidfdFlags::empty()) else {
            continue;
        };
        // The pidfd now names one process for good; if the pid was recycled in between, the
        // new process will not have the entry (or is a legitimate match itself).
        if !procfs::has_env_entry(pid, entry) || !procfs::is_alive(pid) {
            continue;
        }
        if rustix::process::pidfd_send_signal(&pidfd, Signal::KILL).is_ok() {
            pidfds.push(pidfd);
        }
    }
    Ok(KilledProcesses { pidfds })
}
