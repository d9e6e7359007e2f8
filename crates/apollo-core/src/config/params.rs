//! Run parameters (`params:`, DESIGN §14): their declared types and defaults, the values a
//! caller gives for one run ([`ParamOverride`]), and the checks that turn both into the run's
//! typed values — every problem reported before anything runs.
//!
//! A resolved value is JSON: a string (`string`, `date`), a number (`int`), a boolean
//! (`bool`) or an array of strings (`list`). That is also how a run records its params in
//! `run_started`, so a resume compares like with like.

use std::collections::BTreeMap;

use super::raw::{Node, Value};
use super::schema::{Sp, Walker};
use crate::diagnostic::{Diagnostic, Loc, Severity, SourceFile, closest, closest_or_near};

/// Keys allowed in one param's declaration.
pub(crate) const PARAM_KEYS: &[&str] = &super::describe::names(&super::describe::PARAM);

/// The names `type:` accepts, in the order the docs list them.
pub(crate) const PARAM_TYPES: &[&str] = &["string", "int", "bool", "date", "list"];

/// A param's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamType {
    String,
    Int,
    Bool,
    Date,
    List,
}

impl ParamType {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Self::String,
            "int" => Self::Int,
            "bool" => Self::Bool,
            "date" => Self::Date,
            "list" => Self::List,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Int => "int",
            Self::Bool => "bool",
            Self::Date => "date",
            Self::List => "list",
        }
    }

    /// What a value of this type looks like, for "expected …" messages.
    fn expected(self) -> &'static str {
        match self {
            Self::String => "a string",
            Self::Int => "a whole number",
            Self::Bool => "`true` or `false`",
            Self::Date => "a date `YYYY-MM-DD` (or `today`)",
            Self::List => "a list (`a,b,c` or a JSON list `[\"a\", \"b\"]`)",
        }
    }
}

/// A param's default as written: a value, or `today` (the run's UTC date, fixed when the run
/// starts).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DefaultValue {
    Value(serde_json::Value),
    Today,
}

/// One declared param.
#[derive(Debug, Clone)]
pub(crate) struct ParamSpec {
    pub(crate) name: Sp<String>,
    pub(crate) ty: ParamType,
    /// `None`: the param is required (every run must give it a value).
    pub(crate) default: Option<Sp<DefaultValue>>,
}

/// A value given for one param of one run, from the command line or a params file.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamOverride {
    /// The param's name.
    pub name: String,
    /// The value as given.
    pub value: ParamInput,
    /// Where it came from, for messages (for example ``-p day=2026-11-30`` or
    /// ``params file `p.yaml` ``).
    pub origin: String,
}

impl ParamOverride {
    /// A value given as text (`name=value` on a command line), parsed by the param's type.
    pub fn text(
        name: impl Into<String>,
        value: impl Into<String>,
        origin: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            value: ParamInput::Text(value.into()),
            origin: origin.into(),
        }
    }
}

/// A param value as a caller gave it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ParamInput {
    /// Text, parsed by the param's type: `42`, `true`, `2026-11-30`, `eu,us` or `["eu","us"]`.
    Text(String),
    /// A typed value (from a YAML or JSON params file, or a run's recorded params). A string
    /// is parsed like [`ParamInput::Text`].
    Json(serde_json::Value),
}

/// The params of one run: name → typed value (see the module docs for the JSON shapes).
pub type Params = BTreeMap<String, serde_json::Value>;

/// Whether `name` can name a param: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_valid_param_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
        && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

/// Two params whose environment variable (`APOLLO_PARAM_<NAME>`) would be the same: an error
/// at the second one.
pub(crate) fn variable_collisions(specs: &[ParamSpec], source: &SourceFile<'_>) -> Vec<Diagnostic> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    let mut diagnostics = Vec::new();
    for spec in specs {
        let variable = super::interpolate::param_variable(&spec.name.value);
        match seen.get(&variable) {
            Some(first) => diagnostics.push(
                source
                    .error(
                        "param-variable-clash",
                        spec.name.loc,
                        format!(
                            "params `{first}` and `{}` would both be given to units as `{variable}`",
                            spec.name.value
                        ),
                    )
                    .with_hint("rename one of them: names that differ only in case make the same variable"),
            ),
            None => {
                seen.insert(variable, &spec.name.value);
            }
        }
    }
    diagnostics
}

