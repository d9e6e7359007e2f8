//! The iteration's cluster jobs (with `--slurm`): the Slurm units' jobs run in attempt folders
//! under the iteration's project folder (`sbatch --chdir`), which is how the harness finds them.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use apollo_core::Event;
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
/// `counts`, and those reattached to after apollo died.
pub(super) fn count_jobs(dir: &Path, counts: &mut (u64, u64)) {
    let Ok(runs) = std::fs::read_dir(dir.join(".apollo/runs")) else {
        return;
    };
    for run in runs.filter_map(Result::ok) {
        let Ok(reader) = JournalReader::open(&run.path(), ReadOptions::default()) else {
            continue;
        };
        for record in reader.filter_map(Result::ok) {
            if let Event::UnitSubmitted(submitted) = record.event {
                counts.0 += 1;
                counts.1 += u64::from(submitted.reattached_from.is_some());
            }
        }
    }
}

/// Whether a Slurm cluster answers here (`sinfo`).
pub fn available() -> bool {
    Command::new("sinfo")
        .arg("--noheader")
        .output()
        .is_ok_and(|output| output.status.success() && !output.stdout.is_empty())
}
