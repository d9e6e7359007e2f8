//! Reuse across runs for a session (DESIGN §12): the state directory's reuse index, brought up
//! to date, as the engine's source of earlier successes of this pipeline.
//!
//! Nothing is read when no unit says `reuse: true` or reuse is off (`--no-reuse`). A run
//! session refreshes the index under the state directory's lock and writes it back; a plan
//! (`--dry-run`) reads the journals it needs and writes nothing. An index that cannot be
//! refreshed (an I/O error) turns reuse off for the run, with a notice: reuse only ever
//! saves work, so it never stops a run.
//!
//! **Where restoring outputs plugs in.** A candidate whose declared outputs are missing or
//! changed on disk is handed to an [`OutputRestorer`] before it is given up; this session
//! passes [`NoRestore`] ("not restorable: no blob store yet") until the blob store exists.
//! Wiring the blob store is one line in [`reuse_for`]: `Reuse::new(source)
//! .with_restorer(Arc::new(<blob-store restorer>))`.

use std::sync::Arc;

use apollo_core::engine::{NoRestore, Reuse};
use apollo_store::{HashCache, ReuseIndex, RunId, StateDir};

use crate::notice::{SessionNotice, SessionObserver};

/// The engine's reuse for a run of the pipeline `identity` in `state` — `None` when no unit
/// of `pipeline` can be reused or the index cannot be refreshed. `resuming`: the run being
/// resumed, left out of its own lookups. `write`: refresh the index file (the lock is held).
pub(crate) fn reuse_for(
    state: &StateDir,
    pipeline: &apollo_core::Pipeline,
    identity: &str,
    resuming: Option<&RunId>,
    write: bool,
    observer: &mut dyn SessionObserver,
) -> Option<Reuse> {
    if !pipeline.units.iter().any(|unit| unit.reuse) {
        return None;
    }
    match ReuseIndex::refresh(state, write) {
        Ok((index, refresh)) => {
            if let Some(why) = &refresh.rebuilt {
                observer.notice(&SessionNotice::ReuseIndexRebuilt {
                    why,
                    n_runs: refresh.runs_read,
                });
            }
            let source = index.source(identity, resuming);
            Some(Reuse::new(Arc::new(source)).with_restorer(Arc::new(NoRestore)))
        }
        Err(error) => {
            observer.notice(&SessionNotice::ReuseUnavailable { error: &error });
            None
        }
    }
}

/// The state directory's file hash cache, for a run that may reuse units (`None` otherwise):
/// deciding then hashes only the declared files whose stamp changed. Saved after the run
/// ([`save_hash_cache`]).
pub(crate) fn hash_cache_for(
    state: &StateDir,
    pipeline: &apollo_core::Pipeline,
) -> Option<Arc<HashCache>> {
    pipeline
        .units
        .iter()
        .any(|unit| unit.reuse)
        .then(|| Arc::new(HashCache::load(state)))
}

/// Save the hash cache after a run (the lock is still held). Not fsynced and never an error:
/// it is a cache, and a lost or torn one is ignored and rebuilt by the next run.
pub(crate) fn save_hash_cache(state: &StateDir, cache: Option<&HashCache>) {
    if let Some(cache) = cache {
        let _ = cache.save(state, false);
    }
}
