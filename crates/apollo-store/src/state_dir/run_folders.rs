//! A run's folders beside its attempts': an executor's own (Slurm's job arrays) and the
//! pipeline hooks' logs, each under a plain name, checked like an attempt's folder.

use std::path::PathBuf;

use super::{HOOKS_DIR, RunDir};
use crate::attempt_dir::check_log_dir;
use crate::error::StoreError;

impl RunDir {
    /// The run's folder for an executor's own files (`slurm/`: a job array's submission),
    /// beside `units/`. `executor` must be a plain name (`slurm`, …).
    pub fn executor_dir(&self, executor: &str) -> Result<PathBuf, StoreError> {
        let valid = !executor.is_empty()
            && executor
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_');
        if !valid {
            return Err(StoreError::invalid(format!(
                "executor name `{executor}` cannot be used as a folder name (allowed: A-Z a-z 0-9 _)"
            )));
        }
        Ok(self.path.join(executor))
    }

    /// The folder for a pipeline hook's captured output (`hooks/<hook>`), checked like an
    /// attempt's (see [`RunDir::attempt_dir`]): `hooks/` and `hooks/<hook>/` are missing or
    /// real folders, and their `stdout` and `stderr` missing or regular files. `hook` must be a
    /// plain name (`on_finish`, …).
    pub fn hook_log_dir(&self, hook: &str) -> Result<PathBuf, StoreError> {
        let valid = !hook.is_empty()
            && hook
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_');
        if !valid {
            return Err(StoreError::invalid(format!(
                "hook name `{hook}` cannot be used as a folder name (allowed: A-Z a-z 0-9 _)"
            )));
        }
        let dir = self.path.join(HOOKS_DIR).join(hook);
        check_log_dir(&self.path, &dir)?;
        Ok(dir)
    }
}
