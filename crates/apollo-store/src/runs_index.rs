//! A cache of finished runs' summaries, so `apollo runs` over 1,000 runs reads one file and
//! makes two `lstat`s per run instead of opening every journal (issue 17).
//!
//! `index/runs` holds, for each run whose journal ended with `run_finished` when it was
//! summarized, the run's sequence number, its summary, and the stamps (device, inode, size,
//! mtime and ctime in ns) of its `journal/` folder and of its last segment. An entry is used
//! only while both stamps are unchanged: a resume appends to the last segment (its size and
//! times change), a rotation or a `last_segment` record adds an entry to the folder (the
//! folder's times change), and a replaced or restored file has another inode or ctime (which
//! nobody can set back). Anything else — no index, an unreadable or damaged one, one written
//! by another version, a stale entry — means the journal is read as before, and the index is
//! rewritten when it can be (a read-only state directory just goes without). The journals
//! stay the only truth: the index is derived from them, never written by anything else, and
//! deleting it changes nothing but speed.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::run_id::RunId;
use crate::runs::{RunState, RunSummary};
use crate::safe_dir::Dir;
use crate::segment::{is_trimmed, list_segment_files};

/// The index's folder in the state directory, and the file in it.
const INDEX_DIR: &str = "index";
const RUNS_FILE: &str = "runs";

/// The file's format: an index of another format or apollo version is rebuilt, never read.
/// 2 added each run's kind; 3 its durability mode; 4 the run model's counts; 5 its deadline;
/// 6 a reproduction's verdict.
const FORMAT: u32 = 6;

/// When a file's stamp was taken, or what it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    /// The stamp of `path` itself (a symbolic link is not followed).
    fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        })
    }
}

/// A run's journal at one moment (see [`RunsIndex::stamps`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamps {
    segment: String,
    journal: Stamp,
    last: Stamp,
}

impl Stamps {
    /// The last segment's file name.
    pub(crate) fn segment(&self) -> &str {
        &self.segment
    }

    /// A 64-bit digest of the two stamps, which a long-lived reader keeps instead of them
    /// ([`crate::RunsMemo`]): equal stamps give equal digests.
    pub(crate) fn digest(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::hash::DefaultHasher::new();
        (self.journal, self.last).hash(&mut hasher);
        hasher.finish()
    }

    /// The digest ([`Stamps::digest`]) of the run in `run_dir` now, its last segment being
    /// `segment` (two `lstat`s, no listing).
    pub(crate) fn digest_now(run_dir: &Path, segment: &str) -> Option<u64> {
        let journal = run_dir.join("journal");
        let stamps = Stamps {
            segment: String::new(),
            journal: Stamp::of(&journal)?,
            last: Stamp::of(&journal.join(segment))?,
        };
        Some(stamps.digest())
    }
}

/// A finished run's summary, as stored (see [`RunSummary`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    sequence: Option<u64>,
    /// The last segment's file name.
    segment: String,
    journal: Stamp,
    last: Stamp,
    pipeline: Option<String>,
    identity: Option<String>,
    started: Option<DateTime<Utc>>,
    finished: Option<DateTime<Utc>>,
    last_record: Option<DateTime<Utc>>,
    state: String,
    n_units: usize,
    succeeded: u32,
    failed: u32,
    skipped: u32,
    #[serde(default)]
    reused: u32,
    definition_hash: Option<String>,
    #[serde(default)]
    params: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    kind: apollo_core::event::RunKind,
    #[serde(default)]
    durability: apollo_core::Durability,
    /// The run model's counts ([`RunSummary::counts`]), once a listing counted them.
    #[serde(default)]
    counts: Option<[u32; apollo_core::UnitState::ALL.len()]>,
    #[serde(default)]
    deadline: Option<DateTime<Utc>>,
    #[serde(default)]
    reproduction: Option<apollo_core::event::ReproductionCompared>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    format: u32,
    apollo: String,
    /// By run id.
    runs: BTreeMap<String, Entry>,
}

/// The index as read at the start of a listing, and what the listing learned.
#[derive(Debug, Default)]
pub(crate) struct RunsIndex {
    file: File,
    changed: bool,
}

impl RunsIndex {
    /// Reads `index/runs` of the state directory at `root`; empty when there is none or it
    /// cannot be used.
    pub(crate) fn load(root: &Path) -> Self {
        let file = Dir::open(root)
            .and_then(|root| root.subdir(INDEX_DIR))
            .and_then(|dir| dir.open_file(RUNS_FILE, crate::safe_dir::Access::Read))
            .ok()
            .and_then(|file| serde_json::from_reader::<_, File>(std::io::BufReader::new(file)).ok())
            .filter(|file| file.format == FORMAT && file.apollo == env!("CARGO_PKG_VERSION"));
        match file {
            Some(file) => RunsIndex {
                file,
                changed: false,
            },
            None => RunsIndex {
                file: File {
                    format: FORMAT,
                    apollo: env!("CARGO_PKG_VERSION").to_owned(),
                    runs: BTreeMap::new(),
                },
                // Written once something is learned (or to replace an unusable file).
                changed: false,
            },
        }
    }

