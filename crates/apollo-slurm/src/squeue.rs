//! What `squeue` says about jobs: one line per job, `<id>|<state>|<name>`
//! (`squeue --me --noheader --array --states=all --format=%i|%T|%j`). With `--array` each task
//! of a job array is a line of its own, its id `<array job id>_<task>`, pending ones too.

/// A job's state as Slurm names it (`%T`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Waiting for resources (`PENDING`, also `CONFIGURING`, `REQUEUED`, …).
    Pending,
    /// Running (`RUNNING`, `COMPLETING`, `SUSPENDED`, …).
    Running,
    /// Over: `COMPLETED`, `FAILED`, `CANCELLED`, `TIMEOUT`, `NODE_FAIL`, `OUT_OF_MEMORY`, …
    /// (the name as Slurm gave it).
    Ended(String),
}

impl JobState {
    /// Parses `%T`.
    pub fn parse(text: &str) -> JobState {
        let text = text.trim();
        // `CANCELLED by 0` in some versions.
        let word = text.split_whitespace().next().unwrap_or("");
        match word {
            "PENDING" | "CONFIGURING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED"
            | "RESV_DEL_HOLD" | "SPECIAL_EXIT" | "RESIZING" => JobState::Pending,
            "RUNNING" | "COMPLETING" | "SUSPENDED" | "STOPPED" | "SIGNALING" | "STAGE_OUT" => {
                JobState::Running
            }
            _ => JobState::Ended(word.to_owned()),
        }
    }

    /// Whether the job is over.
    pub fn is_ended(&self) -> bool {
        matches!(self, JobState::Ended(_))
    }
}

/// One job in `squeue`'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// The job id.
    pub job_id: String,
    /// Its state.
    pub state: JobState,
    /// Its name.
    pub name: String,
}

impl QueueEntry {
    /// For a task of a job array (`%i` is `<array job id>_<task>`): the array's job id and the
    /// task's index. `None` for a job that is not in an array (or an unsplit pending array,
    /// `123_[0-9]`, which `--array` never shows).
    pub fn array_task(&self) -> Option<(&str, u32)> {
        let (array, task) = self.job_id.split_once('_')?;
        Some((array, task.parse().ok()?))
    }
}

/// The `--format` apollo passes to squeue.
pub(crate) const SQUEUE_FORMAT: &str = "%i|%T|%j";

/// Parses squeue's output; lines that do not have the three fields are skipped (a warning
/// printed on stdout by a site's wrapper must not break polling).
pub fn parse_squeue(output: &str) -> Vec<QueueEntry> {
    output
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '|');
            let job_id = fields.next()?.trim();
            let state = fields.next()?;
            let name = fields.next()?.trim_end();
            if job_id.is_empty() || !job_id.bytes().next()?.is_ascii_digit() {
                return None;
            }
            Some(QueueEntry {
                job_id: job_id.to_owned(),
                state: JobState::parse(state),
                name: name.to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_lines_parse_and_junk_is_skipped() {
        let output = "\
4|PENDING|apollo:r1:fetch:1
5|RUNNING|apollo:r1:a|b:2
6|COMPLETED|apollo:r1:save:1
7|CANCELLED by 0|other
slurm_load_jobs warning: something
8|TIMEOUT|x
";
        let entries = parse_squeue(output);
        assert_eq!(entries.len(), 5);
        assert_eq!(entries[0].state, JobState::Pending);
        assert_eq!(entries[1].name, "apollo:r1:a|b:2");
        assert_eq!(entries[1].state, JobState::Running);
        assert_eq!(entries[2].state, JobState::Ended("COMPLETED".into()));
        assert_eq!(entries[3].state, JobState::Ended("CANCELLED".into()));
        assert!(entries[4].state.is_ended());
        assert!(!JobState::parse("COMPLETING").is_ended());
        assert_eq!(entries[0].array_task(), None);
    }

    #[test]
    fn array_tasks_name_their_array_and_index() {
        let entries = parse_squeue("12_7|PENDING|apollo:r:@array:9:ab\n12_[8-9]|PENDING|x\n");
        assert_eq!(entries[0].array_task(), Some(("12", 7)));
        assert_eq!(entries[1].array_task(), None);
    }
}
