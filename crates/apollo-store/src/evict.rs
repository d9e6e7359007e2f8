//! Keeping the blob store under a size limit (`blob_store_max`, DESIGN §17): when `blobs/`
//! holds more than the limit, the captures of the oldest runs are evicted first.
//!
//! Eviction runs at the end of a run, under the state directory's lock (the caller passes its
//! [`StateLock`] as proof): no other apollo is running or capturing then, so every blob in the
//! store is either referenced by a journal or garbage. It is a mark and sweep like `prune`'s,
//! with an order:
//!
//! 1. **Never evicted**: every run's definition snapshots (small, and needed to show, resume or
//!    reproduce a run at all), and every blob of a *protected* run: the latest run of each
//!    pipeline (by creation order, as `prune` counts it; a reproduction is never the latest of
//!    anything), a run that is running or incomplete (it may be resumed), the run the caller
//!    just finished, and — conservatively — a run whose journal cannot be read. A protected
//!    run also keeps the outputs of the earlier attempts it reused (`unit_reused`).
//! 2. Blobs no run references (left by a crash or a pruned run) go first: they cost nothing.
//! 3. Then the other runs, **oldest first**, one whole run at a time: a blob is removed once no
//!    run still kept references it (a blob a newer kept run shares stays), until the store is
//!    under the limit. Every run that lost a blob is named in the [`Eviction`]: its units can
//!    no longer be reproduced or restored from the store.
//!
//! The journals are never touched (they stay the only truth: a manifest still names what was
//! captured; `reproduce` and reuse find the blob missing and say so). Every removal is a single
//! `unlink` of a blob the decision, made in full before the first removal, gave up: a crash
//! mid-eviction leaves some of those blobs removed and the rest in place, never a protected
//! run's blob removed, and the next run's eviction finishes the job.

use std::collections::{BTreeSet, HashMap};

use crate::blobs::{RunBlobs, run_blobs};
use crate::error::StoreError;
use crate::lock::StateLock;
use crate::run_id::RunId;
use crate::runs::RunState;
use crate::state_dir::StateDir;

/// One run whose captures lost blobs to an eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictedRun {
    /// The run.
    pub run: RunId,
    /// How many of the blobs its manifests name were removed.
    pub blobs: usize,
    /// Their bytes (a blob two evicted runs shared counts in both).
    pub bytes: u64,
}

/// What [`evict_blobs`] did when the store was over its limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Eviction {
    /// The limit, in bytes.
    pub limit: u64,
    /// The store's size before (the sum of its blobs' sizes).
    pub before_bytes: u64,
    /// Its size after.
    pub after_bytes: u64,
    /// The runs whose captures lost blobs, oldest first: their units can no longer be
    /// reproduced (nor their outputs restored) from the store.
    pub evicted: Vec<EvictedRun>,
    /// Blobs removed in all.
    pub removed_blobs: usize,
    /// Bytes freed in all.
    pub freed_bytes: u64,
    /// Of those, blobs no run referenced (garbage a crash or a pruned run left).
    pub unreferenced_blobs: usize,
    /// Whether the store is still over the limit: what the protected runs (the latest of each
    /// pipeline, running or incomplete ones) and the definition snapshots need exceeds it.
    pub still_over: bool,
}

