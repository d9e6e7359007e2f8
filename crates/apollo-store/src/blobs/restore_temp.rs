//! The temporary file a blob restore writes before it renames it into place.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::BlobStore;
use crate::error::StoreError;
use crate::fsutil::random_hex;
use crate::safe_dir::Dir;

/// The temporary file a restore writes before renaming it into place. In `blobs/tmp` when
/// that is on the destination's filesystem (the usual case: the state directory inside the
/// project), so a SIGKILL mid-restore leaves it where the next run's sweep removes it, never
/// in the user's output folder (issue 36: 30 kills left 1.5 GB of `.big.bin.apollo-*` there,
/// and a folder output counted them as outputs). Elsewhere beside the destination, named
/// `.NAME.apollo-restore-XXXXXXXX`.
pub(super) struct RestoreTemp {
    pub(super) file: File,
    /// For messages, and for the rename and removal when beside the destination.
    pub(super) path: PathBuf,
    /// `blobs/tmp` and the file's name there, when it is in the store.
    in_store: Option<(Dir, String)>,
}

impl RestoreTemp {
    pub(super) fn create(
        store: &BlobStore,
        parent: &Path,
        dest: &Path,
    ) -> Result<Self, StoreError> {
        use std::os::unix::fs::MetadataExt;
        let flags = rustix::fs::OFlags::RDWR
            | rustix::fs::OFlags::CREATE
            | rustix::fs::OFlags::EXCL
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC;
        let private = rustix::fs::Mode::from_raw_mode(0o600);
        let parent_device = fs::metadata(parent).map(|meta| meta.dev());
        if let (Ok(tmp), Ok(parent_device)) = (store.folder("tmp"), parent_device)
            && rustix::fs::fstat(tmp.fd()).is_ok_and(|stat| stat.st_dev == parent_device)
        {
            let name = format!("restore-{}", random_hex(8));
            let path = tmp.path().join(&name);
            let fd = rustix::fs::openat(tmp.fd(), name.as_str(), flags, private)
                .map_err(|errno| StoreError::io("create", &path, errno.into()))?;
            return Ok(Self {
                file: File::from(fd),
                path,
                in_store: Some((tmp, name)),
            });
        }
        Self::beside(parent, dest)
    }

    /// A temporary file beside `dest` (in `parent`).
    fn beside(parent: &Path, dest: &Path) -> Result<Self, StoreError> {
        let file_name = dest
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        // One door for the name: output hashing and the run's start sweep recognise it.
        let suffix = random_hex(apollo_core::restore_temp::SUFFIX_LEN / 2);
        let path = parent.join(apollo_core::restore_temp::temp_name(&file_name, &suffix));
        let file = OpenOptions::new()
            .write(true)
            .read(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| StoreError::io("create", &path, source))?;
        Ok(Self {
            file,
            path,
            in_store: None,
        })
    }

    pub(super) fn rename_to(&self, dest: &Path) -> Result<(), StoreError> {
        match &self.in_store {
            Some((tmp, name)) => {
                match rustix::fs::renameat(tmp.fd(), name.as_str(), rustix::fs::CWD, dest) {
                    Ok(()) => Ok(()),
                    // Another mount of the same filesystem (a bind mount: the read-only
                    // project of `apollo reproduce` and `apollo bisect`, with a writable
                    // folder mounted inside it): copied beside the destination instead.
                    Err(rustix::io::Errno::XDEV) => self.copy_beside(dest),
                    Err(errno) => Err(StoreError::io("rename into", dest, errno.into())),
                }
            }
            None => fs::rename(&self.path, dest)
                .map_err(|source| StoreError::io("rename into", dest, source)),
        }
    }

    /// Copies the file beside `dest`, renames the copy into place, and removes the file.
    fn copy_beside(&self, dest: &Path) -> Result<(), StoreError> {
        let parent = (dest.parent())
            .filter(|parent| !parent.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let copy = Self::beside(parent, dest)?;
        let result = (|| {
            let io = |what, source| StoreError::io(what, &copy.path, source);
            let mut from = self.file.try_clone().map_err(|source| io("read", source))?;
            from.seek(SeekFrom::Start(0))
                .map_err(|source| io("read", source))?;
            io::copy(&mut from, &mut &copy.file).map_err(|source| io("write", source))?;
            let permissions = (self.file.metadata()).map_err(|source| io("read", source))?;
            (copy.file.set_permissions(permissions.permissions()))
                .map_err(|source| io("chmod", source))?;
            copy.file.sync_all().map_err(|source| io("fsync", source))?;
            copy.rename_to(dest)
        })();
        if result.is_err() {
            copy.remove();
        }
        self.remove();
        result
    }

    pub(super) fn remove(&self) {
        match &self.in_store {
            Some((tmp, name)) => {
                let _ = tmp.remove_file(name);
            }
            None => {
                let _ = fs::remove_file(&self.path);
            }
        }
    }
}
