//! The cluster the Slurm tests need, and the guard that cancels their jobs.
#![allow(clippy::disallowed_methods)] // The guard runs squeue and scancel.

use std::path::PathBuf;
use std::process::Command;

use apollo_core::testing::require;
use apollo_slurm::testing::{HOW_TO_GET_A_CLUSTER, cluster_is_up};

use crate::support::Apollo;

/// Whether a cluster is up (else `SKIPPED`, or a failure under `CI=true`).
pub(crate) fn cluster() -> bool {
    require(cluster_is_up(), "a Slurm cluster", HOW_TO_GET_A_CLUSTER)
}

/// Cancels, when dropped, every Slurm job whose name carries one of the project's run ids.
pub(crate) struct JobGuard {
    /// The state directory whose runs' jobs to cancel.
    pub(crate) state_dir: PathBuf,
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        let runs: Vec<String> = std::fs::read_dir(self.state_dir.join("runs"))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let Ok(output) = Command::new("squeue")
            .args(["--me", "--noheader", "--format=%i|%j"])
            .output()
        else {
            return;
        };
        let ids: Vec<String> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.split_once('|'))
            .filter(|(_, name)| {
                runs.iter()
                    .any(|run| name.starts_with(&format!("apollo:{run}:")))
            })
            .map(|(id, _)| id.trim().to_owned())
            .collect();
        if !ids.is_empty() {
            let _ = Command::new("scancel").args(&ids).status();
        }
    }
}

pub(crate) fn guard(apollo: &Apollo) -> JobGuard {
    JobGuard {
        state_dir: apollo.path(".apollo"),
    }
}
