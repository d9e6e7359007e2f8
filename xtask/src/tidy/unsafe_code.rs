//! **unsafe-code** — every crate root of the workspace's packages (`src/lib.rs`,
//! `src/main.rs`, `src/bin/*.rs`) forbids `unsafe` (`#![forbid(unsafe_code)]`), except the few
//! in [`KEEP_UNSAFE`], which deny it (`#![deny(unsafe_code)]`) and allow it at each site that
//! needs it, every block with its `// SAFETY:` comment (the **unsafe** check). A crate on that
//! list whose `unsafe` is all gone must forbid it and leave the list.
//!
//! Integration tests, benchmarks and examples (their own crates) are not checked: test code
//! plants FIFOs, mounts filesystems and signals processes through libc.

use std::path::{Path, PathBuf};

/// The crate roots that keep `unsafe`, and why (each site also says why it is sound).
pub(super) const KEEP_UNSAFE: [(&str, &str); 4] = [
    (
        "crates/apollo-exec/src/lib.rs",
        "the raw system calls of `sys/`: the `clone` child (kept until measured against \
         `posix_spawn`, issue 37), the forked guard, its shared table, wait4, leases, getpgid \
         (rustix's debug-asserts a positive group, and a kernel thread's is 0)",
    ),
    (
        "crates/apollo-runner/src/lib.rs",
        "the parse cache decodes its chunks on threads straight into one vector's spare capacity \
         (the safe forms copy the units or decode them one chunk after another)",
    ),
    (
        "crates/apollo-cli/src/main.rs",
        "mimalloc's option calls (`memory.rs`), which have no safe wrapper",
    ),
    (
        "tests/src/lib.rs",
        "the torture harness's memfd_create, mkfifo and kill",
    ),
];

pub(super) fn unsafe_not_forbidden(root: &Path) -> Result<Vec<String>, String> {
    let mut members = super::crate_dirs(root)?;
    members.extend([root.join("tests"), root.join("xtask")]);
    let mut roots = Vec::new();
    for member in &members {
        for path in crate_roots(member)? {
            let relative = super::relative(root, &path);
            let text = super::read(&path)?;
            // A `src/bin/` program is its file; the library and `main.rs`, the rest of `src/`.
            let files = if path
                .parent()
                .is_some_and(|parent| parent.ends_with("src/bin"))
            {
                vec![path.clone()]
            } else {
                let bin = member.join("src/bin");
                let mut files = super::rust_files(&member.join("src"))?;
                files.retain(|file| !file.starts_with(&bin));
                files
            };
            let mut has_unsafe = false;
            for file in &files {
                has_unsafe |= has_unsafe_code(&super::read(file)?);
            }
            roots.push((relative, text, has_unsafe));
        }
    }
    Ok(check(&roots, &KEEP_UNSAFE))
}

