//! Submitting an attempt exactly once (DESIGN §18 "Exactly once on Slurm").
//!
//! Each submission carries a random token, in its job name and its `--comment`, written to
//! the attempt folder's `token` file before `sbatch` runs. When `sbatch` fails:
//!
//! * refused for good (a bad partition): the attempt fails, nothing was queued;
//! * the controller was not reached ("Unable to contact slurm controller (connect
//!   failure)") or said to try again: nothing was queued, so the same submission is tried
//!   again after a pause that doubles, for up to `submit_give_up_after`;
//! * the answer was lost ("Socket timed out on send/recv operation", `sbatch` timed out or
//!   was killed): the job may be queued. It is looked for under its token with `squeue`,
//!   backing off, for the lookup window (twice the cluster's `MessageTimeout`); a job found
//!   is **adopted** (watched as if `sbatch` had answered). A token still unknown after that
//!   stops an `idempotent: false` unit for a human ([`NeedsHuman::in_doubt`]: the attempt
//!   stays in flight), naming the token; an idempotent unit's lost job is cancelled by name
//!   (should it appear after all) and submitted again under a new token.
//!
//! Before any fresh submission, the earlier attempts of the unit in the run whose jobs may
//! still live (submitted, no result, not cancelled by apollo) are looked up: a job still
//! queued or running refuses the new one ([`NeedsHuman::refused`]), naming it and the
//! `scancel` that ends it — `apollo mark --rerun` never puts a second job beside the first.

use std::path::Path;
use std::time::{Duration, Instant};

use apollo_core::{AttemptContext, AttemptRequest};
use apollo_exec::write_attempt_file;

use crate::args::sbatch_args;
use crate::client::{ClientFailure, SubmitDoubt};
use crate::executor::{CANCELLED, SlurmExecutor};
use crate::job_name::{JobRef, job_name, job_name_with_token, new_token};
use crate::result::{read_small, read_started};
use crate::script::{JOB_ID, RESULT, SCRIPT};
use crate::squeue::{JobState, QueueEntry};

/// The attempt folder's file holding its submission's token.
pub(crate) const TOKEN: &str = "token";

/// The lookup window when the cluster's `MessageTimeout` cannot be read: twice Slurm's
/// default of 10 s.
const DEFAULT_MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);

/// How a submission ended.
pub(crate) enum Submission {
    /// Slurm queued it as `job_id` (`<array id>_<task>` for an array's task) as `job`;
    /// `adopted`: found under its token after `sbatch`'s answer was lost.
    Queued {
        job_id: String,
        job: JobRef,
        adopted: bool,
    },
    /// Nothing was queued: the attempt fails with this message.
    Failed(String),
    /// Whether a job was queued is unknown, and the unit is not idempotent.
    InDoubt(String),
    /// apollo was stopped meanwhile (a job that may have been queued was cancelled by name).
    Cancelled,
}

/// What a lookup of a job name found.
pub(crate) enum Lookup {
    Found(QueueEntry),
    /// Not listed by `squeue` at or after the end of the window (`answered`), or `squeue`
    /// never answered in three windows.
    NotFound {
        answered: bool,
    },
    Cancelled,
}

impl SlurmExecutor {
    /// Submit the attempt whose wrapper is in `dir`, exactly once (see the module's docs).
    /// `refusal` turns an `sbatch` failure into the attempt's error.
    pub(crate) fn submit(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
        dir: &Path,
        refusal: impl Fn(&ClientFailure) -> String,
    ) -> Submission {
        let unit = request.unit;
        let give_up_at = Instant::now() + self.options.submit_give_up_after;
        let mut pause = self.options.submit_backoff.0;
        let mut tries = 0_u32;
        let mut token = new_token();
        loop {
            let name = job_name_with_token(request.run_id, &unit.name, request.attempt, &token);
            // Before `sbatch`: a later apollo finds the job under it whatever happens next.
            if let Err(error) =
                write_attempt_file(&dir.join(TOKEN), format!("{token}\n").as_bytes())
            {
                return Submission::Failed(format!(
                    "cannot write the submission's token to {}: {error}",
                    dir.join(TOKEN).display()
                ));
            }
            let args = sbatch_args(request, &name, &token, dir);
            tries += 1;
            let error = match self.client.submit(&args) {
                Ok(job_id) => {
                    return Submission::Queued {
                        job_id,
                        job: JobRef::single(name),
                        adopted: false,
                    };
                }
                Err(error) => error,
            };
            match SubmitDoubt::of(&error) {
                SubmitDoubt::Refused => return Submission::Failed(refusal(&error)),
                SubmitDoubt::NotSent => {
                    if Instant::now() + pause > give_up_at {
                        return Submission::Failed(format!(
                            "{} (tried {tries} time{} over {}: the controller could not be reached)",
                            refusal(&error),
                            if tries == 1 { "" } else { "s" },
                            seconds(self.options.submit_give_up_after)
                        ));
                    }
                    if pause_unless_cancelled(context, pause) {
                        return Submission::Cancelled;
                    }
                    pause = (pause * 2).min(self.options.submit_backoff.1);
                }
                SubmitDoubt::MayBeQueued => {
                    let window = self.lookup_window();
                    match self.find_job(&name, window, context) {
                        Lookup::Found(entry) => {
                            return Submission::Queued {
                                job_id: entry.job_id,
                                job: JobRef::single(name),
                                adopted: true,
                            };
                        }
                        Lookup::Cancelled => {
                            let _ = self.client.cancel_by_name(&name, None);
                            return Submission::Cancelled;
                        }
                        Lookup::NotFound { answered } => {
                            let looked = if answered {
                                format!(
                                    "no job of that name is known to Slurm after {}",
                                    seconds(window)
                                )
                            } else {
                                format!(
                                    "squeue did not answer for {}, so whether Slurm queued it is unknown",
                                    seconds(window * 3)
                                )
                            };
                            if !unit.idempotent {
                                return Submission::InDoubt(format!(
                                    "sbatch did not say whether it queued the job ({error}); {looked}. \
                                     Its token is {token} (job name `{name}`, comment `apollo-token:{token}`): \
                                     apollo will not submit it again on its own, the unit being \
                                     `idempotent: false` — look for it with `squeue --me --name={name}`"
                                ));
                            }
                            // Should it appear after all, it must not run unwatched.
                            let _ = self.client.cancel_by_name(&name, None);
                            if Instant::now() >= give_up_at {
                                return Submission::Failed(format!(
                                    "{}; {looked}",
                                    refusal(&error)
                                ));
                            }
                            token = new_token();
                        }
                    }
                }
            }
        }
    }

