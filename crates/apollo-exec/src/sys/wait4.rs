//! Reaping a phase's leader with `wait4`, for its exit status and resource usage (std and
//! rustix reap without the rusage).

use std::io;
use std::time::Duration;

use rustix::process::Pid;

/// A reaped child's wait status and resource usage.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reaped {
    /// The exit code, or `None` when a signal ended it.
    pub(crate) code: Option<i32>,
    /// The signal that ended it.
    pub(crate) signal: Option<i32>,
    pub(crate) user_cpu: Duration,
    pub(crate) sys_cpu: Duration,
    /// Linux reports `ru_maxrss` in KiB.
    pub(crate) max_rss_kib: u64,
}

/// Block until the child `pid` has exited and reap it, retrying on `EINTR`.
pub(crate) fn reap(pid: Pid) -> io::Result<Reaped> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to a c_int and an rusage for the duration of the call.
        let result = unsafe { libc::wait4(pid.as_raw_pid(), &mut status, 0, &mut usage) };
        if result == pid.as_raw_pid() {
            break;
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
    let signaled = libc::WIFSIGNALED(status);
    Ok(Reaped {
        code: (!signaled).then(|| libc::WEXITSTATUS(status)),
        signal: signaled.then(|| libc::WTERMSIG(status)),
        user_cpu: timeval_duration(usage.ru_utime),
        sys_cpu: timeval_duration(usage.ru_stime),
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    })
}

fn timeval_duration(value: libc::timeval) -> Duration {
    let seconds = u64::try_from(value.tv_sec).unwrap_or(0);
    let micros = u32::try_from(value.tv_usec).unwrap_or(0);
    Duration::from_secs(seconds) + Duration::from_micros(u64::from(micros))
}
