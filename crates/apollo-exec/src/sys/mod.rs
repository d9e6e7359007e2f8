//! The raw system calls that have no safe form: the only module of apollo-exec with `unsafe`
//! code (the crate root denies it everywhere else). Each file is one job:
//!
//! * [`clone_child`] — the `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)` child that becomes a
//!   phase's leader, and the per-thread stack it runs on;
//! * [`guard_helper`] — the forked guard process;
//! * [`shared_table`] — the process-group table the guard helper shares with apollo;
//! * [`wait4`] — reaping a leader with its resource usage;
//! * [`getpgid`] — the process group of any pid, kernel threads included;
//! * [`lease`] — asking for (and dropping) a write lease on a file;
//! * [`namespaces`] — a user and mount namespace of the process's own (`apollo reproduce`).
//!
//! Everything else goes through std or `rustix`, whose Linux backend makes the same raw
//! system calls behind a safe API. No libc type leaves this module.

pub(crate) mod clone_child;
pub(crate) mod getpgid;
pub(crate) mod guard_helper;
pub(crate) mod lease;
pub(crate) mod namespaces;
pub(crate) mod shared_table;
pub(crate) mod wait4;
