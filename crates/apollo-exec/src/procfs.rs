//! What apollo-exec reads from `/proc`: the live pids, a process's state and group, its
//! environment.

use std::io;

use rustix::process::Pid;

/// Every pid listed in `/proc` (entries that are not numbers are skipped).
pub(crate) fn all_pids() -> io::Result<impl Iterator<Item = Pid>> {
    Ok(std::fs::read_dir("/proc")?.filter_map(|entry| {
        entry
            .ok()?
            .file_name()
            .to_str()?
            .parse::<i32>()
            .ok()
            .filter(|&pid| pid > 0)
            .and_then(Pid::from_raw)
    }))
}

/// Whether `pid` exists and is not a zombie.
pub(crate) fn is_alive(pid: Pid) -> bool {
    matches!(read_state_and_pgrp(pid), Some((state, _)) if state != b'Z' && state != b'X')
}

/// `(state, pgrp)` of `pid` from `/proc/<pid>/stat`, or `None` when it is gone.
pub(crate) fn read_state_and_pgrp(pid: Pid) -> Option<(u8, i32)> {
    use std::io::Read as _;
    // Only the head of the file matters: pid, (comm ≤ 16 bytes), state, ppid, pgrp.
    let mut head = [0_u8; 256];
    let mut file = std::fs::File::open(format!("/proc/{}/stat", pid.as_raw_pid())).ok()?;
    let length = file.read(&mut head).ok()?;
    parse_state_and_pgrp(&head[..length])
}

/// What `/proc/<pid>/environ` says about some entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnvMatch {
    /// It holds every entry asked about.
    All,
    /// It was read, whole, and lacks one.
    Not,
    /// It read empty: a process with an empty environment, a kernel thread, a zombie, or one
    /// caught between `execve`s (the file is bound to the memory image at `open`, and reads
    /// nothing once `execve` has replaced it). Worth a second look for a live process.
    Empty,
    /// It could not be read (gone, or not ours).
    Unreadable,
}

/// How much of an environment is read at once: most fit, so one `pread` reads them whole.
const ENVIRONMENT_READ_SIZE: usize = 16 * 1024;

/// Whether `pid`'s environment holds exactly each of `entries` (`NAME=value`).
pub(crate) fn env_match(pid: Pid, entries: &[&[u8]]) -> EnvMatch {
    match std::fs::File::open(format!("/proc/{}/environ", pid.as_raw_pid())) {
        Err(_) => EnvMatch::Unreadable,
        Ok(file) => env_match_in(&file, entries),
    }
}

/// [`env_match`] on an open `/proc/<pid>/environ`.
///
/// The environment is read whole by a single `pread` from its start, again into a buffer
/// twice as large while it fills the buffer, never piece by piece: each read copies from the
/// memory image the file was opened on, which an `execve` frees, and a read after that returns
/// nothing (end of file). Read piece by piece across an `execve`, the environment would end
/// early, lacking what came after the piece (the attempt's markers come late), and look final;
/// here an environment is either whole or [`EnvMatch::Empty`], which is looked at again.
fn env_match_in(environ: &impl std::os::unix::fs::FileExt, entries: &[&[u8]]) -> EnvMatch {
    let mut buffer = vec![0_u8; ENVIRONMENT_READ_SIZE];
    let length = loop {
        match environ.read_at(&mut buffer, 0) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return EnvMatch::Unreadable,
            Ok(length) if length < buffer.len() => break length,
            Ok(_) => buffer.resize(buffer.len().saturating_mul(2), 0),
        }
    };
    let environ = &buffer[..length];
    if environ.is_empty() {
        return EnvMatch::Empty;
    }
    let holds = |entry: &&[u8]| environ.split(|&byte| byte == 0).any(|item| item == *entry);
    if entries.iter().all(holds) {
        EnvMatch::All
    } else {
        EnvMatch::Not
    }
}

/// Where a process's environment stands, from `/proc/<pid>/stat` (its `env_start` and
/// `env_end`, which the kernel sets once `execve` has copied the environment into the new
/// memory image).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnvironmentState {
    /// A zombie, or dead.
    Exited,
    /// No environment yet: between `execve`s (the new image is in place before its
    /// environment is), or no memory image (a process on its way out).
    NotYetSet,
    /// An empty environment, for good.
    Empty,
    /// An environment with something in it.
    Present,
}

/// Where `pid`'s environment stands, or `None` when it is gone.
pub(crate) fn read_environment_state(pid: Pid) -> Option<EnvironmentState> {
    let stat = std::fs::read(format!("/proc/{}/stat", pid.as_raw_pid())).ok()?;
    parse_environment_state(&stat)
}

