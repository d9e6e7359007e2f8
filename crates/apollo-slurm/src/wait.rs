//! Waiting for a submitted (or reattached) job: its news from the poller, a cancellation of
//! the run, the unit's timeout counted from the job's start, and the queue limit
//! (`queue_timeout:`) counted while it is pending. Ending it through `scancel`.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use apollo_core::event::AttemptStatus;
use apollo_core::{AttemptContext, AttemptRequest, CancelLevel};
use apollo_exec::write_attempt_file;
use crossbeam_channel::Receiver;

use crate::client::ClientFailure;
use crate::executor::{CANCELLED, SlurmExecutor};
use crate::job_name::JobRef;
use crate::poller::{JobNews, Watch};
use crate::queue_limit::{QueueLimit, considered};
use crate::squeue::JobState;

impl SlurmExecutor {
    /// Wait for the watched job to end, through the poller: its news, a cancellation of the
    /// run, or the unit's timeout (counted from the job's start). `on_found` is called once,
    /// with the job's id, when the job is first seen alive (queued, running) or done.
    pub(crate) fn wait(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
        watch: Watch,
        mut on_found: impl FnMut(&str),
    ) -> WaitEnd {
        let name = watch.job.clone();
        let dir = watch.dir.clone();
        let mut job_id = watch.job_id.clone();
        let news: Receiver<JobNews> = self.poller.watch(watch);
        let cancel = context.cancel();
        let (cancel_rx, _registration) = cancel_channel(cancel);
        let mut state: Option<JobState> = None;
        let mut found = false;
        let mut found_now = |job_id: &Option<String>, found: &mut bool| {
            if !std::mem::replace(found, true) {
                on_found(job_id.as_deref().unwrap_or("unknown"));
            }
        };
        let mut deadline: Option<Instant> = None;
        let mut stopped: Option<AttemptStatus> = None;
        // After a SIGTERM: when to end the job for good; after that: when to stop waiting.
        let mut kill_at: Option<Instant> = None;
        let mut give_up_at: Option<Instant> = None;
        let kill_grace = request.unit.kill_grace;
        let mut queue_limit = crate::queue_limit::QueueLimit::new(request.unit.queue_timeout);
        loop {
            let queue_due = queue_limit.as_ref().and_then(QueueLimit::due);
            let next = [
                deadline.or(queue_due).filter(|_| stopped.is_none()),
                kill_at,
                give_up_at,
            ]
            .into_iter()
            .flatten()
            .min();
            let wait_for = next.map_or(Duration::from_secs(3600), |at| {
                at.saturating_duration_since(Instant::now())
            });
            crossbeam_channel::select! {
                recv(news) -> message => match message {
                    Ok(JobNews::Seen { job_id: id, state: seen }) => {
                        job_id.get_or_insert(id);
                        if !seen.is_ended() {
                            found_now(&job_id, &mut found);
                        }
                        if seen == JobState::Running {
                            queue_limit.as_mut().map(QueueLimit::started);
                        }
                        state = Some(seen);
                    }
                    Ok(JobNews::Started { job_id: id, at_ms }) => {
                        if job_id.is_none() && !id.is_empty() {
                            job_id = Some(id);
                        }
                        found_now(&job_id, &mut found);
                        state.get_or_insert(JobState::Running);
                        queue_limit.as_mut().map(QueueLimit::started);
                        deadline = request.unit.timeout.map(|timeout| deadline_from(at_ms, timeout));
                    }
                    Ok(JobNews::Finished) => {
                        found_now(&job_id, &mut found);
                        return WaitEnd::Finished { stopped };
                    }
                    Ok(JobNews::Vanished { last_state }) => {
                        return considered(queue_limit.as_ref(), WaitEnd::Vanished { stopped, job_id, last_state: last_state.or(state) }, &dir);
                    }
                    Err(_) => {
                        return considered(queue_limit.as_ref(), WaitEnd::Vanished { stopped, job_id, last_state: state }, &dir);
                    }
                },
                recv(cancel_rx) -> _ => {
                    let detach = !self.options.cancel_on_stop
                        || request.unit.resources.slurm.detach_on_stop;
                    if detach && stopped.is_none() && cancel.level() != CancelLevel::Immediate {
                        // The job runs on; a later resume reattaches to it.
                        self.poller.unwatch(&name);
                        return WaitEnd::Detached { job_id };
                    }
                    if stopped.is_none() {
                        stopped = Some(AttemptStatus::Interrupted);
                        let graceful = cancel.level() != CancelLevel::Immediate;
                        self.stop_job(&name, &dir, job_id.as_deref(), state.as_ref(), graceful, kill_grace, &mut kill_at, &mut give_up_at);
                    } else if cancel.level() == CancelLevel::Immediate && kill_at.is_some() {
                        kill_at = Some(Instant::now());
                    }
                },
                default(wait_for) => {
                    let now = Instant::now();
                    if stopped.is_none() && deadline.is_some_and(|at| now >= at) {
                        stopped = Some(AttemptStatus::TimedOut);
                        self.stop_job(&name, &dir, job_id.as_deref(), state.as_ref(), true, kill_grace, &mut kill_at, &mut give_up_at);
                    } else if let Some(limit) = queue_limit.as_mut().filter(|_| stopped.is_none() && queue_due.is_some_and(|at| now >= at)) {
                        if self.at_queue_limit(limit, &dir, job_id.as_deref()) {
                            give_up_at = Some(now + GIVE_UP_AFTER_KILL);
                        }
                    } else if kill_at.is_some_and(|at| now >= at) {
                        kill_at = None;
                        let _ = self.cancel_job(&name, job_id.as_deref(), None);
                        give_up_at = Some(now + GIVE_UP_AFTER_KILL);
                        self.poller.hurry();
                    } else if give_up_at.is_some_and(|at| now >= at) {
                        self.poller.unwatch(&name);
                        return considered(queue_limit.as_ref(), WaitEnd::Vanished { stopped, job_id, last_state: state }, &dir);
                    }
                },
            }
        }
    }

