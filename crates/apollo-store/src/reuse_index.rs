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
//! **Small.** A no-op run of 10,000 reusable units loads it, so it holds per pipeline
//! identity only the keys and the answer (run, attempt, output hash), not the input
//! components: those of a unit's latest success are read from its run's journal when a "not
//! reused" is explained ([`PipelineReuse`]), which happens only when the unit runs. A hash is
//! kept as its 32 bytes, a unit name or run id once and then by number, in memory and in the
//! file (binary, see `reuse_index/body.rs`).
//!
//! **A run covers itself.** A new run's session hands the records it appended back at its
//! end ([`ReuseIndex::cover_new_run`]), so the next refresh reads no journal. When they
//! changed nothing in the index (every unit reused from its latest success), the index file
//! is not rewritten: the run is named in a small file beside it
//! (`index/reuse-covered-since`), which counts only with the index file whose checksum it
//! names; with any other (rewritten since, or damaged) it is ignored and its runs are read
//! again.
//!
//! What counts as a success: a `unit_finished` that `succeeded` with an output hash, taken
//! with its own `unit_started` (the input hash); and a `unit_reused`, which stands for the
//! attempt it reused (so "reused from" always names the run that did the work). Skips (exit
//! 77) and human verdicts measured no outputs and are not indexed; nor are runs recorded
//! without a pipeline identity (journal format 1.0/1.1).

use foldhash::{HashMap, HashMapExt, HashSet};
use std::sync::{Mutex, PoisonError};

use apollo_core::engine::{ReuseCandidate, ReuseSource};
use apollo_core::event::{Event, InputComponent, UnitReused};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::index_file::{self, Unusable};
use crate::reader::{JournalReader, ReadOptions};
use crate::run_id::RunId;
use crate::segment::list_segment_files;
use crate::state_dir::StateDir;

mod body;
mod merge;

use merge::RunMerge;

/// The index's file name in `index/`.
const FILE_NAME: &str = "reuse";
/// The version of the file's body (see `body.rs`); another one is rebuilt.
const FORMAT: u32 = 3;

/// The file beside the index naming the runs covered since the index file was written whose
/// records changed nothing in it (a run that only reused units): writing it instead of the
/// index spares a no-op run rewriting megabytes. It counts only with the very index file it
/// names (by checksum); with any other, it is ignored and those runs are read again.
const COVERED_SINCE_FILE_NAME: &str = "reuse-covered-since";

/// The version of [`COVERED_SINCE_FILE_NAME`]'s body.
const COVERED_SINCE_FORMAT: u32 = 1;

/// The most runs [`COVERED_SINCE_FILE_NAME`] names; past them the index file is rewritten.
const COVERED_SINCE_MAX_RUNS: usize = 64;

/// [`COVERED_SINCE_FILE_NAME`]'s body.
#[derive(Debug, Serialize, Deserialize)]
struct CoveredSince {
    format: u32,
    /// The checksum of the index file these runs add nothing to.
    index: String,
    covered: Vec<Covered>,
}

/// How far a run's journal was read: it is read again once this changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Covered {
    run: String,
    segments: u64,
    last_len: u64,
}

/// A hash as the index keeps it: a SHA-256 (64 lower-case hex digits in the journal) in its
/// 32 bytes; anything else a journal held, as it was written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Digest {
    Sha256([u8; 32]),
    Other(Box<str>),
}

impl Digest {
    fn new(text: &str) -> Self {
        match apollo_core::hash::sha256_from_hex(text) {
            Some(bytes) => Self::Sha256(bytes),
            None => Self::Other(text.into()),
        }
    }

    /// Whether `text` is this hash as the journal writes it.
    fn is(&self, text: &str) -> bool {
        match self {
            Self::Sha256(bytes) => apollo_core::hash::is_hex_of(text, bytes),
            Self::Other(other) => **other == *text,
        }
    }

    /// As the journal writes it.
    fn text(&self) -> String {
        match self {
            Self::Sha256(bytes) => apollo_core::hash::to_hex(bytes),
            Self::Other(text) => text.to_string(),
        }
    }
}

