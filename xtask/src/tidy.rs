//! `cargo xtask tidy`: the architecture invariants that a text scan can enforce.
//!
//! Each check is also a `#[test]` below, so `cargo test --workspace` enforces them too:
//!
//! * **processes** — only apollo-exec creates processes: no `Command::new`, `fork`, `vfork`,
//!   `clone`, `posix_spawn` or `exec*` call elsewhere, apart from an allow-list of test code
//!   that drives binaries (the tests package, the CLI's tests, the browser test) and xtask;
//! * **unsafe** — every `unsafe { … }` block has a `// SAFETY:` comment just above it (or
//!   above the statement it is part of);
//! * **unwrap** — no `.unwrap()` or `.expect(` in library code outside tests, unless the line
//!   (or the one above) justifies it with `// ok:`;
//! * **readme** — every crate's README is its crate documentation: the library root starts
//!   with `#![doc = include_str!("../README.md")]` and the manifest names it as `readme`;
//! * **manifests** — every publishable crate has the metadata crates.io shows, and every
//!   workspace path dependency a version;
//! * **file-size** — no source file past 500 lines (420 for the engine's code), apart from
//!   the files an allow-list that only shrinks names ([`file_size`]);
//! * **long-functions** — clippy's `too_many_lines` at 100 lines everywhere, the functions over
//!   it when it came in on an allow-list that only shrinks ([`long_functions`]);
//! * **unsafe-code** — every crate root forbids `unsafe`, but the few that must keep it, which
//!   deny it and allow it site by site ([`unsafe_code`]);
//! * **crate-graph** — the crates depend on one another only as ARCHITECTURE.md allows
//!   ([`crate_graph`]);
//! * **run-paths** — only apollo-store spells a run's folders and encodes a unit's name for
//!   its attempt folder (`StateDir` → `RunDir` → `AttemptDir`, [`run_paths`]);
//! * **journal-reads** — no view folds a journal itself ([`journal_reads`]);
//! * **safe-open** — an existing file is opened without following a link or blocking only
//!   through `apollo_core::safe_file`, but for a short list of writers ([`safe_open`]).
//!
//! The scan is line-based (no parser: xtask stays small); a comment line is never a violation.

mod crate_graph;
mod file_size;
mod journal_reads;
mod long_functions;
mod run_paths;
mod safe_open;
mod unsafe_code;

use std::path::{Path, PathBuf};

/// Runs every check; `Err` lists every violation.
pub(crate) fn run(root: &Path) -> Result<(), String> {
    let mut problems = Vec::new();
    for (name, check) in CHECKS {
        let found = check(root)?;
        if found.is_empty() {
            println!("tidy: {name}: ok");
        }
        problems.extend(
            found
                .into_iter()
                .map(|problem| format!("{name}: {problem}")),
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} tidy violation{}:\n{}",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" },
            problems.join("\n")
        ))
    }
}

type Check = fn(&Path) -> Result<Vec<String>, String>;

const CHECKS: [(&str, Check); 12] = [
    ("processes", process_creation_outside_exec),
    ("run-paths", run_paths::run_paths_outside_the_store),
    ("safe-open", safe_open::nofollow_opens_outside_the_door),
    ("journal-reads", journal_reads::journal_reads_in_views),
    ("unsafe", undocumented_unsafe_blocks),
    ("unwrap", unwrap_in_library_code),
    ("readme", readme_not_crate_docs),
    ("manifests", manifest_metadata_missing),
    ("file-size", file_size::files_too_long),
    ("long-functions", long_functions::long_functions_not_listed),
    ("unsafe-code", unsafe_code::unsafe_not_forbidden),
    ("crate-graph", crate_graph::crate_graph_broken),
];

/// Calls that create a process (or replace the current program).
const PROCESS_CALLS: [&str; 8] = [
    "Command::new",
    "libc::fork",
    "libc::vfork",
    "libc::clone",
    "posix_spawn",
    "execve",
    "execvp",
    "libc::execv",
];

/// Where process-creating calls are allowed: apollo-exec, and test code that drives binaries.
const PROCESS_ALLOWED: [&str; 9] = [
    "crates/apollo-exec/",
    // Checks apollo-core's quoting of values against a real `/bin/sh` (test-only module).
    "crates/apollo-core/src/config/shell_sh_tests.rs",
    // Runs apollo-slurm's job wrapper with a real `/bin/sh`, as a node does (test-only module).
    "crates/apollo-slurm/src/script_sh_tests.rs",
    // The tests package: e2e and reliability tests run the `apollo` binary, the exec tests a
    // supervisor, the torture harness apollo itself.
    "tests/",
    // The CLI's own integration tests run its binary.
    "crates/apollo-cli/tests/",
    // Renders the HTML report in a headless Chromium (test-only module).
    "crates/apollo-replay/src/browser_tests.rs",
    // `apollo serve`'s pages in a headless Chromium (integration tests).
    "crates/apollo-serve/tests/",
    // Measures `apollo serve`'s memory in a server process of its own (a benchmark).
    "crates/apollo-serve/benches/memory.rs",
    // Development chores run cargo and benchmarks.
    "xtask/",
];

