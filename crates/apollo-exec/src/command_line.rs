//! Turning a unit's [`Command`] into the program and arguments to exec.
//!
//! A list command is exec'd as given. A string command goes through `/bin/sh -c`, except when it
//! is a plain sequence of words with no shell syntax at all: then it is split on whitespace and
//! exec'd directly, as make does, which saves starting a shell per unit (DESIGN §8).
//!
//! The detection is deliberately conservative: every byte must be an ASCII letter, digit,
//! space, tab or one of `_ - . / , : + = @ %`, so there is no quoting, expansion, globbing,
//! redirection, comment, tilde, grouping or separator to interpret; the first word must not
//! be an assignment (`FOO=1 prog`) nor a shell builtin or reserved word, whose behaviour
//! differs from an external program of the same name (`cd`, `echo -e`, `pwd`, …). `true` and
//! `false` without arguments are the exception: they do the same either way.

use std::collections::HashMap;
use std::ffi::{CStr, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use apollo_core::Command;

/// What to exec: a program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExecPlan {
    /// The program: a name looked up in `PATH`, or a path.
    pub(crate) program: OsString,
    /// Its arguments (without `argv[0]`).
    pub(crate) args: Vec<OsString>,
    /// Whether a string command was split and exec'd without a shell.
    pub(crate) direct: bool,
}

/// Shell builtins and reserved words (POSIX, dash, bash) that must not be exec'd directly.
const SHELL_WORDS: &[&str] = &[
    ".", ":", "[", "[[", "alias", "bg", "bind", "break", "builtin", "case", "cd", "command",
    "continue", "declare", "do", "done", "echo", "elif", "else", "enable", "esac", "eval", "exec",
    "exit", "export", "fc", "fg", "fi", "for", "function", "getopts", "hash", "if", "in", "jobs",
    "kill", "let", "local", "logout", "printf", "pwd", "read", "readonly", "return", "select",
    "set", "shift", "source", "test", "then", "time", "times", "trap", "type", "typeset", "ulimit",
    "umask", "unalias", "unset", "until", "wait", "while",
];

/// The plan for `command`. `direct_allowed` enables splitting plain string commands.
/// `workdir` anchors relative program paths (`./run.sh`), which are relative to the unit's
/// working directory, not apollo's.
pub(crate) fn plan(command: &Command, direct_allowed: bool, workdir: &Path) -> ExecPlan {
    match command {
        Command::Argv(argv) => {
            let mut words = argv.iter();
            // Config validation rejects an empty argv; should one get here anyway, the empty
            // program name makes the spawn fail with a clear error rather than run something.
            let program = words.next().map(String::as_str).unwrap_or_default();
            ExecPlan {
                program: anchor_program(program, workdir),
                args: words.map(OsString::from).collect(),
                direct: false,
            }
        }
        Command::Shell(script) => match split_plain_words(script) {
            Some(words) if direct_allowed => {
                let mut words = words.into_iter();
                let program = words.next().unwrap_or_default();
                ExecPlan {
                    program: anchor_program(program, workdir),
                    args: words.map(OsString::from).collect(),
                    direct: true,
                }
            }
            _ => ExecPlan {
                program: OsString::from("/bin/sh"),
                args: vec![OsString::from("-c"), OsString::from(script)],
                direct: false,
            },
        },
    }
}

/// A program name containing `/` but not absolute is made absolute against `workdir`, so it
/// means the same whatever std does about relative paths and `current_dir`.
fn anchor_program(program: &str, workdir: &Path) -> OsString {
    if program.contains('/') && !program.starts_with('/') {
        workdir.join(program).into_os_string()
    } else {
        OsString::from(program)
    }
}

/// The search path when neither the unit nor apollo has a `PATH` (glibc's `execvp` default).
const DEFAULT_SEARCH_PATH: &str = "/bin:/usr/bin";

/// Where `execvp` would find `program` (a name without `/`) in `search_path` (the `PATH` the
/// child gets), looking the way the kernel would: the first regular file this process may
/// execute. Relative entries (and an empty one, meaning `.`) are taken against `workdir`, the
/// child's working directory. `None` when no entry has it: the caller then leaves the name to
/// `posix_spawnp`, which reports the error.
///
/// Looking it up here, instead of in the child, spares the child one failing `execve` per
/// `PATH` entry before the right one, and searches the unit's own `PATH` when it sets one
/// (`posix_spawnp` would search apollo's).
pub(crate) fn search_path(
    program: &OsStr,
    search_path: Option<&OsStr>,
    workdir: &Path,
) -> Option<PathBuf> {
    if program.is_empty() || program.as_bytes().contains(&b'/') {
        return None;
    }
    let search_path = search_path.unwrap_or(OsStr::new(DEFAULT_SEARCH_PATH));
    let mut candidate = Vec::with_capacity(128);
    for entry in search_path.as_bytes().split(|&byte| byte == b':') {
        candidate.clear();
        if !entry.starts_with(b"/") {
            candidate.extend_from_slice(workdir.as_os_str().as_bytes());
            candidate.push(b'/');
        }
        candidate.extend_from_slice(entry);
        candidate.push(b'/');
        candidate.extend_from_slice(program.as_bytes());
        candidate.push(0);
        let Ok(path) = CStr::from_bytes_with_nul(&candidate) else {
            continue;
        };
        if is_executable_file(path) {
            candidate.pop();
            return Some(PathBuf::from(OsStr::from_bytes(&candidate)));
        }
    }
    None
}

