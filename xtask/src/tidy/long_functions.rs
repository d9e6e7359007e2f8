//! **long-functions** — clippy's `too_many_lines` holds everywhere at [`THRESHOLD`] lines of
//! code (`clippy.toml`, enabled in the workspace lints, which every member uses). The
//! functions over it when it came in (issue 37) carry
//! `#[expect(clippy::too_many_lines, reason = "…")]` and are listed in [`ALLOW_LIST`], which
//! only shrinks: an `expect` on a function the list does not name fails here, a function split
//! under the threshold fails clippy (its expectation is unfulfilled) until the attribute goes,
//! and then here until its line goes. An `allow` of the lint, or one for a whole module or
//! crate, is refused.

use std::path::Path;

/// clippy's `too-many-lines-threshold`, as `clippy.toml` must say.
pub(super) const THRESHOLD: usize = 100;

/// The functions allowed to be longer: `PATH FUNCTION` per line.
pub(super) const ALLOW_LIST: &str = "xtask/tidy-allow/too-many-lines.txt";

const LINT: &str = "too_many_lines";

/// One use of the lint's name in a source file.
#[derive(Debug, PartialEq)]
enum Use {
    /// `#[expect(clippy::too_many_lines, …)]` on the function named.
    Expect { line: usize, function: String },
    /// Anything else (`allow`, `#![…]`, `cfg_attr`): the line and what it is.
    Refused { line: usize, what: &'static str },
}

pub(super) fn long_functions_not_listed(root: &Path) -> Result<Vec<String>, String> {
    let mut found = settings_problems(root)?;
    let mut uses = Vec::new();
    for file in super::rust_files(root)? {
        let relative = super::relative(root, &file);
        for one in uses_in(&super::read(&file)?) {
            uses.push((relative.clone(), one));
        }
    }
    let allow_list = match std::fs::read_to_string(root.join(ALLOW_LIST)) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(format!("cannot read {ALLOW_LIST}: {error}")),
    };
    found.extend(compare(&uses, &allow_list));
    Ok(found)
}

/// The lint's threshold and level are where this check expects them, and every member uses
/// the workspace's lints.
fn settings_problems(root: &Path) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    let clippy = super::read(&root.join("clippy.toml"))?;
    let setting = format!("too-many-lines-threshold = {THRESHOLD}");
    if !clippy.lines().any(|line| line.trim() == setting) {
        found.push(format!(
            "clippy.toml: no `{setting}`: the threshold is {THRESHOLD} (lowering it is welcome: \
             change `THRESHOLD` in xtask/src/tidy/long_functions.rs and list the functions it \
             finds; raising it would let the listed functions grow)"
        ));
    }
    let workspace = super::read(&root.join("Cargo.toml"))?;
    if !workspace.lines().any(|line| {
        line.trim() == "too_many_lines = \"warn\"" || line.trim() == "too_many_lines = \"deny\""
    }) {
        found.push(
            "Cargo.toml: `[workspace.lints.clippy]` does not enable `too_many_lines = \"warn\"`"
                .to_owned(),
        );
    }
    let mut members = super::crate_dirs(root)?;
    members.extend([root.join("tests"), root.join("xtask")]);
    for member in members {
        let manifest_path = member.join("Cargo.toml");
        if !manifest_path.is_file() {
            continue;
        }
        let manifest = super::read(&manifest_path)?;
        let lints = manifest.split("[lints]").nth(1).unwrap_or_default();
        if !lints
            .lines()
            .take_while(|line| !line.starts_with('['))
            .any(|line| line.trim() == "workspace = true")
        {
            found.push(format!(
                "{}: no `[lints]` with `workspace = true`: the crate would escape the workspace's lints",
                super::relative(root, &manifest_path)
            ));
        }
    }
    Ok(found)
}