fn process_creation_outside_exec(root: &Path) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for file in rust_files(root)? {
        let relative = relative(root, &file);
        if PROCESS_ALLOWED
            .iter()
            .any(|allowed| relative.starts_with(allowed))
        {
            continue;
        }
        for (line_no, line) in code_lines(&file)? {
            let code = without_strings(&line);
            if let Some(call) = PROCESS_CALLS.iter().find(|call| code.contains(*call)) {
                found.push(format!(
                    "{relative}:{line_no}: `{call}` outside apollo-exec (only apollo-exec creates processes)"
                ));
            }
        }
    }
    Ok(found)
}

fn undocumented_unsafe_blocks(root: &Path) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for file in rust_files(root)? {
        let relative = relative(root, &file);
        let text = read(&file)?;
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            if is_comment(line) || !has_unsafe_block(line) {
                continue;
            }
            if !safety_comment_above(&lines, index) {
                found.push(format!(
                    "{relative}:{}: `unsafe` block without a `// SAFETY:` comment",
                    index + 1
                ));
            }
        }
    }
    Ok(found)
}

/// Whether `line` opens an `unsafe { … }` block (not an `unsafe fn`, `unsafe impl` or
/// `unsafe extern`).
fn has_unsafe_block(line: &str) -> bool {
    let code = without_strings(line);
    let code = code.split("//").next().unwrap_or_default();
    let mut rest = code;
    while let Some(at) = rest.find("unsafe") {
        let before = rest[..at].chars().next_back();
        let after = rest[at + "unsafe".len()..].trim_start();
        let word_start = before.is_none_or(|c| !c.is_alphanumeric() && c != '_');
        if word_start && after.starts_with('{') {
            return true;
        }
        rest = &rest[at + "unsafe".len()..];
    }
    false
}

/// `line` with the contents of its string literals removed (a scan must not match them).
fn without_strings(line: &str) -> String {
    let mut code = String::with_capacity(line.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in line.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                code.push(c);
            }
        } else {
            if c == '"' {
                in_string = true;
            }
            code.push(c);
        }
    }
    code
}

/// Whether a `// SAFETY:` comment documents the block on `lines[index]`: on the same line, in
/// the comment lines just above it, or just above the statement it continues.
fn safety_comment_above(lines: &[&str], index: usize) -> bool {
    if lines[index].contains("SAFETY:") {
        return true;
    }
    let mut at = index;
    // Up to a few lines of the same statement (`let x =\n    unsafe {`, a call's arguments).
    let mut statement_lines = 0;
    while at > 0 {
        at -= 1;
        let line = lines[at].trim();
        if line.starts_with("//") {
            if line.contains("SAFETY:") {
                return true;
            }
            continue;
        }
        if line.starts_with("#[") || line.is_empty() && statement_lines == 0 {
            continue;
        }
        let ends_statement = line.ends_with(';') || line.ends_with('{') || line.ends_with('}');
        statement_lines += 1;
        if ends_statement || statement_lines > 4 {
            return false;
        }
    }
    false
}

fn unwrap_in_library_code(root: &Path) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for file in rust_files(&root.join("crates"))? {
        let relative = relative(root, &file);
        // Library (and the binary's) sources only: not tests, benches or examples.
        if !relative.contains("/src/") || is_test_file(&file) {
            continue;
        }
        let text = read(&file)?;
        let lines: Vec<&str> = text.lines().collect();
        for (index, code) in library_code(&lines) {
            if !code.contains(".unwrap()") && !code.contains(".expect(") {
                continue;
            }
            let line = lines[index];
            let justified = line.contains("// ok:")
                || index
                    .checked_sub(1)
                    .is_some_and(|above| lines[above].contains("// ok:"));
            if !justified {
                found.push(format!(
                    "{relative}:{}: `.unwrap()`/`.expect(` in library code (return an error, or justify it with `// ok:`)",
                    index + 1
                ));
            }
        }
    }
    Ok(found)
}