/// Programs already found in a `PATH`, like a shell's command hash (`hash` in bash): a name is
/// searched once per `PATH` (and working directory, when `PATH` has relative entries), and
/// later lookups only check that the file found is still an executable file (two syscalls
/// instead of one per `PATH` entry). As in the shell, a program installed later in an earlier
/// `PATH` entry is not noticed until the one found disappears.
#[derive(Debug, Default)]
pub(crate) struct ProgramCache {
    found: Mutex<HashMap<CacheKey, PathBuf>>,
}

/// `(program, PATH, working directory if PATH has relative entries)`.
type CacheKey = (OsString, OsString, PathBuf);

/// Beyond this many entries the cache starts over (a bound on memory, never reached by a sane
/// pipeline).
const CACHE_LIMIT: usize = 4096;

impl ProgramCache {
    /// [`search_path`], remembered.
    pub(crate) fn find(
        &self,
        program: &OsStr,
        path: Option<&OsStr>,
        workdir: &Path,
    ) -> Option<PathBuf> {
        if program.is_empty() || program.as_bytes().contains(&b'/') {
            return None;
        }
        let path_value = path.unwrap_or(OsStr::new(DEFAULT_SEARCH_PATH));
        let relative = path_value
            .as_bytes()
            .split(|&byte| byte == b':')
            .any(|entry| !entry.starts_with(b"/"));
        let key: CacheKey = (
            program.to_owned(),
            path_value.to_owned(),
            if relative {
                workdir.to_owned()
            } else {
                PathBuf::new()
            },
        );
        let cached = self
            .found
            .lock()
            .ok()
            .and_then(|found| found.get(&key).cloned());
        if let Some(cached) = cached {
            let mut bytes = cached.as_os_str().as_bytes().to_vec();
            bytes.push(0);
            if CStr::from_bytes_with_nul(&bytes).is_ok_and(is_executable_file) {
                return Some(cached);
            }
        }
        let found = search_path(program, path, workdir);
        if let Ok(mut cache) = self.found.lock() {
            match &found {
                Some(found) => {
                    if cache.len() >= CACHE_LIMIT {
                        cache.clear();
                    }
                    cache.insert(key, found.clone());
                }
                None => {
                    cache.remove(&key);
                }
            }
        }
        found
    }
}

/// Whether some `PATH` entry holds a file named `program` that is not executable: `execvp`
/// then reports "permission denied" rather than "not found". Only asked on the error path.
pub(crate) fn in_path_but_not_executable(
    program: &OsStr,
    search_path: Option<&OsStr>,
    workdir: &Path,
) -> bool {
    let search_path = search_path.unwrap_or(OsStr::new(DEFAULT_SEARCH_PATH));
    search_path
        .as_bytes()
        .split(|&byte| byte == b':')
        .any(|entry| {
            let dir = Path::new(OsStr::from_bytes(entry));
            let dir = if dir.is_absolute() {
                dir.to_owned()
            } else {
                workdir.join(dir)
            };
            dir.join(program).is_file()
        })
}

/// Whether `path` is a regular file this process may execute (what `execve` needs): one
/// `stat`, one `access`.
fn is_executable_file(path: &CStr) -> bool {
    rustix::fs::stat(path).is_ok_and(|status| {
        rustix::fs::FileType::from_raw_mode(status.st_mode) == rustix::fs::FileType::RegularFile
    }) && rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok()
}

