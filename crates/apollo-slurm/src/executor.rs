//! [`SlurmExecutor`]: each attempt one `sbatch` of a wrapper script, waited for through the
//! shared poller, cancelled through `scancel`, and reattached to after apollo died.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use apollo_core::event::{AttemptStatus, ExitStatus};
use apollo_core::{
    AttemptContext, AttemptOutcome, AttemptRequest, CancelLevel, Executor, NeedsHuman,
};
use apollo_exec::{create_attempt_dir, write_attempt_file};
use crossbeam_channel::Receiver;

use crate::args::submit_error;
use crate::client::{ClientCalls, ClientConfig, ClientFailure, SlurmClient};
use crate::job_name::JobRef;
use crate::options::SlurmOptions;
use crate::poller::{JobNews, PollTiming, Poller, Watch};
use crate::result::outcome_from_files;
use crate::script::{JOB_ID, SCRIPT, WrapperSpec, wrapper_script};
use crate::squeue::JobState;
use crate::submit::Submission;

/// The executor name recorded in `unit_submitted`.
pub const EXECUTOR_NAME: &str = "slurm";
/// Written in an attempt folder when apollo cancelled its job (timeout, stop): a later
/// resume never reattaches to it.
pub(crate) const CANCELLED: &str = "cancelled";
/// Written in an attempt folder that reattached to an earlier attempt's job: which one.
pub(crate) const REATTACHED: &str = "reattached";

/// Runs attempts as Slurm jobs. One per apollo process: it owns the poller thread shared by
/// all the attempts it waits for.
#[derive(Debug)]
pub struct SlurmExecutor {
    pub(crate) options: SlurmOptions,
    pub(crate) client: Arc<SlurmClient>,
    poller: Poller,
    /// The cluster's `MessageTimeout`, read once when a submission is first in doubt.
    pub(crate) message_timeout: OnceLock<Duration>,
    /// The cluster's `MaxArraySize`, read once when a first job array is submitted.
    pub(crate) max_array_size: OnceLock<usize>,
    /// The attempts being gathered into job arrays.
    pub(crate) gatherer: crate::array::Gatherer,
    /// The values of the secrets units receive (see [`SlurmExecutor::with_secrets`]).
    secrets: apollo_exec::SecretValues,
}

impl SlurmExecutor {
    /// An executor using `options`. Nothing runs until the first attempt.
    pub fn new(options: SlurmOptions) -> Self {
        let client = Arc::new(SlurmClient::new(ClientConfig {
            sbatch: options.sbatch.clone(),
            squeue: options.squeue.clone(),
            scancel: options.scancel.clone(),
            scontrol: options.scontrol.clone(),
            timeout: options.client_timeout,
            max_submits: options.max_submits_in_flight,
            hidden_env: options.hidden_env.clone(),
        }));
        let timing = PollTiming {
            files_min: options.files_interval.0,
            files_max: options.files_interval.1,
            queue_min: options.queue_interval.0,
            queue_max: options.queue_interval.1,
            lost_after: options.lost_after_polls,
        };
        Self {
            poller: Poller::new(Arc::clone(&client), timing),
            client,
            options,
            message_timeout: OnceLock::new(),
            max_array_size: OnceLock::new(),
            gatherer: crate::array::Gatherer::default(),
            secrets: apollo_exec::SecretValues::new(),
        }
    }

    /// The same executor, giving each unit the values of the secrets it receives
    /// (`unit.secrets`): through a `0600` file in the attempt folder that the job's wrapper
    /// reads and deletes before the unit starts, never the job script; the values are masked
    /// in the attempt's logs when the attempt is recorded. An attempt of a unit whose secret
    /// is missing here fails without a job.
    pub fn with_secrets(mut self, values: apollo_exec::SecretValues) -> Self {
        self.secrets = values;
        self
    }

    /// The job of `dir` is over: its secrets file gone, the values masked in its logs.
    pub(crate) fn settle(&self, unit: &apollo_core::Unit, dir: &Path) {
        crate::secrets::settle(&self.secrets, unit, dir);
    }

