//! Linux process-group supervision: spawn into the guard's table, learn of the leader's exit
//! through a pidfd without reaping it, signal the group while the unreaped leader pins its id,
//! kill and count leftovers, then reap with `wait4` for the exit status and rusage.
//!
//! Everything here is private to the crate; no libc type leaves this module.

// Only apollo-exec creates processes (ARCHITECTURE.md); this is the one place it does.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use apollo_core::event::ExitStatus;

use crate::guard::Slot;
use crate::spawn::{Spawn, spawn_group_leader};

/// How long to wait for SIGKILLed leftovers to be gone before giving up on them. They cannot
/// ignore SIGKILL, so this only bounds a process stuck in uninterruptible sleep.
const LEFTOVER_EXIT_SAFETY_NET: Duration = Duration::from_secs(10);

/// A started, not yet reaped process that leads its own process group.
pub(crate) struct GroupLeader<'g> {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    spawned_at: Instant,
    /// Its group's entry in the guard's table, armed for as long as the leader is unreaped.
    slot: Slot<'g>,
}

/// What ended a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The leader exited (it is a zombie now, not reaped).
    LeaderExited,
    /// The deadline passed.
    Deadline,
    /// The cancel event fired.
    Cancel,
}

/// The reaped leader's status and resource usage.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reaped {
    pub(crate) exit: ExitStatus,
    pub(crate) user_cpu: Duration,
    pub(crate) sys_cpu: Duration,
    pub(crate) max_rss_kib: u64,
}

/// Which signal to send to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupSignal {
    Terminate,
    Kill,
}

impl<'g> GroupLeader<'g> {
    /// Start `spawn` as a new group (which comes with its pidfd) and arm `slot` with it.
    pub(crate) fn spawn(spawn: &Spawn<'_>, slot: Slot<'g>) -> io::Result<GroupLeader<'g>> {
        let spawned_at = Instant::now();
        let (pid, pidfd) = spawn_group_leader(spawn)?;
        slot.arm(pid);
        Ok(GroupLeader {
            pid,
            pidfd,
            spawned_at,
            slot,
        })
    }

    /// The leader's pid (also its process group id).
    pub(crate) fn pid(&self) -> u32 {
        u32::try_from(self.pid).unwrap_or(0)
    }

    /// Block until the leader exits, `cancel_event` becomes readable, or `deadline` passes.
    /// No polling: one `poll(2)` on the pidfd and the event.
    pub(crate) fn wait(
        &self,
        cancel_event: &OwnedFd,
        deadline: Option<Instant>,
    ) -> io::Result<Wake> {
        loop {
            let timeout_ms = match deadline {
                None => -1,
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(Wake::Deadline);
                    }
                    // Round up so we never wake just before the deadline and spin.
                    let millis = left.as_micros().div_ceil(1000);
                    libc::c_int::try_from(millis).unwrap_or(libc::c_int::MAX)
                }
            };
            let mut fds = [
                libc::pollfd {
                    fd: self.pidfd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: cancel_event.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: `fds` is a valid array of two pollfd structs for the duration of the call.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
            if ready < 0 {
                let error = io::Error::last_os_error();
                if error.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error);
            }
            if fds[0].revents != 0 {
                return Ok(Wake::LeaderExited);
            }
            if fds[1].revents != 0 {
                drain_event(cancel_event);
                return Ok(Wake::Cancel);
            }
        }
    }

    /// Signal the whole group. Safe against pid reuse: the leader is not reaped yet, so its pid,
    /// which is the group id, cannot name anything else.
    pub(crate) fn signal_group(&self, signal: GroupSignal) {
        // SAFETY (all three): plain syscalls; an error (ESRCH cannot happen while the leader is
        // unreaped) leaves nothing to do.
        match signal {
            GroupSignal::Terminate => {
                unsafe { libc::kill(-self.pid, libc::SIGTERM) };
                // A stopped process would keep the SIGTERM pending until the SIGKILL: wake it
                // so it can shut down cleanly within the grace period.
                unsafe { libc::kill(-self.pid, libc::SIGCONT) };
            }
            GroupSignal::Kill => {
                unsafe { libc::kill(-self.pid, libc::SIGKILL) };
            }
        }
    }

    /// After the leader exited (and before reaping it): SIGKILL every other process still in the
    /// group, wait until they are gone, and return how many there were.
    pub(crate) fn kill_leftovers(&self) -> io::Result<u32> {
        let mut killed: BTreeSet<libc::pid_t> = BTreeSet::new();
        // A leftover may fork between our scan and the kill; its child is killed by the group
        // SIGKILL too, and a second scan picks it up for the count and the wait.
        for _ in 0..8 {
            let members = group_members(self.pid, self.spawned_at)?;
            let fresh: Vec<libc::pid_t> = members
                .into_iter()
                .filter(|pid| !killed.contains(pid))
                .collect();
            if fresh.is_empty() {
                break;
            }
            // Pin each leftover's identity with a pidfd before killing, so the wait below
            // watches exactly these processes even if their pids are recycled.
            let pidfds: Vec<OwnedFd> = fresh
                .iter()
                .filter_map(|&pid| pidfd_open(pid).ok())
                .collect();
            self.signal_group(GroupSignal::Kill);
            killed.extend(fresh);
            wait_all_exited(&pidfds, LEFTOVER_EXIT_SAFETY_NET)?;
        }
        Ok(u32::try_from(killed.len()).unwrap_or(u32::MAX))
    }

    /// Reap the leader (it must have exited) and return its status and rusage. Its group
    /// leaves the guard's table first: once reaped, its id may name another process.
    pub(crate) fn reap(self) -> io::Result<Reaped> {
        self.slot.disarm();
        reap(self.pid)
    }
}

