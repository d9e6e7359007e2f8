//! YAML text → a tree of located nodes. The only module that knows which YAML library we
//! use, so it could be swapped by rewriting this file alone.
//!
//! We build a generic tree rather than deserializing into typed structs on purpose: serde
//! stops at the first error, while `apollo check` must report every unknown key, wrong type
//! and bad duration at once. The typed walk over this tree lives in `schema.rs`.
//!
//! The tree is built from the event stream of `granit-parser`, the YAML 1.2 parser under
//! serde-saphyr (re-exported by it). Going through serde-saphyr's `Spanned<T>` costs a
//! synthesized map per node and made a 100,000-unit config take three times as long to load;
//! the events carry the same places for free. Plain scalars are resolved with the YAML 1.2
//! core schema (`true`/`false` only — `yes`, `on` and `y` are strings).

use std::borrow::Cow;

use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Span};

use crate::diagnostic::Loc;

/// Deeper nesting than this is rejected (a config needs about 5 levels), which also keeps the
/// recursive `Drop` of the tree shallow.
const MAX_DEPTH: usize = 64;

/// A YAML node and where it is. Strings borrow from the source text where they can.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node<'a> {
    pub(crate) value: Value<'a>,
    pub(crate) loc: Loc,
}

/// The value of a YAML node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(Cow<'a, str>),
    Seq(Vec<Node<'a>>),
    Map(Vec<(Node<'a>, Node<'a>)>),
}

impl Value<'_> {
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

/// A collection being built.
struct Frame<'a> {
    loc: Loc,
    anchor_id: usize,
    /// `produced` when the collection started, to size it for alias expansion.
    produced_before: usize,
    kind: FrameKind<'a>,
}

enum FrameKind<'a> {
    Seq(Vec<Node<'a>>),
    Map {
        entries: Vec<(Node<'a>, Node<'a>)>,
        pending_key: Option<Node<'a>>,
    },
}

/// Parses one YAML document into a node tree.
///
/// Aliases are expanded (with a cap on the total number of nodes, against alias bombs);
/// duplicate keys are kept, for the schema walk to report with both places.
pub(crate) fn parse(text: &str) -> Result<Node<'_>, SyntaxError> {
    parse_with(text, None)
}

/// [`parse`], handing each item of the top-level `units` list to `on_unit` as soon as it is
/// complete instead of keeping it in the tree (that list is then empty in the tree): a
/// 100,000-unit pipeline is walked on another thread while the rest is parsed (see
/// `load_string`). Only the first `units` list is handed over; on a syntax error, what was
/// handed over is to be dropped.
pub(crate) fn parse_streaming_units<'a>(
    text: &'a str,
    on_unit: &mut dyn FnMut(Node<'a>),
) -> Result<Node<'a>, SyntaxError> {
    parse_with(text, Some(on_unit))
}

