//! [`AttemptDir`]: one attempt's folder in a run (`units/<unit>/<attempt>`), the only way to
//! it (DESIGN §18: `StateDir` → `RunDir` → `AttemptDir`, names encoded once, checked once).

use std::path::{Path, PathBuf};

use rustix::fs::FileType;

use crate::error::StoreError;
use crate::safe_dir::describe;

/// The folder of a run's attempts, below the run folder.
const UNITS_DIR: &str = "units";

/// One attempt's folder: where its `stdout` and `stderr` (and an executor's small files) are.
///
/// Made only by [`RunDir::attempt_dir`](crate::RunDir::attempt_dir) (or
/// [`StateDir::attempt_dir`](crate::StateDir::attempt_dir)), which encodes the unit's name for
/// the disk — a fan-out instance `load[eu,a]` is stored as `load__eu__a`
/// ([`apollo_core::model::unit_folder_name`]) — and checks it: a plain folder name, and
/// `units/`, `units/<unit>/` and the attempt's folder missing or real folders (never a
/// symbolic link), its `stdout` and `stderr` missing or regular files. The folder is not
/// created here: the executor creates it when the attempt has output to keep (a quick, silent
/// attempt leaves none). Captured output is not part of the journal's durability promise (the
/// unit writes it, nothing fsyncs it), so the folder is never fsynced.
///
/// ```
/// # let temp = tempfile::tempdir()?;
/// let state = apollo_store::StateDir::open_or_create(temp.path())?;
/// let run = state.new_run_id();
/// state.create_run(&run)?;
/// let attempt = state.run_dir(&run)?.attempt_dir("load[eu]", 2)?;
/// assert_eq!((attempt.unit(), attempt.attempt()), ("load[eu]", 2));
/// assert!(attempt.path().ends_with("units/load__eu/2"));
/// assert!(attempt.stream("stdout").ends_with("units/load__eu/2/stdout"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptDir {
    unit: String,
    attempt: u32,
    path: PathBuf,
}

impl AttemptDir {
    /// The folder of attempt `attempt` of `unit` in the run folder `run_dir`, checked (see the
    /// type's docs).
    pub(crate) fn new(run_dir: &Path, unit: &str, attempt: u32) -> Result<Self, StoreError> {
        let folder = apollo_core::model::unit_folder_name(unit);
        let valid = !folder.is_empty()
            && folder != "."
            && folder != ".."
            && folder
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b"_.-".contains(&byte));
        if !valid {
            return Err(StoreError::invalid(format!(
                "unit name `{folder}` cannot be used as a folder name (allowed: A-Z a-z 0-9 _ . -)"
            )));
        }
        let mut path = run_dir.join(UNITS_DIR);
        path.push(&*folder);
        path.push(attempt.to_string());
        check_log_dir(run_dir, &path)?;
        Ok(Self {
            unit: unit.to_owned(),
            attempt,
            path,
        })
    }

    /// The unit's name as the journal records it (`load[eu]`, not its folder's `load__eu`).
    pub fn unit(&self) -> &str {
        &self.unit
    }

    /// The attempt number, from 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The folder (`runs/<run>/units/<unit>/<attempt>`): what an executor is given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder, owned.
    pub fn into_path(self) -> PathBuf {
        self.path
    }

    /// The file of captured output `stream` (`stdout` or `stderr`) in the folder; open it with
    /// [`open_regular_file`](crate::open_regular_file).
    pub fn stream(&self, stream: &str) -> PathBuf {
        self.path.join(stream)
    }
}

/// Checks the attempt log folder `dir` before the executor creates or writes it: each of
/// `units/`, `units/<unit>/`, `units/<unit>/<attempt>/` (or a hook's `hooks/`,
/// `hooks/<hook>/`) below `run_dir` is missing or a real folder, and the attempt's `stdout` and
/// `stderr` are missing or regular files. A symbolic link there would send the unit's output
/// (and apollo's writes) outside the state directory. A few `lstat` calls per attempt.
pub(crate) fn check_log_dir(run_dir: &Path, dir: &Path) -> Result<(), StoreError> {
    let lstat_type = |path: &Path| match rustix::fs::lstat(path) {
        Ok(stat) => Ok(Some(FileType::from_raw_mode(stat.st_mode))),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(errno) => Err(StoreError::io("stat", path, errno.into())),
    };
    let mut expected = Vec::new();
    for ancestor in dir.ancestors() {
        if ancestor == run_dir {
            break;
        }
        expected.push((ancestor.to_path_buf(), FileType::Directory));
    }
    expected.reverse();
    expected.push((dir.join("stdout"), FileType::RegularFile));
    expected.push((dir.join("stderr"), FileType::RegularFile));
    for (path, want) in expected {
        match lstat_type(&path)? {
            None if want == FileType::Directory => return Ok(()),
            None => {}
            Some(found) if found == want => {}
            Some(found) => {
                return Err(StoreError::UnexpectedFileType {
                    path,
                    expected: describe(want),
                    found: describe(found),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Test code: a failed step fails the test.

    use crate::StateDir;

    #[test]
    fn a_fan_out_instance_resolves_to_its_encoded_folder_and_keeps_its_journal_name() {
        let temp = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(temp.path()).unwrap();
        let run = state.new_run_id();
        state.create_run(&run).unwrap();
        let attempt = state.attempt_dir(&run, "load[eu,a]", 3).unwrap();
        assert_eq!(attempt.unit(), "load[eu,a]");
        assert_eq!(attempt.attempt(), 3);
        let run_path = state.run_dir(&run).unwrap().path().to_path_buf();
        assert_eq!(attempt.path(), run_path.join("units/load__eu__a/3"));
        assert_eq!(
            attempt.stream("stderr"),
            run_path.join("units/load__eu__a/3/stderr")
        );
        // The same folder however it is reached: through the state directory or the run.
        let via_run = state.run_dir(&run).unwrap().attempt_dir("load[eu,a]", 3);
        assert_eq!(via_run.unwrap(), attempt);
    }

    #[test]
    fn a_name_that_is_no_folder_name_is_refused_also_inside_brackets() {
        let temp = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(temp.path()).unwrap();
        let run = state.new_run_id();
        state.create_run(&run).unwrap();
        for bad in ["", "..", "a/b", "x y", "load[../x]"] {
            assert!(state.attempt_dir(&run, bad, 1).is_err(), "{bad}");
        }
    }
}
