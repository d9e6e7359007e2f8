//! Which files a unit's declared `outputs` stand for.

use std::io;
use std::path::Path;
use std::path::PathBuf;

use super::{HashError, Problem, is_glob, not_read_here};
use crate::model::Unit;
use crate::restore_temp::is_temp_path;

/// The files a unit's declared outputs stand for, sorted, without duplicates: a file is
/// itself, a directory every regular file under it (symbolic links to files followed, to
/// directories not), a glob what it matches; never a restore's temporary file in a directory
/// or matched by a glob ([`crate::restore_temp`]). A literal path that does not exist, and a
/// glob that matches nothing, are errors (the declared output is missing).
pub fn expand_outputs(unit: &Unit, base_dir: &Path) -> Result<Vec<PathBuf>, HashError> {
    expand_outputs_stat(unit, base_dir, false)
        .map(|paths| paths.into_iter().map(|(path, _)| path).collect())
}

/// [`expand_outputs`], with the `stat` of each literal file path it made on the way. With
/// `stat_only`, a directory is not walked: it is a [`HashError::not_read_here`] error.
pub(super) fn expand_outputs_stat(
    unit: &Unit,
    base_dir: &Path,
    stat_only: bool,
) -> Result<Vec<(PathBuf, Option<std::fs::Metadata>)>, HashError> {
    let missing = |path: PathBuf| HashError {
        what: "output file",
        path,
        problem: Problem::Io(io::ErrorKind::NotFound.into()),
    };
    let mut paths = Vec::new();
    for declared in &unit.outputs {
        let absolute = base_dir.join(declared);
        if is_glob(declared) {
            let matches: Vec<PathBuf> = absolute
                .to_str()
                .and_then(|pattern| glob::glob(pattern).ok())
                .map(|matches| {
                    (matches.filter_map(Result::ok))
                        .filter(|path| !is_temp_path(path))
                        .collect()
                })
                .unwrap_or_default();
            if matches.is_empty() {
                return Err(missing(absolute));
            }
            for path in matches {
                push_output(path, &mut paths)?;
            }
        } else {
            match std::fs::metadata(&absolute) {
                Err(error) if error.kind() == io::ErrorKind::NotFound => {
                    return Err(missing(absolute));
                }
                // A file (or a symbolic link to one): itself, without a second look.
                Ok(metadata) if !metadata.is_dir() => paths.push((absolute, Some(metadata))),
                Ok(_) if stat_only => {
                    return Err(HashError {
                        what: "output file",
                        path: absolute,
                        problem: not_read_here(),
                    });
                }
                _ => push_output(absolute, &mut paths)?,
            }
        }
    }
    paths.sort_by(|a, b| a.0.cmp(&b.0));
    paths.dedup_by(|a, b| a.0 == b.0);
    Ok(paths)
}

/// `path`, or every file under it when it is a directory.
fn push_output(
    path: PathBuf,
    paths: &mut Vec<(PathBuf, Option<std::fs::Metadata>)>,
) -> Result<(), HashError> {
    let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir());
    if !is_dir {
        paths.push((path, None));
        return Ok(());
    }
    let mut pending = vec![path];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|error| HashError {
            what: "output directory",
            path: dir.clone(),
            problem: Problem::Io(error),
        })?;
        for entry in entries {
            let entry = entry.map_err(|error| HashError {
                what: "output directory",
                path: dir.clone(),
                problem: Problem::Io(error),
            })?;
            let entry_path = entry.path();
            if entry.file_type().is_ok_and(|file_type| file_type.is_dir()) {
                pending.push(entry_path);
            } else if !is_temp_path(&entry_path) {
                paths.push((entry_path, None));
            }
        }
    }
    Ok(())
}
