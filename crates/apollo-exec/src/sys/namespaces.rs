//! `unshare(CLONE_NEWUSER | CLONE_NEWNS)`: the calling process into a user and a mount
//! namespace of its own. rustix's call is `unsafe` for the `CLONE_FILES` flag, which is not
//! used here.

use std::io;

use rustix::thread::UnshareFlags;

/// Moves the process into a new user namespace and a new mount namespace. The kernel refuses
/// (`EINVAL`) while the process has more than one thread.
pub(crate) fn unshare_user_and_mounts() -> io::Result<()> {
    // SAFETY: without `UnshareFlags::FILES` the file descriptor table stays shared, so no
    // thread can observe a descriptor from another table (the function's safety condition).
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNS) }
        .map_err(io::Error::from)
}
