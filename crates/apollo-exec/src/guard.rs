//! The guard: one small helper process per executor that SIGKILLs the process groups of the
//! running phases when apollo dies (or the executor is dropped without reaping them).
//!
//! Why a helper instead of `PR_SET_PDEATHSIG`: the parent-death signal must be armed in the
//! child between `fork` and `exec` (a `pre_exec` hook), which forces std off its `posix_spawn`
//! (vfork-style) path onto a real `fork` of a multi-threaded process whose page tables grow
//! with the run; and it only ever killed each phase's leader, never the rest of its group.
//!
//! How it works:
//!
//! * A **table** of `SLOTS` process-group ids lives in a `MAP_SHARED` anonymous mapping that
//!   apollo and the helper both see. A phase takes a slot before its spawn (marked
//!   [`RESERVED`]), writes its group id there right after the spawn ([`Slot::arm`]) and clears it
//!   before reaping its leader ([`Slot::disarm`]). While the leader is an unreaped zombie its pid
//!   (the group id) cannot be reused, so disarm-then-reap leaves no window in which the table
//!   names a stranger. Arming and disarming are plain atomic stores: no syscall, no message,
//!   no wake-up of the helper.
//! * A **pipe** whose write end only apollo holds (`O_CLOEXEC`, so no unit inherits it). The
//!   helper blocks in `read` on the other end; `read` returns 0 (EOF) when apollo is gone,
//!   however it died. The helper then sends SIGKILL to every armed group (`kill(-pgid)`) and
//!   exits.
//! * The helper is `fork`ed from a multi-threaded process, so until it exits it only makes
//!   async-signal-safe raw calls (`prctl`, `setsid`, `sigaction`, `sigprocmask`, `close_range`,
//!   `read`, `kill`, `_exit`): no allocation, no lock, no std I/O. It leaves apollo's session
//!   (a Ctrl-C at the terminal does not reach it), ignores the termination signals a
//!   `pkill apollo` would send it, closes every inherited descriptor (so it holds no lock file,
//!   log or terminal open, and no other executor's pipe), and names itself `apollo-guard`.
//!   Forking it once costs one copy of apollo's page tables, like a single fork-spawned unit.
//!
//! The helper is started lazily, by the first phase that needs it. Before every spawn apollo
//! checks it with one `waitpid(WNOHANG)`: one that died (killed by hand, OOM) is reaped and
//! replaced, and the table, which apollo owns, carries over. Dropping the guard kills and reaps
//! the helper (nothing is armed then, as no phase is running).

// The helper is the one process apollo-exec forks itself; it is created here only.
#![allow(clippy::disallowed_methods)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};

/// Slots in the table: the most phases one executor can run at once. Entry 0 is not a slot: it
/// holds the high-water mark (one past the highest slot ever taken), so the helper scans only
/// the part of the table that was used.
const SLOTS: usize = 1 << 16;

/// A slot taken by a phase that has not spawned yet (or whose spawn failed).
const RESERVED: i32 = -1;

/// The shared table: `SLOTS + 1` atomic `i32`s in a `MAP_SHARED` anonymous mapping.
struct Table {
    base: NonNull<AtomicI32>,
}

// SAFETY: the mapping is plain shared memory accessed only through atomics.
unsafe impl Send for Table {}
// SAFETY: as above.
unsafe impl Sync for Table {}

impl Table {
    const BYTES: usize = (SLOTS + 1) * std::mem::size_of::<AtomicI32>();

    fn new() -> io::Result<Table> {
        // SAFETY: an anonymous shared mapping; no file, no fixed address.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Table::BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if address == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(address.cast::<AtomicI32>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(Table { base })
    }

    /// Entry 0 (the high-water mark), then the slots.
    fn entries(&self) -> &[AtomicI32] {
        // SAFETY: a live, zero-initialised, suitably aligned mapping of `SLOTS + 1` atomics,
        // only ever accessed atomically, unmapped only when `self` is dropped.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), SLOTS + 1) }
    }

