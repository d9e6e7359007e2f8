//! `when:` (DESIGN §14): a condition under which a unit runs.
//!
//! * An **expression** over params (and env, and a fan-out's item), decided when the config is
//!   loaded: `when: ${params.region} == "eu"`, `!=`, or a single value that is `true` or
//!   `false` (`when: ${params.full}`). Sides are quoted strings or bare words, compared as text
//!   after interpolation.
//! * A **command**, `when: {command: test -s data/new.csv}`, decided when the unit runs: a
//!   step of its own ([`Phase::When`](crate::model::Phase::When)), run by `/bin/sh` (an
//!   argument vector as written) in the unit's workdir and env at the start of each attempt,
//!   by the local executor and inside the Slurm job alike
//!   ([`Unit::when_command`](crate::model::Unit::when_command)). A unit with `prepare` cannot
//!   have one: the condition would come after the preparation it is meant to spare.
//!
//! A false **expression** skips the unit: apollo records `unit_skipped` with reason `when`
//! (the condition as written, with its values), runs none of its commands, and its dependents
//! go on ([`Unit::skip_when`](crate::model::Unit::skip_when)). A false **command** (a non-zero
//! exit) is recorded the same way — the attempt's `unit_finished` (skipped, its last phase
//! `when`), then `unit_skipped` with reason `when` and the condition's text — and its
//! dependents go on likewise. Neither is ever shown as an exit 77 of the unit's own, and the
//! unit's commands stay as the user wrote them. A condition that cannot start (or is killed
//! by a signal, or times out) fails the attempt: it is not a skip.

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

/// The command of a `when: {command}` (interpolated once `expand.rs` applied it).
pub(crate) fn command(when: Option<&When>) -> Option<&Sp<Command>> {
    match when? {
        When::Command(command) => Some(command),
        When::Expression(_) => None,
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
}
