//! The runs of a state directory as a long-lived reader that never writes into it (`apollo
//! serve`) keeps them between listings: one compact [`RunEntry`] per run — only what the runs
//! list shows and filters on — refreshed from [`StateDir::list_runs_remembered`], which reads
//! only the runs whose journal changed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use apollo_core::UnitCounts;
use apollo_core::event::RunKind;
use apollo_store::{Listed, RunId, RunState, RunSummary, RunsMemo, StateDir, StoreError};
use chrono::{DateTime, Utc};

use super::documents::RunLine;

/// One run as [`RunsCache`] keeps it: a few hundred bytes, whatever the run's size.
#[derive(Debug, Clone)]
pub struct RunEntry {
    /// Its place in the creation order, with `id` ([`StateDir::run_sequence`]).
    sequence: Option<u64>,
    id: RunId,
    /// The last listing that saw it ([`RunsCache::refresh`]).
    seen: u32,
    /// Shared by every run of the pipeline.
    pipeline: Option<Arc<str>>,
    started: Option<DateTime<Utc>>,
    finished: Option<DateTime<Utc>>,
    last_record: Option<DateTime<Utc>>,
    state: RunState,
    kind: RunKind,
    durability: apollo_core::Durability,
    n_units: u32,
    counts: Option<UnitCounts>,
    problem: Option<Box<str>>,
    /// The params as a JSON object's text (`None` when it has none): parsed again only for
    /// the lines shown.
    params: Option<Box<str>>,
    deadline: Option<DateTime<Utc>>,
    reproduction: Option<Box<apollo_core::event::ReproductionCompared>>,
}

impl RunEntry {
    fn new(
        sequence: Option<u64>,
        summary: &RunSummary,
        pipelines: &mut HashSet<Arc<str>>,
    ) -> RunEntry {
        let pipeline = summary.pipeline.as_deref().map(|name| {
            if let Some(shared) = pipelines.get(name) {
                return shared.clone();
            }
            let shared: Arc<str> = name.into();
            pipelines.insert(shared.clone());
            shared
        });
        RunEntry {
            sequence,
            id: summary.id.clone(),
            seen: 0,
            pipeline,
            started: summary.started,
            finished: summary.finished,
            last_record: summary.last_record,
            state: summary.state,
            kind: summary.kind,
            durability: summary.durability,
            n_units: u32::try_from(summary.n_units).unwrap_or(u32::MAX),
            counts: summary.counts,
            problem: summary.problem.as_deref().map(Box::from),
            params: (!summary.params.is_empty())
                .then(|| serde_json::to_string(&summary.params).ok())
                .flatten()
                .map(String::into_boxed_str),
            deadline: summary.deadline,
            reproduction: summary.reproduction.clone().map(Box::new),
        }
    }

    /// The run.
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// Its pipeline, from `run_started`.
    pub fn pipeline(&self) -> Option<&str> {
        self.pipeline.as_deref()
    }

    /// Where it stands.
    pub fn state(&self) -> RunState {
        self.state
    }

    /// What kind of run it is.
    pub fn kind(&self) -> RunKind {
        self.kind
    }

    /// Its params (parsed from the kept text).
    pub fn params(&self) -> BTreeMap<String, serde_json::Value> {
        (self.params.as_deref())
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default()
    }

    /// Its line of `apollo runs` ([`super::run_lines`] gives the same for a summary), as of
    /// `now`; `holder_pid` is the pid of the apollo holding the state directory's lock.
    pub fn line(&self, holder_pid: Option<u32>, now: DateTime<Utc>) -> RunLine {
        RunLine {
            id: self.id.as_str().to_owned(),
            pipeline: self.pipeline.as_deref().map(str::to_owned),
            started: self.started,
            finished: self.finished,
            duration_ms: super::documents::duration_ms(
                self.state,
                self.started,
                self.finished.or(self.last_record),
                now,
            ),
            status: self.state.as_str(),
            kind: self.kind.as_str(),
            durability: self.durability.as_str(),
            pid: holder_pid.filter(|_| self.state == RunState::Running),
            units: self.n_units as usize,
            counts: self.counts.unwrap_or_default(),
            problem: self.problem.as_deref().map(str::to_owned),
            params: self.params(),
            // The runs list in `serve` shows no cost (yet): `apollo runs` prices a run by
            // folding its journal, which the list does not do per run.
            cost: None,
            deadline: None,
            late_by_ms: None,
            reproduction: self.reproduction.as_deref().cloned(),
        }
        .with_deadline(self.deadline, self.finished)
    }
}

