//! The reuse index (`index/reuse`): for each pipeline identity, unit and input hash, the
//! latest successful attempt that had that input hash — its run, attempt and output hash — so
//! that a new run looks an earlier success up without reading old journals (DESIGN §12).
//!
//! **Derived, never trusted.** The journals are the only truth. The index records which runs
//! it was built from and how far (each run's number of segments and the length of its last
//! one); on every refresh, a run that is new or whose journal grew since is read again and
//! merged in, and the index is rebuilt from every journal when it is missing, fails its
//! checksum, was written by another format, or covers a run that no longer exists (pruned).
//! Whatever it says, the engine hashes a candidate's outputs on disk before it reuses
//! anything (`apollo_core::engine::Reuse`), so a wrong index can cost a rerun, never a wrong
//! reuse. It is replaced atomically (see `index_file.rs`): a crash while it is written leaves
//! the old index or the new one. It is not fsynced: after a power loss it may be empty or
//! torn, which its checksum catches, and it is rebuilt.
//!
//! What counts as a success: a `unit_finished` that `succeeded` with an output hash, taken
//! with its own `unit_started` (the input hash); and a `unit_reused`, which stands for the
//! attempt it reused (so "reused from" always names the run that did the work). Skips (exit
//! 77) and human verdicts measured no outputs and are not indexed; nor are runs recorded
//! without a pipeline identity (journal format 1.0/1.1).

use std::collections::{HashMap, HashSet};

use apollo_core::engine::{ReuseCandidate, ReuseSource};
use apollo_core::event::{AttemptStatus, Event, InputComponent};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::index_file::{self, Unusable};
use crate::reader::{JournalReader, ReadOptions};
use crate::run_id::RunId;
use crate::segment::list_segment_files;
use crate::state_dir::StateDir;

/// The index's file name in `index/`.
const FILE_NAME: &str = "reuse";
/// The version of the file's body; another one is rebuilt.
const FORMAT: u32 = 1;

/// How far a run's journal was read: it is read again once this changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Covered {
    run: String,
    segments: u64,
    last_len: u64,
}

/// One successful attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Success {
    identity: String,
    unit: String,
    input_hash: String,
    /// The run whose attempt did the work.
    run: String,
    attempt: u32,
    output_hash: String,
    /// Kept for the latest success of each unit only (to explain a "not reused").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    inputs: Vec<InputComponent>,
}

/// The file's body.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Body {
    format: u32,
    covered: Vec<Covered>,
    /// The latest success per (identity, unit, input hash), oldest first.
    successes: Vec<Success>,
}

/// What a refresh did, for a caller that wants to say so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexRefresh {
    /// Why the index was rebuilt from every journal, if it was ("missing", "fails its
    /// checksum", "run … it covers is gone").
    pub rebuilt: Option<String>,
    /// How many runs' journals were read.
    pub runs_read: usize,
    /// Whether the index file was (re)written.
    pub written: bool,
}

/// The reuse index of a state directory, loaded and brought up to date with its journals.
#[derive(Debug, Default)]
pub struct ReuseIndex {
    covered: Vec<Covered>,
    /// (identity, unit, input hash) → the latest success with it.
    by_input: HashMap<(String, String, String), Success>,
    /// (identity, unit) → its latest success, with its inputs.
    latest: HashMap<(String, String), Success>,
    /// The order successes were merged in, for writing the file back oldest first.
    order: u64,
    merged_at: HashMap<(String, String, String), u64>,
}