/// Brings the blob store of `state` under `limit` bytes, if it is over (see the module docs);
/// `None` when it is not (nothing was removed). `just_finished` is the run the caller just
/// ran: it is kept whole, whatever its state. `_lock` is the state directory's lock, held by
/// the caller for the whole call.
///
/// Reads the journal of every run when the store is over the limit (not otherwise: under it,
/// the cost is one listing of `blobs/`). An unreadable journal is an error and nothing is
/// removed: which blobs that run needs is unknown.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub fn evict_blobs(
    state: &StateDir,
    limit: u64,
    just_finished: &RunId,
    _lock: &StateLock,
) -> Result<Option<Eviction>, StoreError> {
    // A `runs/` planted as a link would hide this state directory's runs from the mark, and
    // every blob would look unreferenced: refused before anything is removed.
    state.check_fixed_folders()?;
    let store = state.existing_blob_store();
    let stored: HashMap<String, u64> = (store.iter()?.into_iter())
        .map(|blob| (blob.sha256, blob.size))
        .collect();
    let before_bytes: u64 = stored.values().sum();
    if before_bytes <= limit {
        return Ok(None);
    }

    // Mark: what every run references, and which runs are protected.
    let summaries = state.list_runs()?;
    let latest = crate::runs::latest_runs(&summaries);
    let runs_dir = state.runs_dir();
    let mut all = Vec::with_capacity(summaries.len());
    for summary in &summaries {
        all.push(run_blobs(&runs_dir.join(summary.id.as_str()))?);
    }
    let by_id: HashMap<&str, &RunBlobs> = (summaries.iter().zip(&all))
        .map(|(summary, blobs)| (summary.id.as_str(), blobs))
        .collect();
    let mut keep: BTreeSet<&str> = BTreeSet::new();
    // The evictable runs, oldest first, with their captures.
    let mut candidates: Vec<(&RunId, &BTreeSet<String>)> = Vec::new();
    for (summary, blobs) in summaries.iter().zip(&all) {
        keep.extend(blobs.definitions.iter().map(String::as_str));
        let protected = latest.contains(&summary.id)
            || summary.id == *just_finished
            || matches!(
                summary.state,
                RunState::Running | RunState::Incomplete | RunState::Corrupt
            );
        if !protected {
            candidates.push((&summary.id, &blobs.captures));
            continue;
        }
        keep.extend(blobs.captures.iter().map(String::as_str));
        // What it reused from earlier runs is what restoring its outputs needs.
        for (run, unit, attempt) in &blobs.reused {
            let outputs = (by_id.get(run.as_str()))
                .and_then(|from| from.outputs.get(&(unit.clone(), *attempt)));
            keep.extend(outputs.into_iter().flatten().map(String::as_str));
        }
    }
    // How many evictable, not yet evicted runs reference each blob.
    let mut holders: HashMap<&str, usize> = HashMap::new();
    for (_, captures) in &candidates {
        for blob in captures.iter() {
            *holders.entry(blob.as_str()).or_default() += 1;
        }
    }

    // Sweep, in the order decided.
    let mut eviction = Eviction {
        limit,
        before_bytes,
        after_bytes: before_bytes,
        ..Eviction::default()
    };
    let mut removed: BTreeSet<&str> = BTreeSet::new();
    let remove = |sha256: &str, eviction: &mut Eviction| -> Result<(), StoreError> {
        let Some(size) = stored.get(sha256) else {
            return Ok(());
        };
        store.remove(sha256)?;
        eviction.removed_blobs += 1;
        eviction.freed_bytes += size;
        eviction.after_bytes -= size;
        Ok(())
    };
    let mut unreferenced: Vec<&String> = (stored.keys())
        .filter(|blob| !keep.contains(blob.as_str()) && !holders.contains_key(blob.as_str()))
        .collect();
    unreferenced.sort();
    for blob in unreferenced {
        if eviction.after_bytes <= limit {
            break;
        }
        remove(blob, &mut eviction)?;
        eviction.unreferenced_blobs += 1;
    }
    for (_, captures) in &candidates {
        if eviction.after_bytes <= limit {
            break;
        }
        for blob in captures.iter() {
            let count = holders.entry(blob.as_str()).or_default();
            *count = count.saturating_sub(1);
            if *count == 0 && !keep.contains(blob.as_str()) && stored.contains_key(blob) {
                remove(blob, &mut eviction)?;
                removed.insert(blob.as_str());
            }
        }
    }
    // Every run that lost a blob, also an older one that shared it with a run evicted later.
    for (run, captures) in &candidates {
        let lost: Vec<&String> = (captures.iter())
            .filter(|blob| removed.contains(blob.as_str()))
            .collect();
        if !lost.is_empty() {
            eviction.evicted.push(EvictedRun {
                run: (*run).clone(),
                blobs: lost.len(),
                bytes: lost.iter().filter_map(|blob| stored.get(*blob)).sum(),
            });
        }
    }
    eviction.still_over = eviction.after_bytes > limit;
    Ok(Some(eviction))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BlobStore;
    use crate::writer::{JournalWriter, WriterOptions};
    use apollo_core::capture::FileEntry;
    use apollo_core::event::{Event, FileSide, RunFinished, RunStarted, RunStatus, UnitFiles};
    use std::fs;

    /// A finished run of pipeline `identity` whose one unit captured `contents` (each stored
    /// as a blob).
    fn run(state: &StateDir, identity: &str, contents: &[&[u8]], finish: bool) -> RunId {
        run_with(state, identity, contents, finish, Vec::new())
    }

    /// [`run`], with `extra` events after its `unit_files`.
    fn run_with(
        state: &StateDir,
        identity: &str,
        contents: &[&[u8]],
        finish: bool,
        extra: Vec<Event>,
    ) -> RunId {
        let store =
            BlobStore::open(state.path().join("blobs"), crate::writer::Durability::None).unwrap();
        let definition = state.put_blob(identity.as_bytes()).unwrap();
        let id = state.new_run_id();
        let run_dir = state.create_run(&id).unwrap();
        let mut journal =
            JournalWriter::create(run_dir.path(), id.as_str(), WriterOptions::default()).unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let files = contents
            .iter()
            .enumerate()
            .map(|(index, content)| {
                let path = scratch.path().join(format!("f{index}"));
                fs::write(&path, content).unwrap();
                let blob = store.put_file(&path).unwrap();
                FileEntry {
                    path: format!("out/f{index}"),
                    sha256: blob.sha256,
                    size: blob.size,
                    mode: 0o644,
                    not_captured: None,
                }
            })
            .collect();
        let mut events = vec![
            Event::RunStarted(RunStarted {
                run_id: id.to_string(),
                pipeline: identity.to_owned(),
                config_path: "/p.yaml".to_owned(),
                config_hash: String::new(),
                definition_hash: definition,
                apollo_version: String::new(),
                host: String::new(),
                pid: 1,
                units: vec!["u".to_owned()],
                identity: Some(identity.to_owned()),
                params: Default::default(),
                run_kind: apollo_core::event::RunKind::Run,
                durability: apollo_core::Durability::Fsync,
                deadlines: None,
            }),
            Event::UnitFiles(UnitFiles {
                unit: "u".to_owned(),
                attempt: 1,
                side: FileSide::Outputs,
                files,
                manifest: None,
            }),
        ];
        events.extend(extra);
        if finish {
            events.push(Event::RunFinished(RunFinished {
                status: RunStatus::Succeeded,
                succeeded: 1,
                failed: 0,
                skipped: 0,
                reused: 0,
            }));
        }
        journal.append_batch(&events).unwrap();
        id
    }

    fn blob_of(content: &[u8]) -> String {
        apollo_core::hash::sha256_hex(content)
    }

    #[test]
    fn the_oldest_runs_go_first_and_the_latest_of_each_pipeline_stays() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let kb = |byte: u8| vec![byte; 1024];
        let (a, b, c, shared, other) = (kb(1), kb(2), kb(3), kb(9), kb(7));
        let first = run(&state, "p", &[&a, &shared], true);
        let second = run(&state, "p", &[&b, &shared], true);
        let other_run = run(&state, "q", &[&other], true);
        let third = run(&state, "p", &[&c], true);
        let lock = state.lock(false).unwrap();
        // Under the limit: nothing at all.
        assert_eq!(evict_blobs(&state, 1 << 20, &third, &lock).unwrap(), None);
        // 5 KiB of captures (+ two bytes of definitions): one run's worth must go.
        let eviction = evict_blobs(&state, 4 * 1024 + 100, &third, &lock)
            .unwrap()
            .unwrap();
        let store = BlobStore::open_existing(dir.path().join("blobs"));
        assert!(
            !store.contains(&blob_of(&a)),
            "the oldest run's own blob goes"
        );
        assert!(
            store.contains(&blob_of(&shared)),
            "a blob a kept newer run shares stays"
        );
        assert!(store.contains(&blob_of(&b)));
        assert!(store.contains(&blob_of(&c)), "the latest run is kept");
        assert!(
            store.contains(&blob_of(&other)),
            "another pipeline's latest is kept"
        );
        assert!(
            store.contains(&blob_of(b"p")),
            "definitions are never evicted"
        );
        assert_eq!(
            eviction.evicted,
            vec![EvictedRun {
                run: first.clone(),
                blobs: 1,
                bytes: 1024
            }]
        );
        assert!(!eviction.still_over);
        // Tighter: the second run goes too, and the shared blob with it (both runs named).
        let eviction = evict_blobs(&state, 2 * 1024 + 100, &third, &lock)
            .unwrap()
            .unwrap();
        let named: Vec<&RunId> = eviction.evicted.iter().map(|run| &run.run).collect();
        assert_eq!(named, vec![&first, &second]);
        assert!(!store.contains(&blob_of(&shared)));
        assert!(!store.contains(&blob_of(&b)));
        // The latest runs alone exceed the limit: kept, and said so.
        let eviction = evict_blobs(&state, 10, &third, &lock).unwrap().unwrap();
        assert!(eviction.still_over);
        assert!(eviction.evicted.is_empty());
        assert!(store.contains(&blob_of(&c)) && store.contains(&blob_of(&other)));
        let _ = other_run;
    }

    #[test]
    fn the_latest_run_keeps_the_outputs_it_reused_from_an_evicted_run() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let (reused, own) = (vec![1u8; 2048], vec![2u8; 2048]);
        let first = run(&state, "p", &[&reused, &own], true);
        let _middle = run(&state, "p", &[&[3u8; 2048]], true);
        let latest = run_with(
            &state,
            "p",
            &[],
            true,
            vec![Event::UnitReused(apollo_core::event::UnitReused {
                unit: "u".to_owned(),
                from_run: first.to_string(),
                from_attempt: 1,
                input_hash: String::new(),
                inputs: Vec::new(),
                output_hash: String::new(),
                restored: Vec::new(),
            })],
        );
        let lock = state.lock(false).unwrap();
        let eviction = evict_blobs(&state, 10, &latest, &lock).unwrap().unwrap();
        let store = BlobStore::open_existing(dir.path().join("blobs"));
        assert!(
            store.contains(&blob_of(&reused)),
            "what the latest run reused stays: {eviction:?}"
        );
        assert!(!store.contains(&blob_of(&[3u8; 2048])));
        // The first run's outputs are one manifest: reused, all of it is kept.
        assert!(store.contains(&blob_of(&own)));
        assert!(eviction.still_over);
    }

    #[test]
    fn an_eviction_cut_off_half_way_is_finished_by_the_next_and_never_takes_a_kept_blob() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let old: Vec<Vec<u8>> = (0..4u8).map(|byte| vec![byte; 1024]).collect();
        let old_refs: Vec<&[u8]> = old.iter().map(Vec::as_slice).collect();
        let first = run(&state, "p", &old_refs, true);
        let latest = run(&state, "p", &[&[9u8; 1024]], true);
        let store = BlobStore::open_existing(dir.path().join("blobs"));
        // A SIGKILL after two of the first run's four unlinks: the store holds the rest.
        store.remove(&blob_of(&old[0])).unwrap();
        store.remove(&blob_of(&old[2])).unwrap();
        let lock = state.lock(false).unwrap();
        let eviction = evict_blobs(&state, 1500, &latest, &lock).unwrap().unwrap();
        assert!(old.iter().all(|content| !store.contains(&blob_of(content))));
        assert!(
            store.contains(&blob_of(&[9u8; 1024])),
            "the kept run's blob"
        );
        assert!(store.contains(&blob_of(b"p")), "the definition");
        assert_eq!(
            eviction.evicted,
            vec![EvictedRun {
                run: first,
                blobs: 2,
                bytes: 2048
            }],
            "only what this eviction removed is counted"
        );
        assert!(!eviction.still_over);
    }

    #[test]
    fn an_incomplete_run_and_unreferenced_blobs() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let old = run(&state, "p", &[&[1u8; 2048]], false);
        let latest = run(&state, "p", &[&[2u8; 16]], true);
        // Garbage no journal names.
        let scratch = tempfile::tempdir().unwrap();
        let stray = scratch.path().join("stray");
        fs::write(&stray, [5u8; 4096]).unwrap();
        let store = BlobStore::open_existing(dir.path().join("blobs"));
        let stray = store.put_file(&stray).unwrap();
        let lock = state.lock(false).unwrap();
        let eviction = evict_blobs(&state, 100, &latest, &lock).unwrap().unwrap();
        assert!(!store.contains(&stray.sha256), "garbage goes first");
        assert_eq!(eviction.unreferenced_blobs, 1);
        assert!(
            eviction.evicted.is_empty(),
            "an incomplete run is kept: {eviction:?}"
        );
        assert!(store.contains(&blob_of(&[1u8; 2048])));
        assert!(eviction.still_over);
        let _ = old;
    }
}
