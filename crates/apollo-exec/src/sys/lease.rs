//! Write leases (`fcntl(F_SETLEASE)`), which neither std nor rustix wraps: the kernel grants
//! one only when no other open of the file exists, which is how a spare log file is known to
//! be held by nothing else.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// Whether a write lease on `file` could be had right now (it is released at once). `Err`
/// carries the kernel's answer: `EAGAIN`/`EBUSY` when the file is open elsewhere, something
/// else when leases do not work here.
pub(crate) fn write_lease_available(file: &impl AsFd) -> io::Result<()> {
    let fd = file.as_fd().as_raw_fd();
    // SAFETY: fcntl with an integer argument on a descriptor the borrow keeps open; a granted
    // lease is released at once.
    unsafe {
        if libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) == 0 {
            libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK);
            return Ok(());
        }
    }
    Err(io::Error::last_os_error())
}
