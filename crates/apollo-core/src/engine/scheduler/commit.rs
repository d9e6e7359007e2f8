//! The commit: the batch of records appended as one durable unit (group commit), then what
//! it recorded reported and its attempts handed to the workers.

use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

#[cfg(test)]
use super::BREAK_WRITE_AHEAD;
use super::{Scheduler, checked};
use crate::engine::admission::{self, Append, Committing};
use crate::engine::observer::{Notice, Observer};
use crate::engine::workers::{Done, Job, failed_to_start};
#[cfg(test)]
use crate::event::Event;
use crate::journal::{Journal, JournalError};

impl Scheduler<'_> {
    /// Append the batch as one durable unit, then report what it recorded and hand its
    /// attempts to the workers. The engine thread does the fsync itself: workers go on with
    /// the attempts committed ahead meanwhile, outcomes wait in their channel, and all of them
    /// go out with the next batch (group commit). A separate journal thread did the same with
    /// two more thread hand-offs per batch, which on a small machine that also runs the units
    /// cost more than they overlapped.
    pub(super) fn commit(
        &mut self,
        journal: &mut dyn Journal,
        observer: &mut dyn Observer,
        job_tx: &Sender<Job>,
    ) -> Result<(), JournalError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        // Input lists too large for a record go to manifests, durable before the records
        // naming them; an attempt whose list cannot be stored fails without a process.
        for unrecordable in self.batch.store_input_manifests(journal, self.pipeline) {
            observer.notice(&Notice::Started {
                unit: &self.pipeline.units[unrecordable.unit_idx].name,
                attempt: unrecordable.attempt,
            });
            self.finish_attempt(Done {
                worker: None,
                unit_idx: unrecordable.unit_idx,
                attempt: unrecordable.attempt,
                queued: Duration::ZERO,
                log_dir: std::path::PathBuf::new(),
                outcome: failed_to_start(unrecordable.error),
                outputs: None,
                output_files: Vec::new(),
                awaits_ack: false,
            });
        }
        let started = Instant::now();
        let full_of_reuses = self.batch.only_reuses() && self.pacer.reuses_full(self.batch.len());
        let unsynced_overdue = (self.batch.unsynced_since())
            .is_some_and(|since| self.pacer.reuses_overdue(since, started));
        let mut committing = self.batch.take();
        // A unit that must not run twice, or whose job goes to Slurm, starts only once its
        // start and everything before it are synced, whatever the journal's durability mode
        // (DESIGN §18): in `batched` a plain append may return before the sync.
        let strict_attempt = committing.jobs.iter().any(|job| {
            let unit = &self.pipeline.units[job.unit_idx];
            !unit.idempotent || unit.executor == crate::model::ExecutorKind::Slurm
        });
        let mode = admission::append_mode(&Committing {
            full_of_reuses,
            stopped: self.stop_starting,
            unsynced_overdue,
            strict_attempt,
        });
        for job in &mut committing.jobs {
            job.committed_at = started;
        }
        #[cfg(test)]
        if BREAK_WRITE_AHEAD.get() {
            committing
                .events
                .retain(|event| !matches!(event, Event::UnitStarted(_)));
        }
        // A full batch of reuses while the run goes on is not synced (see
        // `Pacer::reuses_full`); its notices wait for the next durable append.
        if mode == Append::Unsynced {
            debug_assert!(
                committing.jobs.is_empty(),
                "a batch of reuses starts nothing"
            );
            journal.append_unsynced(&committing.events)?;
            self.batch.hold_unsynced(started, &mut committing.notices);
            self.batch.recycle(committing);
            return Ok(());
        }
        if mode == Append::Strict {
            journal.append_strict(&committing.events)?;
        } else {
            journal.append(&committing.events)?;
        }
        self.pacer.commit_took(started.elapsed());
        // Outcomes are reported only once durable, so "ok" on the screen means the journal
        // holds it.
        let unsynced = self.batch.take_unsynced().unwrap_or_default();
        for notice in unsynced.into_iter().chain(committing.notices.drain(..)) {
            notice.deliver(self.pipeline, observer);
        }
        // Attempts may spawn only once their `unit_started` is durable. Once one may, no
        // output hashed ahead is used (see `prefetch.rs`).
        if !committing.jobs.is_empty()
            && let Some(prefetch) = self.hashing.and_then(|hashing| hashing.context.prefetch)
        {
            prefetch.close();
        }
        for job in committing.jobs.drain(..) {
            observer.notice(&Notice::Started {
                unit: &self.pipeline.units[job.unit_idx].name,
                attempt: job.attempt,
            });
            checked(self.ledger.handed_to_worker(job.unit_idx));
            // Checked where it could be broken (every engine test with reuse and an attempt
            // passes here): nothing hashed ahead is trusted once an attempt may write.
            debug_assert!(
                (self.hashing.and_then(|hashing| hashing.context.prefetch))
                    .is_none_or(|prefetch| !prefetch.is_open()),
                "an attempt handed out while outputs hashed ahead may still be used"
            );
            // The workers outlive this loop (the scope joins them), so a send cannot fail.
            let _ = job_tx.send(job);
        }
        self.batch.recycle(committing);
        Ok(())
    }
}
