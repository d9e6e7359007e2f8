//! Starting a phase's leader: a hand-written `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)`,
//! which is what glibc's `posix_spawn` does minus a fresh child stack per spawn (each thread
//! keeps one) and minus the `pidfd_open` that would follow.
//!
//! The child shares apollo's memory until it execs (`CLONE_VM`) and apollo's thread waits for
//! that (`CLONE_VFORK`), so the child makes only raw system calls (no C library function that
//! could take a lock or be hooked) on data built before the clone, and neither allocates nor
//! panics. In order, it:
//!
//! 1. sets every signal whose disposition is not the default — caught by apollo, or ignored
//!    (`SIGPIPE` by Rust's runtime, `SIGXFSZ`, anything a parent of apollo ignored) — back to
//!    the default, so no apollo handler can run in it and the unit starts as from a clean
//!    shell;
//! 2. joins a new process group (`setpgid(0, 0)`) and, when given a guard's slot, stores its
//!    group id there (an atomic store to apollo's memory, which it shares: the guard knows the
//!    group before the unit's program runs, see `guard.rs`);
//! 3. `dup3`s its stdin, stdout and stderr into place (the caller guarantees that no source is
//!    0–2 unless it already is its own target, so no `dup3` overwrites a later one's source);
//! 4. `chdir`s to the unit's folder;
//! 5. clears its signal mask (every signal, glibc's internal two included, is blocked from
//!    before the `clone` until then), and execs.
//!
//! A failure before the exec leaves its `errno` in the shared plan and exits 127; the parent
//! reaps it, closes its pidfd, and returns the error.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use rustix::process::{Pid, WaitOptions};

/// What a spawn needs from its caller, all built before the `clone`: the child must not
/// allocate.
pub(crate) struct ChildArgs<'a> {
    pub(crate) program: &'a CStr,
    /// `argv`, NUL-pointer-terminated, each pointer into a live C string.
    pub(crate) argv: &'a [*const libc::c_char],
    /// `envp`, the same.
    pub(crate) envp: &'a [*const libc::c_char],
    pub(crate) workdir: &'a CStr,
    /// Its stdin, stdout and stderr. None of them may be a descriptor 0–2 other than its own
    /// target (see step 3 above).
    pub(crate) stdio: [BorrowedFd<'a>; 3],
    /// The guard's slot the child arms with its group id (step 2), if any.
    pub(crate) arm: Option<&'a std::sync::atomic::AtomicI32>,
}

/// Start `args` as the leader of a new process group; its pid and pidfd. The error is the
/// one the child failed with (`ENOENT`, `EACCES`, `ENOEXEC`, a bad workdir, …).
pub(crate) fn spawn(args: &ChildArgs<'_>) -> io::Result<(Pid, OwnedFd)> {
    if args.argv.last() != Some(&std::ptr::null()) || args.envp.last() != Some(&std::ptr::null()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "argv and envp must end with a null pointer",
        ));
    }
    for (target, fd) in args.stdio.iter().enumerate() {
        let raw = fd.as_raw_fd();
        if (0..3).contains(&raw) && usize::try_from(raw).ok() != Some(target) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a standard descriptor of the child would be overwritten before use",
            ));
        }
    }
    let mut plan = ChildPlan {
        program: args.program.as_ptr(),
        argv: args.argv.as_ptr(),
        envp: args.envp.as_ptr(),
        workdir: args.workdir.as_ptr(),
        fds: args.stdio.map(|fd| fd.as_raw_fd()),
        arm: args.arm.map_or(std::ptr::null(), std::ptr::from_ref),
        error: 0,
    };
    let mut spawn_on_thread_stack = |stack: &std::cell::RefCell<Option<ChildStack>>| {
        let mut stack = stack.borrow_mut();
        if stack.is_none() {
            *stack = Some(ChildStack::new()?);
        }
        let top = stack.as_ref().map_or(std::ptr::null_mut(), ChildStack::top);
        clone_and_exec(&mut plan, top)
    };
    match CHILD_STACK.try_with(|stack| spawn_on_thread_stack(stack)) {
        Ok(result) => result,
        // The thread is exiting (a spawn from another thread-local's destructor): a stack of
        // its own for this one child.
        Err(_) => {
            let stack = ChildStack::new()?;
            clone_and_exec(&mut plan, stack.top())
        }
    }
}

/// The slot `plan` arms, if any.
fn args_arm(plan: &ChildPlan) -> Option<&std::sync::atomic::AtomicI32> {
    // SAFETY: non-null, it came from a reference to a slot that outlives the spawn.
    (!plan.arm.is_null()).then(|| unsafe { &*plan.arm })
}

