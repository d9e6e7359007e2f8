//! Cooperative cancellation of running attempts.
//!
//! The engine holds one [`CancelToken`] per run and hands clones to every attempt. An
//! executor that blocks (on a child process, say) registers a waker with
//! [`CancelToken::on_cancel`] so it is woken at once instead of polling.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// How hard apollo has been asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CancelLevel {
    /// Keep going.
    None,
    /// Stop: terminate running attempts (SIGTERM, grace, SIGKILL), still run their cleanups.
    Graceful,
    /// Stop now: kill running attempts without grace (a second Ctrl-C).
    Immediate,
}

type Waker = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Inner {
    level: AtomicU8,
    next_waker_id: AtomicU64,
    wakers: Mutex<Vec<(u64, Waker)>>,
}

/// A shared, cloneable cancellation flag with wake-up callbacks.
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("level", &self.level())
            .finish()
    }
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current level.
    pub fn level(&self) -> CancelLevel {
        match self.inner.level.load(Ordering::SeqCst) {
            0 => CancelLevel::None,
            1 => CancelLevel::Graceful,
            _ => CancelLevel::Immediate,
        }
    }

    /// Whether any cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        self.level() != CancelLevel::None
    }

    /// Raise the level to `level` (it never goes down) and wake every registered waker.
    pub fn cancel(&self, level: CancelLevel) {
        let new = match level {
            CancelLevel::None => return,
            CancelLevel::Graceful => 1,
            CancelLevel::Immediate => 2,
        };
        let old = self.inner.level.fetch_max(new, Ordering::SeqCst);
        if old >= new {
            return;
        }
        let wakers: Vec<Waker> = self
            .inner
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, waker)| Arc::clone(waker))
            .collect();
        for waker in wakers {
            waker();
        }
    }

    /// Call `waker` whenever the level rises, until the returned registration is dropped.
    /// When the token is already cancelled, `waker` is also called once right away.
    pub fn on_cancel(&self, waker: impl Fn() + Send + Sync + 'static) -> CancelRegistration {
        let id = self.inner.next_waker_id.fetch_add(1, Ordering::Relaxed);
        let waker: Waker = Arc::new(waker);
        self.inner
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, Arc::clone(&waker)));
        if self.is_cancelled() {
            waker();
        }
        CancelRegistration {
            token: self.clone(),
            id,
        }
    }
}

/// Keeps a waker registered; dropping it unregisters the waker.
#[must_use = "the waker is unregistered when this is dropped"]
pub struct CancelRegistration {
    token: CancelToken,
    id: u64,
}

impl Drop for CancelRegistration {
    fn drop(&mut self) {
        self.token
            .inner
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(id, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn wakers_fire_once_per_escalation_and_not_after_unregistering() {
        let token = CancelToken::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let registration = token.on_cancel(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        token.cancel(CancelLevel::Graceful);
        token.cancel(CancelLevel::Graceful);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        token.cancel(CancelLevel::Immediate);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        drop(registration);
        assert_eq!(token.level(), CancelLevel::Immediate);
    }

    #[test]
    fn registering_on_a_cancelled_token_wakes_at_once() {
        let token = CancelToken::new();
        token.cancel(CancelLevel::Graceful);
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let _registration = token.on_cancel(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