/// The code of each non-comment line of a library file (index, the line before any `//`), up
/// to its inline test module: the rest of a file after `#[cfg(test)]` + `mod … {` is its tests.
fn library_code<'l>(lines: &[&'l str]) -> Vec<(usize, &'l str)> {
    let mut code = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]")
            && lines
                .get(index + 1)
                .is_some_and(|next| next.trim_start().starts_with("mod ") && next.contains('{'))
        {
            break;
        }
        if !is_comment(line) {
            code.push((index, line.split("//").next().unwrap_or_default()));
        }
    }
    code
}

/// Test-only source files (declared `#[cfg(test)] mod NAME;`), and every file of a `tests/`
/// module folder under `src/`.
fn is_test_file(file: &Path) -> bool {
    if file
        .parent()
        .is_some_and(|parent| parent.components().any(|part| part.as_os_str() == "tests"))
    {
        return true;
    }
    let name = file
        .file_stem()
        .and_then(|name| name.to_str())
        .unwrap_or("");
    name == "tests"
        || name == "testkit"
        || name.ends_with("_tests")
        || name.starts_with("test_")
        || name == "proptests"
}

fn readme_not_crate_docs(root: &Path) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for crate_dir in crate_dirs(root)? {
        let name = relative(root, &crate_dir);
        if !crate_dir.join("README.md").is_file() {
            found.push(format!("{name}: no README.md"));
        }
        let manifest = read(&crate_dir.join("Cargo.toml"))?;
        if !manifest.contains("readme = \"README.md\"") {
            found.push(format!("{name}/Cargo.toml: no `readme = \"README.md\"`"));
        }
        let lib = crate_dir.join("src/lib.rs");
        if lib.is_file()
            && !read(&lib)?
                .lines()
                .any(|line| line.trim() == "#![doc = include_str!(\"../README.md\")]")
        {
            found.push(format!(
                "{name}/src/lib.rs: the crate docs are not the README (`#![doc = include_str!(\"../README.md\")]`)"
            ));
        }
    }
    Ok(found)
}

/// The fields crates.io shows; `repository` and `license` usually come from the workspace.
const PACKAGE_FIELDS: [&str; 6] = [
    "description",
    "license",
    "repository",
    "readme",
    "keywords",
    "categories",
];

fn manifest_metadata_missing(root: &Path) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for crate_dir in crate_dirs(root)? {
        let name = relative(root, &crate_dir);
        let manifest = read(&crate_dir.join("Cargo.toml"))?;
        if manifest
            .lines()
            .any(|line| line.trim() == "publish = false")
        {
            continue;
        }
        for field in PACKAGE_FIELDS {
            let present = manifest.lines().any(|line| {
                let line = line.trim();
                line.starts_with(&format!("{field} ")) || line.starts_with(&format!("{field}."))
            });
            if !present {
                found.push(format!("{name}/Cargo.toml: no `{field}`"));
            }
        }
    }
    let workspace = read(&root.join("Cargo.toml"))?;
    for line in workspace.lines() {
        if line.starts_with("apollo-") && line.contains("path =") && !line.contains("version =") {
            found.push(format!(
                "Cargo.toml: `{}` has no version (`cargo package` refuses it)",
                line.trim()
            ));
        }
    }
    Ok(found)
}

/// The crates under `crates/`.
fn crate_dirs(root: &Path) -> Result<Vec<PathBuf>, String> {
    let dir = root.join("crates");
    let entries = std::fs::read_dir(&dir)
        .map_err(|error| format!("cannot list {}: {error}", dir.display()))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// Every `.rs` file of the workspace's members (`crates/`, `tests/`, `xtask/`), or under `dir`
/// when it is one of them.
fn rust_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let keep = |path: &Path| path.extension().is_some_and(|ext| ext == "rs");
    let folders: Vec<PathBuf> = if dir.join("Cargo.toml").is_file() && dir.join("crates").is_dir() {
        ["crates", "tests", "xtask"]
            .iter()
            .map(|member| dir.join(member))
            .collect()
    } else {
        vec![dir.to_path_buf()]
    };
    let mut files = Vec::new();
    for folder in folders {
        files.extend(
            crate::files_under(&folder, &keep)
                .map_err(|error| format!("cannot list {}: {error}", folder.display()))?,
        );
    }
    Ok(files)
}

/// The (1-based number, text) of every line of `file` that is not a comment.
fn code_lines(file: &Path) -> Result<Vec<(usize, String)>, String> {
    Ok(read(file)?
        .lines()
        .enumerate()
        .filter(|(_, line)| !is_comment(line))
        .map(|(index, line)| (index + 1, line.to_owned()))
        .collect())
}

fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with("//")
}

fn read(file: &Path) -> Result<String, String> {
    std::fs::read_to_string(file)
        .map_err(|error| format!("cannot read {}: {error}", file.display()))
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests;