/// Names the index holds many times (unit names, run ids), each once, by number.
#[derive(Debug, Default, Clone)]
struct Names {
    list: Vec<Box<str>>,
    numbers: HashMap<Box<str>, u32>,
}

impl Names {
    /// The number of `name`, given it now if it had none.
    fn number(&mut self, name: &str) -> u32 {
        if let Some(&number) = self.numbers.get(name) {
            return number;
        }
        // Fewer than 2³² names: each came from a journal record or a file of at most 1 GiB.
        let number = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        self.list.push(name.into());
        self.numbers.insert(name.into(), number);
        number
    }

    fn find(&self, name: &str) -> Option<u32> {
        self.numbers.get(name).copied()
    }

    fn name(&self, number: u32) -> &str {
        self.list.get(number as usize).map_or("", |name| name)
    }
}

/// One successful attempt: the run (by number) whose attempt did the work, and what it left.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Success {
    run: u32,
    attempt: u32,
    output: Digest,
}

/// A unit's latest success, the input hash it had, and its input components when they were
/// read from a journal in this process (empty when loaded from the file).
#[derive(Debug, Clone)]
struct Latest {
    success: Success,
    input: Digest,
    inputs: Vec<InputComponent>,
}

/// One pipeline's successes.
#[derive(Debug, Default, Clone)]
struct Pipeline {
    units: Names,
    runs: Names,
    /// (unit, input hash) → the latest success with it.
    by_input: HashMap<(u32, Digest), Success>,
    /// By unit number: its latest success, whatever its inputs.
    latest: Vec<Option<Latest>>,
}

