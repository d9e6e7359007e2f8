//! Finding what a phase left in its process group after its leader exited.
//!
//! Every member of the group was forked after the leader, so its pid was allocated after the
//! leader's: for a young phase, probing the pids allocated since (read from
//! `/proc/sys/kernel/ns_last_pid`) finds them all, and costs nothing when the unit forked
//! nothing. Otherwise, or when that range is large, all of `/proc` is scanned. (A process older
//! than the leader could only join the group by `setpgid` from within apollo's own session,
//! which nothing does.)
//!
//! With several workers the pids allocated after a leader are mostly other attempts' leaders,
//! which apollo spawned itself: those still running are armed in the guard's table (by the
//! child itself, before its `exec`), and [`note_leader`] keeps the latest ones once their
//! spawn returned. A phase whose range holds nothing else still counts as having forked
//! nothing (so the attempt's end needs no look for escaped processes: `escaped`).

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
/// `leads_a_phase` says whether a pid is the leader of a phase apollo runs now (armed in the
/// guard's table): such a pid, like one [`note_leader`] kept, was not forked by this group.
pub(crate) fn group_members(
    pgid: Pid,
    spawned_at: Instant,
    leads_a_phase: impl Fn(i32) -> bool,
) -> io::Result<Members> {
    if spawned_at.elapsed() < RANGE_PROBE_MAX_AGE
        && let Some(candidates) = pids_allocated_after(pgid.as_raw_pid())
    {
        let mut forked_nothing = true;
        let pids = candidates
            .inspect(|&pid| {
                if forked_nothing
                    && !LATEST_LEADERS.spawned_since(pid, spawned_at)
                    && !leads_a_phase(pid)
                {
                    forked_nothing = false;
                }
            })
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

/// Leaders spawned lately by this process, the latest [`LatestLeaders::CAPACITY`].
static LATEST_LEADERS: LatestLeaders = LatestLeaders::new();

/// Records that this process just spawned `pid` as the leader of a new process group (call it
/// once the spawn returned): a pid allocated after another phase's leader that is one of these
/// was not forked by that phase.
pub(crate) fn note_leader(pid: Pid) {
    LATEST_LEADERS.note(pid.as_raw_pid(), Instant::now());
}

/// A ring of the latest leaders and when their spawn returned.
///
/// The time is what makes an entry safe to trust: a pid in a phase's range was allocated after
/// that phase's leader was spawned, so an entry noted before then is an older process whose
/// pid the counter has since handed out again (it wrapped while apollo spawned little), and is
/// not taken as a leader. An entry that fell out of the ring only costs a look for escaped
/// processes that finds none.
struct LatestLeaders {
    /// The entries (pid, when noted), and where the next one goes.
    ring: std::sync::Mutex<(LeaderEntries, usize)>,
}

type LeaderEntries = [(i32, Option<Instant>); LatestLeaders::CAPACITY];

impl LatestLeaders {
    const CAPACITY: usize = 256;

    const fn new() -> Self {
        Self {
            ring: std::sync::Mutex::new(([(0, None); Self::CAPACITY], 0)),
        }
    }

    fn note(&self, pid: i32, at: Instant) {
        let mut ring = self
            .ring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (slots, next) = &mut *ring;
        slots[*next] = (pid, Some(at));
        *next = (*next + 1) % Self::CAPACITY;
    }

    /// Whether `pid` was noted as a leader spawned at or after `since`.
    fn spawned_since(&self, pid: i32, since: Instant) -> bool {
        let ring = self
            .ring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ring.0
            .iter()
            .any(|&(noted, at)| noted == pid && at.is_some_and(|at| at >= since))
    }
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

    #[test]
    fn only_leaders_noted_since_a_phase_started_are_taken_as_not_its_forks() {
        let leaders = LatestLeaders::new();
        let before = Instant::now();
        leaders.note(4_000_001, before);
        let since = before + Duration::from_millis(5);
        leaders.note(4_000_002, since);
        leaders.note(4_000_003, since + Duration::from_millis(1));
        // Noted before the phase's leader was spawned: an older process, never trusted.
        assert!(!leaders.spawned_since(4_000_001, since));
        assert!(leaders.spawned_since(4_000_002, since));
        assert!(leaders.spawned_since(4_000_003, since));
        assert!(!leaders.spawned_since(4_000_004, since));
        // The ring keeps the latest only.
        for pid in 0..LatestLeaders::CAPACITY {
            leaders.note(5_000_000 + i32::try_from(pid).unwrap(), since);
        }
        assert!(!leaders.spawned_since(4_000_002, since));
        assert!(leaders.spawned_since(5_000_000, since));
    }

    #[test]
    // The test's own processes stand for other attempts' leaders: plain `Command`s suffice.
    #[allow(clippy::disallowed_methods)]
    fn a_range_of_other_leaders_is_no_fork_and_anything_else_is() {
        use std::os::unix::process::CommandExt as _;
        // Two leaders, each in its own group; the second one noted as spawned by apollo.
        /// Killed and reaped however the test ends: no process outlives it.
        struct Leader(std::process::Child);
        impl Drop for Leader {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let leader = || {
            Leader(
                std::process::Command::new("sleep")
                    .arg("60")
                    .process_group(0)
                    .spawn()
                    .unwrap(),
            )
        };
        let spawned_at = Instant::now();
        let first = leader();
        let second = leader();
        let first_pid = Pid::from_raw(i32::try_from(first.0.id()).unwrap()).unwrap();
        let second_pid = i32::try_from(second.0.id()).unwrap();
        note_leader(Pid::from_raw(second_pid).unwrap());
        let members = group_members(first_pid, spawned_at, |_| false).unwrap();
        // (An older phase is looked for in all of `/proc`, which never says "nothing".)
        let young = spawned_at.elapsed() < RANGE_PROBE_MAX_AGE;
        assert!(members.pids.is_empty());
        // Other tests of this binary spawn too: whatever else was allocated in the range (never
        // the second leader) says "forked".
        let others = pids_allocated_after(first_pid.as_raw_pid())
            .map(|range| range.filter(|&pid| pid != second_pid).count());
        if young && others == Some(0) {
            assert!(members.forked_nothing, "only a noted leader came after");
        }
        // An unnoted process after the first leader is a fork as far as the probe can tell (and
        // past the probe's age, the `/proc` scan never says "nothing").
        let mut third = std::process::Command::new("true").spawn().unwrap();
        third.wait().unwrap();
        assert!(
            !group_members(first_pid, spawned_at, |_| false)
                .unwrap()
                .forked_nothing
        );
        // A pid that leads a phase now is no fork either (the third was reaped: only the
        // second leader and it, or others, are in the range).
        let only_leaders = group_members(first_pid, spawned_at, |pid| {
            pid == second_pid || pid == i32::try_from(third.id()).unwrap()
        })
        .unwrap();
        let young = spawned_at.elapsed() < RANGE_PROBE_MAX_AGE;
        let others = pids_allocated_after(first_pid.as_raw_pid()).map(|range| {
            range
                .filter(|&pid| pid != second_pid && pid != i32::try_from(third.id()).unwrap())
                .count()
        });
        if young && others == Some(0) {
            assert!(only_leaders.forked_nothing);
        }
    }
}
