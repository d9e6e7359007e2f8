//! **unsafe-code** — every crate of the workspace forbids `unsafe` (`#![forbid(unsafe_code)]`
//! at its root), except the few in [`KEEP_UNSAFE`], which deny it (`#![deny(unsafe_code)]`)
//! and allow it on each function, impl or module that needs it, every block with its
//! `// SAFETY:` comment (the **unsafe** check). A crate on that list whose `unsafe` is all
//! gone must forbid it and leave the list.
//!
//! The crates are every target of every member: the library, the programs (`src/main.rs`,
//! `src/bin/`, `[[bin]]`), the integration tests, benchmarks and examples (found as cargo
//! finds them, `autotests = false` and `[[test]] path` included). Whether a crate has `unsafe`
//! is read from its root and the files its `mod NAME;` declarations load.

use std::path::{Component, Path, PathBuf};

/// The crate roots that keep `unsafe`, and why (each site also says why it is sound).
pub(super) const KEEP_UNSAFE: [(&str, &str); 10] = [
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
    (
        "crates/apollo-exec/benches/spawn.rs",
        "the benchmark's getrusage and its pre_exec baseline",
    ),
    (
        "crates/apollo-exec/tests/exec/main.rs",
        "closing the test process's own descriptors 0-2, signals, kill, O_TMPFILE probing",
    ),
    (
        "crates/apollo-store/tests/store.rs",
        "the lock-wait test's gettid (to watch the waiter's thread)",
    ),
    (
        "tests/exec/main.rs",
        "pidfd_open, poll and pidfd_send_signal on the processes the tests watch",
    ),
    (
        "tests/e2e/main.rs",
        "signalling the apollo under test, mkfifo, killing what a test left",
    ),
    (
        "tests/reliability/main.rs",
        "mounting a small tmpfs to fill up (root only), geteuid",
    ),
];

pub(super) fn unsafe_not_forbidden(root: &Path) -> Result<Vec<String>, String> {
    let mut members = super::crate_dirs(root)?;
    members.extend([root.join("tests"), root.join("xtask")]);
    let mut roots = Vec::new();
    for member in &members {
        for path in crate_roots(member)? {
            let text = super::read(&path)?;
            let mut has_unsafe = false;
            for file in crate_files(&path)? {
                has_unsafe |= has_unsafe_code(&super::read(&file)?);
            }
            roots.push((super::relative(root, &path), text, has_unsafe));
        }
    }
    roots.sort();
    roots.dedup_by(|one, other| one.0 == other.0);
    Ok(check(&roots, &KEEP_UNSAFE))
}

/// The root files of every target of the package in `member`, as cargo finds them.
fn crate_roots(member: &Path) -> Result<Vec<PathBuf>, String> {
    let manifest = super::read(&member.join("Cargo.toml"))?;
    let mut roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs"]
        .iter()
        .map(|root| member.join(root))
        .collect();
    let targets = [
        ("bin", "src/bin", "autobins"),
        ("test", "tests", "autotests"),
        ("bench", "benches", "autobenches"),
        ("example", "examples", "autoexamples"),
    ];
    for (kind, folder, auto) in targets {
        let dir = member.join(folder);
        if !manifest
            .lines()
            .any(|line| line.trim() == format!("{auto} = false"))
            && dir.is_dir()
        {
            let entries = std::fs::read_dir(&dir)
                .map_err(|error| format!("cannot list {}: {error}", dir.display()))?;
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                if path.extension().is_some_and(|ext| ext == "rs") {
                    roots.push(path);
                } else if path.join("main.rs").is_file() {
                    roots.push(path.join("main.rs"));
                }
            }
        }
        for (name, path) in declared_targets(&manifest, kind) {
            match (path, name) {
                (Some(path), _) => roots.push(normalized(&member.join(path))),
                (None, Some(name)) => {
                    let single = dir.join(format!("{name}.rs"));
                    roots.push(if single.is_file() {
                        single
                    } else {
                        dir.join(name).join("main.rs")
                    });
                }
                (None, None) => {}
            }
        }
    }
    roots.retain(|root| root.is_file());
    roots.sort();
    roots.dedup();
    Ok(roots)
}

/// The `(name, path)` of each `[[kind]]` table of a manifest.
fn declared_targets(manifest: &str, kind: &str) -> Vec<(Option<String>, Option<String>)> {
    let header = format!("[[{kind}]]");
    let mut targets = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == header;
            if inside {
                targets.push((None, None));
            }
            continue;
        }
        let (Some(target), Some((key, value))) = (targets.last_mut(), line.split_once('=')) else {
            continue;
        };
        let value = Some(value.trim().trim_matches('"').to_owned());
        match key.trim() {
            "name" if inside => target.0 = value,
            "path" if inside => target.1 = value,
            _ => {}
        }
    }
    targets
}