impl Pipeline {
    /// A success of `unit` (`run`'s `attempt`, which had `input_hash` and left `output_hash`)
    /// later than everything merged so far; whether the index file would change.
    fn merge(
        &mut self,
        unit: &str,
        (run, attempt): (&str, u32),
        input_hash: &str,
        output_hash: &str,
        inputs: Vec<InputComponent>,
    ) -> bool {
        let unit = self.units.number(unit);
        let success = Success {
            run: self.runs.number(run),
            attempt,
            output: Digest::new(output_hash),
        };
        let input = Digest::new(input_hash);
        let slot = unit as usize;
        if self.latest.len() <= slot {
            self.latest.resize(slot + 1, None);
        }
        // The unit's latest success again (a run that reused it): `by_input` holds it already
        // (whatever is a unit's latest is also its input hash's), so only the inputs, if they
        // were not known, change.
        if let Some(latest) = &mut self.latest[slot]
            && latest.success == success
            && latest.input == input
        {
            if latest.inputs.is_empty() {
                latest.inputs = inputs;
            }
            return false;
        }
        self.by_input.insert((unit, input.clone()), success.clone());
        self.latest[slot] = Some(Latest {
            success,
            input,
            inputs,
        });
        true
    }
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
    /// Where the journals are, to read a latest success's inputs when asked.
    state: Option<StateDir>,
    covered: Vec<Covered>,
    /// The checksum of the index file as loaded or last written here, and the runs that file
    /// itself covers (the others are in [`COVERED_SINCE_FILE_NAME`] or not written yet).
    file: Option<(String, HashSet<String>)>,
    /// Pipeline identity → its successes.
    pipelines: HashMap<String, Pipeline>,
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
        let loaded = match index_file::read_checked(state, FILE_NAME) {
            Ok((checksum, bytes)) => body::decode(FORMAT, &bytes).map(|body| (checksum, body)),
            Err(Unusable::Missing) => Err("is missing".to_owned()),
            Err(Unusable::Damaged(why)) => Err(why),
        };
        let present: HashSet<&str> = run_ids.iter().map(RunId::as_str).collect();
        let body = loaded.and_then(|(checksum, (covered, pipelines))| {
            match covered
                .iter()
                .find(|covered| !present.contains(covered.run.as_str()))
            {
                Some(gone) => Err(format!("covers run {}, which is gone", gone.run)),
                None => Ok((checksum, covered, pipelines)),
            }
        });
        let mut index = Self {
            state: Some(state.clone()),
            ..Self::default()
        };
        let known: HashMap<String, Covered> = match body {
            Ok((checksum, covered, pipelines)) => {
                index.pipelines = pipelines;
                let in_file = covered.iter().map(|covered| covered.run.clone());
                index.file = Some((checksum.clone(), in_file.collect()));
                covered
                    .into_iter()
                    .chain(covered_since(state, &checksum, &present))
                    .map(|covered| (covered.run.clone(), covered))
                    .collect()
            }
            Err(why) => {
                refresh.rebuilt = Some(why);
                HashMap::new()
            }
        };
        // A file an older apollo checked by SHA-256 is written again (once) when it may be.
        let older = index
            .file
            .as_ref()
            .is_some_and(|(checksum, _)| index_file::is_older_checksum(checksum));
        let mut changed = refresh.rebuilt.is_some() || (write && older);
        for (id, now) in run_ids.iter().zip(current) {
            if known.get(id.as_str()) != Some(&now) {
                index.read_run(state, id);
                refresh.runs_read += 1;
                changed = true;
            }
            index.covered.push(now);
        }
        if write && changed {
            index.write_file(state)?;
            refresh.written = true;
        } else if changed {
            // What was read is in memory only: the file no longer stands for this index, so
            // `cover_new_run` must not name runs beside it.
            index.file = None;
        }
        Ok((index, refresh))
    }

    /// Write the index file, covering every run covered here.
    fn write_file(&mut self, state: &StateDir) -> Result<(), StoreError> {
        let body = body::encode(FORMAT, &self.covered, &self.pipelines);
        let checksum = index_file::write(state, FILE_NAME, &body, false)?;
        let in_file = self.covered.iter().map(|covered| covered.run.clone());
        self.file = Some((checksum, in_file.collect()));
        Ok(())
    }

    /// The index's view for one pipeline, as the engine's [`ReuseSource`]: successes of runs
    /// recorded with `identity`, leaving out those of `excluding` (the run being resumed, whose
    /// own successes the resume rules handle). See also [`into_source`](Self::into_source),
    /// which does not copy.
    pub fn source(&self, identity: &str, excluding: Option<&RunId>) -> PipelineReuse {
        let pipeline = self.pipelines.get(identity).cloned();
        self.view(pipeline.unwrap_or_default(), excluding)
    }

    /// [`source`](Self::source), taking the pipeline's successes out of the index.
    pub fn into_source(mut self, identity: &str, excluding: Option<&RunId>) -> PipelineReuse {
        let pipeline = self.pipelines.remove(identity).unwrap_or_default();
        self.view(pipeline, excluding)
    }

    fn view(&self, pipeline: Pipeline, excluding: Option<&RunId>) -> PipelineReuse {
        PipelineReuse {
            excluding: excluding.and_then(|run| pipeline.runs.find(run.as_str())),
            pipeline,
            state: self.state.clone(),
            inputs_read: Mutex::new(HashMap::new()),
        }
    }

    /// How many successes the index holds.
    pub fn len(&self) -> usize {
        self.pipelines
            .values()
            .map(|pipeline| pipeline.by_input.len())
            .sum()
    }

    /// Whether the index holds no success.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        let mut merge = RunMerge::new(id);
        let mut pipeline: Option<&mut Pipeline> = None;
        for record in reader {
            let Ok(record) = record else {
                return;
            };
            if let Event::RunStarted(run_started) = record.event {
                pipeline = run_started
                    .identity
                    .map(|identity| self.pipelines.entry(identity).or_default());
            } else if let Some(pipeline) = pipeline.as_deref_mut() {
                merge.event(pipeline, record.event);
            }
        }
    }

    /// Takes the successes of pipeline `identity` out of the index as the engine's source
    /// (like [`into_source`](Self::into_source)), keeping the other pipelines' for
    /// [`cover_new_run`](Self::cover_new_run).
    pub fn take_source(&mut self, identity: &str, excluding: Option<&RunId>) -> PipelineReuse {
        let pipeline = self.pipelines.remove(identity).unwrap_or_default();
        self.view(pipeline, excluding)
    }

    /// After the new run `id` of pipeline `identity` ended, with the state directory's lock
    /// still held since this index was refreshed: puts back the successes `source` took out,
    /// merges `appended` — what was appended to the run's journal after its `run_started`, in
    /// order (records that cannot be successes may be left out) — and writes the index, now
    /// covering the run as far as its journal goes. The next refresh then need not read the
    /// run's journal back (for a no-op run of 10,000 reused units, that was a tenth of the
    /// next run's time). An index that said less than the journal would cost reruns, never
    /// a wrong reuse; the tests check it says the same as one rebuilt from every journal.
    pub fn cover_new_run(
        &mut self,
        state: &StateDir,
        source: PipelineReuse,
        identity: &str,
        id: &RunId,
        appended: Vec<Event>,
    ) -> Result<(), StoreError> {
        let pipeline = match self.pipelines.entry(identity.to_owned()) {
            std::collections::hash_map::Entry::Occupied(mut entry) => {
                // Not taken out by `take_source`: the source's are the ones in use.
                entry.insert(source.pipeline);
                entry.into_mut()
            }
            std::collections::hash_map::Entry::Vacant(entry) => entry.insert(source.pipeline),
        };
        let mut merge = RunMerge::new(id);
        let mut changed = false;
        for event in appended {
            changed |= merge.event(pipeline, event);
        }
        self.covered.retain(|covered| covered.run != id.as_str());
        self.covered.push(covered_now(state, id));
        match &self.file {
            // Only reused units, each its latest success already: the index file would not
            // change but for naming the run, which the small file beside it does.
            Some((checksum, in_file))
                if !changed
                    && self.covered.len().saturating_sub(in_file.len())
                        <= COVERED_SINCE_MAX_RUNS =>
            {
                let since = CoveredSince {
                    format: COVERED_SINCE_FORMAT,
                    index: checksum.clone(),
                    covered: self
                        .covered
                        .iter()
                        .filter(|covered| !in_file.contains(&covered.run))
                        .cloned()
                        .collect(),
                };
                let bytes = serde_json::to_vec(&since).map_err(|error| {
                    StoreError::invalid(format!("cannot encode the reuse index: {error}"))
                })?;
                index_file::write(state, COVERED_SINCE_FILE_NAME, &bytes, false)?;
                Ok(())
            }
            _ => self.write_file(state),
        }
    }
}

