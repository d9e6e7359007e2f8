//! The sync thread of a journal written [`Durability::Batched`](crate::Durability::Batched).
//!
//! The writer writes every batch at once and tells this thread how far the segment is
//! written; the thread `fdatasync`s the segment once the oldest unsynced write is
//! `sync_interval` old. A sync on this thread covers every write made before it through any
//! descriptor of the file (the page cache is the inode's), so the engine thread never waits
//! for the disk except for the appends that must be durable at once, which the writer syncs
//! itself.
//!
//! Why a thread rather than the writer syncing lazily when it is next called: the engine may
//! not append again for as long as a unit runs (a chain's link, or a long job), and records
//! left unsynced for that long would break the promise of "synced within `sync_interval`".
//! The thread sleeps on a condition variable while nothing is unsynced, so an idle run costs
//! nothing; a busy one pays one wake-up and one sync per interval, off the critical path.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::fault::FaultInjector;
use crate::writer::{SyncHook, SyncedPosition};

/// The writer's handle on its sync thread; dropping it stops the thread (after the sync in
/// progress, if any) without syncing again: the writer does the last sync itself.
pub(crate) struct SyncThread {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    interval: Duration,
    faults: FaultInjector,
    on_sync: Option<SyncHook>,
}

struct State {
    /// The segment being written, shared with the writer.
    file: Arc<File>,
    path: PathBuf,
    segment: u64,
    /// How far the writer has written the segment.
    written: u64,
    /// How far the segment is known durable.
    synced: u64,
    /// When the oldest write not yet synced was made; `None` when everything is synced or a
    /// sync is under way for it.
    dirty_since: Option<Instant>,
    /// The first failed sync, as the error the writer's next append returns.
    failure: Option<(PathBuf, std::io::Error)>,
    stop: bool,
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    // A panic while holding the lock leaves plain numbers behind: still usable.
    shared
        .state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SyncThread {
    /// Starts the thread for `file` (segment `segment`, durable up to `synced`).
    pub(crate) fn start(
        file: Arc<File>,
        path: PathBuf,
        segment: u64,
        synced: u64,
        interval: Duration,
        faults: FaultInjector,
        on_sync: Option<SyncHook>,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                file,
                path,
                segment,
                written: synced,
                synced,
                dirty_since: None,
                failure: None,
                stop: false,
            }),
            wake: Condvar::new(),
            interval,
            faults,
            on_sync,
        });
        let thread = std::thread::Builder::new()
            .name("apollo-journal-sync".to_owned())
            .spawn({
                let shared = Arc::clone(&shared);
                move || run(&shared)
            })?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// The writer wrote segment `segment` up to `written`: synced within the interval.
    pub(crate) fn written(&self, segment: u64, written: u64) {
        let mut state = lock(&self.shared);
        if state.segment != segment {
            return;
        }
        state.written = state.written.max(written);
        if state.written > state.synced && state.dirty_since.is_none() {
            state.dirty_since = Some(Instant::now());
            self.shared.wake.notify_one();
        }
    }

    /// The writer synced segment `segment` up to `synced` itself.
    pub(crate) fn synced(&self, segment: u64, synced: u64) {
        let mut state = lock(&self.shared);
        if state.segment != segment {
            return;
        }
        state.written = state.written.max(synced);
        if synced > state.synced {
            state.synced = synced;
        }
        if state.written <= state.synced {
            state.dirty_since = None;
        }
    }

    /// The writer sealed the old segment durably and now writes `file`, durable up to `len`.
    pub(crate) fn switch_segment(&self, file: Arc<File>, path: PathBuf, segment: u64, len: u64) {
        let mut state = lock(&self.shared);
        state.file = file;
        state.path = path;
        state.segment = segment;
        state.written = len;
        state.synced = len;
        state.dirty_since = None;
    }

    /// How far the segment being written is durable.
    pub(crate) fn position(&self) -> SyncedPosition {
        let state = lock(&self.shared);
        SyncedPosition {
            segment: state.segment,
            offset: state.synced,
        }
    }

    /// The failure of a sync made on the thread, once: the writer's append returns it (and
    /// poisons the writer: the kernel may have dropped the pages, a retry would lie).
    pub(crate) fn take_failure(&self) -> Option<(PathBuf, std::io::Error)> {
        lock(&self.shared).failure.take()
    }
}

impl Drop for SyncThread {
    fn drop(&mut self) {
        lock(&self.shared).stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared) {
    let mut state = lock(shared);
    loop {
        if state.stop {
            return;
        }
        let Some(since) = state.dirty_since else {
            state = shared
                .wake
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            continue;
        };
        let due = since + shared.interval;
        let now = Instant::now();
        if now < due {
            state = shared
                .wake
                .wait_timeout(state, due - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
            continue;
        }
        let file = Arc::clone(&state.file);
        let path = state.path.clone();
        let segment = state.segment;
        let target = state.written;
        state.dirty_since = None;
        drop(state);
        let result = shared.faults.sync(|| file.sync_data());
        state = lock(shared);
        match result {
            Ok(()) if state.segment == segment && target > state.synced => {
                state.synced = target;
                if let Some(on_sync) = &shared.on_sync {
                    on_sync(SyncedPosition {
                        segment,
                        offset: target,
                    });
                }
            }
            Ok(()) => {}
            Err(error) => {
                if state.failure.is_none() {
                    state.failure = Some((path, error));
                }
                // Nothing more is synced: the writer stops at its next append.
                return;
            }
        }
    }
}
