//! The host's standard descriptors 0–2. If one is closed, the next file apollo opens gets its
//! number: apollo's own prints would land in a unit's log, and a child's `dup3` of its stdio
//! could overwrite one source with another. So a closed one is opened on `/dev/null` — when an
//! executor is made and whenever a guard helper is started.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

/// Open `/dev/null` onto each of fds 0–2 that is closed (three `fcntl`s when none is).
/// Best effort: without `/dev/null` there is nothing better to put there.
pub(crate) fn reopen_closed_standard_descriptors() {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let standard: [BorrowedFd<'_>; 3] = [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()];
    // In order: `open` returns the lowest free number, which is this one once the lower ones
    // are open.
    for fd in standard {
        if rustix::io::fcntl_getfd(fd).is_ok() {
            continue;
        }
        let Ok(null) = rustix::fs::open(
            "/dev/null",
            rustix::fs::OFlags::RDWR,
            rustix::fs::Mode::empty(),
        ) else {
            return;
        };
        if null.as_raw_fd() == fd.as_raw_fd() {
            // It stays open for the life of the process, as a standard descriptor would.
            std::mem::forget(null);
        }
    }
}
