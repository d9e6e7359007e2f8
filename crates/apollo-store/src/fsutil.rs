//! Small durable-filesystem helpers: fsync a directory, create a directory durably.

use std::fs::{self, File};
use std::io;
use std::path::Path;

use apollo_core::sharing::Sharing;

use crate::error::StoreError;

/// fsyncs a directory so the entries created or renamed in it survive a power loss.
pub(crate) fn fsync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|source| StoreError::io("fsync directory", dir, source))
}

/// The mode of every file apollo creates in a private state directory (blobs are then made
/// read-only); see [`Sharing`] for a shared one.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;

/// Creates `dir` and any missing parents, each with the modes its parent's bits ask for (see
/// [`Sharing::of_folder_mode`]: owner-only, 0700, unless the parent is a shared state
/// directory's 2770 folder); each directory created is fsynced into its parent.
pub(crate) fn create_dir_all_durable(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    create_dir_all_durable(parent)?;
    // Owner-only (DESIGN §18): what apollo keeps (captured files, logs, caches) is the
    // user's alone unless the state directory says otherwise.
    let sharing = fs::metadata(parent).map_or(Sharing::Private, |meta| {
        Sharing::of_folder_mode(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()))
    });
    match std::os::unix::fs::DirBuilderExt::mode(&mut fs::DirBuilder::new(), sharing.dir_mode())
        .create(dir)
    {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {
            return Ok(());
        }
        Err(source) => return Err(StoreError::io("create directory", dir, source)),
    }
    File::open(dir)
        .and_then(|handle| sharing.apply(handle, true))
        .map_err(|source| StoreError::io("set the permissions of", dir, source))?;
    fsync_dir(dir)?;
    if let Some(parent) = dir.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        fsync_dir(parent)?;
    }
    Ok(())
}

/// `n_bytes` random bytes as lowercase hex. Falls back to a time-and-pid mix if the system
/// random source fails, which is good enough for the uniqueness suffixes it is used for.
pub(crate) fn random_hex(n_bytes: usize) -> String {
    let mut bytes = vec![0u8; n_bytes];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or(0);
        let mixed = nanos ^ (u128::from(std::process::id()) << 64);
        for (index, byte) in bytes.iter_mut().enumerate() {
            *byte = (mixed >> ((index % 16) * 8)) as u8;
        }
    }
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
