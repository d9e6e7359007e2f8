//! Checks that need the whole pipeline (DESIGN §3): unit names, duplicate names, dependencies
//! on missing units, cycles, and the warnings (retrying a non-idempotent unit, a timeout
//! shorter than its kill grace, two units writing the same output; keys without effect in
//! `no_effect.rs`).
//!
//! Everything is reported at once: a missing dependency does not hide a cycle elsewhere.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::config::duration::format_duration;
use crate::config::schema::{Sp, Spec, UnitSpec};
use crate::dag::Dag;
use crate::diagnostic::{Diagnostic, Loc, SourceFile, closest};

mod no_effect;

/// Built-in default of `kill_grace` when neither the unit nor `defaults:` sets it.
pub(crate) const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(5);
/// Built-in default of `retry_delay`.
pub(crate) const DEFAULT_RETRY_DELAY: Duration = Duration::from_secs(1);

/// How many unknown dependencies get a "did you mean" (each costs a scan of all names).
const MAX_SUGGESTED_DEPS: usize = 50;
/// How many distinct cycles are reported before giving up.
const MAX_CYCLES: usize = 10;

/// The longest unit name, in bytes: a unit name becomes a folder name
/// (`runs/<id>/units/<unit>/`), and common filesystems (ext4, XFS, btrfs, APFS, NTFS) allow at
/// most 255 bytes in one path component.
pub const MAX_UNIT_NAME_BYTES: usize = 255;

/// Whether `name` can be a unit name: `[A-Za-z0-9_.-]+`, at most [`MAX_UNIT_NAME_BYTES`]
/// bytes, not starting with `-` (a folder name that reads as an option to every tool given
/// it), and not `.` or `..`.
pub fn is_valid_unit_name(name: &str) -> bool {
    has_valid_unit_name_chars(name) && !name.starts_with('-') && name.len() <= MAX_UNIT_NAME_BYTES
}

/// The character rule alone: `[A-Za-z0-9_.-]+`, and not `.` or `..`.
fn has_valid_unit_name_chars(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'-'))
}

/// Runs the whole-pipeline checks on a spec that passed the typed walk (possibly with errors
/// in some units: those units are checked as far as they can be).
pub(crate) fn check(spec: &Spec, source: &SourceFile<'_>, base_dir: &Path) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    let index = check_names(spec, source, &mut diagnostics);
    check_dependencies(spec, source, &index, &mut diagnostics);
    check_inputs(spec, source, &mut diagnostics);
    check_warnings(spec, source, base_dir, &mut diagnostics);
    crate::reuse_check::check_reuse(spec, source, &mut diagnostics);
    check_capacity(spec, source, &mut diagnostics);
    no_effect::check_no_effect(spec, source, &mut diagnostics);
    diagnostics
}

