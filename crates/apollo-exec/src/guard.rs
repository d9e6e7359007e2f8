//! The guard: one small helper process per executor that SIGKILLs the process groups of the
//! running phases when apollo dies (or the executor is dropped without reaping them).
//!
//! * A **table** of process-group ids (`sys::shared_table`) that apollo and the helper both
//!   see. A phase takes a slot before its spawn (marked [`RESERVED`]); the spawned child
//!   writes its own group id there before it execs (`sys::clone_child`: it shares apollo's
//!   memory until then), and apollo again after the spawn ([`Slot::arm`]); the slot is
//!   cleared before its leader is reaped ([`Slot::disarm`]). Until its exec the child also
//!   holds the pipe's write end below (close-on-exec), so the helper cannot see apollo gone
//!   before the group is in the table: while the helper lives, no moment of apollo's death
//!   leaves a running unit unregistered. (The one exception: a replacement helper started
//!   while a child is between its `clone` and its exec, and apollo killed in those same
//!   microseconds — the child holds the old helper's pipe.) Armed only by apollo after the
//!   spawn, a group whose apollo was starved of CPU and then killed could outlive it: seen
//!   under load in the exec tests (docs/reliability-log.md, finding 5). While the leader is an
//!   unreaped zombie its pid (the group id) cannot be reused, so disarm-then-reap leaves no
//!   window in which the table names a stranger.
//!   Arming and disarming are plain atomic stores: no syscall, no wake-up of the helper.
//! * A **pipe** whose write end only apollo holds (`O_CLOEXEC`, so no unit inherits it). The
//!   helper (`sys::guard_helper`) blocks in `read` on the other end; `read` returns 0 (EOF)
//!   when apollo is gone, however it died. The helper then sends SIGKILL to every armed group
//!   and exits.
//!
//! The helper is started lazily, by the first phase that needs it. Its pidfd is part of every
//! running phase's `poll` (no extra syscall): when the helper dies (killed by hand, OOM) the
//! first phase to wake starts a replacement ([`Slot::rearm`]), and the table, which apollo owns,
//! carries over, so every running group is guarded again at once. Before every spawn apollo
//! also checks it (one `waitid(WNOHANG)` on its pidfd); a phase that cannot get a helper is
//! not started. Dropping the guard kills and reaps the helper.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, WaitOptions};

use crate::pidfds::reap_if_child;

use crate::sys::guard_helper;
use crate::sys::shared_table::{SLOTS, Table};

/// A slot taken by a phase that has not spawned yet (or whose spawn failed).
pub(crate) const RESERVED: i32 = -1;

/// The running helper process.
struct Helper {
    pid: Pid,
    /// Pins the helper: it becomes readable when the helper dies, which the running phases
    /// watch (see [`Guard::rearm`]), and every wait and signal goes through it.
    pidfd: Arc<OwnedFd>,
    /// The pipe's write end: the helper sees EOF when this (and apollo) is gone.
    _lifeline: OwnedFd,
}

impl Helper {
    /// Whether it already exited (then it is reaped here).
    fn has_exited(&self) -> bool {
        // An error (ECHILD) would mean someone else reaped it: gone as well. Through the pidfd,
        // so a recycled pid is never waited for.
        !matches!(
            rustix::process::waitid(
                WaitId::PidFd(self.pidfd.as_fd()),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG
            ),
            Ok(None)
        )
    }

    /// Kill and reap it.
    fn stop(self) {
        let _ = rustix::process::pidfd_send_signal(&*self.pidfd, Signal::KILL);
        reap_if_child(&self.pidfd);
    }
}

/// Reap our child `pid`, retrying on `EINTR`.
fn reap_quietly(pid: Pid) {
    while matches!(
        rustix::process::waitpid(Some(pid), WaitOptions::empty()),
        Err(rustix::io::Errno::INTR)
    ) {}
}

