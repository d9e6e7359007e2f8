//! The items of a `foreach`: a list, a list param, a glob, or the product of a mapping of
//! those (an empty glob is a warning, never silent).

use std::collections::HashMap;

use super::Expander;
use crate::config::fanout::{Axis, Foreach, glob_items, glob_key, key_of, product};
use crate::config::interpolate::{Item, Place};
use crate::config::params::render;
use crate::config::schema::{Sp, UnitSpec};
use crate::diagnostic::Loc;

/// What a `foreach` glob that matches no file is: a warning naming the unit's dependents
/// (they run without it), or with `allow_empty: false` an error.
pub(super) struct EmptyRule<'a> {
    pub(super) allowed: bool,
    /// The units whose `deps` name the fan-out or one of its instances, in config order.
    pub(super) dependents: &'a [String],
}

impl<'a> EmptyRule<'a> {
    /// The rule of the fan-out `unit` named `name`, given every fan-out's dependents.
    pub(super) fn of(
        unit: &UnitSpec,
        name: &str,
        dependents: &'a HashMap<String, Vec<String>>,
    ) -> Self {
        EmptyRule {
            allowed: unit.allow_empty.as_ref().is_none_or(|allow| allow.value),
            dependents: dependents.get(name).map_or(&[][..], Vec::as_slice),
        }
    }
}

/// Each fan-out's dependents (units whose `deps` name it or one of its instances), by the
/// fan-out's name, in config order.
pub(super) fn dependents_of_fanouts(units: &[UnitSpec]) -> HashMap<String, Vec<String>> {
    let fanouts: Vec<&str> = units
        .iter()
        .filter(|unit| unit.foreach.is_some())
        .filter_map(|unit| unit.name.as_ref().map(|name| name.value.as_str()))
        .collect();
    let mut dependents: HashMap<String, Vec<String>> = HashMap::new();
    for unit in units {
        let Some(name) = &unit.name else { continue };
        for dep in &unit.deps {
            let base = dep.value.split('[').next().unwrap_or_default();
            if fanouts.contains(&base) {
                let list = dependents.entry(base.to_owned()).or_default();
                if !list.contains(&name.value) {
                    list.push(name.value.clone());
                }
            }
        }
    }
    dependents
}

impl Expander<'_, '_> {
    /// The items of a `foreach`, each with where it is written when it is one list item, or
    /// `None` when it cannot be expanded (reported).
    pub(super) fn items(
        &mut self,
        foreach: &Sp<Foreach>,
        label: &str,
        empty: &EmptyRule<'_>,
    ) -> Option<Vec<(Item, Option<Loc>)>> {
        match &foreach.value {
            Foreach::Single(axis) => {
                let values = self.axis(axis, label, empty)?;
                let locs: Vec<Loc> = match axis {
                    Axis::List(items) => items.iter().map(|item| item.loc).collect(),
                    Axis::Text(_) => Vec::new(),
                };
                Some(
                    values
                        .into_iter()
                        .enumerate()
                        .map(|(index, (key, value))| {
                            let item = Item {
                                key,
                                value: Some(value),
                                fields: Vec::new(),
                            };
                            (item, locs.get(index).copied())
                        })
                        .collect(),
                )
            }
            Foreach::Product(axes) => {
                let mut expanded = Vec::with_capacity(axes.len());
                let mut failed = false;
                for (name, axis) in axes {
                    match self.axis(axis, label, empty) {
                        Some(values) => expanded.push((name.value.clone(), values)),
                        None => failed = true,
                    }
                }
                if failed {
                    return None;
                }
                Some(
                    product(&expanded)
                        .into_iter()
                        .map(|(key, fields)| {
                            let item = Item {
                                key,
                                value: None,
                                fields,
                            };
                            (item, None)
                        })
                        .collect(),
                )
            }
        }
    }