#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
fn parse_with<'a>(
    text: &'a str,
    mut on_unit: Option<&mut dyn FnMut(Node<'a>)>,
) -> Result<Node<'a>, SyntaxError> {
    // Alias expansion may produce at most this many nodes: far more than any real config
    // (a 100,000-unit pipeline has about a million), far less than an alias bomb.
    let max_nodes = 4_000_000usize.max(text.len().saturating_mul(2));
    let mut stack: Vec<Frame<'_>> = Vec::new();
    // Anchored nodes by id, with their node count.
    let mut anchors: Vec<Option<(Node<'_>, usize)>> = Vec::new();
    let mut produced: usize = 0;
    let mut root: Option<Node<'_>> = None;
    let mut n_documents = 0;
    for result in Parser::new_from_str(text) {
        let (event, span) = result.map_err(|error| SyntaxError {
            message: error.info(),
            loc: Loc {
                line: to_u32(error.marker().line()),
                column: to_u32(error.marker().col() + 1),
                width: 1,
                ..Loc::default()
            },
        })?;
        let loc = loc_of(&span);
        let (node, anchor_id, size) = match event {
            Event::DocumentStart(..) => {
                n_documents += 1;
                if n_documents > 1 {
                    return Err(SyntaxError {
                        message: "multiple YAML documents".to_owned(),
                        loc,
                    });
                }
                continue;
            }
            Event::Scalar(text, style, anchor_id, tag) => {
                produced += 1;
                let force_string = tag.as_ref().is_some_and(|tag| {
                    tag.is_yaml_core_schema_tag("str") || !tag.is_yaml_core_schema()
                });
                let value = if style == ScalarStyle::Plain && !force_string {
                    resolve_plain(text)
                } else {
                    Value::Str(text)
                };
                (Node { value, loc }, anchor_id, 1)
            }
            Event::Alias(anchor_id) => {
                let Some(Some((node, size))) = anchors.get(anchor_id) else {
                    return Err(SyntaxError {
                        message: "alias to an unknown anchor".to_owned(),
                        loc,
                    });
                };
                produced = produced.saturating_add(*size);
                if produced > max_nodes {
                    return Err(SyntaxError {
                        message: format!(
                            "aliases expand to more than {max_nodes} nodes; refusing to expand them"
                        ),
                        loc,
                    });
                }
                // The alias is used where it stands.
                let mut node = node.clone();
                node.loc = loc;
                (node, 0, 0)
            }
            Event::SequenceStart(_, anchor_id, _) | Event::MappingStart(_, anchor_id, _) => {
                produced += 1;
                if stack.len() >= MAX_DEPTH {
                    return Err(SyntaxError {
                        message: format!("nesting deeper than {MAX_DEPTH} levels"),
                        loc,
                    });
                }
                let kind = if matches!(event, Event::SequenceStart(..)) {
                    FrameKind::Seq(Vec::new())
                } else {
                    FrameKind::Map {
                        entries: Vec::new(),
                        pending_key: None,
                    }
                };
                stack.push(Frame {
                    loc,
                    anchor_id,
                    produced_before: produced - 1,
                    kind,
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = stack.pop() else {
                    return Err(SyntaxError {
                        message: "unbalanced collection end".to_owned(),
                        loc,
                    });
                };
                let value = match frame.kind {
                    FrameKind::Seq(items) => Value::Seq(items),
                    FrameKind::Map { entries, .. } => Value::Map(merge_keys(entries)?),
                };
                let size = produced - frame.produced_before;
                (
                    Node {
                        value,
                        loc: frame.loc,
                    },
                    frame.anchor_id,
                    size,
                )
            }
            _ => continue,
        };
        if anchor_id != 0 {
            if anchors.len() <= anchor_id {
                anchors.resize_with(anchor_id + 1, || None);
            }
            anchors[anchor_id] = Some((node.clone(), size));
        }
        if let Some(hand_over) = on_unit.as_deref_mut()
            && is_top_level_unit(&stack)
        {
            hand_over(node);
            continue;
        }
        if on_unit.is_some() && stack.len() == 1 && is_units_key(&stack[0]) {
            // The first `units` list is complete: a second one (a duplicate key, reported by
            // the walk) stays in the tree.
            on_unit = None;
        }
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame {
                kind: FrameKind::Seq(items),
                ..
            }) => items.push(node),
            Some(Frame {
                kind:
                    FrameKind::Map {
                        entries,
                        pending_key,
                    },
                ..
            }) => match pending_key.take() {
                None => *pending_key = Some(node),
                Some(key) => entries.push((key, node)),
            },
        }
    }
    Ok(root.unwrap_or(Node {
        value: Value::Null,
        loc: Loc {
            line: 1,
            column: 1,
            width: 1,
            ..Loc::default()
        },
    }))
}

