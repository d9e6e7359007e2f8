//! Starting a phase's leader: a hand-written `clone(CLONE_VM | CLONE_VFORK)`.
//!
//! This is what glibc's `posix_spawn` does, minus two costs that showed on a scheduler starting
//! thousands of short units from a multi-threaded apollo: `posix_spawn` maps a fresh stack for
//! every child and unmaps it afterwards (the unmap makes the kernel interrupt the other CPUs
//! running apollo's threads to flush their TLBs, and the child faults the fresh pages in),
//! and apollo then needs a `pidfd_open` for the child. Here each thread keeps one small stack
//! for its children, and `CLONE_PIDFD` hands back the pidfd with the pid. (Before that,
//! `std::process::Command` did the same `posix_spawn` but also copied apollo's whole
//! environment into a map and back into C strings, and duplicated the stdio descriptors, at
//! every spawn.)
//!
//! The child shares apollo's memory until it execs (`CLONE_VM`) and apollo's thread waits for
//! that (`CLONE_VFORK`), so the child makes only raw system calls (no C library function that
//! could take a lock or be hooked) on pre-built data: it resets every caught signal (and `SIGPIPE`, which Rust ignores) to its
//! default, so no apollo handler can run in it; joins a new process group (`setpgid(0, 0)`);
//! `dup3`s stdin/stdout/stderr; `chdir`s to the unit's folder; clears its signal mask (all
//! signals, glibc's internal two included, are blocked from before the `clone` until then);
//! and execs. A failure before the
//! exec leaves its `errno` in the shared plan and exits 127. What the child gets is what
//! `posix_spawn` gave it: its own group, the workdir, the three descriptors (every other
//! descriptor apollo holds is close-on-exec), an empty signal mask, default dispositions for
//! what apollo catches and for `SIGPIPE`, ignored signals still ignored — except glibc's two
//! internal signals, which `posix_spawn` leaves ignored and this leaves at their default, as
//! `fork` + `exec` would. The binaries link with full RELRO (`BIND_NOW`), so no lazy symbol
//! binding runs in the child either.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::OnceLock;

/// Apollo's own environment, as `KEY=VALUE` C strings ready for a child's `envp`.
#[derive(Debug)]
pub(crate) struct Environment {
    entries: Vec<(OsString, CString)>,
}

impl Environment {
    /// The current process environment. (A variable whose name or value holds a NUL byte
    /// cannot be passed on and is left out, as the C library would never have produced it.)
    pub(crate) fn capture() -> Environment {
        let entries = std::env::vars_os()
            .filter_map(|(key, value)| {
                let mut entry = key.clone().into_vec();
                entry.push(b'=');
                entry.extend_from_slice(value.as_bytes());
                CString::new(entry).ok().map(|entry| (key, entry))
            })
            .collect();
        Environment { entries }
    }

    /// The value of `key`, if set.
    pub(crate) fn get(&self, key: &str) -> Option<&OsStr> {
        self.entries.iter().find_map(|(name, entry)| {
            (name.as_bytes() == key.as_bytes())
                .then(|| OsStr::from_bytes(&entry.as_bytes()[key.len() + 1..]))
        })
    }
}

/// One spawn: what to run, where, with which descriptors and extra variables.
pub(crate) struct Spawn<'a> {
    /// The program: a path (the caller has searched `PATH` already).
    pub(crate) program: &'a OsStr,
    /// Its arguments, without `argv[0]` (which is `program`).
    pub(crate) args: &'a [OsString],
    pub(crate) workdir: &'a Path,
    pub(crate) stdin: BorrowedFd<'a>,
    pub(crate) stdout: BorrowedFd<'a>,
    pub(crate) stderr: BorrowedFd<'a>,
    /// The child's environment: `base`, with `overrides` set over it (a later override of the
    /// same name wins).
    pub(crate) base: &'a Environment,
    pub(crate) overrides: &'a [(&'a str, &'a OsStr)],
}