/// A local unit that asks for more `cpus` or `memory` than the whole local capacity
/// (`max_cpus`/`max_memory`, else the machine's) could never run: an error (DESIGN §13).
fn check_capacity(spec: &Spec, source: &SourceFile<'_>, diagnostics: &mut Vec<Diagnostic>) {
    use crate::model::ExecutorKind;
    let asks_for_something = |settings: &crate::config::schema::Settings| {
        settings.resources.as_ref().is_some_and(|resources| {
            resources.value.cpus.is_some() || resources.value.memory.is_some()
        })
    };
    if !asks_for_something(&spec.defaults)
        && !(spec.units.iter()).any(|unit| asks_for_something(&unit.settings))
    {
        return;
    }
    let configured = crate::model::Capacity {
        cpus: spec.max_cpus.as_ref().map(|cpus| cpus.value),
        memory: spec.max_memory.as_ref().map(|memory| memory.value),
    };
    let (cpus, memory) = crate::engine::resources::effective_capacity(configured);
    let none = crate::config::schema::ResourcesSpec::default();
    let defaults = spec.defaults.resources.as_ref().map_or(&none, |r| &r.value);
    for (unit_idx, unit) in spec.units.iter().enumerate() {
        let executor = unit
            .settings
            .executor
            .as_ref()
            .or(spec.defaults.executor.as_ref())
            .map_or(ExecutorKind::Local, |executor| executor.value);
        if executor != ExecutorKind::Local {
            continue;
        }
        let resources = unit
            .settings
            .resources
            .as_ref()
            .map_or(&none, |r| &r.value)
            .over(defaults);
        let whose = |configured: bool, what: &str| {
            if configured {
                format!("`max_{what}`")
            } else {
                format!("this machine's {what}")
            }
        };
        if let Some(asked) = &resources.cpus
            && asked.value > cpus
        {
            diagnostics.push(
                source
                    .error(
                        "over-capacity",
                        asked.loc,
                        format!(
                            "{} asks for {} CPUs, more than the local capacity of {cpus} ({})",
                            unit.label(unit_idx),
                            asked.value,
                            whose(spec.max_cpus.is_some(), "cpus")
                        ),
                    )
                    .with_hint(
                        "ask for fewer `cpus`, raise `max_cpus`, or run it with `executor: slurm`",
                    ),
            );
        }
        if let (Some(asked), Some(memory)) = (&resources.memory, memory)
            && asked.value > memory
        {
            diagnostics.push(
                source
                    .error(
                        "over-capacity",
                        asked.loc,
                        format!(
                            "{} asks for {} MiB of memory, more than the local capacity of {} MiB ({})",
                            unit.label(unit_idx),
                            asked.value >> 20,
                            memory >> 20,
                            whose(spec.max_memory.is_some(), "memory")
                        ),
                    )
                    .with_hint("ask for less `memory`, raise `max_memory`, or run it with `executor: slurm`"),
            );
        }
    }
}

/// Name checks; returns the index of the first unit of each valid name.
fn check_names<'s>(
    spec: &'s Spec,
    source: &SourceFile<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> HashMap<&'s str, usize> {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(spec.units.len());
    for (unit_idx, unit) in spec.units.iter().enumerate() {
        let Some(name) = &unit.name else { continue };
        // An instance `load[eu]` is checked by its template's name, once (its keys are safe
        // by construction).
        let checked_name = unit
            .instance
            .as_ref()
            .map_or(name.value.as_str(), |instance| instance.base.as_str());
        let first_instance = unit.instance.is_none()
            || unit_idx == 0
            || spec.units[unit_idx - 1]
                .name
                .as_ref()
                .map(|previous| previous.loc)
                != Some(name.loc);
        if first_instance && let Some(diagnostic) = check_name(checked_name, name.loc, source) {
            diagnostics.push(diagnostic);
        }
        match index.get(name.value.as_str()) {
            Some(&first_idx) => {
                let first_line = spec.units[first_idx]
                    .name
                    .as_ref()
                    .map_or(0, |first| first.loc.line);
                diagnostics.push(
                    source
                        .error(
                            "duplicate-name",
                            name.loc,
                            format!("duplicate unit name `{}`", name.value),
                        )
                        .with_note(format!(
                            "`{}` is first defined at line {first_line}",
                            name.value
                        ))
                        .with_hint("unit names must be unique; rename one of them"),
                );
            }
            None => {
                index.insert(name.value.as_str(), unit_idx);
            }
        }
    }
    index
}

