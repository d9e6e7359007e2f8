//! `getpgid` of an arbitrary process. rustix wraps it, but debug-asserts a positive answer,
//! and a kernel thread's process group is 0: the leftover probe asks about any pid.

use rustix::process::Pid;

/// The process group of `pid`; `None` when it is gone or not visible.
pub(crate) fn process_group_of(pid: Pid) -> Option<i32> {
    // SAFETY: getpgid takes and returns plain integers; no memory is involved.
    let pgid = unsafe { libc::getpgid(pid.as_raw_pid()) };
    (pgid >= 0).then_some(pgid)
}