    /// Stop the job: SIGTERM to its processes and `kill_at` after the grace when it runs and
    /// the stop is graceful; else end it at once.
    #[allow(clippy::too_many_arguments, reason = "one private helper of `wait`")]
    fn stop_job(
        &self,
        name: &JobRef,
        dir: &Path,
        job_id: Option<&str>,
        state: Option<&JobState>,
        graceful: bool,
        kill_grace: Duration,
        kill_at: &mut Option<Instant>,
        give_up_at: &mut Option<Instant>,
    ) {
        let _ = write_attempt_file(&dir.join(CANCELLED), b"");
        let running =
            matches!(state, Some(JobState::Running)) || dir.join(crate::script::STARTED).exists();
        if graceful && running && !kill_grace.is_zero() {
            let _ = self.cancel_job(name, job_id, Some("TERM"));
            *kill_at = Some(Instant::now() + kill_grace);
        } else {
            let _ = self.cancel_job(name, job_id, None);
            *give_up_at = Some(Instant::now() + GIVE_UP_AFTER_KILL);
        }
        self.poller.hurry();
    }

    fn cancel_job(
        &self,
        job: &JobRef,
        job_id: Option<&str>,
        signal: Option<&str>,
    ) -> Result<(), ClientFailure> {
        match (job_id, job.task) {
            (Some(id), _) => self.client.cancel(id, signal),
            // Found by name only so far.
            (None, None) => self.client.cancel_by_name(&job.name, signal),
            // The name is the whole array's: the task's id from the queue, if it is there.
            (None, Some(_)) => {
                let entries = self.client.queue()?;
                match entries.iter().find(|entry| job.matches(entry)) {
                    Some(entry) => self.client.cancel(&entry.job_id, signal),
                    None => Ok(()),
                }
            }
        }
    }
}

/// A channel that receives when the run is cancelled, and the registration keeping it so.
fn cancel_channel(
    cancel: &apollo_core::CancelToken,
) -> (Receiver<()>, apollo_core::cancel::CancelRegistration) {
    let (cancel_tx, cancel_rx) = crossbeam_channel::bounded::<()>(1);
    let registration = cancel.on_cancel(move || {
        let _ = cancel_tx.try_send(());
    });
    (cancel_rx, registration)
}

/// How long to wait, after ending a job for good, for Slurm to report it gone.
const GIVE_UP_AFTER_KILL: Duration = Duration::from_secs(120);

pub(crate) enum WaitEnd {
    /// apollo was stopped and left the job running (`on_stop: detach`).
    Detached { job_id: Option<String> },
    /// The wrapper's result is there.
    Finished { stopped: Option<AttemptStatus> },
    /// The job is gone without a result (or apollo stopped waiting for it).
    Vanished {
        stopped: Option<AttemptStatus>,
        job_id: Option<String>,
        last_state: Option<JobState>,
    },
    /// The job was cancelled while pending, at the unit's `queue_timeout`, and never started.
    QueueLimit(crate::queue_limit::PendingCancelled),
}

/// The moment `timeout` after `at_ms` (epoch ms, from the compute node's clock).
fn deadline_from(at_ms: u64, timeout: Duration) -> Instant {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        });
    let end_ms = at_ms.saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
    Instant::now() + Duration::from_millis(end_ms.saturating_sub(now_ms))
}
