//! The checks run on the workspace, and the text scans shown to find what they forbid.

use super::*;

fn assert_clean(check: Check) {
    let root = crate::workspace_root();
    let found = check(&root).expect("the workspace can be read");
    assert!(
        found.is_empty(),
        "{} violation(s) (`cargo xtask tidy` lists them):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn only_apollo_exec_creates_processes() {
    assert_clean(process_creation_outside_exec);
}

#[test]
fn only_apollo_store_spells_a_runs_folders() {
    assert_clean(run_paths::run_paths_outside_the_store);
}

#[test]
fn an_existing_file_is_opened_safely_through_one_door() {
    assert_clean(safe_open::nofollow_opens_outside_the_door);
}

#[test]
fn a_nofollow_open_outside_the_door_is_found() {
    let text = "fn f(path: &Path) {\n    \
                // O_NOFOLLOW in a comment is fine\n    \
                let _ = OpenOptions::new().custom_flags(libc::O_NOFOLLOW).open(path);\n    \
                let _ = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW);\n}\n";
    let found = safe_open::nofollow_opens("crates/apollo-slurm/src/result.rs", text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("crates/apollo-slurm/src/result.rs:3: `O_NOFOLLOW`"));
    assert!(safe_open::nofollow_opens("crates/apollo-core/src/safe_file.rs", text).is_empty());
}

#[test]
fn an_attempt_folder_built_outside_the_store_is_found() {
    let view = "fn logs(run: &Path, unit: &str) -> PathBuf {\n    \
                // run.join(\"units\") in a comment is fine\n    \
                let mut dir = PathBuf::from(run);\n    \
                dir.push(\"units\");\n    \
                let dir = dir.join(apollo_core::model::unit_folder_name(unit).as_ref());\n    \
                run.join(format!(\"units/{unit}/1\"))\n}\n";
    let found = run_paths::run_paths("crates/apollo-cli/src/cmd/logs.rs", view);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].starts_with("crates/apollo-cli/src/cmd/logs.rs:4: `push(\"units\")`"));
    assert!(found[1].starts_with("crates/apollo-cli/src/cmd/logs.rs:5: `unit_folder_name(`"));
    assert!(found[2].starts_with("crates/apollo-cli/src/cmd/logs.rs:6: `\"units/`"));
}

#[test]
fn no_view_folds_a_journal_itself() {
    assert_clean(journal_reads::journal_reads_in_views);
}

#[test]
fn a_view_that_folds_a_journal_itself_is_found() {
    let view = "fn stats(state: &StateDir, run: &RunId) {\n    \
                // Timeline::from_records in a comment is fine\n    \
                let (mut reader, _) = state::read_records(state, run, ReadOptions::default())?;\n    \
                let model = Timeline::from_records(&mut reader)?;\n}\n\n\
                #[cfg(test)]\nmod tests {\n    fn f() { JournalReader::open(dir); }\n}\n";
    let found = journal_reads::journal_reads("crates/apollo-cli/src/cmd/stats.rs", view);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("crates/apollo-cli/src/cmd/stats.rs:3: `read_records(`"));
    assert!(found[1].starts_with("crates/apollo-cli/src/cmd/stats.rs:4: `Timeline::from_records`"));
}

#[test]
fn every_unsafe_block_has_a_safety_comment() {
    assert_clean(undocumented_unsafe_blocks);
}

#[test]
fn library_code_does_not_unwrap() {
    assert_clean(unwrap_in_library_code);
}

#[test]
fn every_readme_is_its_crate_docs() {
    assert_clean(readme_not_crate_docs);
}

#[test]
fn every_publishable_crate_has_its_metadata() {
    assert_clean(manifest_metadata_missing);
}

#[test]
fn no_file_is_longer_than_its_limit() {
    assert_clean(file_size::files_too_long);
}

#[test]
fn no_function_is_longer_than_clippy_allows_unless_listed() {
    assert_clean(long_functions::long_functions_not_listed);
}

#[test]
fn every_crate_without_unsafe_forbids_it() {
    assert_clean(unsafe_code::unsafe_not_forbidden);
}

#[test]
fn the_crate_graph_follows_the_architecture() {
    assert_clean(crate_graph::crate_graph_broken);
}

/// A throwaway workspace with one library file, removed when dropped.
struct FakeWorkspace(PathBuf);

impl FakeWorkspace {
    fn with_lib(name: &str, lib: &str) -> Self {
        let root = std::env::temp_dir().join(format!("xtask-tidy-{name}-{}", std::process::id()));
        let src = root.join("crates/apollo-demo/src");
        std::fs::create_dir_all(&src).expect("create the fake crate");
        std::fs::write(root.join("Cargo.toml"), "[workspace]\n").expect("workspace");
        std::fs::write(src.join("lib.rs"), lib).expect("lib.rs");
        std::fs::write(
            root.join("crates/apollo-demo/Cargo.toml"),
            "[package]\nname = \"apollo-demo\"\n",
        )
        .expect("the fake crate's manifest");
        Self(root)
    }
}

impl Drop for FakeWorkspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_checks_find_what_they_forbid() {
    let lib = "pub fn f() -> u32 {\n    let n = \"1\".parse().unwrap();\n    // ok: a literal\n    let m: u32 = \"2\".parse().expect(\"a number\");\n    std::process::Command::new(\"true\");\n    n + m\n}\n\n#[cfg(test)]\nmod tests {\n    fn t() { Some(1).unwrap(); }\n}\n";
    let workspace = FakeWorkspace::with_lib("finds", lib);
    let unwraps = unwrap_in_library_code(&workspace.0).expect("scan");
    assert_eq!(unwraps.len(), 1, "{unwraps:?}");
    assert!(
        unwraps[0].starts_with("crates/apollo-demo/src/lib.rs:2:"),
        "{unwraps:?}"
    );
    let spawns = process_creation_outside_exec(&workspace.0).expect("scan");
    assert_eq!(spawns.len(), 1, "{spawns:?}");
    assert!(spawns[0].contains("lib.rs:5: `Command::new`"), "{spawns:?}");
    let readme = readme_not_crate_docs(&workspace.0).expect("scan");
    assert_eq!(readme.len(), 3, "{readme:?}");
}

#[test]
fn unsafe_blocks_are_told_from_unsafe_items() {
    assert!(has_unsafe_block("    let pid = unsafe { libc::getpid() };"));
    assert!(has_unsafe_block("unsafe {"));
    assert!(!has_unsafe_block("unsafe fn raw() {"));
    assert!(!has_unsafe_block("unsafe impl Send for Table {}"));
    assert!(!has_unsafe_block("let not_unsafe = 1; // unsafe { }"));
    assert!(!has_unsafe_block("    let text = \"unsafe { x }\";"));
}

#[test]
fn a_safety_comment_may_sit_above_the_statement() {
    let lines = [
        "    // SAFETY: getpid cannot fail.",
        "    let pid =",
        "        unsafe { libc::getpid() };",
    ];
    assert!(safety_comment_above(&lines, 2));
    let undocumented = ["    let x = 1;", "    let pid = unsafe { libc::getpid() };"];
    assert!(!safety_comment_above(&undocumented, 1));
    let other_statement = [
        "    // SAFETY: about something else.",
        "    let x = 1;",
        "    let pid = unsafe { libc::getpid() };",
    ];
    assert!(!safety_comment_above(&other_statement, 2));
}
