//! The step between the typed walk and validation: fan-out units become their instances, and
//! every `${…}` is interpolated (DESIGN §14), so that validation, resolution and everything
//! downstream see plain values — and every diagnostic points at the `${…}` in the source.
//!
//! Interpolated: the pipeline `env` values; each unit's commands, `env` values, `inputs`,
//! `outputs`, `workdir` (its own, or the `defaults:` one when that uses `${…}`, so that
//! `${unit.name}` there means each unit) and `deps`. A `deps` entry naming a fan-out unit
//! means all its instances.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use super::fanout::Instance;
use super::interpolate::{Item, Place, Problem, Scope, interpolate, param_variable};
use super::params::{Params, render};
use super::schema::{Label, Settings, Sp, Spec, UnitSpec};
use super::when::{self, When};
use crate::diagnostic::{Diagnostic, Loc, Severity, SourceFile};
use crate::model::Command;

mod items;
mod names;

/// Expands and interpolates `spec` in place; returns what was wrong, and what it read.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(crate) fn expand(
    spec: &mut Spec,
    params: &Params,
    env: &BTreeMap<String, String>,
    source: &SourceFile<'_>,
    base_dir: &Path,
    check_notes: bool,
) -> (Vec<Diagnostic>, Reads) {
    let rendered: BTreeMap<String, String> = spec
        .params
        .iter()
        .map(|param| {
            let value = params
                .get(&param.name.value)
                .map(render)
                .unwrap_or_default();
            (param.name.value.clone(), value)
        })
        .collect();
    let lists: BTreeMap<String, Vec<String>> = params
        .iter()
        .filter_map(|(name, value)| match value {
            serde_json::Value::Array(items) => {
                Some((name.clone(), items.iter().map(render).collect()))
            }
            _ => None,
        })
        .collect();
    let variables: BTreeMap<String, String> = rendered
        .keys()
        .map(|name| (param_variable(name), name.clone()))
        .collect();
    let reads = Reads::default();
    let mut expander = Expander {
        source,
        params,
        rendered: &rendered,
        lists: &lists,
        variables: &variables,
        check_notes,
        env,
        base_dir,
        diagnostics: Vec::new(),
        reads: &reads,
        reported: HashSet::new(),
    };
    let pipeline_scope = expander.scope(None, None, None);
    let mut pipeline_env = std::mem::take(&mut spec.env);
    for (name, value) in &pipeline_env {
        expander.reserved_variable(name, value.loc);
    }
    for (name, value) in &mut pipeline_env {
        expander.text(value, &pipeline_scope, Place::Other, &|| {
            format!("`{name}` in the pipeline `env`")
        });
    }
    spec.env = pipeline_env;

    // Fan-out name → its instances' names, and where the fan-out is defined.
    let mut fanouts: HashMap<String, (Vec<String>, Loc)> = HashMap::new();
    if spec.units.iter().all(|unit| unit.foreach.is_none()) {
        // No fan-out: every unit is expanded where it is (a second list of 100,000 units
        // would double the memory loading takes).
        for (position, unit) in spec.units.iter_mut().enumerate() {
            expander.plain_unit(unit, position, &spec.defaults);
        }
        expander.resolve_deps(&mut spec.units, &fanouts);
        expander.check_folders(&spec.units, &fanouts);
        return (expander.diagnostics, reads);
    }
    let units = std::mem::take(&mut spec.units);
    let dependents = items::dependents_of_fanouts(&units);
    let mut expanded: Vec<UnitSpec> = Vec::with_capacity(units.len());
    for (position, mut unit) in units.into_iter().enumerate() {
        let (Some(foreach), Some(name)) = (unit.foreach.take(), unit.name.clone()) else {
            expander.plain_unit(&mut unit, position, &spec.defaults);
            expanded.push(unit);
            continue;
        };
        let template_label = unit.label(position);
        if expander.second_fanout(&name, position, &fanouts) {
            continue;
        }
        let empty = items::EmptyRule::of(&unit, &name.value, &dependents);
        let Some(items) = expander.items(&foreach, &template_label, &empty) else {
            continue;
        };
        let mut names = Vec::with_capacity(items.len());
        let mut keys: HashMap<String, usize> = HashMap::with_capacity(items.len());
        for (index, (item, item_loc)) in items.into_iter().enumerate() {
            if let Some(&first) = keys.get(&item.key) {
                expander.push(
                    source
                        .error(
                            "fanout-collision",
                            item_loc.unwrap_or(foreach.loc),
                            format!(
                                "two items of the `foreach` of {template_label} make the same instance `{}[{}]`",
                                name.value, item.key
                            ),
                        )
                        .with_note(format!("items #{} and #{} have the key `{}`", first + 1, index + 1, item.key))
                        .with_hint("each item must give a different key: remove the repeated item, or make the items differ"),
                );
                continue;
            }
            keys.insert(item.key.clone(), index);
            let instance_name = format!("{}[{}]", name.value, item.key);
            let mut instance = unit.clone();
            instance.name = Some(Sp {
                value: instance_name.clone(),
                loc: name.loc,
            });
            expander.unit(
                &mut instance,
                Some(&instance_name),
                Some(&item),
                &spec.defaults,
                &template_label,
            );
            instance.instance = Some(Box::new(Instance {
                base: name.value.clone(),
            }));
            names.push(instance_name);
            expanded.push(instance);
        }
        fanouts.insert(name.value.clone(), (names, name.loc));
    }

    expander.resolve_deps(&mut expanded, &fanouts);
    expander.check_folders(&expanded, &fanouts);
    spec.units = expanded;
    (expander.diagnostics, reads)
}