impl ReuseIndex {
    /// Load `index/reuse`, read the journals of runs it does not cover yet (or that grew since),
    /// and — with `write`, which needs the state directory's lock — write it back when anything
    /// changed. A missing, damaged or stale index is rebuilt from every journal. A run whose
    /// journal cannot be read contributes nothing (it is covered, so it is not read again until
    /// it changes).
    pub fn refresh(state: &StateDir, write: bool) -> Result<(Self, IndexRefresh), StoreError> {
        let run_ids = state.run_ids()?;
        let mut current = Vec::with_capacity(run_ids.len());
        for id in &run_ids {
            current.push(covered_now(state, id));
        }
        let mut refresh = IndexRefresh::default();
        let loaded = match index_file::read(state, FILE_NAME) {
            Ok(bytes) => match serde_json::from_slice::<Body>(&bytes) {
                Ok(body) if body.format == FORMAT => Ok(body),
                Ok(body) => Err(format!("is of format {}, not {FORMAT}", body.format)),
                Err(error) => Err(format!("cannot be parsed: {error}")),
            },
            Err(Unusable::Missing) => Err("is missing".to_owned()),
            Err(Unusable::Damaged(why)) => Err(why),
        };
        let present: HashSet<&str> = run_ids.iter().map(RunId::as_str).collect();
        let body = loaded.and_then(|body| {
            match body
                .covered
                .iter()
                .find(|covered| !present.contains(covered.run.as_str()))
            {
                Some(gone) => Err(format!("covers run {}, which is gone", gone.run)),
                None => Ok(body),
            }
        });
        let mut index = Self::default();
        let known: HashMap<String, Covered> = match body {
            Ok(body) => {
                for success in body.successes {
                    index.merge(success);
                }
                body.covered
                    .into_iter()
                    .map(|covered| (covered.run.clone(), covered))
                    .collect()
            }
            Err(why) => {
                refresh.rebuilt = Some(why);
                HashMap::new()
            }
        };
        let mut changed = refresh.rebuilt.is_some();
        for (id, now) in run_ids.iter().zip(current) {
            if known.get(id.as_str()) != Some(&now) {
                index.read_run(state, id);
                refresh.runs_read += 1;
                changed = true;
            }
            index.covered.push(now);
        }
        if write && changed {
            index_file::write(state, FILE_NAME, &index.body_bytes()?, false)?;
            refresh.written = true;
        }
        Ok((index, refresh))
    }

    /// The index's view for one pipeline, as the engine's [`ReuseSource`]: successes of runs
    /// recorded with `identity`, leaving out those of `excluding` (the run being resumed, whose
    /// own successes the resume rules handle).
    pub fn source(&self, identity: &str, excluding: Option<&RunId>) -> PipelineReuse {
        let excluded = |success: &Success| excluding.is_some_and(|run| run.as_str() == success.run);
        let by_input = self
            .by_input
            .iter()
            .filter(|((id, _, _), success)| id == identity && !excluded(success))
            .map(|((_, unit, input_hash), success)| {
                ((unit.clone(), input_hash.clone()), candidate(success))
            })
            .collect();
        let latest = self
            .latest
            .iter()
            .filter(|((id, _), success)| id == identity && !excluded(success))
            .map(|((_, unit), success)| (unit.clone(), candidate(success)))
            .collect();
        PipelineReuse { by_input, latest }
    }

    /// How many successes the index holds.
    pub fn len(&self) -> usize {
        self.by_input.len()
    }

    /// Whether the index holds no success.
    pub fn is_empty(&self) -> bool {
        self.by_input.is_empty()
    }

    /// Merge one run's successes, in journal order. A journal that cannot be read (corrupt,
    /// or written by a newer apollo) contributes what was read before the problem: each of
    /// those records was whole and checked.
    fn read_run(&mut self, state: &StateDir, id: &RunId) {
        let Ok(run_dir) = state.run_dir(id) else {
            return;
        };
        let Ok(reader) = JournalReader::open(run_dir.path(), ReadOptions::default()) else {
            return;
        };
        let mut identity: Option<String> = None;
        let mut started: HashMap<(String, u32), (String, Vec<InputComponent>)> = HashMap::new();
        for record in reader {
            let Ok(record) = record else {
                return;
            };
            match record.event {
                Event::RunStarted(run_started) => identity = run_started.identity,
                Event::UnitStarted(unit_started) => {
                    started.insert(
                        (unit_started.unit, unit_started.attempt),
                        (unit_started.input_hash, unit_started.inputs),
                    );
                }
                Event::UnitFinished(finished) => {
                    let (Some(identity), AttemptStatus::Succeeded, Some(output_hash)) =
                        (&identity, finished.status, finished.output_hash)
                    else {
                        continue;
                    };
                    let Some((input_hash, inputs)) =
                        started.remove(&(finished.unit.clone(), finished.attempt))
                    else {
                        continue;
                    };
                    self.merge(Success {
                        identity: identity.clone(),
                        unit: finished.unit,
                        input_hash,
                        run: id.to_string(),
                        attempt: finished.attempt,
                        output_hash,
                        inputs,
                    });
                }
                Event::UnitReused(reused) => {
                    let Some(identity) = &identity else {
                        continue;
                    };
                    self.merge(Success {
                        identity: identity.clone(),
                        unit: reused.unit,
                        input_hash: reused.input_hash,
                        run: reused.from_run,
                        attempt: reused.from_attempt,
                        output_hash: reused.output_hash,
                        inputs: reused.inputs,
                    });
                }
                _ => {}
            }
        }
    }

