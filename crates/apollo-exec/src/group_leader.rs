//! A phase's process group, from its spawn to its reaping: learn of the leader's exit through
//! its pidfd without reaping it, signal the group while the unreaped leader pins its id, kill
//! and count leftovers, then reap with `wait4` for the exit status and rusage.
//!
//! Invariants:
//! * the group's id stays in the guard's table exactly as long as its leader is unreaped;
//! * once the leader has exited, the group is SIGKILLed before the leader is reaped, whatever
//!   the leftover scan found;
//! * a [`GroupLeader`] that is dropped unreaped (a panic mid-phase) SIGKILLs its group and
//!   reaps its leader: no live group is ever abandoned.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use apollo_core::event::ExitStatus;
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, Signal};

use crate::cancel_event;
use crate::group_members::group_members;
use crate::guard::Slot;
use crate::pidfds::{reap_if_child, wait_all_exited};
use crate::spawn::{Spawn, spawn_group_leader};
use crate::sys::wait4;

/// How long to wait for SIGKILLed leftovers to be gone before giving up on them. They cannot
/// ignore SIGKILL, so this only bounds a process stuck in uninterruptible sleep.
const LEFTOVER_EXIT_SAFETY_NET: Duration = Duration::from_secs(10);

/// A started, not yet reaped process that leads its own process group.
pub(crate) struct GroupLeader<'g> {
    pid: Pid,
    pidfd: OwnedFd,
    spawned_at: Instant,
    /// Its group's entry in the guard's table, armed for as long as the leader is unreaped
    /// (`None` once reaped).
    slot: Option<Slot<'g>>,
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
    /// The guard's helper died (see [`GroupLeader::rearm_guard`]).
    GuardDied,
}

/// The reaped leader's status and resource usage.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reaped {
    pub(crate) exit: ExitStatus,
    pub(crate) user_cpu: Duration,
    pub(crate) sys_cpu: Duration,
    pub(crate) max_rss_kib: u64,
}