/// The error for an invalid unit name, if it is one. The character rule comes first: a name
/// with a `/` in it is wrong whatever its length.
fn check_name(name: &str, loc: Loc, source: &SourceFile<'_>) -> Option<Diagnostic> {
    if !has_valid_unit_name_chars(name) {
        let mut diagnostic = source
            .error(
                "invalid-name",
                loc,
                format!("`{}` is not a valid unit name", name.escape_debug()),
            )
            .with_hint(
                "a unit name becomes a folder name: use only letters, digits, `_`, `.` and `-`, and not `.` or `..`",
            );
        let suggestion: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if is_valid_unit_name(&suggestion) {
            diagnostic = diagnostic.with_note(format!("for example `{suggestion}`"));
        }
        return Some(diagnostic);
    }
    if name.len() > MAX_UNIT_NAME_BYTES {
        // The name is ASCII here (the character rule held), so any byte index is a boundary.
        let shown = &name[..32];
        return Some(
            source
                .error(
                    "invalid-name",
                    loc,
                    format!(
                        "the unit name `{shown}…` is {} bytes long, more than {MAX_UNIT_NAME_BYTES}",
                        name.len()
                    ),
                )
                .with_hint(format!(
                    "a unit name becomes a folder name, and common filesystems allow at most {MAX_UNIT_NAME_BYTES} bytes in one: shorten it"
                )),
        );
    }
    if name.starts_with('-') {
        let suggestion = format!("_{}", name.trim_start_matches('-'));
        let mut diagnostic = source
            .error(
                "invalid-name",
                loc,
                format!("the unit name `{name}` starts with `-`"),
            )
            .with_hint(
                "a unit name becomes a folder name, which tools would read as an option: start it with a letter, digit, `_` or `.`",
            );
        if is_valid_unit_name(&suggestion) {
            diagnostic = diagnostic.with_note(format!("for example `{suggestion}`"));
        }
        return Some(diagnostic);
    }
    None
}

fn check_dependencies(
    spec: &Spec,
    source: &SourceFile<'_>,
    index: &HashMap<&str, usize>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let n_units = spec.units.len();
    // Edges of the graph, with the place each was written, for the cycle messages.
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); n_units];
    // Where each edge was written, beside it (`deps[a][i]` was written at `dep_locs[a][i]`).
    let mut dep_locs: Vec<Vec<Loc>> = vec![Vec::new(); n_units];
    let mut n_suggested = 0;
    // The deps one unit listed so far: its own list while short, a set once it is long (a
    // unit after a 100,000-item fan-out lists every instance).
    let mut listed: HashSet<usize> = HashSet::new();
    for (unit_idx, unit) in spec.units.iter().enumerate() {
        let label = unit.named(unit_idx);
        let many = unit.deps.len() > 16;
        listed.clear();
        for dep in &unit.deps {
            let Some(&dep_idx) = index.get(dep.value.as_str()) else {
                let mut diagnostic = source.error(
                    "unknown-dependency",
                    dep.loc,
                    format!(
                        "{label} depends on `{}`, which is not a unit of this pipeline",
                        dep.value
                    ),
                );
                if n_suggested < MAX_SUGGESTED_DEPS {
                    n_suggested += 1;
                    if let Some(suggestion) = closest(&dep.value, index.keys().copied()) {
                        diagnostic = diagnostic.with_hint(format!("did you mean `{suggestion}`?"));
                    }
                }
                diagnostics.push(diagnostic);
                continue;
            };
            if dep_idx == unit_idx
                && unit
                    .name
                    .as_ref()
                    .is_some_and(|name| name.value == dep.value)
            {
                diagnostics.push(
                    source
                        .error(
                            "dependency-cycle",
                            dep.loc,
                            format!("dependency cycle: {0} → {0}", dep.value),
                        )
                        .with_hint(format!(
                            "a unit cannot depend on itself; remove `{}` from its `deps`",
                            dep.value
                        )),
                );
                continue;
            }
            let listed_before = if many {
                !listed.insert(dep_idx)
            } else {
                deps[unit_idx].contains(&dep_idx)
            };
            if listed_before {
                diagnostics.push(
                    source
                        .warning(
                            "duplicate-dependency",
                            dep.loc,
                            format!("{label} lists `{}` twice in `deps`", dep.value),
                        )
                        .with_hint("remove the second one"),
                );
                continue;
            }
            dep_locs[unit_idx].push(dep.loc);
            deps[unit_idx].push(dep_idx);
        }
    }
    // Report up to MAX_CYCLES cycles: after each, drop the edge that closed it and look again.
    for _ in 0..MAX_CYCLES {
        let dag = Dag::from_deps(deps.clone());
        let Some(cycle) = dag.find_cycle() else { break };
        diagnostics.push(cycle_diagnostic(spec, source, &cycle, &deps, &dep_locs));
        if let [first, .., closing] = cycle[..cycle.len().saturating_sub(1)]
            && let Some(edge) = deps[closing].iter().position(|&dep_idx| dep_idx == first)
        {
            deps[closing].remove(edge);
            dep_locs[closing].remove(edge);
        } else {
            break;
        }
    }
}

