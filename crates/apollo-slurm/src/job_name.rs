//! The job name: `apollo:<run id>:<unit>:<attempt>`. It lets apollo find a job again with no
//! recorded job id (apollo may die between `sbatch` returning and `unit_submitted` being
//! durable). `:` appears neither in run ids nor in unit names (`[A-Za-z0-9_.-]+`), so the
//! name splits back unambiguously.

/// The prefix of every job name apollo gives.
pub const PREFIX: &str = "apollo:";

/// The job name of `attempt` of `unit` in run `run_id`.
pub fn job_name(run_id: &str, unit: &str, attempt: u32) -> String {
    format!("{PREFIX}{run_id}:{unit}:{attempt}")
}

/// The run id, unit and attempt a job name carries; `None` for a name apollo did not give.
pub fn parse_job_name(name: &str) -> Option<(&str, &str, u32)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (run_id, rest) = rest.split_once(':')?;
    let (unit, attempt) = rest.rsplit_once(':')?;
    if run_id.is_empty() || unit.is_empty() || unit.contains(':') {
        return None;
    }
    Some((run_id, unit, attempt.parse().ok()?))
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
        ] {
            assert_eq!(parse_job_name(name), None, "{name}");
        }
    }
}