/// Every use of the lint's name in the code (not the comments, not string literals) of a file.
fn uses_in(text: &str) -> Vec<Use> {
    let lines: Vec<&str> = text.lines().collect();
    let mut uses = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if super::is_comment(line) || !super::without_strings(line).contains(LINT) {
            continue;
        }
        // The attribute the name is in: from its `#[`/`#![` line (at most a few lines up, as
        // rustfmt splits a long one) to the line that closes it.
        let Some(start) = (0..=index)
            .rev()
            .take(4)
            .find(|&at| lines[at].trim_start().starts_with('#'))
        else {
            uses.push(Use::Refused {
                line: index + 1,
                what: "the lint named outside an attribute",
            });
            continue;
        };
        let opening = lines[start].trim_start();
        if opening.starts_with("#![") {
            uses.push(Use::Refused {
                line: index + 1,
                what: "an inner attribute (`#![…]`) for a whole module or crate",
            });
            continue;
        }
        if !opening.starts_with("#[expect(") {
            uses.push(Use::Refused {
                line: index + 1,
                what: "not an `#[expect(…)]` (an `allow` would stay after the function is split)",
            });
            continue;
        }
        // The item the attribute is on: the first line after it (and after any other
        // attribute or comment) must declare the function.
        let end = (index..lines.len())
            .find(|&at| super::without_strings(lines[at]).trim_end().ends_with(")]"))
            .unwrap_or(index);
        let function = lines[end + 1..]
            .iter()
            .find(|line| {
                let line = line.trim_start();
                !line.starts_with("#[") && !line.starts_with("//")
            })
            .and_then(|line| function_name(&super::without_strings(line)));
        match function {
            Some(function) => uses.push(Use::Expect {
                line: index + 1,
                function,
            }),
            None => uses.push(Use::Refused {
                line: index + 1,
                what: "an `expect` on something other than a function",
            }),
        }
    }
    uses
}