/// The diagnostic for a cycle given as unit indices `[a, b, c, a]` (a depends on b, …).
fn cycle_diagnostic(
    spec: &Spec,
    source: &SourceFile<'_>,
    cycle: &[usize],
    deps: &[Vec<usize>],
    dep_locs: &[Vec<Loc>],
) -> Diagnostic {
    let name = |unit_idx: usize| unit_name(&spec.units[unit_idx]);
    let edge_loc = |from: usize, to: usize| {
        deps[from]
            .iter()
            .position(|&dep_idx| dep_idx == to)
            .map(|edge| dep_locs[from][edge])
    };
    let path: Vec<&str> = cycle.iter().map(|&unit_idx| name(unit_idx)).collect();
    // Point at the dependency that closes the cycle.
    let closing_loc = match cycle {
        [.., from, to] => edge_loc(*from, *to).unwrap_or_default(),
        _ => Loc::default(),
    };
    let mut diagnostic = source
        .error(
            "dependency-cycle",
            closing_loc,
            format!("dependency cycle: {}", path.join(" → ")),
        )
        .with_hint("remove one of these dependencies to break the cycle (`a → b` reads `a` depends on `b`)");
    for pair in cycle.windows(2) {
        let line = edge_loc(pair[0], pair[1]).map_or(0, |loc| loc.line);
        diagnostic = diagnostic.with_note(format!(
            "`{}` depends on `{}` at line {line}",
            name(pair[0]),
            name(pair[1])
        ));
    }
    diagnostic
}

fn unit_name(unit: &UnitSpec) -> &str {
    unit.name.as_ref().map_or("?", |name| name.value.as_str())
}

/// Input patterns must be valid globs, or hashing them would fail at run time.
fn check_inputs(spec: &Spec, source: &SourceFile<'_>, diagnostics: &mut Vec<Diagnostic>) {
    for (unit_idx, unit) in spec.units.iter().enumerate() {
        for input in &unit.inputs {
            if let Err(error) = glob::Pattern::new(&input.value) {
                diagnostics.push(
                    source
                        .error(
                            "bad-glob",
                            input.loc,
                            format!(
                                "input `{}` of {} is not a valid glob pattern: {}",
                                input.value,
                                unit.label(unit_idx),
                                error.msg
                            ),
                        )
                        .with_hint("escape a literal `[`, `]`, `*` or `?` by wrapping it in brackets, e.g. `[[]`"),
                );
            }
        }
    }
}

