//! **run-paths** — only apollo-store spells a run's folders: the run folder and its `units/`,
//! `journal/` and `hooks/` folders, the blob store's `blobs/`, and an attempt's folder
//! `units/<unit>/<attempt>` with its unit's name encoded for the disk (a fan-out instance
//! `load[eu]` is `units/load__eu/`). Every other crate asks `StateDir` (`run_dir`, `run_path`,
//! `blob_store`), `RunDir` (`journal_dir`, `hook_log_dir`) and `RunDir::attempt_dir`, whose
//! `AttemptDir` encodes the name once and checks what it finds (DESIGN §18; issue 35: views
//! that joined `units/<name>` themselves found no output for `load[eu]`). apollo-exec and
//! apollo-slurm only get an attempt's folder as a path, from the engine.

use std::path::Path;

/// What builds a run's folders, or an attempt's folder name.
const RUN_PATH_SPELLINGS: [&str; 10] = [
    "join(\"units\")",
    "push(\"units\")",
    "new(\"units\")",
    "\"units/",
    "unit_folder_name(",
    "join(\"journal\")",
    "\"journal/",
    "join(\"hooks\")",
    "runs_dir().join(",
    "join(\"blobs\")",
];

/// Files outside apollo-store that may use a spelling, and why. Only shrinks.
const ALLOWED: [(&str, &str, &str); 1] = [(
    "crates/apollo-core/src/",
    "unit_folder_name(",
    "the encoding itself, and the load-time check that two units never share a folder",
)];

pub(super) fn run_paths_outside_the_store(root: &Path) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for file in super::rust_files(&root.join("crates"))? {
        let relative = super::relative(root, &file);
        if relative.starts_with("crates/apollo-store/")
            || !relative.contains("/src/")
            || super::is_test_file(&file)
        {
            continue;
        }
        found.extend(run_paths(&relative, &super::read(&file)?));
    }
    Ok(found)
}

/// The run-path spellings in the library code of `text`, the file `relative`, but those
/// [`ALLOWED`] there.
pub(super) fn run_paths(relative: &str, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (index, code) in super::library_code(&lines) {
        let spelled = RUN_PATH_SPELLINGS.iter().find(|spelling| {
            code.contains(*spelling)
                && !ALLOWED
                    .iter()
                    .any(|(path, allowed, _)| relative.starts_with(path) && allowed == *spelling)
        });
        if let Some(spelling) = spelled {
            found.push(format!(
                "{relative}:{}: `{spelling}` outside apollo-store (ask `RunDir` for a run's folders, `RunDir::attempt_dir` for an attempt's)",
                index + 1
            ));
        }
    }
    found
}
