//! **journal-reads** — the views (apollo-cli's commands, apollo-serve) render the run model and
//! the read side of apollo-runner (`apollo_runner::read`); none folds a journal itself (issue
//! 35: each view that derived a run's states from the records on its own said something else
//! about the same run). The one exception is the replay, whose product is the journal's
//! records in order: a recording played back, `--format json` the records as stored.

use std::path::Path;

/// What folds or opens a journal.
const JOURNAL_READS: [&str; 5] = [
    "Timeline::from_records",
    "JournalReader::open",
    "read_records(",
    "diff_records",
    "PriorState::",
];

/// The view files that may, and why.
const ALLOWED: [(&str, &str); 2] = [
    (
        "crates/apollo-cli/src/cmd/replay.rs",
        "the replay plays the records back in order (its `run end` counts are the run model's)",
    ),
    (
        "crates/apollo-cli/src/state.rs",
        "`read_records` wraps apollo_runner::read's for the replay",
    ),
];

pub(super) fn journal_reads_in_views(root: &Path) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for crate_dir in ["crates/apollo-cli/src", "crates/apollo-serve/src"] {
        for file in super::rust_files(&root.join(crate_dir))? {
            let relative = super::relative(root, &file);
            if super::is_test_file(&file) || ALLOWED.iter().any(|(path, _)| *path == relative) {
                continue;
            }
            found.extend(journal_reads(&relative, &super::read(&file)?));
        }
    }
    Ok(found)
}

/// The journal reads in the library code of `text`, the file `relative`.
pub(super) fn journal_reads(relative: &str, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (index, code) in super::library_code(&lines) {
        if let Some(read) = JOURNAL_READS.iter().find(|read| code.contains(*read)) {
            found.push(format!(
                "{relative}:{}: `{read}` in a view (render `apollo_runner::read`'s run model)",
                index + 1
            ));
        }
    }
    found
}
