//! `when:` (DESIGN §14): a condition under which a unit runs.
//!
//! * An **expression** over params (and env, and a fan-out's item), decided when the config is
//!   loaded: `when: ${params.region} == "eu"`, `!=`, or a single value that is `true` or
//!   `false` (`when: ${params.full}`). Sides are quoted strings or bare words, compared as text
//!   after interpolation.
//! * A **command**, `when: {command: test -s data/new.csv}`, run by `/bin/sh` at the start of
//!   the unit's `execute` (a unit with `prepare` cannot have one: the condition would come
//!   after the preparation it is meant to spare).
//!
//! A false **expression** skips the unit: apollo records `unit_skipped` with reason `when`
//! (the condition as written, with its values), runs none of its commands, and its dependents
//! go on ([`Unit::skip_when`](crate::model::Unit::skip_when)). It is never shown as an exit 77
//! of the unit's own. A **command** is checked at the start of the unit's `execute`: a false one
//! prints why and exits 77, so that one is recorded as the unit skipping itself.

use super::raw::{Node, Value};
use super::schema::{Sp, Walker};
use crate::model::Command;

/// Keys of the command form.
pub(crate) const WHEN_COMMAND_KEYS: &[&str] = &["command"];

/// A `when:` as written.
#[derive(Debug, Clone)]
pub(crate) enum When {
    Expression(Sp<String>),
    Command(Sp<Command>),
}

impl Walker<'_, '_> {
    pub(super) fn when(&mut self, node: &Node, label: &str) -> Option<When> {
        match &node.value {
            Value::Bool(flag) => Some(When::Expression(Sp {
                value: flag.to_string(),
                loc: node.loc,
            })),
            Value::Str(_) => self
                .non_empty_string(node, &format!("`when` of {label}"))
                .map(When::Expression),
            Value::Map(_) => {
                let context = format!("in the `when` of {label}");
                let (entries, _) = self.entries(node, &context, WHEN_COMMAND_KEYS, &[]);
                let Some((_, command)) = entries.into_iter().find(|(key, _)| *key == "command")
                else {
                    self.error(
                        "missing-key",
                        node.loc,
                        format!("the `when` of {label} has no `command`"),
                    )
                    .hint("write `when: {command: test -s data/new.csv}`");
                    return None;
                };
                self.command(command, "when", label).map(When::Command)
            }
            _ => {
                self.wrong_type(
                    node,
                    &format!("`when` of {label}"),
                    "an expression or `{command: ...}`",
                )
                .hint("for example `when: ${params.region} == \"eu\"` or `when: {command: test -s data/new.csv}`");
                None
            }
        }
    }
}

/// An expression split at its operator: `(left, operator, right)`, or the whole text as one
/// operand. The operator is the first `==` or `!=` outside quotes.
pub(crate) fn split(expression: &str) -> (&str, Option<&'static str>, &str) {
    let bytes = expression.as_bytes();
    let mut quote: Option<u8> = None;
    let mut index = 0;
    while index + 1 < bytes.len() {
        let byte = bytes[index];
        match quote {
            Some(open) if byte == open => quote = None,
            Some(_) => {}
            None if byte == b'"' || byte == b'\'' => quote = Some(byte),
            None if (byte == b'=' || byte == b'!') && bytes[index + 1] == b'=' => {
                let operator = if byte == b'=' { "==" } else { "!=" };
                return (
                    &expression[..index],
                    Some(operator),
                    &expression[index + 2..],
                );
            }
            None => {}
        }
        index += 1;
    }
    (expression, None, "")
}

/// An operand's text: a quoted string without its quotes, or a bare word trimmed.
pub(crate) fn operand(text: &str) -> &str {
    let text = text.trim();
    for quote in ['"', '\''] {
        if let Some(inner) = text
            .strip_prefix(quote)
            .and_then(|rest| rest.strip_suffix(quote))
        {
            return inner;
        }
    }
    text
}

/// The value of an expression whose operands are interpolated: `Err` with what is wrong.
pub(crate) fn evaluate(left: &str, operator: Option<&str>, right: &str) -> Result<bool, String> {
    match operator {
        Some("==") => Ok(operand(left) == operand(right)),
        Some(_) => Ok(operand(left) != operand(right)),
        None => match operand(left) {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(format!(
                "a condition without `==` or `!=` must be `true` or `false`, and this one is `{other}`"
            )),
        },
    }
}

/// `execute` preceded by the check of a `when: {command}`: a false condition prints why and
/// exits 77; a true one runs `execute` as before.
pub(crate) fn guarded(condition: &Command, execute: &Command) -> Command {
    let condition_script = match condition {
        Command::Shell(script) => script.clone(),
        Command::Argv(argv) => argv
            .iter()
            .map(|arg| shell_quote(arg))
            .collect::<Vec<_>>()
            .join(" "),
    };
    let check = format!(
        "if ! ( {condition_script}\n); then printf 'skipped: when: %s is false\\n' {} >&2; exit 77; fi",
        shell_quote(&condition.display())
    );
    match execute {
        Command::Shell(script) => Command::Shell(format!("{check}\n{script}")),
        Command::Argv(argv) => {
            let mut guarded = vec![
                "/bin/sh".to_owned(),
                "-c".to_owned(),
                format!("{check}\nexec \"$@\""),
                "sh".to_owned(),
            ];
            guarded.extend(argv.iter().cloned());
            Command::Argv(guarded)
        }
    }
}

/// `text` as one single-quoted shell word.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_split_outside_quotes() {
        assert_eq!(split(r#"eu == "eu""#), ("eu ", Some("=="), r#" "eu""#));
        assert_eq!(split(r#""a==b" != x"#), (r#""a==b" "#, Some("!="), " x"));
        assert_eq!(split("true"), ("true", None, ""));
        assert_eq!(evaluate("eu ", Some("=="), " 'eu'"), Ok(true));
        assert_eq!(evaluate("eu", Some("!="), "eu"), Ok(false));
        assert_eq!(evaluate(" false ", None, ""), Ok(false));
        assert!(evaluate("maybe", None, "").is_err());
    }

    #[test]
    fn a_guard_keeps_the_command() {
        let guarded = guarded(
            &Command::Shell("test -s x".into()),
            &Command::Argv(vec!["./run.sh".into(), "a b".into()]),
        );
        let Command::Argv(argv) = guarded else {
            panic!("an argv command stays one");
        };
        assert_eq!(&argv[4..], ["./run.sh", "a b"]);
    }
}