    /// A success later than everything merged so far.
    fn merge(&mut self, success: Success) {
        self.order += 1;
        let key = (
            success.identity.clone(),
            success.unit.clone(),
            success.input_hash.clone(),
        );
        self.latest.insert(
            (success.identity.clone(), success.unit.clone()),
            success.clone(),
        );
        self.merged_at.insert(key.clone(), self.order);
        self.by_input.insert(
            key,
            Success {
                inputs: Vec::new(),
                ..success
            },
        );
    }

    /// The file's body: covered runs, then every kept success oldest first (the latest per
    /// unit last, with its inputs), so that loading it merges them back in the same order.
    fn body_bytes(&self) -> Result<Vec<u8>, StoreError> {
        let mut successes: Vec<(u64, Success)> = self
            .by_input
            .iter()
            .map(|(key, success)| {
                let latest = self
                    .latest
                    .get(&(key.0.clone(), key.1.clone()))
                    .filter(|latest| latest.input_hash == key.2);
                (
                    self.merged_at.get(key).copied().unwrap_or(0),
                    latest.cloned().unwrap_or_else(|| success.clone()),
                )
            })
            .collect();
        successes.sort_by_key(|(order, _)| *order);
        let body = Body {
            format: FORMAT,
            covered: self.covered.clone(),
            successes: successes.into_iter().map(|(_, success)| success).collect(),
        };
        serde_json::to_vec(&body)
            .map_err(|error| StoreError::invalid(format!("cannot encode the reuse index: {error}")))
    }
}

/// How far `id`'s journal goes now: its segments and the last one's length (zeros when it
/// cannot be listed: it is then read, and contributes what it can).
fn covered_now(state: &StateDir, id: &RunId) -> Covered {
    let journal = state.runs_dir().join(id.as_str()).join("journal");
    let segments = list_segment_files(&journal).unwrap_or_default();
    let last_len = segments
        .last()
        .and_then(|last| std::fs::symlink_metadata(&last.path).ok())
        .map_or(0, |metadata| metadata.len());
    Covered {
        run: id.to_string(),
        segments: segments.len() as u64,
        last_len,
    }
}

fn candidate(success: &Success) -> ReuseCandidate {
    ReuseCandidate {
        run_id: success.run.clone(),
        attempt: success.attempt,
        input_hash: success.input_hash.clone(),
        inputs: success.inputs.clone(),
        output_hash: success.output_hash.clone(),
    }
}

/// One pipeline's earlier successes, from the [`ReuseIndex`]: the engine's [`ReuseSource`].
#[derive(Debug, Default)]
pub struct PipelineReuse {
    by_input: HashMap<(String, String), ReuseCandidate>,
    latest: HashMap<String, ReuseCandidate>,
}

impl ReuseSource for PipelineReuse {
    fn find(&self, unit: &str, input_hash: &str) -> Option<ReuseCandidate> {
        self.by_input
            .get(&(unit.to_owned(), input_hash.to_owned()))
            .cloned()
    }

    fn latest(&self, unit: &str) -> Option<ReuseCandidate> {
        self.latest.get(unit).cloned()
    }
}
