#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod attempt_dir;
mod backup;
mod blobs;
mod error;
mod evict;
mod fault;
mod frame;
mod fsutil;
mod group;
mod hash_cache;
mod index_file;
mod input_manifest;
mod lock;
mod permissions;
pub mod process;
mod reader;
mod record;
mod retention;
mod reuse_index;
mod run_id;
mod runs;
mod runs_index;
mod safe_dir;
mod segment;
mod state_dir;
mod sync_thread;
pub mod testing;
mod verify;
mod writer;

/// One journal record as read back; defined in apollo-core (readers need not depend on this
/// crate), re-exported here because this crate produces it.
pub use apollo_core::Record;
pub use attempt_dir::AttemptDir;
pub use backup::{BackupReport, backup};
pub use blobs::{BlobRef, BlobStore, BlobSweep, referenced_blobs, sweep_unreferenced};
pub use error::{ErrorKind, StoreError, Warning, WarningKind};
pub use evict::{EvictedRun, Eviction, evict_blobs};
pub use group::SharedWriter;
pub use hash_cache::HashCache;
pub use index_file::cache_file;
pub use input_manifest::{
    MANIFESTS_DIR, input_manifest_path, read_files_manifest, read_input_manifest,
};
pub use lock::{LockHolder, StateLock};
pub use permissions::{ReadableEntry, fix_modes, make_private, misfit_modes, readable_by_others};
pub use reader::{JournalReader, ReadOptions, StoredRecord, VerbatimRecord};
pub use retention::{PruneOptions, PruneReport, plan_prune, prune};
pub use reuse_index::{IndexRefresh, PipelineReuse, ReuseIndex};
pub use run_id::RunId;
pub use runs::{Listed, RunState, RunSummary, RunsMemo};
pub use segment::{FORMAT_MAJOR, FORMAT_MINOR, MAGIC};
pub use state_dir::{RunDir, StateDir, open_regular_file};
pub use verify::{VerifyReport, verify};
pub use writer::{
    DEFAULT_SYNC_INTERVAL, Durability, JournalWriter, RecoveryReport, SyncHook, SyncedPosition,
    TornTail, WriterOptions,
};