/// The words of `script` if it has no shell syntax at all (see the module docs), else `None`.
pub(crate) fn split_plain_words(script: &str) -> Option<Vec<&str>> {
    let plain = script.bytes().all(|byte| {
        byte.is_ascii_alphanumeric()
            || matches!(
                byte,
                b' ' | b'\t' | b'_' | b'-' | b'.' | b'/' | b',' | b':' | b'+' | b'=' | b'@' | b'%'
            )
    });
    if !plain {
        return None;
    }
    let words: Vec<&str> = script
        .split([' ', '\t'])
        .filter(|word| !word.is_empty())
        .collect();
    let first = *words.first()?;
    if first.contains('=') {
        return None;
    }
    if matches!(first, "true" | "false") {
        return (words.len() == 1).then_some(words);
    }
    if SHELL_WORDS.contains(&first) {
        return None;
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_commands_are_split() {
        assert_eq!(
            split_plain_words("  ./units/fetch.sh  prepare\t--level=2 "),
            Some(vec!["./units/fetch.sh", "prepare", "--level=2"])
        );
        assert_eq!(split_plain_words("true"), Some(vec!["true"]));
        assert_eq!(
            split_plain_words("make -j4 all"),
            Some(vec!["make", "-j4", "all"])
        );
    }

    #[test]
    fn anything_a_shell_would_interpret_goes_through_the_shell() {
        for script in [
            "",
            "   ",
            "echo hi",
            "cd /tmp",
            "FOO=1 prog",
            "prog $HOME",
            "prog 'a b'",
            "prog \"a\"",
            "prog *.csv",
            "prog a?",
            "prog [ab]",
            "prog > out",
            "prog < in",
            "a; b",
            "a && b",
            "a | b",
            "a &",
            "prog # comment",
            "prog ~/x",
            "prog\nother",
            "prog \\x",
            "prog `date`",
            "(prog)",
            "{ prog; }",
            "! prog",
            "true --version",
            "exit 3",
            "kill 1",
            "pwd",
            "prog é",
        ] {
            assert_eq!(split_plain_words(script), None, "{script:?}");
        }
    }

    #[test]
    fn relative_programs_resolve_against_the_workdir() {
        let plan = plan(
            &Command::Shell("./run.sh go".to_owned()),
            true,
            Path::new("/srv/unit"),
        );
        assert_eq!(plan.program, OsString::from("/srv/unit/./run.sh"));
        assert_eq!(plan.args, vec![OsString::from("go")]);
        assert!(plan.direct);
        let shell = super::plan(&Command::Shell("a|b".to_owned()), true, Path::new("/"));
        assert_eq!(shell.program, OsString::from("/bin/sh"));
        assert!(!shell.direct);
        let disabled = super::plan(&Command::Shell("prog".to_owned()), false, Path::new("/"));
        assert_eq!(disabled.program, OsString::from("/bin/sh"));
    }

    #[test]
    fn programs_are_found_in_the_path_like_execvp_does() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        for sub in [&first, &second] {
            std::fs::create_dir(sub).unwrap();
        }
        let write = |path: &Path, mode: u32| {
            std::fs::write(path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        // Not executable in `first`, a directory of that name in `first` for `dir-tool`:
        // both skipped, as execve would fail there.
        write(&first.join("tool"), 0o644);
        write(&second.join("tool"), 0o755);
        std::fs::create_dir(first.join("dir-tool")).unwrap();
        write(&second.join("dir-tool"), 0o755);
        let path = OsString::from(format!("{}:relative:{}", first.display(), second.display()));
        let find = |name: &str| search_path(OsStr::new(name), Some(&path), dir.path());
        assert_eq!(find("tool"), Some(second.join("tool")));
        assert_eq!(find("dir-tool"), Some(second.join("dir-tool")));
        assert_eq!(find("missing"), None);
        assert_eq!(
            find("first/tool"),
            None,
            "a name with a slash is not searched"
        );
        // Relative entries are relative to the child's working directory.
        std::fs::create_dir(dir.path().join("relative")).unwrap();
        write(&dir.path().join("relative").join("rel-tool"), 0o755);
        assert_eq!(
            find("rel-tool"),
            Some(dir.path().join("relative").join("rel-tool"))
        );
        assert_eq!(
            search_path(OsStr::new("sh"), None, dir.path()),
            Some(PathBuf::from("/bin/sh"))
        );
    }

    #[test]
    fn the_cache_notices_a_program_that_went_away() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        for sub in [&first, &second] {
            std::fs::create_dir(sub).unwrap();
            std::fs::write(sub.join("tool"), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(sub.join("tool"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let path = OsString::from(format!("{}:{}", first.display(), second.display()));
        let cache = ProgramCache::default();
        let find = || cache.find(OsStr::new("tool"), Some(&path), dir.path());
        assert_eq!(find(), Some(first.join("tool")));
        assert_eq!(find(), Some(first.join("tool")));
        std::fs::remove_file(first.join("tool")).unwrap();
        assert_eq!(find(), Some(second.join("tool")));
        std::fs::remove_file(second.join("tool")).unwrap();
        assert_eq!(find(), None);
        assert_eq!(
            cache.find(OsStr::new("./tool"), Some(&path), dir.path()),
            None
        );
    }

    proptest! {
        /// Whatever is split, splitting loses nothing but whitespace and every word is
        /// made of allowed bytes only.
        #[test]
        fn splitting_only_drops_whitespace(script in "[ -~\t\n]{0,40}") {
            if let Some(words) = split_plain_words(&script) {
                let joined: String = words.concat();
                let expected: String = script.chars().filter(|c| *c != ' ' && *c != '\t').collect();
                prop_assert_eq!(joined, expected);
                const SHELL_SYNTAX: &[char] = &[
                    '$', '\'', '"', '*', '?', '>', '<', ';', '|', '&', '#', '~', '\\', '`', '(',
                    ')', '{', '}', '[', ']', '!', '\n',
                ];
                for word in &words {
                    prop_assert!(!word.is_empty());
                    let has_syntax = word.contains(SHELL_SYNTAX);
                    prop_assert!(!has_syntax, "{:?} has shell syntax", word);
                }
            }
        }
    }
}
