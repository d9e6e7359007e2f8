//! **crate-graph** — the dependencies between apollo's crates are those ARCHITECTURE.md
//! allows (its "Guardrails" table, from DESIGN §1 and §18), read from each
//! member's `Cargo.toml`: `[dependencies]` and `[build-dependencies]`, platform-specific ones
//! included (what ships). `[dev-dependencies]` are not checked: a crate's tests and examples
//! may drive it with the others (apollo-runner's example runs a real pipeline through
//! apollo-exec), and nothing a user builds carries them.

use std::path::Path;

/// A crate and the apollo crates it may depend on, with the rule as ARCHITECTURE.md says it.
struct Rule {
    name: &'static str,
    may_depend_on: &'static [&'static str],
    why: &'static str,
}

const LIBRARIES: [&str; 7] = [
    "apollo-core",
    "apollo-store",
    "apollo-exec",
    "apollo-slurm",
    "apollo-replay",
    "apollo-runner",
    "apollo-serve",
];

const RULES: [Rule; 10] = [
    Rule {
        name: "apollo-core",
        may_depend_on: &[],
        why: "apollo-core depends on no other apollo crate (it defines the seams the others implement)",
    },
    Rule {
        name: "apollo-store",
        may_depend_on: &["apollo-core"],
        why: "apollo-store frames, stores and reads events: it knows apollo-core's records only",
    },
    Rule {
        name: "apollo-exec",
        may_depend_on: &["apollo-core"],
        why: "apollo-exec implements apollo-core's Executor and knows nothing else",
    },
    Rule {
        name: "apollo-slurm",
        may_depend_on: &["apollo-core", "apollo-exec"],
        why: "apollo-slurm implements apollo-core's Executor and runs its client commands through apollo-exec",
    },
    Rule {
        name: "apollo-replay",
        may_depend_on: &["apollo-core"],
        why: "apollo-replay reads records and nothing else; it does not depend on apollo-store",
    },
    Rule {
        name: "apollo-runner",
        may_depend_on: &["apollo-core", "apollo-store", "apollo-replay"],
        why: "apollo-runner spawns and kills nothing and does not depend on apollo-exec (nor \
              apollo-slurm): executors are passed in",
    },
    Rule {
        name: "apollo-serve",
        may_depend_on: &[
            "apollo-core",
            "apollo-store",
            "apollo-replay",
            "apollo-runner",
        ],
        why: "apollo-serve is the web layer only: it reads through apollo-runner's read side and \
              runs nothing",
    },
    Rule {
        name: "apollo-cli",
        may_depend_on: &LIBRARIES,
        why: "apollo-cli is the binary: it may use every library, and no crate depends on it",
    },
    Rule {
        name: "apollo-tests",
        may_depend_on: &LIBRARIES,
        why: "the test helpers may drive every library, never the binary's crate",
    },
    Rule {
        name: "xtask",
        may_depend_on: &LIBRARIES,
        why: "xtask may use every library, never the binary's crate",
    },
];

pub(super) fn crate_graph_broken(root: &Path) -> Result<Vec<String>, String> {
    let mut members = super::crate_dirs(root)?;
    members.extend([root.join("tests"), root.join("xtask")]);
    let mut manifests = Vec::new();
    for member in members {
        let path = member.join("Cargo.toml");
        if path.is_file() {
            manifests.push((super::relative(root, &path), super::read(&path)?));
        }
    }
    Ok(check(&manifests))
}

/// The violations of these manifests (path, text) against [`RULES`].
fn check(manifests: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in manifests {
        let (name, dependencies) = parse_manifest(text);
        let Some(name) = name else {
            found.push(format!("{path}: no `name` in `[package]`"));
            continue;
        };
        let Some(rule) = RULES.iter().find(|rule| rule.name == name) else {
            found.push(format!(
                "{path}: `{name}` has no rule in the crate graph: add its row (the apollo crates it \
                 may depend on) to the table of ARCHITECTURE.md's \"Guardrails\" and to `RULES` \
                 in xtask/src/tidy/crate_graph.rs"
            ));
            continue;
        };
        for dependency in dependencies {
            let is_apollo = dependency.starts_with("apollo-") || dependency == "xtask";
            if is_apollo && !rule.may_depend_on.contains(&dependency.as_str()) {
                found.push(format!(
                    "{path}: `{name}` depends on `{dependency}`, which the crate graph forbids: \
                     {}. Remove the dependency (move what it needs into a crate it may depend \
                     on, or have the caller pass it in), or, if the architecture changes, change \
                     ARCHITECTURE.md (\"Guardrails\") and `RULES` in \
                     xtask/src/tidy/crate_graph.rs together",
                    rule.why
                ));
            }
        }
    }
    found
}

