//! The blob store: content-addressed copies of captured files, `blobs/sha256/ab/cdef…` in the
//! state directory (DESIGN §12).
//!
//! A blob's name is the SHA-256 of its content, and never lies about it:
//!
//! * **Writing** goes to a temporary file in `blobs/tmp/`, which is fsynced, then renamed to
//!   its name, and the name's folder fsynced ([`Durability::None`] skips the fsyncs). A crash
//!   at any moment leaves at most a temporary file, which [`BlobStore::sweep_temporary`]
//!   removes; never a named blob with the wrong bytes. Where the filesystem can share
//!   extents (`FICLONE`: btrfs, XFS, bcachefs) the temporary file is a reflink of the source,
//!   and the caller hashes that copy (one read, and the bytes hashed are the bytes kept);
//!   elsewhere the caller streams the source once, hashing and writing each block.
//! * **Reading back** ([`BlobStore::restore`]) re-hashes the blob as it copies it to a
//!   temporary file beside the destination, and renames that into place only when the hash
//!   matches: a damaged blob (a flipped bit) is reported as corruption and no file is
//!   written.
//!
//! Blobs are immutable (mode `0400`) and shared by every run and unit that saw the same
//! content: a file declared by three units over five runs is one blob. They are garbage:
//! `prune` removes those no kept run references ([`BlobStore::iter`], [`BlobStore::remove`]),
//! and [`evict_blobs`](crate::evict_blobs) the captures of the oldest runs when the store is
//! over `blob_store_max`.
//!
//! The engine reaches the store through apollo-core's [`BlobSink`] seam; other programs use
//! [`BlobStore::put_file`] and [`BlobStore::restore`].

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use apollo_core::Event;
use apollo_core::capture::{BlobSink, PendingBlob};
use apollo_core::event::FileSide;
use rustix::fs::AtFlags;

use crate::input_manifest::read_files_manifest;
use crate::reader::{JournalReader, ReadOptions};
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::fsutil::{fsync_dir, random_hex};
use crate::safe_dir::{Access, Dir};

use crate::writer::Durability;

mod restore_temp;
use restore_temp::RestoreTemp;
mod written;

/// A stored blob: its SHA-256 (hex) and size in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BlobRef {
    /// SHA-256 of the content, lowercase hex: the blob's name.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
}

/// The blob store of a state directory (see the module docs).
#[derive(Debug, Clone)]
pub struct BlobStore {
    /// `blobs/` in the state directory.
    root: PathBuf,
    durable: bool,
    /// Bytes of the new blobs this store (and its clones) wrote.
    written: Arc<AtomicU64>,
}

impl BlobStore {
    /// The store in `blobs_dir` (a state directory's `blobs/`), created if missing, with
    /// fsyncs unless `durability` is [`Durability::None`].
    pub fn open(blobs_dir: impl Into<PathBuf>, durability: Durability) -> Result<Self, StoreError> {
        let root = blobs_dir.into();
        // From `blobs/` down nothing is followed: a symbolic link planted as `blobs`, `sha256`
        // or `tmp` is refused, so no capture is written through it and no sweep removes
        // behind it (the state directory's root above it is opened as named).
        let blobs = Dir::open_checked_tail(&root, 1, true, true)?;
        blobs.create_subdir("sha256", true)?;
        blobs.create_subdir("tmp", true)?;
        Ok(Self {
            root,
            durable: durability.syncs(),
            written: Arc::default(),
        })
    }

    /// The store in `blobs_dir` for reading only: nothing is created.
    pub fn open_existing(blobs_dir: impl Into<PathBuf>) -> Self {
        Self {
            root: blobs_dir.into(),
            durable: true,
            written: Arc::default(),
        }
    }

    /// Where blob `sha256` lives (whether or not it is stored); an error when `sha256` is
    /// not 64 lowercase hex digits, so a damaged record cannot name a path outside the store.
    pub fn path(&self, sha256: &str) -> Result<PathBuf, StoreError> {
        check_name(sha256)?;
        Ok(self
            .root
            .join("sha256")
            .join(&sha256[..2])
            .join(&sha256[2..]))
    }

