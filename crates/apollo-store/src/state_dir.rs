//! The state directory: its layout, runs, attempt log folders and content-addressed blobs.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::segment::has_records;
use apollo_core::hash::sha256_of_written;
use rustix::fs::FileType;

use crate::fsutil::{create_dir_all_durable, random_hex};
use crate::lock::{LockHolder, StateLock};
use crate::run_id::RunId;
use crate::runs_index::RunsIndex;
use crate::safe_dir::{Access, Dir, describe, explain_efbig};

/// An Apollo state directory (by default `.apollo/` beside the config):
///
/// ```text
/// lock                                   flock()ed by the one apollo writing here; never deleted
/// runs/<run-id>/journal/000001.log ...   the run's journal segments
/// runs/<run-id>/units/<unit>/<attempt>/{stdout,stderr}
/// runs/<run-id>/hooks/summary.json       the run summary pipeline hooks get
/// runs/<run-id>/hooks/<hook>/{stdout,stderr}  a hook's captured output
/// blobs/sha256/ab/cdef...                content-addressed files (definition snapshots, inputs)
/// ```
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
    /// Never take or try the lock, even to tell whether a writer is alive
    /// ([`StateDir::never_locking`]).
    never_lock: bool,
}

/// A run as [`StateDir::ordered_runs`] lists it.
pub(crate) struct ListedRun {
    pub(crate) id: RunId,
    pub(crate) sequence: Option<u64>,
    /// Its summary, from the runs index, when its journal is unchanged since.
    /// Boxed: a listing of thousands of runs holds one pointer per run, not a summary.
    pub(crate) cached: Option<Box<crate::runs::RunSummary>>,
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
    /// fsynced. `unit` must be a plain name (`[A-Za-z0-9_.-]+`, not `.` or `..`), or an
    /// instance of one (`load[eu,a]`, stored as `load__eu__a`, see
    /// [`apollo_core::model::unit_folder_name`]): it becomes a path component.
    pub fn attempt_log_dir(&self, unit: &str, attempt: u32) -> Result<PathBuf, StoreError> {
        // A fan-out instance `load[eu]` is stored as `load__eu` (no brackets on disk).
        let unit = &*apollo_core::model::unit_folder_name(unit);
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
        check_log_dir(&self.path, &dir)?;
        Ok(dir)
    }

    /// The folder for a pipeline hook's captured output (`hooks/<hook>`), checked like an
    /// attempt's (see [`RunDir::attempt_log_dir`]): `hooks/` and `hooks/<hook>/` are missing or
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

    /// Writes the run summary hooks are given (`hooks/summary.json`) and returns its path.
    /// `hooks/` is created under the run folder's descriptor and a symbolic link there is
    /// refused ([`StoreError::UnexpectedFileType`]); the file is written as a temporary and
    /// renamed over whatever is at its name, so a link or a FIFO planted as `summary.json` is
    /// replaced, never written through or blocked on. Nothing is fsynced: the summary is read
    /// by the hooks that run right after, and a crash before they run runs them again on the
    /// resume, which writes it again.
    pub fn write_hook_summary(&self, summary: &[u8]) -> Result<PathBuf, StoreError> {
        let (Some(runs), Some(name)) = (self.path.parent(), self.path.file_name()) else {
            return Err(StoreError::invalid(format!(
                "{} is not a run folder",
                self.path.display()
            )));
        };
        // The run folder itself is opened without following a link too (as `run_dir` checked
        // it), so the summary lands in this state directory or nowhere.
        Dir::open(runs)?
            .subdir(name)?
            .create_subdir(HOOKS_DIR, false)?
            .write_file_atomic(HOOK_SUMMARY, summary, false)?;
        Ok(self.path.join(HOOKS_DIR).join(HOOK_SUMMARY))
    }
}

/// The most [`StateDir::read_blob`] reads into memory: a definition snapshot of a million
/// units is a few hundred MB; a bigger file under a blob's name is damage (a planted sparse
/// file), refused before it is read.
const MAX_BLOB_READ: u64 = 1 << 30;

/// A run's folder of hook output and the summary hooks get (`runs/<id>/hooks`).
const HOOKS_DIR: &str = "hooks";
/// The run summary hooks get the path of, in [`HOOKS_DIR`].
const HOOK_SUMMARY: &str = "summary.json";