/// One executor's guard (shared by its clones). Nothing exists until the first phase.
#[derive(Default)]
pub(crate) struct Guard {
    /// Created once, by the first phase; outlives every helper.
    table: OnceLock<Table>,
    /// The current helper; replaced when it died.
    helper: Mutex<Option<Helper>>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let helper = self
            .helper
            .lock()
            .ok()
            .and_then(|helper| helper.as_ref().map(|helper| helper.pid.as_raw_pid()));
        formatter
            .debug_struct("Guard")
            .field("helper_pid", &helper)
            .finish()
    }
}

/// A phase's place in the guard's table.
pub(crate) struct Slot<'g> {
    guard: &'g Guard,
    entry: &'g AtomicI32,
    /// The pidfd of the helper that watches the table, for the phase to notice its death
    /// (`None` once it died and no other could be started).
    watch: Option<Arc<OwnedFd>>,
}

impl Slot<'_> {
    /// The entry the spawned child arms itself (see the module docs).
    pub(crate) fn entry(&self) -> &AtomicI32 {
        self.entry
    }

    /// The phase's group `pgid` now runs: kill it if apollo dies.
    pub(crate) fn arm(&self, pgid: Pid) {
        self.entry.store(pgid.as_raw_pid(), Ordering::Release);
    }

    /// Whether `pid` leads a phase of this executor now: its entry is armed (the child arms it
    /// before its `exec`; it is disarmed before the leader is reaped, so the pid cannot name
    /// another process meanwhile).
    pub(crate) fn leads_a_phase(&self, pid: i32) -> bool {
        self.guard
            .table
            .get()
            .is_some_and(|table| table.armed().any(|armed| armed == pid))
    }

    /// Stop guarding (call before reaping the leader, whose zombie pins the group id).
    pub(crate) fn disarm(self) {
        drop(self);
    }

    /// A descriptor that becomes readable when the guard's helper dies.
    pub(crate) fn watch(&self) -> Option<BorrowedFd<'_>> {
        self.watch.as_deref().map(AsFd::as_fd)
    }

    /// The helper died (its [`Slot::watch`] is readable): start another, which sees the same
    /// table, so every armed group is guarded again. On failure the slot stops watching (the
    /// next spawn tries again, and is not started without a guard).
    pub(crate) fn rearm(&mut self) -> io::Result<()> {
        match self.guard.current_helper() {
            Ok(pidfd) => {
                self.watch = Some(pidfd);
                Ok(())
            }
            Err(error) => {
                self.watch = None;
                Err(error)
            }
        }
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.entry.store(0, Ordering::Release);
    }
}

impl Guard {
    /// The guard's table, created on first use (call under the helper's lock).
    fn table(&self) -> io::Result<&Table> {
        match self.table.get() {
            Some(table) => Ok(table),
            None => {
                // Only set under the lock, so nobody else sets it in between.
                let _ = self.table.set(Table::new()?);
                self.table
                    .get()
                    .ok_or_else(|| io::Error::other("the guard's table is missing"))
            }
        }
    }

