//! The state directory: its layout, runs, attempt log folders and content-addressed blobs.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::attempt_dir::AttemptDir;
use crate::error::StoreError;
use crate::segment::has_records;
use apollo_core::sharing::{MARKER_FILE, Sharing};
use rustix::fs::FileType;
use std::fs::File;

use crate::fsutil::{create_dir_all_durable, random_hex};
use crate::lock::{LockHolder, StateLock};
use crate::run_id::RunId;
use crate::runs_index::RunsIndex;
use crate::safe_dir::{Access, Dir, describe};

/// An Apollo state directory (by default `.apollo/` beside the config):
///
/// ```text
/// lock                                   flock()ed by the one apollo writing here; never deleted
/// runs/<run-id>/journal/000001.log ...   the run's journal segments
/// runs/<run-id>/units/<unit>/<attempt>/{stdout,stderr}  an AttemptDir
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

    /// The components of the input manifest `reference` names, read from this run and checked
    /// (see [`crate::read_input_manifest`]).
    pub fn read_input_manifest(
        &self,
        reference: &apollo_core::event::InputManifestRef,
    ) -> Result<Vec<apollo_core::event::InputComponent>, StoreError> {
        crate::read_input_manifest(&self.path, reference)
    }

    /// The folder of the run's journal segments.
    pub fn journal_dir(&self) -> PathBuf {
        self.path.join("journal")
    }

    /// Attempt `attempt` of `unit` (its name as the journal records it): the folder of its
    /// captured output, `unit`'s name encoded for the disk and checked (see [`AttemptDir`]).
    pub fn attempt_dir(&self, unit: &str, attempt: u32) -> Result<AttemptDir, StoreError> {
        AttemptDir::new(&self.path, unit, attempt)
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

/// The state directory's blob store.
const BLOBS_DIR: &str = "blobs";

/// A run's folder of hook output and the summary hooks get (`runs/<id>/hooks`).
const HOOKS_DIR: &str = "hooks";
/// The run summary hooks get the path of, in [`HOOKS_DIR`].
const HOOK_SUMMARY: &str = "summary.json";

/// Opens a file of the state directory for reading (`apollo logs`): only a regular file,
/// never through a symbolic link nor blocking, so a planted FIFO or link to `/dev/zero` is
/// refused ([`StoreError::UnexpectedFileType`]). `Ok(None)`: there is no such file. Through
/// the store's folder handle, not `apollo_core::safe_file`: relative to the folder's
/// descriptor and after an `lstat`, so that a device is refused before it is opened at all.
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
    /// `lock`) when missing. New folders are fsynced into their parents. A new one is private.
    pub fn open_or_create(root: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_or_create_as(root, None)
    }

    /// [`open_or_create`](Self::open_or_create), a new state directory made with `sharing`
    /// (`--state-dir-mode`; `None`: private). The sharing of an existing one is what it
    /// recorded when it was made: asking for another is
    /// [`StoreError::InvalidInput`].
    pub fn open_or_create_as(
        root: impl AsRef<Path>,
        sharing: Option<Sharing>,
    ) -> Result<Self, StoreError> {
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
            // left, unless made shared. One that exists keeps the modes it has (`apollo
            // verify` warns).
            let sharing = sharing.unwrap_or_default();
            if sharing == Sharing::Group {
                // Recorded first: a crash before the `chmod` leaves a marker the next open
                // completes (below), never a 2770 folder that says nothing.
                Dir::open(&root)?.write_file_atomic(MARKER_FILE, b"group\n", true)?;
            }
            fs::set_permissions(
                &root,
                std::os::unix::fs::PermissionsExt::from_mode(Sharing::Private.dir_mode()),
            )
            .map_err(|source| StoreError::io("set the permissions of", &root, source))?;
        }
        let state = Self {
            root: root.clone(),
            never_lock: false,
        };
        let recorded = state.sharing()?;
        if let Some(asked) = sharing.filter(|asked| *asked != recorded) {
            return Err(StoreError::invalid(format!(
                "state directory {} is {} (chosen when it was made, recorded in its `{MARKER_FILE}` \
                 file), not {}: an existing state directory keeps its sharing; make a new one \
                 elsewhere to share with a group",
                root.display(),
                recorded.as_str(),
                asked.as_str()
            )));
        }
        if recorded == Sharing::Group {
            File::open(&root)
                .and_then(|handle| recorded.apply(handle, true))
                .map_err(|source| StoreError::io("set the permissions of", &root, source))?;
            if let Ok(marker) = Dir::open(&root)?.open_file(MARKER_FILE, Access::Read) {
                let _ = recorded.apply(marker, false);
            }
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
        Ok(state)
    }

    /// Who may use this state directory, as recorded in its [`MARKER_FILE`] when it was made
    /// (none: private). A marker one cannot read (another user's private state directory)
    /// is an error, as is one that names no sharing.
    pub fn sharing(&self) -> Result<Sharing, StoreError> {
        let mut file = match Dir::open(&self.root)?.open_file(MARKER_FILE, Access::Read) {
            Ok(file) => file,
            Err(StoreError::NotFound { .. }) => return Ok(Sharing::Private),
            Err(error) => return Err(error),
        };
        let mut text = String::new();
        let path = self.root.join(MARKER_FILE);
        (&mut file)
            .take(64)
            .read_to_string(&mut text)
            .map_err(|source| StoreError::io("read", &path, source))?;
        Sharing::parse(&text).ok_or_else(|| {
            StoreError::invalid(format!(
                "{} says {:?}: expected `private` or `group` (the state directory's sharing, \
                 written when it was made): write one of them back",
                path.display(),
                text.trim()
            ))
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

    /// Where run `id`'s folder is, whether or not it is there: for messages and for what a
    /// run's children are told. To open anything in it, [`StateDir::run_dir`] checks it first.
    pub fn run_path(&self, id: &RunId) -> PathBuf {
        self.runs_dir().join(id.as_str())
    }

    /// Where run `id`'s hook folder is (`runs/<id>/hooks`), whether or not it is there (what a
    /// hook is told when its folder could not be checked; [`RunDir::hook_log_dir`] checks).
    pub fn hooks_path(&self, id: &RunId) -> PathBuf {
        self.run_path(id).join(HOOKS_DIR)
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
        let path = self.run_path(id);
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

    /// Attempt `attempt` of `unit` in run `run` (`runs/<run>/units/<unit>/<attempt>`); see
    /// [`RunDir::attempt_dir`]. Errors if the run does not exist.
    pub fn attempt_dir(
        &self,
        run: &RunId,
        unit: &str,
        attempt: u32,
    ) -> Result<AttemptDir, StoreError> {
        self.run_dir(run)?.attempt_dir(unit, attempt)
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
            .join(BLOBS_DIR)
            .join("sha256")
            .join(&hash[..2])
            .join(&hash[2..]))
    }

    /// The state directory's blob store (`blobs/`), created if missing, with fsyncs unless
    /// `durability` is [`Durability::None`](crate::Durability::None): the one way to it (tidy's
    /// run-paths check refuses `blobs/` spelled elsewhere).
    pub fn blob_store(
        &self,
        durability: crate::Durability,
    ) -> Result<crate::BlobStore, StoreError> {
        crate::BlobStore::open(self.root.join(BLOBS_DIR), durability)
    }

    /// The state directory's blob store for reading only: nothing is created.
    pub fn existing_blob_store(&self) -> crate::BlobStore {
        crate::BlobStore::open_existing(self.root.join(BLOBS_DIR))
    }

    /// Stores `bytes` under their SHA-256 (hex), which it returns. Idempotent: storing the
    /// same bytes again finds them there. Through the blob store's one writer
    /// ([`BlobStore::put_written`](crate::BlobStore::put_written)): fsynced, renamed.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<String, StoreError> {
        self.blob_store(crate::Durability::Fsync)?
            .put_written(None, |out| out.write_all(bytes))
    }

    /// [`put_blob`](Self::put_blob) of content too big to hold in memory at once (the
    /// definition snapshot of 100,000 units is ~40 MB), which `write` produces. When the caller
    /// knows its hash (`known`) and a blob of that hash is stored, nothing is written (the blob
    /// is trusted to hold the content); otherwise it is written once and hashed on the way,
    /// and stored under the hash it has (a wrong `known`, or one that is no hash at all,
    /// changes nothing). Under the state directory's lock (`blobs/tmp/` is swept under it):
    /// `_lock` is the proof.
    pub fn put_blob_streamed(
        &self,
        _lock: &StateLock,
        known: Option<&str>,
        write: impl Fn(&mut dyn Write) -> io::Result<()>,
    ) -> Result<String, StoreError> {
        self.blob_store(crate::Durability::Fsync)?
            .put_written(known, write)
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

mod run_folders;
#[cfg(test)]
mod tests;