    /// How many `sbatch`, `squeue` and `scancel` calls this executor made so far.
    pub fn client_calls(&self) -> ClientCalls {
        self.client.calls()
    }

    /// Submit a fresh job for the attempt and wait for it.
    fn submit_and_wait(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
    ) -> AttemptOutcome {
        let dir = request.log_dir;
        // `apollo mark --rerun` (or `--failed`) while an earlier attempt's job still runs must
        // not put a second job beside it.
        if let Some(reason) = self.earlier_job_alive(request, context) {
            let _ = write_attempt_file(&dir.join("stderr"), format!("{reason}\n").as_bytes());
            let mut outcome = failed(reason.clone());
            outcome.needs_human = Some(NeedsHuman::refused(reason));
            return outcome;
        }
        let script = wrapper_script(&WrapperSpec {
            run_id: request.run_id,
            unit: request.unit,
            attempt: request.attempt,
            dir,
        });
        // Renamed into place: a link planted as `slurm.sh` (to a user's `~/.profile`) is
        // replaced, never written through.
        if let Err(error) = write_attempt_file(&dir.join(SCRIPT), script.as_bytes()) {
            return failed(format!(
                "cannot write the Slurm wrapper script {}: {error}",
                dir.join(SCRIPT).display()
            ));
        }
        if let Err(message) = crate::secrets::write_secrets(&self.secrets, request.unit, dir) {
            return failed(message);
        }
        let submission = match self.gather(request, context) {
            Some(submission) => submission,
            None => self.submit(request, context, dir, |error| {
                submit_error(request.unit, error)
            }),
        };
        let (job_id, job) = match submission {
            Submission::Queued {
                job_id,
                job,
                adopted,
            } => {
                if adopted {
                    let _ = write_attempt_file(
                        &dir.join("stderr"),
                        format!(
                            "apollo: sbatch's answer was lost; job {job_id} was found under the \
                             submission's token and adopted\n"
                        )
                        .as_bytes(),
                    );
                }
                (job_id, job)
            }
            Submission::Cancelled => {
                self.settle(request.unit, dir);
                return AttemptOutcome::nothing_ran(AttemptStatus::Interrupted);
            }
            Submission::Failed(message) => {
                self.settle(request.unit, dir);
                // Where `apollo logs` looks, so the refusal is beside the attempt's output.
                let _ = write_attempt_file(&dir.join("stderr"), format!("{message}\n").as_bytes());
                let mut outcome = failed(message);
                outcome.stderr_bytes = std::fs::metadata(dir.join("stderr")).map_or(0, |m| m.len());
                return outcome;
            }
            Submission::InDoubt(reason) => {
                let _ = write_attempt_file(&dir.join("stderr"), format!("{reason}\n").as_bytes());
                let mut outcome = failed(reason.clone());
                outcome.needs_human = Some(NeedsHuman::in_doubt(reason));
                return outcome;
            }
        };
        let _ = write_attempt_file(&dir.join(JOB_ID), format!("{job_id}\n").as_bytes());
        context.report(self.submitted_event(request.unit, &job_id));
        let watch = Watch {
            job,
            dir: dir.to_owned(),
            job_id: Some(job_id),
        };
        let end = self.wait(request, context, watch, |_| {});
        if !matches!(end, WaitEnd::Detached { .. }) {
            self.settle(request.unit, dir);
        }
        self.outcome(dir, end)
    }

