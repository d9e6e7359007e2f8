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
    /// It was read, and lacks one.
    Not,
    /// It read empty: a process with an empty environment, a kernel thread, a zombie, or one
    /// caught between `execve`s (the file is bound to the memory image at `open`, and reads
    /// nothing once `execve` has replaced it). Worth a second look for a live process.
    Empty,
    /// It could not be read (gone, or not ours).
    Unreadable,
}

/// Whether `pid`'s environment holds exactly each of `entries` (`NAME=value`).
pub(crate) fn env_match(pid: Pid, entries: &[&[u8]]) -> EnvMatch {
    match std::fs::read(format!("/proc/{}/environ", pid.as_raw_pid())) {
        Err(_) => EnvMatch::Unreadable,
        Ok(environ) if environ.is_empty() => EnvMatch::Empty,
        Ok(environ) => {
            let holds = |entry: &&[u8]| environ.split(|&byte| byte == 0).any(|item| item == *entry);
            if entries.iter().all(holds) {
                EnvMatch::All
            } else {
                EnvMatch::Not
            }
        }
    }
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
}