/// [`EnvironmentState`] from the contents of `/proc/<pid>/stat`: the state (field 3),
/// `env_start` and `env_end` (fields 50 and 51, since Linux 3.5).
pub(crate) fn parse_environment_state(stat: &[u8]) -> Option<EnvironmentState> {
    let close = stat.iter().rposition(|&byte| byte == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    if state == b'Z' || state == b'X' {
        return Some(EnvironmentState::Exited);
    }
    let env_start: u64 = fields.nth(46)?.parse().ok()?;
    let env_end: u64 = fields.next()?.parse().ok()?;
    Some(if env_end == 0 {
        EnvironmentState::NotYetSet
    } else if env_end == env_start {
        EnvironmentState::Empty
    } else {
        EnvironmentState::Present
    })
}

/// The head of `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatHead {
    pub(crate) state: u8,
    pub(crate) parent: i32,
    pub(crate) group: i32,
    pub(crate) session: i32,
    /// A kernel thread (`PF_KTHREAD` in the flags): it has no environment to read.
    pub(crate) kernel_thread: bool,
}

impl StatHead {
    /// A zombie (exited, not reaped) or dead.
    pub(crate) fn is_dead(&self) -> bool {
        self.state == b'Z' || self.state == b'X'
    }
}

/// The head of `/proc/<pid>/stat`, or `None` when it is gone.
pub(crate) fn read_stat_head(pid: Pid) -> Option<StatHead> {
    use std::io::Read as _;
    // Through the flags (field 9): well within 256 bytes (comm is at most 16 bytes).
    let mut head = [0_u8; 256];
    let mut file = std::fs::File::open(format!("/proc/{}/stat", pid.as_raw_pid())).ok()?;
    let length = file.read(&mut head).ok()?;
    parse_stat_head(&head[..length])
}

