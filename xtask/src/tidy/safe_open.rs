//! **safe-open** — an existing file is opened "safely" (no symbolic link followed, no
//! blocking on a FIFO, only a regular file) through one door, `apollo_core::safe_file`
//! (issue 35: the same guard was written four ways and had begun to differ). A
//! `NOFOLLOW` open elsewhere in library code must be one of the [`ALLOWED`] exceptions, each
//! of which opens for writing or creating, or relative to a folder's descriptor, which the
//! door does not do. `AT_SYMLINK_NOFOLLOW` (a `stat`, not an open) is not counted.

use std::path::Path;

/// The spellings of a no-follow open.
const NOFOLLOW_SPELLINGS: [&str; 2] = ["O_NOFOLLOW", "OFlags::NOFOLLOW"];

/// Files that may open with `O_NOFOLLOW` themselves, and why. Only shrinks.
const ALLOWED: [(&str, &str); 7] = [
    ("crates/apollo-core/src/safe_file.rs", "the door itself"),
    (
        "crates/apollo-store/src/safe_dir.rs",
        "opens relative to a folder's descriptor, for writing and creating too",
    ),
    (
        "crates/apollo-store/src/blobs.rs",
        "creates a temporary blob (O_CREAT | O_EXCL)",
    ),
    (
        "crates/apollo-store/src/blobs/restore_temp.rs",
        "creates a temporary restore file (O_CREAT | O_EXCL)",
    ),
    (
        "crates/apollo-exec/src/attempt_files.rs",
        "creates the temporary of an atomic write (create_new)",
    ),
    (
        "crates/apollo-exec/src/log_cap.rs",
        "cuts a log in place: opens it for writing",
    ),
    (
        "crates/apollo-exec/src/output/mod.rs",
        "creates and appends to an attempt's output file",
    ),
];

pub(super) fn nofollow_opens_outside_the_door(root: &Path) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for file in super::rust_files(&root.join("crates"))? {
        let relative = super::relative(root, &file);
        if !relative.contains("/src/") || super::is_test_file(&file) {
            continue;
        }
        found.extend(nofollow_opens(&relative, &super::read(&file)?));
    }
    Ok(found)
}

/// The no-follow opens in the library code of `text`, the file `relative`, unless it is
/// [`ALLOWED`].
pub(super) fn nofollow_opens(relative: &str, text: &str) -> Vec<String> {
    if ALLOWED.iter().any(|(path, _)| relative == *path) {
        return Vec::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (index, code) in super::library_code(&lines) {
        if let Some(spelling) = NOFOLLOW_SPELLINGS
            .iter()
            .find(|spelling| code.contains(*spelling))
        {
            found.push(format!(
                "{relative}:{}: `{spelling}` outside apollo_core::safe_file (open an existing file with `safe_file::open`)",
                index + 1
            ));
        }
    }
    found
}
