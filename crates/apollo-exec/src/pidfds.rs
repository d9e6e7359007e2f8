//! Waiting for processes pinned by pidfds: a pidfd names one process for good, even once its
//! pid is recycled, and becomes readable when that process exits.

use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

/// Wait until every pidfd is readable (its process exited), up to `limit`.
pub(crate) fn wait_all_exited(pidfds: &[OwnedFd], limit: Duration) -> io::Result<()> {
    let deadline = Instant::now() + limit;
    let mut pending: Vec<PollFd<'_>> = pidfds
        .iter()
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .collect();
    while !pending.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{} process(es) did not exit within {limit:?} of SIGKILL",
                    pending.len(),
                ),
            ));
        }
        let timeout = Timespec::try_from(left).map_err(io::Error::other)?;
        match rustix::event::poll(&mut pending, Some(&timeout)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(error) => return Err(error.into()),
        }
        pending.retain(|entry| entry.revents().is_empty());
    }
    Ok(())
}

/// Reap the process `pidfd` names, once it has exited, if it is this process's child (an
/// orphan handed to apollo as child subreaper). Through the pidfd (`waitid(P_PIDFD)`), so a
/// recycled pid cannot make this reap anything else. `false` when it is not our child (or
/// someone reaped it first).
pub(crate) fn reap_if_child(pidfd: &OwnedFd) -> bool {
    use rustix::process::{WaitId, WaitIdOptions};
    use std::os::fd::AsFd;
    loop {
        match rustix::process::waitid(WaitId::PidFd(pidfd.as_fd()), WaitIdOptions::EXITED) {
            Ok(_) => return true,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}