    /// Replace a helper that died (reaping it), start one if there is none, and return it.
    fn live_helper<'h>(helper: &'h mut Option<Helper>, table: &Table) -> io::Result<&'h Helper> {
        if helper.as_ref().is_some_and(Helper::has_exited) {
            // Reaped by `has_exited`; the table carries over to its replacement.
            *helper = None;
        }
        if helper.is_none() {
            *helper = Some(start_helper(table)?);
        }
        helper
            .as_ref()
            .ok_or_else(|| io::Error::other("the guard's helper is missing"))
    }

    /// The pidfd of a live helper, started anew if the last one died.
    fn current_helper(&self) -> io::Result<Arc<OwnedFd>> {
        let mut helper = self
            .helper
            .lock()
            .map_err(|_| io::Error::other("the guard's lock is poisoned"))?;
        let table = self.table()?;
        Ok(Arc::clone(&Guard::live_helper(&mut helper, table)?.pidfd))
    }

    /// Make sure a helper is watching and take a slot for one phase.
    pub(crate) fn reserve(&self) -> io::Result<Slot<'_>> {
        let mut helper = self
            .helper
            .lock()
            .map_err(|_| io::Error::other("the guard's lock is poisoned"))?;
        let table = self.table()?;
        let watch = Arc::clone(&Guard::live_helper(&mut helper, table)?.pidfd);
        // Slots are taken under the lock and freed by a plain store, so a free one is 0.
        let entries = table.entries();
        let high_water = table.high_water();
        for (index, entry) in entries.iter().enumerate().skip(1) {
            if entry
                .compare_exchange(0, RESERVED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                if index >= high_water {
                    let mark = i32::try_from(index + 1).unwrap_or(i32::MAX);
                    entries[0].store(mark, Ordering::Release);
                }
                return Ok(Slot {
                    guard: self,
                    entry,
                    watch: Some(watch),
                });
            }
        }
        Err(io::Error::other(format!(
            "more than {SLOTS} phases are running at once under one executor"
        )))
    }

    /// The helper's pid, if it runs (for tests).
    #[cfg(test)]
    pub(crate) fn helper_pid(&self) -> Option<Pid> {
        self.helper.lock().ok()?.as_ref().map(|helper| helper.pid)
    }

    /// What apollo's death looks like to the helper: close the lifeline, then reap the helper
    /// once it has done its work (for tests).
    #[cfg(test)]
    fn cut_lifeline(&self) {
        let helper = self.helper.lock().ok().and_then(|mut helper| helper.take());
        if let Some(Helper { pid, _lifeline, .. }) = helper {
            drop(_lifeline);
            let status = loop {
                match rustix::process::waitpid(Some(pid), WaitOptions::empty()) {
                    Err(rustix::io::Errno::INTR) => continue,
                    // ok: a test-only helper; a failed wait is the test's failure.
                    other => break other.unwrap().unwrap().1,
                }
            };
            assert_eq!(status.exit_status(), Some(0), "{status:?}");
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // No phase can be running (they borrow the guard, and a phase's drop reaps its
        // group), so nothing should be armed; should a slot have been leaked armed, do what
        // the helper would have done.
        if let Some(table) = self.table.get() {
            for pgid in table.armed() {
                if let Some(pgid) = Pid::from_raw(pgid) {
                    // The group's leader was never reaped (it is reaped only after its slot is
                    // disarmed), so the id names the unit's group.
                    let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
                }
            }
        }
        let helper = match self.helper.get_mut() {
            Ok(helper) => helper.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(helper) = helper {
            helper.stop();
        }
    }
}

/// Start a helper that watches `table`. Closed standard descriptors are reopened first (see
/// `stdio`), so the pipe's ends cannot take their numbers.
fn start_helper(table: &Table) -> io::Result<Helper> {
    crate::stdio::reopen_closed_standard_descriptors();
    let (read_end, write_end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let pid = guard_helper::fork(read_end, table)?;
    match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
        Ok(pidfd) => Ok(Helper {
            pid,
            pidfd: Arc::new(pidfd),
            _lifeline: write_end,
        }),
        Err(error) => {
            // Our unreaped child: its pid names it.
            let _ = rustix::process::kill_process(pid, Signal::KILL);
            reap_quietly(pid);
            Err(error.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// `(state, ppid)` of `pid` from `/proc`, `None` once it is gone (reaped).
    fn state_and_parent(pid: i32) -> Option<(char, i32)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, rest) = stat.rsplit_once(')')?;
        let mut fields = rest.split_whitespace();
        let state = fields.next()?.chars().next()?;
        Some((state, fields.next()?.parse().ok()?))
    }

    fn own_live_child(pid: Pid) -> bool {
        let own = i32::try_from(std::process::id()).unwrap();
        matches!(state_and_parent(pid.as_raw_pid()), Some((state, parent)) if parent == own && state != 'Z')
    }

    /// A `sleep` in its own group, pinned by a pidfd.
    fn sleeper() -> (std::process::Child, OwnedFd) {
        #[allow(clippy::disallowed_methods)]
        let child = std::process::Command::new("sleep")
            .arg("1000")
            .process_group(0)
            .spawn()
            .unwrap();
        let pidfd = rustix::process::pidfd_open(
            Pid::from_child(&child),
            rustix::process::PidfdFlags::empty(),
        )
        .unwrap();
        (child, pidfd)
    }

    fn exited(pidfd: &OwnedFd, timeout: std::time::Duration) -> bool {
        use rustix::event::{PollFd, PollFlags};
        let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
        let timeout = rustix::event::Timespec::try_from(timeout).unwrap();
        rustix::event::poll(&mut fds, Some(&timeout)).unwrap() == 1
    }

    #[test]
    fn the_helper_starts_with_the_first_phase_and_the_drop_reaps_it() {
        let guard = Guard::default();
        assert_eq!(guard.helper_pid(), None);
        let slot = guard.reserve().unwrap();
        let helper = guard.helper_pid().unwrap();
        assert!(own_live_child(helper));
        // It names itself first thing after the fork.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let comm = format!("/proc/{}/comm", helper.as_raw_pid());
        while std::fs::read_to_string(&comm).unwrap() != "apollo-guard\n" {
            assert!(
                std::time::Instant::now() < deadline,
                "the helper never named itself"
            );
            std::thread::yield_now();
        }
        // Its own session, so a Ctrl-C at apollo's terminal does not reach it.
        assert_eq!(rustix::process::getsid(Some(helper)), Ok(helper));
        // A second phase shares the helper and gets another slot.
        let other = guard.reserve().unwrap();
        assert_eq!(guard.helper_pid(), Some(helper));
        assert!(!std::ptr::eq(slot.entry, other.entry));
        drop((slot, other));
        drop(guard);
        assert_eq!(
            state_and_parent(helper.as_raw_pid()),
            None,
            "the helper is reaped"
        );
    }

    #[test]
    fn a_dead_helper_is_replaced_and_the_table_carries_over() {
        let guard = Guard::default();
        let (mut child, pidfd) = sleeper();
        let slot = guard.reserve().unwrap();
        slot.arm(Pid::from_child(&child));
        let first = guard.helper_pid().unwrap();
        rustix::process::kill_process(first, Signal::KILL).unwrap();
        while own_live_child(first) {
            std::thread::yield_now();
        }
        let _next = guard.reserve().unwrap();
        let second = guard.helper_pid().unwrap();
        assert_ne!(first, second);
        assert_eq!(
            state_and_parent(first.as_raw_pid()),
            None,
            "the dead helper is reaped"
        );
        // The new helper knows the group armed under the old one.
        guard.cut_lifeline();
        assert!(
            exited(&pidfd, std::time::Duration::from_secs(30)),
            "the armed group outlived the guard"
        );
        let _ = child.wait();
    }

    #[test]
    fn when_the_lifeline_breaks_the_armed_groups_die_and_only_they() {
        let guard = Guard::default();
        let (mut armed, armed_fd) = sleeper();
        let (mut disarmed, disarmed_fd) = sleeper();
        let (mut reserved, reserved_fd) = sleeper();
        let armed_slot = guard.reserve().unwrap();
        armed_slot.arm(Pid::from_child(&armed));
        let disarmed_slot = guard.reserve().unwrap();
        disarmed_slot.arm(Pid::from_child(&disarmed));
        disarmed_slot.disarm();
        let _reserved_slot = guard.reserve().unwrap();
        guard.cut_lifeline();
        // The helper has exited: whatever it was going to kill is dead by now.
        assert!(exited(&armed_fd, std::time::Duration::from_secs(30)));
        assert!(!exited(&disarmed_fd, std::time::Duration::ZERO));
        assert!(!exited(&reserved_fd, std::time::Duration::ZERO));
        for child in [&mut armed, &mut disarmed, &mut reserved] {
            let _ = child.kill();
            let _ = child.wait();
        }
        drop(armed_slot);
    }
}