/// Whether a node completed now is an item of the top-level `units` list: the stack is the
/// root mapping, waiting for the value of its key `units`, and the list.
fn is_top_level_unit(stack: &[Frame<'_>]) -> bool {
    matches!(stack, [root, list] if is_units_key(root) && matches!(list.kind, FrameKind::Seq(_)))
}

/// Whether `frame` is a mapping waiting for the value of its key `units`.
fn is_units_key(frame: &Frame<'_>) -> bool {
    matches!(
        &frame.kind,
        FrameKind::Map { pending_key: Some(key), .. }
            if matches!(&key.value, Value::Str(text) if text == "units")
    )
}

/// Parses the text of an included file: like [`parse`], with every place marked as being in
/// file `file` (see [`Loc::file`]).
pub(crate) fn parse_file(text: &str, file: u16) -> Result<Node<'_>, SyntaxError> {
    fn mark(node: &mut Node<'_>, file: u16) {
        node.loc.file = file;
        match &mut node.value {
            Value::Seq(items) => items.iter_mut().for_each(|item| mark(item, file)),
            Value::Map(entries) => entries.iter_mut().for_each(|(key, value)| {
                mark(key, file);
                mark(value, file);
            }),
            _ => {}
        }
    }
    let mut root = parse(text).map_err(|mut error| {
        error.loc.file = file;
        error
    })?;
    mark(&mut root, file);
    Ok(root)
}

/// Applies YAML merge keys (`<<: *defaults`, `<<: [*a, *b]`), as docker-compose users expect:
/// the mapping's own keys win, then the merged mappings' keys in the order they are listed.
/// The result holds no `<<` entry. A mapping without one is returned as it is.
fn merge_keys<'a>(
    entries: Vec<(Node<'a>, Node<'a>)>,
) -> Result<Vec<(Node<'a>, Node<'a>)>, SyntaxError> {
    let is_merge = |key: &Node<'_>| matches!(&key.value, Value::Str(text) if text == "<<");
    if !entries.iter().any(|(key, _)| is_merge(key)) {
        return Ok(entries);
    }
    let mut own = Vec::with_capacity(entries.len());
    let mut merged: Vec<(Node<'a>, Node<'a>)> = Vec::new();
    for (key, value) in entries {
        if !is_merge(&key) {
            own.push((key, value));
            continue;
        }
        let sources = match value.value {
            Value::Map(map) => vec![map],
            Value::Seq(items) => {
                let mut maps = Vec::with_capacity(items.len());
                for item in items {
                    let Value::Map(map) = item.value else {
                        return Err(SyntaxError {
                            message: format!(
                                "a merge key `<<` lists {}, not a mapping",
                                item.value.kind()
                            ),
                            loc: item.loc,
                        });
                    };
                    maps.push(map);
                }
                maps
            }
            other => {
                return Err(SyntaxError {
                    message: format!(
                        "a merge key `<<` needs a mapping or a list of mappings, found {}",
                        other.kind()
                    ),
                    loc: value.loc,
                });
            }
        };
        for map in sources {
            for (merged_key, merged_value) in map {
                if !merged
                    .iter()
                    .any(|(seen, _)| seen.value == merged_key.value)
                {
                    merged.push((merged_key, merged_value));
                }
            }
        }
    }
    for (key, value) in merged {
        if !own.iter().any(|(seen, _)| seen.value == key.value) {
            own.push((key, value));
        }
    }
    Ok(own)
}

/// A node as JSON: what a JSON Schema validator sees of the file (keys that are not strings
/// become their text; numbers beyond JSON's become strings, non-finite floats null).
pub(crate) fn to_json(node: &Node<'_>) -> serde_json::Value {
    match &node.value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(flag) => serde_json::Value::Bool(*flag),
        Value::Int(number) => match i64::try_from(*number) {
            Ok(number) => serde_json::Value::from(number),
            Err(_) => serde_json::Value::String(number.to_string()),
        },
        Value::Float(number) => serde_json::Number::from_f64(*number)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Value::Str(text) => serde_json::Value::String(text.to_string()),
        Value::Seq(items) => serde_json::Value::Array(items.iter().map(to_json).collect()),
        Value::Map(entries) => serde_json::Value::Object(
            entries
                .iter()
                .map(|(key, value)| {
                    let key = match to_json(key) {
                        serde_json::Value::String(text) => text,
                        other => other.to_string(),
                    };
                    (key, to_json(value))
                })
                .collect(),
        ),
    }
}

