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

/// Whether `pid`'s environment holds exactly the entry `entry` (`NAME=value`).
pub(crate) fn has_env_entry(pid: Pid, entry: &[u8]) -> bool {
    std::fs::read(format!("/proc/{}/environ", pid.as_raw_pid()))
        .is_ok_and(|environ| environ.split(|&byte| byte == 0).any(|item| item == entry))
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
}