/// What [`GroupLeader::kill_leftovers`] found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Leftovers {
    /// Processes killed in the group (besides the leader).
    pub(crate) killed: u32,
    /// The phase created no process at all besides its leader (so none escaped its group).
    pub(crate) forked_nothing: bool,
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
        // The child armed the slot itself before its exec; armed again here, the same id.
        let (pid, pidfd) = spawn_group_leader(spawn, Some(slot.entry()))?;
        crate::group_members::note_leader(pid);
        slot.arm(pid);
        Ok(GroupLeader {
            pid,
            pidfd,
            spawned_at,
            slot: Some(slot),
        })
    }

    /// The leader's pid (also its process group id).
    pub(crate) fn pid(&self) -> u32 {
        self.pid.as_raw_nonzero().get().unsigned_abs()
    }

    /// Block until the leader exits, `cancel_event` becomes readable, or `deadline` passes.
    /// No polling: one `poll(2)` on the pidfd and the event.
    pub(crate) fn wait(
        &self,
        cancel_event: &OwnedFd,
        deadline: Option<Instant>,
    ) -> io::Result<Wake> {
        loop {
            let timeout = match deadline {
                None => None,
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(Wake::Deadline);
                    }
                    Some(Timespec::try_from(left).unwrap_or(Timespec {
                        tv_sec: i64::MAX,
                        tv_nsec: 0,
                    }))
                }
            };
            let guard = self.slot.as_ref().and_then(Slot::watch);
            let mut fds = [
                PollFd::new(&self.pidfd, PollFlags::IN),
                PollFd::new(cancel_event, PollFlags::IN),
                // Watched while there is a helper to watch; the poll stops at the first two.
                PollFd::from_borrowed_fd(
                    guard.unwrap_or_else(|| cancel_event.as_fd()),
                    PollFlags::IN,
                ),
            ];
            let watched = if guard.is_some() { 3 } else { 2 };
            match rustix::event::poll(&mut fds[..watched], timeout.as_ref()) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(error) => return Err(error.into()),
            }
            if !fds[0].revents().is_empty() {
                return Ok(Wake::LeaderExited);
            }
            if !fds[1].revents().is_empty() {
                cancel_event::drain(cancel_event);
                return Ok(Wake::Cancel);
            }
            if watched == 3 && !fds[2].revents().is_empty() {
                return Ok(Wake::GuardDied);
            }
        }
    }

    /// The guard's helper died: start another, which guards this group (and every other armed
    /// one) again. On failure this phase runs on unguarded, and no new phase starts without a
    /// guard.
    pub(crate) fn rearm_guard(&mut self) -> io::Result<()> {
        match self.slot.as_mut() {
            Some(slot) => slot.rearm(),
            None => Ok(()),
        }
    }

    /// Signal the whole group. Safe against pid reuse: the leader is not reaped yet, so its
    /// pid, which is the group id, cannot name anything else. An error (ESRCH cannot happen
    /// while the leader is unreaped) leaves nothing to do.
    pub(crate) fn signal_group(&self, signal: GroupSignal) {
        match signal {
            GroupSignal::Terminate => {
                let _ = rustix::process::kill_process_group(self.pid, Signal::TERM);
                // A stopped process would keep the SIGTERM pending until the SIGKILL: wake it
                // so it can shut down cleanly within the grace period.
                let _ = rustix::process::kill_process_group(self.pid, Signal::CONT);
            }
            GroupSignal::Kill => {
                let _ = rustix::process::kill_process_group(self.pid, Signal::KILL);
            }
        }
    }

    /// After the leader exited (and before reaping it): SIGKILL every other process still in
    /// the group (and each one a scan found there, should it have left the group since), wait
    /// until they are gone, reap those handed to apollo (the child subreaper:
    /// see `escaped`), and say how many there were.
    pub(crate) fn kill_leftovers(&self) -> io::Result<Leftovers> {
        self.kill_leftovers_with(&|| {})
    }

    /// [`kill_leftovers`](Self::kill_leftovers), calling `between` after each scan, before its
    /// kill (a test stands in for a leftover's timing with it).
    fn kill_leftovers_with(&self, between: &dyn Fn()) -> io::Result<Leftovers> {
        let mut killed: BTreeSet<i32> = BTreeSet::new();
        let mut forked_nothing = false;
        // A leftover may fork between our scan and the kill; its child is killed by the group
        // SIGKILL too, and a second scan picks it up for the count and the wait.
        for round in 0..8 {
            let members = group_members(self.pid, self.spawned_at, |pid| {
                self.slot
                    .as_ref()
                    .is_some_and(|slot| slot.leads_a_phase(pid))
            })?;
            if round == 0 {
                forked_nothing = members.forked_nothing;
            }
            let fresh: Vec<Pid> = members
                .pids
                .into_iter()
                .filter(|pid| !killed.contains(&pid.as_raw_pid()))
                .collect();
            if fresh.is_empty() {
                break;
            }
            // Pin each leftover's identity with a pidfd before killing, so the wait below
            // watches exactly these processes even if their pids are recycled.
            let pidfds: Vec<OwnedFd> = fresh
                .iter()
                .filter_map(|&pid| self.pin_member(pid))
                .collect();
            between();
            self.signal_group(GroupSignal::Kill);
            // One that left the group (`setsid`) after it was pinned would escape the group's
            // signal, and the wait below would wait for it: each is killed through its own
            // pidfd as well.
            for pidfd in &pidfds {
                let _ = rustix::process::pidfd_send_signal(pidfd, Signal::KILL);
            }
            killed.extend(fresh.iter().map(|pid| pid.as_raw_pid()));
            wait_all_exited(&pidfds, LEFTOVER_EXIT_SAFETY_NET)?;
            // Those whose parent died first were handed to apollo: reap them (exactly them,
            // through their pidfds), or they stay zombies.
            for pidfd in &pidfds {
                reap_if_child(pidfd);
            }
        }
        Ok(Leftovers {
            killed: u32::try_from(killed.len()).unwrap_or(u32::MAX),
            forked_nothing,
        })
    }

    /// A pidfd of `pid`, found in the group by a scan, if it still runs in the group once
    /// pinned. Between the scan and the pin it may have died and its pid gone to another
    /// process, which must not be signalled; or it may have left the group, and then the
    /// escaped-process sweep at the attempt's end deals with it. The group is read while the
    /// pinned process still runs, so the pid names that process.
    fn pin_member(&self, pid: Pid) -> Option<OwnedFd> {
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()?;
        let in_group = crate::sys::getpgid::process_group_of(pid) == Some(self.pid.as_raw_pid());
        let mut exited = [PollFd::new(&pidfd, PollFlags::IN)];
        let running = matches!(
            rustix::event::poll(
                &mut exited,
                Some(&Timespec {
                    tv_sec: 0,
                    tv_nsec: 0
                })
            ),
            Ok(0)
        );
        (in_group && running).then_some(pidfd)
    }

    /// Reap the leader (it must have exited or been SIGKILLed) and return its status and
    /// rusage. The group gets a SIGKILL first (anything the leftover scan could not see goes
    /// too), then leaves the guard's table: once reaped, its id may name another process.
    pub(crate) fn reap(mut self) -> io::Result<Reaped> {
        self.signal_group(GroupSignal::Kill);
        if let Some(slot) = self.slot.take() {
            slot.disarm();
        }
        let reaped = wait4::reap(self.pid)?;
        Ok(Reaped {
            exit: match (reaped.signal, reaped.code) {
                (Some(signal), _) => ExitStatus::Signal(signal),
                (None, code) => ExitStatus::Code(code.unwrap_or(0)),
            },
            user_cpu: reaped.user_cpu,
            sys_cpu: reaped.sys_cpu,
            max_rss_kib: reaped.max_rss_kib,
        })
    }
}