fn to_u32(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

fn loc_of(span: &Span) -> Loc {
    Loc {
        line: to_u32(span.start.line()),
        column: to_u32(span.start.col() + 1),
        width: to_u32(span.end.index().saturating_sub(span.start.index())),
        ..Loc::default()
    }
}

/// The YAML 1.2 core schema for plain scalars: null, booleans, integers, floats, else a string.
fn resolve_plain(text: Cow<'_, str>) -> Value<'_> {
    match &*text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Value::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        _ => {}
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(&text);
    if !unsigned.is_empty() && unsigned.bytes().all(|byte| byte.is_ascii_digit()) {
        return match text.parse::<i128>() {
            Ok(number) => Value::Int(number),
            Err(_) => Value::Str(text),
        };
    }
    if let Some(octal) = text.strip_prefix("0o")
        && let Ok(number) = i128::from_str_radix(octal, 8)
    {
        return Value::Int(number);
    }
    if let Some(hex) = text.strip_prefix("0x")
        && let Ok(number) = i128::from_str_radix(hex, 16)
    {
        return Value::Int(number);
    }
    if is_core_float(unsigned)
        && let Ok(number) = text.parse::<f64>()
    {
        return Value::Float(number);
    }
    Value::Str(text)
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`, the sign already stripped.
fn is_core_float(text: &str) -> bool {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(index) => (&text[..index], Some(&text[index + 1..])),
        None => (text, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (mantissa, None),
    };
    let digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    let mantissa_ok = match fraction {
        None => !whole.is_empty() && digits(whole),
        Some(fraction) => {
            digits(whole) && digits(fraction) && (!whole.is_empty() || !fraction.is_empty())
        }
    };
    let exponent_ok = exponent.is_none_or(|exponent| {
        let exponent = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
        !exponent.is_empty() && digits(exponent)
    });
    mantissa_ok && exponent_ok
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
                width: 7,
                ..Loc::default()
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
    fn plain_scalars_follow_the_yaml_1_2_core_schema() {
        let cases = [
            ("~", Value::Null),
            ("true", Value::Bool(true)),
            ("yes", Value::Str("yes".into())),
            ("y", Value::Str("y".into())),
            ("-12", Value::Int(-12)),
            ("0x1f", Value::Int(31)),
            ("0o17", Value::Int(15)),
            ("1.5", Value::Float(1.5)),
            ("1e3", Value::Float(1000.0)),
            (".5", Value::Float(0.5)),
            ("1h30m", Value::Str("1h30m".into())),
            ("1.2.3", Value::Str("1.2.3".into())),
            ("-", Value::Str("-".into())),
        ];
        for (text, expected) in cases {
            assert_eq!(resolve_plain(Cow::Borrowed(text)), expected, "{text}");
        }
        let node = parse("a: '12'\nb: !!str 12\n").unwrap();
        let Value::Map(entries) = node.value else {
            panic!("expected a mapping");
        };
        assert_eq!(entries[0].1.value, Value::Str("12".into()));
        assert_eq!(entries[1].1.value, Value::Str("12".into()));
    }

    #[test]
    fn aliases_expand_to_the_anchored_node() {
        let node = parse("a: &x [1, 2]\nb: *x\n").unwrap();
        let Value::Map(entries) = node.value else {
            panic!("expected a mapping");
        };
        assert_eq!(entries[0].1.value, entries[1].1.value);
        assert_eq!(entries[1].1.loc.line, 2);
    }

    #[test]
    fn merge_keys_fill_in_what_the_mapping_does_not_set() {
        let node = parse("d: &d {a: 1, b: 2}\ne: &e {c: 3}\nx: {<<: [*d, *e], b: 9}\n").unwrap();
        let Value::Map(entries) = node.value else {
            panic!("expected a mapping");
        };
        let Value::Map(x) = &entries[2].1.value else {
            panic!("expected a mapping");
        };
        let pairs: Vec<(String, Value<'_>)> = x
            .iter()
            .map(|(key, value)| match &key.value {
                Value::Str(text) => (text.to_string(), value.value.clone()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            pairs,
            [
                ("b".to_owned(), Value::Int(9)),
                ("a".to_owned(), Value::Int(1)),
                ("c".to_owned(), Value::Int(3)),
            ]
        );
        assert!(parse("x: {<<: 3}\n").is_err());
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
