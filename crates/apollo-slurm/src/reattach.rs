//! Reattaching to the job an earlier apollo left in flight (DESIGN §13): waited for while it
//! runs, recorded from its files when it finished, cut off or submitted afresh when Slurm
//! lost it.

use std::path::PathBuf;

use apollo_core::{AttemptContext, AttemptEvent, AttemptOutcome, AttemptRequest};
use apollo_exec::write_attempt_file;

use crate::executor::{
    CANCELLED, EXECUTOR_NAME, REATTACHED, SlurmExecutor, WaitEnd, cap_logs, cut_off, job_words,
    link_logs, parse_reattached,
};
use crate::poller::Watch;
use crate::result::{outcome_from_files, read_result, read_small};
use crate::script::SCRIPT;
use crate::submit::{known_job_id, submitted_job};

/// The folder of attempt `attempt` of `request`'s unit, as the run names it
/// ([`AttemptRequest::attempt_dir`]), absolute as every path a job is given: the folder is
/// compared with those a job array's index lists, and holds files the job on another machine
/// wrote. A request that names no folders (a library caller that did not pass
/// [`AttemptRequest::with_attempt_dirs`]) gets the store's layout, the attempt's siblings:
/// finding no earlier attempt would submit a second job beside one that may still run.
pub(crate) fn attempt_dir(request: &AttemptRequest<'_>, attempt: u32) -> Option<PathBuf> {
    let dir = match request.attempt_dir(attempt) {
        Some(dir) => dir,
        None => request.log_dir.parent()?.join(attempt.to_string()),
    };
    Some(std::path::absolute(&dir).unwrap_or(dir))
}

impl SlurmExecutor {
    /// Reattach to the job of attempt `earlier` (left in flight by an apollo that died):
    /// `None` when there is none to reattach to (the attempt never reached `sbatch`, apollo
    /// cancelled it, or Slurm lost it without a result) and a fresh job is needed.
    pub(crate) fn reattach(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
        earlier: u32,
    ) -> Option<AttemptOutcome> {
        // An attempt that itself took the job over points at the one that submitted it (unless
        // it then submitted a job of its own: that one is followed).
        let mut earlier = earlier;
        for _ in 0..1000 {
            let Some(dir) = attempt_dir(request, earlier) else {
                break;
            };
            if dir.join(SCRIPT).exists() {
                break;
            }
            // Read without following a link, without blocking, bounded (`read_small`).
            let pointer = read_small(&dir.join(REATTACHED));
            match pointer
                .ok()
                .flatten()
                .and_then(|text| parse_reattached(&text))
            {
                Some(submitter) if submitter < earlier => earlier = submitter,
                _ => break,
            }
        }
        let earlier_dir = attempt_dir(request, earlier)?;
        if !earlier_dir.join(SCRIPT).exists() {
            return None;
        }
        let known_id = known_job_id(&earlier_dir);
        // From here on this attempt stands for attempt `earlier`'s job: say so on disk at once.
        // An apollo killed before the job is seen (the `note` below, which also reports it)
        // must leave the next attempt pointed at the same job, not at an attempt with nothing
        // in its folder — which would submit a second job beside it, or, once it ended, run a
        // non-idempotent unit's job again (issue 36; found by the torture harness's kills
        // aimed at running jobs).
        let _ = write_attempt_file(
            &request.log_dir.join(REATTACHED),
            format!(
                "attempt {earlier} job {}\n",
                known_id.as_deref().unwrap_or("unknown")
            )
            .as_bytes(),
        );
        // Once: the wait may have noted the job alive before it vanished.
        let noted = std::cell::Cell::new(false);
        let note = |job_id: &str| {
            if noted.replace(true) {
                return;
            }
            let _ = write_attempt_file(
                &request.log_dir.join(REATTACHED),
                format!("attempt {earlier} job {job_id}\n").as_bytes(),
            );
            context.report(AttemptEvent::reattached(EXECUTOR_NAME, job_id, earlier));
        };
        // Its job started and is gone without a result (cancelled by apollo before it died,
        // or lost): an `idempotent: false` unit's side effects may be half done, so it is
        // cut off rather than submitted again (DESIGN §18).
        let cut_off_or_fresh = |why: &str| {
            if request.unit.idempotent || !earlier_dir.join(crate::script::STARTED).exists() {
                return None;
            }
            note(known_id.as_deref().unwrap_or("unknown"));
            self.settle(request.unit, &earlier_dir);
            link_logs(request.log_dir, &earlier_dir);
            let mut outcome = cut_off(
                &earlier_dir,
                &format!("{} {why}", job_words(known_id.clone())),
            );
            cap_logs(request.unit, &earlier_dir, &[request.log_dir], &mut outcome);
            Some(outcome)
        };
        // apollo cancelled it (a timeout, a stop): never reattached to. Its end is in its
        // files when the wrapper could write it; a job killed before that was cut off.
        if earlier_dir.join(CANCELLED).exists() {
            if read_result(&earlier_dir).is_some() {
                return None;
            }
            return cut_off_or_fresh(
                "was cancelled by apollo after it started, and left no result",
            );
        }
        if read_result(&earlier_dir).is_some() {
            // It finished while apollo was away: record it from its files.
            note(known_id.as_deref().unwrap_or("unknown"));
            self.settle(request.unit, &earlier_dir);
            link_logs(request.log_dir, &earlier_dir);
            // Its logs were never cut: nothing collected the job until now.
            let mut outcome = outcome_from_files(&earlier_dir, None, "");
            cap_logs(request.unit, &earlier_dir, &[request.log_dir], &mut outcome);
            return Some(outcome);
        }
        let watch = Watch {
            job: submitted_job(request, earlier, &earlier_dir),
            dir: earlier_dir.clone(),
            job_id: known_id.clone(),
        };
        // Reported once the job shows it is alive (or done), not merely because an id was
        // recorded: a job Slurm lost runs again as a fresh one.
        let end = self.wait(request, context, watch, |job_id| note(job_id));
        match end {
            // Unknown to Slurm and no result: a job that never started runs as a fresh one
            // (so does an idempotent unit's, as the in-flight rule says); one that started
            // is cut off.
            WaitEnd::Vanished { stopped: None, .. } => {
                cut_off_or_fresh("is unknown to Slurm and left no result after it started")
            }
            end => {
                let detached = matches!(end, WaitEnd::Detached { .. });
                if !detached {
                    self.settle(request.unit, &earlier_dir);
                }
                link_logs(request.log_dir, &earlier_dir);
                let mut outcome = self.outcome(&earlier_dir, end);
                if !detached {
                    cap_logs(request.unit, &earlier_dir, &[request.log_dir], &mut outcome);
                }
                Some(outcome)
            }
        }
    }
}
