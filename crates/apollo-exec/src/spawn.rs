//! Starting a phase's leader: `posix_spawn(3)` called directly.
//!
//! `std::process::Command` would do the same `posix_spawn`, but around it, per spawn, it copies
//! apollo's whole environment into a map and back into C strings, duplicates the three stdio
//! descriptors (and closes the duplicates), and checks the C library's version. On a
//! scheduler that starts thousands of short units, that was a good share of apollo's own time
//! per attempt. Here apollo's environment is turned into C strings once (when the executor
//! first spawns), a spawn only adds the unit's and apollo's variables, and the stdio
//! descriptors are passed as they are.
//!
//! What the child gets is what `Command` gave it: its own process group (`setpgid(0, 0)`,
//! done by `posix_spawn` before the exec), the unit's working directory, stdin/stdout/stderr
//! from the given descriptors (any other descriptor apollo holds is close-on-exec), an empty
//! signal mask, and `SIGPIPE` back to its default (Rust ignores it in apollo).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

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

/// Start `spawn` as the leader of a new process group; its pid. The error is the one the exec
/// failed with (`ENOENT`, `EACCES`, `ENOEXEC`, …) or `InvalidInput` for a NUL byte.
pub(crate) fn spawn_group_leader(spawn: &Spawn<'_>) -> io::Result<libc::pid_t> {
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
    // files apollo opens get higher numbers): no `dup2` below overwrites a later one's source.
    let mut actions = FileActions::new()?;
    actions.dup2(spawn.stdin, 0)?;
    actions.dup2(spawn.stdout, 1)?;
    actions.dup2(spawn.stderr, 2)?;
    actions.chdir(&workdir)?;
    let attributes = Attributes::new()?;

    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer is valid for the duration of the call: `program`, the strings
    // behind `argv` and `envp` (both NULL-terminated arrays), and the initialised file actions
    // and attributes. posix_spawn does not keep any of them.
    let error = unsafe {
        libc::posix_spawn(
            &mut pid,
            program.as_ptr(),
            &actions.0,
            &attributes.0,
            argv.as_ptr(),
            envp.as_ptr(),
        )
    };
    if error != 0 {
        return Err(io::Error::from_raw_os_error(error));
    }
    Ok(pid)
}

fn c_string(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    })
}

/// Turn a C library return code (0 or an errno value) into a result.
fn check(code: libc::c_int) -> io::Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(code))
    }
}

/// Initialised `posix_spawn_file_actions_t`, destroyed on drop.
struct FileActions(libc::posix_spawn_file_actions_t);

impl FileActions {
    fn new() -> io::Result<FileActions> {
        // SAFETY: the type is plain data; init makes the zeroed value a valid, empty list.
        let mut actions: libc::posix_spawn_file_actions_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to the value being initialised.
        check(unsafe { libc::posix_spawn_file_actions_init(&mut actions) })?;
        Ok(FileActions(actions))
    }

    fn dup2(&mut self, fd: BorrowedFd<'_>, target: libc::c_int) -> io::Result<()> {
        // SAFETY: initialised actions; the list copies the numbers. Glibc clears close-on-exec
        // when `fd == target`, as POSIX asks.
        check(unsafe {
            libc::posix_spawn_file_actions_adddup2(&mut self.0, fd.as_raw_fd(), target)
        })
    }

    fn chdir(&mut self, path: &CString) -> io::Result<()> {
        // SAFETY: initialised actions; the list copies the path (glibc 2.29 or later).
        check(unsafe { libc::posix_spawn_file_actions_addchdir_np(&mut self.0, path.as_ptr()) })
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

/// `posix_spawnattr_t` for a new group leader with an empty signal mask and `SIGPIPE` at its
/// default, destroyed on drop.
struct Attributes(libc::posix_spawnattr_t);

impl Attributes {
    fn new() -> io::Result<Attributes> {
        // SAFETY: plain data made valid by init before any other use.
        let mut raw: libc::posix_spawnattr_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to the value being initialised.
        check(unsafe { libc::posix_spawnattr_init(&mut raw) })?;
        let mut attributes = Attributes(raw);
        // SAFETY: valid pointers to initialised values throughout; the sets are plain data
        // initialised by sigemptyset before use.
        unsafe {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            let mut pipe_only: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut pipe_only);
            libc::sigaddset(&mut pipe_only, libc::SIGPIPE);
            let flags = libc::POSIX_SPAWN_SETPGROUP
                | libc::POSIX_SPAWN_SETSIGMASK
                | libc::POSIX_SPAWN_SETSIGDEF;
            check(libc::posix_spawnattr_setflags(
                &mut attributes.0,
                libc::c_short::try_from(flags).unwrap_or_default(),
            ))?;
            check(libc::posix_spawnattr_setpgroup(&mut attributes.0, 0))?;
            check(libc::posix_spawnattr_setsigmask(&mut attributes.0, &empty))?;
            check(libc::posix_spawnattr_setsigdefault(
                &mut attributes.0,
                &pipe_only,
            ))?;
        }
        Ok(attributes)
    }
}

impl Drop for Attributes {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
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