fn reap(pid: libc::pid_t) -> io::Result<Reaped> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; zeroed is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to a c_int and an rusage for the duration of the call.
        let result = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if result == pid {
            break;
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
    let exit = if libc::WIFSIGNALED(status) {
        ExitStatus::Signal(libc::WTERMSIG(status))
    } else {
        ExitStatus::Code(libc::WEXITSTATUS(status))
    };
    Ok(Reaped {
        exit,
        user_cpu: timeval_duration(usage.ru_utime),
        sys_cpu: timeval_duration(usage.ru_stime),
        // Linux reports ru_maxrss in KiB.
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    })
}

fn timeval_duration(value: libc::timeval) -> Duration {
    let seconds = u64::try_from(value.tv_sec).unwrap_or(0);
    let micros = u32::try_from(value.tv_usec).unwrap_or(0);
    Duration::from_secs(seconds) + Duration::from_micros(u64::from(micros))
}

fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::other("pidfd out of range"))?;
    // SAFETY: the kernel just handed us this fd; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Wait until every pidfd is readable (its process exited), up to `limit`.
fn wait_all_exited(pidfds: &[OwnedFd], limit: Duration) -> io::Result<()> {
    let deadline = Instant::now() + limit;
    let mut pending: Vec<libc::pollfd> = pidfds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    while !pending.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{} leftover process(es) did not exit within {:?} of SIGKILL",
                    pending.len(),
                    limit
                ),
            ));
        }
        let timeout_ms =
            libc::c_int::try_from(left.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX);
        let count = libc::nfds_t::try_from(pending.len()).unwrap_or(libc::nfds_t::MAX);
        // SAFETY: `pending` is a valid array of `count` pollfd structs.
        let ready = unsafe { libc::poll(pending.as_mut_ptr(), count, timeout_ms) };
        if ready < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        pending.retain(|entry| entry.revents == 0);
    }
    Ok(())
}

/// A phase younger than this cannot have seen the pid counter wrap around (that would take
/// `pid_max`, at least 32768, forks in this time), so its group members all have pids in the
/// cyclic range after the leader's and up to the last pid allocated.
const RANGE_PROBE_MAX_AGE: Duration = Duration::from_millis(100);

/// Above this many candidate pids, one `/proc` directory scan is cheaper than probing each.
const RANGE_PROBE_MAX_PIDS: u32 = 512;

/// Live processes (not zombies) in process group `pgid`, other than its leader.
///
/// Every member of the group was forked after the leader, so its pid was allocated after the
/// leader's: for a young phase, probing `/proc/<pid>/stat` for the pids allocated since (read
/// from `/proc/sys/kernel/ns_last_pid`) finds them all, and costs nothing when the unit forked
/// nothing. Otherwise, or when that range is large, scan all of `/proc`. (A process older than
/// the leader could only join the group by `setpgid` from within apollo's own session, which
/// nothing does.)
fn group_members(pgid: libc::pid_t, spawned_at: Instant) -> io::Result<Vec<libc::pid_t>> {
    if spawned_at.elapsed() < RANGE_PROBE_MAX_AGE
        && let Some(candidates) = pids_allocated_after(pgid)
    {
        return Ok(candidates
            .filter(|&pid| is_live_member(pid, pgid))
            .collect());
    }
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        if pid != pgid && is_live_member(pid, pgid) {
            members.push(pid);
        }
    }
    Ok(members)
}

