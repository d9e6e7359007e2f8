//! The name of the temporary file a restore writes beside an output (`.NAME.apollo-restore-X`),
//! in one place: the blob store names its files with [`temp_name`], and output hashing and the
//! run's start sweep recognise them with [`is_temp_name`], so the two can never disagree.
//!
//! A restore writes there only when the blob store's `tmp` is on another filesystem than the
//! output (or a rename across mounts fails with `EXDEV`); a SIGKILL mid-restore leaves the file
//! behind. It is never an output: a folder or glob output skips it, and the next run removes
//! it (issue 36 item 7).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// What sits between the output's name and the random suffix.
const MARKER: &str = ".apollo-restore-";

/// How many hex digits the random suffix has.
pub const SUFFIX_LEN: usize = 8;

/// The temporary file's name for a restore of the file named `file_name`, with `suffix` (lower
/// case hex digits, [`SUFFIX_LEN`] of them) to keep concurrent restores apart.
pub fn temp_name(file_name: &str, suffix: &str) -> String {
    format!(".{file_name}{MARKER}{suffix}")
}

/// Whether `name` (a file name, not a path) is one [`temp_name`] makes.
pub fn is_temp_name(name: &OsStr) -> bool {
    let bytes = name.as_encoded_bytes();
    let Some(rest) = bytes.strip_prefix(b".") else {
        return false;
    };
    if rest.len() < MARKER.len() + SUFFIX_LEN {
        return false;
    }
    let (head, suffix) = rest.split_at(rest.len() - SUFFIX_LEN);
    head.ends_with(MARKER.as_bytes())
        && (suffix.iter()).all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(byte))
}

/// Whether the file name of `path` is one [`temp_name`] makes.
pub fn is_temp_path(path: &Path) -> bool {
    path.file_name().is_some_and(is_temp_name)
}

/// The folders where a restore of one of `unit`'s declared outputs may have left its temporary
/// file, sorted, without duplicates: the folder of each declared file (whether it exists or
/// not) and of each file a glob matches, and each declared or matched folder with every folder
/// under it (links to folders not followed). Reads the file system; changes nothing.
pub fn folders_of_outputs(unit: &crate::Unit, base_dir: &Path) -> Vec<PathBuf> {
    let mut folders = Vec::new();
    let mut add = |path: PathBuf| {
        if !std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir()) {
            folders.extend(path.parent().map(Path::to_path_buf));
            return;
        }
        let mut pending = vec![path];
        while let Some(folder) = pending.pop() {
            for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|file_type| file_type.is_dir()) {
                    pending.push(entry.path());
                }
            }
            folders.push(folder);
        }
    };
    for declared in &unit.outputs {
        let absolute = base_dir.join(declared);
        if crate::hash::is_glob(declared) {
            let matches = (absolute.to_str()).and_then(|pattern| glob::glob(pattern).ok());
            matches.into_iter().flatten().flatten().for_each(&mut add);
        } else {
            add(absolute);
        }
    }
    folders.sort();
    folders.dedup();
    folders
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_a_restore_makes_are_recognised_and_nothing_else_is() {
        for file_name in ["big.bin", "", "a.apollo-restore-0123abcd", "日本.csv"] {
            let name = temp_name(file_name, "0123abcd");
            assert!(is_temp_name(OsStr::new(&name)), "{name}");
        }
        for name in [
            "big.bin",
            ".big.bin",
            "big.bin.apollo-restore-0123abcd",
            ".big.bin.apollo-restore-0123abc",
            ".big.bin.apollo-restore-0123ABCD",
            ".big.bin.apollo-restore-0123abcde",
            ".big.bin.apollo-0123abcd",
        ] {
            assert!(!is_temp_name(OsStr::new(name)), "{name}");
        }
    }
}