/// Checks the attempt log folder `dir` before the executor creates or writes it: each of
/// `units/`, `units/<unit>/`, `units/<unit>/<attempt>/` (or a hook's `hooks/`,
/// `hooks/<hook>/`) below `run_dir` is missing or a real folder, and the attempt's `stdout` and `stderr` are missing or regular files. A symbolic
/// link there would send the unit's output (and apollo's writes) outside the state directory.
/// A few `lstat` calls per attempt.
fn check_log_dir(run_dir: &Path, dir: &Path) -> Result<(), StoreError> {
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

/// Opens a file of the state directory for reading, such as an attempt's captured `stdout` or
/// `stderr` (`apollo logs`): only a regular file is opened, never through a symbolic link and
/// without blocking, so a FIFO or a link to `/dev/zero` planted there is refused
/// ([`StoreError::UnexpectedFileType`]) instead of blocking or streaming forever. `Ok(None)`:
/// there is no such file.
pub fn open_regular_file(path: &Path) -> Result<Option<fs::File>, StoreError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(StoreError::invalid(format!(
            "{} is not a file name",
            path.display()
        )));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    match Dir::open(parent).and_then(|dir| dir.open_file(name, Access::Read)) {
        Ok(file) => Ok(Some(file)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Process-wide memory of the last run id made, so two ids made in the same second by this
/// process differ even before either run's folder exists.
static LAST_RUN_ID: Mutex<Option<RunId>> = Mutex::new(None);

/// The folder of the pipelines' latest-run files (see [`StateDir::recorded_latest_run`]).
const LATEST_DIR: &str = "latest";

/// The file in [`LATEST_DIR`] for a pipeline identity: the SHA-256 of the identity, so any
/// identity (a path, an `id:`) is a safe file name.
fn latest_run_file(identity: &str) -> String {
    apollo_core::hash::to_hex(&Sha256::digest(identity.as_bytes()))
}

/// The file in a run's folder holding its sequence number (see [`StateDir::run_sequence`]).
const SEQUENCE_FILE: &str = "sequence";

/// Opens (with `create`, creates) the state directory's fixed folders below its root, never
/// through a symbolic link: `runs/` (which must exist), and `blobs/` and `blobs/sha256/`
/// (which an existing state directory may lack). A link there would send what apollo writes,
/// and what `prune` and eviction delete, to whatever it points to: another project's runs or
/// blobs, which no run here references, so every one of them would look like garbage.
fn open_fixed_folders(root: &Dir, create: bool) -> Result<(), StoreError> {
    let open = |parent: &Dir, name: &str| {
        if create {
            parent.create_subdir(name, true)
        } else {
            parent.subdir(name)
        }
    };
    open(root, "runs")?;
    match open(root, "blobs").and_then(|blobs| open(&blobs, "sha256")) {
        Ok(_) => Ok(()),
        Err(StoreError::NotFound { .. }) if !create => Ok(()),
        Err(error) => Err(error),
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
        let is_new = !root.exists();
        create_dir_all_durable(&root)?;
        if is_new {
            // A new state directory is the user's alone (DESIGN §18): 0700 whatever the umask
            // left. One that exists keeps the modes it has (`apollo verify` warns).
            fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .map_err(|source| StoreError::io("set the permissions of", &root, source))?;
        }
        // Below the root nothing is followed: `runs`, `blobs`, `blobs/sha256` must be folders
        // and `lock` a regular file, or apollo refuses before writing anything.
        let root_dir = Dir::open(&root)?;
        open_fixed_folders(&root_dir, true)?;
        match root_dir.entry_type("lock")? {
            None => {
                root_dir.open_file("lock", Access::ReadWriteCreate)?;
                root_dir.sync()?;
            }
            Some(FileType::RegularFile) => {}
            Some(found) => {
                return Err(StoreError::UnexpectedFileType {
                    path: root.join("lock"),
                    expected: "a regular file",
                    found: describe(found),
                });
            }
        }
        Ok(Self {
            root,
            never_lock: false,
        })
    }

    /// The `runs/` folder, opened (never through a symbolic link).
    fn open_runs_dir(&self) -> Result<Dir, StoreError> {
        Dir::open(&self.root)?.subdir("runs")
    }

    /// The folder of blobs whose hash starts with `prefix`, opened (and created with
    /// `create`), never through a symbolic link.
    fn open_blob_dir(&self, prefix: &str, create: bool) -> Result<Dir, StoreError> {
        let root = Dir::open(&self.root)?;
        if create {
            root.create_subdir("blobs", true)?
                .create_subdir("sha256", true)?
                .create_subdir(prefix, true)
        } else {
            root.subdir("blobs")?.subdir("sha256")?.subdir(prefix)
        }
    }

    /// Opens an existing state directory without creating anything (read-only commands, and
    /// `prune`, `backup`). Its `runs/` and `blobs/` folders are checked as
    /// [`open_or_create`](Self::open_or_create) checks them: a symbolic link or a non-folder
    /// there is refused ([`StoreError::UnexpectedFileType`]).
    pub fn open_existing(root: impl AsRef<Path>) -> Result<Self, StoreError> {
        let state = Self {
            root: root.as_ref().to_path_buf(),
            never_lock: false,
        };
        match state.check_fixed_folders() {
            Err(StoreError::NotFound { .. }) => Err(StoreError::NotFound {
                what: format!("state directory {} (no runs/ folder)", state.root.display()),
            }),
            checked => checked.map(|()| state),
        }
    }

    /// Checks that the state directory's fixed folders are still real folders (see
    /// [`open_fixed_folders`]). `prune`, `backup` and eviction call it before they start,
    /// on a state directory that may have been opened a while ago.
    pub(crate) fn check_fixed_folders(&self) -> Result<(), StoreError> {
        open_fixed_folders(&Dir::open(&self.root)?, false)
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
    ///
    /// Read from `/proc/locks` on a local filesystem. On a network filesystem it tries the
    /// lock for an instant, unless this handle is [`never_locking`](Self::never_locking): then
    /// the holder the lock file records answers, [`LockHolder::unverified`] when it is on
    /// another host.
    pub fn lock_holder(&self) -> Result<Option<LockHolder>, StoreError> {
        if self.never_lock {
            StateLock::probe_without_locking(&self.lock_path())
        } else {
            StateLock::probe(&self.lock_path())
        }
    }

    /// This handle, made never to take or try the state directory's lock — not even for the
    /// instant a probe of a network filesystem's lock takes — for a long-lived reader
    /// (`apollo serve`) polling beside a writer. A run whose writer cannot be checked from
    /// here (on another host) is then [`RunState::Unknown`](crate::RunState::Unknown).
    pub fn never_locking(mut self) -> Self {
        self.never_lock = true;
        self
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
        let runs = self.open_runs_dir()?;
        if runs.entry_type(id.as_str())?.is_some() {
            return Err(StoreError::invalid(format!("run {id} already exists")));
        }
        // Built under a temporary name and renamed into place, so a kill at any moment leaves
        // either no run or a run folder with its `journal/` and `units/` folders. (A hidden
        // name never parses as a run id: readers skip it.)
        let staging_name = format!(".new-{id}");
        let staging = self.runs_dir().join(&staging_name);
        if runs.entry_type(&staging_name)?.is_some() {
            // (remove_dir_all removes a symbolic link itself, never what it points to.)
            fs::remove_dir_all(&staging)
                .map_err(|source| StoreError::io("remove stale run folder", &staging, source))?;
        }
        // The run's place in this state directory's order: one above every run here, whatever
        // the clock says (see `run_ids`).
        let sequence = self.max_sequence()?.map_or(1, |max| max + 1);
        let staged = runs.create_subdir(&staging_name, true)?;
        staged.create_subdir("journal", true)?;
        staged.create_subdir("units", true)?;
        staged.write_file_atomic(SEQUENCE_FILE, format!("{sequence}\n").as_bytes(), true)?;
        runs.rename(&staging_name, id.as_str())?;
        runs.sync()?;
        Ok(RunDir {
            id: id.clone(),
            path,
        })
    }

    /// An existing run's folder. A symbolic link or a file where the folder belongs is refused.
    pub fn run_dir(&self, id: &RunId) -> Result<RunDir, StoreError> {
        let path = self.runs_dir().join(id.as_str());
        match self
            .open_runs_dir()
            .and_then(|runs| runs.subdir(id.as_str()))
        {
            Ok(_) => Ok(RunDir {
                id: id.clone(),
                path,
            }),
            Err(StoreError::NotFound { .. }) => Err(StoreError::NotFound {
                what: format!("run {id} (no folder {})", path.display()),
            }),
            Err(error) => Err(error),
        }
    }

    /// A run's sequence number: its place in the order runs were created in this state
    /// directory (1, 2, …), kept in `runs/<id>/sequence`. `None` for a run created by an apollo
    /// from before sequence numbers (format 1.0/1.1). A file there that is not a regular file
    /// holding a number is [`StoreError::Corruption`] (or `UnexpectedFileType`).
    pub fn run_sequence(&self, id: &RunId) -> Result<Option<u64>, StoreError> {
        let path = self.runs_dir().join(id.as_str()).join(SEQUENCE_FILE);
        let mut file = match self
            .open_runs_dir()
            .and_then(|runs| runs.subdir(id.as_str()))
            .and_then(|run| run.open_file(SEQUENCE_FILE, Access::Read))
        {
            Ok(file) => file,
            Err(StoreError::NotFound { .. }) => return Ok(None),
            Err(error) => return Err(error),
        };
        let mut text = String::new();
        (&mut file)
            .take(64)
            .read_to_string(&mut text)
            .map_err(|source| StoreError::io("read", &path, source))?;
        match text.trim_end_matches('\n').parse::<u64>() {
            Ok(sequence) if sequence > 0 && text.ends_with('\n') => Ok(Some(sequence)),
            _ => Err(StoreError::corruption(
                &path,
                0,
                None,
                "a run's sequence file holds its place in this state directory's creation \
                 order: one positive decimal number and a newline",
            )),
        }
    }

    /// The run that the pipeline with this identity last started here, as recorded by
    /// [`StateDir::set_latest_run`] (`latest/<sha256 of the identity>`); `None` when nothing
    /// was recorded (no run yet, or a state directory from before this record). What it names
    /// need not exist any more: that a pipeline's latest run folder was moved or deleted is
    /// exactly what it is there to tell. Damage (not one run id and a newline) is
    /// [`StoreError::Corruption`].
    pub fn recorded_latest_run(&self, identity: &str) -> Result<Option<RunId>, StoreError> {
        let name = latest_run_file(identity);
        let path = self.root.join(LATEST_DIR).join(&name);
        let mut file = match Dir::open(&self.root)
            .and_then(|root| root.subdir(LATEST_DIR))
            .and_then(|latest| latest.open_file(&name, Access::Read))
        {
            Ok(file) => file,
            Err(StoreError::NotFound { .. }) => return Ok(None),
            Err(error) => return Err(error),
        };
        let mut text = String::new();
        (&mut file)
            .take(256)
            .read_to_string(&mut text)
            .map_err(|source| StoreError::io("read", &path, source))?;
        match text.strip_suffix('\n').map(str::parse::<RunId>) {
            Some(Ok(run)) => Ok(Some(run)),
            _ => Err(StoreError::corruption(
                &path,
                0,
                None,
                "a pipeline's latest-run file must hold one run id and a newline",
            )),
        }
    }

    /// Every run that a pipeline's latest-run file names (see
    /// [`StateDir::recorded_latest_run`]): runs whose `run_started` was acknowledged, so
    /// a journal of theirs that holds no record (cut back to its segment header, emptied,
    /// its `journal/` removed) is damage, never a run that did nothing. Unreadable or damaged
    /// files in `latest/` name nothing here (reading a pipeline's own file reports them).
    pub fn acknowledged_runs(&self) -> Result<std::collections::HashSet<RunId>, StoreError> {
        let latest = match Dir::open(&self.root).and_then(|root| root.subdir(LATEST_DIR)) {
            Ok(latest) => latest,
            Err(StoreError::NotFound { .. }) => return Ok(std::collections::HashSet::new()),
            Err(error) => return Err(error),
        };
        let mut runs = std::collections::HashSet::new();
        for name in latest.entry_names()? {
            let Ok(mut file) = latest.open_file(&name, Access::Read) else {
                continue;
            };
            let mut text = String::new();
            if (&mut file).take(256).read_to_string(&mut text).is_ok()
                && let Some(Ok(run)) = text.strip_suffix('\n').map(str::parse::<RunId>)
            {
                runs.insert(run);
            }
        }
        Ok(runs)
    }

    /// Records `run` as the run the pipeline with this identity last started (see
    /// [`StateDir::recorded_latest_run`]): durably, by an atomic rename, after the run's `run_started`
    /// is in its journal.
    pub fn set_latest_run(&self, identity: &str, run: &RunId) -> Result<(), StoreError> {
        Dir::open(&self.root)?
            .create_subdir(LATEST_DIR, true)?
            .write_file_atomic(
                &latest_run_file(identity),
                format!("{run}\n").as_bytes(),
                true,
            )
    }

    /// Forgets `run` as the pipeline's latest (see [`StateDir::recorded_latest_run`]) once it
    /// succeeded: a finished run needs no resume, so its folder may then be deleted without
    /// the next run refusing to start. Nothing happens if another run is recorded by now.
    pub fn clear_latest_run(&self, identity: &str, run: &RunId) -> Result<(), StoreError> {
        if self.recorded_latest_run(identity)?.as_ref() != Some(run) {
            return Ok(());
        }
        Dir::open(&self.root)?
            .subdir(LATEST_DIR)?
            .remove_file(latest_run_file(identity))
    }

    /// The highest sequence number of any run folder (runs that recorded nothing included,
    /// so a number is never given twice while its folder exists).
    fn max_sequence(&self) -> Result<Option<u64>, StoreError> {
        let runs_dir = self.runs_dir();
        let entries =
            fs::read_dir(&runs_dir).map_err(|source| StoreError::io("list", &runs_dir, source))?;
        let mut max = None;
        for entry in entries {
            let entry = entry.map_err(|source| StoreError::io("list", &runs_dir, source))?;
            // Only real folders (a symbolic link there is refused where the run is used).
            if let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<RunId>().ok())
                && entry.file_type().is_ok_and(|kind| kind.is_dir())
                && let Some(sequence) = self.run_sequence(&id)?
            {
                max = max.max(Some(sequence));
            }
        }
        Ok(max)
    }

    /// The ids of every run, oldest first (folders whose name is not a run id are ignored).
    ///
    /// "Oldest" is by creation order in this state directory, never by the clock: by each
    /// run's sequence number (see [`StateDir::run_sequence`]), so a clock stepped back (an NTP
    /// correction, a restored VM snapshot) cannot make an older run look newer. Runs without
    /// a sequence number (made by an apollo from before them) come first, by id (their start
    /// time): they were made before any run that has one.
    pub fn run_ids(&self) -> Result<Vec<RunId>, StoreError> {
        let index = RunsIndex::load(&self.root);
        Ok(self
            .ordered_runs(&index)?
            .into_iter()
            .map(|run| run.id)
            .collect())
    }

    /// The runs in creation order (see [`StateDir::run_ids`]), each with its sequence number
    /// and, when `index` holds a fresh one, its summary (a finished run whose journal is
    /// unchanged: no journal is opened for it).
    pub(crate) fn ordered_runs(&self, index: &RunsIndex) -> Result<Vec<ListedRun>, StoreError> {
        let runs_dir = self.runs_dir();
        let acknowledged = self.acknowledged_runs()?;
        let entries =
            fs::read_dir(&runs_dir).map_err(|source| StoreError::io("list", &runs_dir, source))?;
        let mut runs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| StoreError::io("list", &runs_dir, source))?;
            let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<RunId>().ok())
            else {
                continue;
            };
            // A symbolic link where a run folder belongs is listed (opening the run refuses
            // it) but has no place in the order.
            let real_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
            if real_dir && let Some((sequence, summary)) = index.get(&id, &entry.path()) {
                runs.push(ListedRun {
                    id,
                    sequence,
                    cached: Some(Box::new(summary)),
                });
                continue;
            }
            // A run that recorded nothing is not a run (see `has_records`), unless its
            // `run_started` was acknowledged: then its records were lost, and it is listed
            // (as damaged) rather than skipped.
            if entry.path().is_dir()
                && (has_records(&entry.path().join("journal")) || acknowledged.contains(&id))
            {
                let sequence = if real_dir {
                    self.run_sequence(&id)?
                } else {
                    None
                };
                runs.push(ListedRun {
                    id,
                    sequence,
                    cached: None,
                });
            }
        }
        runs.sort_by(|a, b| (a.sequence, &a.id).cmp(&(b.sequence, &b.id)));
        Ok(runs)
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

    /// The folder blob `hash` goes in, created if need be; `None` when that blob is stored
    /// already. Anything but a regular file in its place is an error.
    fn folder_of_new_blob(&self, hash: &str) -> Result<Option<Dir>, StoreError> {
        let path = self.blob_path(hash)?;
        let dir = self.open_blob_dir(&hash[..2], true)?;
        match dir.entry_type(&hash[2..])? {
            Some(FileType::RegularFile) => Ok(None),
            Some(found) => Err(StoreError::UnexpectedFileType {
                path,
                expected: "a regular file",
                found: describe(found),
            }),
            None => Ok(Some(dir)),
        }
    }

    /// Stores `bytes` under their SHA-256 (hex), which it returns. Idempotent: storing the
    /// same bytes again finds them there. Written through a temporary file, fsynced, renamed.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let hash = apollo_core::hash::to_hex(&Sha256::digest(bytes));
        let Some(dir) = self.folder_of_new_blob(&hash)? else {
            return Ok(hash);
        };
        dir.write_file_atomic(&hash[2..], bytes, true)?;
        Ok(hash)
    }

    /// [`put_blob`](Self::put_blob) of content too big to hold in memory at once (the
    /// definition snapshot of 100,000 units is ~40 MB), which `write` produces. When the caller
    /// knows its hash (`known`) and a blob of that hash is stored, nothing is written (the blob
    /// is trusted to hold the content); when none is, the content is written into the blob's
    /// temporary file and hashed on the way, and a hash other than `known` (or a `known` that
    /// is no hash at all) makes it stored under its own, as content of unknown hash is: written
    /// once into a temporary file in `blobs/tmp/` and hashed on the way, then renamed to its
    /// blob's name, or removed when that blob is stored already. Under the state directory's
    /// lock (`blobs/tmp/` is swept under it): `_lock` is the proof.
    pub fn put_blob_streamed(
        &self,
        _lock: &StateLock,
        known: Option<&str>,
        write: impl Fn(&mut dyn Write) -> io::Result<()>,
    ) -> Result<String, StoreError> {
        let Some(hash) = known else {
            return self.put_new_blob_streamed(&write);
        };
        let dir = match self.folder_of_new_blob(hash) {
            Ok(Some(dir)) => dir,
            Ok(None) => return Ok(hash.to_owned()),
            // Not a hash: the caller's knowledge was wrong.
            Err(StoreError::InvalidInput { .. }) => return self.put_new_blob_streamed(&write),
            Err(error) => return Err(error),
        };
        let mismatched = std::cell::Cell::new(false);
        let written = dir.write_file_atomic_with(&hash[2..], true, |file| {
            if sha256_of_written(file, &write)? == hash {
                Ok(())
            } else {
                mismatched.set(true);
                Err(io::Error::other(
                    "the content is not that of the hash it was given",
                ))
            }
        });
        match written {
            // The hash the caller knew was not this content's: stored under its own.
            Err(_) if mismatched.get() => self.put_new_blob_streamed(&write),
            Err(error) => Err(error),
            Ok(()) => Ok(hash.to_owned()),
        }
    }

    /// [`put_blob_streamed`](Self::put_blob_streamed) of content of unknown hash: one pass of
    /// `write`, into a temporary file in `blobs/tmp/` (fsynced, renamed, the blob's folder
    /// fsynced), removed when anything fails or the blob is stored already.
    fn put_new_blob_streamed(
        &self,
        write: &dyn Fn(&mut dyn Write) -> io::Result<()>,
    ) -> Result<String, StoreError> {
        let tmp = Dir::open(&self.root)?
            .create_subdir("blobs", true)?
            .create_subdir("tmp", true)?;
        /// The temporary file, removed when dropped before it became a blob (also when
        /// `write` panics).
        struct Temporary<'a> {
            folder: &'a Dir,
            name: String,
            renamed: bool,
        }
        impl Drop for Temporary<'_> {
            fn drop(&mut self) {
                if !self.renamed {
                    let _ = self.folder.remove_file(&self.name);
                }
            }
        }
        let mut temp = Temporary {
            folder: &tmp,
            name: format!("streamed-{}", random_hex(8)),
            renamed: false,
        };
        let temp_path = tmp.path().join(&temp.name);
        let file = tmp.create_new_file(&temp.name)?;
        let hash = sha256_of_written(&file, write)
            .map_err(|source| StoreError::io("write to", &temp_path, explain_efbig(source)))?;
        if let Some(dir) = self.folder_of_new_blob(&hash)? {
            file.sync_all()
                .map_err(|source| StoreError::io("fsync", &temp_path, source))?;
            tmp.rename_into(&temp.name, &dir, &hash[2..])?;
            temp.renamed = true;
            dir.sync()?;
        }
        Ok(hash)
    }

    /// Whether a blob with this SHA-256 is stored: a regular file of that name (its content
    /// is not read). `false` also when the store cannot be looked at.
    pub fn has_blob(&self, hash: &str) -> bool {
        self.blob_path(hash).is_ok()
            && self
                .open_blob_dir(&hash[..2], false)
                .and_then(|dir| dir.entry_type(&hash[2..]))
                .is_ok_and(|found| matches!(found, Some(FileType::RegularFile)))
    }

    /// Reads the blob with this SHA-256, checking that its content still has that hash. Only
    /// a regular file of at most 1 GiB is read.
    pub fn read_blob(&self, hash: &str) -> Result<Vec<u8>, StoreError> {
        self.read_blob_within(hash, MAX_BLOB_READ)
    }

    /// [`read_blob`](Self::read_blob), refusing a blob of more than `max_len` bytes before
    /// reading it (a planted sparse file must not take the memory a large read would).
    pub fn read_blob_within(&self, hash: &str, max_len: u64) -> Result<Vec<u8>, StoreError> {
        let path = self.blob_path(hash)?;
        let not_found = || StoreError::NotFound {
            what: format!("blob {hash}"),
        };
        let mut file = match self
            .open_blob_dir(&hash[..2], false)
            .and_then(|dir| dir.open_file(&hash[2..], Access::Read))
        {
            Ok(file) => file,
            Err(StoreError::NotFound { .. }) => return Err(not_found()),
            Err(error) => return Err(error),
        };
        let len = (file.metadata())
            .map_err(|source| StoreError::io("stat", &path, source))?
            .len();
        if len > max_len {
            return Err(StoreError::invalid(format!(
                "blob {hash} holds {len} bytes, more than the {max_len} expected"
            )));
        }
        let mut bytes = Vec::new();
        (&mut file)
            .take(max_len)
            .read_to_end(&mut bytes)
            .map_err(|source| StoreError::io("read", &path, source))?;
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

    /// The path of a blob, if it is stored (as a regular file).
    pub fn blob_file(&self, hash: &str) -> Result<Option<PathBuf>, StoreError> {
        let path = self.blob_path(hash)?;
        let stored = match self.open_blob_dir(&hash[..2], false) {
            Ok(dir) => dir.entry_type(&hash[2..])? == Some(FileType::RegularFile),
            Err(StoreError::NotFound { .. }) => false,
            Err(error) => return Err(error),
        };
        Ok(stored.then_some(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// `first_frame_is_whole` answers from the frame's length alone when the frame is whole
    /// (the listing's fallback scan would hide a wrong `false`).
    #[test]
    fn a_whole_first_frame_is_told_from_its_length_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let payload = vec![b'x'; 10_000];
        let mut bytes = b"APOLLO-JOURNAL header\n".to_vec();
        crate::frame::encode_frame(&payload, &mut bytes);
        let mut buffer = vec![0u8; 4096];
        let whole = |bytes: &[u8], buffer: &mut [u8]| {
            std::fs::write(&path, bytes).unwrap();
            crate::segment::first_frame_is_whole(&std::fs::File::open(&path).unwrap(), buffer)
        };
        assert!(whole(&bytes, &mut buffer));
        // One byte short of its newline, or its newline another byte: not whole.
        assert!(!whole(&bytes[..bytes.len() - 1], &mut buffer));
        let mut last = bytes.clone();
        *last.last_mut().unwrap() = b'x';
        assert!(!whole(&last, &mut buffer));
        // A length field that is not a number, or a header with no end: not whole.
        let mut garbled = bytes.clone();
        let at = bytes.iter().position(|&byte| byte == b'\n').unwrap() + 10;
        garbled[at] = b'z';
        assert!(!whole(&garbled, &mut buffer));
        assert!(!whole(&[b'h'; 5000], &mut buffer));
    }

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

    /// A run with one `run_started` of `pipeline` (identity `identity`), durable enough for
    /// listing.
    fn started_run(state: &StateDir, id: &RunId, pipeline: &str, finished: bool) {
        let run = state.create_run(id).unwrap();
        let options = crate::WriterOptions {
            durability: crate::Durability::None,
            ..crate::WriterOptions::default()
        };
        let mut writer = crate::JournalWriter::create(run.path(), id.as_str(), options).unwrap();
        let mut events = vec![apollo_core::Event::RunStarted(
            apollo_core::event::RunStarted {
                run_id: id.to_string(),
                pipeline: pipeline.to_owned(),
                config_path: "/p/pipeline.yaml".to_owned(),
                config_hash: "0".repeat(64),
                definition_hash: "0".repeat(64),
                apollo_version: "0".to_owned(),
                host: "h".to_owned(),
                pid: 1,
                units: Vec::new(),
                identity: Some(format!("{pipeline}@../pipeline.yaml")),
                params: Default::default(),
                ..Default::default()
            },
        )];
        if finished {
            events.push(apollo_core::Event::RunFinished(
                apollo_core::event::RunFinished {
                    status: apollo_core::event::RunStatus::Succeeded,
                    succeeded: 0,
                    failed: 0,
                    skipped: 0,
                    reused: 0,
                },
            ));
        }
        writer.append_batch(&events).unwrap();
    }

    #[test]
    fn runs_are_ordered_by_creation_even_when_the_clock_steps_back() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let noon = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
        // The clock steps back an hour between the first and the second run, then a day.
        let first = state.new_run_id_at(noon);
        started_run(&state, &first, "etl", true);
        let second = state.new_run_id_at(noon - chrono::Duration::hours(1));
        started_run(&state, &second, "etl", false);
        let third = state.new_run_id_at(noon - chrono::Duration::days(1));
        started_run(&state, &third, "deploy", true);
        assert!(third < second && second < first, "ids follow the clock");
        assert_eq!(
            state.run_ids().unwrap(),
            [first.clone(), second.clone(), third.clone()]
        );
        assert_eq!(state.run_sequence(&first).unwrap(), Some(1));
        assert_eq!(state.run_sequence(&third).unwrap(), Some(3));
        let listed: Vec<RunId> = state
            .list_runs()
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(listed, [first.clone(), second.clone(), third]);
        assert_eq!(state.latest_run("etl").unwrap(), Some(second.clone()));
        // Pruning keeps the latest of a pipeline by that order: `second`, not `first`.
        let report = crate::prune(
            &state,
            crate::PruneOptions {
                keep_days: None,
                keep_runs: Some(1),
            },
            noon,
        )
        .unwrap();
        assert_eq!(report.deleted, [first]);
        assert!(state.run_dir(&second).is_ok());
    }

    #[test]
    fn runs_without_a_sequence_come_first_and_a_damaged_one_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let noon = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
        let new = state.new_run_id_at(noon - chrono::Duration::hours(2));
        started_run(&state, &new, "etl", false);
        // Two runs made by an older apollo: no sequence file.
        let mut legacy = Vec::new();
        for hours in [1, 3] {
            let id = state.new_run_id_at(noon - chrono::Duration::hours(hours));
            started_run(&state, &id, "etl", true);
            fs::remove_file(state.runs_dir().join(id.as_str()).join(SEQUENCE_FILE)).unwrap();
            assert_eq!(state.run_sequence(&id).unwrap(), None);
            legacy.push(id);
        }
        assert_eq!(
            state.run_ids().unwrap(),
            [legacy[1].clone(), legacy[0].clone(), new.clone()]
        );
        // The next run still gets a number above every run's.
        let next = state.new_run_id_at(noon - chrono::Duration::hours(5));
        started_run(&state, &next, "etl", false);
        assert_eq!(state.run_sequence(&next).unwrap(), Some(2));
        assert_eq!(state.run_ids().unwrap().last(), Some(&next));
        // A sequence file that does not hold a number is damage, never guessed around.
        for bad in ["", "x\n", "0\n", "12"] {
            fs::write(state.runs_dir().join(new.as_str()).join(SEQUENCE_FILE), bad).unwrap();
            assert!(
                matches!(state.run_ids(), Err(StoreError::Corruption { .. })),
                "{bad:?}"
            );
        }
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
        // A sparse file of a terabyte planted under a blob's name is refused before it is
        // read, not read until memory runs out.
        fs::remove_file(&path).unwrap();
        fs::File::create(&path).unwrap().set_len(1 << 40).unwrap();
        let error = state.read_blob(&hash).unwrap_err();
        assert!(error.to_string().contains("more than the"), "{error}");
    }

    /// The names of the files under `dir`, recursively (sorted).
    fn files_under(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files.extend(files_under(&path));
            } else {
                files.push(path);
            }
        }
        files.sort();
        files
    }

    /// A new state directory, and its lock.
    fn locked_state_dir() -> (tempfile::TempDir, StateDir, StateLock) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let lock = state.lock(false).unwrap();
        (dir, state, lock)
    }

    #[test]
    fn a_streamed_blob_is_the_blob_of_its_bytes_whatever_hash_the_caller_knew() {
        let (_dir, state, lock) = locked_state_dir();
        let content = b"{\n  \"units\": []\n}".repeat(50_000);
        let writes = |out: &mut dyn Write| {
            // Small pieces, as a serialiser writes them.
            content.chunks(7).try_for_each(|piece| out.write_all(piece))
        };
        let hash = state.put_blob_streamed(&lock, None, writes).unwrap();
        assert_eq!(hash, apollo_core::hash::sha256_hex(&content));
        assert_eq!(state.read_blob(&hash).unwrap(), content);
        // Stored already: found, not written again; the same name as `put_blob` gives.
        assert_eq!(
            state.put_blob_streamed(&lock, Some(&hash), writes).unwrap(),
            hash
        );
        assert_eq!(state.put_blob(&content).unwrap(), hash);

        // A hash the caller knew wrongly names nothing: the content is stored under its own.
        let other = b"other content".repeat(1000);
        let stored = state
            .put_blob_streamed(&lock, Some(&"0".repeat(64)), |out| out.write_all(&other))
            .unwrap();
        assert_eq!(stored, apollo_core::hash::sha256_hex(&other));
        assert_eq!(state.read_blob(&stored).unwrap(), other);
        assert!(!state.has_blob(&"0".repeat(64)));
        // Nor does something that is no hash at all.
        let third = b"third".repeat(10);
        let stored = state
            .put_blob_streamed(&lock, Some("../not-a-hash"), |out| out.write_all(&third))
            .unwrap();
        assert_eq!(stored, apollo_core::hash::sha256_hex(&third));
    }

    #[test]
    fn a_streamed_blob_whose_passes_differ_is_stored_as_its_last_pass_wrote_it() {
        let (dir, state, lock) = locked_state_dir();
        let blobs = dir.path().join("blobs");
        let before = if blobs.exists() {
            files_under(&blobs)
        } else {
            Vec::new()
        };
        let pass = std::cell::Cell::new(0_u8);
        // A hash the caller knew wrongly, and a content that differs at each pass: the pass
        // checked against the hash is not stored, the one after it is, under its own hash.
        let result = state.put_blob_streamed(&lock, Some(&"0".repeat(64)), |out| {
            pass.set(pass.get() + 1);
            write!(out, "pass {}", pass.get())
        });
        assert_eq!(
            pass.get(),
            2,
            "written against the hash, then once under its own"
        );
        assert_eq!(
            result.unwrap(),
            apollo_core::hash::sha256_hex(b"pass 2"),
            "stored under the hash of what was written"
        );
        assert!(!state.has_blob(&apollo_core::hash::sha256_hex(b"pass 1")));
        assert!(!state.has_blob(&"0".repeat(64)));
        // That blob, and no temporary file, left behind.
        let mut after = files_under(&blobs);
        after.retain(|path| !before.contains(path));
        assert_eq!(after.len(), 1, "{after:?}");
    }

    /// Content whose hash nobody knows (a new definition snapshot) is produced once: hashed as
    /// it is written to a temporary file, which then becomes the blob, or goes when the store
    /// has that blob already. A failed pass leaves nothing behind.
    #[test]
    fn a_streamed_blob_of_unknown_hash_is_written_in_one_pass() {
        let (dir, state, lock) = locked_state_dir();
        let blobs = dir.path().join("blobs");
        let content = b"{ \"units\": [] }".repeat(20_000);
        let passes = std::cell::Cell::new(0_u32);
        let writes = |out: &mut dyn Write| {
            passes.set(passes.get() + 1);
            content.chunks(7).try_for_each(|piece| out.write_all(piece))
        };
        let hash = state.put_blob_streamed(&lock, None, writes).unwrap();
        assert_eq!(passes.get(), 1);
        assert_eq!(hash, apollo_core::hash::sha256_hex(&content));
        assert_eq!(state.read_blob(&hash).unwrap(), content);
        let stored = files_under(&blobs);
        // Stored already: the second pass's file is dropped, the blob stays as it was.
        assert_eq!(state.put_blob_streamed(&lock, None, writes).unwrap(), hash);
        assert_eq!(passes.get(), 2);
        assert_eq!(files_under(&blobs), stored);
        // A pass that fails stores nothing and leaves no temporary file.
        let failed = state.put_blob_streamed(&lock, None, |out| {
            out.write_all(b"half a snapshot")?;
            Err(io::Error::other("the serialiser gave up"))
        });
        assert!(failed.is_err(), "{failed:?}");
        assert_eq!(files_under(&blobs), stored);
        // Nor does one that panics.
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            state.put_blob_streamed(&lock, None, |out| {
                out.write_all(&[b'x'; 300_000])?;
                panic!("a serialiser bug")
            })
        }));
        assert!(panicked.is_err());
        assert_eq!(files_under(&blobs), stored);
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

    #[test]
    fn a_hook_summary_replaces_a_planted_link_and_refuses_a_linked_folder() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path().join("state")).unwrap();
        let id = state.new_run_id();
        let run = state.create_run(&id).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").unwrap();
        let hooks = run.path().join("hooks");
        std::fs::create_dir(&hooks).unwrap();
        std::os::unix::fs::symlink(&victim, hooks.join("summary.json")).unwrap();
        let path = run.write_hook_summary(b"{}").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        // `hooks/` itself a link: refused, nothing written behind it.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::remove_dir_all(&hooks).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &hooks).unwrap();
        let error = run.write_hook_summary(b"{}").unwrap_err();
        assert!(
            matches!(error, StoreError::UnexpectedFileType { .. }),
            "{error}"
        );
        assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
        // …and so are the hooks' log folders below it.
        assert!(matches!(
            run.hook_log_dir("on_finish"),
            Err(StoreError::UnexpectedFileType { .. })
        ));
        std::fs::remove_file(&hooks).unwrap();
        assert!(
            run.hook_log_dir("on_finish")
                .unwrap()
                .ends_with("hooks/on_finish")
        );
        for bad in ["", "..", "a/b"] {
            assert!(run.hook_log_dir(bad).is_err(), "{bad}");
        }
    }
}
