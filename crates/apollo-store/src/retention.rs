//! `apollo prune`: delete old runs, never a running one, never the latest of a pipeline (by
//! creation order, not by the clock).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use chrono::{DateTime, Utc};

use crate::blobs::{BlobSweep, run_blobs, sweep_marked};
use crate::error::StoreError;
use crate::fsutil::{fsync_dir, random_hex};
use crate::run_id::RunId;
use crate::runs::{RunState, RunSummary};
use crate::state_dir::StateDir;

/// Which runs to keep. Each option set is a rule that **keeps** runs — those started less than
/// `keep_days` days ago, the `keep_runs` newest of each pipeline — and a run is deleted only
/// when no rule set keeps it (as restic's and borg's `--keep-*` rules combine), and it is
/// neither running nor the latest of its pipeline. With neither set, nothing is deleted. So
/// `keep_days(30).keep_runs(10)` keeps the last 30 days and at least 10 runs of each pipeline
/// (issue 36: both set, a run was deleted when *either* rule let it go, so `--keep-runs 5
/// --keep-days 0` deleted the 5 runs it was asked to keep).
///
/// Built from [`PruneOptions::default`] with the chainable setters (new criteria may be added
/// in any release, so the struct cannot be built with a literal outside this crate):
/// `PruneOptions::default().keep_days(30).keep_runs(10)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PruneOptions {
    /// Keep runs started at most this many days (×24 hours) before `now`.
    pub keep_days: Option<u32>,
    /// Keep the newest this many runs of each pipeline.
    pub keep_runs: Option<usize>,
}

impl PruneOptions {
    /// Keeping runs started at most `keep_days` days (×24 hours) before `now`.
    pub fn keep_days(mut self, keep_days: u32) -> Self {
        self.keep_days = Some(keep_days);
        self
    }

    /// Keeping the newest `keep_runs` runs of each pipeline.
    pub fn keep_runs(mut self, keep_runs: usize) -> Self {
        self.keep_runs = Some(keep_runs);
        self
    }
}

/// What [`prune`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Runs deleted (folder, journal and unit logs).
    pub deleted: Vec<RunId>,
    /// Runs that matched the criteria but were kept because they are running.
    pub kept_running: Vec<RunId>,
    /// Runs that matched the criteria but were kept as the latest run of their pipeline.
    pub kept_latest: Vec<RunId>,
    /// Runs that matched the criteria but were kept because a kept run reused outputs of
    /// theirs (`unit_reused`): their records are what restoring those outputs needs — the
    /// rule blob eviction keeps too.
    pub kept_reused: Vec<RunId>,
    /// Bytes freed.
    pub freed_bytes: u64,
    /// The blobs no kept run references, removed (mark and sweep); `None` when another apollo
    /// holds the state directory's lock (its running run may be capturing blobs it has not
    /// recorded yet, so no blob is removed then).
    pub blobs: Option<BlobSweep>,
}

fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => dir_size(&entry.path()),
            Ok(_) => entry.metadata().map(|meta| meta.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// Removes leftovers of an interrupted prune or backup (`runs/.deleting-*`, `runs/.backup-*`).
pub(crate) fn remove_leftovers(state: &StateDir) -> Result<(), StoreError> {
    let runs_dir = state.runs_dir();
    let entries =
        fs::read_dir(&runs_dir).map_err(|source| StoreError::io("list", &runs_dir, source))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".deleting-") || name.starts_with(".backup-") {
            fs::remove_dir_all(entry.path())
                .map_err(|source| StoreError::io("remove", entry.path(), source))?;
        }
    }
    Ok(())
}

/// Which of `summaries` (one state dir's runs, oldest first as [`StateDir::list_runs`] lists
/// them: in creation order, never by the clock) to delete. A pipeline is its identity; a run
/// recorded without one (format 1.0/1.1) counts as a run of a pipeline of its name alone.
pub(crate) fn select(
    summaries: &[RunSummary],
    options: PruneOptions,
    now: DateTime<Utc>,
) -> PruneReport {
    let mut report = PruneReport::default();
    let latest = crate::runs::latest_runs(summaries);
    let mut by_pipeline: BTreeMap<(bool, &str), Vec<&RunSummary>> = BTreeMap::new();
    for summary in summaries {
        by_pipeline
            .entry(summary.pipeline_key())
            .or_default()
            .push(summary);
    }
    for runs in by_pipeline.values() {
        let n_runs = runs.len();
        for (index, run) in runs.iter().enumerate() {
            let rank_from_newest = n_runs - 1 - index;
            let started = run.started.unwrap_or_else(|| run.id.started_at());
            let kept_by_age = options
                .keep_days
                .is_some_and(|days| now - started <= chrono::Duration::days(i64::from(days)));
            let kept_by_count = options
                .keep_runs
                .is_some_and(|keep| rank_from_newest < keep);
            let any_rule = options.keep_days.is_some() || options.keep_runs.is_some();
            if !any_rule || kept_by_age || kept_by_count {
                continue;
            }
            if run.state == RunState::Running {
                report.kept_running.push(run.id.clone());
            } else if latest.contains(&run.id) {
                report.kept_latest.push(run.id.clone());
            } else {
                report.deleted.push(run.id.clone());
            }
        }
    }
    report.deleted.sort();
    report
}

