//! Turning one spawn — program, arguments, workdir, descriptors, environment — into the C
//! strings and pointer arrays the clone child execs with (`sys::clone_child` does the rest).
//! Everything the child reads is built here, before the clone: the child must not allocate.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

use rustix::process::Pid;

use crate::environment::Environment;
use crate::sys::clone_child::{self, ChildArgs};

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

/// Start `spawn` as the leader of a new process group; its pid and pidfd. The error is the
/// one the exec failed with (`ENOENT`, `EACCES`, `ENOEXEC`, …) or `InvalidInput` for a NUL
/// byte. With `arm`, the child stores its group id there before it execs (a guard's slot,
/// see `guard.rs`), and the slot is set back to reserved if the spawn fails.
pub(crate) fn spawn_group_leader(
    spawn: &Spawn<'_>,
    arm: Option<&std::sync::atomic::AtomicI32>,
) -> io::Result<(Pid, OwnedFd)> {
    if !pidfds_work() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "pidfds are not available: Linux 5.3 or later is needed",
        ));
    }
    let program = c_string(spawn.program.as_bytes(), "the program")?;
    let args = spawn
        .args
        .iter()
        .map(|arg| c_string(arg.as_bytes(), "an argument"))
        .collect::<io::Result<Vec<CString>>>()?;
    let mut argv: Vec<*const libc::c_char> = Vec::with_capacity(args.len() + 2);
    argv.push(program.as_ptr());
    argv.extend(args.iter().map(|arg| arg.as_ptr()));
    argv.push(std::ptr::null());

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
    let mut envp: Vec<*const libc::c_char> =
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
            .map(|(_, entry)| entry.as_ptr()),
    );
    envp.extend(overrides.iter().map(|(_, entry)| entry.as_ptr()));
    envp.push(std::ptr::null());

    let workdir = c_string(
        spawn.workdir.as_os_str().as_bytes(),
        "the working directory",
    )?;
    // The child `dup3`s stdin to 0, stdout to 1, stderr to 2, in that order: a source that
    // is itself one of 0–2 (and not its own target) would be overwritten before use. That
    // only happens when the host closed a standard descriptor after the executor was made
    // (it reopens closed ones on /dev/null, see the crate docs); then such a source is moved
    // above 2 for this spawn. Normally this costs three comparisons.
    let mut moved: [Option<OwnedFd>; 3] = [None, None, None];
    let mut stdio = [spawn.stdin, spawn.stdout, spawn.stderr];
    for (target, fd) in stdio.iter().enumerate() {
        let raw = fd.as_raw_fd();
        if (0..3).contains(&raw) && usize::try_from(raw).ok() != Some(target) {
            moved[target] = Some(rustix::io::fcntl_dupfd_cloexec(fd, 3)?);
        }
    }
    for (fd, moved) in stdio.iter_mut().zip(&moved) {
        if let Some(moved) = moved {
            *fd = std::os::fd::AsFd::as_fd(moved);
        }
    }
    clone_child::spawn(&ChildArgs {
        program: &program,
        argv: &argv,
        envp: &envp,
        workdir: &workdir,
        stdio,
        arm,
    })
}

/// Whether this kernel has pidfds that `poll` can watch (Linux 5.3: `pidfd_open`, asked once).
fn pidfds_work() -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        rustix::process::pidfd_open(
            rustix::process::getpid(),
            rustix::process::PidfdFlags::empty(),
        )
        .is_ok()
    })
}

fn c_string(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    })
}