    /// How many bytes of new blobs this store and its clones have written since it was
    /// opened (content the store had already costs nothing and counts nothing): whether a run
    /// made the store grow.
    pub fn bytes_written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Whether blob `sha256` is stored (as a regular file).
    pub fn contains(&self, sha256: &str) -> bool {
        (self.prefix_folder(sha256).ok().flatten())
            .and_then(|folder| folder.entry_type(&sha256[2..]).ok().flatten())
            .is_some_and(|found| found == rustix::fs::FileType::RegularFile)
    }

    /// Whether this user may read blob `sha256`: in a state directory shared with a group, a
    /// blob whose source was private is its owner's only (DESIGN §18), and a teammate's reuse
    /// of it misses.
    pub fn readable(&self, sha256: &str) -> bool {
        (self.prefix_folder(sha256).ok().flatten()).is_some_and(|folder| {
            rustix::fs::accessat(
                folder.fd(),
                &sha256[2..],
                rustix::fs::Access::READ_OK,
                AtFlags::EACCESS,
            )
            .is_ok()
        })
    }

    /// Stores the content of the file at `path`, read once (reflinked where the filesystem
    /// allows, else streamed while hashing), and returns its name and size. Storing the same
    /// content again keeps the one blob.
    pub fn put_file(&self, path: &Path) -> Result<BlobRef, StoreError> {
        let source = File::open(path).map_err(|source| StoreError::io("open", path, source))?;
        let meta = source
            .metadata()
            .map_err(|source| StoreError::io("stat", path, source))?;
        if !meta.is_file() {
            return Err(StoreError::invalid(format!(
                "{} is not a regular file",
                path.display()
            )));
        }
        let mut pending = self
            .begin_blob(&source, meta.len())
            .map_err(|source| StoreError::io("create a blob for", path, source))?;
        let (reader, tee) = match pending.copy.take() {
            Some(copy) => (copy, false),
            None => (source, true),
        };
        let (sha256, size) = hash_stream(
            reader,
            |block| {
                if tee { pending.write(block) } else { Ok(()) }
            },
        )
        .map_err(|source| StoreError::io("copy into the blob store", path, source))?;
        Box::new(pending)
            .commit(&sha256)
            .map_err(|source| StoreError::io("store the blob of", path, source))?;
        Ok(BlobRef { sha256, size })
    }

    /// Writes blob `sha256` to `dest` with permission bits `mode` (`0o777` of it: never
    /// setuid, setgid or sticky), checking its hash as it
    /// copies: through a temporary file beside `dest`, renamed into place only when the
    /// content hashes to `sha256` (an existing `dest` is replaced). Returns the size.
    ///
    /// A missing blob is [`StoreError::NotFound`]; a blob whose content does not hash to its
    /// name (damaged on disk) is [`StoreError::Corruption`], and then `dest` is not touched.
    /// This is what the reuse of outputs and `apollo reproduce` use to bring files back.
    pub fn restore(&self, sha256: &str, dest: &Path, mode: u32) -> Result<u64, StoreError> {
        let blob_path = self.path(sha256)?;
        let not_found = || StoreError::NotFound {
            what: format!("blob {sha256}"),
        };
        // Opened below folders that are not links, and refused unless a regular file: a link
        // or a FIFO planted as a blob is neither followed nor waited on.
        let blob = match self.prefix_folder(sha256)? {
            Some(folder) => match folder.open_file(&sha256[2..], Access::Read) {
                Ok(blob) => blob,
                Err(StoreError::NotFound { .. }) => return Err(not_found()),
                Err(error) => return Err(error),
            },
            None => return Err(not_found()),
        };
        let parent = dest
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let temp = RestoreTemp::create(self, parent, dest)?;
        let result = (|| {
            let cloned = rustix::fs::ioctl_ficlone(&temp.file, &blob).is_ok();
            let hashed = if cloned {
                let mut copy = (temp.file.try_clone())
                    .map_err(|source| StoreError::io("open", &temp.path, source))?;
                copy.seek(SeekFrom::Start(0))
                    .map_err(|source| StoreError::io("read", &temp.path, source))?;
                hash_stream(copy, |_| Ok(()))
            } else {
                let mut writer = &temp.file;
                hash_stream(blob, |block| writer.write_all(block))
            };
            let (actual, size) =
                hashed.map_err(|source| StoreError::io("restore", &blob_path, source))?;
            if actual != sha256 {
                return Err(StoreError::corruption(
                    &blob_path,
                    0,
                    None,
                    format!("the blob's content hashes to {actual}, not to its name"),
                ));
            }
            // Permission bits only: a mode read back from the state directory must not make
            // a setuid or setgid program of a restored file.
            (temp
                .file
                .set_permissions(fs::Permissions::from_mode(mode & 0o777)))
            .map_err(|source| StoreError::io("chmod", &temp.path, source))?;
            if self.durable {
                (temp.file.sync_all())
                    .map_err(|source| StoreError::io("fsync", &temp.path, source))?;
            }
            temp.rename_to(dest)?;
            if self.durable {
                fsync_dir(parent)?;
            }
            Ok(size)
        })();
        if result.is_err() {
            temp.remove();
        }
        result
    }