impl Drop for GroupLeader<'_> {
    /// A phase cut short before it reaped its leader (a panic): kill the whole group while
    /// the unreaped leader still pins its id, wait until its members are gone, then reap the
    /// leader.
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.signal_group(GroupSignal::Kill);
            // Best effort: each member still seen is pinned and waited for.
            let _ = self.kill_leftovers();
            slot.disarm();
            let _ = wait4::reap(self.pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::Environment;
    use crate::guard::Guard;
    use std::ffi::{OsStr, OsString};
    use std::os::fd::AsFd;

    fn is_gone_or_zombie(pid: Pid) -> bool {
        match std::fs::read(format!("/proc/{}/stat", pid.as_raw_pid())) {
            Err(_) => true,
            Ok(stat) => matches!(
                crate::procfs::parse_state_and_pgrp(&stat),
                Some((b'Z' | b'X', _)) | None
            ),
        }
    }

    /// `program` with `args` in `workdir`, reading `stdin`, writing both outputs to `output`,
    /// with apollo's own environment.
    fn spawn_of<'a>(
        program: &'a str,
        args: &'a [OsString],
        workdir: &'a std::path::Path,
        stdin: &'a std::fs::File,
        output: &'a std::fs::File,
        base: &'a Environment,
    ) -> Spawn<'a> {
        Spawn {
            program: OsStr::new(program),
            args,
            workdir,
            stdin: stdin.as_fd(),
            stdout: output.as_fd(),
            stderr: output.as_fd(),
            base,
            overrides: &[],
        }
    }

    #[test]
    fn the_child_arms_its_slot_before_it_execs_and_a_failed_spawn_takes_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let guard = Guard::default();
        let environment = Environment::capture();
        let null = std::fs::File::open("/dev/null").unwrap();
        let args = [OsString::from("-c"), OsString::from("exec sleep 1000")];
        let spawn = |program: &'static str| {
            spawn_of(program, &args, dir.path(), &null, &null, &environment)
        };
        // apollo never arms this slot: the child did, before its exec (apollo's thread waits
        // for that), so a SIGKILL of apollo right after the spawn still kills the group.
        let slot = guard.reserve().unwrap();
        let (pid, pidfd) = spawn_group_leader(&spawn("/bin/sh"), Some(slot.entry())).unwrap();
        let armed = slot.entry().load(std::sync::atomic::Ordering::Acquire);
        // Killed before anything is asserted (nothing outlives the test), disarmed before the
        // reap (the module's order).
        rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL).unwrap();
        slot.disarm();
        crate::pidfds::reap_if_child(&pidfd);
        assert_eq!(armed, pid.as_raw_pid());
        // A child that cannot exec has armed the slot too: it is reserved again once the
        // spawn has failed, before the child's pid can be reused.
        let slot = guard.reserve().unwrap();
        let failed = spawn_group_leader(
            &spawn("/nonexistent/apollo-no-such-program"),
            Some(slot.entry()),
        );
        assert_eq!(failed.unwrap_err().kind(), std::io::ErrorKind::NotFound);
        assert_eq!(
            slot.entry().load(std::sync::atomic::Ordering::Acquire),
            crate::guard::RESERVED
        );
    }

    #[test]
    fn a_panic_in_the_middle_of_a_phase_kills_its_group_and_reaps_its_leader() {
        let dir = tempfile::tempdir().unwrap();
        let started = dir.path().join("started");
        let script = format!(
            "sleep 1000 & echo $! > {0}/grandchild; touch {0}/started; wait",
            dir.path().display()
        );
        let guard = Guard::default();
        let environment = Environment::capture();
        let null = std::fs::File::open("/dev/null").unwrap();
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let args = [OsString::from("-c"), OsString::from(script)];
        let leader_pid = std::sync::Mutex::new(None);
        let panicked = std::panic::catch_unwind(|| {
            let spawn = spawn_of("/bin/sh", &args, dir.path(), &null, &log, &environment);
            let leader = GroupLeader::spawn(&spawn, guard.reserve().unwrap()).unwrap();
            *leader_pid.lock().unwrap() = Some(leader.pid);
            let deadline = Instant::now() + Duration::from_secs(60);
            while !started.exists() {
                assert!(Instant::now() < deadline, "the unit never started");
                std::thread::sleep(Duration::from_millis(2));
            }
            panic!("a panic mid-phase, with the group running");
        });
        assert!(panicked.is_err());
        let leader = leader_pid.lock().unwrap().unwrap();
        let grandchild: i32 = std::fs::read_to_string(dir.path().join("grandchild"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            is_gone_or_zombie(Pid::from_raw(grandchild).unwrap()),
            "the group outlived the panic"
        );
        assert!(
            !std::path::Path::new(&format!("/proc/{}", leader.as_raw_pid())).exists(),
            "the leader was not reaped"
        );
        assert_eq!(
            guard.reserve().map(|_| ()).ok(),
            Some(()),
            "the guard is still usable"
        );
    }

    #[test]
    fn a_leftover_that_leaves_the_group_between_the_scan_and_the_kill_is_killed_too() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        // The leftover records its pid, says it is ready once the `mv` it forked has exited
        // (with a builtin: no fork), waits for `go` without forking (it is then the group's
        // only other process), then leaves the group in its own process: setsid(1) calls
        // setsid() without forking when its caller leads no group.
        let script = format!(
            "sh -c 'echo $$ > {d}/leftover.tmp && mv {d}/leftover.tmp {d}/leftover \
             && : > {d}/ready; while [ ! -e {d}/go ]; do :; done; exec setsid sleep 1000' & \
             while [ ! -e {d}/ready ]; do sleep 0.01; done; exit 0"
        );
        let guard = Guard::default();
        let environment = Environment::capture();
        let null = std::fs::File::open("/dev/null").unwrap();
        let args = [OsString::from("-c"), OsString::from(script)];
        let spawn = spawn_of("/bin/sh", &args, dir.path(), &null, &null, &environment);
        let leader = GroupLeader::spawn(&spawn, guard.reserve().unwrap()).unwrap();
        let cancel = crate::cancel_event::create().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        assert_eq!(
            leader.wait(&cancel, Some(deadline)).unwrap(),
            Wake::LeaderExited
        );
        let leftover: i32 = std::fs::read_to_string(dir.path().join("leftover"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let leftover = Pid::from_raw(leftover).unwrap();
        // Pinned here, and killed when the test ends however it ends (nothing outlives it).
        struct KillOnDrop(OwnedFd);
        impl Drop for KillOnDrop {
            fn drop(&mut self) {
                let _ = rustix::process::pidfd_send_signal(&self.0, Signal::KILL);
            }
        }
        let pinned = KillOnDrop(
            rustix::process::pidfd_open(leftover, rustix::process::PidfdFlags::empty()).unwrap(),
        );
        let moved = std::cell::Cell::new(false);
        // Between the scan (which found it in the group) and the kill, it leaves the group.
        let found = leader.kill_leftovers_with(&|| {
            if moved.replace(true) {
                return;
            }
            std::fs::write(dir.path().join("go"), b"").unwrap();
            loop {
                match crate::procfs::read_state_and_pgrp(leftover) {
                    Some((_, pgrp)) if pgrp == leftover.as_raw_pid() => break,
                    Some(_) => {}
                    None => panic!("the leftover ended instead of leaving its group (setsid?)"),
                }
                assert!(
                    Instant::now() < deadline,
                    "the leftover never left its group"
                );
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let gone = is_gone_or_zombie(leftover);
        drop(pinned);
        leader.reap().unwrap();
        assert!(moved.get(), "the scan did not find the leftover");
        let found = found.expect("kill_leftovers waited for a process it did not kill");
        assert_eq!(found.killed, 1);
        assert!(gone, "the leftover that left the group is still running");
    }
}
