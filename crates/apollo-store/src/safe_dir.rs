//! Files and folders inside the state directory, opened under a directory descriptor and never
//! through a symbolic link.
//!
//! Everything apollo creates or writes in its state directory goes through a [`Dir`]: each
//! path component below the state directory's root is opened with `O_NOFOLLOW` (and
//! `O_DIRECTORY` for folders) relative to its parent's descriptor, and each file is checked to
//! be of the expected type before a byte is written. A symbolic link, a FIFO or a device where
//! apollo keeps a file or a folder is refused with [`StoreError::UnexpectedFileType`], and
//! nothing is written through it. (The root itself is opened as named: a `--state-dir` that is
//! a symbolic link to another disk is the user's choice.)
//!
//! [`FileId`] is the (device, inode) pair the writer compares while a run is active, to notice
//! a lock file or run folder deleted or replaced under it.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use apollo_core::sharing::Sharing;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::error::StoreError;

/// A file's identity on this machine: (device, inode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    device: u64,
    inode: u64,
}

/// What an `fstat` of a held descriptor says: its identity and whether a name still links it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeldState {
    pub(crate) id: FileId,
    /// `st_nlink`: 0 once the file or folder was deleted (the descriptor keeps it alive).
    pub(crate) n_links: u64,
}

// The `stat` field types differ between platforms (`st_nlink` is 32 bits on some).
#[allow(clippy::useless_conversion)]
fn stat_id(stat: &rustix::fs::Stat) -> FileId {
    FileId {
        device: u64::from(stat.st_dev),
        inode: u64::from(stat.st_ino),
    }
}

/// The state of an open descriptor: a `statx` asking for the identity and the link count
/// only, `fstat` where `statx` is refused.
///
/// Not asking for the times matters to the journal, which checks its segment this way before
/// every commit. Since Linux 6.13 a `stat` that reports a file's times marks them as looked
/// at, and the next write then stamps the file with a fine-grained time instead of the
/// current timer tick's, so that every write changes the inode; on ext4 without a
/// filesystem journal every `fdatasync` writes a changed inode to disk, one more device
/// write per commit (`docs/design/2026-12-02-chain-fsync-levers.md`).
#[allow(clippy::useless_conversion)] // See `stat_id`.
pub(crate) fn held_state(fd: impl AsFd, path: &Path) -> Result<HeldState, StoreError> {
    use rustix::fs::{StatxFlags, makedev, statx};
    let fd = fd.as_fd();
    match statx(
        fd,
        "",
        AtFlags::EMPTY_PATH,
        StatxFlags::INO | StatxFlags::NLINK,
    ) {
        Ok(stat)
            if stat.stx_mask & (StatxFlags::INO | StatxFlags::NLINK).bits()
                == (StatxFlags::INO | StatxFlags::NLINK).bits() =>
        {
            Ok(HeldState {
                id: FileId {
                    device: u64::from(makedev(stat.stx_dev_major, stat.stx_dev_minor)),
                    inode: stat.stx_ino,
                },
                n_links: u64::from(stat.stx_nlink),
            })
        }
        // Refused (an old kernel, a seccomp filter) or incomplete: what `fstat` says.
        _ => {
            let stat = rustix::fs::fstat(fd)
                .map_err(|errno| StoreError::io("stat", path, errno.into()))?;
            Ok(HeldState {
                id: stat_id(&stat),
                n_links: u64::from(stat.st_nlink),
            })
        }
    }
}

/// What says a file's content is unchanged without reading it: its identity, size, and
/// modification and status-change times (a file cut and written back to its length has
/// other times).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ContentStamp {
    id: FileId,
    size: i64,
    modified: (i128, i128),
    changed: (i128, i128),
}

impl ContentStamp {
    /// The size, in bytes.
    pub(crate) fn len(&self) -> u64 {
        u64::try_from(self.size).unwrap_or(0)
    }
}

/// The [`ContentStamp`] of an open descriptor (`fstat`).
#[allow(clippy::useless_conversion)]
pub(crate) fn content_stamp(fd: impl AsFd, path: &Path) -> Result<ContentStamp, StoreError> {
    let stat = rustix::fs::fstat(fd).map_err(|errno| StoreError::io("stat", path, errno.into()))?;
    Ok(ContentStamp {
        id: stat_id(&stat),
        size: i64::from(stat.st_size),
        // (Field types differ between platforms: `i128` holds them all.)
        modified: (i128::from(stat.st_mtime), i128::from(stat.st_mtime_nsec)),
        changed: (i128::from(stat.st_ctime), i128::from(stat.st_ctime_nsec)),
    })
}

