//! YAML text → a tree of located nodes. The only module that knows about serde-saphyr, so the
//! YAML library could be swapped by rewriting this file alone.
//!
//! We deserialize into a generic tree rather than into typed structs on purpose: serde stops
//! at the first error, while `apollo check` must report every unknown key, wrong type and bad
//! duration at once. The typed walk over this tree lives in `schema.rs`.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use crate::diagnostic::Loc;

/// A YAML node and where it is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) value: Value,
    pub(crate) loc: Loc,
}

/// The value of a YAML node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Value {
    /// The value's kind, as in "expected a string, found `a list`".
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Null => "nothing (null)",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a decimal number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// A YAML syntax (or resource limit) error, with its place when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) message: String,
    pub(crate) loc: Loc,
}

/// Parses one YAML document into a node tree.
///
/// Duplicate keys are passed through (the schema walk reports them with both places), and the
/// parser's budget is raised for large pipelines while keeping its protection against alias
/// bombs and deep nesting.
pub(crate) fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    // YAML 1.2 booleans only: with YAML 1.1 rules `execute: y` or `name: on` would be booleans.
    options.strict_booleans = true;
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::PassThrough;
    let mut budget = serde_saphyr::Budget::default();
    // A 100,000-unit pipeline has about a million nodes; allow ten times that. Memory stays
    // bounded by the input size, which we have already read.
    budget.max_nodes = budget.max_nodes.max(10_000_000);
    budget.max_events = budget.max_events.max(40_000_000);
    options.budget = Some(budget);
    match serde_saphyr::from_str_with_options::<SpannedNode>(text, options) {
        Ok(SpannedNode(node)) => Ok(node),
        Err(error) => {
            let loc = error
                .location()
                .map(|location| Loc {
                    line: u32::try_from(location.line()).unwrap_or(u32::MAX),
                    column: u32::try_from(location.column()).unwrap_or(u32::MAX),
                    width: 1,
                })
                .unwrap_or_default();
            let message = error.without_snippet().to_string();
            Err(SyntaxError {
                message: strip_location_suffix(&message).to_owned(),
                loc,
            })
        }
    }
}

/// serde-saphyr appends ` at line L, column C` to its messages; we print the place ourselves.
fn strip_location_suffix(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(index) if message[index..].contains(", column ") => &message[..index],
        _ => message,
    }
}

/// A node deserialized together with its place.
struct SpannedNode(Node);

impl<'de> Deserialize<'de> for SpannedNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Value>::deserialize(deserializer)?;
        let location = spanned.referenced;
        let width = u32::try_from(location.span().len()).unwrap_or(u32::MAX);
        Ok(SpannedNode(Node {
            value: spanned.value,
            loc: Loc {
                line: u32::try_from(location.line()).unwrap_or(u32::MAX),
                column: u32::try_from(location.column()).unwrap_or(u32::MAX),
                width,
            },
        }))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any YAML value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Int(i128::from(value)))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Int(i128::from(value)))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Value, E> {
        Ok(Value::Int(value))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Value, E> {
        Ok(i128::try_from(value).map_or(Value::Float(value as f64), Value::Int))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Ok(Value::Float(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::Str(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::Str(value))
    }

    fn visit_bytes<E: de::Error>(self, value: &[u8]) -> Result<Value, E> {
        Ok(Value::Str(String::from_utf8_lossy(value).into_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(access.size_hint().unwrap_or(0).min(1024));
        while let Some(SpannedNode(node)) = access.next_element()? {
            items.push(node);
        }
        Ok(Value::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(0).min(1024));
        while let Some((SpannedNode(key), SpannedNode(value))) = access.next_entry()? {
            entries.push((key, value));
        }
        Ok(Value::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_carry_line_and_column() {
        let node = parse("name: x\nunits:\n  - retries: 2\n").unwrap();
        let Value::Map(entries) = node.value else {
            panic!("expected a mapping");
        };
        let (key, value) = &entries[1];
        assert_eq!(key.value, Value::Str("units".into()));
        let Value::Seq(units) = &value.value else {
            panic!("expected a list");
        };
        let Value::Map(unit) = &units[0].value else {
            panic!("expected a mapping");
        };
        assert_eq!(
            unit[0].0.loc,
            Loc {
                line: 3,
                column: 5,
                width: 7
            }
        );
        assert_eq!(unit[0].1.value, Value::Int(2));
    }

    #[test]
    fn syntax_errors_have_a_place_and_no_duplicated_suffix() {
        let error = parse("units: [\n  - a\n").unwrap_err();
        assert_eq!(error.loc.line, 2);
        assert!(!error.message.contains(" at line "), "{}", error.message);
    }

    #[test]
    fn duplicate_keys_are_kept_for_the_schema_to_report() {
        let node = parse("a: 1\na: 2\n").unwrap();
        let Value::Map(entries) = node.value else {
            panic!("expected a mapping");
        };
        assert_eq!(entries.len(), 2);
    }
}
