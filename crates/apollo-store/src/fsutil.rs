//! Small durable-filesystem helpers: fsync a directory, create a directory durably.

use std::fs::{self, File};
use std::io;
use std::path::Path;

use crate::error::StoreError;

/// fsyncs a directory so the entries created or renamed in it survive a power loss.
pub(crate) fn fsync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|source| StoreError::io("fsync directory", dir, source))
}

/// Creates `dir` and any missing parents; each directory created is fsynced into its parent.
pub(crate) fn create_dir_all_durable(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        create_dir_all_durable(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {
            return Ok(());
        }
        Err(source) => return Err(StoreError::io("create directory", dir, source)),
    }
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