/// A manifest's package name and the crates of its shipped dependency tables (renamed ones by
/// their `package`).
fn parse_manifest(text: &str) -> (Option<String>, Vec<String>) {
    let mut name = None;
    let mut dependencies = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            section = header.trim_end_matches(']').trim().to_owned();
            // `[dependencies.apollo-core]`: a dependency as a table of its own.
            if let Some(dependency) =
                shipped_table(&section).and_then(|rest| rest.strip_prefix('.'))
            {
                dependencies.push(dependency.trim_matches('"').to_owned());
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if section == "package" && key == "name" {
            name = Some(value.trim().trim_matches('"').to_owned());
        } else if shipped_table(&section) == Some("") {
            let crate_name = key.split('.').next().unwrap_or(key).trim_matches('"');
            let renamed = value
                .split_once("package")
                .and_then(|(_, rest)| rest.split('"').nth(1));
            dependencies.push(renamed.unwrap_or(crate_name).to_owned());
        }
    }
    (name, dependencies)
}

/// For a shipped dependency table's header (`dependencies`, `build-dependencies`,
/// `target.'cfg(unix)'.dependencies`, `dependencies.NAME`), what follows the table's name
/// (`""` or `".NAME"`); `None` for any other table (`dev-dependencies` among them).
fn shipped_table(section: &str) -> Option<&str> {
    let section = match section.strip_prefix("target.") {
        // `target.'cfg(…)'.dependencies`: the part after the quoted platform.
        Some(rest) => rest
            .rsplit_once("'.")
            .or_else(|| rest.rsplit_once("\"."))
            .map(|(_, table)| table)?,
        None => section,
    };
    ["dependencies", "build-dependencies"]
        .iter()
        .find_map(|table| section.strip_prefix(table))
        .filter(|rest| rest.is_empty() || rest.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(name: &str, body: &str) -> (String, String) {
        (
            format!("crates/{name}/Cargo.toml"),
            format!("[package]\nname = \"{name}\"\nversion.workspace = true\n\n{body}"),
        )
    }

    #[test]
    fn the_graph_the_architecture_states_passes() {
        let manifests = [
            manifest("apollo-core", "[dependencies]\nserde.workspace = true\n"),
            manifest(
                "apollo-runner",
                "[dependencies]\napollo-core.workspace = true\napollo-store = { path = \"../apollo-store\", version = \"0.1.0\" }\n\n\
                 [dev-dependencies]\n# The example runs a real pipeline.\napollo-exec.workspace = true\n",
            ),
            manifest(
                "apollo-cli",
                "[dependencies]\napollo-runner.workspace = true\napollo-exec.workspace = true\n",
            ),
        ];
        assert_eq!(check(&manifests), Vec::<String>::new());
    }

    #[test]
    fn a_forbidden_edge_is_named_with_its_rule() {
        let manifests = [
            manifest(
                "apollo-replay",
                "[dependencies]\napollo-core.workspace = true\napollo-store.workspace = true\n",
            ),
            manifest(
                "apollo-runner",
                "[target.'cfg(unix)'.dependencies]\napollo-exec = { workspace = true }\n",
            ),
            manifest(
                "apollo-core",
                "[dependencies.apollo-store]\nworkspace = true\n",
            ),
            manifest(
                "apollo-store",
                "[build-dependencies]\ncore = { package = \"apollo-core\", path = \"x\" }\nslurm = { package = \"apollo-slurm\", path = \"y\" }\n",
            ),
        ];
        let found = check(&manifests);
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(
            found[0].starts_with(
                "crates/apollo-replay/Cargo.toml: `apollo-replay` depends on `apollo-store`, which the crate graph forbids: apollo-replay reads records and nothing else; it does not depend on apollo-store."
            ),
            "{found:?}"
        );
        assert!(
            found[1].contains("`apollo-runner` depends on `apollo-exec`"),
            "{found:?}"
        );
        assert!(
            found[2].contains("`apollo-core` depends on `apollo-store`"),
            "{found:?}"
        );
        assert!(
            found[3].contains("`apollo-store` depends on `apollo-slurm`"),
            "{found:?}"
        );
    }

    #[test]
    fn a_crate_without_a_rule_fails() {
        let found = check(&[manifest(
            "apollo-bisect",
            "[dependencies]\napollo-runner.workspace = true\n",
        )]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("`apollo-bisect` has no rule in the crate graph"),
            "{found:?}"
        );
    }

    #[test]
    fn the_web_layer_never_runs_anything() {
        let found = check(&[manifest(
            "apollo-serve",
            "[dependencies]\napollo-runner.workspace = true\napollo-exec.workspace = true\n",
        )]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("`apollo-serve` depends on `apollo-exec`"),
            "{found:?}"
        );
    }

    #[test]
    fn nothing_depends_on_the_binary() {
        let found = check(&[manifest(
            "xtask",
            "[dependencies]\napollo-cli.workspace = true\n",
        )]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("`xtask` depends on `apollo-cli`"),
            "{found:?}"
        );
    }

    #[test]
    fn dev_dependencies_are_not_shipped() {
        assert_eq!(shipped_table("dependencies"), Some(""));
        assert_eq!(
            shipped_table("dependencies.apollo-core"),
            Some(".apollo-core")
        );
        assert_eq!(shipped_table("target.'cfg(unix)'.dependencies"), Some(""));
        assert_eq!(shipped_table("build-dependencies"), Some(""));
        assert_eq!(shipped_table("dev-dependencies"), None);
        assert_eq!(shipped_table("target.'cfg(unix)'.dev-dependencies"), None);
        assert_eq!(shipped_table("package"), None);
    }
}