/// The runs [`COVERED_SINCE_FILE_NAME`] says add nothing to the index file whose checksum is
/// `checksum` — none when it is missing, damaged, of another format, extends another index
/// file, or names a run that is gone (those runs are then read again, which is only slower).
fn covered_since(state: &StateDir, checksum: &str, present: &HashSet<&str>) -> Vec<Covered> {
    index_file::read(state, COVERED_SINCE_FILE_NAME)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<CoveredSince>(&bytes).ok())
        .filter(|since| {
            since.format == COVERED_SINCE_FORMAT
                && since.index == checksum
                && since
                    .covered
                    .iter()
                    .all(|covered| present.contains(covered.run.as_str()))
        })
        .map(|since| since.covered)
        .unwrap_or_default()
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

/// The inputs each attempt of one run recorded, by (unit, attempt).
type RecordedInputs = HashMap<(String, u32), Vec<InputComponent>>;

/// One pipeline's earlier successes, from the [`ReuseIndex`]: the engine's [`ReuseSource`].
///
/// The input components of a unit's latest success (what a "not reused" is explained
/// against) are read from its run's journal the first time they are asked for, once per run.
#[derive(Debug, Default)]
pub struct PipelineReuse {
    pipeline: Pipeline,
    /// The run being resumed (by number): its successes are not candidates.
    excluding: Option<u32>,
    state: Option<StateDir>,
    /// Run → (unit, attempt) → the inputs its `unit_started` recorded.
    inputs_read: Mutex<HashMap<String, RecordedInputs>>,
}

