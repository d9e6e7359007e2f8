//! `secrets:` (DESIGN §18): the top-level block naming each secret and where its value comes
//! from, a unit's `secrets: [NAME]`, the refusal of the older `secret: true`, and the `check`
//! warning about a secret-looking `${env.X}` pasted into a command.
//!
//! Only names and sources are ever read here: values are read when a run starts (by the CLI,
//! `{command: ...}` through apollo-exec), so that `check` runs nothing and nothing the loader
//! keeps (the definition snapshot, the parse cache) can hold a value.

use std::collections::BTreeMap;

use super::raw::{Node, Value};
use super::schema::{Sp, Spec, Walker};
use crate::diagnostic::{Diagnostic, SourceFile, closest};
use crate::model::Command;

/// A secret's source as written; a `file` path is still relative to the config's folder.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SourceSpec {
    Env(String),
    File(String),
    Command(Command),
}

/// The keys of one secret's mapping: exactly one of them.
const SOURCE_KEYS: &[&str] = &["env", "file", "command"];

/// The hint every refusal of `secret: true` carries.
pub(crate) const SECRETS_HINT: &str = "declare it in a top-level `secrets:` block (`secrets: {API_TOKEN: {env: API_TOKEN}}`, or `{file: PATH}`, `{command: ...}`) and list it in the unit (`secrets: [API_TOKEN]`): the unit gets it as an environment variable and apollo never writes its value down";

/// Words that make an environment variable's name look like it holds a secret.
const SECRET_LOOKING: &[&str] = &["TOKEN", "KEY", "PASSWORD", "SECRET", "PASS"];

/// Whether `name` (an environment variable) looks like it holds a secret: it contains one of
/// [`SECRET_LOOKING`], in any case (`GITHUB_TOKEN`, `aws_secret_access_key`, `DB_PASS`).
pub(crate) fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_LOOKING.iter().any(|word| upper.contains(word))
}

/// Whether `name` may name a secret: an environment variable name (`[A-Za-z_][A-Za-z0-9_]*`)
/// outside apollo's own `APOLLO_` prefix.
fn is_valid_secret_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("APOLLO_")
}

/// The `${env.NAME}` references in `text` whose name looks secret (`$${env.X}` is a literal
/// and not one).
fn secret_env_references(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("${env.") {
        let escaped = at > 0 && rest.as_bytes()[at - 1] == b'$';
        let after = &rest[at + "${env.".len()..];
        let Some(end) = after.find('}') else {
            break;
        };
        let name = &after[..end];
        if !escaped && looks_secret(name) {
            found.push(name);
        }
        rest = &after[end..];
    }
    found
}

impl Walker<'_, '_> {
    /// The top-level `secrets:` block: `NAME: {env: VAR}`, `{file: PATH}` or `{command: ...}`.
    pub(crate) fn secrets(&mut self, node: &Node) -> Vec<(Sp<String>, Sp<SourceSpec>)> {
        let mut secrets: Vec<(Sp<String>, Sp<SourceSpec>)> = Vec::new();
        let map = match &node.value {
            Value::Null => return secrets,
            Value::Map(map) => map,
            _ => {
                self.wrong_type(node, "`secrets`", "a mapping of secret names to sources")
                    .hint(SECRETS_HINT);
                return secrets;
            }
        };
        for (key, value) in map {
            let Some(name) = self.string(key, "a secret name in `secrets`") else {
                continue;
            };
            if !is_valid_secret_name(&name.value) {
                self.error(
                    "bad-value",
                    key.loc,
                    format!(
                        "`{}` in `secrets` is not a usable secret name",
                        name.value
                    ),
                )
                .hint("a secret reaches its units as the environment variable of its name: letters, digits and `_`, not starting with a digit nor with `APOLLO_`");
                continue;
            }
            if let Some((first, _)) = secrets.iter().find(|(first, _)| first.value == name.value) {
                let line = first.loc.line;
                self.error(
                    "duplicate-key",
                    key.loc,
                    format!("secret `{}` is declared twice", name.value),
                )
                .note(format!("it is first declared at line {line}"))
                .hint("remove one of them");
                continue;
            }
            if let Some(source) = self.secret_source(value, &name.value) {
                secrets.push((name, source));
            }
        }
        secrets
    }

