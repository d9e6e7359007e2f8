//! Forking the guard helper, and the helper's whole life.
//!
//! The helper is forked from a multi-threaded process, so until it exits it makes only raw,
//! async-signal-safe calls (`prctl`, `setsid`, `sigaction`, `sigprocmask`, `close_range`,
//! `read`, `kill`, `_exit`): no allocation, no lock, no std I/O.

// The helper is the one process apollo-exec forks itself; it is created here only.
#![allow(clippy::disallowed_methods)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicI32;

use rustix::process::Pid;

use super::shared_table::{self, SLOTS, Table};

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

/// Fork the helper: it reads `lifeline` (a pipe's read end, which the parent closes here)
/// until end-of-file, then SIGKILLs every group armed in `table` and exits.
pub(crate) fn fork(lifeline: OwnedFd, table: &Table) -> io::Result<Pid> {
    let entries = table.raw();
    // Block every signal across the fork, so none of apollo's handlers runs in the child
    // before it has reset them (`helper_main` unblocks).
    // SAFETY: sigset_t is plain data, which sigfillset/sigemptyset initialise; the mask calls
    // get valid pointers for their duration.
    let previous = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
        previous
    };
    // SAFETY: fork in a multi-threaded process: the child runs `helper_main`, which makes only
    // async-signal-safe calls and never returns.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: we are the freshly forked child; see `helper_main`.
        unsafe { helper_main(lifeline.as_raw_fd(), entries.as_ptr()) }
    }
    let fork_error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    drop(lifeline);
    (pid > 0)
        .then(|| Pid::from_raw(pid))
        .flatten()
        .ok_or(fork_error)
}

/// The helper's whole life, in the forked child.
///
/// # Safety
///
/// Only in the child of `fork`, with `lifeline` the pipe's read end and `table` the base of the
/// guard's shared table. Only async-signal-safe calls; never returns.
unsafe fn helper_main(lifeline: RawFd, table: *mut AtomicI32) -> ! {
    // SAFETY: (the whole function) raw syscalls with valid arguments; memory touched is the stack
    // and the shared table, which stays mapped in this process until it exits.
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
        let entries = std::slice::from_raw_parts(table.cast_const(), SLOTS + 1);
        for pgid in shared_table::armed(entries) {
            libc::kill(-pgid, libc::SIGKILL);
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