/// Moves from `report.deleted` to `report.kept_reused` every run whose outputs a kept run
/// reused (transitively: a run kept so keeps what it reused), and returns the blobs the kept
/// runs reference — their definition snapshots and captures. One rule with blob eviction
/// ([`crate::evict_blobs`]): what a kept run reused stays restorable (issue 36: `prune
/// --keep-runs 1` deleted the blobs of outputs the latest run reused).
fn keep_reuse_sources(
    state: &StateDir,
    report: &mut PruneReport,
) -> Result<BTreeSet<String>, StoreError> {
    let runs_dir = state.runs_dir();
    let mut marked = BTreeSet::new();
    let mut to_read: Vec<RunId> = (state.run_ids()?.into_iter())
        .filter(|id| !report.deleted.contains(id))
        .collect();
    let mut read: BTreeSet<RunId> = BTreeSet::new();
    while let Some(id) = to_read.pop() {
        if !read.insert(id.clone()) {
            continue;
        }
        let blobs = run_blobs(&runs_dir.join(id.as_str()))?;
        marked.extend(blobs.definitions);
        marked.extend(blobs.captures);
        for (source, _, _) in blobs.reused {
            let Some(position) = report.deleted.iter().position(|run| run.as_str() == source)
            else {
                continue;
            };
            let source = report.deleted.remove(position);
            report.kept_reused.push(source.clone());
            to_read.push(source);
        }
    }
    report.kept_reused.sort();
    Ok(marked)
}

/// What [`prune`] would delete now, without taking the lock or deleting anything (`apollo prune
/// --dry-run`): the same choice, with `freed_bytes` the size of the runs it would delete.
pub fn plan_prune(
    state: &StateDir,
    options: PruneOptions,
    now: DateTime<Utc>,
) -> Result<PruneReport, StoreError> {
    let summaries = state.list_runs()?;
    let mut report = select(&summaries, options, now);
    keep_reuse_sources(state, &mut report)?;
    let runs_dir = state.runs_dir();
    report.freed_bytes = report
        .deleted
        .iter()
        .map(|id| dir_size(&runs_dir.join(id.as_str())))
        .sum();
    Ok(report)
}

/// Deletes old runs of `state` per `options`, as of `now`.
///
/// While it works it holds the state directory's lock if it is free, so no apollo starts
/// meanwhile. If another apollo holds it, the run that apollo is writing (named in the lock
/// file; every unfinished run when it has not named one yet) counts as running and is kept.
/// A run is deleted by renaming its folder to `runs/.deleting-…` (fsynced) and then removing
/// it, so a crash half-way never leaves a half-deleted run that looks real.
pub fn prune(
    state: &StateDir,
    options: PruneOptions,
    now: DateTime<Utc>,
) -> Result<PruneReport, StoreError> {
    // A `runs/` or `blobs/` planted as a link (to another project's) is refused before
    // anything is removed: what is behind it is not ours to delete.
    state.check_fixed_folders()?;
    let lock = match state.lock(false) {
        Ok(lock) => Some(lock),
        Err(StoreError::Locked { .. }) => None,
        Err(error) => return Err(error),
    };
    remove_leftovers(state)?;
    // list_runs probes the lock: while we hold it ourselves, nothing counts as running.
    let summaries = state.list_runs()?;
    let mut report = select(&summaries, options, now);
    let runs_dir = state.runs_dir();
    // Mark before anything is removed: the blobs every run that stays references. A run whose
    // journal cannot be read (an I/O error, a damaged folder) stops the prune here, runs and
    // blobs untouched: which blobs it needs is unknown, and a run left out of the mark would
    // lose its definition snapshot and its captures to the sweep.
    let referenced = keep_reuse_sources(state, &mut report)?;
    let marked = lock.is_some().then_some(referenced);
    for id in &report.deleted {
        let path = runs_dir.join(id.as_str());
        report.freed_bytes += dir_size(&path);
        let doomed = runs_dir.join(format!(".deleting-{id}-{}", random_hex(4)));
        fs::rename(&path, &doomed).map_err(|source| StoreError::io("rename", &path, source))?;
        fsync_dir(&runs_dir)?;
        fs::remove_dir_all(&doomed).map_err(|source| StoreError::io("remove", &doomed, source))?;
    }
    if !report.deleted.is_empty() {
        fsync_dir(&runs_dir)?;
    }
    if let Some(marked) = marked {
        let store = state.existing_blob_store();
        report.blobs = Some(sweep_marked(&store, &marked)?);
    }
    Ok(report)
}