    /// Twice the cluster's `MessageTimeout` (DESIGN §18), unless the options say otherwise.
    pub(crate) fn lookup_window(&self) -> Duration {
        self.options.token_lookup_window.unwrap_or_else(|| {
            *self.message_timeout.get_or_init(|| {
                self.client
                    .message_timeout()
                    .unwrap_or(DEFAULT_MESSAGE_TIMEOUT)
            }) * 2
        })
    }

    /// Look for the job called `name` with `squeue`, backing off, until it is listed or
    /// `squeue` answered without it at or after `window` from now.
    pub(crate) fn find_job(
        &self,
        name: &str,
        window: Duration,
        context: &AttemptContext<'_>,
    ) -> Lookup {
        let start = Instant::now();
        let deadline = start + window;
        let hard_deadline = start + window * 3;
        let mut pause = (window / 10).clamp(Duration::from_millis(20), Duration::from_secs(2));
        loop {
            let asked_at = Instant::now();
            match self.client.queue() {
                Ok(entries) => {
                    // Two of one name cannot come from one token; the latest if they did.
                    let found = entries
                        .into_iter()
                        .filter(|entry| entry.name == name)
                        .max_by_key(|entry| entry.job_id.parse::<u64>().unwrap_or(0));
                    if let Some(entry) = found {
                        return Lookup::Found(entry);
                    }
                    if asked_at >= deadline {
                        return Lookup::NotFound { answered: true };
                    }
                }
                Err(_) if asked_at >= hard_deadline => {
                    return Lookup::NotFound { answered: false };
                }
                Err(_) => {}
            }
            let now = Instant::now();
            let wait = if now < deadline {
                pause.min(deadline - now)
            } else {
                pause
            };
            if pause_unless_cancelled(context, wait) {
                return Lookup::Cancelled;
            }
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }

    /// Why a fresh job of `request` must not be submitted: an earlier attempt's job of the
    /// unit in this run still queued or running (after `apollo mark --rerun`, say), or the
    /// queue that would tell cannot be read. `None`: nothing stands in the way.
    pub(crate) fn earlier_job_alive(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
    ) -> Option<String> {
        let mut candidates = Vec::new();
        for earlier in (1..request.attempt).rev().take(100) {
            let Some(dir) = crate::reattach::attempt_dir(request, earlier) else {
                continue;
            };
            // Never submitted (an attempt that only took another's job over has no script), over,
            // or cancelled by apollo.
            if !dir.join(SCRIPT).exists()
                || dir.join(RESULT).exists()
                || dir.join(CANCELLED).exists()
            {
                continue;
            }
            let job_id = known_job_id(&dir);
            let job = submitted_job(request, earlier, &dir);
            candidates.push((earlier, job_id, job));
        }
        if candidates.is_empty() {
            return None;
        }
        let mut queue = None;
        for pause in [
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(2),
        ] {
            if pause_unless_cancelled(context, pause) {
                break;
            }
            if let Ok(entries) = self.client.queue() {
                queue = Some(entries);
                break;
            }
        }
        let Some(entries) = queue else {
            let (earlier, _, job) = &candidates[0];
            let name = &job.name;
            return Some(format!(
                "squeue cannot say whether the job of attempt {earlier} (`{name}`) still runs: \
                 apollo will not start a second job beside it until Slurm answers"
            ));
        };
        for (earlier, job_id, job) in candidates {
            let alive = entries.iter().find(|entry| {
                (job_id.as_deref() == Some(entry.job_id.as_str()) || job.matches(entry))
                    && !entry.state.is_ended()
            });
            let name = &job.name;
            if let Some(entry) = alive {
                let what = if entry.state == JobState::Pending {
                    "queued"
                } else {
                    "running"
                };
                let id = &entry.job_id;
                return Some(format!(
                    "attempt {earlier}'s Slurm job {id} (`{name}`) is still {what}: apollo will \
                     not start a second job of the unit beside it. Wait for it to end, or end it \
                     with `scancel {id}`"
                ));
            }
        }
        None
    }
}

impl SlurmExecutor {
    /// What a human deciding about attempt `attempt` of `unit` in run `run_id` (its folder
    /// `dir`) should know about its Slurm job, in one sentence: that it is still queued or
    /// running (and the `scancel` that ends it), or that its submission never got a job id
    /// and no job is listed under its token. `None` when there is nothing to say. One
    /// `squeue`.
    pub fn describe_for_verdict(
        &self,
        run_id: &str,
        unit: &str,
        attempt: u32,
        dir: &Path,
    ) -> Option<String> {
        if let Some((job_id, running)) = self.live_job(run_id, unit, attempt, dir) {
            return Some(format!(
                "its Slurm job {job_id} is still {}: end it with `scancel {job_id}` before you \
                 mark the unit to run again (apollo will not start a second job beside it), or \
                 wait for it and look at what it did",
                if running { "running" } else { "queued" }
            ));
        }
        let submitted_without_id = dir.join(SCRIPT).exists()
            && dir.join(TOKEN).exists()
            && known_job_id(dir).is_none()
            && !dir.join(RESULT).exists();
        submitted_without_id.then(|| {
            let name = job_in(run_id, unit, attempt, dir).name;
            format!(
                "its submission never got a job id from sbatch, and Slurm lists no job named \
                 `{name}` now (`squeue --me --name={name}` to look again)"
            )
        })
    }