/// What the child reads, and where it leaves its error.
#[repr(C)]
struct ChildPlan {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    workdir: *const libc::c_char,
    /// The child's stdin, stdout and stderr.
    fds: [libc::c_int; 3],
    /// The guard's slot to arm with the child's group id, or null.
    arm: *const std::sync::atomic::AtomicI32,
    /// The `errno` of the step that failed in the child (0: it exec'd).
    error: libc::c_int,
}

/// Bytes of each thread's child stack (the child needs a few hundred: it only makes system
/// calls), above one inaccessible guard page.
const CHILD_STACK_BYTES: usize = 64 * 1024;

/// A thread's stack for its children, mapped once. Only one child at a time uses it: the
/// thread waits (`CLONE_VFORK`) until the child has exec'd or exited.
struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
}

thread_local! {
    static CHILD_STACK: std::cell::RefCell<Option<ChildStack>> =
        const { std::cell::RefCell::new(None) };
}

impl ChildStack {
    fn new() -> io::Result<ChildStack> {
        let page = rustix::param::page_size();
        let len = CHILD_STACK_BYTES + page;
        // SAFETY: a fresh private anonymous mapping at an address the kernel picks: it
        // aliases no Rust object. The result is checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // From here on the drop unmaps it, whatever happens next.
        let stack = ChildStack { base, len };
        // The lowest page catches an overflow (the stack grows down).
        // SAFETY: the first page of the mapping just made, which nothing uses yet.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The highest address, 16-byte aligned: where a downward-growing stack starts.
    fn top(&self) -> *mut libc::c_void {
        let end = self.base as usize + self.len;
        (end & !15) as *mut libc::c_void
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `new`; no child can be using it (a child only
        // runs on it while this thread is suspended in `clone_and_exec`).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// `clone` a child that runs [`child_main`] on `stack_top`, wait until it has exec'd or
/// failed, and return its pid and pidfd.
fn clone_and_exec(
    plan: &mut ChildPlan,
    stack_top: *mut libc::c_void,
) -> io::Result<(Pid, OwnedFd)> {
    // Block every signal across the clone, glibc's internal ones included (a raw syscall:
    // pthread_sigmask would leave those two open): the child starts with all of them blocked,
    // so no apollo handler can run in it before it has reset the dispositions.
    let all: u64 = !0;
    let mut previous: u64 = 0;
    // SAFETY: rt_sigprocmask with valid pointers to 8-byte sets (the kernel's sigset size).
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &raw const all,
            &raw mut previous,
            SIGSET_BYTES,
        );
    }
    let mut pidfd: libc::c_int = -1;
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
    // SAFETY: `stack_top` is the top of a mapping this thread owns and no other child uses
    // (this thread is suspended until the child execs or exits); `plan` and everything it
    // points to outlive that; with CLONE_PIDFD the kernel writes the pidfd to `pidfd`.
    let pid = unsafe {
        libc::clone(
            child_main,
            stack_top,
            flags,
            std::ptr::from_mut(plan).cast::<libc::c_void>(),
            std::ptr::from_mut(&mut pidfd),
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above (the child has exec'd or exited by now).
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &raw const previous,
            std::ptr::null_mut::<u64>(),
            SIGSET_BYTES,
        );
    }
    let Some(pid) = (pid > 0).then(|| Pid::from_raw(pid)).flatten() else {
        return Err(match clone_error.raw_os_error() {
            Some(libc::EINVAL | libc::ENOSYS | libc::EPERM) => io::Error::new(
                clone_error.kind(),
                format!(
                    "clone failed ({clone_error}): Linux 5.3 or later is needed, and a \
                     sandbox must allow clone with CLONE_PIDFD"
                ),
            ),
            _ => clone_error,
        });
    };
    // Owned at once, so that every path below closes it (a child that failed before its exec
    // still came with a pidfd).
    // SAFETY: with CLONE_PIDFD and a successful clone, the kernel installed this descriptor
    // for us and nothing else refers to it.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    // The child wrote this (or not) before this thread resumed.
    // SAFETY: a valid, aligned field of a live struct.
    let error = unsafe { std::ptr::read_volatile(&raw const plan.error) };
    match pidfd {
        Some(pidfd) if error == 0 => Ok((pid, pidfd)),
        _ => {
            // It failed before its exec (and exited 127), or, on a kernel that ignores
            // CLONE_PIDFD, it runs without a pidfd to supervise it by: kill it, reap it. The
            // slot it armed is taken back once it cannot run anything (killed, or exited
            // before its exec) and before its pid can be reused (the reap below).
            if error == 0 {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            if let Some(arm) = args_arm(plan) {
                let _ = arm.compare_exchange(
                    pid.as_raw_pid(),
                    crate::guard::RESERVED,
                    std::sync::atomic::Ordering::AcqRel,
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
            reap_quietly(pid);
            Err(if error != 0 {
                io::Error::from_raw_os_error(error)
            } else {
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "clone gave no pidfd: Linux 5.3 or later is needed",
                )
            })
        }
    }
}

/// Reap a child that is dead or dying, retrying on `EINTR`.
fn reap_quietly(pid: Pid) {
    while matches!(
        rustix::process::waitpid(Some(pid), WaitOptions::empty()),
        Err(rustix::io::Errno::INTR)
    ) {}
}

// The child reads the kernel's `struct sigaction`, whose first field is the handler on these
// architectures (not on all: MIPS puts the flags first).
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
compile_error!(
    "apollo-exec's clone_child.rs reads the kernel's struct sigaction: check its layout"
);

/// The kernel's signal set size (64 signals).
const SIGSET_BYTES: libc::size_t = 8;

/// The highest signal number the kernel knows here.
const LAST_SIGNAL: libc::c_int = 64;

/// The child, between `clone` and `exec`. It shares apollo's memory and runs on the thread's
/// child stack, so it only makes raw system calls (through `syscall(2)`: no C library function
/// that another library could hook, and none that takes a lock) on the plan's data, and
/// neither allocates nor panics.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildPlan` the parent passed to clone; the parent is suspended
    // until this function execs or exits, so nothing else touches it meanwhile. Every call
    // below is a raw system call on the plan's data or on the stack's.
    unsafe {
        let plan = &mut *arg.cast::<ChildPlan>();
        // Every signal not at its default (caught or ignored) back to the default. The
        // kernel's `struct sigaction` starts with the handler on the architectures apollo
        // builds for (SIG_DFL is 0); all-zero is "SIG_DFL, no flags, empty mask".
        let default = [0_u64; 4];
        let mut action = [0_u64; 4];
        for signal in 1..=LAST_SIGNAL {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let queried = libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                std::ptr::null::<u64>(),
                action.as_mut_ptr(),
                SIGSET_BYTES,
            );
            if queried == 0 && action[0] as libc::sighandler_t != libc::SIG_DFL {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    signal,
                    default.as_ptr(),
                    std::ptr::null_mut::<u64>(),
                    SIGSET_BYTES,
                );
            }
        }
        if libc::syscall(libc::SYS_setpgid, 0, 0) != 0 {
            return child_failed(plan);
        }
        // The group id is this process's id (a raw call, as everything here).
        if !plan.arm.is_null() {
            let pid = libc::syscall(libc::SYS_getpid) as i32;
            (*plan.arm).store(pid, std::sync::atomic::Ordering::Release);
        }
        let [stdin, stdout, stderr] = plan.fds;
        if !child_dup(stdin, 0) || !child_dup(stdout, 1) || !child_dup(stderr, 2) {
            return child_failed(plan);
        }
        if libc::syscall(libc::SYS_chdir, plan.workdir) != 0 {
            return child_failed(plan);
        }
        let none: u64 = 0;
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &raw const none,
            std::ptr::null_mut::<u64>(),
            SIGSET_BYTES,
        );
        libc::syscall(libc::SYS_execve, plan.program, plan.argv, plan.envp);
        child_failed(plan)
    }
}

/// In the child: make `fd` the descriptor `target`, inheritable across the exec.
///
/// # Safety
/// Only from [`child_main`].
unsafe fn child_dup(fd: libc::c_int, target: libc::c_int) -> bool {
    // SAFETY: plain system calls on descriptors; no memory is passed.
    unsafe {
        if fd == target {
            // dup3 refuses this case, and the descriptor is close-on-exec: clear that.
            libc::syscall(libc::SYS_fcntl, fd, libc::F_SETFD, 0) == 0
        } else {
            libc::syscall(libc::SYS_dup3, fd, target, 0) == libc::c_long::from(target)
        }
    }
}

/// Record the failed step's `errno` for the parent and exit the child.
///
/// # Safety
/// Only from [`child_main`].
unsafe fn child_failed(plan: &mut ChildPlan) -> libc::c_int {
    // SAFETY: the calling thread's errno location (syscall(2) set it); the plan is ours
    // until we exit.
    unsafe {
        let errno = *libc::__errno_location();
        std::ptr::write_volatile(
            &raw mut plan.error,
            if errno == 0 { libc::ECHILD } else { errno },
        );
        libc::syscall(libc::SYS_exit_group, 127);
        127
    }
}