    /// One secret's source: a mapping with exactly one of `env`, `file`, `command`.
    fn secret_source(&mut self, node: &Node, name: &str) -> Option<Sp<SourceSpec>> {
        let context = format!("in secret `{name}`");
        if !matches!(node.value, Value::Map(_)) {
            self.wrong_type(node, &format!("secret `{name}`"), "a mapping with one of `env`, `file` or `command`")
                .hint(format!("write `{name}: {{env: {name}}}`, `{name}: {{file: path/to/{}}}` or `{name}: {{command: \"vault read ...\"}}`; a value is never written in the config", name.to_ascii_lowercase()));
            return None;
        }
        let (entries, _) = self.entries(node, &context, SOURCE_KEYS, &[]);
        if entries.len() != 1 {
            if entries.len() > 1 {
                self.error(
                    "bad-value",
                    node.loc,
                    format!("secret `{name}` has more than one source"),
                )
                .hint("give exactly one of `env`, `file` or `command`");
            } else if matches!(&node.value, Value::Map(map) if map.is_empty()) {
                self.error(
                    "missing-key",
                    node.loc,
                    format!("secret `{name}` has no source"),
                )
                .hint("give exactly one of `env`, `file` or `command`");
            }
            return None;
        }
        let (key, value) = entries[0];
        let source = match key {
            "env" => {
                let variable = self.non_empty_string(value, &format!("`env` {context}"))?;
                SourceSpec::Env(variable.value)
            }
            "file" => {
                let path = self.non_empty_string(value, &format!("`file` {context}"))?;
                SourceSpec::File(path.value)
            }
            _ => SourceSpec::Command(
                self.command(value, "command", &format!("secret `{name}`"))?
                    .value,
            ),
        };
        Some(Sp {
            value: source,
            loc: node.loc,
        })
    }

    /// Refuses `secret: true` in an env entry written as a mapping (`TOKEN: {value: ..,
    /// secret: true}`) or in a param's declaration: returns whether it did.
    pub(crate) fn refuse_secret_flag(&mut self, node: &Node, what: &str) -> bool {
        let Value::Map(map) = &node.value else {
            return false;
        };
        let Some((key, _)) = map
            .iter()
            .find(|(key, _)| matches!(&key.value, Value::Str(text) if text == "secret"))
        else {
            return false;
        };
        self.error(
            "secret-flag",
            key.loc,
            format!("`secret: true` in {what} is not supported"),
        )
        .hint(SECRETS_HINT);
        true
    }

    /// Warns about each secret-looking `${env.X}` in a command: its value would be pasted
    /// into the command, and so written in the definition snapshot and the parse cache and
    /// printed by `apollo show`.
    pub(crate) fn warn_secret_env(&mut self, node: &Node, what: &str) {
        match &node.value {
            // The common case costs one search for `${env.` and allocates nothing.
            Value::Str(text) if !text.contains("${env.") => {}
            Value::Str(text) => self.warn_secret_env_in(text, node, what),
            Value::Seq(items) => {
                for item in items {
                    if let Value::Str(text) = &item.value
                        && text.contains("${env.")
                    {
                        self.warn_secret_env_in(text, node, what);
                    }
                }
            }
            _ => {}
        }
    }

    fn warn_secret_env_in(&mut self, text: &str, node: &Node, what: &str) {
        for name in secret_env_references(text) {
            let diagnostic = self.source.warning(
                "secret-in-command",
                node.loc,
                format!(
                    "`${{env.{name}}}` in {what} pastes what looks like a secret into the command"
                ),
            );
            self.diagnostics.push(
                diagnostic
                    .with_note("apollo writes a command down as it runs it: the value would be stored in plain text in the definition snapshot and the parse cache, and printed by `apollo show`")
                    .with_hint(format!("declare `secrets: {{{name}: {{env: {name}}}}}`, list `secrets: [{name}]` in the unit and read `\"${name}\"` in the command")),
            );
        }
    }
}