impl PipelineReuse {
    /// Whether `reused` names its unit's latest success as this source holds it: covering a
    /// new run, [`ReuseIndex::cover_new_run`] can be handed the run's records without it
    /// (merged, it would change nothing). A no-op run's records are all such.
    pub fn is_latest(&self, reused: &UnitReused) -> bool {
        let Some(unit) = self.pipeline.units.find(&reused.unit) else {
            return false;
        };
        let Some(Some(latest)) = self.pipeline.latest.get(unit as usize) else {
            return false;
        };
        self.pipeline.runs.find(&reused.from_run) == Some(latest.success.run)
            && latest.success.attempt == reused.from_attempt
            && latest.input.is(&reused.input_hash)
            && latest.success.output.is(&reused.output_hash)
    }

    fn candidate(
        &self,
        success: &Success,
        input: &Digest,
        inputs: Vec<InputComponent>,
    ) -> Option<ReuseCandidate> {
        (self.excluding != Some(success.run)).then(|| ReuseCandidate {
            run_id: self.pipeline.runs.name(success.run).to_owned(),
            attempt: success.attempt,
            input_hash: input.text(),
            inputs,
            output_hash: success.output.text(),
            restored: Vec::new(),
        })
    }

    /// The inputs `run`'s `unit_started` recorded for `unit`'s `attempt` (empty when they
    /// cannot be read: the change is then described as "input hash changed").
    fn recorded_inputs(&self, run: &str, unit: &str, attempt: u32) -> Vec<InputComponent> {
        let mut read = self
            .inputs_read
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let by_attempt = read
            .entry(run.to_owned())
            .or_insert_with(|| self.read_inputs(run));
        by_attempt
            .get(&(unit.to_owned(), attempt))
            .cloned()
            .unwrap_or_default()
    }

    fn read_inputs(&self, run: &str) -> RecordedInputs {
        let mut inputs = HashMap::new();
        let Some(state) = &self.state else {
            return inputs;
        };
        let Some(run_dir) = run
            .parse::<RunId>()
            .ok()
            .and_then(|run| state.run_dir(&run).ok())
        else {
            return inputs;
        };
        let Ok(reader) = JournalReader::open(run_dir.path(), ReadOptions::default()) else {
            return inputs;
        };
        for record in reader {
            let Ok(record) = record else {
                break;
            };
            match record.event {
                Event::UnitStarted(started) => {
                    inputs.insert((started.unit, started.attempt), started.inputs);
                }
                // As `RunMerge`: a job reattached to ran under its submitting attempt's inputs.
                Event::UnitSubmitted(submitted) => {
                    if let Some(from) = submitted.reattached_from
                        && let Some(earlier) = inputs.get(&(submitted.unit.clone(), from)).cloned()
                    {
                        inputs.insert((submitted.unit, submitted.attempt), earlier);
                    }
                }
                _ => {}
            }
        }
        inputs
    }
}

impl ReuseSource for PipelineReuse {
    fn find(&self, unit: &str, input_hash: &str) -> Option<ReuseCandidate> {
        let key = (self.pipeline.units.find(unit)?, Digest::new(input_hash));
        let success = self.pipeline.by_input.get(&key)?;
        self.candidate(success, &key.1, Vec::new())
    }

    fn latest(&self, unit: &str) -> Option<ReuseCandidate> {
        let number = self.pipeline.units.find(unit)?;
        let latest = self.pipeline.latest.get(number as usize)?.as_ref()?;
        let success = &latest.success;
        let inputs = if latest.inputs.is_empty() {
            let run = self.pipeline.runs.name(success.run);
            self.recorded_inputs(run, unit, success.attempt)
        } else {
            latest.inputs.clone()
        };
        self.candidate(success, &latest.input, inputs)
    }
}