/// The crate roots of the package in `member`.
fn crate_roots(member: &Path) -> Result<Vec<PathBuf>, String> {
    let mut roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs"]
        .iter()
        .map(|root| member.join(root))
        .filter(|root| root.is_file())
        .collect();
    let bin = member.join("src/bin");
    if bin.is_dir() {
        let entries = std::fs::read_dir(&bin)
            .map_err(|error| format!("cannot list {}: {error}", bin.display()))?;
        let mut bins: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    Ok(roots)
}

/// Whether the code of `text` (not its comments or strings) has an `unsafe` block, function,
/// impl or trait.
fn has_unsafe_code(text: &str) -> bool {
    text.lines()
        .filter(|line| !super::is_comment(line))
        .any(|line| {
            let code = super::without_strings(line);
            let code = code.split("//").next().unwrap_or_default();
            super::has_unsafe_block(code)
                || ["unsafe fn", "unsafe impl", "unsafe trait", "unsafe extern"]
                    .iter()
                    .any(|item| code.contains(item))
        })
}

/// The violations of these crate roots (path, text, whether the crate has unsafe code) against
/// `keep` (the roots allowed to keep it, and why).
fn check(roots: &[(String, String, bool)], keep: &[(&str, &str)]) -> Vec<String> {
    let attribute = |text: &str, level: &str| {
        text.lines()
            .any(|line| line.trim() == format!("#![{level}(unsafe_code)]"))
    };
    let mut found = Vec::new();
    for (path, text, has_unsafe) in roots {
        let kept = keep.iter().any(|(kept, _)| kept == path);
        if !kept {
            if !attribute(text, "forbid") {
                found.push(format!(
                    "{path}: no `#![forbid(unsafe_code)]`: add it beside the crate root's other \
                     inner attributes{}",
                    if *has_unsafe {
                        " and replace its `unsafe` with std or rustix calls (or, where nothing \
                         safe will do, add the root to `KEEP_UNSAFE` in \
                         xtask/src/tidy/unsafe_code.rs with the reason, and deny it instead)"
                    } else {
                        ""
                    }
                ));
            }
        } else if !has_unsafe {
            found.push(format!(
                "{path}: the crate has no `unsafe` left: make it `#![forbid(unsafe_code)]` and \
                 take it off `KEEP_UNSAFE` in xtask/src/tidy/unsafe_code.rs"
            ));
        } else if !attribute(text, "deny") {
            found.push(format!(
                "{path}: keeps `unsafe` but has no `#![deny(unsafe_code)]`: deny it at the root \
                 and `#[allow(unsafe_code)]` it at each site that needs it"
            ));
        }
    }
    for (kept, _) in keep {
        if !roots.iter().any(|(path, _, _)| path == kept) {
            found.push(format!(
                "xtask/src/tidy/unsafe_code.rs: `KEEP_UNSAFE` names {kept}, which is not a crate \
                 root of the workspace: remove it"
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(path: &str, text: &str, has_unsafe: bool) -> (String, String, bool) {
        (path.to_owned(), text.to_owned(), has_unsafe)
    }

    const KEEP: [(&str, &str); 2] = [
        ("crates/apollo-sys/src/lib.rs", "raw calls"),
        ("crates/apollo-gone/src/lib.rs", "not a root"),
    ];

    #[test]
    fn a_root_without_forbid_fails() {
        let roots = [
            root(
                "crates/apollo-safe/src/lib.rs",
                "#![doc = \"x\"]\n#![forbid(unsafe_code)]\n",
                false,
            ),
            root("crates/apollo-lax/src/lib.rs", "#![doc = \"x\"]\n", false),
            root(
                "crates/apollo-raw/src/main.rs",
                "#![deny(unsafe_code)]\n",
                true,
            ),
            root(
                "crates/apollo-sys/src/lib.rs",
                "#![deny(unsafe_code)]\n",
                true,
            ),
        ];
        let found = check(&roots, &KEEP);
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(
            found[0],
            "crates/apollo-lax/src/lib.rs: no `#![forbid(unsafe_code)]`: add it beside the crate root's other inner attributes"
        );
        assert!(
            found[1].starts_with("crates/apollo-raw/src/main.rs: no `#![forbid(unsafe_code)]`"),
            "{found:?}"
        );
        assert!(found[1].contains("KEEP_UNSAFE"), "{found:?}");
        assert!(
            found[2].contains("`KEEP_UNSAFE` names crates/apollo-gone/src/lib.rs"),
            "{found:?}"
        );
    }

    #[test]
    fn a_kept_root_denies_and_leaves_the_list_when_safe() {
        let keep = &KEEP[..1];
        let undenied = check(&[root("crates/apollo-sys/src/lib.rs", "", true)], keep);
        assert_eq!(undenied.len(), 1, "{undenied:?}");
        assert!(
            undenied[0].contains("has no `#![deny(unsafe_code)]`"),
            "{undenied:?}"
        );
        let safe_now = check(
            &[root(
                "crates/apollo-sys/src/lib.rs",
                "#![deny(unsafe_code)]",
                false,
            )],
            keep,
        );
        assert_eq!(safe_now.len(), 1, "{safe_now:?}");
        assert!(safe_now[0].contains("has no `unsafe` left"), "{safe_now:?}");
    }

    #[test]
    fn unsafe_code_is_found_in_code_only() {
        assert!(has_unsafe_code(
            "fn f() {\n    let x = unsafe { g() };\n}\n"
        ));
        assert!(has_unsafe_code("unsafe impl Send for T {}\n"));
        assert!(!has_unsafe_code(
            "// unsafe { }\nlet s = \"unsafe fn\";\nfn innermost_unsafe() {}\n"
        ));
    }
}
