//! The queue limit (`resources: {slurm: {queue_timeout: 2h}}`, issue 36): a job still pending
//! that long after apollo began waiting for it is cancelled with `scancel`, and the attempt
//! fails saying how long it waited, the job, Slurm's reason and what to do. A job that
//! started — Slurm lists it running, or the wrapper's `started` file is there — is never
//! cancelled by this rule. Nothing of a cancelled pending job ran, so the unit's `retries`
//! apply, for an `idempotent: false` unit too; a job that started after all while it was
//! being cancelled (its `started` file is there) is cut off, under the non-idempotent rule.

use std::path::Path;
use std::time::{Duration, Instant};

use apollo_core::AttemptOutcome;
use apollo_core::event::AttemptStatus;
use apollo_exec::write_attempt_file;

use crate::executor::{CANCELLED, SlurmExecutor};
use crate::script::STARTED;
use crate::squeue::JobState;
use crate::wait::WaitEnd;

/// How long to wait before asking Slurm again when `squeue` failed at the limit.
const ASK_AGAIN_AFTER: Duration = Duration::from_secs(30);

/// One attempt's queue limit, while apollo waits for its job.
#[derive(Debug)]
pub(crate) struct QueueLimit {
    limit: Duration,
    due: Option<Instant>,
    cancelled: Option<PendingCancelled>,
}

/// A job cancelled at the queue limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingCancelled {
    pub(crate) waited: Duration,
    pub(crate) job_id: String,
    /// Slurm's reason for the wait (`squeue`'s `%r`).
    pub(crate) reason: String,
}

/// What to do with a job at its queue limit, from what is known of it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AtLimit {
    /// Pending, never started: cancel it.
    Cancel,
    /// Started (or over): never cancelled by this rule.
    Leave,
    /// Slurm could not be asked: ask again later.
    AskAgain,
}

/// The rule: only a job Slurm lists as pending and whose wrapper never began is cancelled.
pub(crate) fn at_limit(started_file: bool, squeue: Option<Option<&JobState>>) -> AtLimit {
    match squeue {
        _ if started_file => AtLimit::Leave,
        None => AtLimit::AskAgain,
        Some(Some(JobState::Pending)) => AtLimit::Cancel,
        Some(_) => AtLimit::Leave,
    }
}

impl QueueLimit {
    /// The limit of a job apollo begins waiting for now (`None`: no limit).
    pub(crate) fn new(limit: Option<Duration>) -> Option<QueueLimit> {
        let limit = limit?;
        Some(QueueLimit {
            limit,
            due: Instant::now().checked_add(limit),
            cancelled: None,
        })
    }

    /// When the limit comes due, while it still may.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.due
    }

    /// The job started: the limit no longer applies.
    pub(crate) fn started(&mut self) {
        self.due = None;
    }

    /// How the wait ended, the limit considered: a job cancelled while pending that is gone
    /// without having started ended at the queue limit.
    pub(crate) fn end(&self, end: WaitEnd, dir: &Path) -> WaitEnd {
        match (&self.cancelled, end) {
            (Some(cancelled), WaitEnd::Vanished { stopped: None, .. })
                if !dir.join(STARTED).exists() =>
            {
                WaitEnd::QueueLimit(cancelled.clone())
            }
            (_, end) => end,
        }
    }
}

/// How the wait ended, with the queue limit if there is one (see [`QueueLimit::end`]).
pub(crate) fn considered(limit: Option<&QueueLimit>, end: WaitEnd, dir: &Path) -> WaitEnd {
    match limit {
        Some(limit) => limit.end(end, dir),
        None => end,
    }
}

impl SlurmExecutor {
    /// The queue limit came due: cancel the job if it is still pending and never started.
    /// Whether it was cancelled.
    pub(crate) fn at_queue_limit(
        &self,
        limit: &mut QueueLimit,
        dir: &Path,
        job_id: Option<&str>,
    ) -> bool {
        limit.due = None;
        // Without its id (reattached by name only) the job's own state cannot be asked.
        let Some(job_id) = job_id else {
            return false;
        };
        let started_file = dir.join(STARTED).exists();
        let answer = if started_file {
            None
        } else {
            self.client.state_and_reason(job_id).ok()
        };
        let squeue = answer
            .as_ref()
            .map(|found| found.as_ref().map(|(state, _)| state));
        match at_limit(started_file, squeue) {
            AtLimit::Leave => false,
            AtLimit::AskAgain => {
                limit.due = Instant::now().checked_add(ASK_AGAIN_AFTER);
                false
            }
            AtLimit::Cancel => {
                let reason = answer
                    .flatten()
                    .map(|(_, reason)| reason)
                    .filter(|reason| !reason.is_empty())
                    .unwrap_or_else(|| "not given".to_owned());
                // A later resume never reattaches to it.
                let _ = write_attempt_file(&dir.join(CANCELLED), b"");
                let _ = self.client.cancel(job_id, None);
                self.poller.hurry();
                limit.cancelled = Some(PendingCancelled {
                    waited: limit.limit,
                    job_id: job_id.to_owned(),
                    reason,
                });
                true
            }
        }
    }
}

/// The attempt whose job was cancelled at the queue limit: failed, nothing of it ran; the
/// message also goes to the attempt's `stderr`, where `apollo logs` and the failure tail look.
pub(crate) fn outcome(dir: &Path, cancelled: &PendingCancelled) -> AttemptOutcome {
    let waited = apollo_core::config::format_duration(cancelled.waited);
    let message = format!(
        "Slurm job {} waited {waited} in the queue without starting (queue_timeout: {waited}); \
         Slurm's reason: {}. apollo cancelled it (scancel): nothing of it ran, so the unit's \
         retries apply. To wait longer, raise `queue_timeout` in `resources: {{slurm: ...}}` \
         (or write `queue_timeout: none`); to start sooner, ask for less or another partition \
         (`sinfo`, `squeue --start`).",
        cancelled.job_id, cancelled.reason
    );
    let _ = write_attempt_file(
        &dir.join("stderr"),
        format!("apollo: {message}\n").as_bytes(),
    );
    let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Failed);
    outcome.stderr_bytes = std::fs::metadata(dir.join("stderr")).map_or(0, |m| m.len());
    outcome.error = Some(message);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pending_job_that_never_started_is_cancelled() {
        let pending = JobState::Pending;
        let running = JobState::Running;
        let ended = JobState::Ended("COMPLETED".into());
        assert_eq!(at_limit(false, Some(Some(&pending))), AtLimit::Cancel);
        // The wrapper began although Slurm still says pending (its poll lags): left alone.
        assert_eq!(at_limit(true, Some(Some(&pending))), AtLimit::Leave);
        assert_eq!(at_limit(true, None), AtLimit::Leave);
        assert_eq!(at_limit(false, Some(Some(&running))), AtLimit::Leave);
        assert_eq!(at_limit(false, Some(Some(&ended))), AtLimit::Leave);
        // Gone from the queue: the poller decides from its files.
        assert_eq!(at_limit(false, Some(None)), AtLimit::Leave);
        assert_eq!(at_limit(false, None), AtLimit::AskAgain);
    }
}