    /// The Slurm job of attempt `attempt` of `unit` in run `run_id` (its folder `dir`), when it
    /// is still queued or running: its id and whether it runs (`false`: queued). One `squeue`;
    /// `None` when the folder shows no submission, a result, or Slurm does not list the job
    /// alive (or cannot be asked). For messages that must say a job still runs (exit 5).
    pub fn live_job(
        &self,
        run_id: &str,
        unit: &str,
        attempt: u32,
        dir: &Path,
    ) -> Option<(String, bool)> {
        if !dir.join(SCRIPT).exists() || dir.join(RESULT).exists() {
            return None;
        }
        let job_id = known_job_id(dir);
        let job = job_in(run_id, unit, attempt, dir);
        let entries = self.client.queue().ok()?;
        entries
            .into_iter()
            .find(|entry| {
                (job_id.as_deref() == Some(entry.job_id.as_str()) || job.matches(entry))
                    && !entry.state.is_ended()
            })
            .map(|entry| (entry.job_id, entry.state != JobState::Pending))
    }
}

/// The job id an attempt folder knows: apollo's `job_id` file, else the wrapper's `started`.
pub(crate) fn known_job_id(dir: &Path) -> Option<String> {
    read_small(&dir.join(JOB_ID))
        .ok()
        .flatten()
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty())
        .or_else(|| {
            read_started(dir)
                .map(|(id, _)| id)
                .filter(|id| !id.is_empty())
        })
}

/// The job attempt `attempt` (its folder `dir`) submitted: a task of the job array its
/// `array` file names, else a job named with the token of its `token` file, or without one
/// (an apollo before tokens).
pub(crate) fn submitted_job(request: &AttemptRequest<'_>, attempt: u32, dir: &Path) -> JobRef {
    job_in(request.run_id, &request.unit.name, attempt, dir)
}

/// [`submitted_job`] by run id and unit name.
fn job_in(run_id: &str, unit: &str, attempt: u32, dir: &Path) -> JobRef {
    if let Some(job) = crate::array::array_task_of(dir) {
        return job;
    }
    let token = read_small(&dir.join(TOKEN))
        .ok()
        .flatten()
        .map(|text| text.trim().to_owned())
        .filter(|token| {
            crate::job_name::parse_job_token(&job_name_with_token("r", "u", 1, token)).is_some()
        });
    JobRef::single(match token {
        Some(token) => job_name_with_token(run_id, unit, attempt, &token),
        None => job_name(run_id, unit, attempt),
    })
}

/// Wait `pause`, or until the run is stopped: whether it was.
pub(crate) fn pause_unless_cancelled(context: &AttemptContext<'_>, pause: Duration) -> bool {
    let cancel = context.cancel();
    if cancel.is_cancelled() {
        return true;
    }
    if pause.is_zero() {
        return false;
    }
    let (wake, woken) = crossbeam_channel::bounded::<()>(1);
    let _registration = cancel.on_cancel(move || {
        let _ = wake.try_send(());
    });
    if cancel.is_cancelled() {
        return true;
    }
    woken.recv_timeout(pause).is_ok()
}

/// `d` as whole seconds ("20 s"), or milliseconds under a second.
pub(crate) fn seconds(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}