    /// The summary and sequence number of run `id` in `run_dir`, if the index has it and its
    /// journal has not changed since.
    pub(crate) fn get(&self, id: &RunId, run_dir: &Path) -> Option<(Option<u64>, RunSummary)> {
        let entry = self.file.runs.get(id.as_str())?;
        let journal = run_dir.join("journal");
        if Stamp::of(&journal)? != entry.journal
            || Stamp::of(&journal.join(&entry.segment))? != entry.last
        {
            return None;
        }
        let state = match entry.state.as_str() {
            "succeeded" => RunState::Succeeded,
            "failed" => RunState::Failed,
            "interrupted" => RunState::Interrupted,
            _ => return None,
        };
        Some((
            entry.sequence,
            RunSummary {
                id: id.clone(),
                pipeline: entry.pipeline.clone(),
                identity: entry.identity.clone(),
                started: entry.started,
                finished: entry.finished,
                last_record: entry.last_record,
                state,
                n_units: entry.n_units,
                succeeded: entry.succeeded,
                failed: entry.failed,
                skipped: entry.skipped,
                reused: entry.reused,
                definition_hash: entry.definition_hash.clone(),
                problem: None,
                params: entry.params.clone(),
                kind: entry.kind,
                durability: entry.durability,
                counts: entry.counts.map(apollo_core::UnitCounts::from_array),
                deadline: entry.deadline,
                reproduction: entry.reproduction.clone(),
            },
        ))
    }

    /// The stamps of the run in `run_dir` now: its last segment's name, and the stamps of its
    /// `journal/` folder and of that segment. Taken before and after a run is summarized:
    /// only a journal that did not change meanwhile is learned.
    pub(crate) fn stamps(run_dir: &Path) -> Option<Stamps> {
        let journal = run_dir.join("journal");
        let journal_stamp = Stamp::of(&journal)?;
        let last = list_segment_files(&journal).ok()?.pop()?;
        let segment = last.path.file_name()?.to_str()?.to_owned();
        Some(Stamps {
            segment,
            journal: journal_stamp,
            last: Stamp::of(&last.path)?,
        })
    }

    /// Learns `summary`, read from the run's journal between the stamps `before` and `after`
    /// (see [`RunsIndex::stamps`]), if the run is finished and nothing changed meanwhile.
    pub(crate) fn learn(
        &mut self,
        run_dir: &Path,
        sequence: Option<u64>,
        summary: &RunSummary,
        before: Option<Stamps>,
        after: Option<Stamps>,
    ) {
        let stamps = match (before, after) {
            (Some(before), Some(after)) if before == after => after,
            _ => return,
        };
        // A last segment still holding space allocated ahead (its writer died before closing
        // it) could take records without changing size: not learned until it is trimmed.
        let trimmed = || is_trimmed(&run_dir.join("journal").join(&stamps.segment));
        if !summary.state.is_finished() || summary.problem.is_some() || !trimmed() {
            if self.file.runs.remove(summary.id.as_str()).is_some() {
                self.changed = true;
            }
            return;
        }
        self.file.runs.insert(
            summary.id.to_string(),
            Entry {
                sequence,
                segment: stamps.segment,
                journal: stamps.journal,
                last: stamps.last,
                pipeline: summary.pipeline.clone(),
                identity: summary.identity.clone(),
                started: summary.started,
                finished: summary.finished,
                last_record: summary.last_record,
                state: summary.state.as_str().to_owned(),
                n_units: summary.n_units,
                succeeded: summary.succeeded,
                failed: summary.failed,
                skipped: summary.skipped,
                reused: summary.reused,
                definition_hash: summary.definition_hash.clone(),
                params: summary.params.clone(),
                kind: summary.kind,
                durability: summary.durability,
                counts: summary.counts.map(|counts| counts.to_array()),
                deadline: summary.deadline,
                reproduction: summary.reproduction.clone(),
            },
        );
        self.changed = true;
    }

    /// Keeps the run model's counts of run `id` with its entry, if it has one (a finished
    /// run whose summary was just read or found unchanged).
    pub(crate) fn learn_counts(&mut self, id: &RunId, counts: Option<apollo_core::UnitCounts>) {
        if let (Some(entry), Some(counts)) = (self.file.runs.get_mut(id.as_str()), counts) {
            entry.counts = Some(counts.to_array());
            self.changed = true;
        }
    }

    /// Drops the entries of runs that are gone (pruned, deleted).
    pub(crate) fn keep_only(&mut self, ids: &[RunId]) {
        let before = self.file.runs.len();
        let keep: std::collections::HashSet<&str> = ids.iter().map(RunId::as_str).collect();
        self.file.runs.retain(|id, _| keep.contains(id.as_str()));
        self.changed |= self.file.runs.len() != before;
    }

    /// Writes the index back if it learned anything; best effort (a read-only state
    /// directory, a full disk: the next listing reads the journals again).
    pub(crate) fn save(&self, root: &Path) {
        if !self.changed {
            return;
        }
        let Ok(bytes) = serde_json::to_vec(&self.file) else {
            return;
        };
        let _ = Dir::open(root)
            .and_then(|root| root.create_subdir(INDEX_DIR, false))
            .and_then(|dir| dir.write_file_atomic(RUNS_FILE, &bytes, false));
    }
}
