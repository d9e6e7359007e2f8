//! The job name: `apollo:<run id>:<unit>:<attempt>:<token>`. It lets apollo find a job again
//! with no recorded job id (apollo may die between `sbatch` returning and `unit_submitted`
//! being durable; `sbatch` may time out after queueing the job). The token is random, one per
//! submission, and also in the job's `--comment`: a job found under it is the one that
//! submission queued, never another's. `:` appears neither in run ids, unit names
//! (`[A-Za-z0-9_.-]+`) nor tokens (hex), so the name splits back unambiguously. Jobs of an
//! older apollo have no token (`apollo:<run id>:<unit>:<attempt>`).

/// The prefix of every job name apollo gives.
pub const PREFIX: &str = "apollo:";

/// The job name of `attempt` of `unit` in run `run_id`, without a token (the form an apollo
/// before tokens gave; still looked for when reattaching to such a job).
pub fn job_name(run_id: &str, unit: &str, attempt: u32) -> String {
    format!("{PREFIX}{run_id}:{unit}:{attempt}")
}

/// The job name of the submission `token` of `attempt` of `unit` in run `run_id`.
pub fn job_name_with_token(run_id: &str, unit: &str, attempt: u32, token: &str) -> String {
    format!("{PREFIX}{run_id}:{unit}:{attempt}:{token}")
}

/// The job name of a job array holding `count` attempts of run `run_id`, submitted under
/// `token`: `apollo:<run id>:@array:<count>:<token>` (`@` is in no unit name). Its tasks find
/// their attempts through the array's `index` file; each attempt folder's `array` file names
/// the array and its task.
pub fn array_job_name(run_id: &str, count: usize, token: &str) -> String {
    format!("{PREFIX}{run_id}:{ARRAY_UNIT}:{count}:{token}")
}

/// The unit part of a job array's name.
pub(crate) const ARRAY_UNIT: &str = "@array";

/// The Slurm job of an attempt: its job's name and, for a task of a job array, the task's
/// index (the array's tasks share its name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobRef {
    pub(crate) name: String,
    pub(crate) task: Option<u32>,
}

impl JobRef {
    /// A job of its own called `name`.
    pub(crate) fn single(name: String) -> Self {
        Self { name, task: None }
    }

    /// One key per job, for maps: the name, with `#<task>` for an array's task.
    pub(crate) fn key(&self) -> String {
        match self.task {
            Some(task) => format!("{}#{task}", self.name),
            None => self.name.clone(),
        }
    }

    /// Whether `squeue` lists this job in `entry` (by name, and task for an array's).
    pub(crate) fn matches(&self, entry: &crate::squeue::QueueEntry) -> bool {
        entry.name == self.name && entry.array_task().map(|(_, task)| task) == self.task
    }

    /// The key [`key`](Self::key) gives the job `squeue` lists in `entry`.
    pub(crate) fn key_of(entry: &crate::squeue::QueueEntry) -> String {
        match entry.array_task() {
            Some((_, task)) => format!("{}#{task}", entry.name),
            None => entry.name.clone(),
        }
    }
}

/// The run id, unit and attempt a job name carries; `None` for a name apollo did not give.
pub fn parse_job_name(name: &str) -> Option<(&str, &str, u32)> {
    let rest = name.strip_prefix(PREFIX)?;
    let mut parts = rest.split(':');
    let (run_id, unit, attempt) = (parts.next()?, parts.next()?, parts.next()?);
    let token = parts.next();
    if parts.next().is_some()
        || run_id.is_empty()
        || unit.is_empty()
        || token.is_some_and(|token| !is_token(token))
    {
        return None;
    }
    Some((run_id, unit, attempt.parse().ok()?))
}

/// The submission token a job name carries, if any.
pub fn parse_job_token(name: &str) -> Option<&str> {
    parse_job_name(name)?;
    let token = name.rsplit(':').next()?;
    (name.matches(':').count() == 4).then_some(token)
}

/// Whether `text` is a token apollo could have made: 1 to 32 lowercase hex digits.
fn is_token(text: &str) -> bool {
    (1..=32).contains(&text.len()) && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A new random token: 16 hex digits (64 bits from the kernel's random source; a hash of the
/// time, the process and a counter where it cannot be read).
pub(crate) fn new_token() -> String {
    use std::io::Read;
    let mut bytes = [0_u8; 8];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut file| file.read_exact(&mut bytes));
    if read.is_err() {
        use std::hash::{BuildHasher, Hasher};
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_u32(std::process::id());
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos()),
        );
        bytes = hasher.finish().to_le_bytes();
    }
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_name_splits_back_into_run_unit_and_attempt() {
        let name = job_name("20261130T021507Z-3f9a", "load.eu-1", 12);
        assert_eq!(name, "apollo:20261130T021507Z-3f9a:load.eu-1:12");
        assert_eq!(
            parse_job_name(&name),
            Some(("20261130T021507Z-3f9a", "load.eu-1", 12))
        );
        assert_eq!(parse_job_token(&name), None);
    }

    #[test]
    fn a_job_name_with_a_token_splits_back_and_names_its_token() {
        let name = job_name_with_token("r1", "pay", 3, "0123456789abcdef");
        assert_eq!(name, "apollo:r1:pay:3:0123456789abcdef");
        assert_eq!(parse_job_name(&name), Some(("r1", "pay", 3)));
        assert_eq!(parse_job_token(&name), Some("0123456789abcdef"));
    }

    #[test]
    fn tokens_are_sixteen_hex_digits_and_differ() {
        let (first, second) = (new_token(), new_token());
        assert_eq!(first.len(), 16);
        assert!(is_token(&first), "{first}");
        assert_ne!(first, second);
    }

    #[test]
    fn foreign_names_are_not_apollos() {
        for name in [
            "bash",
            "apollo:",
            "apollo:r:u",
            "apollo:r:u:x",
            "apollo::u:1",
            "apollo:r::1",
            "apollo:r:u:1:NOT-HEX",
            "apollo:r:u:1:ab:cd",
        ] {
            assert_eq!(parse_job_name(name), None, "{name}");
        }
    }
}
