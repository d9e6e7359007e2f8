//! Where attempts' stdout and stderr go: the run's folder in the state directory.

use std::path::PathBuf;

use apollo_core::engine::AttemptLogs;
use apollo_store::RunDir;

/// [`AttemptLogs`] in `runs/<run>/units/<unit>/<attempt>/`.
pub(crate) struct RunLogs {
    pub(crate) run: RunDir,
}

impl AttemptLogs for RunLogs {
    fn log_dir(&self, unit: &str, attempt: u32) -> Result<PathBuf, String> {
        self.run
            .attempt_dir(unit, attempt)
            .map(apollo_store::AttemptDir::into_path)
            .map_err(|error| error.to_string())
    }

    fn executor_dir(&self, executor: &str) -> Option<PathBuf> {
        self.run.executor_dir(executor).ok()
    }
}