    pub(crate) fn outcome(&self, dir: &Path, end: WaitEnd) -> AttemptOutcome {
        match end {
            WaitEnd::Detached { job_id } => {
                let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Interrupted);
                outcome.error = Some(format!(
                    "left running on Slurm (on_stop: detach) as job {}: the next resume \
                     reattaches to it",
                    job_id.as_deref().unwrap_or("(id not known yet)")
                ));
                outcome
            }
            WaitEnd::Finished { stopped } => outcome_from_files(dir, stopped, ""),
            WaitEnd::Vanished {
                stopped,
                job_id,
                last_state,
            } => {
                let job = job_id.map_or_else(
                    || "the Slurm job".to_owned(),
                    |id| format!("Slurm job {id}"),
                );
                let started = dir.join(crate::script::STARTED).exists();
                if stopped.is_none() && started {
                    let how = match &last_state {
                        Some(JobState::Ended(state)) => format!("ended {state}"),
                        _ => "is unknown to Slurm".to_owned(),
                    };
                    return cut_off(
                        dir,
                        &format!("{job} {how} without the wrapper's result after it started"),
                    );
                }
                let message = match (stopped, last_state) {
                    (Some(AttemptStatus::TimedOut), _) => {
                        format!("{job} was cancelled at the unit's timeout")
                    }
                    (Some(_), _) => format!("{job} was cancelled: apollo was stopped"),
                    (None, Some(JobState::Ended(state))) => format!(
                        "{job} ended {state} before its wrapper started (cancelled outside \
                         apollo, or its node failed at launch?): nothing of it ran"
                    ),
                    (None, Some(JobState::Pending)) => {
                        format!("{job} left the queue before it ran (cancelled outside apollo?)")
                    }
                    (None, _) => {
                        format!("{job} is unknown to Slurm and left no result (it did not start)")
                    }
                };
                outcome_from_files(dir, stopped, &message)
            }
        }
    }

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
        let (cancel_tx, cancel_rx) = crossbeam_channel::bounded::<()>(1);
        let cancel = context.cancel();
        let _registration = cancel.on_cancel(move || {
            let _ = cancel_tx.try_send(());
        });
        let mut state: Option<JobState> = None;
        let mut found = false;
        let mut found_now = |job_id: &Option<String>, found: &mut bool| {
            if !*found {
                *found = true;
                on_found(job_id.as_deref().unwrap_or("unknown"));
            }
        };
        let mut deadline: Option<Instant> = None;
        let mut stopped: Option<AttemptStatus> = None;
        // After a SIGTERM: when to end the job for good; after that: when to stop waiting.
        let mut kill_at: Option<Instant> = None;
        let mut give_up_at: Option<Instant> = None;
        let kill_grace = request.unit.kill_grace;
        loop {
            let next = [deadline.filter(|_| stopped.is_none()), kill_at, give_up_at]
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
                        state = Some(seen);
                    }
                    Ok(JobNews::Started { job_id: id, at_ms }) => {
                        if job_id.is_none() && !id.is_empty() {
                            job_id = Some(id);
                        }
                        found_now(&job_id, &mut found);
                        state.get_or_insert(JobState::Running);
                        deadline = request.unit.timeout.map(|timeout| deadline_from(at_ms, timeout));
                    }
                    Ok(JobNews::Finished) => {
                        found_now(&job_id, &mut found);
                        return WaitEnd::Finished { stopped };
                    }
                    Ok(JobNews::Vanished { last_state }) => {
                        return WaitEnd::Vanished { stopped, job_id, last_state: last_state.or(state) };
                    }
                    Err(_) => {
                        return WaitEnd::Vanished { stopped, job_id, last_state: state };
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
                    } else if kill_at.is_some_and(|at| now >= at) {
                        kill_at = None;
                        let _ = self.cancel_job(&name, job_id.as_deref(), None);
                        give_up_at = Some(now + GIVE_UP_AFTER_KILL);
                        self.poller.hurry();
                    } else if give_up_at.is_some_and(|at| now >= at) {
                        self.poller.unwatch(&name);
                        return WaitEnd::Vanished { stopped, job_id, last_state: state };
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

/// The attempt named in a `reattached` file (`attempt N job ID`).
pub(crate) fn parse_reattached(text: &str) -> Option<u32> {
    text.split_whitespace().nth(1)?.parse().ok()
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
}

impl Executor for SlurmExecutor {
    fn run_attempt(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
    ) -> AttemptOutcome {
        let started = Instant::now();
        if context.cancel().is_cancelled() {
            return AttemptOutcome::nothing_ran(AttemptStatus::Interrupted);
        }
        // The unit's and the attempt's folders only, each a real folder (as the local
        // executor makes them): a link there would send every file below elsewhere.
        if let Err(error) = create_attempt_dir(request.log_dir) {
            return failed(format!(
                "cannot create the attempt folder {}: {error}",
                request.log_dir.display()
            ));
        }
        // The wrapper runs on another machine: every path it is given must be absolute.
        let absolute_dir;
        let absolute_request;
        let request = if request.log_dir.is_absolute() {
            request
        } else {
            absolute_dir =
                std::path::absolute(request.log_dir).unwrap_or_else(|_| request.log_dir.to_owned());
            absolute_request =
                AttemptRequest::new(request.run_id, request.unit, request.attempt, &absolute_dir)
                    .with_in_flight(request.in_flight);
            &absolute_request
        };
        let mut outcome = match request
            .in_flight
            .and_then(|earlier| self.reattach(request, context, earlier))
        {
            Some(outcome) => outcome,
            None => self.submit_and_wait(request, context),
        };
        if outcome.wall_time.is_zero() {
            outcome.wall_time = started.elapsed();
        }
        outcome
    }
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

/// The attempt's `stdout`/`stderr` are hard links to the earlier attempt's files (which the
/// job wrote), so `apollo logs` shows the output under either attempt (it reads regular
/// files only, never a symbolic link).
pub(crate) fn link_logs(dir: &Path, earlier_dir: &Path) {
    for file in ["stdout", "stderr"] {
        let _ = std::fs::hard_link(earlier_dir.join(file), dir.join(file));
    }
}

/// "Slurm job 63", or "the Slurm job" when its id is not known.
pub(crate) fn job_words(job_id: Option<String>) -> String {
    job_id.map_or_else(
        || "the Slurm job".to_owned(),
        |id| format!("Slurm job {id}"),
    )
}

/// The outcome of a job that started and ended without the wrapper's result: cut off, its
/// work maybe half done. Recorded `failed` with signal 9 (the wrapper was killed, or its node
/// lost, before it could write its result): an `idempotent: false` unit then stops the run
/// for a human's verdict (`apollo_core::event::cut_off_by_signal`).
pub(crate) fn cut_off(dir: &Path, what: &str) -> AttemptOutcome {
    let message = format!(
        "{what}: cut off (killed, out of memory, or its node failed) — its work may be half done"
    );
    let mut outcome = outcome_from_files(dir, None, &message);
    outcome.status = AttemptStatus::Failed;
    outcome.exit = Some(ExitStatus::Signal(9));
    outcome
        .failed_phase
        .get_or_insert(apollo_core::Phase::Execute);
    outcome.error = Some(message);
    outcome
}

fn failed(error: String) -> AttemptOutcome {
    let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Failed);
    outcome.error = Some(error);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_apollo_writes_in_an_attempt_folder_never_go_through_a_planted_link() {
        // `units/<unit>/<next attempt>/slurm.sh -> ~/.profile`, planted before the attempt;
        // no cluster needed: sbatch is missing, so the attempt writes its script, then its
        // refusal to `stderr`, and ends.
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("profile");
        std::fs::write(&victim, "keep me\n").unwrap();
        let log_dir = root.path().join("units/align/1");
        std::fs::create_dir_all(&log_dir).unwrap();
        for name in [SCRIPT, "stderr"] {
            std::os::unix::fs::symlink(&victim, log_dir.join(name)).unwrap();
        }
        let missing = root.path().join("no-such-sbatch");
        let executor =
            SlurmExecutor::new(SlurmOptions::default().programs(&missing, &missing, &missing));
        let unit = crate::test_support::unit(apollo_core::Command::Shell("true".into()));
        let cancel = apollo_core::CancelToken::new();
        let outcome = executor.run_attempt(
            &AttemptRequest::new("r", &unit, 1, &log_dir),
            &AttemptContext::new(&cancel),
        );
        assert_eq!(outcome.status, AttemptStatus::Failed);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
        assert!(
            std::fs::symlink_metadata(log_dir.join(SCRIPT))
                .unwrap()
                .is_file(),
            "the script replaced the link"
        );
    }
}