/// [`StatHead`] from the contents of `/proc/<pid>/stat`.
pub(crate) fn parse_stat_head(stat: &[u8]) -> Option<StatHead> {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let close = stat.iter().rposition(|&byte| byte == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    let flags: u64 = fields.nth(2)?.parse().ok()?;
    Some(StatHead {
        state,
        parent,
        group,
        session,
        kernel_thread: flags & PF_KTHREAD != 0,
    })
}

/// The children of this process's main thread, where the kernel hands the orphans of a child
/// subreaper (`/proc/self/task/<pid>/children`).
pub(crate) fn children_of_main_thread() -> io::Result<Vec<Pid>> {
    let own = rustix::process::getpid().as_raw_pid();
    let list = std::fs::read(format!("/proc/{own}/task/{own}/children"))?;
    Ok(list
        .split(|byte| byte.is_ascii_whitespace())
        .filter_map(|pid| std::str::from_utf8(pid).ok()?.parse().ok())
        .filter_map(Pid::from_raw)
        .collect())
}

/// `(state, pgrp)` from the contents of `/proc/<pid>/stat`. The command name (field 2) is in
/// parentheses and may itself contain spaces and parentheses, so parse from the last `)`.
pub(crate) fn parse_state_and_pgrp(stat: &[u8]) -> Option<(u8, i32)> {
    let close = stat.iter().rposition(|&byte| byte == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let _parent = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    Some((state, group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing_survives_parentheses_and_spaces_in_the_command_name() {
        let stat = b"4242 (evil) name (x)) S 1 4240 4240 0 -1 4194560 101";
        assert_eq!(parse_state_and_pgrp(stat), Some((b'S', 4240)));
        assert_eq!(parse_state_and_pgrp(b"12 (sh) Z 1 12 12"), Some((b'Z', 12)));
        assert_eq!(parse_state_and_pgrp(b"garbage"), None);
        assert_eq!(parse_state_and_pgrp(b"1 (x) R 1"), None);
    }

    #[test]
    fn the_stat_head_has_session_and_kernel_thread_flag() {
        let stat = b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0";
        let head = parse_stat_head(stat).unwrap();
        assert_eq!(
            (head.state, head.parent, head.group, head.session),
            (b'S', 0, 0, 0)
        );
        assert!(head.kernel_thread);
        let stat = b"77 (a) b) Z 1 70 60 34816 70 4194560 0";
        let head = parse_stat_head(stat).unwrap();
        assert_eq!((head.parent, head.group, head.session), (1, 70, 60));
        assert!(!head.kernel_thread && head.is_dead());
        assert_eq!(parse_stat_head(b"1 (x) R 1 2 3"), None);
    }

    #[test]
    fn the_environment_state_comes_from_env_start_and_env_end() {
        let stat = |state: &str, env_start: u64, env_end: u64| {
            format!(
                "2035 (bl) ck) {state} 2007 2035 2035 0 -1 4194304 167 100 0 0 0 0 0 0 20 0 1 0 \
                 2665103 2654208 396 18446744073709551615 94639959748608 94639959825337 \
                 140726968457248 0 0 0 0 6 65536 1 0 0 17 1 0 0 0 0 0 94639959854640 \
                 94639959859776 94640125108224 140726968465984 140726968466010 {env_start} \
                 {env_end} 0"
            )
        };
        let state = |text: String| parse_environment_state(text.as_bytes());
        assert_eq!(state(stat("S", 7, 1435)), Some(EnvironmentState::Present));
        assert_eq!(state(stat("R", 7, 7)), Some(EnvironmentState::Empty));
        assert_eq!(state(stat("R", 0, 0)), Some(EnvironmentState::NotYetSet));
        assert_eq!(state(stat("Z", 0, 0)), Some(EnvironmentState::Exited));
        assert_eq!(state("1 (x) R 1 2 3".to_owned()), None);
        // This very process has an environment (the test harness's at least).
        assert_eq!(
            read_environment_state(rustix::process::getpid()),
            Some(EnvironmentState::Present)
        );
    }

    /// `/proc/<pid>/environ` that lets its process `execve` before the second read.
    struct ExecBeforeSecondRead<'a> {
        file: std::fs::File,
        reads: std::cell::Cell<u32>,
        exec: &'a dyn Fn(),
    }

    impl ExecBeforeSecondRead<'_> {
        fn before_read(&self) {
            if self.reads.replace(self.reads.get() + 1) == 1 {
                (self.exec)();
            }
        }
    }

    impl std::os::unix::fs::FileExt for ExecBeforeSecondRead<'_> {
        fn read_at(&self, buffer: &mut [u8], offset: u64) -> io::Result<usize> {
            self.before_read();
            self.file.read_at(buffer, offset)
        }

        fn write_at(&self, _buffer: &[u8], _offset: u64) -> io::Result<usize> {
            Err(io::ErrorKind::Unsupported.into())
        }
    }

    impl io::Read for &ExecBeforeSecondRead<'_> {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            self.before_read();
            (&self.file).read(buffer)
        }
    }

    #[test]
    fn an_environment_read_across_an_execve_is_not_taken_for_the_whole() {
        use std::io::{BufRead as _, Write as _};
        use std::process::Stdio;
        // A large environment whose marker comes after the filler (the environment is passed
        // sorted), so reading it takes more than one read. The child execs when told to, into
        // a program that says when it runs: the image the file was opened on is gone by then,
        // and nothing more can be read from it.
        #[allow(clippy::disallowed_methods)]
        let mut child = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "echo started && read _ && exec /bin/sh -c 'echo execed && read _'",
            ])
            .env("APOLLO_TEST_FILLER", "x".repeat(64 * 1024))
            .env("APOLLO_TEST_MARKER", "last")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = Pid::from_child(&child);
        let stdin = child.stdin.take().unwrap();
        let stdout = std::cell::RefCell::new(io::BufReader::new(child.stdout.take().unwrap()));
        // The spawn returns once the child's `execve` has replaced its memory, which can be
        // before the new image's environment is in place (a read then finds none): wait for
        // the shell to run first.
        let mut line = String::new();
        stdout.borrow_mut().read_line(&mut line).unwrap();
        assert_eq!(line, "started\n");
        let exec = || {
            (&stdin).write_all(b"go\n").unwrap();
            let mut line = String::new();
            stdout.borrow_mut().read_line(&mut line).unwrap();
            assert_eq!(line, "execed\n");
        };
        let environ = ExecBeforeSecondRead {
            file: std::fs::File::open(format!("/proc/{}/environ", pid.as_raw_pid())).unwrap(),
            reads: std::cell::Cell::new(0),
            exec: &exec,
        };
        let marker: &[u8] = b"APOLLO_TEST_MARKER=last";
        let across_the_execve = env_match_in(&environ, &[marker]);
        let execed = environ.reads.get() > 1;
        let afterwards = env_match(pid, &[marker]);
        drop(environ);
        drop(stdin);
        child.wait().unwrap();
        assert!(execed, "the child never execed between two reads");
        // "Empty" sends the reader back for a fresh look; "Not" would be final.
        assert_eq!(across_the_execve, EnvMatch::Empty);
        assert_eq!(afterwards, EnvMatch::All);
    }
}