/// What a long-lived reader that never writes into the state directory (`apollo serve`)
/// remembers between listings of its runs: a [`RunEntry`] per run, the store's
/// [`RunsMemo`] (a digest of each finished run's journal stamps), and the run model's counts
/// of unfinished runs by the journal length they were counted at: about 600 bytes a run in
/// all (`cargo bench -p apollo-serve --bench memory`).
#[derive(Debug, Default)]
pub struct RunsCache {
    memo: RunsMemo,
    /// Oldest first: by (sequence, id).
    entries: Vec<RunEntry>,
    /// Bumped by each listing (see [`RunEntry::seen`]).
    listing: u32,
    pipelines: HashSet<Arc<str>>,
    unfinished_counts: HashMap<RunId, (u64, UnitCounts)>,
}

impl RunsCache {
    /// Whether the last listing ([`RunsCache::refresh`]) found run `id`.
    pub fn contains(&self, id: &RunId) -> bool {
        self.entries.iter().any(|entry| entry.id == *id)
    }

    /// Brings the runs up to date and gives them, oldest first: a finished run's journal is
    /// read once per cache, an unfinished one's again only when it grew. Entries are updated
    /// in place; only runs new to the cache are gathered aside (all of them on the first
    /// listing, each already compact), so a listing needs little beyond what is kept.
    pub fn refresh(&mut self, state: &StateDir) -> Result<&[RunEntry], StoreError> {
        self.listing = self.listing.wrapping_add(1);
        let listing = self.listing;
        let mut added: Vec<RunEntry> = Vec::new();
        let mut missed: Vec<(Option<u64>, RunId)> = Vec::new();
        let mut unfinished = HashSet::new();
        let entries = &mut self.entries;
        let (pipelines, counts) = (&mut self.pipelines, &mut self.unfinished_counts);
        let find = |entries: &[RunEntry], sequence: Option<u64>, id: &RunId| {
            entries
                .binary_search_by(|entry| (entry.sequence, &entry.id).cmp(&(sequence, id)))
                .ok()
        };
        state.list_runs_remembered(&mut self.memo, &mut |sequence, listed| match listed {
            Listed::Unchanged(id) => match find(entries, sequence, &id) {
                Some(at) => entries[at].seen = listing,
                None => missed.push((sequence, id)),
            },
            Listed::Read(mut summary) => {
                if summary.counts.is_none() {
                    summary.counts = count(state, &summary, counts);
                    if !summary.state.is_finished() {
                        unfinished.insert(summary.id.clone());
                    }
                }
                let mut entry = RunEntry::new(sequence, &summary, pipelines);
                entry.seen = listing;
                match find(entries, sequence, &summary.id) {
                    Some(at) => entries[at] = entry,
                    None => added.push(entry),
                }
            }
        })?;
        // A run the memo knew but this cache did not (a cache reset after a panic): read it.
        for (sequence, id) in missed {
            let mut summary = state.run_summary(&id)?;
            summary.counts = count(state, &summary, &mut self.unfinished_counts);
            let mut entry = RunEntry::new(sequence, &summary, &mut self.pipelines);
            entry.seen = listing;
            added.push(entry);
        }
        self.entries.retain(|entry| entry.seen == listing);
        if !added.is_empty() {
            // The first listing adds every run: take its vector rather than copy it.
            if self.entries.is_empty() {
                self.entries = added;
            } else {
                self.entries.append(&mut added);
            }
            self.entries
                .sort_unstable_by(|a, b| (a.sequence, &a.id).cmp(&(b.sequence, &b.id)));
            self.entries.shrink_to_fit();
        }
        self.unfinished_counts
            .retain(|id, _| unfinished.contains(id));
        self.pipelines.retain(|name| Arc::strong_count(name) > 1);
        Ok(&self.entries)
    }
}

/// The run model's counts of a run: folded from its journal (an unfinished run's remembered
/// by the journal length they were counted at).
fn count(
    state: &StateDir,
    summary: &RunSummary,
    counts: &mut HashMap<RunId, (u64, UnitCounts)>,
) -> Option<UnitCounts> {
    let id = &summary.id;
    if summary.state.is_finished() {
        return Some(super::run_model(state, id).ok()?.timeline.counts());
    }
    let len = super::journal_len(state, id).ok()?;
    if let Some((counted_at, known)) = counts.get(id)
        && *counted_at == len
    {
        return Some(*known);
    }
    let model_counts = super::run_model(state, id).ok()?.timeline.counts();
    counts.insert(id.clone(), (len, model_counts));
    Some(model_counts)
}