    /// One past the highest slot ever taken.
    fn high_water(&self) -> usize {
        usize::try_from(self.entries()[0].load(Ordering::Acquire))
            .unwrap_or(0)
            .min(SLOTS + 1)
    }

    /// Armed group ids (in the slots used so far).
    fn armed(&self) -> impl Iterator<Item = i32> + '_ {
        self.entries()[..self.high_water()]
            .iter()
            .skip(1)
            .map(|entry| entry.load(Ordering::Acquire))
            .filter(|&pgid| pgid > 0)
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` created; nothing refers to it any more
        // (slots borrow the guard that owns the table).
        unsafe { libc::munmap(self.base.as_ptr().cast(), Table::BYTES) };
    }
}

/// The running helper process.
struct Helper {
    pid: libc::pid_t,
    /// The pipe's write end: the helper sees EOF when this (and apollo) is gone.
    _lifeline: OwnedFd,
}

impl Helper {
    /// Whether it already exited (then it is reaped here).
    fn has_exited(&self) -> bool {
        let mut status = 0;
        // SAFETY: a plain syscall on our own child.
        let result = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        // `-1` (ECHILD) would mean someone else reaped it: gone as well.
        result != 0
    }

    /// Kill and reap it.
    fn stop(self) {
        // SAFETY: `pid` is our unreaped child (or already reaped by `has_exited`, in which
        // case the caller does not call this), so it cannot name another process.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        let mut status = 0;
        // SAFETY: a plain syscall on our own child.
        while unsafe { libc::waitpid(self.pid, &mut status, 0) } < 0
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
    }
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
            .and_then(|helper| helper.as_ref().map(|helper| helper.pid));
        formatter
            .debug_struct("Guard")
            .field("helper_pid", &helper)
            .finish()
    }
}

/// A phase's place in the guard's table.
pub(crate) struct Slot<'g> {
    entry: &'g AtomicI32,
}

impl Slot<'_> {
    /// The phase's group `pgid` now runs: kill it if apollo dies.
    pub(crate) fn arm(&self, pgid: i32) {
        self.entry.store(pgid, Ordering::Release);
    }

    /// Stop guarding (call before reaping the leader, whose zombie pins the group id).
    pub(crate) fn disarm(self) {
        drop(self);
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.entry.store(0, Ordering::Release);
    }
}

impl Guard {
    /// Make sure a helper is watching and take a slot for one phase.
    pub(crate) fn reserve(&self) -> io::Result<Slot<'_>> {
        let mut helper = self
            .helper
            .lock()
            .map_err(|_| io::Error::other("the guard's lock is poisoned"))?;
        let table = match self.table.get() {
            Some(table) => table,
            None => {
                // Only set under the lock, so nobody else sets it in between.
                let _ = self.table.set(Table::new()?);
                self.table
                    .get()
                    .ok_or_else(|| io::Error::other("the guard's table is missing"))?
            }
        };
        if helper.as_ref().is_some_and(Helper::has_exited) {
            // Reaped by `has_exited`; the table carries over to its replacement.
            *helper = None;
        }
        if helper.is_none() {
            *helper = Some(spawn_helper(table)?);
        }
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
                return Ok(Slot { entry });
            }
        }
        Err(io::Error::other(format!(
            "more than {SLOTS} phases are running at once under one executor"
        )))
    }

    /// The helper's pid, if it runs (for tests).
    #[cfg(test)]
    pub(crate) fn helper_pid(&self) -> Option<i32> {
        self.helper.lock().ok()?.as_ref().map(|helper| helper.pid)
    }

    /// What apollo's death looks like to the helper: close the lifeline, then reap the helper
    /// once it has done its work (for tests).
    #[cfg(test)]
    fn cut_lifeline(&self) {
        let helper = self.helper.lock().ok().and_then(|mut helper| helper.take());
        if let Some(Helper { pid, _lifeline }) = helper {
            drop(_lifeline);
            let mut status = 0;
            // SAFETY: a plain syscall on our own child.
            while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
                && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
            {}
            assert!(
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                "{status}"
            );
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // No phase can be running (they borrow the guard), so nothing should be armed; should
        // a phase have been abandoned armed, do what the helper would have done.
        if let Some(table) = self.table.get() {
            for pgid in table.armed() {
                // SAFETY: a plain syscall; the group's leader was never reaped (it is reaped
                // only after its slot is disarmed), so the id names the unit's group.
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
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

/// Fork the helper that watches `table`.
fn spawn_helper(table: &Table) -> io::Result<Helper> {
    let mut fds: [RawFd; 2] = [-1, -1];
    // SAFETY: `fds` is a valid array of two fds for the call to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just handed us these fds; nobody else owns them.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let base = table.base.as_ptr();
    // Block every signal across the fork, so none of apollo's handlers runs in the child
    // before it has reset them (`helper_main` unblocks).
    // SAFETY: sigset_t is plain data; sigfillset initialises it.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers to sigsets for the duration of the calls.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
    }
    // SAFETY: fork in a multi-threaded process: the child runs `helper_main`, which makes only
    // async-signal-safe calls and never returns.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: we are the freshly forked child; see `helper_main`.
        unsafe { helper_main(read_end.as_raw_fd(), base) }
    }
    let fork_error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    if pid < 0 {
        return Err(fork_error);
    }
    drop(read_end);
    Ok(Helper {
        pid,
        _lifeline: write_end,
    })
}

/// Signals the helper ignores: those a terminal, a hang-up or a `pkill apollo` would send.
const IGNORED_SIGNALS: [libc::c_int; 8] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGPIPE,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
];

/// The helper's whole life, in the forked child.
///
/// # Safety
///
/// Only in the child of `fork`, with `lifeline` the pipe's read end and `table` the base of the
/// guard's shared table. Only async-signal-safe calls; never returns.
unsafe fn helper_main(lifeline: RawFd, table: *mut AtomicI32) -> ! {
    // SAFETY (whole function): raw syscalls with valid arguments; memory touched is the stack
    // and the shared table.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"apollo-guard".as_ptr(), 0, 0, 0);
        // Out of apollo's session and process group: a Ctrl-C at the terminal, or a kill of
        // apollo's group, does not reach the helper.
        libc::setsid();
        // No handler of apollo's may run here (all signals are still blocked, as they were
        // across the fork): default for everything, ignore the termination signals, unblock.
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        for signal in 1..65 {
            if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
        action.sa_sigaction = libc::SIG_IGN;
        for signal in IGNORED_SIGNALS {
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        close_all_but(lifeline);

        let mut byte = 0_u8;
        loop {
            let read = libc::read(lifeline, (&raw mut byte).cast(), 1);
            if read > 0 {
                continue;
            }
            if read < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            break;
        }
        // apollo is gone (or the executor was dropped): kill every group still armed.
        let high_water = (*table).load(Ordering::Acquire);
        let high_water = if high_water > 0 {
            (high_water as usize).min(SLOTS + 1)
        } else {
            0
        };
        for index in 1..high_water {
            let pgid = (*table.add(index)).load(Ordering::Acquire);
            if pgid > 0 {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
        libc::_exit(0)
    }
}

/// Close every descriptor but `keep`.
///
/// # Safety
///
/// Only in the forked helper: it closes descriptors others in this process may think they own.
unsafe fn close_all_but(keep: RawFd) {
    let keep = libc::c_uint::try_from(keep).unwrap_or(0);
    // SAFETY: close_range takes plain integers.
    let closed = unsafe {
        (keep == 0 || libc::syscall(libc::SYS_close_range, 0, keep - 1, 0) == 0)
            && libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0) == 0
    };
    if closed {
        return;
    }
    // Before Linux 5.9: close one by one, up to the descriptor limit.
    let mut limit: libc::rlimit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid pointer to an rlimit.
    let top = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        libc::c_int::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 20)
    } else {
        1 << 16
    };
    let keep = libc::c_int::try_from(keep).unwrap_or(-1);
    for fd in 0..top {
        if fd != keep {
            // SAFETY: closing an fd number in this (helper) process.
            unsafe { libc::close(fd) };
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

    fn own_live_child(pid: i32) -> bool {
        let own = i32::try_from(std::process::id()).unwrap();
        matches!(state_and_parent(pid), Some((state, parent)) if parent == own && state != 'Z')
    }

    /// A `sleep` in its own group, pinned by a pidfd.
    fn sleeper() -> (std::process::Child, OwnedFd) {
        let child = std::process::Command::new("sleep")
            .arg("1000")
            .process_group(0)
            .spawn()
            .unwrap();
        // SAFETY: pidfd_open returns a new fd or -1.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id(), 0) };
        assert!(raw >= 0);
        // SAFETY: a fresh fd, owned by nobody else.
        (child, unsafe { OwnedFd::from_raw_fd(raw as RawFd) })
    }

    fn exited(pidfd: &OwnedFd, timeout_ms: i32) -> bool {
        let mut poll = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut poll, 1, timeout_ms) == 1 }
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
        while std::fs::read_to_string(format!("/proc/{helper}/comm")).unwrap() != "apollo-guard\n" {
            assert!(
                std::time::Instant::now() < deadline,
                "the helper never named itself"
            );
            std::thread::yield_now();
        }
        // Its own session, so a Ctrl-C at apollo's terminal does not reach it.
        // SAFETY: plain syscalls.
        unsafe { assert_eq!(libc::getsid(helper), helper) };
        // A second phase shares the helper and gets another slot.
        let other = guard.reserve().unwrap();
        assert_eq!(guard.helper_pid(), Some(helper));
        assert!(!std::ptr::eq(slot.entry, other.entry));
        drop((slot, other));
        drop(guard);
        assert_eq!(state_and_parent(helper), None, "the helper is reaped");
    }

    #[test]
    fn a_dead_helper_is_replaced_and_the_table_carries_over() {
        let guard = Guard::default();
        let (mut child, pidfd) = sleeper();
        let slot = guard.reserve().unwrap();
        slot.arm(i32::try_from(child.id()).unwrap());
        let first = guard.helper_pid().unwrap();
        // SAFETY: our own unreaped child.
        unsafe { libc::kill(first, libc::SIGKILL) };
        while own_live_child(first) {
            std::thread::yield_now();
        }
        let _next = guard.reserve().unwrap();
        let second = guard.helper_pid().unwrap();
        assert_ne!(first, second);
        assert_eq!(state_and_parent(first), None, "the dead helper is reaped");
        // The new helper knows the group armed under the old one.
        guard.cut_lifeline();
        assert!(exited(&pidfd, 30_000), "the armed group outlived the guard");
        let _ = child.wait();
    }

    #[test]
    fn when_the_lifeline_breaks_the_armed_groups_die_and_only_they() {
        let guard = Guard::default();
        let (mut armed, armed_fd) = sleeper();
        let (mut disarmed, disarmed_fd) = sleeper();
        let (mut reserved, reserved_fd) = sleeper();
        let armed_slot = guard.reserve().unwrap();
        armed_slot.arm(i32::try_from(armed.id()).unwrap());
        let disarmed_slot = guard.reserve().unwrap();
        disarmed_slot.arm(i32::try_from(disarmed.id()).unwrap());
        disarmed_slot.disarm();
        let _reserved_slot = guard.reserve().unwrap();
        guard.cut_lifeline();
        // The helper has exited: whatever it was going to kill is dead by now.
        assert!(exited(&armed_fd, 30_000));
        assert!(!exited(&disarmed_fd, 0));
        assert!(!exited(&reserved_fd, 0));
        for child in [&mut armed, &mut disarmed, &mut reserved] {
            let _ = child.kill();
            let _ = child.wait();
        }
        drop(armed_slot);
    }
}
