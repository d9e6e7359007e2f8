//! The batch being assembled for the next commit: the records to append in one durable
//! [`Journal::append`](crate::Journal::append), the attempts that may start once it is
//! durable, and the notices that may be shown once it is.

use super::observer::HeldNotice;
use super::workers::Job;
use crate::event::{Event, UnitFinished, UnitSkipped, UnitStarted, UnitSubmitted};
use crate::model::Pipeline;

/// The next batch. Only the scheduler fills and commits it.
#[derive(Default)]
pub(super) struct Batch {
    events: Vec<Event>,
    jobs: Vec<Job>,
    notices: Vec<HeldNotice>,
    /// The batch holds a record that must not wait for company: a failure, a skip, a
    /// submission to a remote scheduler, or the end
    /// of a non-idempotent unit's attempt (after a crash its unrecorded end would make apollo
    /// stop and ask a human). Routine records — starts and successes — may wait (see
    /// [`Pacer::may_hold_back`](super::pacer::Pacer::may_hold_back)).
    urgent: bool,
}

/// What a commit takes out of the batch.
pub(super) struct Committing {
    pub(super) events: Vec<Event>,
    pub(super) jobs: Vec<Job>,
    pub(super) notices: Vec<HeldNotice>,
}

impl Batch {
    pub(super) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Whether the batch must be committed at once.
    pub(super) fn is_urgent(&self) -> bool {
        self.urgent
    }

    /// An attempt's `unit_started`, and the attempt that starts once it is durable (`None`
    /// for one the engine fails itself without spawning).
    pub(super) fn push_start(&mut self, started: UnitStarted, job: Option<Job>) {
        self.events.push(Event::UnitStarted(started));
        self.jobs.extend(job);
    }

    /// An attempt's `unit_finished`, shown as `notice` once durable. `may_wait`: the unit is
    /// idempotent (an unrecorded end only makes a resume run it again).
    pub(super) fn push_finished(
        &mut self,
        record: UnitFinished,
        notice: HeldNotice,
        may_wait: bool,
    ) {
        self.urgent |= !may_wait || !record.status.satisfies_dependents();
        self.notices.push(notice);
        self.events.push(Event::UnitFinished(record));
    }

    /// A running attempt's `unit_submitted`, shown as `notice` once durable.
    pub(super) fn push_submitted(&mut self, submitted: UnitSubmitted, notice: HeldNotice) {
        self.urgent = true;
        self.events.push(Event::UnitSubmitted(submitted));
        self.notices.push(notice);
    }

    /// A `unit_skipped`, shown as `notice` once durable.
    pub(super) fn push_skipped(&mut self, skipped: UnitSkipped, notice: HeldNotice) {
        self.urgent = true;
        self.events.push(Event::UnitSkipped(skipped));
        self.notices.push(notice);
    }

    /// Take back the attempts of this batch, and their `unit_started` records: they are never
    /// written, so they leave no record of an attempt that never had a process.
    pub(super) fn take_back_starts(&mut self, pipeline: &Pipeline) -> Vec<Job> {
        let jobs = std::mem::take(&mut self.jobs);
        for job in &jobs {
            let unit = &pipeline.units[job.unit_idx].name;
            self.events.retain(|event| {
                !matches!(event, Event::UnitStarted(started)
                    if &started.unit == unit && started.attempt == job.attempt)
            });
        }
        jobs
    }

    /// Everything in the batch, leaving it empty.
    pub(super) fn take(&mut self) -> Committing {
        self.urgent = false;
        Committing {
            events: std::mem::take(&mut self.events),
            jobs: std::mem::take(&mut self.jobs),
            notices: std::mem::take(&mut self.notices),
        }
    }
}
