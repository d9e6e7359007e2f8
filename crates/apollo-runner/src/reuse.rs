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
use apollo_core::event::{AttemptStatus, FileSide, UnitReused, UnitStarted};
use apollo_core::hash;
use apollo_core::journal::{Journal, JournalError};
use apollo_store::{
    BlobStore, HashCache, JournalReader, PipelineReuse, ReadOptions, ReuseIndex, RunId, StateDir,
};

use crate::notice::{SessionNotice, SessionObserver};

/// The engine's reuse for a run of the pipeline `identity` in `state` — `None` when no unit
/// of `pipeline` can be reused or the index cannot be refreshed — and the index it came from,
/// for a new run to cover itself in at its end. `resuming`: the run being resumed, left out
/// of its own lookups. `write`: refresh the index file (the lock is held).
pub(crate) fn reuse_for(
    state: &StateDir,
    pipeline: &apollo_core::Pipeline,
    identity: &str,
    resuming: Option<&RunId>,
    write: bool,
    observer: &mut dyn SessionObserver,
) -> Option<(Reuse, KeptIndex)> {
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
            let mut index = index;
            let source = Arc::new(index.take_source(identity, resuming));
            let restorer = BlobRestorer {
                state: state.clone(),
                blobs: state.existing_blob_store(),
            };
            let reuse = Reuse::new(source.clone()).with_restorer(Arc::new(restorer));
            // A plan writes nothing: it says what a restore would do instead.
            let reuse = if write {
                reuse
            } else {
                reuse.without_writing()
            };
            let kept = KeptIndex {
                index,
                source,
                identity: identity.to_owned(),
            };
            Some((reuse, kept))
        }
        Err(error) => {
            observer.notice(&SessionNotice::ReuseUnavailable { error: &error });
            None
        }
    }
}

/// The reuse index a session refreshed, without the pipeline's successes (the engine's
/// source holds them), kept so that a new run can write it back covering itself.
pub(crate) struct KeptIndex {
    index: ReuseIndex,
    source: Arc<PipelineReuse>,
    identity: String,
}

impl KeptIndex {
    /// The pipeline's successes, as the engine's source holds them.
    pub(crate) fn source(&self) -> &PipelineReuse {
        &self.source
    }

    /// After the new run `run` ended, the state directory's lock still held and the engine's
    /// options (which share the source) dropped: write the index covering the run, from the
    /// records it appended (`appended`, see [`Recording`]). Never an error: when this cannot
    /// be done, the next refresh reads the run's journal instead.
    pub(crate) fn cover(mut self, state: &StateDir, run: &RunId, appended: Vec<Event>) -> Self {
        // Still shared (the engine's options were not dropped): nothing is written.
        if let Ok(source) = Arc::try_unwrap(std::mem::take(&mut self.source)) {
            let _ = self
                .index
                .cover_new_run(state, source, &self.identity, run, appended);
        }
        self
    }
}

/// The run's journal as the engine sees it, keeping (with a source to keep them for) a copy
/// of each appended record that a reuse index merges (`unit_started`, a succeeded
/// `unit_finished`, a `unit_reused` other than of the unit's latest success, which would
/// change nothing; without their input lists, which the index file does not hold), for
/// [`KeptIndex::cover`].
pub(crate) struct Recording<'j> {
    journal: &'j mut dyn Journal,
    keep: Option<&'j PipelineReuse>,
    appended: Vec<Event>,
    failed: bool,
}

impl<'j> Recording<'j> {
    pub(crate) fn new(journal: &'j mut dyn Journal, keep: Option<&'j PipelineReuse>) -> Self {
        Self {
            journal,
            keep,
            appended: Vec::new(),
            failed: false,
        }
    }

    /// Makes room for `n` more records kept.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.appended.reserve(n);
    }

    /// The records kept, `None` if an append failed (then what is in the journal is not
    /// known here).
    pub(crate) fn into_appended(self) -> Option<Vec<Event>> {
        (!self.failed).then_some(self.appended)
    }
}

