//! What apollo knows about processes and the machine they run on, in one place (issue 35): this
//! host's name and boot, whether a pid names a process, and whether it is a live apollo that
//! wrote a given record. The lock (who holds a state directory), the run-in-use check of a
//! resume and `apollo stop` all ask here, so they cannot disagree about a holder.
//!
//! ```
//! use apollo_store::process;
//!
//! assert!(process::exists(std::process::id()));
//! assert!(!process::host_name().is_empty());
//! // This process is never "another live apollo".
//! assert!(!process::is_live_apollo(std::process::id(), i64::MAX / 2));
//! ```

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// This machine's name, as run records and the lock file record it: the kernel's host name,
/// else `$HOSTNAME`, else `unknown`.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| {
            std::env::var("HOSTNAME")
                .ok()
                .filter(|name| !name.is_empty())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`): a pid recorded under another boot names
/// nothing that still runs.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty())
}

/// When this machine booted, in Unix seconds (`btime` of `/proc/stat`).
pub fn boot_time() -> Option<i64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

/// Whether `pid` names a process on this machine (of any user: one of another user exists
/// though it may not be signalled). Pid 0 names no single process; it is reported as existing,
/// so a lock recorded with it is never taken for free.
pub fn exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return true;
    };
    // kill(2) with signal 0 sends nothing; only "no such process" says the pid is free (a
    // process of another user answers EPERM: it exists).
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// Whether `pid` (on this host) is another live apollo that may have written a record at
/// `recorded_at` (Unix seconds): a process other than this one, not a zombie, whose executable
/// is this process's executable or whose command name is `apollo`, and that did not start
/// after that record was written (then the pid was reused, by a later process).
pub fn is_live_apollo(pid: u32, recorded_at: i64) -> bool {
    if pid == std::process::id() || pid == 0 {
        return false;
    }
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let Ok(stat) = std::fs::read_to_string(proc_dir.join("stat")) else {
        return false;
    };
    // `pid (comm) S …`: the state follows the last `)` (a command name may hold one).
    let after_comm = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
    let state = after_comm.and_then(|rest| rest.chars().next());
    if matches!(state, None | Some('Z' | 'X' | 'x')) {
        return false;
    }
    // Field 22, the start time in clock ticks after boot (USER_HZ, 100 on Linux).
    let started = after_comm
        .and_then(|rest| rest.split_whitespace().nth(19))
        .and_then(|ticks| ticks.parse::<i64>().ok());
    if let (Some(ticks), Some(boot)) = (started, boot_time())
        && boot + ticks / 100 > recorded_at + 2
    {
        return false;
    }
    let same_executable = match (
        std::fs::metadata(proc_dir.join("exe")),
        std::fs::metadata("/proc/self/exe"),
    ) {
        (Ok(theirs), Ok(ours)) => theirs.dev() == ours.dev() && theirs.ino() == ours.ino(),
        _ => false,
    };
    same_executable
        || std::fs::read_to_string(proc_dir.join("comm"))
            .is_ok_and(|comm| comm.trim_end() == "apollo")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_exists_and_is_never_another_apollo() {
        assert!(exists(std::process::id()));
        assert!(!exists(u32::MAX));
        assert!(exists(0), "pid 0 is never told free");
        assert!(!is_live_apollo(std::process::id(), i64::MAX / 2));
        assert!(!is_live_apollo(u32::MAX, i64::MAX / 2));
        assert!(!is_live_apollo(0, i64::MAX / 2));
    }

    #[test]
    fn the_machine_has_a_name_a_boot_and_a_boot_time() {
        assert!(!host_name().is_empty());
        assert!(boot_id().is_some_and(|id| !id.is_empty()));
        assert!(boot_time().is_some_and(|boot| boot > 0));
    }
}
