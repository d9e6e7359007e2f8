//! **file-size** — no source file of the workspace (`crates/`, `tests/`, `xtask/`, tests
//! included) runs past [`MAX_LINES`], nor an engine file (`apollo-core/src/engine`, its tests
//! apart) past [`ENGINE_MAX_LINES`] (issue 11): one job per file, a file a newcomer reads in
//! one sitting. The files that were longer when the limit came in (issue 37) are listed in
//! [`ALLOW_LIST`] with their length then, and the list only shrinks: a listed file may not grow
//! past its number, and one back within the limit must leave the list.

use std::collections::BTreeMap;
use std::path::Path;

/// The longest a source file may be (lines, comments and blank lines included, as `wc -l`).
pub(super) const MAX_LINES: usize = 500;

/// The engine's stricter limit (its code, not its tests).
pub(super) const ENGINE_MAX_LINES: usize = 420;

/// The files over their limit, each with the most lines it may have: `PATH LINES` per line.
pub(super) const ALLOW_LIST: &str = "xtask/tidy-allow/file-size.txt";

/// The limit of the file at `relative` (a path from the workspace root, `/`-separated).
fn limit_for(relative: &str) -> usize {
    if relative.starts_with("crates/apollo-core/src/engine/") && !relative.contains("/tests/") {
        ENGINE_MAX_LINES
    } else {
        MAX_LINES
    }
}

pub(super) fn files_too_long(root: &Path) -> Result<Vec<String>, String> {
    let mut sizes = BTreeMap::new();
    for file in super::rust_files(root)? {
        sizes.insert(
            super::relative(root, &file),
            super::read(&file)?.lines().count(),
        );
    }
    let allow_list = match std::fs::read_to_string(root.join(ALLOW_LIST)) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(format!("cannot read {ALLOW_LIST}: {error}")),
    };
    Ok(compare(&sizes, &allow_list))
}

/// The violations of files of these sizes (path → lines) against `allow_list`'s text.
fn compare(sizes: &BTreeMap<String, usize>, allow_list: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut allowed: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, line) in allow_list.lines().enumerate() {
        let at = format!("{ALLOW_LIST}:{}", index + 1);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(path), Some(Ok(lines)), None) = (
            words.next(),
            words.next().map(str::parse::<usize>),
            words.next(),
        ) else {
            found.push(format!(
                "{at}: `{line}` is not `PATH LINES` (a path from the workspace root, a number)"
            ));
            continue;
        };
        if allowed.insert(path, lines).is_some() {
            found.push(format!("{at}: {path} is listed twice: keep one line"));
        }
        match sizes.get(path) {
            None => found.push(format!(
                "{at}: {path} is not a source file of the workspace (any more): remove its line"
            )),
            Some(&size) if size <= limit_for(path) => found.push(format!(
                "{path}: {size} lines, within the limit of {} now: remove its line from {ALLOW_LIST}",
                limit_for(path)
            )),
            Some(&size) if size > lines => found.push(format!(
                "{path}: {size} lines, more than the {lines} {ALLOW_LIST} allows it (the list only \
                 shrinks, never grows): move a job of the file into a module of its own, or take \
                 out what was added, to get back to {lines} or fewer"
            )),
            Some(_) => {}
        }
    }
    for (path, &size) in sizes {
        let limit = limit_for(path);
        if size > limit && !allowed.contains_key(path.as_str()) {
            found.push(format!(
                "{path}: {size} lines, over the limit of {limit}: split it by job (a type and its \
                 impl, a group of helpers, the tests into a `tests.rs` beside it) into modules of \
                 their own; the limit is not raised, and {ALLOW_LIST} takes no new files"
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(files: &[(&str, usize)]) -> BTreeMap<String, usize> {
        files
            .iter()
            .map(|&(path, lines)| (path.to_owned(), lines))
            .collect()
    }

    #[test]
    fn a_file_over_the_limit_fails_unless_listed() {
        let files = sizes(&[
            ("crates/apollo-demo/src/big.rs", MAX_LINES + 1),
            ("crates/apollo-demo/src/listed.rs", MAX_LINES + 50),
            ("crates/apollo-demo/src/small.rs", MAX_LINES),
        ]);
        let found = compare(
            &files,
            "# comment\n\ncrates/apollo-demo/src/listed.rs 600\n",
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "crates/apollo-demo/src/big.rs: 501 lines, over the limit of 500: split it"
            ),
            "{found:?}"
        );
        assert!(found[0].contains(ALLOW_LIST), "{found:?}");
    }

    #[test]
    fn a_listed_file_may_not_grow() {
        let files = sizes(&[("crates/apollo-demo/src/listed.rs", 601)]);
        let found = compare(&files, "crates/apollo-demo/src/listed.rs 600\n");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "crates/apollo-demo/src/listed.rs: 601 lines, more than the 600 xtask/tidy-allow/file-size.txt allows it"
            ),
            "{found:?}"
        );
    }

    #[test]
    fn a_listed_file_back_within_the_limit_must_leave_the_list() {
        let files = sizes(&[("crates/apollo-demo/src/listed.rs", MAX_LINES)]);
        let found = compare(&files, "crates/apollo-demo/src/listed.rs 600\n");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].ends_with(
                "within the limit of 500 now: remove its line from xtask/tidy-allow/file-size.txt"
            ),
            "{found:?}"
        );
    }

    #[test]
    fn the_list_names_only_files_that_exist_once_each() {
        let files = sizes(&[("crates/apollo-demo/src/listed.rs", 550)]);
        let list = "crates/apollo-demo/src/gone.rs 700\ncrates/apollo-demo/src/listed.rs 600\n\
                    crates/apollo-demo/src/listed.rs 600\nnot a line\n";
        let found = compare(&files, list);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].starts_with("xtask/tidy-allow/file-size.txt:1: crates/apollo-demo/src/gone.rs is not a source file"), "{found:?}");
        assert!(
            found[1].starts_with(
                "xtask/tidy-allow/file-size.txt:3: crates/apollo-demo/src/listed.rs is listed twice"
            ),
            "{found:?}"
        );
        assert!(
            found[2]
                .starts_with("xtask/tidy-allow/file-size.txt:4: `not a line` is not `PATH LINES`"),
            "{found:?}"
        );
    }

    #[test]
    fn the_engine_keeps_its_stricter_limit() {
        let files = sizes(&[
            (
                "crates/apollo-core/src/engine/scheduler/mod.rs",
                ENGINE_MAX_LINES + 1,
            ),
            (
                "crates/apollo-core/src/engine/tests/long.rs",
                ENGINE_MAX_LINES + 1,
            ),
        ]);
        let found = compare(&files, "");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "crates/apollo-core/src/engine/scheduler/mod.rs: 421 lines, over the limit of 420"
            ),
            "{found:?}"
        );
    }
}