/// What an expansion read besides the config: env variables looked up, each glob's matches.
#[derive(Default)]
pub(crate) struct Reads {
    pub(crate) env: std::cell::RefCell<std::collections::BTreeSet<String>>,
    pub(crate) globs: std::cell::RefCell<Vec<(String, Vec<String>)>>,
}

/// The params whose variable `APOLLO_PARAM_<NAME>` a command names (`"$APOLLO_PARAM_DAY"`):
/// the unit receives them as if it referred to them with `${params.…}`.
fn params_named_in(command: &Command, variables: &BTreeMap<String, String>) -> Vec<String> {
    let texts: Vec<&str> = match command {
        Command::Shell(script) => vec![script.as_str()],
        Command::Argv(argv) => argv.iter().map(String::as_str).collect(),
    };
    let mut named = Vec::new();
    for text in texts {
        for (at, _) in text.match_indices("APOLLO_PARAM_") {
            let end = text[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(text.len(), |offset| at + offset);
            if let Some(param) = variables.get(&text[at..end]) {
                named.push(param.clone());
            }
        }
    }
    named
}

struct Expander<'e, 's> {
    source: &'e SourceFile<'s>,
    params: &'e Params,
    rendered: &'e BTreeMap<String, String>,
    /// The items of each list param.
    lists: &'e BTreeMap<String, Vec<String>>,
    /// Each param's variable (`APOLLO_PARAM_DAY`) → its name.
    variables: &'e BTreeMap<String, String>,
    /// Whether to add the warnings only `apollo check` shows.
    check_notes: bool,
    env: &'e BTreeMap<String, String>,
    base_dir: &'e Path,
    diagnostics: Vec<Diagnostic>,
    /// What was read besides the text (environment variables, globs).
    reads: &'e Reads,
    /// (line, column, message) of what was reported: the instances of one template share its
    /// places, and a typo in it is reported once.
    reported: HashSet<(Option<u32>, Option<u32>, String)>,
}

impl<'e> Expander<'e, '_> {
    fn scope<'x>(
        &self,
        unit: Option<&'x str>,
        item: Option<&'x Item>,
        param_reads: Option<&'x RefCell<BTreeSet<String>>>,
    ) -> Scope<'x>
    where
        'e: 'x,
    {
        Scope {
            params: self.rendered,
            lists: self.lists,
            param_reads,
            check_notes: self.check_notes,
            env: self.env,
            env_reads: Some(&self.reads.env),
            unit,
            item,
        }
    }

    fn push(&mut self, diagnostic: Diagnostic) {
        let key = (
            diagnostic.line,
            diagnostic.column,
            diagnostic.message.clone(),
        );
        if self.reported.insert(key) {
            self.diagnostics.push(diagnostic);
        }
    }

    /// Expands a unit without `foreach` in place.
    fn plain_unit(&mut self, unit: &mut UnitSpec, position: usize, defaults: &Settings) {
        let name = unit.name.as_ref().map(|name| name.value.clone());
        let label = Label::new(name.as_deref(), position);
        self.unit(unit, name.as_deref(), None, defaults, &label);
    }

    /// `what` says where, for the message; it is built only when there is a problem.
    fn report(&mut self, loc: Loc, problems: Vec<Problem>, what: &dyn Fn() -> String) {
        if problems.is_empty() {
            return;
        }
        let what = what();
        for problem in problems {
            let at = self
                .source
                .find_after(loc, &problem.token, problem.occurrence)
                .unwrap_or(loc);
            let mut diagnostic = match problem.severity {
                Severity::Error => {
                    self.source
                        .error(problem.code, at, format!("{} ({what})", problem.message))
                }
                Severity::Warning => {
                    self.source
                        .warning(problem.code, at, format!("{} ({what})", problem.message))
                }
            };
            if let Some(hint) = problem.hint {
                diagnostic = diagnostic.with_hint(hint);
            }
            self.push(diagnostic);
        }
    }

    /// Interpolates one located string in place.
    fn text(
        &mut self,
        text: &mut Sp<String>,
        scope: &Scope<'_>,
        place: Place,
        what: &dyn Fn() -> String,
    ) {
        if !text.value.contains('$') {
            return;
        }
        let (value, problems) = interpolate(&text.value, scope, place);
        if !problems.is_empty() {
            self.report(text.loc, problems, what);
        }
        text.value = value.into_owned();
    }

    fn command(&mut self, command: &mut Sp<Command>, scope: &Scope<'_>, what: &dyn Fn() -> String) {
        let loc = command.loc;
        match &mut command.value {
            Command::Shell(script) => {
                if !script.contains('$') {
                    return;
                }
                let (value, problems) = interpolate(script, scope, Place::Shell);
                let value = value.into_owned();
                self.report(loc, problems, what);
                *script = value;
            }
            Command::Argv(argv) => {
                // Occurrences count across the elements: they are searched for from the
                // start of the list.
                let mut seen: HashMap<String, usize> = HashMap::new();
                for arg in argv.iter_mut() {
                    if !arg.contains('$') {
                        continue;
                    }
                    let (value, mut problems) = interpolate(arg, scope, Place::Other);
                    let value = value.into_owned();
                    for problem in &mut problems {
                        let count = seen.entry(problem.token.clone()).or_default();
                        if problem.occurrence == 0 {
                            problem.occurrence = *count;
                        } else {
                            problem.occurrence += *count;
                        }
                    }
                    for problem in &problems {
                        *seen.entry(problem.token.clone()).or_default() += 1;
                    }
                    self.report(loc, problems, what);
                    *arg = value;
                }
            }
        }
    }

    /// Interpolates a unit's strings with `name` and `item` in scope.
    fn unit(
        &mut self,
        unit: &mut UnitSpec,
        name: Option<&str>,
        item: Option<&Item>,
        defaults: &Settings,
        label: &dyn std::fmt::Display,
    ) {
        let param_reads = RefCell::new(BTreeSet::new());
        let scope = self.scope(name, item, Some(&param_reads));
        let in_unit = |key: &str| format!("in `{key}` of {label}");
        for (key, command) in [
            ("prepare", &mut unit.prepare),
            ("execute", &mut unit.execute),
            ("cleanup", &mut unit.cleanup),
        ] {
            if let Some(command) = command {
                self.command(command, &scope, &|| in_unit(key));
            }
        }
        for input in &mut unit.inputs {
            self.text(input, &scope, Place::Other, &|| in_unit("inputs"));
        }
        for output in &mut unit.outputs {
            self.text(output, &scope, Place::Other, &|| in_unit("outputs"));
        }
        for (variable, value) in &mut unit.env {
            self.text(value, &scope, Place::Other, &|| {
                format!("`{variable}` in the `env` of {label}")
            });
        }
        if unit.settings.workdir.is_none()
            && let Some(workdir) = &defaults.workdir
            && workdir.value.contains('$')
        {
            unit.settings.make_mut().workdir = Some(workdir.clone());
        }
        if let Some(workdir) = unit.settings.workdir_mut() {
            self.text(workdir, &scope, Place::Other, &|| in_unit("workdir"));
        }
        for dep in &mut unit.deps {
            self.text(dep, &scope, Place::Other, &|| in_unit("deps"));
        }
        if let Some(condition) = unit.when.take() {
            self.condition(unit, *condition, &scope, label);
        }
        self.param_variables(unit, param_reads.into_inner());
    }

    /// Gives `unit` `APOLLO_PARAM_<NAME>` for each param it refers to (`read`: in a `${…}`,
    /// and those whose variable its commands name), unless its `env` sets the variable itself.
    /// (Not for the list param a `foreach` takes its items from: each instance has its item,
    /// and 100,000 instances would each hold the whole list.) (Not part of its input hash unless a command names the variable:
    /// see [`crate::hash`].)
    fn param_variables(&mut self, unit: &mut UnitSpec, read: BTreeSet<String>) {
        for (variable, value) in &unit.env {
            self.reserved_variable(variable, value.loc);
        }
        if self.rendered.is_empty() {
            return;
        }
        let mut referred = read;
        for command in [&unit.prepare, &unit.execute, &unit.cleanup]
            .into_iter()
            .flatten()
            .chain(when::command(unit.when.as_deref()))
        {
            referred.extend(params_named_in(&command.value, self.variables));
        }
        for name in referred {
            let Some(value) = self.rendered.get(&name) else {
                continue;
            };
            unit.env.entry(param_variable(&name)).or_insert_with(|| Sp {
                value: value.clone(),
                loc: Loc::default(),
            });
        }
    }

    /// `APOLLO_PARAM_…` is apollo's to set: an `env` entry of that name is an error.
    fn reserved_variable(&mut self, variable: &str, loc: Loc) {
        if variable.starts_with("APOLLO_PARAM_") {
            self.push(
                self.source
                    .error(
                        "reserved-variable",
                        loc,
                        format!("`{variable}` in `env` is set by apollo from the params"),
                    )
                    .with_hint("a unit receives `APOLLO_PARAM_<NAME>` for each param it uses; name your variable differently"),
            );
        }
    }

    /// Applies a `when:` (see `when.rs`): a false expression makes apollo skip the unit, a
    /// command becomes the unit's condition, run at the start of each attempt.
    fn condition(
        &mut self,
        unit: &mut UnitSpec,
        condition: When,
        scope: &Scope<'_>,
        label: &dyn std::fmt::Display,
    ) {
        match condition {
            When::Expression(expression) => {
                let (left, operator, right) = when::split(&expression.value);
                let mut sides = Vec::with_capacity(2);
                let before = self.diagnostics.len();
                for side in [left, right] {
                    let (value, problems) = interpolate(side, scope, Place::Other);
                    let value = value.into_owned();
                    self.report(expression.loc, problems, &|| {
                        format!("in `when` of {label}")
                    });
                    sides.push(value);
                }
                if self.diagnostics.len() > before {
                    return;
                }
                match when::evaluate(&sides[0], operator, &sides[1]) {
                    Ok(true) => {}
                    Ok(false) => {
                        let shown = match operator {
                            Some(operator) => format!("{}{operator}{}", sides[0], sides[1]),
                            None => sides[0].clone(),
                        };
                        let shown = if shown.trim() == expression.value.trim() {
                            expression.value.trim().to_owned()
                        } else {
                            format!("{} ({})", expression.value.trim(), shown.trim())
                        };
                        // Nothing of it runs, so nothing of it is hashed or checked: its
                        // commands stay as written (shown and recorded as the user's).
                        unit.inputs.clear();
                        unit.outputs.clear();
                        unit.skip_when = Some(shown);
                    }
                    Err(message) => self.push(
                        self.source
                            .error("bad-condition", expression.loc, format!("{message} (`when` of {label})"))
                            .with_hint("write `when: ${params.NAME} == \"value\"`, `!=`, or a param of type `bool`"),
                    ),
                }
            }
            When::Command(mut command) => {
                self.command(&mut command, scope, &|| format!("in `when` of {label}"));
                if let Some(prepare) = &unit.prepare {
                    self.push(
                        self.source
                            .error(
                                "bad-condition",
                                command.loc,
                                format!("{label} has both `prepare` and `when: {{command}}`"),
                            )
                            .with_note(format!("`prepare` is at line {}", prepare.loc.line))
                            .with_hint("the condition runs at the start of `execute`, after `prepare`: move the preparation into `execute`, or decide with an expression over params"),
                    );
                    return;
                }
                unit.when = Some(Box::new(When::Command(command)));
            }
        }
    }

    /// `deps: [fanout]` → every instance; `deps: ["fanout[key]"]` must name one that exists.
    fn resolve_deps(
        &mut self,
        units: &mut [UnitSpec],
        fanouts: &HashMap<String, (Vec<String>, Loc)>,
    ) {
        if fanouts.is_empty() {
            return;
        }
        // Each fan-out's instances as a set: `name[key]` deps of 100,000 instances are each
        // looked up, not searched for in a list.
        let instance_sets: HashMap<&str, HashSet<&str>> = fanouts
            .iter()
            .map(|(base, (instances, _))| {
                (
                    base.as_str(),
                    instances.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        for unit in units.iter_mut() {
            let label = || {
                unit.name.as_ref().map_or_else(
                    || "a unit".to_owned(),
                    |name| format!("unit `{}`", name.value),
                )
            };
            let deps = std::mem::take(&mut unit.deps);
            let mut resolved = Vec::with_capacity(deps.len());
            for dep in deps {
                if let Some((instances, _)) = fanouts.get(&dep.value) {
                    resolved.extend(instances.iter().map(|name| Sp {
                        value: name.clone(),
                        loc: dep.loc,
                    }));
                    continue;
                }
                if let Some((base, _)) = dep.value.split_once('[')
                    && let Some(instances) = instance_sets.get(base)
                    && !instances.contains(dep.value.as_str())
                {
                    // The instances in their order, for the message.
                    let instances = fanouts
                        .get(base)
                        .map_or(&[][..], |(instances, _)| instances.as_slice());
                    let mut diagnostic = self.source.error(
                        "unknown-dependency",
                        dep.loc,
                        format!(
                            "{} depends on `{}`, which is not an instance of `{base}`",
                            label(),
                            dep.value
                        ),
                    );
                    if let Some(suggestion) =
                        crate::diagnostic::closest(&dep.value, instances.iter().map(String::as_str))
                    {
                        diagnostic = diagnostic.with_hint(format!("did you mean `{suggestion}`?"));
                    }
                    let shown: Vec<&str> = instances.iter().take(10).map(String::as_str).collect();
                    diagnostic = diagnostic.with_note(format!(
                        "`{base}` has {} instance(s): {}{}",
                        instances.len(),
                        shown.join(", "),
                        if instances.len() > shown.len() {
                            ", …"
                        } else {
                            ""
                        }
                    ));
                    self.push(diagnostic);
                    continue;
                }
                resolved.push(dep);
            }
            unit.deps = resolved;
        }
    }
}