/// A param's value as text, the way `${params.name}` writes it: a list's items are joined by
/// single spaces (a shell splits them into words).
pub(crate) fn render(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Array(items) => items.iter().map(render).collect::<Vec<_>>().join(" "),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl Walker<'_, '_> {
    /// `params:` — a mapping of param names to `{type, default, description}`, or to a bare
    /// default whose type is read from it.
    pub(super) fn params(&mut self, node: &Node) -> Vec<ParamSpec> {
        let map = match &node.value {
            Value::Null => return Vec::new(),
            Value::Map(map) => map,
            _ => {
                self.wrong_type(
                    node,
                    "`params`",
                    "a mapping of param names to their declarations",
                )
                .hint("write it as `params: { day: {type: date, default: \"2026-11-30\"} }`");
                return Vec::new();
            }
        };
        let mut params: Vec<ParamSpec> = Vec::with_capacity(map.len());
        for (key, value) in map {
            let Some(name) = self.string(key, "a param name") else {
                continue;
            };
            if !is_valid_param_name(&name.value) {
                self.error(
                    "invalid-name",
                    key.loc,
                    format!("`{}` is not a valid param name", name.value.escape_debug()),
                )
                .hint("a param name is letters, digits and `_`, not starting with a digit (it is written `${params.NAME}`)");
                continue;
            }
            if let Some(first) = params.iter().find(|param| param.name.value == name.value) {
                let line = first.name.loc.line;
                self.error(
                    "duplicate-key",
                    key.loc,
                    format!("param `{}` is declared twice", name.value),
                )
                .note(format!("it is first declared at line {line}"));
                continue;
            }
            if let Some(param) = self.param(name, value) {
                params.push(param);
            }
        }
        params
    }

    fn param(&mut self, name: Sp<String>, node: &Node) -> Option<ParamSpec> {
        let context = format!("in param `{}`", name.value);
        if !matches!(node.value, Value::Map(_)) {
            // A bare default: its type is read from it.
            let ty = match &node.value {
                Value::Int(_) => ParamType::Int,
                Value::Bool(_) => ParamType::Bool,
                Value::Seq(_) => ParamType::List,
                _ => ParamType::String,
            };
            let default = self.default_value(node, ty, &name.value)?;
            return Some(ParamSpec {
                name,
                ty,
                default: Some(default),
            });
        }
        let mut ty_node = None;
        let mut default_node = None;
        if self.refuse_secret_flag(node, &format!("param `{}`", name.value)) {
            return None;
        }
        for (key, value) in self.entries(node, &context, PARAM_KEYS, &[]).0 {
            match key {
                "type" => ty_node = Some(value),
                "default" => default_node = Some(value),
                "description" => {
                    self.string(
                        value,
                        &format!("the `description` of param `{}`", name.value),
                    );
                }
                _ => {}
            }
        }
        let ty = match ty_node {
            None => match default_node.map(|node| &node.value) {
                Some(Value::Int(_)) => ParamType::Int,
                Some(Value::Bool(_)) => ParamType::Bool,
                Some(Value::Seq(_)) => ParamType::List,
                _ => ParamType::String,
            },
            Some(node) => {
                let written =
                    self.string(node, &format!("the `type` of param `{}`", name.value))?;
                match ParamType::from_name(&written.value) {
                    Some(ty) => ty,
                    None => {
                        let hint = match closest(&written.value, PARAM_TYPES.iter().copied()) {
                            Some(suggestion) => format!("did you mean `{suggestion}`?"),
                            None => format!(
                                "a param's type is one of {}",
                                PARAM_TYPES
                                    .iter()
                                    .map(|ty| format!("`{ty}`"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        };
                        self.error(
                            "bad-value",
                            node.loc,
                            format!(
                                "unknown type `{}` for param `{}`",
                                written.value, name.value
                            ),
                        )
                        .hint(hint);
                        return None;
                    }
                }
            }
        };
        let default = match default_node {
            None => None,
            Some(node) => Some(self.default_value(node, ty, &name.value)?),
        };
        Some(ParamSpec { name, ty, default })
    }

    fn default_value(
        &mut self,
        node: &Node,
        ty: ParamType,
        name: &str,
    ) -> Option<Sp<DefaultValue>> {
        if ty == ParamType::Date && matches!(&node.value, Value::Str(text) if text == "today") {
            return Some(Sp {
                value: DefaultValue::Today,
                loc: node.loc,
            });
        }
        match from_node(node, ty) {
            Ok(value) => Some(Sp {
                value: DefaultValue::Value(value),
                loc: node.loc,
            }),
            Err(problem) => {
                self.error(
                    "wrong-type",
                    node.loc,
                    format!(
                        "the default of param `{name}` must be {}, found {problem}",
                        ty.expected()
                    ),
                )
                .hint(format!("param `{name}` is of type `{}`", ty.name()));
                None
            }
        }
    }
}

/// A YAML node as a value of `ty`, or what was found instead.
fn from_node(node: &Node, ty: ParamType) -> Result<serde_json::Value, String> {
    let found = || format!("{} `{}`", node.value.kind(), describe(&node.value));
    match (&node.value, ty) {
        (Value::Str(text), _) => from_text(text, ty).map_err(|_| found()),
        (Value::Int(number), ParamType::String) => {
            Ok(serde_json::Value::String(number.to_string()))
        }
        (Value::Int(number), ParamType::Int) => i64::try_from(*number)
            .map(serde_json::Value::from)
            .map_err(|_| found()),
        (Value::Bool(flag), ParamType::Bool) => Ok(serde_json::Value::Bool(*flag)),
        (Value::Seq(items), ParamType::List) => {
            let mut list = Vec::with_capacity(items.len());
            for item in items {
                match &item.value {
                    Value::Str(text) => list.push(serde_json::Value::String(text.to_string())),
                    Value::Int(number) => list.push(serde_json::Value::String(number.to_string())),
                    Value::Bool(flag) => list.push(serde_json::Value::String(flag.to_string())),
                    _ => return Err(format!("a list holding {}", item.value.kind())),
                }
            }
            Ok(serde_json::Value::Array(list))
        }
        _ => Err(found()),
    }
}

fn describe(value: &Value<'_>) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Int(number) => number.to_string(),
        Value::Float(number) => number.to_string(),
        Value::Str(text) => text.to_string(),
        Value::Seq(_) => "[…]".to_owned(),
        Value::Map(_) => "{…}".to_owned(),
    }
}

/// Text as a value of `ty` (`today` is handled by the caller).
fn from_text(text: &str, ty: ParamType) -> Result<serde_json::Value, ()> {
    match ty {
        ParamType::String => Ok(serde_json::Value::String(text.to_owned())),
        ParamType::Int => text
            .trim()
            .parse::<i64>()
            .map(serde_json::Value::from)
            .map_err(|_| ()),
        ParamType::Bool => match text.trim() {
            "true" => Ok(serde_json::Value::Bool(true)),
            "false" => Ok(serde_json::Value::Bool(false)),
            _ => Err(()),
        },
        ParamType::Date => {
            let text = text.trim();
            // Exactly `YYYY-MM-DD`, a real calendar day.
            if text.len() == 10 && chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok() {
                Ok(serde_json::Value::String(text.to_owned()))
            } else {
                Err(())
            }
        }
        ParamType::List => {
            let trimmed = text.trim();
            if trimmed.starts_with('[') {
                let parsed: serde_json::Value = serde_json::from_str(trimmed).map_err(|_| ())?;
                return from_json(&parsed, ty);
            }
            if trimmed.is_empty() {
                return Ok(serde_json::Value::Array(Vec::new()));
            }
            Ok(serde_json::Value::Array(
                trimmed
                    .split(',')
                    .map(|item| serde_json::Value::String(item.trim().to_owned()))
                    .collect(),
            ))
        }
    }
}

/// A JSON value (from a params file or a recorded run) as a value of `ty`.
fn from_json(value: &serde_json::Value, ty: ParamType) -> Result<serde_json::Value, ()> {
    match (value, ty) {
        (serde_json::Value::String(text), _) => from_text(text, ty),
        (serde_json::Value::Number(number), ParamType::String) => {
            Ok(serde_json::Value::String(number.to_string()))
        }
        (serde_json::Value::Number(number), ParamType::Int) => {
            number.as_i64().map(serde_json::Value::from).ok_or(())
        }
        (serde_json::Value::Bool(flag), ParamType::Bool) => Ok(serde_json::Value::Bool(*flag)),
        (serde_json::Value::Array(items), ParamType::List) => items
            .iter()
            .map(|item| match item {
                serde_json::Value::String(text) => Ok(serde_json::Value::String(text.clone())),
                serde_json::Value::Number(number) => {
                    Ok(serde_json::Value::String(number.to_string()))
                }
                serde_json::Value::Bool(flag) => Ok(serde_json::Value::String(flag.to_string())),
                _ => Err(()),
            })
            .collect::<Result<Vec<_>, ()>>()
            .map(serde_json::Value::Array),
        _ => Err(()),
    }
}

/// The run's param values: each declared param's given value, else its default; diagnostics
/// for unknown names, wrong types and missing required params. `today` is the run's UTC date
/// (`YYYY-MM-DD`). With `placeholders`, a required param without a value takes a placeholder
/// of its type (a warning says so) instead of being an error.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(crate) fn resolve(
    specs: &[ParamSpec],
    overrides: &[ParamOverride],
    today: &str,
    placeholders: bool,
    source: &SourceFile<'_>,
) -> (Params, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let mut values = Params::new();
    let file = source.path();
    for given in overrides {
        let Some(spec) = specs.iter().find(|spec| spec.name.value == given.name) else {
            let mut diagnostic = Diagnostic::new(
                Severity::Error,
                "unknown-param",
                file,
                format!("unknown param `{}` ({})", given.name, given.origin),
            );
            diagnostic = match closest_or_near(
                &given.name,
                specs.iter().map(|spec| spec.name.value.as_str()),
            ) {
                Some(suggestion) => diagnostic.with_hint(format!("did you mean `{suggestion}`?")),
                None if specs.is_empty() => {
                    diagnostic.with_hint("this pipeline declares no `params`")
                }
                None => diagnostic.with_hint(format!(
                    "the params of this pipeline are: {}",
                    specs
                        .iter()
                        .map(|spec| format!("`{}`", spec.name.value))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            };
            diagnostics.push(diagnostic);
            continue;
        };
        let parsed = match &given.value {
            ParamInput::Text(text) if spec.ty == ParamType::Date && text.trim() == "today" => {
                Ok(serde_json::Value::String(today.to_owned()))
            }
            ParamInput::Text(text) => from_text(text, spec.ty),
            ParamInput::Json(value) => from_json(value, spec.ty),
        };
        match parsed {
            Ok(value) => {
                values.insert(given.name.clone(), value);
            }
            Err(()) => {
                let written = match &given.value {
                    ParamInput::Text(text) | ParamInput::Json(serde_json::Value::String(text)) => {
                        text.clone()
                    }
                    ParamInput::Json(value) => value.to_string(),
                };
                diagnostics.push(
                    source
                        .error(
                            "wrong-type",
                            Loc::default(),
                            format!(
                                "param `{}` must be {}, found `{written}` ({})",
                                given.name,
                                spec.ty.expected(),
                                given.origin
                            ),
                        )
                        .with_note(format!(
                            "param `{}` is declared with `type: {}` at line {}",
                            given.name,
                            spec.ty.name(),
                            spec.name.loc.line
                        )),
                );
            }
        }
    }
    for spec in specs {
        if values.contains_key(&spec.name.value) {
            continue;
        }
        match &spec.default {
            Some(default) => {
                let value = match &default.value {
                    DefaultValue::Value(value) => value.clone(),
                    DefaultValue::Today => serde_json::Value::String(today.to_owned()),
                };
                values.insert(spec.name.value.clone(), value);
            }
            None if placeholders => {
                let value = match spec.ty {
                    ParamType::String => serde_json::json!("placeholder"),
                    ParamType::Int => serde_json::json!(0),
                    ParamType::Bool => serde_json::json!(false),
                    ParamType::Date => serde_json::json!(today),
                    // One item, so a fan-out over it is checked through one instance.
                    ParamType::List => serde_json::json!(["placeholder"]),
                };
                diagnostics.push(
                    source
                        .warning(
                            "param-placeholder",
                            spec.name.loc,
                            format!(
                                "param `{}` has no default: checked with the placeholder {value}",
                                spec.name.value
                            ),
                        )
                        .with_hint(format!(
                            "a run needs a value (`-p {}=…`); give one here too to check with it",
                            spec.name.value
                        )),
                );
                values.insert(spec.name.value.clone(), value);
            }
            None => diagnostics.push(
                source
                    .error(
                        "missing-param",
                        spec.name.loc,
                        format!(
                            "param `{}` has no default and no value was given for this run",
                            spec.name.value
                        ),
                    )
                    .with_hint(format!(
                        "give it a value when starting the run, or a `default:`; it takes {}",
                        spec.ty.expected()
                    )),
            ),
        }
    }
    (values, diagnostics)
}

/// Reads a params file (YAML or JSON: a mapping of param names to values) into overrides.
pub(crate) fn overrides_from_file(
    text: &str,
    source: &SourceFile<'_>,
) -> Result<Vec<ParamOverride>, Box<Diagnostic>> {
    let root = super::raw::parse(text).map_err(|error| {
        Box::new(source.error(
            "yaml-syntax",
            error.loc,
            format!("invalid YAML: {}", error.message),
        ))
    })?;
    let origin = format!("params file `{}`", source.path().display());
    let map =
        match root.value {
            Value::Null => return Ok(Vec::new()),
            Value::Map(map) => map,
            other => {
                return Err(Box::new(source
                .error(
                    "wrong-type",
                    root.loc,
                    format!(
                        "a params file must be a mapping of param names to values, found {}",
                        other.kind()
                    ),
                )
                .with_hint("for example `day: 2026-11-30`")));
            }
        };
    let mut overrides = Vec::with_capacity(map.len());
    for (key, value) in map {
        let Value::Str(name) = &key.value else {
            return Err(Box::new(source.error(
                "wrong-type",
                key.loc,
                format!("a param name must be a string, found {}", key.value.kind()),
            )));
        };
        overrides.push(ParamOverride {
            name: name.to_string(),
            value: ParamInput::Json(to_json(&value).map_err(|found| {
                Box::new(source.error(
                    "wrong-type",
                    value.loc,
                    format!("the value of param `{name}` is {found}, which no param type takes"),
                ))
            })?),
            origin: origin.clone(),
        });
    }
    Ok(overrides)
}

fn to_json(node: &Node) -> Result<serde_json::Value, &'static str> {
    Ok(match &node.value {
        Value::Str(text) => serde_json::Value::String(text.to_string()),
        Value::Int(number) => match i64::try_from(*number) {
            Ok(number) => serde_json::Value::from(number),
            Err(_) => serde_json::Value::String(number.to_string()),
        },
        Value::Bool(flag) => serde_json::Value::Bool(*flag),
        Value::Seq(items) => {
            serde_json::Value::Array(items.iter().map(to_json).collect::<Result<Vec<_>, _>>()?)
        }
        other => return Err(other.kind()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_parses_by_type() {
        assert_eq!(from_text("42", ParamType::Int), Ok(serde_json::json!(42)));
        assert!(from_text("4x", ParamType::Int).is_err());
        assert_eq!(
            from_text("true", ParamType::Bool),
            Ok(serde_json::json!(true))
        );
        assert!(from_text("yes", ParamType::Bool).is_err());
        assert_eq!(
            from_text("2026-11-30", ParamType::Date),
            Ok(serde_json::json!("2026-11-30"))
        );
        assert!(from_text("2026-02-30", ParamType::Date).is_err());
        assert!(from_text("2026-1-3", ParamType::Date).is_err());
        assert_eq!(
            from_text("eu, us", ParamType::List),
            Ok(serde_json::json!(["eu", "us"]))
        );
        assert_eq!(
            from_text("[\"eu\", 1]", ParamType::List),
            Ok(serde_json::json!(["eu", "1"]))
        );
        assert_eq!(from_text("", ParamType::List), Ok(serde_json::json!([])));
    }

    #[test]
    fn values_render_as_interpolation_writes_them() {
        assert_eq!(render(&serde_json::json!(["eu", "us"])), "eu us");
        assert_eq!(render(&serde_json::json!(7)), "7");
        assert_eq!(render(&serde_json::json!("x y")), "x y");
    }

    #[test]
    fn param_names_are_identifiers() {
        assert!(is_valid_param_name("day_1"));
        assert!(is_valid_param_name("_x"));
        assert!(!is_valid_param_name("1day"));
        assert!(!is_valid_param_name("a-b"));
        assert!(!is_valid_param_name(""));
    }
}
