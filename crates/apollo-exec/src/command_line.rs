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

use std::ffi::OsString;
use std::path::Path;

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
