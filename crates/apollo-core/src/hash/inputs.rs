//! Which files a unit's `inputs` stand for.

use std::path::{Path, PathBuf};

use super::is_glob;
use crate::model::Unit;

/// Expand a unit's `inputs` patterns against `base_dir`: sorted, without duplicates.
/// A literal path that does not exist is kept (and hashed as missing); a glob that matches
/// nothing contributes nothing; a folder a glob matches stands for every file under it (one
/// whose name starts with a dot is left out: see [`hidden`]).
pub fn expand_inputs(unit: &Unit, base_dir: &Path) -> Vec<PathBuf> {
    expand_inputs_and_folders(unit, base_dir).0
}

/// [`expand_inputs`], and the folders the globs matched (with every folder under them):
/// sorted, without duplicates. Links to folders are not followed (a link is a file here,
/// hashed as what it points to, or refused when that is not a regular file).
pub(super) fn expand_inputs_and_folders(
    unit: &Unit,
    base_dir: &Path,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut files = Vec::new();
    let mut folders = Vec::new();
    for pattern in &unit.inputs {
        let absolute = base_dir.join(pattern);
        if !is_glob(pattern) {
            files.push(absolute);
            continue;
        }
        let Some(pattern_text) = absolute.to_str() else {
            continue;
        };
        let Ok(matches) = glob::glob(pattern_text) else {
            continue;
        };
        for path in matches.filter_map(Result::ok) {
            match std::fs::symlink_metadata(&path) {
                Ok(metadata) if metadata.is_dir() && !hidden(&path) => {
                    walk(path, &mut files, &mut folders);
                }
                Ok(metadata) if metadata.is_dir() => {}
                Ok(_) if path.is_file() => files.push(path),
                _ => {}
            }
        }
    }
    for list in [&mut files, &mut folders] {
        list.sort();
        list.dedup();
    }
    (files, folders)
}

/// Whether a folder's name starts with a dot (`.apollo`, `.git`, `.venv`): a glob's match or
/// a folder under one that is never walked, so that `*` never stands for a state directory.
fn hidden(folder: &Path) -> bool {
    folder
        .file_name()
        .is_some_and(|name| name.as_encoded_bytes().starts_with(b"."))
}

/// Every regular file (or link to one) under `folder`, and every folder, itself included
/// (folders whose name starts with a dot left out).
fn walk(folder: PathBuf, files: &mut Vec<PathBuf>, folders: &mut Vec<PathBuf>) {
    let mut pending = vec![folder];
    while let Some(folder) = pending.pop() {
        if let Ok(entries) = std::fs::read_dir(&folder) {
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                match entry.file_type() {
                    Ok(kind) if kind.is_dir() && !hidden(&path) => pending.push(path),
                    Ok(kind) if kind.is_dir() => {}
                    Ok(_) if path.is_file() => files.push(path),
                    _ => {}
                }
            }
        }
        folders.push(folder);
    }
}
