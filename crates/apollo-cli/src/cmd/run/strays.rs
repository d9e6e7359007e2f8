//! The stray sweep that matches apollo-exec's process executor: processes that escaped their
//! unit's process group, found by their `APOLLO_RUN_KEY` (the state directory and the run).

use std::path::{Path, PathBuf};

use apollo_runner::{StraySweep, SweepError};
use apollo_store::RunId;

/// [`StraySweep`] through `apollo_exec::kill_stray_processes_in`, for the runs of one state
/// directory: the executor that runs them is made with the same [`ProcessSweep::state_dir`].
pub(crate) struct ProcessSweep {
    state_dir: PathBuf,
}

impl ProcessSweep {
    /// The sweep of `state_path`'s runs.
    pub(crate) fn new(state_path: &Path) -> Self {
        Self {
            state_dir: key_path(state_path),
        }
    }

    /// The state directory as the run key names it (give it to
    /// `apollo_exec::ExecOptions::state_dir`).
    pub(crate) fn state_dir(&self) -> &Path {
        &self.state_dir
    }
}

impl StraySweep for ProcessSweep {
    fn sweep(&self, run: &RunId) -> Result<u32, SweepError> {
        Ok(apollo_exec::kill_stray_processes_in(
            &self.state_dir,
            run.as_str(),
        )?)
    }
}

/// One name for a state directory, however it was reached (a relative path, a symbolic link
/// on the way): its folder's canonical path and its own name, so that a state directory not
/// made yet has the name it will have.
fn key_path(state_path: &Path) -> PathBuf {
    let absolute = crate::state::absolute(state_path);
    match (absolute.parent(), absolute.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map_or_else(|_| absolute.clone(), |parent| parent.join(name)),
        _ => absolute,
    }
}