impl Journal for Recording<'_> {
    fn append(&mut self, events: &[Event]) -> Result<(), JournalError> {
        let result = self.journal.append(events);
        self.record(events, result)
    }

    fn append_unsynced(&mut self, events: &[Event]) -> Result<(), JournalError> {
        let result = self.journal.append_unsynced(events);
        self.record(events, result)
    }

    fn append_strict(&mut self, events: &[Event]) -> Result<(), JournalError> {
        let result = self.journal.append_strict(events);
        self.record(events, result)
    }

    fn store_input_manifest(&mut self, sha256: &str, bytes: &[u8]) -> Result<(), JournalError> {
        self.journal.store_input_manifest(sha256, bytes)
    }
}

impl Recording<'_> {
    /// Keep what the index merges of `events`, which the journal took with `result`.
    fn record(
        &mut self,
        events: &[Event],
        result: Result<(), JournalError>,
    ) -> Result<(), JournalError> {
        match result {
            Ok(()) => {
                let Some(source) = self.keep else {
                    return result;
                };
                self.appended
                    .extend(events.iter().filter_map(|event| match event {
                        Event::UnitStarted(started) => Some(Event::UnitStarted(UnitStarted {
                            unit: started.unit.clone(),
                            attempt: started.attempt,
                            input_hash: started.input_hash.clone(),
                            inputs: Vec::new(),
                            inputs_manifest: None,
                        })),
                        Event::UnitReused(reused) if source.is_latest(reused) => None,
                        Event::UnitReused(reused) => Some(Event::UnitReused(UnitReused {
                            unit: reused.unit.clone(),
                            from_run: reused.from_run.clone(),
                            from_attempt: reused.from_attempt,
                            input_hash: reused.input_hash.clone(),
                            inputs: Vec::new(),
                            output_hash: reused.output_hash.clone(),
                            restored: Vec::new(),
                        })),
                        Event::UnitFinished(finished)
                            if finished.status == AttemptStatus::Succeeded =>
                        {
                            Some(event.clone())
                        }
                        _ => None,
                    }));
            }
            Err(_) => self.failed = true,
        }
        result
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

impl BlobRestorer {
    /// The files `restore` would put back: every output `candidate` recorded, each one of the
    /// files `unit`'s declared outputs stand for in `base_dir`, captured, and its blob
    /// present; else why not.
    fn restorable(
        &self,
        unit: &Unit,
        base_dir: &Path,
        candidate: &ReuseCandidate,
    ) -> Result<Vec<FileEntry>, String> {
        let files = self.recorded_outputs(&unit.name, candidate)?;
        // The manifest comes from the state directory: a damaged or planted record naming
        // another file (the user's input, `/home/…/.profile`, `out/../../x`) must not have it
        // overwritten.
        if let Some(file) =
            (files.iter()).find(|file| !hash::declares_output(unit, base_dir, &file.path))
        {
            return Err(format!(
                "not restorable: run {} recorded {} as an output, which is not among its \
                 declared outputs: the record was damaged or altered, and is not followed",
                candidate.run_id, file.path
            ));
        }
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
        if let Some(file) = files.iter().find(|file| !self.blobs.readable(&file.sha256)) {
            return Err(format!(
                "not restorable: the blob of {} is not yours to read (its source was private: \
                 kept owner-only in a shared state directory)",
                file.path
            ));
        }
        Ok(files)
    }
}

impl OutputRestorer for BlobRestorer {
    fn restore(
        &self,
        unit: &Unit,
        base_dir: &Path,
        candidate: &ReuseCandidate,
    ) -> Result<Vec<String>, String> {
        let files = self.restorable(unit, base_dir, candidate)?;
        let mut restored = Vec::new();
        for file in to_restore(base_dir, &files) {
            let dest = base_dir.join(&file.path);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|error| format!("cannot restore {}: {error}", file.path))?;
            }
            self.blobs
                .restore(&file.sha256, &dest, file.mode)
                .map_err(|error| format!("cannot restore {}: {error}", file.path))?;
            restored.push(file.path.clone());
        }
        restored.sort_unstable();
        Ok(restored)
    }

    fn can_restore(
        &self,
        unit: &Unit,
        base_dir: &Path,
        candidate: &ReuseCandidate,
    ) -> Result<Vec<String>, String> {
        let files = self.restorable(unit, base_dir, candidate)?;
        let mut restored: Vec<String> = (to_restore(base_dir, &files))
            .map(|file| file.path.clone())
            .collect();
        restored.sort_unstable();
        Ok(restored)
    }
}

