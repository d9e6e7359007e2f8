//! The iteration's cluster jobs (with `--slurm`): the Slurm units' jobs run in attempt folders
//! under the iteration's project folder (`sbatch --chdir`), which is how the harness finds them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use apollo_core::Event;
use apollo_core::event::AttemptStatus;
use apollo_store::{JournalReader, ReadOptions};

/// How long a job may take to leave the queue once it ended or was cancelled.
const LEAVE_QUEUE: Duration = Duration::from_secs(120);

/// A job of the queue: its id, name, state, working directory.
struct Job {
    id: String,
    name: String,
    state: String,
}

/// The jobs of the queue whose working directory is under `dir`.
fn jobs_under(dir: &Path) -> Result<Vec<Job>, String> {
    let output = Command::new("squeue")
        .args(["--me", "--noheader", "--format=%i|%j|%T|%Z"])
        .output()
        .map_err(|error| format!("squeue: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "squeue failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let dir = dir.to_string_lossy();
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, '|');
            let (id, name, state, workdir) = (
                fields.next()?,
                fields.next()?,
                fields.next()?,
                fields.next()?,
            );
            workdir.trim().starts_with(dir.as_ref()).then(|| Job {
                id: id.trim().to_owned(),
                name: name.trim().to_owned(),
                state: state.trim().to_owned(),
            })
        })
        .collect())
}

