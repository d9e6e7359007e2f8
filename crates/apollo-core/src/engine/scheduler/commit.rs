//! The commit: the batch of records asked to be appended as one durable unit (group
//! commit), then — once the driver reports it durable — what it recorded reported and its
//! attempts handed out.

use std::time::Duration;

#[cfg(test)]
use super::BREAK_WRITE_AHEAD;
use super::command::{Appending, Command};
use super::{Scheduler, checked};
use crate::engine::admission::{self, Append, Committing};
use crate::engine::batch::ManifestStore;
use crate::engine::observer::{Notice, Observer};
use crate::engine::workers::{Done, failed_to_start};
use crate::event::Event;

impl Scheduler<'_> {
    /// Ask for the batch to be appended as one unit ([`Command::Append`]); its attempts go
    /// out once the driver reports it durable ([`appended`](Self::appended)). The engine
    /// thread does the fsync itself: workers go on with the attempts committed ahead
    /// meanwhile, outcomes wait in their channel, and all of them go out with the next batch
    /// (group commit). A separate journal thread did the same with two more thread hand-offs
    /// per batch, which on a small machine that also runs the units cost more than they
    /// overlapped.
    pub(super) fn commit<M: ManifestStore + ?Sized>(
        &mut self,
        manifests: &mut M,
        observer: &mut dyn Observer,
    ) {
        if self.batch.is_empty() {
            return;
        }
        // Input lists too large for a record go to manifests, durable before the records
        // naming them; an attempt whose list cannot be stored fails without a process.
        for unrecordable in self.batch.store_input_manifests(manifests, self.pipeline) {
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
        let now = self.now;
        let full_of_reuses = self.batch.only_reuses() && self.pacer.reuses_full(self.batch.len());
        let unsynced_overdue = (self.batch.unsynced_since())
            .is_some_and(|since| self.pacer.reuses_overdue(since, now));
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
            job.committed_at = now;
        }
        #[cfg(test)]
        if BREAK_WRITE_AHEAD.get() {
            committing
                .events
                .retain(|event| !matches!(event, Event::UnitStarted(_)));
        }
        if mode == Append::Unsynced {
            debug_assert!(
                committing.jobs.is_empty(),
                "a batch of reuses starts nothing"
            );
        }
        let events = std::mem::take(&mut committing.events);
        self.emit_append(events, mode, Appending::Batch(committing, mode));
    }

    /// The driver appended what the last [`Command::Append`] asked (`events`, given back so
    /// their vector is used again), in `took`: it is durable, unless it was asked unsynced.
    /// Tell what it recorded and hand its attempts out ([`Command::Dispatch`]).
    pub(in crate::engine) fn appended(
        &mut self,
        events: Vec<Event>,
        took: Duration,
        observer: &mut dyn Observer,
    ) {
        let Some(appending) = self.appending.take() else {
            debug_assert!(false, "an append reported that was not asked for");
            return;
        };
        match appending {
            Appending::Batch(mut committing, mode) => {
                committing.events = events;
                // A full batch of reuses while the run goes on is not synced (see
                // `Pacer::reuses_full`); its notices wait for the next durable append.
                if mode == Append::Unsynced {
                    self.batch.hold_unsynced(self.now, &mut committing.notices);
                    self.batch.recycle(committing);
                    return;
                }
                self.pacer.commit_took(took);
                self.deliver_unsynced(observer);
                // Outcomes are reported only once durable, so "ok" on the screen means the
                // journal holds it.
                for notice in committing.notices.drain(..) {
                    notice.deliver(self.pipeline, observer);
                }
                // Attempts may spawn only once their `unit_started` is durable.
                for job in committing.jobs.drain(..) {
                    observer.notice(&Notice::Started {
                        unit: &self.pipeline.units[job.unit_idx].name,
                        attempt: job.attempt,
                    });
                    checked(self.ledger.handed_to_worker(job.unit_idx));
                    self.out.push(Command::Dispatch(job));
                }
                self.batch.recycle(committing);
            }
            Appending::Sync | Appending::Last => self.deliver_unsynced(observer),
            Appending::Late(record) => {
                observer.notice(&Notice::Late { record: &record });
            }
        }
    }

    /// Tell the notices of records appended unsynced: a durable append made them durable.
    fn deliver_unsynced(&mut self, observer: &mut dyn Observer) {
        for notice in self.batch.take_unsynced().unwrap_or_default() {
            notice.deliver(self.pipeline, observer);
        }
    }
}