#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
fn check_warnings(
    spec: &Spec,
    source: &SourceFile<'_>,
    base_dir: &Path,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let defaults = &spec.defaults;
    let mut output_owner: HashMap<PathBuf, (usize, Loc)> = HashMap::new();
    for (unit_idx, unit) in spec.units.iter().enumerate() {
        let label = unit.named(unit_idx);
        let settings = &unit.settings;
        let retries = settings.retries.as_ref().or(defaults.retries.as_ref());
        let idempotent = (settings.idempotent.as_ref()).or(defaults.idempotent.as_ref());
        for given in &unit.acknowledge {
            if !crate::config::schema::ACKNOWLEDGEABLE.contains(&given.value.as_str()) {
                let mut warning = source.warning(
                    "unknown-warning-code",
                    given.loc,
                    format!(
                        "{label} acknowledges `{}`, which is no warning `apollo check` gives about a unit",
                        given.value
                    ),
                );
                warning = match crate::diagnostic::closest(
                    &given.value,
                    crate::config::schema::ACKNOWLEDGEABLE.iter().copied(),
                ) {
                    Some(close) => warning.with_hint(format!("did you mean `{close}`?")),
                    None => warning.with_hint(format!(
                        "the codes a unit can acknowledge: {}",
                        crate::config::schema::ACKNOWLEDGEABLE.join(", ")
                    )),
                };
                diagnostics.push(warning);
            }
        }
        if let (Some(retries), Some(idempotent)) = (retries, idempotent)
            && retries.value > 0
            && !idempotent.value
            && !unit.acknowledges("retry-not-idempotent")
        {
            diagnostics.push(
                source
                    .warning(
                        "retry-not-idempotent",
                        idempotent.loc,
                        format!(
                            "{label} is not idempotent but is retried (`retries: {}`)",
                            retries.value
                        ),
                    )
                    .with_note(format!("`retries` is set at line {}", retries.loc.line))
                    .with_hint(
                        "a retry runs the unit again after a failure that may have left half-done side effects; make it idempotent (undo leftovers in `prepare`) or set `retries: 0`",
                    ),
            );
        }
        let timeout = settings.timeout.as_ref().or(defaults.timeout.as_ref());
        let kill_grace: Option<&Sp<Duration>> = settings
            .kill_grace
            .as_ref()
            .or(defaults.kill_grace.as_ref());
        let kill_grace_value = kill_grace.map_or(DEFAULT_KILL_GRACE, |grace| grace.value);
        if let Some(timeout) = timeout
            && let Some(timeout_value) = timeout.value
            && timeout_value < kill_grace_value
            && !unit.acknowledges("timeout-below-kill-grace")
        {
            let grace_origin = match kill_grace {
                Some(grace) => format!("set at line {}", grace.loc.line),
                None => "the built-in default".to_owned(),
            };
            diagnostics.push(
                source
                    .warning(
                        "timeout-below-kill-grace",
                        timeout.loc,
                        format!(
                            "the timeout of {label} ({}) is shorter than its `kill_grace` ({})",
                            format_duration(timeout_value),
                            format_duration(kill_grace_value)
                        ),
                    )
                    .with_note(format!("`kill_grace` is {grace_origin}"))
                    .with_hint(
                        "after a timeout apollo waits `kill_grace` before SIGKILL, so the grace dominates the limit; make `kill_grace` shorter than `timeout`",
                    ),
            );
        }
        for output in &unit.outputs {
            let key = normalize(&base_dir.join(&output.value));
            match output_owner.get(&key) {
                Some(&(owner_idx, owner_loc)) if owner_idx != unit_idx => {
                    diagnostics.push(
                        source
                            .warning(
                                "shared-output",
                                output.loc,
                                format!(
                                    "`{}` is an output of both {} and {label}",
                                    output.value,
                                    spec.units[owner_idx].label(owner_idx)
                                ),
                            )
                            .with_note(format!(
                                "{} declares it at line {}",
                                spec.units[owner_idx].label(owner_idx),
                                owner_loc.line
                            ))
                            .with_hint(
                                "when two units write the same file the result depends on which ran last; give each output one owner",
                            ),
                    );
                }
                Some(_) => {}
                None => {
                    output_owner.insert(key, (unit_idx, output.loc));
                }
            }
        }
    }
}

/// Removes `.` components and repeated separators (not `..`: that is only safe on real paths).
fn normalize(path: &Path) -> PathBuf {
    path.components()
        .filter(|component| !matches!(component, Component::CurDir))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_names_are_safe_path_components() {
        for good in ["fetch_data", "a", "v1.2-rc", "_", "..."] {
            assert!(is_valid_unit_name(good), "{good}");
        }
        for bad in [
            "", ".", "..", "a/b", "a b", "é", "a\0", "-rf", "--help", "-",
        ] {
            assert!(!is_valid_unit_name(bad), "{bad:?}");
        }
        let longest = "a".repeat(MAX_UNIT_NAME_BYTES);
        assert!(is_valid_unit_name(&longest));
        assert!(!is_valid_unit_name(&format!("{longest}a")));
        assert!(
            is_valid_unit_name("a-"),
            "a `-` after the first byte is fine"
        );
    }

    #[test]
    fn normalize_drops_current_dir_components() {
        assert_eq!(
            normalize(Path::new("/base/./data//x.csv")),
            PathBuf::from("/base/data/x.csv")
        );
    }
}
