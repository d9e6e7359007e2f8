//! Job arrays: attempts that become ready together go to Slurm as **one** `sbatch --array`
//! (issue 39), each attempt still its own unit, attempt folder, wrapper and journal records.
//!
//! **Gathering.** An attempt about to be submitted joins the group of attempts of its run
//! whose `sbatch` options — everything that comes from the unit: time limit, resources,
//! partition, account, QoS, `extra_args` ([`options_args`]) — are the same. The first to join
//! leads: it waits until no attempt joined for the quiet time (`SlurmOptions::job_arrays`,
//! 250 ms by default) or the group's longest wait (2 s) is over, or the group holds a full
//! array, then takes the whole group and submits it in arrays of at most the cluster's
//! `MaxArraySize` tasks (`scontrol show config`, read once). An attempt alone in its group is
//! submitted as a job of its own, exactly as without arrays. The other members wait for the
//! leader's answer on a channel of their own, then report their job id and wait for their job
//! through the poller like any attempt.
//!
//! **Files.** Each array has a submission folder, `<run>/slurm/<token>/`, holding `index` (line
//! `k + 1`: the attempt folder of task `k`), `token`, and `array.sh`, the job script: it reads
//! its line of `index` by `$SLURM_ARRAY_TASK_ID` and runs that attempt's own `slurm.sh`, its
//! output appended to that attempt's `stdout`/`stderr`. Before `sbatch`, each attempt folder
//! gets `token` (the array's) and `array`: `<task> <array job name>`, which is how a later
//! apollo finds the attempt's job again. The job name is `apollo:<run>:@array:<count>:<token>`
//! and the token is in `--comment` too.
//!
//! **Ids.** Slurm's own name for task `k` of array job `J` is `J_k` (`squeue --array`'s `%i`,
//! `scancel J_k`): it is the job id each attempt writes to its `job_id` file and reports, so
//! the journal's `unit_submitted` needs no new field. The wrapper writes it to `started` too.
//!
//! **Exactly once** holds per array as per job (DESIGN §18): a controller not reached is
//! tried again with the same token; a lost answer is looked up by the array's name and the
//! array adopted; a token still unknown leaves every member in doubt when one of them is
//! `idempotent: false` (the run stops with exit 5 naming the token), else the name is
//! cancelled and the members submitted again under a new token.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use apollo_core::{AttemptContext, AttemptRequest};
use apollo_exec::{create_attempt_dir, write_attempt_file};
use crossbeam_channel::Sender;

use crate::args::{array_args, options_args, submit_error};
use crate::client::SubmitDoubt;
use crate::executor::SlurmExecutor;
use crate::job_name::{JobRef, array_job_name, new_token};
use crate::result::read_small;
use crate::script::quote;
use crate::submit::{Lookup, Submission, TOKEN, pause_unless_cancelled, seconds};

/// The job script of an array, in its submission folder.
pub(crate) const ARRAY_SCRIPT: &str = "array.sh";
/// The submission folder's list of attempt folders, one per task.
pub(crate) const INDEX: &str = "index";
/// In an attempt folder: `<task> <array job name>` of the array that holds the attempt.
pub(crate) const ARRAY: &str = "array";
/// The run folder's folder of submission folders.
pub(crate) const SUBMISSIONS: &str = "slurm";
/// `MaxArraySize` when `scontrol show config` cannot tell: Slurm's default.
const DEFAULT_MAX_ARRAY_SIZE: usize = 1001;

/// The attempts waiting to be submitted together, by run and `sbatch` options.
#[derive(Debug, Default)]
pub(crate) struct Gatherer {
    groups: Mutex<HashMap<(String, Vec<String>), Group>>,
    full: Condvar,
}

#[derive(Debug)]
struct Group {
    members: Vec<Member>,
    first: Instant,
    last: Instant,
}

/// An attempt in a group: what the leader needs to submit it, and where its answer goes.
#[derive(Debug)]
pub(crate) struct Member {
    dir: PathBuf,
    /// Where the array's submission folder goes (see [`submissions_dir`]).
    submissions: PathBuf,
    idempotent: bool,
    reply: Sender<Submission>,
}

