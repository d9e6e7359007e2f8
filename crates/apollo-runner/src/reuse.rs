//! Reuse across runs for a session (DESIGN §12): the state directory's reuse index, brought up
//! to date, as the engine's source of earlier successes of this pipeline.
//!
//! Nothing is read when no unit says `reuse: true` or reuse is off (`--no-reuse`). A run
//! session refreshes the index under the state directory's lock and writes it back; a plan
//! (`--dry-run`) reads the journals it needs and writes nothing. An index that cannot be
//! refreshed (an I/O error) turns reuse off for the run, with a notice: reuse only ever
//! saves work, so it never stops a run.
//!
//! **Restoring outputs.** A candidate whose declared outputs are missing or changed on disk is
//! handed to a [`BlobRestorer`] before it is given up: it puts back every output file the
//! candidate attempt recorded (its `unit_files` manifest) from the blob store, each re-hashed
//! as it is copied (a damaged blob is reported and never written). The engine hashes the
//! outputs again afterwards and reuses the unit only if they are exactly as recorded.

use std::path::Path;
use std::sync::Arc;

use apollo_core::Event;
use apollo_core::Unit;
use apollo_core::capture::FileEntry;
use apollo_core::engine::{OutputRestorer, Reuse, ReuseCandidate};
use apollo_core::event::FileSide;
use apollo_store::{BlobStore, HashCache, JournalReader, ReadOptions, ReuseIndex, RunId, StateDir};

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
            let source = index.into_source(identity, resuming);
            let restorer = BlobRestorer {
                state: state.clone(),
                blobs: BlobStore::open_existing(state.path().join("blobs")),
            };
            Some(Reuse::new(Arc::new(source)).with_restorer(Arc::new(restorer)))
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

/// Puts a candidate attempt's declared outputs back from the blob store (see the module docs).
struct BlobRestorer {
    state: StateDir,
    blobs: BlobStore,
}

impl BlobRestorer {
    /// The manifest of the outputs `candidate` recorded for `unit`.
    fn recorded_outputs(
        &self,
        unit: &str,
        candidate: &ReuseCandidate,
    ) -> Result<Vec<FileEntry>, String> {
        let run: RunId = candidate
            .run_id
            .parse()
            .map_err(|_| format!("run id {} is not valid", candidate.run_id))?;
        let run_dir = self
            .state
            .run_dir(&run)
            .map_err(|error| error.to_string())?;
        let reader = JournalReader::open(run_dir.path(), ReadOptions::default())
            .map_err(|error| error.to_string())?;
        for record in reader {
            let record = record.map_err(|error| error.to_string())?;
            if let Event::UnitFiles(listed) = record.event
                && listed.unit == unit
                && listed.attempt == candidate.attempt
                && listed.side == FileSide::Outputs
            {
                return match &listed.manifest {
                    Some(reference) => apollo_store::read_files_manifest(run_dir.path(), reference)
                        .map_err(|error| error.to_string()),
                    None => Ok(listed.files),
                };
            }
        }
        Err(format!(
            "run {} attempt {} recorded no output files (captured before apollo kept them?)",
            candidate.run_id, candidate.attempt
        ))
    }
}

impl OutputRestorer for BlobRestorer {
    fn restore(
        &self,
        unit: &Unit,
        base_dir: &Path,
        candidate: &ReuseCandidate,
    ) -> Result<(), String> {
        let files = self.recorded_outputs(&unit.name, candidate)?;
        // Every file must be restorable before any is written: a half-restored output is
        // worse than none (the unit then runs and writes it whole).
        if let Some(file) = files.iter().find(|file| !file.captured()) {
            return Err(format!(
                "not restorable: {} was not captured ({})",
                file.path,
                file.not_captured.as_deref().unwrap_or("no blob")
            ));
        }
        if let Some(file) = files.iter().find(|file| !self.blobs.contains(&file.sha256)) {
            return Err(format!(
                "not restorable: the blob of {} is gone (pruned?)",
                file.path
            ));
        }
        for file in &files {
            let dest = base_dir.join(&file.path);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|error| format!("cannot restore {}: {error}", file.path))?;
            }
            self.blobs
                .restore(&file.sha256, &dest, file.mode)
                .map_err(|error| format!("cannot restore {}: {error}", file.path))?;
        }
        Ok(())
    }
}
