//! What a session tells its caller besides the engine's per-unit notices: lock waits, store
//! warnings, sweeps.

use apollo_store::{Eviction, RunId, StoreError, Warning};

use crate::sweep::SweepReason;

/// A session-level event, for the caller to render (or ignore).
#[derive(Debug)]
#[non_exhaustive]
pub enum SessionNotice<'a> {
    /// Another process holds the state directory's lock; the session waits for it (only when
    /// [`RunSession::wait_for_lock`](crate::RunSession::wait_for_lock) is set).
    WaitingForLock,
    /// The store recovered or read past something (a torn tail cut off, say).
    Warning(&'a Warning),
    /// A stray sweep ran (`n_killed` may be 0).
    Swept {
        /// The run whose processes were looked for.
        run: &'a RunId,
        /// Why.
        reason: SweepReason,
        /// How many processes it killed.
        n_killed: u32,
    },
    /// A stray sweep failed; the session carried on.
    SweepFailed {
        /// The run whose processes were looked for.
        run: &'a RunId,
        /// Why.
        reason: SweepReason,
        /// What went wrong.
        error: &'a (dyn std::error::Error + Send + Sync),
    },
    /// Restores' temporary files left beside declared outputs by an apollo killed mid-restore
    /// (`.NAME.apollo-restore-XXXXXXXX`, older than this run) were removed at the run's start.
    RestoreTempsRemoved {
        /// The files removed, sorted.
        paths: &'a [std::path::PathBuf],
    },
    /// A pipeline hook ran after the run ended (recorded as `hook_finished`).
    Hook(&'a crate::hooks::HookOutcome),
    /// The reuse index (`index/reuse`) was rebuilt from the journals (it was missing, damaged,
    /// or covered a run that is gone): harmless, it is derived from them.
    ReuseIndexRebuilt {
        /// Why ("is missing", "fails its checksum", …), as words after "the reuse index".
        why: &'a str,
        /// How many runs' journals were read.
        n_runs: usize,
    },
    /// The reuse index could not be refreshed: nothing is reused in this run.
    ReuseUnavailable {
        /// What went wrong.
        error: &'a StoreError,
    },
    /// The run ended with the blob store over the pipeline's `blob_store_max`: the captures
    /// of the oldest runs were evicted ([`Eviction::evicted`] names them: their units can no
    /// longer be reproduced), or, when [`Eviction::still_over`], what the latest runs need
    /// alone exceeds the limit and was kept.
    BlobsEvicted(&'a Eviction),
    /// The blob store is over `blob_store_max`, but which blobs may go could not be worked out
    /// (a journal cannot be read, say): nothing was evicted.
    EvictionFailed {
        /// What went wrong.
        error: &'a StoreError,
    },
}

/// Receives [`SessionNotice`]s. A closure `FnMut(&SessionNotice<'_>)` is one.
pub trait SessionObserver {
    /// Called for every session notice, on the caller's thread.
    fn notice(&mut self, notice: &SessionNotice<'_>);
}

impl<F> SessionObserver for F
where
    F: FnMut(&SessionNotice<'_>),
{
    fn notice(&mut self, notice: &SessionNotice<'_>) {
        self(notice);
    }
}

/// Ignores every session notice.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSessionObserver;

impl SessionObserver for NoSessionObserver {
    fn notice(&mut self, _notice: &SessionNotice<'_>) {}
}

/// Runs `sweep` for `run` and reports the result.
pub(crate) fn sweep_and_report(
    sweep: &dyn crate::StraySweep,
    run: &RunId,
    reason: SweepReason,
    observer: &mut dyn SessionObserver,
) {
    match sweep.sweep(run) {
        Ok(n_killed) => observer.notice(&SessionNotice::Swept {
            run,
            reason,
            n_killed,
        }),
        Err(error) => observer.notice(&SessionNotice::SweepFailed {
            run,
            reason,
            error: error.as_ref(),
        }),
    }
}

/// Reports each warning.
pub(crate) fn report_warnings(warnings: &[Warning], observer: &mut dyn SessionObserver) {
    for warning in warnings {
        observer.notice(&SessionNotice::Warning(warning));
    }
}
