//! apollo-exec: Apollo-11's process supervisor. It runs one attempt of a unit — `prepare` →
//! `execute` → `cleanup` — as supervised process groups, with timeouts and cancellation that
//! leave nothing behind, and implements apollo-core's [`Executor`](apollo_core::Executor).
//!
//! * [`ProcessExecutor`] — the executor; build it with [`ExecOptions`].
//! * [`kill_stray_processes`] — on resume, kill what a dead apollo's units left running.
//!
//! It is the only crate of the workspace that creates processes.
//!
//! ```
//! use apollo_core::{AttemptContext, AttemptRequest, CancelToken, Command, Executor, Unit};
//! use apollo_core::event::AttemptStatus;
//! use apollo_exec::{ExecOptions, ProcessExecutor};
//! use std::time::Duration;
//!
//! let dir = tempfile::tempdir()?;
//! let unit = Unit {
//!     name: "greet".to_owned(),
//!     deps: vec![],
//!     timeout: Some(Duration::from_secs(30)),
//!     retries: 0,
//!     retry_delay: Duration::from_secs(1),
//!     kill_grace: Duration::from_secs(5),
//!     prepare: None,
//!     execute: Command::Shell("echo hi".to_owned()),
//!     cleanup: None,
//!     inputs: vec![],
//!     outputs: vec![],
//!     env: Default::default(),
//!     workdir: dir.path().to_owned(),
//!     idempotent: true,
//! };
//! let request = AttemptRequest::new("r1", &unit, 1, dir.path());
//! let executor = ProcessExecutor::new(ExecOptions::default());
//! let outcome = executor.run_attempt(&request, &AttemptContext::new(&CancelToken::new()));
//! assert_eq!(outcome.status, AttemptStatus::Succeeded);
//! assert_eq!(std::fs::read_to_string(dir.path().join("stdout"))?, "hi\n");
//! assert_eq!(outcome.stdout_bytes, 3);
//! // sha256("hi\n")
//! assert_eq!(
//!     outcome.stdout_sha256.as_deref(),
//!     Some("98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4")
//! );
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # How a phase runs
//!
//! Each command is a **new process group** (`setpgid(0, 0)`, so its pid is its group id), with
//! stdin from `/dev/null` and stdout/stderr going straight to `<log_dir>/stdout` and
//! `<log_dir>/stderr`, opened once per attempt in append mode and shared by all phases. They
//! start unnamed (`O_TMPFILE`) and are linked into `log_dir` (created then) when the attempt
//! wrote something, once it has run for 100 ms, or at once for a unit that is not idempotent:
//! a quick, silent attempt creates nothing on disk. There is no pipe: output can neither fill a buffer and block the unit, nor grow apollo's memory,
//! and a grandchild that keeps stdout open holds nothing apollo waits for. Byte counts are the
//! files' growth; the SHA-256 of `execute`'s stdout is streamed back from the file's byte range
//! that execute wrote, 64 KiB at a time. The environment is apollo's (as it was when the
//! executor ran its first attempt), plus the unit's `env`, plus `APOLLO_RUN_ID`, `APOLLO_UNIT`,
//! `APOLLO_ATTEMPT` and `APOLLO_PHASE`; the working directory is the unit's `workdir`. The
//! process is started by a hand-written `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)` (see
//! "Cost"; Linux 5.3 or later).
//!
//! A list command is exec'd as given. A string command runs through `/bin/sh -c`, unless it has
//! no shell syntax whatsoever (only letters, digits, whitespace and `_-./,:+=@%`; the first word
//! neither an assignment nor a shell builtin or keyword other than a bare `true`/`false`):
//! then it is split on whitespace and exec'd directly, as make does, saving a shell per phase.
//! [`ExecOptions::direct_exec`] turns that off.
//!
//! A command that cannot start — not found, not executable, a bad working directory — ends its
//! phase with no exit status and a clear error; nothing panics.
//!
//! # Waiting without polling, and never signalling a stranger
//!
//! After the spawn, apollo opens a **pidfd** on the leader (Linux ≥ 5.3) and blocks in one
//! `poll(2)` on it, on an eventfd that the [`CancelToken`](apollo_core::CancelToken)'s waker
//! writes to, and with the remaining time as timeout. There is no sleep loop and no polling
//! interval: a phase costs its spawn plus a handful of syscalls (see "Cost" below).
//!
//! The pidfd becomes readable when the leader exits, but the leader is **not reaped** then: as
//! an unreaped zombie it keeps its pid, which is the group id, from being reused, so signalling
//! the group can only reach the unit's own processes. Only after the group is dealt with does
//! `wait4` reap the leader, yielding its exit status and rusage (user/sys CPU, max RSS; the
//! rusage covers the leader and the descendants it waited for).
//!
//! # Leftovers
//!
//! When the leader exits, whatever it left in its group (`sleep 1000 &`, a daemon that kept
//! stdout) is found in `/proc/<pid>/stat` by its group id (see "Cost" for which pids are
//! looked at), pinned with a pidfd each, SIGKILLed through the group (still pinned by the
//! unreaped leader), and waited for; their number is reported as `leftovers_killed`. A
//! process that leaves the group on purpose (`setsid`, `setpgid`) escapes this, since only a
//! cgroup could follow it; it still carries `APOLLO_RUN_ID`, which [`kill_stray_processes`]
//! goes by.
//!
//! # Timeouts and cancellation
//!
//! The unit's `timeout` covers `prepare` + `execute` together, from the attempt's start; the
//! error says which phase it cut short, and `execute` is not started at all when `prepare` used
//! the time up. `cleanup` has its own limit,
//! [`ExecOptions::cleanup_timeout`] (60 s by default), and always runs once prepare or execute
//! was started. A timeout sends SIGTERM to the whole group, waits `kill_grace` (for the leader
//! to exit), then sends SIGKILL to the group; when the leader exits during the grace period,
//! what remains of the group is SIGKILLed as leftovers at once (they had their SIGTERM).
//!
//! A raised [`CancelToken`](apollo_core::CancelToken) does the same to the running `prepare` or
//! `execute` (SIGKILL at once for [`CancelLevel::Immediate`](apollo_core::CancelLevel)); the
//! attempt is `Interrupted` and cleanup still runs. Cleanup itself is only cut short by a
//! cancellation *stronger* than the one in force when it started (a second Ctrl-C), or by its
//! own limit.
//!
//! Because every phase has its own process group, a Ctrl-C at the terminal reaches apollo
//! only, never the units directly: they hear of it as apollo's SIGTERM, after which their
//! cleanup runs. A SIGTERM to a group is followed by a SIGCONT, so a stopped unit (one that
//! read from the terminal, say) can still shut down within its grace.
//!
//! # When apollo itself dies
//!
//! Each executor (and its clones) has one **guard**: a small helper process, forked by the
//! first phase and named `apollo-guard`, that kills the process groups of the running phases
//! when apollo dies, however it dies (`kill -9`, OOM, a crash), or when the executor is dropped
//! with a phase still armed. It needs nothing from the units:
//!
//! * apollo and the helper share a table of process-group ids (an anonymous `MAP_SHARED`
//!   mapping). A phase writes its group id there right after the spawn and clears it before
//!   reaping its leader — while the leader is an unreaped zombie its pid, the group id, cannot
//!   be reused, so the table never names a stranger's group. Both are plain atomic stores: the
//!   helper is never woken during the run.
//! * The helper blocks in `read` on a pipe whose only write end apollo holds (close-on-exec,
//!   so no unit inherits it). When apollo is gone the read returns end-of-file, and the helper
//!   sends SIGKILL to every group still in the table (`kill(-pgid, SIGKILL)`) and exits; the
//!   init process reaps it. This kills each phase's **whole group** — its leader and everything
//!   it forked that stayed in the group — which the parent-death signal apollo used before
//!   (`PR_SET_PDEATHSIG`, leader only) did not.
//! * The helper is forked from a multi-threaded process, so until it exits it makes only raw,
//!   async-signal-safe calls: no allocation, no lock. It leaves apollo's session (a Ctrl-C at
//!   the terminal, or a kill of apollo's process group, does not reach it), ignores SIGTERM,
//!   SIGINT, SIGHUP and SIGQUIT (so a `pkill apollo` leaves the guarantee in place), and closes
//!   every descriptor it inherited (it holds no lock file, log, terminal or pipe of apollo's).
//! * Before each spawn apollo checks the helper with one `waitpid(WNOHANG)`; one that was
//!   killed is reaped and replaced, and the table carries over. A phase that cannot get a guard
//!   (the fork fails) is not started: it fails with an error saying so. Dropping the last clone
//!   of the executor kills and reaps the helper, so no process outlives it.
//!
//! What the guard does not cover: a process that left its phase's group (`setsid`,
//! `setpgid`, a daemon), and the microseconds between a spawn and the table entry, or a helper
//! killed by hand until the next spawn replaces it. Such processes still carry
//! `APOLLO_RUN_ID` in their environment, and [`kill_stray_processes`] kills them when the run
//! is resumed, before anything reruns. (After apollo's death, a group whose leader had exited
//! but was not yet cleared from the table could in principle have its id reused before the
//! helper's SIGKILL; that needs the pid counter to wrap to that exact id and the new process to
//! lead a group, within microseconds.)
//!
//! # Cost
//!
//! A phase is started the way glibc's `posix_spawn` starts a process — a
//! `clone(CLONE_VM | CLONE_VFORK)` followed by the signal resets, `setpgid`, the `dup2`s,
//! `chdir` and `execve` in the child — instead of `fork`, which copied apollo's page tables at
//! every spawn and then made every thread of apollo take copy-on-write faults. (The guard's
//! own fork happens once per executor.) `spawn.rs` does it by hand rather than through
//! `posix_spawn`, which maps and unmaps a fresh child stack per spawn (TLB shootdowns across
//! apollo's threads, page faults in the child) and leaves a `pidfd_open` to do; and rather than
//! through `std::process::Command`, which on top copied apollo's whole environment into a map
//! and back into C strings and duplicated the three stdio descriptors at every spawn. Each
//! thread keeps one child stack; `CLONE_PIDFD` returns the pidfd with the pid; the child only
//! makes raw system calls on data built before the clone. A bare program name is looked up in the child's
//! `PATH` by apollo, once per program and `PATH` (remembered like a shell's command hash;
//! later spawns only check, with one `stat` and one `access`, that the file found is still
//! there), instead of by the child with one failing `execve` per entry before the right one.
//! A file the kernel cannot exec (a script without `#!`) is run with `/bin/sh`, as `execvp`
//! would.
//!
//! The hand-written child could also arm `PR_SET_PDEATHSIG`, but that would still kill only
//! each phase's leader; the guard covers the whole group.
//!
//! `benches/spawn.rs` measures it in one run against bare `Command::new("true").status()`,
//! alternating the variants (`cargo bench -p apollo-exec --bench spawn`), in wall time and in
//! CPU time (parent plus children, which the load of a shared machine barely moves). On the
//! 2-core development VM, per run of `true` (CPU time, parent plus child; the machine was
//! shared, so wall times were noisier):
//!
//! | variant | µs CPU | × bare |
//! |---|---|---|
//! | bare `Command::new("true").status()` (posix_spawn) | 359 | 1.00 |
//! | new group + file stdio, no hook (posix_spawn) | 340 | 0.95 |
//! | the same + the old PDEATHSIG `pre_exec` hook (fork + exec) | 462 | 1.28 |
//! | `ProcessExecutor`, `true` exec'd directly | 413 | 1.15 |
//! | `ProcessExecutor`, through `/bin/sh -c true` | 488 | 1.36 |
//!
//! So a phase costs ≈ 55 µs of CPU over a bare spawn (it cost ≈ 165 µs with the hook, which
//! alone was ≈ 100–120 µs here, more in a large multi-threaded apollo). What is left is
//! apollo's bookkeeping, about thirty cheap syscalls per attempt: the two log files and their
//! lengths, an eventfd, the pidfd, one `poll`, the leftover probe, `wait4`. (The table was
//! measured when spawns still went through `std::process::Command`, which added the copy of
//! the environment and the `dup`s.) End to end, `apollo run` of 10,000 units running
//! `true`, 2 at a time, used ≈ 5 s of CPU instead of ≈ 11 s with the hook (a bare C runner
//! using `posix_spawnp`: ≈ 3.4 s). Exec'ing plain string commands without a shell saves
//! ≈ 75 µs per phase.
//!
//! Finding leftovers costs next to nothing for a unit that forked nothing: every member of a
//! phase's group was forked after its leader, so for a phase younger than 100 ms apollo only
//! asks `getpgid` of the pids allocated since the leader (`/proc/sys/kernel/ns_last_pid`, read
//! through a descriptor kept open; wrapping that counter takes at least 32768 forks), and
//! reads `/proc/<pid>/stat` only for a member. Older phases, or a range of more than 512 pids,
//! get a full `/proc` scan (≈ 0.6 ms with 90 processes), negligible next to their length.

#![warn(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!("apollo-exec supervises processes with Linux interfaces (pidfd, prctl, /proc)");

mod command_line;
mod executor;
mod guard;
#[cfg(target_os = "linux")]
mod linux;
mod output;
mod phase;
mod spawn;
mod strays;

pub use executor::{ExecOptions, ProcessExecutor};
pub use strays::{StrayError, kill_stray_processes};
