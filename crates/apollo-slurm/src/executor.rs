//! [`SlurmExecutor`]: each attempt one `sbatch` of a wrapper script, waited for through the
//! shared poller, cancelled through `scancel`, and reattached to after apollo died.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use apollo_core::event::{AttemptStatus, ExitStatus};
use apollo_core::{AttemptContext, AttemptOutcome, AttemptRequest, Executor, NeedsHuman};
use apollo_exec::{create_attempt_dir, write_attempt_file};

use crate::args::submit_error;
use crate::client::{ClientCalls, ClientConfig, SlurmClient};
use crate::options::SlurmOptions;
use crate::poller::{PollTiming, Poller, Watch};
use crate::result::outcome_from_files;
use crate::script::{JOB_ID, SCRIPT, WrapperSpec, wrapper_script};
use crate::squeue::JobState;
use crate::submit::Submission;
pub(crate) use crate::wait::WaitEnd;

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
    pub(crate) poller: Poller,
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
        let detached = matches!(end, WaitEnd::Detached { .. });
        let mut outcome = self.outcome(dir, end);
        if !detached {
            cap_logs(request.unit, dir, &[], &mut outcome);
        }
        outcome
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
            WaitEnd::QueueLimit(cancelled) => crate::queue_limit::outcome(dir, &cancelled),
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
}

/// The attempt named in a `reattached` file (`attempt N job ID`).
pub(crate) fn parse_reattached(text: &str) -> Option<u32> {
    text.split_whitespace().nth(1)?.parse().ok()
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
            absolute_request = request.with_log_dir(&absolute_dir);
            &absolute_request
        };
        let mut outcome = match request
            .in_flight
            .and_then(|earlier| self.reattach(request, context, earlier))
        {
            Some(outcome) => outcome,
            None => {
                // No job to take over after all: this attempt submits its own, and its folder
                // must stop pointing at the earlier attempt before its script exists (a later
                // attempt follows this one's job).
                let _ = std::fs::remove_file(request.log_dir.join(REATTACHED));
                self.submit_and_wait(request, context)
            }
        };
        if outcome.wall_time.is_zero() {
            outcome.wall_time = started.elapsed();
        }
        outcome
    }
}

/// The attempt's `stdout`/`stderr` are hard links to the earlier attempt's files (which the
/// job wrote), so `apollo logs` shows the output under either attempt (it reads regular
/// files only, never a symbolic link).
pub(crate) fn link_logs(dir: &Path, earlier_dir: &Path) {
    for file in ["stdout", "stderr"] {
        let _ = std::fs::hard_link(earlier_dir.join(file), dir.join(file));
    }
}

/// The unit's `log_limit` applied to the logs of a job that is over, in `dir` (noted there
/// and in `also`): the job wrote them on the shared filesystem without apollo in the way, so
/// they are cut when apollo collects the job, not while it runs. The byte counts follow; the
/// stdout hash stays the one of all the job printed.
///
/// Once: a job collected again (apollo died after cutting its logs and before recording its
/// end, and the resume reattached) keeps the cut it has, noted in `also` too; cutting it again
/// would replace the marker's count of what was cut with the marker's own length.
pub(crate) fn cap_logs(
    unit: &apollo_core::Unit,
    dir: &Path,
    also: &[&Path],
    outcome: &mut AttemptOutcome,
) {
    let Some(limit) = unit.log_limit else {
        return;
    };
    for stream in ["stdout", "stderr"] {
        let path = dir.join(stream);
        let (cut, capped_at) = match apollo_exec::log_cap::read_capped(dir, stream) {
            Some(noted) => noted,
            None => match apollo_exec::log_cap::cut_in_place(&path, limit) {
                Ok(0) | Err(_) => continue,
                Ok(cut) => {
                    let _ = apollo_exec::log_cap::note_capped(dir, stream, cut, limit);
                    (cut, limit)
                }
            },
        };
        for folder in also {
            let _ = apollo_exec::log_cap::note_capped(folder, stream, cut, capped_at);
        }
        let len = std::fs::metadata(&path).map_or(0, |meta| meta.len());
        match stream {
            "stdout" => outcome.stdout_bytes = len,
            _ => outcome.stderr_bytes = len,
        }
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