/// The identity of what `path` names now, without following a final symbolic link; `None`
/// when nothing is there.
pub(crate) fn path_id(path: &Path) -> Result<Option<FileId>, StoreError> {
    match rustix::fs::lstat(path) {
        Ok(stat) => Ok(Some(stat_id(&stat))),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => Ok(None),
        Err(errno) => Err(StoreError::io("stat", path, errno.into())),
    }
}

/// A type as named in messages: "a symbolic link", "a FIFO"...
pub(crate) fn describe(file_type: FileType) -> &'static str {
    match file_type {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a folder",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "a file of unknown type",
    }
}

/// How a regular file is opened by [`Dir::open_file`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read only.
    Read,
    /// Read and write, creating the file when missing (never through a symbolic link).
    ReadWriteCreate,
    /// Read and write.
    ReadWrite,
}

/// An open folder inside (or at the root of) the state directory.
///
/// It carries the state directory's [`Sharing`], read from the bits of the folder first
/// opened by path (2770: shared with its group) and handed down to the folders opened from it:
/// every folder and file created through it gets that sharing's modes, with an explicit
/// `chmod` where the umask would narrow them.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
    path: PathBuf,
    sharing: Sharing,
}

impl Dir {
    /// Opens the folder at `path` as named (following symbolic links): the state directory's
    /// root, or the ancestor a walk starts from.
    pub(crate) fn open(path: &Path) -> Result<Self, StoreError> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| match errno {
            rustix::io::Errno::NOENT => StoreError::NotFound {
                what: format!("folder {}", path.display()),
            },
            rustix::io::Errno::NOTDIR => StoreError::UnexpectedFileType {
                path: path.to_path_buf(),
                expected: "a folder",
                found: rustix::fs::stat(path)
                    .map(|stat| describe(FileType::from_raw_mode(stat.st_mode)))
                    .unwrap_or("not a folder"),
            },
            errno => StoreError::io("open", path, errno.into()),
        })?;
        Ok(Self {
            sharing: Sharing::of_folder(&fd),
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Opens `path`, following symbolic links only above its last `n_checked` components,
    /// which must be real folders. With `create`, missing ones among them are created (each
    /// fsynced into its parent when `durable`).
    pub(crate) fn open_checked_tail(
        path: &Path,
        n_checked: usize,
        create: bool,
        durable: bool,
    ) -> Result<Self, StoreError> {
        let components: Vec<_> = path.components().collect();
        // The root (`/`) and a leading `.` are never walked as names.
        let n_leading = components
            .iter()
            .take_while(|component| !matches!(component, std::path::Component::Normal(_)))
            .count();
        let split = components.len().saturating_sub(n_checked).max(n_leading);
        let mut top: PathBuf = components[..split].iter().collect();
        if top.as_os_str().is_empty() {
            top = PathBuf::from(".");
        }
        if create && !top.exists() {
            // Above the checked components: created as named (the caller's own path).
            crate::fsutil::create_dir_all_durable(&top)?;
        }
        let mut dir = Self::open(&top)?;
        for component in &components[split..] {
            let name = component.as_os_str();
            dir = if create {
                dir.create_subdir(name, durable)?
            } else {
                dir.subdir(name)?
            };
        }
        Ok(dir)
    }

    /// The folder's path, for messages.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The folder's descriptor.
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Who may use what is created through this folder (see the type's docs).
    pub(crate) fn sharing(&self) -> Sharing {
        self.sharing
    }

    /// Gives `fd`, created through this folder, the sharing's mode (see [`Sharing::apply`]).
    fn apply_sharing(&self, fd: impl AsFd, name: &Path, is_dir: bool) -> Result<(), StoreError> {
        self.sharing.apply(fd, is_dir).map_err(|source| {
            StoreError::io("set the permissions of", self.path.join(name), source)
        })
    }

    /// The type of the entry `name`, without following it (`None`: there is none).
    pub(crate) fn entry_type(
        &self,
        name: impl AsRef<Path>,
    ) -> Result<Option<FileType>, StoreError> {
        let name = name.as_ref();
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(FileType::from_raw_mode(stat.st_mode))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(errno) => Err(StoreError::io("stat", self.path.join(name), errno.into())),
        }
    }

    fn wrong_type(&self, name: &Path, expected: &'static str) -> StoreError {
        let found = match self.entry_type(name) {
            Ok(Some(found)) => describe(found),
            _ => "of another type",
        };
        StoreError::UnexpectedFileType {
            path: self.path.join(name),
            expected,
            found,
        }
    }

    /// Opens the existing sub-folder `name`; a symbolic link or a non-folder is refused.
    pub(crate) fn subdir(&self, name: impl AsRef<Path>) -> Result<Self, StoreError> {
        let name = name.as_ref();
        let path = self.path.join(name);
        match rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(Self {
                fd,
                path,
                sharing: self.sharing,
            }),
            Err(rustix::io::Errno::NOENT) => Err(StoreError::NotFound {
                what: format!("folder {}", path.display()),
            }),
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                Err(self.wrong_type(name, "a folder"))
            }
            Err(errno) => Err(StoreError::io("open", path, errno.into())),
        }
    }

    /// Opens the sub-folder `name`, creating it when missing (fsynced into this folder when
    /// `durable`); a symbolic link or a non-folder is refused.
    pub(crate) fn create_subdir(
        &self,
        name: impl AsRef<Path>,
        durable: bool,
    ) -> Result<Self, StoreError> {
        let name = name.as_ref();
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(self.sharing.dir_mode())) {
            Ok(()) => {
                let dir = self.subdir(name)?;
                self.apply_sharing(&dir.fd, name, true)?;
                if durable {
                    dir.sync()?;
                    self.sync()?;
                }
                Ok(dir)
            }
            Err(rustix::io::Errno::EXIST) => self.subdir(name),
            Err(errno) => Err(StoreError::io(
                "create directory",
                self.path.join(name),
                errno.into(),
            )),
        }
    }

    /// Creates the new file `name` for writing (it must not exist: a symbolic link there
    /// counts as existing).
    pub(crate) fn create_new_file(&self, name: impl AsRef<Path>) -> Result<File, StoreError> {
        let name = name.as_ref();
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let file = rustix::fs::openat(
            &self.fd,
            name,
            flags,
            Mode::from_raw_mode(self.sharing.file_mode()),
        )
        .map(File::from)
        .map_err(|errno| StoreError::io("create", self.path.join(name), errno.into()))?;
        self.apply_sharing(&file, name, false)?;
        Ok(file)
    }

    /// Opens the regular file `name` (never a symbolic link, FIFO or device: non-blocking and
    /// checked before any use; unlike `apollo_core::safe_file`, relative to a folder, to write).
    pub(crate) fn open_file(
        &self,
        name: impl AsRef<Path>,
        access: Access,
    ) -> Result<File, StoreError> {
        let name = name.as_ref();
        let path = self.path.join(name);
        // Refused before it is opened at all: opening some devices has effects of its own.
        if let Some(found) = self.entry_type(name)?
            && found != FileType::RegularFile
        {
            return Err(StoreError::UnexpectedFileType {
                path,
                expected: "a regular file",
                found: describe(found),
            });
        }
        let base = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let flags = base
            | match access {
                Access::Read => OFlags::RDONLY,
                Access::ReadWriteCreate => OFlags::RDWR | OFlags::CREATE,
                Access::ReadWrite => OFlags::RDWR,
            };
        let fd = match rustix::fs::openat(
            &self.fd,
            name,
            flags,
            Mode::from_raw_mode(self.sharing.file_mode()),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => {
                return Err(StoreError::NotFound {
                    what: format!("file {}", path.display()),
                });
            }
            // A symbolic link (ELOOP); a FIFO nobody reads opened for writing (ENXIO); a
            // folder opened for writing (EISDIR).
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NXIO | rustix::io::Errno::ISDIR) => {
                return Err(self.wrong_type(name, "a regular file"));
            }
            Err(errno) => return Err(StoreError::io("open", path, errno.into())),
        };
        let stat =
            rustix::fs::fstat(&fd).map_err(|errno| StoreError::io("stat", &path, errno.into()))?;
        let file_type = FileType::from_raw_mode(stat.st_mode);
        if file_type != FileType::RegularFile {
            return Err(StoreError::UnexpectedFileType {
                path,
                expected: "a regular file",
                found: describe(file_type),
            });
        }
        if access == Access::ReadWriteCreate {
            self.apply_sharing(&fd, name, false)?;
        }
        Ok(File::from(fd))
    }

    /// Renames `from` to `to`, both in this folder (a symbolic link is renamed, not followed).
    pub(crate) fn rename(
        &self,
        from: impl AsRef<Path>,
        to: impl AsRef<Path>,
    ) -> Result<(), StoreError> {
        rustix::fs::renameat(&self.fd, from.as_ref(), &self.fd, to.as_ref()).map_err(|errno| {
            StoreError::io("rename into", self.path.join(to.as_ref()), errno.into())
        })
    }

    /// Renames `from` in this folder to `to` in the folder `into` (on the same filesystem; a
    /// symbolic link is renamed, not followed).
    pub(crate) fn rename_into(
        &self,
        from: impl AsRef<Path>,
        into: &Dir,
        to: impl AsRef<Path>,
    ) -> Result<(), StoreError> {
        rustix::fs::renameat(&self.fd, from.as_ref(), &into.fd, to.as_ref()).map_err(|errno| {
            StoreError::io("rename into", into.path.join(to.as_ref()), errno.into())
        })
    }

    /// The names of the folder's entries (not `.` and `..`), read through its descriptor.
    pub(crate) fn entry_names(&self) -> Result<Vec<OsString>, StoreError> {
        let read_error =
            |errno: rustix::io::Errno| StoreError::io("read", &self.path, errno.into());
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::read_from(&self.fd).map_err(read_error)? {
            let name = entry.map_err(read_error)?.file_name().to_bytes().to_vec();
            if name != b"." && name != b".." {
                names.push(OsString::from_vec(name));
            }
        }
        Ok(names)
    }

    /// Removes the file `name` (best effort callers ignore the error).
    pub(crate) fn remove_file(&self, name: impl AsRef<Path>) -> Result<(), StoreError> {
        rustix::fs::unlinkat(&self.fd, name.as_ref(), AtFlags::empty())
            .map_err(|errno| StoreError::io("remove", self.path.join(name.as_ref()), errno.into()))
    }

    /// fsyncs the folder, so entries created or renamed in it survive a power loss.
    pub(crate) fn sync(&self) -> Result<(), StoreError> {
        rustix::fs::fsync(&self.fd)
            .map_err(|errno| StoreError::io("fsync directory", &self.path, errno.into()))
    }

    /// Writes `bytes` to `name` through a temporary file in this folder: write, fsync, rename,
    /// fsync the folder. A reader never sees a half-written file, and nothing is written
    /// through a symbolic link (the rename replaces a link named `name`, never its target).
    /// Without `durable`, nothing is fsynced (the writer's `Durability::None`).
    pub(crate) fn write_file_atomic(
        &self,
        name: &str,
        bytes: &[u8],
        durable: bool,
    ) -> Result<(), StoreError> {
        self.write_file_atomic_with(name, durable, |file| file.write_all(bytes))
    }

    /// [`write_file_atomic`](Self::write_file_atomic) of what `fill` writes to the temporary
    /// file (it may write through a buffer: the file is fsynced after it returns).
    pub(crate) fn write_file_atomic_with(
        &self,
        name: &str,
        durable: bool,
        fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
    ) -> Result<(), StoreError> {
        self.write_atomic(name, durable, fill)
    }

    fn write_atomic(
        &self,
        name: &str,
        durable: bool,
        fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
    ) -> Result<(), StoreError> {
        let temp = format!(".{name}.tmp-{}", crate::fsutil::random_hex(4));
        let temp_path = self.path.join(&temp);
        let result = (|| {
            let mut file = self.create_new_file(&temp)?;
            fill(&mut file)
                .map_err(|source| StoreError::io("write to", &temp_path, explain_efbig(source)))?;
            if durable {
                file.sync_all()
                    .map_err(|source| StoreError::io("fsync", &temp_path, source))?;
            }
            self.rename(&temp, name)?;
            if durable {
                self.sync()?;
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = self.remove_file(&temp);
        }
        result
    }

    /// The state of this folder's descriptor.
    pub(crate) fn held_state(&self) -> Result<HeldState, StoreError> {
        held_state(&self.fd, &self.path)
    }
}

/// A write that failed with `EFBIG` hit the process's file size limit (`ulimit -f`,
/// `RLIMIT_FSIZE`; the apollo binary catches `SIGXFSZ`, so the write fails instead of killing
/// it): say so.
pub(crate) fn explain_efbig(error: std::io::Error) -> std::io::Error {
    if error.raw_os_error() == Some(libc::EFBIG) {
        std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            "file too large: the process's file size limit (RLIMIT_FSIZE, `ulimit -f`) was reached",
        )
    } else {
        error
    }
}

#[cfg(test)]
mod tests;