    /// One axis's (key, value) pairs.
    fn axis(
        &mut self,
        axis: &Axis,
        label: &str,
        empty: &EmptyRule<'_>,
    ) -> Option<Vec<(String, String)>> {
        let what = format!("in `foreach` of {label}");
        let scope = self.scope(None, None, None);
        match axis {
            Axis::List(items) => {
                let mut values = Vec::with_capacity(items.len());
                for item in items {
                    let mut item = item.clone();
                    self.text(&mut item, &scope, Place::Other, &|| what.clone());
                    values.push((key_of(&item.value), item.value));
                }
                Some(values)
            }
            Axis::Text(text) => {
                let trimmed = text.value.trim();
                let param = trimmed
                    .strip_prefix("${params.")
                    .and_then(|rest| rest.strip_suffix('}'))
                    .filter(|name| self.rendered.contains_key(*name));
                if let Some(name) = param {
                    // A required param without a value is reported once, elsewhere.
                    let value = self.params.get(name)?;
                    let serde_json::Value::Array(items) = value else {
                        let at = self
                            .source
                            .find_after(text.loc, trimmed, 0)
                            .unwrap_or(text.loc);
                        self.push(
                            self.source
                                .error(
                                    "foreach-not-a-list",
                                    at,
                                    format!("`foreach` of {label} uses param `{name}`, which is not a list"),
                                )
                                .with_hint("a fan-out over a param needs a param of `type: list`"),
                        );
                        return None;
                    };
                    return Some(
                        items
                            .iter()
                            .map(|item| {
                                let value = render(item);
                                (key_of(&value), value)
                            })
                            .collect(),
                    );
                }
                let mut pattern = text.clone();
                let before = self.diagnostics.len();
                self.text(&mut pattern, &scope, Place::Other, &|| what.clone());
                if self.diagnostics.len() > before {
                    return None;
                }
                let matched = glob_items(&pattern.value, self.base_dir);
                if let Ok(items) = &matched {
                    (self.reads.globs.borrow_mut()).push((pattern.value.clone(), items.clone()));
                }
                match matched {
                    Ok(items) if items.is_empty() => {
                        self.push(empty_glob(
                            self.source,
                            text.loc,
                            label,
                            &pattern.value,
                            empty,
                        ));
                        Some(Vec::new())
                    }
                    Ok(items) => Some(
                        items
                            .into_iter()
                            .map(|item| (glob_key(&item), item))
                            .collect(),
                    ),
                    Err(message) => {
                        self.push(
                            self.source
                                .error(
                                    "bad-glob",
                                    text.loc,
                                    format!(
                                        "`foreach` of {label} is not a list, a list param or a valid glob: {message}"
                                    ),
                                )
                                .with_hint("write a list as `[a, b]`, a list param as `${params.NAME}`"),
                        );
                        None
                    }
                }
            }
        }
    }
}

/// The diagnostic of a `foreach` glob that matches no file (see [`EmptyRule`]).
fn empty_glob(
    source: &crate::diagnostic::SourceFile<'_>,
    loc: Loc,
    label: &str,
    pattern: &str,
    empty: &EmptyRule<'_>,
) -> crate::diagnostic::Diagnostic {
    let dependents = match empty.dependents {
        [] => "no unit depends on it".to_owned(),
        [one] => format!("its dependent `{one}` runs without it"),
        many => format!(
            "its dependents {} run without it",
            many.iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let check = "check the pattern and that its files exist when the run starts (paths are relative to the config's folder)";
    if empty.allowed {
        // Not an error (a folder may be empty on a quiet day), but never silent.
        source
            .warning(
                "foreach-empty",
                loc,
                format!("`foreach` of {label} matches no file (`{pattern}`): it has no instances, and {dependents}"),
            )
            .with_hint(format!("{check}; write `allow_empty: false` on the unit to make this an error"))
    } else {
        source
            .error(
                "foreach-empty",
                loc,
                format!("`foreach` of {label} matches no file (`{pattern}`), and it says `allow_empty: false`"),
            )
            .with_note(format!("without it the unit would have no instances, and {dependents}"))
            .with_hint(check)
    }
}
