//! The state directory's permissions (DESIGN §18): what apollo creates there is the owner's
//! only (folders 0700, files 0600, blobs 0400, the new root 0700). A state directory made by
//! an older apollo keeps its modes until asked: [`readable_by_others`] finds what group or
//! other users can read, traverse or write (for `apollo verify`), and [`make_private`]
//! takes those bits away (`apollo verify --fix-permissions`), keeping the owner's.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// A file or folder of the state directory with group or other permission bits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadableEntry {
    /// Its path.
    pub path: PathBuf,
    /// Its permission bits (`0o7777` of the mode).
    pub mode: u32,
}

/// Every file and folder under `root` (itself included) that has a group or other bit.
/// Symbolic links are neither followed nor reported (their own mode means nothing).
pub fn readable_by_others(root: &Path) -> Result<Vec<ReadableEntry>, StoreError> {
    let mut found = Vec::new();
    walk(root, &mut |path, mode| {
        if mode & 0o077 != 0 {
            found.push(ReadableEntry {
                path: path.to_owned(),
                mode,
            });
        }
        Ok(())
    })?;
    Ok(found)
}

/// Takes the group and other bits off every file and folder under `root` (itself included),
/// keeping the owner's: a 0444 blob becomes 0400, a 0755 folder 0700. Returns how many were
/// changed.
pub fn make_private(root: &Path) -> Result<usize, StoreError> {
    let mut n_changed = 0;
    walk(root, &mut |path, mode| {
        if mode & 0o077 == 0 {
            return Ok(());
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o7700))
            .map_err(|source| StoreError::io("set the permissions of", path, source))?;
        n_changed += 1;
        Ok(())
    })?;
    Ok(n_changed)
}

/// Calls `visit` with each file and folder under `root` and its permission bits, a folder
/// before what it holds; symbolic links are skipped.
fn walk(
    root: &Path,
    visit: &mut dyn FnMut(&Path, u32) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let metadata = match std::fs::symlink_metadata(&path) {
            Ok(metadata) => metadata,
            // Deleted meanwhile (a prune, a run's temporary file): nothing to say about it.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(StoreError::io("read the metadata of", &path, source)),
        };
        if metadata.file_type().is_symlink() {
            continue;
        }
        visit(&path, metadata.permissions().mode() & 0o7777)?;
        if metadata.is_dir() {
            let entries = std::fs::read_dir(&path)
                .map_err(|source| StoreError::io("read the folder", &path, source))?;
            for entry in entries.flatten() {
                stack.push(entry.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_entries_are_found_and_made_private_keeping_the_owner_bits() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("state");
        std::fs::create_dir_all(root.join("blobs")).unwrap();
        std::fs::write(root.join("blobs/b"), "x").unwrap();
        std::fs::write(root.join("private"), "y").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("link")).unwrap();
        let set = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        set(&root.join("blobs/b"), 0o444);
        set(&root.join("private"), 0o600);
        set(&root.join("blobs"), 0o755);
        set(&root, 0o700);
        let found = readable_by_others(&root).unwrap();
        let mut paths: Vec<_> = found.iter().map(|entry| entry.path.clone()).collect();
        paths.sort();
        assert_eq!(paths, vec![root.join("blobs"), root.join("blobs/b")]);
        assert_eq!(make_private(&root).unwrap(), 2);
        assert!(readable_by_others(&root).unwrap().is_empty());
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&root.join("blobs/b")), 0o400);
        assert_eq!(mode(&root.join("blobs")), 0o700);
        assert_eq!(mode(&root.join("private")), 0o600);
    }
}