/// The name of the function `code` declares (`pub(crate) fn name<…>(…`), if it does.
fn function_name(code: &str) -> Option<String> {
    let code = code.split("//").next().unwrap_or_default();
    let mut words = code.split_whitespace();
    words.find(|word| *word == "fn")?;
    let name: String = words
        .next()?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The violations of these uses (file, use) against `allow_list`'s text.
fn compare(uses: &[(String, Use)], allow_list: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut listed: Vec<(usize, &str, &str, bool)> = Vec::new();
    for (index, line) in allow_list.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(path), Some(function), None) => listed.push((index + 1, path, function, false)),
            _ => found.push(format!(
                "{ALLOW_LIST}:{}: `{line}` is not `PATH FUNCTION`",
                index + 1
            )),
        }
    }
    for (path, one) in uses {
        match one {
            Use::Refused { line, what } => found.push(format!(
                "{path}:{line}: `clippy::{LINT}` in {what}: split the function under {THRESHOLD} \
                 lines of code instead"
            )),
            Use::Expect { line, function } => {
                let entry = listed
                    .iter_mut()
                    .find(|(_, listed_path, listed_function, used)| {
                        !used && listed_path == path && listed_function == function
                    });
                match entry {
                    Some(entry) => entry.3 = true,
                    None => found.push(format!(
                        "{path}:{line}: `{function}` expects `clippy::{LINT}` but {ALLOW_LIST} does \
                         not list it (the list only shrinks): split it under {THRESHOLD} lines of \
                         code (a helper per step, a type for the state the steps share) and drop \
                         the attribute"
                    )),
                }
            }
        }
    }
    for (line, path, function, used) in listed {
        if !used {
            found.push(format!(
                "{ALLOW_LIST}:{line}: {path} `{function}` carries no `#[expect(clippy::{LINT})]` \
                 (any more): remove its line"
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file with two long functions, the second's attribute split by rustfmt.
    fn long() -> String {
        [
            "#[expect(clippy::too_many_lines, reason = \"to be split\")]",
            "pub(crate) fn long_one<'a>(x: &'a str) {",
            "}",
            "impl A {",
            "    #[expect(",
            "        clippy::too_many_lines,",
            "        reason = \"split\"",
            "    )]",
            "    fn method(&self) {}",
            "}",
        ]
        .join("\n")
    }

    #[test]
    fn expectations_are_found_with_their_function() {
        assert_eq!(
            uses_in(&long()),
            [
                Use::Expect {
                    line: 1,
                    function: "long_one".to_owned()
                },
                Use::Expect {
                    line: 6,
                    function: "method".to_owned()
                },
            ]
        );
    }

    #[test]
    fn an_allow_or_a_module_wide_attribute_is_refused() {
        let text = [
            "#![allow(clippy::too_many_lines)]",
            "#[allow(clippy::too_many_lines)]",
            "fn f() {}",
            "// clippy::too_many_lines in a comment",
            "const S: &str = \"too_many_lines\";",
        ]
        .join("\n");
        let uses = uses_in(&text);
        assert_eq!(uses.len(), 2, "{uses:?}");
        let found = compare(
            &uses
                .into_iter()
                .map(|one| ("crates/apollo-demo/src/lib.rs".to_owned(), one))
                .collect::<Vec<_>>(),
            "",
        );
        assert!(
            found[0].starts_with(
                "crates/apollo-demo/src/lib.rs:1: `clippy::too_many_lines` in an inner attribute"
            ),
            "{found:?}"
        );
        assert!(
            found[1].starts_with(
                "crates/apollo-demo/src/lib.rs:2: `clippy::too_many_lines` in not an `#[expect(…)]`"
            ),
            "{found:?}"
        );
    }

    #[test]
    fn an_expectation_the_list_does_not_name_fails() {
        let uses: Vec<(String, Use)> = uses_in(&long())
            .into_iter()
            .map(|one| ("crates/apollo-demo/src/lib.rs".to_owned(), one))
            .collect();
        let found = compare(&uses, "crates/apollo-demo/src/lib.rs long_one\n");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("crates/apollo-demo/src/lib.rs:6: `method` expects `clippy::too_many_lines` but xtask/tidy-allow/too-many-lines.txt does not list it"),
            "{found:?}"
        );
        assert!(
            compare(
                &uses,
                "crates/apollo-demo/src/lib.rs long_one\ncrates/apollo-demo/src/lib.rs method\n"
            )
            .is_empty()
        );
    }

    #[test]
    fn a_listed_function_without_its_expectation_must_leave_the_list() {
        let found = compare(
            &[],
            "# functions\ncrates/apollo-demo/src/lib.rs split_now\nbad\n",
        );
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].starts_with("xtask/tidy-allow/too-many-lines.txt:3: `bad` is not"),
            "{found:?}"
        );
        assert!(
            found[1].starts_with("xtask/tidy-allow/too-many-lines.txt:2: crates/apollo-demo/src/lib.rs `split_now` carries no"),
            "{found:?}"
        );
    }

    #[test]
    fn an_expectation_on_anything_but_a_function_is_refused() {
        let text = [
            "#[expect(clippy::too_many_lines, reason = \"no\")]",
            "impl Long {",
            "    fn listed() {}",
            "}",
            "#[expect(clippy::too_many_lines, reason = \"yes\")]",
            "#[inline]",
            "// A comment.",
            "fn real() {}",
        ]
        .join("\n");
        assert_eq!(
            uses_in(&text),
            [
                Use::Refused {
                    line: 1,
                    what: "an `expect` on something other than a function"
                },
                Use::Expect {
                    line: 5,
                    function: "real".to_owned()
                },
            ]
        );
    }

    #[test]
    fn function_names_are_read_from_declarations() {
        assert_eq!(
            function_name("    pub(super) fn admit("),
            Some("admit".to_owned())
        );
        assert_eq!(
            function_name("fn parse_with<'a>("),
            Some("parse_with".to_owned())
        );
        assert_eq!(function_name("    let f = 1;"), None);
    }
}
