//! The state directory: its layout, runs, attempt log folders and content-addressed blobs.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::fsutil::{create_dir_all_durable, fsync_dir, random_hex, write_file_atomic};
use crate::lock::{LockHolder, StateLock};
use crate::run_id::RunId;

/// An Apollo state directory (by default `.apollo/` beside the config):
///
/// ```text
/// lock                                   flock()ed by the one apollo writing here; never deleted
/// runs/<run-id>/journal/000001.log ...   the run's journal segments
/// runs/<run-id>/units/<unit>/<attempt>/{stdout,stderr}
/// blobs/sha256/ab/cdef...                content-addressed files (definition snapshots, inputs)
/// ```
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

/// One run's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    id: RunId,
    path: PathBuf,
}

impl RunDir {
    /// The run's id.
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// The run's folder (`runs/<run-id>`); pass it to the journal writer and reader.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder of the run's journal segments.
    pub fn journal_dir(&self) -> PathBuf {
        self.path.join("journal")
    }

    /// The folder of the run's captured unit output.
    pub fn units_dir(&self) -> PathBuf {
        self.path.join("units")
    }

    /// The folder for one attempt's captured output (`units/<unit>/<attempt>`). It is not
    /// created here: the executor creates it when the attempt has output to keep (a quick,
    /// silent attempt leaves no folder). Captured output is not part of the journal's
    /// durability promise (the unit writes it, nothing fsyncs it), so the folder is never
    /// fsynced. `unit` must be a plain name (`[A-Za-z0-9_.-]+`, not `.` or `..`): it becomes a
    /// path component.
    pub fn attempt_log_dir(&self, unit: &str, attempt: u32) -> Result<PathBuf, StoreError> {
        let valid = !unit.is_empty()
            && unit != "."
            && unit != ".."
            && unit
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b"_.-".contains(&byte));
        if !valid {
            return Err(StoreError::invalid(format!(
                "unit name `{unit}` cannot be used as a folder name (allowed: A-Z a-z 0-9 _ . -)"
            )));
        }
        let mut dir = self.path.join("units");
        dir.push(unit);
        dir.push(attempt.to_string());
        Ok(dir)
    }
}

/// Process-wide memory of the last run id made, so two ids made in the same second by this
/// process differ even before either run's folder exists.
static LAST_RUN_ID: Mutex<Option<RunId>> = Mutex::new(None);

/// Whether `journal_dir` holds at least one record after its first segment's header. A run
/// without one recorded nothing — apollo was killed (or failed) while creating it, before its
/// `run_started` was acknowledged — so it is not a run, and not a corrupt one either.
fn has_records(journal_dir: &Path) -> bool {
    use std::io::Read;
    let Ok(entries) = fs::read_dir(journal_dir) else {
        return false;
    };
    let first_segment = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.ends_with(".log") && !name.starts_with('.'))
        })
        .min();
    let Some(first_segment) = first_segment else {
        return false;
    };
    // The header and the first record are short lines: two newlines within the first 64 KiB
    // (a record is at most 16 MiB, so read on until a second newline or the end).
    let Ok(mut file) = fs::File::open(&first_segment) else {
        return false;
    };
    let mut buffer = vec![0u8; 64 * 1024];
    let mut newlines = 0;
    loop {
        match file.read(&mut buffer) {
            Ok(0) | Err(_) => return false,
            Ok(n_read) => {
                newlines += buffer[..n_read]
                    .iter()
                    .filter(|&&byte| byte == b'\n')
                    .count();
                if newlines >= 2 {
                    return true;
                }
            }
        }
    }
}

