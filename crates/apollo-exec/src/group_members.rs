//! Finding what a phase left in its process group after its leader exited.
//!
//! Every member of the group was forked after the leader, so its pid was allocated after the
//! leader's: for a young phase, probing the pids allocated since (read from
//! `/proc/sys/kernel/ns_last_pid`) finds them all, and costs nothing when the unit forked
//! nothing. Otherwise, or when that range is large, all of `/proc` is scanned. (A process older
//! than the leader could only join the group by `setpgid` from within apollo's own session,
//! which nothing does.)

use std::io;
use std::time::{Duration, Instant};

use rustix::process::Pid;

use crate::procfs;
use crate::sys::getpgid;

/// A phase younger than this cannot have seen the pid counter wrap around (that would take
/// `pid_max`, at least 32768, forks in this time), so its group members all have pids in the
/// cyclic range after the leader's and up to the last pid allocated.
const RANGE_PROBE_MAX_AGE: Duration = Duration::from_millis(100);

/// Above this many candidate pids, one `/proc` directory scan is cheaper than probing each.
const RANGE_PROBE_MAX_PIDS: u32 = 512;

/// What [`group_members`] found.
pub(crate) struct Members {
    /// Live processes (not zombies) in the group, other than its leader.
    pub(crate) pids: Vec<Pid>,
    /// No pid at all was allocated after the leader's: it (and its group) created no process,
    /// so nothing can have left the group either.
    pub(crate) forked_nothing: bool,
}

/// Live processes (not zombies) in process group `pgid`, other than its leader.
pub(crate) fn group_members(pgid: Pid, spawned_at: Instant) -> io::Result<Members> {
    if spawned_at.elapsed() < RANGE_PROBE_MAX_AGE
        && let Some(candidates) = pids_allocated_after(pgid.as_raw_pid())
    {
        let mut forked_nothing = true;
        let pids = candidates
            .inspect(|_| forked_nothing = false)
            .filter_map(Pid::from_raw)
            .filter(|&pid| is_live_member(pid, pgid))
            .collect();
        return Ok(Members {
            pids,
            forked_nothing,
        });
    }
    let mut pids = Vec::new();
    for pid in procfs::all_pids()? {
        if pid != pgid && is_live_member(pid, pgid) {
            pids.push(pid);
        }
    }
    Ok(Members {
        pids,
        forked_nothing: false,
    })
}

/// The pids allocated after `first` (exclusive) up to the last one allocated, cyclically, or
/// `None` when that is unknown or more than [`RANGE_PROBE_MAX_PIDS`].
fn pids_allocated_after(first: i32) -> Option<impl Iterator<Item = i32>> {
    let last = last_pid()?;
    let pid_max = if last >= first {
        None
    } else {
        Some(read_number("/proc/sys/kernel/pid_max")?)
    };
    cyclic_range(first, last, pid_max, RANGE_PROBE_MAX_PIDS)
}

/// `first+1 ..= last`, or, when the counter wrapped (`last < first`), `first+1 ..= pid_max-1`
/// then `1 ..= last`; `None` when longer than `limit`.
fn cyclic_range(
    first: i32,
    last: i32,
    pid_max: Option<i32>,
    limit: u32,
) -> Option<impl Iterator<Item = i32>> {
    let (upper, wrapped_to) = if last >= first {
        (last, 0)
    } else {
        (pid_max?.checked_sub(1)?, last)
    };
    let count = i64::from(upper) - i64::from(first) + i64::from(wrapped_to);
    if count > i64::from(limit) {
        return None;
    }
    Some((first.checked_add(1)?..=upper).chain(1..=wrapped_to))
}

fn read_number(path: &str) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The last pid allocated in our pid namespace, read through a descriptor opened once per
/// process (every phase reads it: this spares a `/proc` path lookup, an open and a close).
fn last_pid() -> Option<i32> {
    use std::os::unix::fs::FileExt as _;
    static NS_LAST_PID: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    let file = NS_LAST_PID
        .get_or_init(|| std::fs::File::open("/proc/sys/kernel/ns_last_pid").ok())
        .as_ref()?;
    let mut text = [0_u8; 32];
    let length = file.read_at(&mut text, 0).ok()?;
    std::str::from_utf8(text.get(..length)?)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether `pid` is alive (not a zombie) and in group `pgid`. A process that is gone is not.
/// `getpgid` rules out other groups' processes with one syscall; only a member's `/proc` entry
/// is read (for its state).
fn is_live_member(pid: Pid, pgid: Pid) -> bool {
    if getpgid::process_group_of(pid) != Some(pgid.as_raw_pid()) {
        return false;
    }
    matches!(procfs::read_state_and_pgrp(pid), Some((state, group)) if group == pgid.as_raw_pid() && state != b'Z' && state != b'X')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_ranges_follow_the_counter_around_its_wrap() {
        let range = |first, last, pid_max, limit| {
            cyclic_range(first, last, pid_max, limit).map(Iterator::collect::<Vec<_>>)
        };
        assert_eq!(range(100, 100, None, 10), Some(vec![]));
        assert_eq!(range(100, 103, None, 10), Some(vec![101, 102, 103]));
        assert_eq!(range(100, 111, None, 10), None);
        assert_eq!(range(32766, 2, Some(32768), 10), Some(vec![32767, 1, 2]));
        assert_eq!(range(32000, 2, Some(32768), 10), None);
        assert_eq!(range(50, 2, None, 10), None);
    }
}