/// The job of the attempt in `dir` when it is an array's task (its `array` file).
pub(crate) fn array_task_of(dir: &Path) -> Option<JobRef> {
    let text = read_small(&dir.join(ARRAY)).ok()??;
    let (task, name) = text.trim().split_once(' ')?;
    let (task, name) = (task.parse().ok()?, name.trim());
    crate::job_name::parse_job_token(name)?;
    Some(JobRef {
        name: name.to_owned(),
        task: Some(task),
    })
}

/// The array's job script: task `k` runs the wrapper of the attempt folder on line `k + 1`
/// of `index`, its output going to that attempt's files.
fn array_script(run_id: &str, folder: &Path, count: usize) -> String {
    format!(
        "#!/bin/sh\n\
         # Written by apollo: a job array of {count} attempts of run {run_id}. Task K runs the\n\
         # wrapper (slurm.sh) of the attempt folder on line K+1 of `index`.\n\
         index={index}\n\
         task=${{SLURM_ARRAY_TASK_ID:?apollo: not run as a task of a job array}}\n\
         dir=$(sed -n \"$((task + 1))p\" \"$index\")\n\
         if [ -z \"$dir\" ] || [ ! -f \"$dir/slurm.sh\" ]; then\n  \
         echo \"apollo: task $task of this array has no attempt folder in $index\" >&2\n  \
         exit 1\n\
         fi\n\
         exec /bin/sh \"$dir/slurm.sh\" </dev/null >>\"$dir/stdout\" 2>>\"$dir/stderr\"\n",
        index = quote(&folder.join(INDEX).display().to_string()),
    )
}

/// Where the submission folders of the run holding `attempt_dir` go when the request does not
/// name the run's folder for Slurm ([`AttemptRequest::executor_dir`], which the engine always
/// sets): `<run>/slurm/`, beside `units/`, for a library caller using apollo's layout; for an
/// attempt folder not in that layout, inside it.
fn submissions_dir(attempt_dir: &Path) -> PathBuf {
    let units = attempt_dir.parent().and_then(Path::parent);
    match units.and_then(|units| Some((units.file_name()?, units.parent()?))) {
        Some((name, run)) if name == "units" => run.join(SUBMISSIONS),
        _ => attempt_dir.join(SUBMISSIONS),
    }
}