/// Checks what the walk could not: each unit's `secrets` names a declared secret, and no
/// unit sets an env variable of the same name as a secret it receives.
pub(crate) fn check(spec: &Spec, source: &SourceFile<'_>) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    let declared: BTreeMap<&str, ()> = spec
        .secrets
        .iter()
        .map(|(name, _)| (name.value.as_str(), ()))
        .collect();
    for (position, unit) in spec.units.iter().enumerate() {
        for wanted in &unit.secrets {
            if !declared.contains_key(wanted.value.as_str()) {
                let hint = match closest(&wanted.value, declared.keys().copied()) {
                    Some(suggestion) => format!("did you mean `{suggestion}`?"),
                    None => SECRETS_HINT.to_owned(),
                };
                diagnostics.push(
                    source
                        .error(
                            "unknown-secret",
                            wanted.loc,
                            format!(
                                "{} receives secret `{}`, which the pipeline does not declare",
                                unit.named(position),
                                wanted.value
                            ),
                        )
                        .with_hint(hint),
                );
            }
            if unit.env.contains_key(&wanted.value) || spec.env.contains_key(&wanted.value) {
                diagnostics.push(
                    source
                        .error(
                            "secret-env-clash",
                            wanted.loc,
                            format!(
                                "{} receives secret `{}` and also sets an env variable of that name",
                                unit.named(position),
                                wanted.value
                            ),
                        )
                        .with_hint("remove the env entry: the secret is the variable's value"),
                );
            }
        }
    }
    diagnostics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names_are_found_in_any_case() {
        for name in [
            "GITHUB_TOKEN",
            "aws_secret_access_key",
            "DB_PASS",
            "API_KEY",
            "PASSWORD",
        ] {
            assert!(looks_secret(name), "{name}");
        }
        for name in ["HOME", "USER", "REGION"] {
            assert!(!looks_secret(name), "{name}");
        }
    }

    #[test]
    fn only_unescaped_secret_looking_env_references_are_found() {
        assert_eq!(
            secret_env_references("curl -H ${env.API_TOKEN} $${env.OTHER_TOKEN} ${env.HOME}"),
            vec!["API_TOKEN"]
        );
    }

    #[test]
    fn secret_names_are_variable_names_outside_apollos_prefix() {
        assert!(is_valid_secret_name("API_TOKEN"));
        assert!(is_valid_secret_name("_x1"));
        for bad in ["", "1X", "A-B", "APOLLO_TOKEN", "A B"] {
            assert!(!is_valid_secret_name(bad), "{bad}");
        }
    }
}

#[cfg(test)]
mod load_tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use crate::config::{LoadOptions, load_str_with};
    use crate::model::{Command, SecretSource};

    fn options() -> LoadOptions {
        LoadOptions::default().env(BTreeMap::from([
            ("DEPLOY_TOKEN".to_owned(), "s3cr3t-value".to_owned()),
            ("HOME".to_owned(), "/home/x".to_owned()),
        ]))
    }

    #[test]
    fn check_warns_about_a_secret_looking_env_variable_pasted_into_a_command() {
        let yaml = "units:\n  - name: deploy\n    execute: curl -u \"me:${env.DEPLOY_TOKEN}\" ${env.HOME}\non_failure: notify ${env.DEPLOY_TOKEN}\n";
        let loaded = load_str_with(yaml, Path::new("/p/pipeline.yaml"), &options()).unwrap();
        let codes: Vec<(&str, &str)> = loaded
            .warnings
            .iter()
            .map(|warning| (warning.code, warning.message.as_str()))
            .collect();
        assert_eq!(codes.len(), 2, "{codes:?}");
        assert!(
            codes
                .iter()
                .all(|(code, message)| *code == "secret-in-command"
                    && message.contains("DEPLOY_TOKEN")
                    && !message.contains("s3cr3t"))
        );
    }

    #[test]
    fn a_unit_receives_the_declared_secrets_it_lists_by_source_with_paths_made_absolute() {
        let yaml = "secrets:\n  API_TOKEN: {env: DEPLOY_TOKEN}\n  KEY_FILE: {file: keys/key.txt}\n  VAULT: {command: vault read x}\n  UNUSED: {env: NOPE}\nunits:\n  - name: deploy\n    execute: ./deploy.sh\n    secrets: [API_TOKEN, KEY_FILE, VAULT]\n  - name: plain\n    execute: ./plain.sh\n";
        let loaded = load_str_with(yaml, Path::new("/p/pipeline.yaml"), &options()).unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let deploy = &loaded.pipeline.units[0];
        assert_eq!(
            deploy.secrets,
            BTreeMap::from([
                (
                    "API_TOKEN".to_owned(),
                    SecretSource::Env("DEPLOY_TOKEN".to_owned())
                ),
                (
                    "KEY_FILE".to_owned(),
                    SecretSource::File("/p/keys/key.txt".into())
                ),
                (
                    "VAULT".to_owned(),
                    SecretSource::Command(Command::Shell("vault read x".to_owned()))
                ),
            ])
        );
        assert!(loaded.pipeline.units[1].secrets.is_empty());
        // The definition as apollo writes it down holds sources, never a value.
        let written = serde_json::to_string(&loaded.pipeline).unwrap();
        assert!(!written.contains("s3cr3t"), "{written}");
        assert!(written.contains("DEPLOY_TOKEN"));
    }
}
