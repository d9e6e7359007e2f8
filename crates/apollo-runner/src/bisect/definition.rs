//! The changes of a unit's definition between two runs: the params it receives, its env, and
//! its command (the rest of its definition). A param whose value is interpolated into the
//! command (`${params.date}`) is one change, not a param change and a command change: applied,
//! the command has BAD's value too.

use std::collections::{BTreeMap, BTreeSet};

use super::changes::{Change, ChangeKind, PathUnit};

/// The params, env and command changes of the units on `path`: a param or variable that
/// changed for several units is one change.
pub(super) fn definition_changes(path: &[PathUnit]) -> Vec<Change> {
    let mut variables: BTreeMap<(bool, String), Change> = BTreeMap::new();
    let mut commands = Vec::new();
    for unit in path {
        let (good, bad) = (&unit.good.unit, &unit.bad.unit);
        let names: BTreeSet<&String> = good.env.keys().chain(bad.env.keys()).collect();
        for name in names {
            let (was, now) = (good.env.get(name).cloned(), bad.env.get(name).cloned());
            if was == now {
                continue;
            }
            let param = name.strip_prefix("APOLLO_PARAM_").is_some();
            let change = (variables.entry((param, name.clone()))).or_insert_with(|| Change {
                kind: if param {
                    ChangeKind::Param {
                        name: param_name(unit, name),
                        variable: name.clone(),
                        good: was,
                        bad: now,
                    }
                } else {
                    ChangeKind::Env {
                        name: name.clone(),
                        good: was,
                        bad: now,
                    }
                },
                units: Vec::new(),
                interpolated: Vec::new(),
            });
            change.units.push(unit.name().to_owned());
        }
        let Some(kind) = command_change(good, bad) else {
            continue;
        };
        // The command differs only by the values of changed params interpolated into it.
        let mut substituted = good.clone();
        let mut params = Vec::new();
        for ((is_param, _), change) in &variables {
            if let (
                true,
                ChangeKind::Param {
                    good: Some(was),
                    bad: Some(now),
                    ..
                },
            ) = (*is_param, &change.kind)
                && !was.is_empty()
                && change.units.iter().any(|name| name == unit.name())
            {
                substitute(&mut substituted, was, now);
                params.push((*is_param, change_variable(&change.kind)));
            }
        }
        if !params.is_empty() && command_change(&substituted, bad).is_none() {
            for key in params {
                if let Some(change) = variables.get_mut(&key) {
                    change.interpolated.push(unit.name().to_owned());
                }
            }
            continue;
        }
        commands.push(Change {
            kind,
            units: vec![unit.name().to_owned()],
            interpolated: Vec::new(),
        });
    }
    // Params first, then env (the map's order: `false` < `true` puts env first).
    let (params, env): (Vec<_>, Vec<_>) =
        (variables.into_iter()).partition(|((param, _), _)| *param);
    (params.into_iter().chain(env))
        .map(|(_, change)| change)
        .chain(commands)
        .collect()
}

/// The variable of a param or env change.
fn change_variable(kind: &ChangeKind) -> String {
    match kind {
        ChangeKind::Param { variable, .. } | ChangeKind::Env { name: variable, .. } => {
            variable.clone()
        }
        _ => String::new(),
    }
}

/// Replaces `from` by `to` in `unit`'s commands (a param's value where it was interpolated).
pub(super) fn substitute(unit: &mut apollo_core::Unit, from: &str, to: &str) {
    let commands = [&mut unit.when_command, &mut unit.prepare, &mut unit.cleanup]
        .into_iter()
        .flatten();
    for command in commands.chain(std::iter::once(&mut unit.execute)) {
        match command {
            apollo_core::Command::Shell(text) => *text = text.replace(from, to),
            apollo_core::Command::Argv(argv) => {
                for argument in argv {
                    *argument = argument.replace(from, to);
                }
            }
        }
    }
}

/// The param whose variable is `variable`, as either run's params name it.
fn param_name(unit: &PathUnit, variable: &str) -> String {
    let names = (unit.good.recorded.params.keys()).chain(unit.bad.recorded.params.keys());
    for name in names {
        let candidate: String = (name.chars())
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        if variable.strip_prefix("APOLLO_PARAM_") == Some(candidate.as_str()) {
            return name.clone();
        }
    }
    variable.to_owned()
}

/// How the two definitions differ but for their env: the command, else the keys.
fn command_change(good: &apollo_core::Unit, bad: &apollo_core::Unit) -> Option<ChangeKind> {
    let without_env = |unit: &apollo_core::Unit| {
        let mut value = serde_json::to_value(unit).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.remove("env");
        }
        value
    };
    let (was, now) = (without_env(good), without_env(bad));
    if was == now {
        return None;
    }
    let show = |unit: &apollo_core::Unit| {
        let commands = [
            &unit.when_command,
            &unit.prepare,
            &Some(unit.execute.clone()),
            &unit.cleanup,
        ];
        (commands.into_iter().flatten())
            .map(apollo_core::Command::display)
            .collect::<Vec<_>>()
            .join(" ; ")
    };
    let (good_shown, bad_shown) = (show(good), show(bad));
    if good_shown != bad_shown {
        return Some(ChangeKind::Command {
            good: good_shown,
            bad: bad_shown,
        });
    }
    let keys: Vec<String> = (was.as_object().into_iter().flatten())
        .filter(|(key, value)| now.get(key.as_str()) != Some(value))
        .map(|(key, _)| key.clone())
        .collect();
    Some(ChangeKind::Command {
        good: format!("definition ({})", keys.join(", ")),
        bad: format!("BAD's {}", keys.join(", ")),
    })
}
