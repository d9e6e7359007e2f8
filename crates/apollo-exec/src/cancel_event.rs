//! The eventfd that a [`CancelToken`](apollo_core::CancelToken)'s waker writes to, so a phase
//! blocked in `poll` on its leader's pidfd wakes at once on a cancellation.

use std::io;
use std::os::fd::OwnedFd;

use rustix::event::EventfdFlags;

/// A new non-blocking, close-on-exec eventfd.
pub(crate) fn create() -> io::Result<OwnedFd> {
    Ok(rustix::event::eventfd(
        0,
        EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
    )?)
}

/// Make `event` readable (called from the cancel waker, on any thread). A full counter
/// (`EAGAIN`) still leaves it readable, which is all that matters.
pub(crate) fn signal(event: &OwnedFd) {
    let _ = rustix::io::write(event, &1_u64.to_ne_bytes());
}

/// Consume what was signalled, so the next `poll` blocks again.
pub(crate) fn drain(event: &OwnedFd) {
    let mut value = [0_u8; 8];
    let _ = rustix::io::read(event, &mut value);
}