/// `path` without its `..` and `.` parts (`crates/apollo-cli/../../tests/e2e/main.rs`).
fn normalized(path: &Path) -> PathBuf {
    let mut clean = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                clean.pop();
            }
            Component::CurDir => {}
            other => clean.push(other),
        }
    }
    clean
}

/// The files of the crate whose root is `root`: the root and, recursively, every file a
/// `mod NAME;` declaration loads (`#[path = "…"]` followed).
fn crate_files(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let mut pending = vec![(root.to_path_buf(), true)];
    while let Some((file, owns_dir)) = pending.pop() {
        let text = super::read(&file)?;
        let parent = file.parent().unwrap_or(Path::new("")).to_path_buf();
        // A crate root or a `mod.rs` declares its modules beside it; `a.rs`, in `a/`.
        let stem = file
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or("");
        let module_dir = if owns_dir || stem == "mod" {
            parent.clone()
        } else {
            parent.join(stem)
        };
        let mut path_attribute: Option<String> = None;
        for line in text.lines() {
            let line = line.trim();
            if let Some(path) = line
                .strip_prefix("#[path = \"")
                .and_then(|rest| rest.strip_suffix("\"]"))
            {
                path_attribute = Some(path.to_owned());
                continue;
            }
            let Some(name) = declared_module(line) else {
                if !line.starts_with("#[") {
                    path_attribute = None;
                }
                continue;
            };
            let next = match path_attribute.take() {
                Some(path) => parent.join(path),
                None if module_dir.join(format!("{name}.rs")).is_file() => {
                    module_dir.join(format!("{name}.rs"))
                }
                None => module_dir.join(name).join("mod.rs"),
            };
            if next.is_file() && !files.contains(&next) {
                pending.push((next, false));
            }
        }
        files.push(file);
    }
    Ok(files)
}

/// The name of the module a `mod NAME;` line (any visibility) declares from another file.
fn declared_module(line: &str) -> Option<&str> {
    let declaration = line.strip_suffix(';')?;
    let rest = declaration.split("mod ").nth(1)?;
    let before = &declaration[..declaration.len() - rest.len() - "mod ".len()];
    let visibility = before.trim();
    (visibility.is_empty() || visibility.starts_with("pub"))
        .then_some(rest.trim())
        .filter(|name| name.chars().all(|c| c.is_alphanumeric() || c == '_'))
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
        text.lines().any(|line| {
            line.split("//").next().unwrap_or_default().trim()
                == format!("#![{level}(unsafe_code)]")
        })
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
                "#![deny(unsafe_code)] // Raw calls in sys/.\n",
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
    fn targets_are_found_as_cargo_finds_them() {
        let manifest = "[package]\nname = \"x\"\nautotests = false\n\n[[bin]]\nname = \"apollo\"\n\
                        path = \"src/main.rs\"\n\n[[test]]\nname = \"e2e\"\npath = \"../../tests/e2e/main.rs\"\n\n\
                        [[test]]\nname = \"store\"\n\n[lints]\nworkspace = true\n";
        assert_eq!(
            declared_targets(manifest, "test"),
            [
                (
                    Some("e2e".to_owned()),
                    Some("../../tests/e2e/main.rs".to_owned())
                ),
                (Some("store".to_owned()), None),
            ]
        );
        assert_eq!(declared_targets(manifest, "bench"), []);
        assert_eq!(
            normalized(Path::new("/w/crates/apollo-cli/../../tests/e2e/./main.rs")),
            Path::new("/w/tests/e2e/main.rs")
        );
    }

    #[test]
    fn module_declarations_are_read() {
        assert_eq!(declared_module("mod sys;"), Some("sys"));
        assert_eq!(declared_module("pub(crate) mod torture;"), Some("torture"));
        assert_eq!(declared_module("mod tests {"), None);
        assert_eq!(declared_module("use crate::mod_x;"), None);
        assert_eq!(declared_module("let remod = 1;"), None);
    }

    #[test]
    fn a_crates_files_are_its_modules() {
        let dir = std::env::temp_dir().join(format!("xtask-tidy-modules-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("tests/e2e/run")).expect("the fake tests");
        let write = |path: &str, text: &str| std::fs::write(dir.join(path), text).expect("write");
        write(
            "tests/e2e/main.rs",
            "mod run;\n#[cfg(test)]\n#[path = \"other.rs\"]\nmod renamed;\n",
        );
        write("tests/e2e/run.rs", "pub(crate) mod deep;\n");
        write(
            "tests/e2e/run/deep.rs",
            "fn f() { let x = unsafe { g() }; }\n",
        );
        write("tests/e2e/other.rs", "\n");
        write("tests/e2e/stray.rs", "unsafe fn not_a_module() {}\n");
        let files = crate_files(&dir.join("tests/e2e/main.rs")).expect("the modules");
        let mut names: Vec<String> = files
            .iter()
            .map(|file| super::super::relative(&dir, file))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "tests/e2e/main.rs",
                "tests/e2e/other.rs",
                "tests/e2e/run.rs",
                "tests/e2e/run/deep.rs"
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
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