/// Waits until no job under `dir` is in the queue; `false` when some still is after `limit`.
fn wait_gone(dir: &Path, limit: Duration) -> Result<bool, String> {
    let deadline = Instant::now() + limit;
    loop {
        if jobs_under(dir)?.is_empty() {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Ends every job of the iteration (as a careful human does before a verdict on a unit whose
/// job may still run: `scancel`, then wait until it is gone).
pub(super) fn end_jobs(dir: &Path) -> Result<(), String> {
    let jobs = jobs_under(dir)?;
    if jobs.is_empty() {
        return Ok(());
    }
    let status = Command::new("scancel")
        .args(jobs.iter().map(|job| job.id.as_str()))
        .status()
        .map_err(|error| format!("scancel: {error}"))?;
    if !status.success() {
        return Err(format!("scancel exited {status}"));
    }
    if wait_gone(dir, LEAVE_QUEUE)? {
        Ok(())
    } else {
        Err(format!(
            "jobs under {} still queued {} s after scancel",
            dir.display(),
            LEAVE_QUEUE.as_secs()
        ))
    }
}

/// After a run completed, no job of it may be queued or running: each Slurm attempt was
/// waited for. One still there is a violation (and is cancelled, so that the next iteration
/// starts clean).
pub(super) fn none_left(dir: &Path) -> Result<Vec<String>, String> {
    // A job whose result apollo read may still be completing for a moment.
    if wait_gone(dir, Duration::from_secs(10))? {
        return Ok(Vec::new());
    }
    let left: Vec<String> = jobs_under(dir)?
        .into_iter()
        .map(|job| {
            format!(
                "cluster job {} ({}) still {} after the run completed",
                job.id, job.name, job.state
            )
        })
        .collect();
    end_jobs(dir)?;
    Ok(left)
}

/// Adds the iteration's recorded cluster jobs (`unit_submitted` in any of its runs) to
/// `counts`, and those reattached to after apollo died; returns the violations of check 11's
/// promise about reattachments: a resume reattaches only to the job an earlier attempt of the
/// same unit, in the same run, submitted and never saw end — never to another job, never to
/// one already recorded over (that would be a job run twice, or one's end recorded twice).
pub(super) fn count_and_check_jobs(dir: &Path, counts: &mut (u64, u64)) -> Vec<String> {
    let Ok(runs) = std::fs::read_dir(dir.join(".apollo/runs")) else {
        return Vec::new();
    };
    let mut violations = Vec::new();
    for run in runs.filter_map(Result::ok) {
        let Ok(reader) = JournalReader::open(&run.path(), ReadOptions::default()) else {
            continue;
        };
        let events: Vec<Event> = reader.filter_map(Result::ok).map(|r| r.event).collect();
        for event in &events {
            if let Event::UnitSubmitted(submitted) = event {
                counts.0 += 1;
                counts.1 += u64::from(submitted.reattached_from.is_some());
            }
        }
        let name = run.file_name().to_string_lossy().into_owned();
        violations.extend(reattachment_violations(&name, &events));
    }
    violations
}

/// The reattachment violations of one run's records, in order ([`count_and_check_jobs`]).
fn reattachment_violations(run: &str, events: &[Event]) -> Vec<String> {
    use std::collections::{HashMap, HashSet};
    // (unit, attempt) → the job it submitted or reattached to; the attempts recorded ended,
    // but for those interrupted (a job left running by `on_stop: detach` is reattached to).
    let mut jobs: HashMap<(&str, u32), &str> = HashMap::new();
    let mut ended: HashSet<(&str, u32)> = HashSet::new();
    let mut violations = Vec::new();
    for event in events {
        match event {
            Event::UnitSubmitted(submitted) => {
                let key = (submitted.unit.as_str(), submitted.attempt);
                if let Some(from) = submitted.reattached_from {
                    let what = format!(
                        "run {run}: {} attempt {} reattached to job {} of attempt {from}",
                        submitted.unit, submitted.attempt, submitted.job_id
                    );
                    // None: apollo died before it recorded the submission (the job is then
                    // found by its name).
                    let earlier = jobs.get(&(submitted.unit.as_str(), from)).copied();
                    if from >= submitted.attempt {
                        violations.push(format!("{what}, not an earlier attempt"));
                    } else if let Some(earlier) = earlier
                        && earlier != submitted.job_id
                    {
                        violations.push(format!("{what}, which submitted {earlier}"));
                    } else if ended.contains(&(submitted.unit.as_str(), from)) {
                        violations.push(format!("{what}, whose end was already recorded"));
                    }
                }
                jobs.insert(key, submitted.job_id.as_str());
            }
            Event::UnitFinished(finished) if finished.status != AttemptStatus::Interrupted => {
                ended.insert((finished.unit.as_str(), finished.attempt));
            }
            _ => {}
        }
    }
    violations
}

/// Whether a Slurm cluster answers here (`sinfo`).
pub fn available() -> bool {
    Command::new("sinfo")
        .arg("--noheader")
        .output()
        .is_ok_and(|output| output.status.success() && !output.stdout.is_empty())
}

/// A kill aimed at a running job: the run, and the unit and attempt whose job ran then.
pub(super) struct Aim {
    run: PathBuf,
    unit: String,
    attempt: u32,
}

/// Wait until the latest run's journal holds a `unit_submitted` of a unit other than
/// `not_target` (the non-idempotent one, which a resume must not reattach to without a
/// verdict) whose attempt has not ended: the moment to kill apollo. `None` when apollo exited
/// first (nothing was submitted, or everything ended in between two looks).
pub(super) fn await_running_job(
    dir: &Path,
    not_target: Option<&str>,
    child: &mut Child,
) -> Result<Option<Aim>, String> {
    let deadline = Instant::now() + LEAVE_QUEUE;
    while Instant::now() < deadline {
        if child
            .try_wait()
            .map_err(|error| error.to_string())?
            .is_some()
        {
            return Ok(None);
        }
        if let Some(run) = super::runs::latest_run_after(dir, None)?
            && let Some((unit, attempt)) = running_job(&run, not_target)
        {
            return Ok(Some(Aim { run, unit, attempt }));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Err("apollo neither submitted a job nor exited within 120 s".into())
}

/// The first job of `run`'s journal (so far) whose attempt has not ended, of a unit other than
/// `not_target`.
fn running_job(run: &Path, not_target: Option<&str>) -> Option<(String, u32)> {
    let reader = JournalReader::open(run, ReadOptions::default()).ok()?;
    let events: Vec<Event> = reader.filter_map(Result::ok).map(|r| r.event).collect();
    let ended = |unit: &str, attempt: u32| {
        events.iter().any(|event| {
            matches!(event, Event::UnitFinished(finished)
                if finished.unit == unit && finished.attempt == attempt)
        })
    };
    events.iter().find_map(|event| match event {
        Event::UnitSubmitted(submitted)
            if Some(submitted.unit.as_str()) != not_target
                && submitted.reattached_from.is_none()
                && !ended(&submitted.unit, submitted.attempt) =>
        {
            Some((submitted.unit.clone(), submitted.attempt))
        }
        _ => None,
    })
}

/// Whether a resume reattached to the job `aim` was aimed at (a `unit_submitted` of the unit
/// with `reattached_from` that attempt, in that run).
pub(super) fn reattached(aim: &Aim) -> bool {
    JournalReader::open(&aim.run, ReadOptions::default()).is_ok_and(|reader| {
        reader.filter_map(Result::ok).any(|record| {
            matches!(record.event, Event::UnitSubmitted(submitted)
                if submitted.unit == aim.unit && submitted.reattached_from == Some(aim.attempt))
        })
    })
}

/// Check 11's aimed half: every kill aimed at a running job was answered by a resume that
/// reattached to it (aims whose job the harness cancelled itself, as a human asked for a
/// verdict would, are dropped before: see `run_iteration`).
pub(super) fn aims_reattached(aims: &[Aim]) -> Vec<String> {
    aims.iter()
        .filter(|aim| !reattached(aim))
        .map(|aim| {
            format!(
                "apollo was killed while {}'s job (attempt {}) ran in {}, and no resume reattached \
                 to it",
                aim.unit,
                aim.attempt,
                aim.run.display()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(lines: &[&str]) -> Vec<Event> {
        (lines.iter())
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    const SUBMITTED_1: &str =
        r#"{"kind":"unit_submitted","unit":"a","attempt":1,"executor":"slurm","job_id":"42"}"#;

    #[test]
    fn a_reattachment_to_the_job_an_earlier_attempt_left_running_is_fine() {
        let run = events(&[
            SUBMITTED_1,
            r#"{"kind":"unit_submitted","unit":"a","attempt":2,"executor":"slurm","job_id":"42","reattached_from":1}"#,
            r#"{"kind":"unit_submitted","unit":"a","attempt":3,"executor":"slurm","job_id":"42","reattached_from":1}"#,
        ]);
        assert_eq!(reattachment_violations("r", &run), Vec::<String>::new());
    }

    #[test]
    fn a_reattachment_to_another_job_from_a_later_attempt_or_to_an_ended_one_is_a_violation() {
        let other_job = events(&[
            SUBMITTED_1,
            r#"{"kind":"unit_submitted","unit":"a","attempt":2,"executor":"slurm","job_id":"43","reattached_from":1}"#,
        ]);
        let found = reattachment_violations("r", &other_job);
        assert!(
            found.len() == 1 && found[0].ends_with("which submitted 42"),
            "{found:?}"
        );
        let no_job = events(&[
            r#"{"kind":"unit_submitted","unit":"a","attempt":2,"executor":"slurm","job_id":"42","reattached_from":1}"#,
        ]);
        // Not recorded: apollo died between sbatch and the record, the job found by its name.
        assert_eq!(reattachment_violations("r", &no_job), Vec::<String>::new());
        let not_earlier = events(&[
            SUBMITTED_1,
            r#"{"kind":"unit_submitted","unit":"a","attempt":1,"executor":"slurm","job_id":"42","reattached_from":1}"#,
        ]);
        let found = reattachment_violations("r", &not_earlier);
        assert!(found[0].ends_with("not an earlier attempt"), "{found:?}");
        let ended = events(&[
            SUBMITTED_1,
            r#"{"kind":"unit_finished","unit":"a","attempt":1,"status":"succeeded","exit":{"code":0},"failed_phase":null,"timed_out":false,"duration_ms":5,"output_hash":"oh","stdout_bytes":0,"stderr_bytes":0,"user_cpu_ms":0,"sys_cpu_ms":0,"max_rss_kib":0,"leftovers_killed":0,"phases":[],"error":null}"#,
            r#"{"kind":"unit_submitted","unit":"a","attempt":2,"executor":"slurm","job_id":"42","reattached_from":1}"#,
        ]);
        let found = reattachment_violations("r", &ended);
        assert!(
            found[0].ends_with("whose end was already recorded"),
            "{found:?}"
        );
        // Left running on a stop (`on_stop: detach`): recorded interrupted, then reattached.
        let detached: Vec<Event> = (ended.into_iter())
            .map(|mut event| {
                if let Event::UnitFinished(finished) = &mut event {
                    finished.status = AttemptStatus::Interrupted;
                }
                event
            })
            .collect();
        assert_eq!(
            reattachment_violations("r", &detached),
            Vec::<String>::new()
        );
    }
}
