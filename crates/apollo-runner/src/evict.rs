//! The blob store's size limit, enforced when a run ends (`blob_store_max`, DESIGN §17): see
//! [`apollo_store::evict_blobs`] for what is evicted and what never is.

use apollo_core::Pipeline;
use apollo_store::{BlobStore, RunId, StateDir, StateLock, evict_blobs};

use crate::notice::{SessionNotice, SessionObserver};

/// Brings the state directory's blob store under the pipeline's `blob_store_max` after
/// `run_id` (new or resumed) ended, still under `lock`; tells `observer` what it evicted (or
/// why it could not). Nothing to do without a limit, or when the run added no blob to `blobs`
/// (the store it captured into): the store did not grow, and not even `blobs/` is listed.
pub(crate) fn after_run(
    state: &StateDir,
    pipeline: &Pipeline,
    blobs: &BlobStore,
    run_id: &RunId,
    lock: &StateLock,
    observer: &mut dyn SessionObserver,
) {
    let Some(limit) = pipeline.blob_store_max else {
        return;
    };
    if blobs.bytes_written() == 0 {
        return;
    }
    match evict_blobs(state, limit, run_id, lock) {
        Ok(None) => {}
        Ok(Some(eviction)) => observer.notice(&SessionNotice::BlobsEvicted(&eviction)),
        Err(error) => observer.notice(&SessionNotice::EvictionFailed { error: &error }),
    }
}