/// Start `spawn` as the leader of a new process group; its pid and pidfd. The error is the one the exec
/// failed with (`ENOENT`, `EACCES`, `ENOEXEC`, …) or `InvalidInput` for a NUL byte.
pub(crate) fn spawn_group_leader(spawn: &Spawn<'_>) -> io::Result<(libc::pid_t, OwnedFd)> {
    let program = c_string(spawn.program.as_bytes(), "the program")?;
    let args = spawn
        .args
        .iter()
        .map(|arg| c_string(arg.as_bytes(), "an argument"))
        .collect::<io::Result<Vec<CString>>>()?;
    let mut argv: Vec<*mut libc::c_char> = Vec::with_capacity(args.len() + 2);
    argv.push(program.as_ptr().cast_mut());
    argv.extend(args.iter().map(|arg| arg.as_ptr().cast_mut()));
    argv.push(std::ptr::null_mut());

    let mut overrides: Vec<(&str, CString)> = Vec::with_capacity(spawn.overrides.len());
    for &(key, value) in spawn.overrides {
        let mut entry = Vec::with_capacity(key.len() + 1 + value.len());
        entry.extend_from_slice(key.as_bytes());
        entry.push(b'=');
        entry.extend_from_slice(value.as_bytes());
        let entry = c_string(&entry, "an environment variable")?;
        overrides.retain(|(name, _)| *name != key);
        overrides.push((key, entry));
    }
    let mut envp: Vec<*mut libc::c_char> =
        Vec::with_capacity(spawn.base.entries.len() + overrides.len() + 1);
    envp.extend(
        spawn
            .base
            .entries
            .iter()
            .filter(|(name, _)| {
                !overrides
                    .iter()
                    .any(|(key, _)| key.as_bytes() == name.as_bytes())
            })
            .map(|(_, entry)| entry.as_ptr().cast_mut()),
    );
    envp.extend(overrides.iter().map(|(_, entry)| entry.as_ptr().cast_mut()));
    envp.push(std::ptr::null_mut());

    let workdir = c_string(
        spawn.workdir.as_os_str().as_bytes(),
        "the working directory",
    )?;
    // The sources are never 0-2 themselves (Rust's runtime keeps those open from startup, so
    // files apollo opens get higher numbers): no `dup2` in the child overwrites a later one's
    // source.
    let mut plan = ChildPlan {
        program: program.as_ptr(),
        argv: argv.as_ptr().cast(),
        envp: envp.as_ptr().cast(),
        workdir: workdir.as_ptr(),
        fds: [
            spawn.stdin.as_raw_fd(),
            spawn.stdout.as_raw_fd(),
            spawn.stderr.as_raw_fd(),
        ],
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

/// What the child needs, all built before the `clone`: it must not allocate.
#[repr(C)]
struct ChildPlan {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    workdir: *const libc::c_char,
    /// The child's stdin, stdout and stderr.
    fds: [libc::c_int; 3],
    /// The `errno` of the step that failed in the child (0: it exec'd).
    error: libc::c_int,
}

/// Bytes of each thread's child stack (the child needs a few hundred: it only makes library
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
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = CHILD_STACK_BYTES + page;
        // SAFETY: a fresh private anonymous mapping; checked below.
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
        let stack = ChildStack { base, len };
        // The lowest page catches an overflow (the stack grows down).
        // SAFETY: the first page of the mapping just made.
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
        // SAFETY: the mapping made in `new`; no child can be using it (the thread is exiting).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// `clone` a child that runs [`child_main`] on `stack_top`, wait until it has exec'd or
/// failed, and return its pid and pidfd.
fn clone_and_exec(
    plan: &mut ChildPlan,
    stack_top: *mut libc::c_void,
) -> io::Result<(libc::pid_t, OwnedFd)> {
    if !pidfds_work() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "pidfds are not available: Linux 5.3 or later is needed",
        ));
    }
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
    // The child wrote this (or not) before this thread resumed.
    // SAFETY: a valid, aligned field of a live struct.
    let error = unsafe { std::ptr::read_volatile(&raw const plan.error) };
    let result = if pid < 0 {
        Err(match clone_error.raw_os_error() {
            Some(libc::EINVAL | libc::ENOSYS | libc::EPERM) => io::Error::new(
                clone_error.kind(),
                format!(
                    "clone failed ({clone_error}): Linux 5.3 or later is needed, and a \
                     sandbox must allow clone with CLONE_PIDFD"
                ),
            ),
            _ => clone_error,
        })
    } else if error != 0 || pidfd < 0 {
        // It failed before its exec (and exited 127), or, on a kernel that ignores
        // CLONE_PIDFD, it runs without a pidfd to supervise it by: kill it, reap it.
        if error == 0 {
            // SAFETY: our unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
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
    } else {
        // SAFETY: the kernel handed us this descriptor with the pid.
        Ok((pid, unsafe { OwnedFd::from_raw_fd(pidfd) }))
    };
    // SAFETY: restores the mask saved above.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &raw const previous,
            std::ptr::null_mut::<u64>(),
            SIGSET_BYTES,
        );
    }
    result
}

// The child reads the kernel's `struct sigaction`, whose first field is the handler on these
// architectures (not on all: MIPS puts the flags first).
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
compile_error!("apollo-exec's spawn.rs reads the kernel's struct sigaction: check its layout here");

/// The kernel's signal set size (64 signals).
const SIGSET_BYTES: libc::size_t = 8;

/// The highest signal number the kernel knows here.
const LAST_SIGNAL: libc::c_int = 64;

/// Whether this kernel has pidfds that `poll` can watch (Linux 5.3: `pidfd_open`, asked once).
fn pidfds_work() -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        // SAFETY: pidfd_open on our own pid; a returned descriptor is closed at once.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
        if fd < 0 {
            return false;
        }
        // SAFETY: the descriptor just returned, ours.
        unsafe { libc::close(libc::c_int::try_from(fd).unwrap_or(-1)) };
        true
    })
}

/// Reap a child that is dead or dying, retrying on `EINTR`.
fn reap_quietly(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: our own child; a plain syscall.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
        && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
    {}
}

/// The child, between `clone` and `exec`. It shares apollo's memory and runs on the thread's
/// child stack, so it only makes raw system calls (through `syscall(2)`: no C library function
/// that another library could hook, and none that takes a lock) on the plan's data, and
/// neither allocates nor panics.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildPlan` the parent passed to clone; the parent is suspended
    // until this function execs or exits, so nothing else touches it meanwhile.
    unsafe {
        let plan = &mut *arg.cast::<ChildPlan>();
        // Every caught signal, and SIGPIPE, back to its default; ignored ones stay ignored.
        // The kernel's `struct sigaction` starts with the handler on the architectures
        // apollo builds for; all-zero is "SIG_DFL, no flags, empty mask".
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
            let handler = action[0] as libc::sighandler_t;
            if queried == 0
                && (signal == libc::SIGPIPE
                    || (handler != libc::SIG_DFL && handler != libc::SIG_IGN))
            {
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

fn c_string(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_lookup_reads_the_value_after_the_first_equals_sign() {
        let environment = Environment {
            entries: vec![(OsString::from("A"), CString::new("A=b=c").unwrap())],
        };
        assert_eq!(environment.get("A"), Some(OsStr::new("b=c")));
        assert_eq!(environment.get("B"), None);
    }
}