/// The files of `files` (a candidate's recorded outputs) that a restore writes: those not on
/// disk under `base_dir` as recorded. A file still as recorded is left alone, and not named
/// as restored — by a run's restore and by a plan's answer alike.
fn to_restore<'f>(base_dir: &Path, files: &'f [FileEntry]) -> impl Iterator<Item = &'f FileEntry> {
    (files.iter()).filter(move |file| !as_recorded(&base_dir.join(&file.path), file))
}

/// Whether `dest` is a regular file with `file`'s bytes and permission bits (what a restore
/// would write).
fn as_recorded(dest: &Path, file: &FileEntry) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(dest).is_ok_and(|meta| {
        meta.is_file()
            && meta.len() == file.size
            && meta.permissions().mode() & 0o777 == file.mode & 0o777
    }) && hash::sha256_file(dest).is_ok_and(|sha256| sha256 == file.sha256)
}

#[cfg(test)]
mod tests {
    use apollo_core::event::{SkipReason, UnitSkipped};
    use apollo_core::journal::MemoryJournal;

    use super::*;

    /// A journal whose appends fail from the `fail_from`th on.
    struct Failing {
        inner: MemoryJournal,
        fail_from: usize,
        appends: usize,
    }

    impl Journal for Failing {
        fn append(&mut self, events: &[Event]) -> Result<(), JournalError> {
            self.appends += 1;
            if self.appends >= self.fail_from {
                return Err(JournalError::msg("disk full"));
            }
            self.inner.append(events)
        }
    }

    fn reused(unit: &str) -> Event {
        Event::UnitReused(UnitReused {
            unit: unit.into(),
            from_run: "r".into(),
            from_attempt: 1,
            input_hash: "h".into(),
            inputs: Vec::new(),
            output_hash: "o".into(),
            restored: Vec::new(),
        })
    }

    #[test]
    fn a_recording_keeps_what_an_index_merges_and_nothing_after_a_failed_append() {
        let skipped = Event::UnitSkipped(UnitSkipped {
            unit: "b".into(),
            reason: SkipReason::Interrupted,
        });
        let mut journal = Failing {
            inner: MemoryJournal::default(),
            fail_from: 3,
            appends: 0,
        };
        let source = PipelineReuse::default();
        let mut recording = Recording::new(&mut journal, Some(&source));
        recording.append(&[reused("a"), skipped.clone()]).unwrap();
        recording.append(&[reused("c")]).unwrap();
        recording.append(&[reused("d")]).unwrap_err();
        assert_eq!(recording.into_appended(), None, "an append failed");
        let mut journal = MemoryJournal::default();
        let mut recording = Recording::new(&mut journal, Some(&source));
        recording.append(&[reused("a"), skipped]).unwrap();
        recording.append(&[reused("c")]).unwrap();
        assert_eq!(
            recording.into_appended(),
            Some(vec![reused("a"), reused("c")])
        );
        let mut passing = Recording::new(&mut journal, None);
        passing.append(&[reused("d")]).unwrap();
        assert_eq!(passing.into_appended(), Some(Vec::new()));
        assert_eq!(journal.events.len(), 4, "every record reached the journal");
    }
}
