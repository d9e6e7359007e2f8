//! The state directory's permissions (DESIGN §18): what apollo creates there is the owner's
//! only (folders 0700, files 0600, blobs 0400, the new root 0700), or, in a state directory
//! shared with a group, the owner's and the group's (folders 2770, files 0660, blobs 0440 or
//! 0400). A state directory made by an older apollo keeps its modes until asked:
//! [`misfit_modes`] finds what does not have its sharing's modes (for `apollo verify`), and
//! [`fix_modes`] gives them (`apollo verify --fix-permissions`), keeping the owner's bits.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use apollo_core::sharing::Sharing;

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

/// The mode `path` (a folder when `is_dir`, of mode `mode`) should have in a state directory
/// `root` shared as `sharing`. Private: no group or other bit (the owner's kept), no setgid
/// folder. Shared:
/// folders 2770; blobs keep their owner bits and at most group read (a blob whose source was
/// private stays 0400); other files give the group what the owner has but never others.
fn wanted_mode(root: &Path, path: &Path, is_dir: bool, mode: u32, sharing: Sharing) -> u32 {
    match sharing {
        // (A shared folder's setgid bit goes too: it says nothing in a private one.)
        Sharing::Private if is_dir => mode & 0o5700,
        Sharing::Private => mode & 0o7700,
        Sharing::Group if is_dir => Sharing::Group.dir_mode(),
        Sharing::Group if path.starts_with(root.join("blobs").join("sha256")) => {
            mode & 0o740 & !0o020
        }
        Sharing::Group => (mode & 0o700) | ((mode & 0o700) >> 3),
    }
}

/// Every file and folder under `root` (itself included) whose mode is not the one `sharing`
/// wants (see the module docs), with its mode. Symbolic links are neither followed nor reported.
pub fn misfit_modes(root: &Path, sharing: Sharing) -> Result<Vec<ReadableEntry>, StoreError> {
    let mut found = Vec::new();
    walk_typed(root, &mut |path, mode, is_dir, _| {
        if wanted_mode(root, path, is_dir, mode, sharing) != mode {
            found.push(ReadableEntry {
                path: path.to_owned(),
                mode,
            });
        }
        Ok(())
    })?;
    Ok(found)
}

/// Gives every file and folder under `root` (itself included) the mode `sharing` wants (see
/// the module docs). Only the owner of a file may change its mode: those of other users (a
/// teammate's, in a shared state directory) are left and counted in the second number.
/// Returns (how many were changed, how many belong to another user and were left).
pub fn fix_modes(root: &Path, sharing: Sharing) -> Result<(usize, usize), StoreError> {
    let uid = rustix::process::geteuid();
    let (mut n_changed, mut n_others) = (0, 0);
    walk_typed(root, &mut |path, mode, is_dir, owner| {
        let wanted = wanted_mode(root, path, is_dir, mode, sharing);
        if wanted == mode {
            return Ok(());
        }
        if owner != uid.as_raw() && !uid.is_root() {
            n_others += 1;
            return Ok(());
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(wanted))
            .map_err(|source| StoreError::io("set the permissions of", path, source))?;
        n_changed += 1;
        Ok(())
    })?;
    Ok((n_changed, n_others))
}

/// Calls `visit` with each file and folder under `root` and its permission bits, a folder
/// before what it holds; symbolic links are skipped.
fn walk(
    root: &Path,
    visit: &mut dyn FnMut(&Path, u32) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    walk_typed(root, &mut |path, mode, _, _| visit(path, mode))
}

/// What [`walk_typed`] calls with each file and folder: its path, permission bits, whether it
/// is a folder, and its owner's uid.
type TypedVisit<'a> = dyn FnMut(&Path, u32, bool, u32) -> Result<(), StoreError> + 'a;

/// [`walk`], also telling whether each is a folder, and its owner's uid.
fn walk_typed(root: &Path, visit: &mut TypedVisit<'_>) -> Result<(), StoreError> {
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
        let mode = metadata.permissions().mode() & 0o7777;
        visit(&path, mode, metadata.is_dir(), metadata.uid())?;
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

    #[test]
    fn a_shared_state_directory_wants_group_modes_and_keeps_private_blobs_private() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("state");
        let blobs = root.join("blobs/sha256/ab");
        std::fs::create_dir_all(&blobs).unwrap();
        std::fs::write(blobs.join("shared"), "x").unwrap();
        std::fs::write(blobs.join("private"), "x").unwrap();
        std::fs::write(blobs.join("world"), "x").unwrap();
        std::fs::write(root.join("lock"), "").unwrap();
        let set = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
        for folder in [
            &root,
            &root.join("blobs"),
            &root.join("blobs/sha256"),
            &blobs,
        ] {
            set(folder, 0o700);
        }
        set(&blobs.join("shared"), 0o440);
        set(&blobs.join("private"), 0o400);
        set(&blobs.join("world"), 0o444);
        set(&root.join("lock"), 0o600);
        let mut misfits: Vec<_> = misfit_modes(&root, Sharing::Group)
            .unwrap()
            .into_iter()
            .map(|entry| entry.path)
            .collect();
        misfits.sort();
        let mut expected = vec![
            root.clone(),
            root.join("blobs"),
            root.join("blobs/sha256"),
            blobs.clone(),
            blobs.join("world"),
            root.join("lock"),
        ];
        expected.sort();
        assert_eq!(misfits, expected);
        assert_eq!(fix_modes(&root, Sharing::Group).unwrap(), (6, 0));
        assert!(misfit_modes(&root, Sharing::Group).unwrap().is_empty());
        assert_eq!(mode(&root), 0o2770);
        assert_eq!(mode(&blobs), 0o2770);
        assert_eq!(mode(&root.join("lock")), 0o660);
        assert_eq!(mode(&blobs.join("shared")), 0o440);
        assert_eq!(mode(&blobs.join("private")), 0o400);
        assert_eq!(mode(&blobs.join("world")), 0o440);
        // Back to private: nothing for the group.
        assert_eq!(fix_modes(&root, Sharing::Private).unwrap().0, 7);
        assert!(misfit_modes(&root, Sharing::Private).unwrap().is_empty());
        assert_eq!(mode(&root), 0o700);
    }
}
