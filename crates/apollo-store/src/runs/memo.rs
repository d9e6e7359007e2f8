//! Listing runs for a long-lived reader that never writes into the state directory
//! (`apollo serve`): what it remembers between listings is, per finished run, where the run's
//! journal stood when it was summarized (a digest of the runs index's stamps) and its place in
//! the creation order — a few dozen bytes. The summaries are the caller's to keep, in whatever
//! compact form it needs; a listing hands over only the runs whose journal changed.

use std::collections::HashMap;

use super::{RunSummary, held_for, summarize};
use crate::error::StoreError;
use crate::run_id::RunId;
use crate::runs_index::{RunsIndex, Stamps};
use crate::segment::has_records;
use crate::segment::is_trimmed;
use crate::state_dir::StateDir;

/// What a long-lived reader remembers between listings of runs
/// ([`StateDir::list_runs_remembered`]): per finished run, a digest of its journal's stamps
/// and its sequence number. The runs index on disk is read on the first listing only.
#[derive(Debug, Default)]
pub struct RunsMemo {
    /// Whether a listing ran (the runs index on disk was read then).
    listed: bool,
    /// Bumped by each listing: an entry not seen by the last one is a run that is gone.
    generation: u32,
    runs: HashMap<RunId, Remembered>,
}

#[derive(Debug)]
struct Remembered {
    sequence: Option<u64>,
    /// The last segment's file name when the run was summarized.
    segment: Box<str>,
    /// [`Stamps::digest`] then.
    digest: u64,
    generation: u32,
}

impl RunsMemo {
    /// How many runs it remembers.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// Whether it remembers no run.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// One run of [`StateDir::list_runs_remembered`].
#[derive(Debug)]
pub enum Listed {
    /// A finished run whose journal did not change since a listing handed over its summary.
    Unchanged(RunId),
    /// A run's summary, read now (or from the runs index on disk, on the first listing).
    /// Its [`RunSummary::counts`] are known only when the runs index held them.
    Read(Box<RunSummary>),
}

impl StateDir {
    /// Every run, for a long-lived reader that never writes into the state directory, in no
    /// particular order: `visit` gets each run's sequence number with it, and (sequence, id)
    /// orders them as [`list_runs`](Self::list_runs) does. Nothing is gathered here, so a
    /// listing holds one summary at a time whatever the number of runs. A finished run whose
    /// journal is unchanged since an earlier listing with the same `memo` is
    /// [`Listed::Unchanged`] (two `lstat`s, nothing read); any other is summarized
    /// ([`Listed::Read`]). `visit` is called once per run; what the memo keeps per run is a
    /// few dozen bytes, so the reader's memory stays small in the number of runs.
    pub fn list_runs_remembered(
        &self,
        memo: &mut RunsMemo,
        visit: &mut dyn FnMut(Option<u64>, Listed),
    ) -> Result<(), StoreError> {
        let holder = self.lock_holder()?;
        let acknowledged = self.acknowledged_runs()?;
        // What the CLI's `apollo runs` kept on disk serves the first listing only.
        let disk = (!memo.listed).then(|| RunsIndex::load(self.path()));
        memo.listed = true;
        memo.generation = memo.generation.wrapping_add(1);
        let generation = memo.generation;
        let runs_dir = self.runs_dir();
        let entries = std::fs::read_dir(&runs_dir)
            .map_err(|source| StoreError::io("list", &runs_dir, source))?;
        for entry in entries {
            let entry = entry.map_err(|source| StoreError::io("list", &runs_dir, source))?;
            let Some(id) = (entry.file_name().to_str()).and_then(|name| name.parse::<RunId>().ok())
            else {
                continue;
            };
            let run_dir = entry.path();
            // A symbolic link where a run folder belongs is listed (reading it refuses it)
            // but has no place in the order, and is never remembered.
            let real_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
            let held = held_for(holder.as_ref(), &id);
            if real_dir
                && !held
                && let Some(known) = memo.runs.get_mut(&id)
                && Stamps::digest_now(&run_dir, &known.segment) == Some(known.digest)
            {
                known.generation = generation;
                visit(known.sequence, Listed::Unchanged(id));
                continue;
            }
            if real_dir
                && !held
                && let Some((sequence, summary)) =
                    (disk.as_ref()).and_then(|index| index.get(&id, &run_dir))
            {
                learn(
                    memo,
                    &run_dir,
                    sequence,
                    &summary,
                    RunsIndex::stamps(&run_dir),
                );
                visit(sequence, Listed::Read(Box::new(summary)));
                continue;
            }
            // A run that recorded nothing is not a run, unless its `run_started` was
            // acknowledged (see `ordered_runs`).
            if !(run_dir.is_dir()
                && (has_records(&run_dir.join("journal")) || acknowledged.contains(&id)))
            {
                continue;
            }
            let sequence = if real_dir {
                self.run_sequence(&id)?
            } else {
                None
            };
            let before = RunsIndex::stamps(&run_dir);
            let summary = summarize(self, &id, holder.as_ref(), acknowledged.contains(&id));
            let after = RunsIndex::stamps(&run_dir);
            let stamps = before.filter(|before| Some(before) == after.as_ref());
            if real_dir {
                learn(memo, &run_dir, sequence, &summary, stamps);
            }
            visit(sequence, Listed::Read(Box::new(summary)));
        }
        memo.runs.retain(|_, known| known.generation == generation);
        Ok(())
    }
}

/// Remembers a run summarized under `stamps` (unchanged while it was read) if it is finished
/// and its last segment is trimmed (as the runs index learns, see `RunsIndex::learn`); else
/// forgets it, so the next listing reads it again.
fn learn(
    memo: &mut RunsMemo,
    run_dir: &std::path::Path,
    sequence: Option<u64>,
    summary: &RunSummary,
    stamps: Option<Stamps>,
) {
    let stamps = stamps.filter(|stamps| {
        summary.state.is_finished()
            && summary.problem.is_none()
            && is_trimmed(&run_dir.join("journal").join(stamps.segment()))
    });
    match stamps {
        Some(stamps) => {
            memo.runs.insert(
                summary.id.clone(),
                Remembered {
                    sequence,
                    segment: stamps.segment().into(),
                    digest: stamps.digest(),
                    generation: memo.generation,
                },
            );
        }
        None => {
            memo.runs.remove(&summary.id);
        }
    }
}
