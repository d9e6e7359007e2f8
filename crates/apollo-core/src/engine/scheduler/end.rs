//! The run's end: its last append, its report, and an end forced by a journal error.

use std::sync::atomic::Ordering;

use super::command::Appending;
use super::{Scheduler, checked};
use crate::engine::admission;
use crate::engine::api::{EngineError, RunReport};
use crate::event::{Event, RunStatus};

impl Scheduler<'_> {
    /// The run is over ([`finished`](Self::finished)): ask for its last append —
    /// `run_finished` (unless `--only` left units undone or the run stopped for a human), or
    /// an empty one that syncs what was appended unsynced. Returns `false` when nothing is to
    /// be appended.
    pub(in crate::engine) fn finish(&mut self) -> bool {
        debug_assert!(self.appending.is_none() && self.ended.is_none());
        let status = self.final_status().filter(|_| self.human_needed.is_none());
        self.ended = Some(status);
        let last = status.map(|status| Event::RunFinished(self.units.run_finished(status)));
        if self.batch.unsynced_since().is_none() && last.is_none() {
            return false;
        }
        self.emit_append(
            last.into_iter().collect(),
            admission::Append::Durable,
            Appending::Last,
        );
        true
    }

    /// The run's report, once its last append (if any) is durable.
    pub(in crate::engine) fn report(&mut self) -> Result<RunReport, EngineError> {
        if let Some(error) = self.human_needed.take() {
            return Err(error);
        }
        let status = self.ended.unwrap_or_else(|| self.final_status());
        Ok(RunReport {
            status,
            units: self.units.take_results(self.pipeline, self.prior),
        })
    }

    /// The journal failed: stop starting anything; the driver stops the running attempts and
    /// waits for them ([`ended_after_abort`](Self::ended_after_abort)).
    pub(in crate::engine) fn abort(&mut self) {
        self.appending = None;
        self.stop_starting = true;
        self.halt.store(true, Ordering::SeqCst);
    }

    /// After [`abort`](Self::abort): an attempt ended at a worker.
    pub(in crate::engine) fn ended_after_abort(&mut self, unit_idx: usize) {
        checked(self.ledger.ended_at_worker(unit_idx));
    }

    pub(super) fn final_status(&self) -> Option<RunStatus> {
        // Every unit done is a success, even if a signal arrived after the last one ended.
        if self.units.all_done() {
            return Some(RunStatus::Succeeded);
        }
        if self.cancel.is_cancelled() {
            return Some(RunStatus::Interrupted);
        }
        self.failed_any.then_some(RunStatus::Failed)
    }
}