impl StateDir {
    /// Opens the state directory at `root`, creating it and its layout (`runs/`, `blobs/sha256/`,
    /// `lock`) when missing. New folders are fsynced into their parents.
    pub fn open_or_create(root: impl AsRef<Path>) -> Result<Self, StoreError> {
        let root = root.as_ref().to_path_buf();
        if root.exists() && !root.is_dir() {
            return Err(StoreError::invalid(format!(
                "state directory {} exists and is not a folder",
                root.display()
            )));
        }
        create_dir_all_durable(&root.join("runs"))?;
        create_dir_all_durable(&root.join("blobs").join("sha256"))?;
        let lock = root.join("lock");
        if !lock.exists() {
            fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&lock)
                .map_err(|source| StoreError::io("create lock file", &lock, source))?;
            fsync_dir(&root)?;
        }
        Ok(Self { root })
    }

    /// Opens an existing state directory without creating anything (read-only commands).
    pub fn open_existing(root: impl AsRef<Path>) -> Result<Self, StoreError> {
        let root = root.as_ref().to_path_buf();
        if !root.join("runs").is_dir() {
            return Err(StoreError::NotFound {
                what: format!("state directory {} (no runs/ folder)", root.display()),
            });
        }
        Ok(Self { root })
    }

    /// The state directory's root.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The `runs/` folder.
    pub fn runs_dir(&self) -> PathBuf {
        self.root.join("runs")
    }

    /// The lock file.
    pub fn lock_path(&self) -> PathBuf {
        self.root.join("lock")
    }

    /// Takes the single-writer lock. Without `wait`, fails at once with
    /// [`StoreError::Locked`] naming the holder's pid and host; with `wait`, blocks until the
    /// holder releases it. The pid and host of this process are written into the lock file.
    pub fn lock(&self, wait: bool) -> Result<StateLock, StoreError> {
        StateLock::acquire(&self.lock_path(), wait)
    }

    /// Who holds the lock, if another open file description (another apollo) holds it now.
    pub fn lock_holder(&self) -> Result<Option<LockHolder>, StoreError> {
        StateLock::probe(&self.lock_path())
    }

    /// A fresh run id for a run starting now.
    pub fn new_run_id(&self) -> RunId {
        self.new_run_id_at(Utc::now())
    }

    /// A fresh run id for a run starting at `now`: the time, then a random suffix, raised
    /// above every suffix already used for that second (in `runs/` or by this process) so ids
    /// stay unique and in creation order within a second.
    pub fn new_run_id_at(&self, now: DateTime<Utc>) -> RunId {
        let mut last = LAST_RUN_ID
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut now = now;
        loop {
            let time_part = RunId::from_parts(now, 0).time_part().to_owned();
            let mut floor: Option<u16> = last
                .as_ref()
                .filter(|id| id.time_part() == time_part)
                .map(RunId::suffix);
            if let Ok(entries) = fs::read_dir(self.runs_dir()) {
                for entry in entries.flatten() {
                    if let Some(id) = entry
                        .file_name()
                        .to_str()
                        .and_then(|name| name.parse::<RunId>().ok())
                        && id.time_part() == time_part
                    {
                        floor = Some(floor.map_or(id.suffix(), |f| f.max(id.suffix())));
                    }
                }
            }
            let random = u16::from_str_radix(&random_hex(2), 16).unwrap_or(0);
            // The first id of a second starts in the lower half, later ones step up by 1 to
            // 16: at least 2048 ids fit in a second, and the randomness makes two processes
            // rarely pick the same one (create_run refuses an existing id in any case).
            let suffix = match floor {
                None => Some(random % 0x8000),
                Some(floor) if floor >= 0xffff - 16 => None,
                Some(floor) => Some(floor + 1 + random % 16),
            };
            match suffix {
                Some(suffix) => {
                    let id = RunId::from_parts(now, suffix);
                    *last = Some(id.clone());
                    return id;
                }
                // Every suffix of this second is taken: use the next second.
                None => now += chrono::Duration::seconds(1),
            }
        }
    }

    /// Creates the folder of a new run (`runs/<id>/journal`, `runs/<id>/units`), durably.
    /// Fails if the run exists already.
    pub fn create_run(&self, id: &RunId) -> Result<RunDir, StoreError> {
        let path = self.runs_dir().join(id.as_str());
        if path.exists() {
            return Err(StoreError::invalid(format!("run {id} already exists")));
        }
        // Built under a temporary name and renamed into place, so a kill at any moment leaves
        // either no run or a run folder with its `journal/` and `units/` folders. (A hidden
        // name never parses as a run id: readers skip it.)
        let staging = self.runs_dir().join(format!(".new-{id}"));
        if staging.exists() {
            fs::remove_dir_all(&staging)
                .map_err(|source| StoreError::io("remove stale run folder", &staging, source))?;
        }
        create_dir_all_durable(&staging.join("journal"))?;
        create_dir_all_durable(&staging.join("units"))?;
        match fs::rename(&staging, &path) {
            Ok(()) => {}
            Err(source) => return Err(StoreError::io("create run folder", &path, source)),
        }
        fsync_dir(&self.runs_dir())?;
        Ok(RunDir {
            id: id.clone(),
            path,
        })
    }

    /// An existing run's folder.
    pub fn run_dir(&self, id: &RunId) -> Result<RunDir, StoreError> {
        let path = self.runs_dir().join(id.as_str());
        if !path.is_dir() {
            return Err(StoreError::NotFound {
                what: format!("run {id} (no folder {})", path.display()),
            });
        }
        Ok(RunDir {
            id: id.clone(),
            path,
        })
    }

    /// The ids of every run, oldest first (folders whose name is not a run id are ignored).
    pub fn run_ids(&self) -> Result<Vec<RunId>, StoreError> {
        let runs_dir = self.runs_dir();
        let entries =
            fs::read_dir(&runs_dir).map_err(|source| StoreError::io("list", &runs_dir, source))?;
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| StoreError::io("list", &runs_dir, source))?;
            // A run that recorded nothing is not a run (see `has_records`).
            if let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<RunId>().ok())
                && entry.path().is_dir()
                && has_records(&entry.path().join("journal"))
            {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// The folder for one attempt's captured output (`runs/<run>/units/<unit>/<attempt>`); see
    /// [`RunDir::attempt_log_dir`]. Errors if the run does not exist.
    pub fn attempt_log_dir(
        &self,
        run: &RunId,
        unit: &str,
        attempt: u32,
    ) -> Result<PathBuf, StoreError> {
        self.run_dir(run)?.attempt_log_dir(unit, attempt)
    }

    fn blob_path(&self, hash: &str) -> Result<PathBuf, StoreError> {
        if hash.len() != 64
            || !hash
                .bytes()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(StoreError::invalid(format!(
                "`{hash}` is not a SHA-256 hash (64 lowercase hex digits)"
            )));
        }
        Ok(self
            .root
            .join("blobs")
            .join("sha256")
            .join(&hash[..2])
            .join(&hash[2..]))
    }

    /// Stores `bytes` under their SHA-256 (hex), which it returns. Idempotent: storing the
    /// same bytes again finds them there. Written through a temporary file, fsynced, renamed.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let hash = apollo_core::hash::to_hex(&Sha256::digest(bytes));
        let path = self.blob_path(&hash)?;
        if path.is_file() {
            return Ok(hash);
        }
        if let Some(parent) = path.parent() {
            create_dir_all_durable(parent)?;
        }
        write_file_atomic(&path, bytes)?;
        Ok(hash)
    }

    /// Reads the blob with this SHA-256, checking that its content still has that hash.
    pub fn read_blob(&self, hash: &str) -> Result<Vec<u8>, StoreError> {
        let path = self.blob_path(hash)?;
        let mut bytes = Vec::new();
        match fs::File::open(&path).and_then(|mut file| file.read_to_end(&mut bytes)) {
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound {
                    what: format!("blob {hash}"),
                });
            }
            Err(source) => return Err(StoreError::io("read", &path, source)),
        }
        let actual = apollo_core::hash::to_hex(&Sha256::digest(&bytes));
        if actual != hash {
            return Err(StoreError::corruption(
                &path,
                0,
                None,
                format!("the blob's content hashes to {actual}, not to its name"),
            ));
        }
        Ok(bytes)
    }

    /// The path of a blob, if it is stored.
    pub fn blob_file(&self, hash: &str) -> Result<Option<PathBuf>, StoreError> {
        let path = self.blob_path(hash)?;
        Ok(path.is_file().then_some(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_layout_is_created_and_the_lock_file_kept() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
        assert!(state.runs_dir().is_dir());
        assert!(state.path().join("blobs/sha256").is_dir());
        assert!(state.lock_path().is_file());
        drop(state.lock(false).unwrap());
        assert!(state.lock_path().is_file());
    }

    #[test]
    fn a_run_whose_creation_was_cut_short_is_not_listed() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        // Killed after the run folder was created, before its first segment.
        let id = state.new_run_id();
        state.create_run(&id).unwrap();
        assert!(state.run_ids().unwrap().is_empty());
        // Killed while the folder was still being built under its temporary name.
        let staging = state
            .runs_dir()
            .join(format!(".new-{}", state.new_run_id()));
        std::fs::create_dir_all(staging.join("journal")).unwrap();
        assert!(state.run_ids().unwrap().is_empty());
        assert!(state.list_runs().unwrap().is_empty());
        // Failed (or killed) before `run_started` was acknowledged: a header, no record.
        let run = state.create_run(&state.new_run_id()).unwrap();
        let options = crate::WriterOptions {
            durability: crate::Durability::None,
            ..crate::WriterOptions::default()
        };
        let mut writer =
            crate::JournalWriter::create(run.path(), run.id().as_str(), options).unwrap();
        assert!(state.run_ids().unwrap().is_empty());
        let event = apollo_core::Event::UnitMarked(apollo_core::event::UnitMarked {
            unit: "a".into(),
            attempt: 1,
            verdict: apollo_core::event::Verdict::Failed,
            by: "test".into(),
            note: None,
        });
        writer.append_batch(&[event]).unwrap();
        assert_eq!(state.run_ids().unwrap(), vec![run.id().clone()]);
    }

    #[test]
    fn run_ids_made_in_the_same_second_are_unique_and_ordered() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 2, 15, 7).unwrap();
        let mut ids = Vec::new();
        for _ in 0..50 {
            let id = state.new_run_id_at(now);
            state.create_run(&id).unwrap();
            ids.push(id);
        }
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, ids, "ids must be unique and increasing");
        assert!(ids.iter().all(|id| id.started_at() == now));
        assert!(state.create_run(&ids[0]).is_err());
    }

    #[test]
    fn blobs_are_content_addressed_idempotent_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let hash = state.put_blob(b"definition").unwrap();
        assert_eq!(state.put_blob(b"definition").unwrap(), hash);
        assert_eq!(state.read_blob(&hash).unwrap(), b"definition");
        let path = state.blob_file(&hash).unwrap().unwrap();
        assert!(path.ends_with(format!("{}/{}", &hash[..2], &hash[2..])));
        fs::write(&path, b"tampered").unwrap();
        assert!(matches!(
            state.read_blob(&hash),
            Err(StoreError::Corruption { .. })
        ));
        assert!(matches!(
            state.read_blob(&"0".repeat(64)),
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            state.read_blob("../etc"),
            Err(StoreError::InvalidInput { .. })
        ));
    }

    #[test]
    fn attempt_log_dirs_refuse_path_tricks() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let id = state.new_run_id();
        state.create_run(&id).unwrap();
        let logs = state.attempt_log_dir(&id, "fetch_data", 2).unwrap();
        assert!(logs.ends_with("units/fetch_data/2"));
        assert!(!logs.exists(), "created only when there is output");
        for bad in ["", "..", "a/b", "x y"] {
            assert!(state.attempt_log_dir(&id, bad, 1).is_err(), "{bad}");
        }
    }
}
