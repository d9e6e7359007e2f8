//! Processes that left their attempt's process groups (`setsid`, `setpgid`, daemons): killed
//! at the attempt's end, and at its timeout, instead of at the run's.
//!
//! The process running apollo-exec is a **child subreaper** (`PR_SET_CHILD_SUBREAPER`, set once,
//! by the first executor): a process whose parent dies is handed to apollo instead of `init`.
//! When a phase's leader exits, its live children (those that left the group: the rest of the
//! group is killed and waited for first) become apollo's children before the leader's pidfd
//! reports the exit, and what they start is handed over as they die. So at the attempt's end
//! everything it started that still runs is, or descends from, a child of apollo's main thread,
//! where the kernel puts orphans. [`kill_escaped`] reads that one list
//! (`/proc/self/task/<pid>/children`), SIGKILLs the children whose environment carries the
//! attempt's `APOLLO_RUN_ID`, `APOLLO_UNIT` and `APOLLO_ATTEMPT` (and their process group, when
//! they lead one), reaps them, and repeats for the orphans these hand over. Zombies among
//! apollo's children that are in another session (orphans of a `setsid` that exited on their
//! own; a phase's leader never leaves apollo's session), or in one of the attempt's groups (a
//! background job its shell never waited for), are reaped on the way.
//!
//! Cost: nothing when no phase of the attempt forked anything (the leftover probe saw no pid
//! allocated after its leader but other phases' leaders: `group_members`); otherwise one read
//! of that small file, plus an `environ` read per child. No `/proc` scan.
//!
//! Every signal goes through a pidfd taken while the process is apollo's unreaped child and
//! checked again after: it cannot reach a recycled pid. Sweeps are serialised, so no other
//! sweep reaps a process this one is looking at.

use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::process::{Pid, PidfdFlags, Signal};

use crate::pidfds::{reap_if_child, wait_all_exited};
use crate::procfs::{self, EnvMatch, EnvironmentState};

/// How many times orphans handed over by the ones just killed are looked for.
const ROUNDS: usize = 64;

/// How long to wait for SIGKILLed escaped processes (only one stuck in uninterruptible sleep
/// takes more than an instant).
const EXIT_SAFETY_NET: Duration = Duration::from_secs(10);

/// How long a live child caught between `execve`s is waited for (only one stuck in
/// uninterruptible sleep in its `execve` takes more than an instant).
const EXECVE_SAFETY_NET: Duration = Duration::from_secs(10);

/// Whether this process is a child subreaper (set by [`become_subreaper`]).
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// Make this process a child subreaper, once. Failure (a sandbox forbidding `prctl`) leaves
/// escaped processes to the run's stray sweep, as before.
pub(crate) fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if rustix::process::set_child_subreaper(Some(rustix::process::getpid())).is_ok() {
            SUBREAPER.store(true, Ordering::Release);
        }
    });
}

/// The attempt whose escaped processes to kill.
pub(crate) struct Attempt<'a> {
    pub(crate) run_id: &'a str,
    pub(crate) unit: &'a str,
    pub(crate) attempt: u32,
    /// The process groups its phases ran in (their leaders' pids; 0 for none). The leaders are
    /// reaped, but a group's id is not reused while a member, even a zombie, is left.
    pub(crate) groups: &'a [i32],
}