/// The pids allocated after `first` (exclusive) up to the last one allocated, cyclically, or
/// `None` when that is unknown or more than [`RANGE_PROBE_MAX_PIDS`].
fn pids_allocated_after(first: libc::pid_t) -> Option<impl Iterator<Item = libc::pid_t>> {
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
    first: libc::pid_t,
    last: libc::pid_t,
    pid_max: Option<libc::pid_t>,
    limit: u32,
) -> Option<impl Iterator<Item = libc::pid_t>> {
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

fn read_number(path: &str) -> Option<libc::pid_t> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The last pid allocated in our pid namespace, read through a descriptor opened once per
/// process (every phase reads it: this spares a `/proc` path lookup, an open and a close).
fn last_pid() -> Option<libc::pid_t> {
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
fn is_live_member(pid: libc::pid_t, pgid: libc::pid_t) -> bool {
    // SAFETY: a plain syscall; -1 (gone, or not visible) is not a member.
    if unsafe { libc::getpgid(pid) } != pgid {
        return false;
    }
    matches!(read_state_and_pgrp(pid), Some((state, group)) if group == pgid && state != b'Z' && state != b'X')
}

/// Whether `pid` exists and is not a zombie.
fn is_alive(pid: libc::pid_t) -> bool {
    matches!(read_state_and_pgrp(pid), Some((state, _)) if state != b'Z' && state != b'X')
}

/// `(state, pgrp)` of `pid` from `/proc/<pid>/stat`, or `None` when it is gone.
fn read_state_and_pgrp(pid: libc::pid_t) -> Option<(u8, libc::pid_t)> {
    use std::io::Read as _;
    // Only the head of the file matters: pid, (comm ≤ 16 bytes), state, ppid, pgrp.
    let mut head = [0_u8; 256];
    let mut file = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let length = file.read(&mut head).ok()?;
    parse_state_and_pgrp(&head[..length])
}

/// Processes killed by [`kill_processes_with_env`], to wait for.
pub(crate) struct KilledProcesses {
    pidfds: Vec<OwnedFd>,
}

impl KilledProcesses {
    /// Wait up to `limit` for all of them to exit; return how many there were.
    pub(crate) fn wait(self, limit: Duration) -> io::Result<u32> {
        wait_all_exited(&self.pidfds, limit)?;
        Ok(u32::try_from(self.pidfds.len()).unwrap_or(u32::MAX))
    }
}

/// SIGKILL every live process (but this one) whose environment holds the entry `entry`
/// (`NAME=value`, exactly). Each candidate is pinned with a pidfd, and its environment read
/// again after pinning, so a pid recycled between the scan and the signal is left alone.
pub(crate) fn kill_processes_with_env(entry: &[u8]) -> io::Result<KilledProcesses> {
    let own_pid = std::process::id();
    let mut pidfds = Vec::new();
    for dir_entry in std::fs::read_dir("/proc")? {
        let Ok(dir_entry) = dir_entry else { continue };
        let Some(pid) = dir_entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        if u32::try_from(pid).ok() == Some(own_pid) || !has_env_entry(pid, entry) {
            continue;
        }
        let Ok(pidfd) = pidfd_open(pid) else { continue };
        // The pidfd now names one process for good; if the pid was recycled in between, the
        // new process will not have the entry (or is a legitimate match itself).
        if !has_env_entry(pid, entry) || !is_alive(pid) {
            continue;
        }
        // SAFETY: pidfd_send_signal on a pidfd we own; no siginfo.
        let sent = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if sent == 0 {
            pidfds.push(pidfd);
        }
    }
    Ok(KilledProcesses { pidfds })
}

fn has_env_entry(pid: libc::pid_t, entry: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|environ| environ.split(|&byte| byte == 0).any(|item| item == entry))
}

/// `(state, pgrp)` from the contents of `/proc/<pid>/stat`. The command name (field 2) is in
/// parentheses and may itself contain spaces and parentheses, so parse from the last `)`.
pub(crate) fn parse_state_and_pgrp(stat: &[u8]) -> Option<(u8, libc::pid_t)> {
    let close = stat.iter().rposition(|&byte| byte == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let _parent = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    Some((state, group))
}

/// A non-blocking eventfd the cancel waker writes to; `poll` watches it next to the pidfd.
pub(crate) fn cancel_event() -> io::Result<OwnedFd> {
    // SAFETY: eventfd returns a new fd or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just handed us this fd; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Make `event` readable (called from the cancel waker, on any thread).
pub(crate) fn signal_event(event: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a valid u64 to an eventfd we own. A full counter (EAGAIN)
    // still leaves the fd readable, which is all we need.
    unsafe {
        libc::write(
            event.as_raw_fd(),
            (&raw const one).cast::<libc::c_void>(),
            std::mem::size_of::<u64>(),
        )
    };
}

fn drain_event(event: &OwnedFd) {
    let mut value: u64 = 0;
    // SAFETY: reads 8 bytes into a valid u64 from a non-blocking eventfd we own.
    unsafe {
        libc::read(
            event.as_raw_fd(),
            (&raw mut value).cast::<libc::c_void>(),
            std::mem::size_of::<u64>(),
        )
    };
}

/// A human name for a signal number, for messages (`SIGKILL`), or `signal N`.
pub(crate) fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return format!("signal {signal}"),
    };
    name.to_owned()
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
    fn signal_names_are_readable() {
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(64), "signal 64");
    }
}
