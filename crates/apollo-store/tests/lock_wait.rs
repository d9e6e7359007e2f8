//! `StateDir::lock(true)` (what `apollo run --wait` uses) blocks until the holder lets go.
//!
//! The test must not pass without exercising the wait: it releases the lock only once the
//! waiting thread is inside the blocking `flock(2)` (seen in `/proc/self/task/TID/syscall`),
//! and the waiter checks that it got the lock only after the release.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use apollo_store::StateDir;

/// A safety net only: the waiter is normally blocked within milliseconds.
const SAFETY_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether the thread `tid` of this process is blocked in the system call `syscall`.
fn blocked_in(tid: libc::pid_t, syscall: libc::c_long) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall"))
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<libc::c_long>().ok())
        == Some(syscall)
}

#[test]
#[allow(unsafe_code)] // gettid(2) of the waiting thread.
fn waiting_for_the_lock_returns_only_after_the_holder_releases_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
    let held = state.lock(false).unwrap();

    let released = Arc::new(AtomicBool::new(false));
    let (tid_sender, tid_receiver) = mpsc::channel();
    let waiter = {
        let root = state.path().to_path_buf();
        let released = Arc::clone(&released);
        std::thread::spawn(move || {
            // SAFETY: gettid(2) takes no arguments and cannot fail.
            tid_sender.send(unsafe { libc::gettid() }).unwrap();
            let state = StateDir::open_existing(&root).unwrap();
            let lock = state.lock(true);
            // Acquired: it must have been released first, or the test proved nothing.
            (lock.map(drop), released.load(Ordering::SeqCst))
        })
    };
    let tid = tid_receiver.recv().unwrap();
    let deadline = Instant::now() + SAFETY_TIMEOUT;
    while !blocked_in(tid, libc::SYS_flock) {
        assert!(
            !waiter.is_finished(),
            "the waiter returned while the lock was held: {:?}",
            waiter.join().map(|(result, _)| result)
        );
        assert!(
            Instant::now() < deadline,
            "the waiter never blocked in flock(2)"
        );
        std::thread::yield_now();
    }

    released.store(true, Ordering::SeqCst);
    drop(held);
    let (result, released_before) = waiter.join().unwrap();
    result.unwrap();
    assert!(
        released_before,
        "the waiter got the lock before it was released"
    );
}