/// SIGKILL and reap the attempt's escaped processes (see the module docs); return how many.
/// Best effort: an unreadable `/proc` leaves them to the run's stray sweep.
pub(crate) fn kill_escaped(attempt: &Attempt<'_>) -> u32 {
    if !SUBREAPER.load(Ordering::Acquire) {
        return 0;
    }
    static SWEEP: Mutex<()> = Mutex::new(());
    let _serialised = SWEEP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let run = format!("APOLLO_RUN_ID={}", attempt.run_id);
    let unit = format!("APOLLO_UNIT={}", attempt.unit);
    let number = format!("APOLLO_ATTEMPT={}", attempt.attempt);
    let markers: [&[u8]; 3] = [run.as_bytes(), unit.as_bytes(), number.as_bytes()];
    let own = rustix::process::getpid();
    // From `/proc`, not `getsid`: in a container the session leader is often outside our pid
    // namespace, the answer is then 0, and rustix's `getsid` asserts a positive one. `/proc`
    // says 0 too, for us and for the children that share our session, so they still compare.
    let own_session = procfs::read_stat_head(own).map(|head| head.session);
    let own = own.as_raw_pid();
    let mut killed = 0_u32;
    for _ in 0..ROUNDS {
        let Ok(children) = procfs::children_of_main_thread() else {
            break;
        };
        let mut pinned: Vec<OwnedFd> = Vec::new();
        for child in children {
            let Some(head) = procfs::read_stat_head(child) else {
                continue;
            };
            if head.is_dead() {
                // Not a group leader in our session: that may be another phase's leader, which
                // its phase reaps (its pid may even be a recycled group id of this attempt's).
                let of_the_attempt = |head: &procfs::StatHead| {
                    Some(head.session) != own_session
                        || (head.group > 0
                            && head.group != child.as_raw_pid()
                            && attempt.groups.contains(&head.group))
                };
                if of_the_attempt(&head) {
                    reap_orphan_zombie(child, own, of_the_attempt);
                }
                continue;
            }
            if !carries(child, &markers) {
                continue;
            }
            let Ok(pidfd) = rustix::process::pidfd_open(child, PidfdFlags::empty()) else {
                continue;
            };
            // Pinned: check again that the pid still names our live child of the attempt. Our
            // child's pid is not recycled before we reap it, and only sweeps (serialised) reap
            // orphans, so until the end of this round the pid names it: its group too. Patient
            // again: the child may have started an `execve` since it was looked at.
            match procfs::read_stat_head(child) {
                Some(head) if head.parent == own && !head.is_dead() => {
                    if !carries(child, &markers) {
                        continue;
                    }
                    if head.group == child.as_raw_pid() {
                        let _ = rustix::process::kill_process_group(child, Signal::KILL);
                    }
                }
                _ => continue,
            }
            if rustix::process::pidfd_send_signal(&pidfd, Signal::KILL).is_ok() {
                pinned.push(pidfd);
            }
        }
        if pinned.is_empty() {
            break;
        }
        let _ = wait_all_exited(&pinned, EXIT_SAFETY_NET);
        for pidfd in &pinned {
            reap_if_child(pidfd);
        }
        killed = killed.saturating_add(u32::try_from(pinned.len()).unwrap_or(u32::MAX));
    }
    killed
}

/// Whether `pid`'s environment holds every one of `markers`. One that reads empty is looked at
/// again while `pid` is between `execve`s, however long that takes under load, until its new
/// memory image has its environment: not for a given time, which a loaded machine can spend
/// before the process or this reader runs again (a deadline measured that way gave up on
/// processes that had finished their `execve` in the meantime).
fn carries(pid: Pid, markers: &[&[u8]]) -> bool {
    let start = Instant::now();
    loop {
        match procfs::env_match(pid, markers) {
            EnvMatch::All => return true,
            EnvMatch::Not | EnvMatch::Unreadable => return false,
            EnvMatch::Empty => {}
        }
        match procfs::read_environment_state(pid) {
            // Its `execve` finished since the read: read the new image.
            Some(EnvironmentState::Present) => {}
            Some(EnvironmentState::NotYetSet) => std::thread::sleep(Duration::from_micros(200)),
            Some(EnvironmentState::Empty | EnvironmentState::Exited) | None => return false,
        }
        if start.elapsed() >= EXECVE_SAFETY_NET {
            return false;
        }
    }
}

/// Reap the zombie `pid`, an orphan handed to us for which `ours` holds, unless it is a guard
/// helper (whose executor reaps it).
fn reap_orphan_zombie(pid: Pid, own: i32, ours: impl Fn(&procfs::StatHead) -> bool) {
    let is_guard = std::fs::read(format!("/proc/{}/comm", pid.as_raw_pid()))
        .is_ok_and(|comm| comm == b"apollo-guard\n");
    if is_guard {
        return;
    }
    let Ok(pidfd) = rustix::process::pidfd_open(pid, PidfdFlags::empty()) else {
        return;
    };
    if procfs::read_stat_head(pid)
        .is_some_and(|head| head.is_dead() && head.parent == own && ours(&head))
    {
        reap_if_child(&pidfd);
    }
}