    /// Every stored blob, in no particular order (for `prune` and `backup`). Entries that are
    /// not blobs (a stray file, a bad name, a symbolic link) are skipped; every folder is read
    /// through its own descriptor, opened without following a link.
    pub fn iter(&self) -> Result<Vec<BlobRef>, StoreError> {
        let mut blobs = Vec::new();
        let sha_dir = match self.folder("sha256") {
            Ok(sha_dir) => sha_dir,
            Err(StoreError::NotFound { .. }) => return Ok(blobs),
            Err(error) => return Err(error),
        };
        for prefix in sha_dir.entry_names()? {
            let Some(prefix) = prefix.to_str().filter(|prefix| prefix.len() == 2) else {
                continue;
            };
            let folder = match sha_dir.subdir(prefix) {
                Ok(folder) => folder,
                // Removed meanwhile, or not a folder (a link among them): not blobs.
                Err(StoreError::NotFound { .. } | StoreError::UnexpectedFileType { .. }) => {
                    continue;
                }
                Err(error) => return Err(error),
            };
            for name in folder.entry_names()? {
                let sha256 = format!("{prefix}{}", name.to_string_lossy());
                if check_name(&sha256).is_err() {
                    continue;
                }
                let Ok(stat) =
                    rustix::fs::statat(folder.fd(), name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                else {
                    continue;
                };
                if rustix::fs::FileType::from_raw_mode(stat.st_mode)
                    == rustix::fs::FileType::RegularFile
                {
                    blobs.push(BlobRef {
                        sha256,
                        size: u64::try_from(stat.st_size).unwrap_or(0),
                    });
                }
            }
        }
        Ok(blobs)
    }

    /// Removes blob `sha256` (absent already: nothing to do). The name is removed from its
    /// prefix folder opened without following a link: a prefix folder replaced by a link is
    /// refused, and nothing behind it is removed.
    pub fn remove(&self, sha256: &str) -> Result<(), StoreError> {
        let Some(folder) = self.prefix_folder(sha256)? else {
            return Ok(());
        };
        match rustix::fs::unlinkat(folder.fd(), &sha256[2..], AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(errno) => Err(StoreError::io(
                "remove",
                folder.path().join(&sha256[2..]),
                errno.into(),
            )),
        }
    }

    /// `blobs/sha256/<first two digits of sha256>`, opened without following a link at any
    /// level below the store's root; `None` when it does not exist (nor then does the blob).
    fn prefix_folder(&self, sha256: &str) -> Result<Option<Dir>, StoreError> {
        check_name(sha256)?;
        match self
            .folder("sha256")
            .and_then(|sha| sha.subdir(&sha256[..2]))
        {
            Ok(folder) => Ok(Some(folder)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The existing folder `name` (`tmp`, `sha256`) of the store, opened without following a
    /// link from `blobs/` down (a symbolic link there is refused). `blobs/` itself is checked
    /// too: planted as a link to another project's store, it would have `prune` and eviction
    /// remove that store's blobs, which no run here references.
    fn folder(&self, name: &str) -> Result<Dir, StoreError> {
        Dir::open_checked_tail(&self.root, 1, false, false)?.subdir(name)
    }

    /// Removes the temporary files a crash left in `blobs/tmp/`; returns how many. Only call
    /// it under the state directory's lock (no blob is being written then). The folder is read
    /// and emptied through its own descriptor, and refused when it is a symbolic link: nothing
    /// behind a link is ever removed.
    pub fn sweep_temporary(&self) -> Result<usize, StoreError> {
        let tmp = match self.folder("tmp") {
            Ok(tmp) => tmp,
            Err(StoreError::NotFound { .. }) => return Ok(0),
            Err(error) => return Err(error),
        };
        let mut removed = 0;
        for name in tmp.entry_names()? {
            if rustix::fs::unlinkat(tmp.fd(), name.as_os_str(), AtFlags::empty()).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// A new pending blob for `source` (`len` bytes): a reflink of it where the filesystem
    /// allows. A small one is kept in memory until it is committed, so content the store
    /// already has costs no file at all.
    fn begin_blob(&self, source: &File, len: u64) -> io::Result<Pending> {
        let temp_path = self
            .root
            .join("tmp")
            .join(format!("blob-{}", random_hex(8)));
        // What the group may read of the blob (in a shared state directory) depends on what
        // it could read of the source.
        let source_mode = source
            .metadata()
            .map_or(0, |meta| fs::Permissions::mode(&meta.permissions()));
        let mut pending = Pending {
            source_mode,
            store: self.clone(),
            temp: None,
            temp_path,
            tmp_dir: None,
            buffer: Vec::new(),
            copy: None,
        };
        if len > IN_MEMORY as u64 {
            let temp = pending.create_temp()?;
            if rustix::fs::ioctl_ficlone(temp, source).is_ok() {
                // Reopened for reading through `blobs/tmp`'s descriptor: the bytes hashed are
                // the bytes kept, whatever has become of the folder's name meanwhile.
                let (Some(tmp_dir), Some(name)) = (&pending.tmp_dir, pending.temp_path.file_name())
                else {
                    return Err(io::Error::other("a temporary blob file has its folder"));
                };
                let mut copy = tmp_dir
                    .open_file(name, Access::Read)
                    .map_err(|error| io::Error::other(error.to_string()))?;
                copy.rewind()?;
                pending.copy = Some(copy);
            }
        }
        Ok(pending)
    }
}

impl BlobSink for BlobStore {
    fn begin(&self, source: &File, len: u64) -> io::Result<Box<dyn PendingBlob>> {
        Ok(Box::new(self.begin_blob(source, len)?))
    }

    fn contains(&self, sha256: &str) -> bool {
        BlobStore::contains(self, sha256)
    }
}

/// Blobs up to this size are written only once their hash is known and the store lacks them.
const IN_MEMORY: usize = 64 * 1024;

/// A blob being written (see [`PendingBlob`]): in memory while small, else in a temporary
/// file in `blobs/tmp/`, which is removed when it is dropped uncommitted.
struct Pending {
    /// The source file's mode (see [`Sharing::blob_mode`](apollo_core::sharing::Sharing::blob_mode)).
    source_mode: u32,
    store: BlobStore,
    temp: Option<File>,
    temp_path: PathBuf,
    /// `blobs/tmp`, opened when the temporary file is created there: renamed and removed
    /// through it, never through a path.
    tmp_dir: Option<Dir>,
    /// Bytes not written to the temporary file yet.
    buffer: Vec<u8>,
    /// The reflinked copy to hash, until taken.
    copy: Option<File>,
}

impl Pending {
    /// The temporary file, created on first need.
    fn create_temp(&mut self) -> io::Result<&mut File> {
        if self.temp.is_none() {
            // Created in `blobs/tmp` opened without following a link (see `BlobStore::open`).
            let tmp =
                (self.store.folder("tmp")).map_err(|error| io::Error::other(error.to_string()))?;
            let name = self
                .temp_path
                .file_name()
                .ok_or_else(|| io::Error::other("a temporary blob file has a name"))?;
            let flags = rustix::fs::OFlags::WRONLY
                | rustix::fs::OFlags::CREATE
                | rustix::fs::OFlags::EXCL
                | rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::CLOEXEC;
            let temp = rustix::fs::openat(
                tmp.fd(),
                name,
                flags,
                rustix::fs::Mode::from_raw_mode(crate::fsutil::PRIVATE_FILE_MODE),
            )?;
            self.temp = Some(File::from(temp));
            self.tmp_dir = Some(tmp);
        }
        let Some(temp) = self.temp.as_mut() else {
            return Err(io::Error::other("the temporary blob file was just created"));
        };
        Ok(temp)
    }

    /// The temporary file with every byte written so far.
    fn spill(&mut self) -> io::Result<&mut File> {
        let buffer = std::mem::take(&mut self.buffer);
        let temp = self.create_temp()?;
        temp.write_all(&buffer)?;
        Ok(temp)
    }
}

impl PendingBlob for Pending {
    fn take_copy(&mut self) -> Option<File> {
        self.copy.take()
    }

    fn write(&mut self, block: &[u8]) -> io::Result<()> {
        if self.temp.is_none() && self.buffer.len() + block.len() <= IN_MEMORY {
            self.buffer.extend_from_slice(block);
            return Ok(());
        }
        self.spill()?.write_all(block)
    }

    fn commit(mut self: Box<Self>, sha256: &str) -> io::Result<()> {
        let to_io = |error: StoreError| io::Error::other(error.to_string());
        check_name(sha256).map_err(to_io)?;
        let durable = self.store.durable;
        // `blobs/sha256/ab`, opened (created) without following a link.
        let folder = (self.store.folder("sha256"))
            .and_then(|sha| sha.create_subdir(&sha256[..2], durable))
            .map_err(to_io)?;
        let name = &sha256[2..];
        // Read-only, and never more readable than its most private source (DESIGN §18): a
        // captured 0600 `creds.json` must not become readable by other users, nor by the
        // group of a shared state directory.
        let mode = folder.sharing().blob_mode(self.source_mode);
        match folder.entry_type(name).map_err(to_io)? {
            // The same name is the same content: keep the blob there (the temporary file, if
            // any, goes when `self` is dropped), narrowed to this source's mode if it was
            // more private. Best effort: only the blob's owner may change its mode.
            Some(rustix::fs::FileType::RegularFile) => {
                if let Ok(blob) = folder.open_file(name, Access::Read)
                    && let Ok(meta) = blob.metadata()
                    && fs::Permissions::mode(&meta.permissions()) & 0o077 & !mode != 0
                {
                    let _ = blob.set_permissions(fs::Permissions::from_mode(mode));
                }
                return Ok(());
            }
            Some(found) => {
                return Err(to_io(StoreError::UnexpectedFileType {
                    path: folder.path().join(name),
                    expected: "a regular file",
                    found: crate::safe_dir::describe(found),
                }));
            }
            None => {}
        }
        let temp = self.spill()?;
        temp.set_permissions(fs::Permissions::from_mode(mode))?;
        if durable {
            temp.sync_all()?;
        }
        let size = temp.metadata()?.len();
        let Some(tmp_dir) = self.tmp_dir.as_ref() else {
            return Err(io::Error::other("a spilled blob has its temporary folder"));
        };
        let temp_name = self
            .temp_path
            .file_name()
            .ok_or_else(|| io::Error::other("a temporary blob file has a name"))?;
        tmp_dir
            .rename_into(temp_name, &folder, name)
            .map_err(to_io)?;
        // Renamed: nothing left for `drop` to remove.
        self.temp = None;
        self.store.written.fetch_add(size, Ordering::Relaxed);
        if durable {
            folder.sync().map_err(to_io)?;
        }
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.temp.is_some()
            && let (Some(tmp_dir), Some(name)) = (&self.tmp_dir, self.temp_path.file_name())
        {
            let _ = tmp_dir.remove_file(name);
        }
    }
}

/// The blobs the run in `run_dir` needs: its definition snapshots (`run_started`,
/// `run_resumed`) and every captured file of its manifests (`unit_files`, also those kept in
/// manifest files). What `prune` keeps and `backup` copies.
pub fn referenced_blobs(run_dir: &Path) -> Result<BTreeSet<String>, StoreError> {
    let RunBlobs {
        mut definitions,
        captures,
        ..
    } = run_blobs(run_dir)?;
    definitions.extend(captures);
    Ok(definitions)
}

/// The blobs one run references, by kind (see [`run_blobs`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RunBlobs {
    /// Its definition snapshots (`run_started`, `run_resumed`): small, and needed to show,
    /// resume or reproduce the run at all.
    pub(crate) definitions: BTreeSet<String>,
    /// The captured files of its manifests: what reproducing or reusing its units needs.
    pub(crate) captures: BTreeSet<String>,
    /// Of those, each attempt's captured outputs, by (unit, attempt).
    pub(crate) outputs: BTreeMap<(String, u32), BTreeSet<String>>,
    /// The attempts of earlier runs whose outputs it reused (`unit_reused`): (run, unit,
    /// attempt). Their blobs are what restoring its outputs needs.
    pub(crate) reused: Vec<(String, String, u32)>,
}

/// The blobs the run in `run_dir` references, its definition snapshots apart from its
/// captures (only well-formed names: a damaged record cannot name a path outside the store).
pub(crate) fn run_blobs(run_dir: &Path) -> Result<RunBlobs, StoreError> {
    let mut blobs = RunBlobs::default();
    for record in JournalReader::open(run_dir, ReadOptions::default())? {
        match record?.event {
            Event::RunStarted(started) => {
                blobs.definitions.insert(started.definition_hash);
            }
            Event::RunResumed(resumed) => {
                blobs.definitions.insert(resumed.definition_hash);
            }
            Event::UnitFiles(files) => {
                let listed = match &files.manifest {
                    Some(reference) => read_files_manifest(run_dir, reference)?,
                    None => files.files,
                };
                let captured = (listed.into_iter())
                    .filter(|file| file.captured() && check_name(&file.sha256).is_ok())
                    .map(|file| file.sha256);
                if files.side == FileSide::Outputs {
                    let outputs = blobs
                        .outputs
                        .entry((files.unit, files.attempt))
                        .or_default();
                    outputs.extend(captured);
                    blobs.captures.extend(outputs.iter().cloned());
                } else {
                    blobs.captures.extend(captured);
                }
            }
            Event::UnitReused(reused) => {
                blobs
                    .reused
                    .push((reused.from_run, reused.unit, reused.from_attempt));
            }
            _ => {}
        }
    }
    blobs.definitions.retain(|hash| check_name(hash).is_ok());
    Ok(blobs)
}

/// What [`sweep_unreferenced`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlobSweep {
    /// Blobs kept (some kept run needs them).
    pub kept: usize,
    /// Blobs removed.
    pub removed: usize,
    /// Bytes freed.
    pub freed_bytes: u64,
}

/// Mark and sweep: removes every blob of `store` that no run in `run_dirs` references
/// ([`referenced_blobs`]), and the temporary files a crash left. Only call it under the state
/// directory's lock, with every run of the state directory in `run_dirs`: a running apollo's
/// blobs are not referenced until their record is durable.
pub fn sweep_unreferenced(
    store: &BlobStore,
    run_dirs: &[PathBuf],
) -> Result<BlobSweep, StoreError> {
    sweep_marked(store, &referenced_by(run_dirs)?)
}

/// The blobs the runs in `run_dirs` reference (the mark of a mark and sweep); an error, naming
/// the run, when one of their journals cannot be read.
pub(crate) fn referenced_by(run_dirs: &[PathBuf]) -> Result<BTreeSet<String>, StoreError> {
    let mut marked = BTreeSet::new();
    for run_dir in run_dirs {
        marked.extend(referenced_blobs(run_dir)?);
    }
    Ok(marked)
}

/// The sweep of [`sweep_unreferenced`]: removes every blob of `store` not in `marked`, and
/// the temporary files a crash left.
pub(crate) fn sweep_marked(
    store: &BlobStore,
    marked: &BTreeSet<String>,
) -> Result<BlobSweep, StoreError> {
    let mut sweep = BlobSweep::default();
    for blob in store.iter()? {
        if marked.contains(&blob.sha256) {
            sweep.kept += 1;
        } else {
            store.remove(&blob.sha256)?;
            sweep.removed += 1;
            sweep.freed_bytes += blob.size;
        }
    }
    store.sweep_temporary()?;
    Ok(sweep)
}

/// SHA-256 and length of everything `reader` yields, each 64 KiB block handed to `sink` too.
fn hash_stream(
    mut reader: File,
    mut sink: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n_read = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n_read) => n_read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        hasher.update(&buffer[..n_read]);
        sink(&buffer[..n_read])?;
        size += n_read as u64;
    }
    Ok((apollo_core::hash::to_hex(&hasher.finalize()), size))
}

fn check_name(sha256: &str) -> Result<(), StoreError> {
    let ok = sha256.len() == 64
        && sha256
            .bytes()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::invalid(format!(
            "`{sha256}` is not a SHA-256 hash (64 lowercase hex digits)"
        )))
    }
}

#[cfg(test)]
mod tests;