impl SlurmExecutor {
    /// Submit the attempt (its wrapper written) as a task of a job array with the attempts
    /// that join it within the gathering window (see the module's docs): how that went for
    /// it. `None`: it is to be submitted on its own (arrays are off, it was alone, or its
    /// options pass `--array` themselves).
    pub(crate) fn gather(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
    ) -> Option<Submission> {
        let (quiet, longest) = self.options.job_arrays?;
        let options = options_args(request.unit);
        let own_array = options
            .iter()
            .any(|arg| arg == "-a" || arg.starts_with("--array"));
        let dir = request.log_dir;
        if own_array || dir.as_os_str().as_encoded_bytes().contains(&b'\n') {
            return None;
        }
        let (reply, replied) = crossbeam_channel::bounded(1);
        let member = Member {
            // Absolute, as every path a job is given (the job runs on another machine).
            submissions: (request.executor_dir(crate::executor::EXECUTOR_NAME))
                .map(|run_dir| std::path::absolute(&run_dir).unwrap_or(run_dir))
                .unwrap_or_else(|| submissions_dir(dir)),
            dir: dir.to_owned(),
            idempotent: request.unit.idempotent,
            reply,
        };
        let key = (request.run_id.to_owned(), options);
        // Read (once) before the gathering starts: `scontrol` may take a while.
        let cap = self.max_array_size();
        let gatherer = &self.gatherer;
        let mut groups = gatherer
            .groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // A full group is its leader's to take (one joining it would make an array of one
        // beyond it): wait until the leader has, then gather anew.
        while groups
            .get(&key)
            .is_some_and(|group| group.members.len() >= cap)
        {
            groups = (gatherer.full.wait(groups)).unwrap_or_else(PoisonError::into_inner);
        }
        let now = Instant::now();
        if let Some(group) = groups.get_mut(&key) {
            group.members.push(member);
            group.last = now;
            let full = group.members.len() >= cap;
            drop(groups);
            if full {
                gatherer.full.notify_all();
            }
            return Some(replied.recv().unwrap_or_else(|_| {
                Submission::Failed(
                    "the job array this attempt was gathered into was never submitted".to_owned(),
                )
            }));
        }
        groups.insert(
            key.clone(),
            Group {
                members: vec![member],
                first: now,
                last: now,
            },
        );
        // The leader: wait for the others, then take the group.
        while let Some(group) = groups.get(&key) {
            let until = (group.first + longest).min(group.last + quiet);
            let now = Instant::now();
            if group.members.len() >= cap || now >= until || context.cancel().is_cancelled() {
                break;
            }
            groups = gatherer
                .full
                .wait_timeout(groups, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let members = groups
            .remove(&key)
            .map_or_else(Vec::new, |group| group.members);
        drop(groups);
        gatherer.full.notify_all();
        if members.len() <= 1 {
            return None;
        }
        let mut members = members.into_iter();
        loop {
            let chunk: Vec<Member> = members.by_ref().take(cap).collect();
            if chunk.is_empty() {
                break;
            }
            self.submit_array(request, context, chunk);
        }
        Some(
            replied
                .recv()
                .unwrap_or_else(|_| Submission::Failed("the job array was not submitted".into())),
        )
    }

    /// Tasks per array at most: the cluster's `MaxArraySize` (task indices are below it).
    fn max_array_size(&self) -> usize {
        *self.max_array_size.get_or_init(|| {
            self.client
                .max_array_size()
                .unwrap_or(DEFAULT_MAX_ARRAY_SIZE)
                .max(1)
        })
    }

    /// Submit `members` as one job array, exactly once, and send each its answer. The options
    /// are `request`'s (the same for every member).
    fn submit_array(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
        members: Vec<Member>,
    ) {
        let unit = request.unit;
        let give_up_at = Instant::now() + self.options.submit_give_up_after;
        let mut pause = self.options.submit_backoff.0;
        let mut tries = 0_u32;
        let mut token = new_token();
        let mut written: Option<(String, PathBuf)> = None;
        let reply_all = |members: &[Member], answer: &dyn Fn(usize) -> Submission| {
            for (task, member) in members.iter().enumerate() {
                let _ = member.reply.send(answer(task));
            }
        };
        if context.cancel().is_cancelled() {
            return reply_all(&members, &|_| Submission::Cancelled);
        }
        loop {
            let (name, folder) = match &written {
                Some(done) => done.clone(),
                None => match self.write_array(request.run_id, &token, &members) {
                    Ok(done) => {
                        written = Some(done.clone());
                        done
                    }
                    Err(message) => {
                        return reply_all(&members, &|_| Submission::Failed(message.clone()));
                    }
                },
            };
            let args = array_args(unit, &name, &token, &folder, members.len());
            tries += 1;
            let error = match self.client.submit(&args) {
                Ok(array_id) => {
                    let _ = write_attempt_file(
                        &folder.join(crate::script::JOB_ID),
                        format!("{array_id}\n").as_bytes(),
                    );
                    return reply_all(&members, &|task| queued(&array_id, &name, task, false));
                }
                Err(error) => error,
            };
            match SubmitDoubt::of(&error) {
                SubmitDoubt::Refused => {
                    let message = submit_error(unit, &error);
                    return reply_all(&members, &|_| Submission::Failed(message.clone()));
                }
                SubmitDoubt::NotSent => {
                    if Instant::now() + pause > give_up_at {
                        let message = format!(
                            "{} (tried {tries} time{} over {}: the controller could not be reached)",
                            submit_error(unit, &error),
                            if tries == 1 { "" } else { "s" },
                            seconds(self.options.submit_give_up_after)
                        );
                        return reply_all(&members, &|_| Submission::Failed(message.clone()));
                    }
                    if pause_unless_cancelled(context, pause) {
                        return reply_all(&members, &|_| Submission::Cancelled);
                    }
                    pause = (pause * 2).min(self.options.submit_backoff.1);
                }
                SubmitDoubt::MayBeQueued => {
                    let lost = Lost {
                        name: &name,
                        token: &token,
                        error: &error,
                    };
                    if self.after_lost_answer(unit, context, &members, &lost, give_up_at) {
                        return;
                    }
                    token = new_token();
                    written = None;
                }
            }
        }
    }

    /// `sbatch`'s answer for the array was lost: look for it under its name and adopt it, or
    /// (when no member is `idempotent: false`) cancel the name for a new submission. Whether
    /// every member was answered (`false`: submit again under a new token).
    fn after_lost_answer(
        &self,
        unit: &apollo_core::model::Unit,
        context: &AttemptContext<'_>,
        members: &[Member],
        lost: &Lost<'_>,
        give_up_at: Instant,
    ) -> bool {
        let Lost { name, token, error } = *lost;
        let reply_all = |answer: &dyn Fn(usize) -> Submission| {
            for (task, member) in members.iter().enumerate() {
                let _ = member.reply.send(answer(task));
            }
            true
        };
        let window = self.lookup_window();
        match self.find_job(name, window, context) {
            Lookup::Found(entry) => {
                let array_id = entry
                    .array_task()
                    .map_or_else(|| entry.job_id.clone(), |(id, _)| id.to_owned());
                reply_all(&|task| queued(&array_id, name, task, true))
            }
            Lookup::Cancelled => {
                let _ = self.client.cancel_by_name(name, None);
                reply_all(&|_| Submission::Cancelled)
            }
            Lookup::NotFound { answered } => {
                let looked = if answered {
                    format!(
                        "no job array of that name is known to Slurm after {}",
                        seconds(window)
                    )
                } else {
                    format!(
                        "squeue did not answer for {}, so whether Slurm queued it is unknown",
                        seconds(window * 3)
                    )
                };
                if members.iter().any(|member| !member.idempotent) {
                    // One fate for the whole array: none is submitted again.
                    return reply_all(&|task| {
                        Submission::InDoubt(format!(
                            "sbatch did not say whether it queued the job array holding this \
                             attempt as task {task} ({error}); {looked}. Its token is {token} \
                             (job name `{name}`, comment `apollo-token:{token}`): apollo will \
                             not submit it again on its own, the array holding `idempotent: \
                             false` units — look for it with `squeue --me --array --name={name}`"
                        ))
                    });
                }
                // Should it appear after all, it must not run unwatched.
                let _ = self.client.cancel_by_name(name, None);
                if Instant::now() >= give_up_at {
                    let message = format!("{}; {looked}", submit_error(unit, error));
                    return reply_all(&|_| Submission::Failed(message.clone()));
                }
                false
            }
        }
    }

    /// The submission folder of array `token` and each member's `token` and `array` files,
    /// before `sbatch`: the array's name and folder.
    fn write_array(
        &self,
        run_id: &str,
        token: &str,
        members: &[Member],
    ) -> Result<(String, PathBuf), String> {
        let first = members.first().ok_or("an empty job array")?;
        let folder = first.submissions.join(token);
        let name = array_job_name(run_id, members.len(), token);
        let cannot = |what: &Path, error: std::io::Error| {
            format!("cannot write the job array's {}: {error}", what.display())
        };
        create_attempt_dir(&folder).map_err(|error| cannot(&folder, error))?;
        let mut index = String::new();
        for member in members {
            index.push_str(&member.dir.display().to_string());
            index.push('\n');
        }
        for (file, text) in [
            (INDEX, index),
            (TOKEN, format!("{token}\n")),
            (ARRAY_SCRIPT, array_script(run_id, &folder, members.len())),
        ] {
            let path = folder.join(file);
            write_attempt_file(&path, text.as_bytes()).map_err(|error| cannot(&path, error))?;
        }
        for (task, member) in members.iter().enumerate() {
            for (file, text) in [
                (ARRAY, format!("{task} {name}\n")),
                (TOKEN, format!("{token}\n")),
            ] {
                let path = member.dir.join(file);
                write_attempt_file(&path, text.as_bytes()).map_err(|error| cannot(&path, error))?;
            }
        }
        Ok((name, folder))
    }
}

/// A submission whose answer was lost.
#[derive(Clone, Copy)]
struct Lost<'a> {
    name: &'a str,
    token: &'a str,
    error: &'a crate::client::ClientFailure,
}

/// Task `task`'s answer when array `array_id` called `name` was queued.
fn queued(array_id: &str, name: &str, task: usize, adopted: bool) -> Submission {
    let task = u32::try_from(task).unwrap_or(u32::MAX);
    Submission::Queued {
        job_id: format!("{array_id}_{task}"),
        job: JobRef {
            name: name.to_owned(),
            task: Some(task),
        },
        adopted,
    }
}

/// The gathering window's defaults: quiet time and longest wait.
pub(crate) const DEFAULT_GATHER: (Duration, Duration) =
    (Duration::from_millis(250), Duration::from_secs(2));

#[cfg(test)]
mod tests;
