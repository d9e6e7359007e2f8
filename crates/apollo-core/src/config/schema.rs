//! The typed walk: a YAML node tree → a [`Spec`] (the config as written, with places), plus a
//! diagnostic for every unknown key, duplicate key, wrong type and bad value — all of them,
//! not just the first.

use std::collections::BTreeMap;
use std::time::Duration;

use super::describe;
use super::duration::{DurationError, parse_duration};
use super::raw::{Node, Value};
use crate::diagnostic::{Diagnostic, Loc, SourceFile, closest};
use crate::model::Command;

mod cost;
mod deadline;
mod durability;
mod included;
mod limits;
mod resources;
mod retry;
#[cfg(test)]
mod walked_tests;

pub(crate) use cost::json_schema as cost_json_schema;
pub(crate) use resources::ResourcesSpec;
pub(crate) use resources::json_schema as resources_json_schema;
use resources::quoted_list;

/// Keys allowed at the top level (from the format's description, `describe.rs`).
pub(crate) const TOP_LEVEL_KEYS: &[&str] = &describe::names(&describe::TOP_LEVEL);
/// Keys allowed in `defaults:`.
pub(crate) const DEFAULTS_KEYS: &[&str] = &describe::names(&describe::DEFAULTS);
/// Keys allowed in a unit.
pub(crate) const UNIT_KEYS: &[&str] = &describe::names(&describe::UNIT);
/// Keys allowed in a hook written as a mapping (`on_failure: {execute: ..., timeout: 30s}`).
pub(crate) const HOOK_KEYS: &[&str] = &["execute", "timeout"];

const DURATION_HELP: &str =
    "a duration is a whole number of seconds or a string like `500ms`, `45s`, `2m`, `1h30m`";

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sp<T> {
    pub(crate) value: T,
    pub(crate) loc: Loc,
}

/// The config as written: optional fields stay optional, each value keeps its place.
#[derive(Debug, Default)]
pub(crate) struct Spec {
    pub(crate) name: Option<Sp<String>>,
    /// `id:`: the pipeline's identity in its state directory, instead of its name and path.
    pub(crate) id: Option<Sp<String>>,
    pub(crate) defaults: Settings,
    pub(crate) max_parallel: Option<Sp<usize>>,
    pub(crate) env: BTreeMap<String, Sp<String>>,
    pub(crate) units: Vec<UnitSpec>,
    /// `on_failure`, `on_success`, `on_finish`, `on_late`: the command and its own timeout, if set.
    pub(crate) hooks: Vec<(crate::model::HookWhen, Sp<Command>, Option<Duration>)>,
    /// `params:`, in file order.
    pub(crate) params: Vec<super::params::ParamSpec>,
    /// `max_cpus:` and `max_memory:` (bytes): the local executor's capacity.
    pub(crate) max_cpus: Option<Sp<u32>>,
    pub(crate) max_memory: Option<Sp<u64>>,
    /// `max_jobs:`: Slurm jobs in flight at once.
    pub(crate) max_jobs: Option<Sp<u32>>,
    /// `blob_store_max:`: `Some(None)` is an explicit `none`, no limit.
    pub(crate) blob_store_max: Option<Sp<Option<u64>>>,
    /// `secrets:`: each secret's name and source, in file order (see `secrets.rs`).
    pub(crate) secrets: Vec<(Sp<String>, Sp<super::secrets::SourceSpec>)>,
    /// `durability:` (`fsync` or `batched`) and `sync_interval:`.
    pub(crate) durability: Option<Sp<crate::journal::Durability>>,
    pub(crate) sync_interval: Option<Sp<Duration>>,
    /// `cost:`: the price table (issue 40).
    pub(crate) cost: Option<Sp<crate::cost::CostTable>>,
    /// `journal_segment_size:`: where the run's journal starts a new segment.
    pub(crate) journal_segment_size: Option<Sp<u64>>,
    pub(crate) deadline: Option<Sp<crate::deadline::Deadline>>,
}

/// The settings a unit can inherit from `defaults:`.
#[derive(Debug, Default, Clone)]
pub(crate) struct Settings {
    /// `Some(None)` is an explicit `timeout: none` (no limit, overriding `defaults`).
    pub(crate) timeout: Option<Sp<Option<Duration>>>,
    pub(crate) retries: Option<Sp<u32>>,
    pub(crate) retry_delay: Option<Sp<Duration>>,
    pub(crate) kill_grace: Option<Sp<Duration>>,
    pub(crate) idempotent: Option<Sp<bool>>,
    pub(crate) workdir: Option<Sp<String>>,
    pub(crate) capture: Option<Sp<crate::capture::CaptureMode>>,
    pub(crate) capture_max_file: Option<Sp<u64>>,
    /// `reuse:`: whether a new run may take this unit's result from an earlier run.
    pub(crate) reuse: Option<Sp<bool>>,
    pub(crate) executor: Option<Sp<crate::model::ExecutorKind>>,
    pub(crate) resources: Option<Sp<ResourcesSpec>>,
    /// `log_limit:`; `Some(None)` is an explicit `none`.
    pub(crate) log_limit: Option<Sp<Option<u64>>>,
    /// `retry_on_exit:`, `retry_max_delay:` and `cleanup_timeout:` (see `schema/retry.rs`).
    pub(crate) retry_on_exit: Option<Sp<Vec<i32>>>,
    pub(crate) retry_max_delay: Option<Sp<Duration>>,
    pub(crate) cleanup_timeout: Option<Sp<Duration>>,
}

/// A unit's own settings: most units set none, so an unset block takes one word, not the
/// 470 bytes of [`Settings`] (100,000 units load in half the memory). Reads see an empty
/// [`Settings`] through `Deref`; [`UnitSettings::make_mut`] allocates it when a key is set.
#[derive(Debug, Default, Clone)]
pub(crate) struct UnitSettings(Option<Box<Settings>>);

/// What an unset [`UnitSettings`] reads as.
static NO_SETTINGS: Settings = Settings {
    timeout: None,
    retries: None,
    retry_delay: None,
    kill_grace: None,
    idempotent: None,
    workdir: None,
    capture: None,
    capture_max_file: None,
    reuse: None,
    executor: None,
    resources: None,
    log_limit: None,
    retry_on_exit: None,
    retry_max_delay: None,
    cleanup_timeout: None,
};

impl UnitSettings {
    /// The settings, to be written: allocated on first use.
    pub(crate) fn make_mut(&mut self) -> &mut Settings {
        self.0.get_or_insert_with(Box::default)
    }

    /// The unit's own `workdir`, to be rewritten in place (allocates nothing when unset).
    pub(crate) fn workdir_mut(&mut self) -> Option<&mut Sp<String>> {
        self.0.as_mut()?.workdir.as_mut()
    }
}

impl std::ops::Deref for UnitSettings {
    type Target = Settings;

    fn deref(&self) -> &Settings {
        self.0.as_deref().unwrap_or(&NO_SETTINGS)
    }
}

/// One unit as written.
#[derive(Debug, Clone)]
pub(crate) struct UnitSpec {
    pub(crate) name: Option<Sp<String>>,
    pub(crate) deps: Vec<Sp<String>>,
    pub(crate) settings: UnitSettings,
    pub(crate) prepare: Option<Sp<Command>>,
    pub(crate) execute: Option<Sp<Command>>,
    pub(crate) cleanup: Option<Sp<Command>>,
    pub(crate) inputs: Vec<Sp<String>>,
    pub(crate) outputs: Vec<Sp<String>>,
    pub(crate) env: BTreeMap<String, Sp<String>>,
    /// `foreach:`: the unit is a template for instances `name[key]` (expanded in `expand.rs`).
    /// Boxed, as the two below: few units have one, and every unit pays for the space.
    pub(crate) foreach: Option<Box<Sp<super::fanout::Foreach>>>,
    /// `allow_empty: false`: a `foreach` glob that matches no file is an error, not a warning.
    pub(crate) allow_empty: Option<Sp<bool>>,
    /// `when:`: the condition under which the unit runs (applied in `expand.rs`).
    pub(crate) when: Option<Box<super::when::When>>,
    /// The instance key (`eu`, `eu,a`) once expanded from a `foreach` unit.
    pub(crate) instance: Option<Box<super::fanout::Instance>>,
    /// `acknowledge:`: codes of `check` warnings about this unit that its author has seen and
    /// accepts (`[retry-not-idempotent]`); they are not reported for it.
    pub(crate) acknowledge: Vec<Sp<String>>,
    /// `secrets:`: the names of the pipeline's secrets the unit receives.
    pub(crate) secrets: Vec<Sp<String>>,
    /// A `when:` expression found false at load (set in `expand.rs`): the unit is skipped.
    pub(crate) skip_when: Option<String>,
    pub(crate) deadline: Option<Sp<crate::deadline::Deadline>>,
}

/// The codes of `check` warnings about one unit that `acknowledge:` may name.
pub(crate) const ACKNOWLEDGEABLE: &[&str] = &[
    "retry-not-idempotent",
    "reuse-not-idempotent",
    "timeout-below-kill-grace",
];

impl UnitSpec {
    /// Whether the unit's `acknowledge:` names the warning `code`.
    pub(crate) fn acknowledges(&self, code: &str) -> bool {
        self.acknowledge.iter().any(|given| given.value == code)
    }

    /// How messages name this unit: by name, or by position when it has none.
    pub(crate) fn label(&self, position: usize) -> String {
        self.named(position).to_string()
    }

    /// [`label`](Self::label), written only if a message is: checking 100,000 units that
    /// have nothing to report builds none of their labels.
    pub(crate) fn named(&self, position: usize) -> Label<'_> {
        Label::new(self.name.as_ref().map(|name| name.value.as_str()), position)
    }
}

/// A unit as messages name it (see [`UnitSpec::named`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Label<'u> {
    name: Option<&'u str>,
    position: usize,
}

impl<'u> Label<'u> {
    /// The label of the unit at `position` (0-based) named `name`.
    pub(crate) fn new(name: Option<&'u str>, position: usize) -> Self {
        Self { name, position }
    }
}

impl std::fmt::Display for Label<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name {
            Some(name) => write!(f, "unit `{name}`"),
            None => write!(f, "unit #{}", self.position + 1),
        }
    }
}

/// Walks `root`, returning the spec and the diagnostics found on the way.
/// The units' nodes are taken out of `root` and freed as they are walked (the tree of 100,000
/// units need not be held beside their specs).
pub(crate) fn walk(root: &mut Node, source: &SourceFile<'_>) -> (Spec, Vec<Diagnostic>) {
    let mut walker = Walker {
        source,
        diagnostics: Vec::new(),
        included: false,
    };
    let spec = walker.top_level(root);
    (spec, walker.diagnostics)
}

/// The units of the top-level `units` list, walked as the parser handed them over
/// ([`raw::parse_streaming_units`](super::raw::parse_streaming_units)), with what their walk
/// found.
#[derive(Debug, Default)]
pub(crate) struct WalkedUnits {
    /// How many items the list had (units that could not be read are not in `units`).
    pub(crate) items: usize,
    pub(crate) units: Vec<UnitSpec>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// The line of the list's first item, for [`Self::reserve_for_the_rest`].
    first_line: Option<u32>,
}

/// After how many items the walk estimates the list's length.
const ESTIMATE_AFTER: usize = 256;

impl WalkedUnits {
    /// Walks `node`, the next item of the list.
    pub(crate) fn walk(&mut self, node: &Node, source: &SourceFile<'_>) {
        if node.loc.file == 0 {
            let first_line = *self.first_line.get_or_insert(node.loc.line);
            if self.items == ESTIMATE_AFTER {
                self.reserve_for_the_rest(first_line, node.loc.line, source.line_count());
            }
        }
        let mut walker = Walker {
            source,
            diagnostics: std::mem::take(&mut self.diagnostics),
            included: false,
        };
        self.units.extend(walker.unit(node, self.items));
        self.items += 1;
        self.diagnostics = walker.diagnostics;
    }

    /// Reserves room for the items still to come, estimated from the lines the first ones
    /// took: a `Vec` of 100,000 specs grown by doubling copied each spec about twice and
    /// touched twice the memory (a tenth of `apollo check`'s time). Only the capacity depends
    /// on the estimate; an estimate too low grows as before, and it is bounded by the lines
    /// left (an item takes at least one).
    fn reserve_for_the_rest(&mut self, first_line: u32, line: u32, lines: usize) {
        let (first, now) = (first_line as usize, line as usize);
        if now <= first || lines <= now {
            return;
        }
        let rest = (lines - now).saturating_mul(self.items) / (now - first);
        let rest = (rest + rest / 16).min(lines - now);
        self.units.reserve(rest);
    }
}

/// [`walk`] of a tree whose `units` list was handed over to `walked` while it was parsed.
pub(crate) fn walk_streamed(
    root: &mut Node,
    source: &SourceFile<'_>,
    walked: WalkedUnits,
) -> (Spec, Vec<Diagnostic>) {
    let mut walker = Walker {
        source,
        diagnostics: Vec::new(),
        included: false,
    };
    let spec = walker.top_level_with(root, Some(walked));
    (spec, walker.diagnostics)
}

/// Like [`walk`], for an included file: it need not have `units`, and may not set what only
/// the main file sets (`name`, `id`, `max_parallel`).
pub(crate) fn walk_included(root: &mut Node, source: &SourceFile<'_>) -> (Spec, Vec<Diagnostic>) {
    let mut walker = Walker {
        source,
        diagnostics: Vec::new(),
        included: true,
    };
    let spec = walker.top_level(root);
    (spec, walker.diagnostics)
}

pub(super) struct Walker<'s, 'a> {
    pub(super) source: &'s SourceFile<'a>,
    pub(super) diagnostics: Vec<Diagnostic>,
    /// Walking an included file (see [`walk_included`]).
    pub(super) included: bool,
}

impl Walker<'_, '_> {
    pub(super) fn error(
        &mut self,
        code: &'static str,
        loc: Loc,
        message: String,
    ) -> &mut Diagnostic {
        self.diagnostics.push(self.source.error(code, loc, message));
        let last = self.diagnostics.len() - 1;
        &mut self.diagnostics[last]
    }

    pub(super) fn wrong_type(
        &mut self,
        node: &Node,
        what: &str,
        expected: &str,
    ) -> &mut Diagnostic {
        self.error(
            "wrong-type",
            node.loc,
            format!("{what} must be {expected}, found {}", node.value.kind()),
        )
    }

    fn top_level(&mut self, root: &mut Node) -> Spec {
        self.top_level_with(root, None)
    }

    /// `walked`: the `units` list's items, walked already (the list in `root` is empty).
    fn top_level_with(&mut self, root: &mut Node, walked: Option<WalkedUnits>) -> Spec {
        let mut spec = Spec::default();
        let Value::Map(map) = &root.value else {
            self.wrong_type(root, "the top level of a pipeline", "a mapping")
                .hint("a pipeline starts with keys such as `name:` and `units:`");
            return spec;
        };
        // Where `units:` is among the top level's pairs (taken out mutably once the other
        // keys are read).
        let mut units_at = None;
        let (entries, suggested) =
            self.entries(root, "at the top level", TOP_LEVEL_KEYS, UNIT_KEYS);
        let has_include = entries.iter().any(|(key, _)| *key == "include");
        for (key, value) in entries {
            if self.included && self.main_file_only(key, value) {
                continue;
            }
            match key {
                "name" => spec.name = self.non_empty_string(value, "the pipeline `name`"),
                "id" => spec.id = self.non_empty_string(value, "the pipeline `id`"),
                "defaults" => spec.defaults = self.defaults(value),
                "max_parallel" => spec.max_parallel = self.max_parallel(value),
                "env" => spec.env = self.env(value, "the pipeline `env`"),
                "units" => {
                    units_at = map.iter().position(|(_, node)| std::ptr::eq(node, value));
                }
                "on_failure" | "on_success" | "on_finish" | "on_late" => {
                    let when = match key {
                        "on_failure" => crate::model::HookWhen::OnFailure,
                        "on_success" => crate::model::HookWhen::OnSuccess,
                        "on_late" => crate::model::HookWhen::OnLate,
                        _ => crate::model::HookWhen::OnFinish,
                    };
                    if let Some((command, timeout)) = self.hook(value, key) {
                        spec.hooks.push((when, command, timeout));
                    }
                }
                "params" => spec.params = self.params(value),
                // Followed by `include.rs` before the walk; here only its shape is checked.
                "include" if !matches!(value.value, Value::Str(_)) => {
                    self.string_list(value, "`include`");
                }
                "max_cpus" => spec.max_cpus = self.count(value, "`max_cpus`"),
                "max_memory" => spec.max_memory = self.memory(value, "`max_memory`"),
                "max_jobs" => spec.max_jobs = self.count(value, "`max_jobs`"),
                "blob_store_max" => spec.blob_store_max = self.size_limit(value, key),
                "secrets" => spec.secrets = self.secrets(value),
                "durability" => spec.durability = self.durability(value),
                "cost" => spec.cost = self.cost(value),
                "journal_segment_size" => spec.journal_segment_size = self.segment_size(value),
                "deadline" => spec.deadline = self.deadline(value, "the pipeline's `deadline`"),
                "sync_interval" => {
                    spec.sync_interval = self.duration(value, key, "at the top level");
                }
                _ => {}
            }
        }
        let units_node = match (units_at, &mut root.value) {
            (Some(at), Value::Map(map)) => map.get_mut(at).map(|(_, node)| node),
            _ => None,
        };
        match units_node {
            // A misspelt `units:` was already reported with its suggestion.
            None if suggested.contains(&"units") => {}
            // An included file may hold only defaults, env or params; a file that includes
            // others may have all its units there (checked once they are merged).
            None if self.included || has_include => {}
            None => {
                self.error(
                    "missing-key",
                    Loc::default(),
                    "the pipeline has no `units` list".to_owned(),
                )
                .hint("add `units:` with at least one unit that has a `name` and an `execute` command");
            }
            Some(node) => match &mut node.value {
                Value::Seq(items)
                    if items.is_empty() && walked.as_ref().is_some_and(|w| w.items > 0) =>
                {
                    let walked = walked.unwrap_or_default();
                    spec.units = walked.units;
                    self.diagnostics.extend(walked.diagnostics);
                }
                Value::Seq(items) if items.is_empty() => {
                    self.error("no-units", node.loc, "the `units` list is empty".to_owned())
                        .hint("a pipeline needs at least one unit");
                }
                Value::Seq(items) => {
                    // Sized once: growing by doubling would copy every unit up to 17 times
                    // for 100,000 units. Each unit's nodes are freed once it is walked.
                    let items = std::mem::take(items);
                    spec.units = Vec::with_capacity(items.len());
                    for (position, item) in items.into_iter().enumerate() {
                        spec.units.extend(self.unit(&item, position));
                    }
                }
                Value::Null => {
                    self.error("no-units", node.loc, "the `units` list is empty".to_owned())
                        .hint("a pipeline needs at least one unit");
                }
                _ => {
                    self.wrong_type(node, "`units`", "a list of units")
                        .hint("write each unit as a list item starting with `- name: ...`");
                }
            },
        }
        spec
    }

    /// The string-keyed entries of a mapping whose keys are in `allowed`; reports non-string,
    /// unknown and duplicate keys. `elsewhere` are keys valid in another section, for a
    /// better hint.
    pub(super) fn entries<'n>(
        &mut self,
        node: &'n Node<'n>,
        context: &str,
        allowed: &[&'static str],
        elsewhere: &[&'static str],
    ) -> (Vec<(&'static str, &'n Node<'n>)>, Vec<&'static str>) {
        let mut suggested = Vec::new();
        let Value::Map(map) = &node.value else {
            return (Vec::new(), suggested);
        };
        let mut seen: Vec<(&'static str, Loc)> = Vec::new();
        let mut known = Vec::with_capacity(map.len());
        for (key, value) in map {
            let Value::Str(key_text) = &key.value else {
                self.error(
                    "wrong-type",
                    key.loc,
                    format!("keys must be strings, found {} {context}", key.value.kind()),
                );
                continue;
            };
            // `x-` keys at the top level hold anchors for merge keys (`x-defaults: &d {...}`),
            // as in docker-compose; apollo ignores them.
            if key_text.starts_with("x-") && allowed.contains(&"units") {
                continue;
            }
            let Some(&allowed_key) = allowed.iter().find(|&&name| name == key_text) else {
                let hint = if let Some(suggestion) = closest(key_text, allowed.iter().copied()) {
                    suggested.push(suggestion);
                    format!("did you mean `{suggestion}`?")
                } else if elsewhere.contains(&key_text.as_ref()) {
                    format!(
                        "`{key_text}` is not allowed here; the keys allowed {context} are: {}",
                        quoted_list(allowed)
                    )
                } else {
                    format!("the keys allowed {context} are: {}", quoted_list(allowed))
                };
                self.error(
                    "unknown-key",
                    key.loc,
                    format!("unknown key `{key_text}` {context}"),
                )
                .hint(hint);
                continue;
            };
            if let Some(&(_, first_loc)) = seen.iter().find(|(name, _)| *name == allowed_key) {
                self.error(
                    "duplicate-key",
                    key.loc,
                    format!("duplicate key `{allowed_key}` {context}"),
                )
                .note(format!(
                    "`{allowed_key}` is first set at line {}",
                    first_loc.line
                ))
                .hint("remove one of them");
                continue;
            }
            seen.push((allowed_key, key.loc));
            known.push((allowed_key, value));
        }
        (known, suggested)
    }

    fn defaults(&mut self, node: &Node) -> Settings {
        let mut settings = Settings::default();
        match node.value {
            Value::Map(_) => {}
            Value::Null => return settings,
            _ => {
                self.wrong_type(node, "`defaults`", "a mapping");
                return settings;
            }
        }
        for (key, value) in self
            .entries(node, "in `defaults`", DEFAULTS_KEYS, UNIT_KEYS)
            .0
        {
            self.setting(&mut settings, key, value, "in `defaults`");
        }
        settings
    }

    /// Parses one inheritable setting into `settings`.
    fn setting(&mut self, settings: &mut Settings, key: &str, value: &Node, context: &str) {
        match key {
            "timeout" => {
                if matches!(&value.value, Value::Str(text) if text.trim() == "none") {
                    settings.timeout = Some(Sp {
                        value: None,
                        loc: value.loc,
                    });
                    return;
                }
                if value.value == Value::Null {
                    self.wrong_type(value, &format!("`timeout` {context}"), "a duration")
                        .hint("write `timeout: none` for no limit, or a duration like `30s`");
                    return;
                }
                let Some(timeout) = self.duration(value, key, context) else {
                    return;
                };
                if timeout.value.is_zero() {
                    self.error("bad-value", timeout.loc, format!("`timeout` {context} is zero"))
                        .hint("a zero timeout would stop every attempt at once; write `timeout: none` for no limit");
                    return;
                }
                settings.timeout = Some(Sp {
                    value: Some(timeout.value),
                    loc: timeout.loc,
                });
            }
            "retries" => settings.retries = self.retries(value, context),
            "retry_delay" => settings.retry_delay = self.duration(value, key, context),
            "kill_grace" => settings.kill_grace = self.duration(value, key, context),
            "idempotent" => settings.idempotent = self.boolean(value, key, context),
            "reuse" => settings.reuse = self.boolean(value, key, context),
            "workdir" => {
                settings.workdir = self.non_empty_string(value, &format!("`workdir` {context}"))
            }
            "capture" => settings.capture = self.capture_mode(value, context),
            "capture_max_file" => settings.capture_max_file = self.size(value, key, context),
            "executor" => settings.executor = self.executor(value, context),
            "resources" => settings.resources = self.resources(value, context),
            "log_limit" => settings.log_limit = self.log_limit(value, context),
            _ => {
                self.retry_setting(settings, key, value, context);
            }
        }
    }

    fn max_parallel(&mut self, node: &Node) -> Option<Sp<usize>> {
        match node.value {
            Value::Int(count) if count >= 1 => Some(Sp {
                value: usize::try_from(count).unwrap_or(usize::MAX),
                loc: node.loc,
            }),
            Value::Int(count) => {
                self.error(
                    "bad-value",
                    node.loc,
                    format!("`max_parallel` must be at least 1, found {count}"),
                )
                .hint("remove `max_parallel` to run as many units at once as there are CPUs");
                None
            }
            _ => {
                self.wrong_type(node, "`max_parallel`", "a whole number")
                    .hint("for example `max_parallel: 4`");
                None
            }
        }
    }

    pub(super) fn duration(
        &mut self,
        node: &Node,
        key: &str,
        context: &str,
    ) -> Option<Sp<Duration>> {
        let parsed = match &node.value {
            Value::Int(seconds) if *seconds < 0 => {
                self.error(
                    "bad-duration",
                    node.loc,
                    format!("`{key}` {context} must not be negative, found {seconds}"),
                )
                .hint(DURATION_HELP);
                return None;
            }
            Value::Int(seconds) => u64::try_from(*seconds)
                .map(Duration::from_secs)
                .map_err(|_| DurationError::Overflow),
            Value::Str(text) => parse_duration(text),
            Value::Float(seconds) => {
                self.error(
                    "bad-duration",
                    node.loc,
                    format!("`{key}` {context} must be a whole number of seconds or a duration string, found {seconds}"),
                )
                .hint("write fractions of a second in milliseconds, e.g. `1500ms`");
                return None;
            }
            _ => {
                self.wrong_type(node, &format!("`{key}` {context}"), "a duration")
                    .hint(DURATION_HELP);
                return None;
            }
        };
        match parsed {
            Ok(duration) => Some(Sp {
                value: duration,
                loc: node.loc,
            }),
            Err(reason) => {
                let written = match &node.value {
                    Value::Str(text) => text.to_string(),
                    Value::Int(seconds) => seconds.to_string(),
                    _ => String::new(),
                };
                self.error(
                    "bad-duration",
                    node.loc,
                    format!("invalid duration `{written}` for `{key}` {context}: {reason}"),
                )
                .hint(DURATION_HELP);
                None
            }
        }
    }

    fn capture_mode(
        &mut self,
        node: &Node,
        context: &str,
    ) -> Option<Sp<crate::capture::CaptureMode>> {
        const HINT: &str = "`capture` is one of `all` (the default), `inputs`, `outputs`, `none`";
        match &node.value {
            Value::Str(text) => match crate::capture::CaptureMode::parse(text.trim()) {
                Some(value) => Some(Sp {
                    value,
                    loc: node.loc,
                }),
                None => {
                    self.error(
                        "bad-value",
                        node.loc,
                        format!("unknown `capture` mode `{text}` {context}"),
                    )
                    .hint(HINT);
                    None
                }
            },
            _ => {
                self.wrong_type(node, &format!("`capture` {context}"), "a capture mode")
                    .hint(HINT);
                None
            }
        }
    }

    pub(super) fn size(&mut self, node: &Node, key: &str, context: &str) -> Option<Sp<u64>> {
        const HINT: &str =
            "a size is a whole number of bytes or a string like `64MiB`, `1GiB`, `512KiB`";
        let parsed = match &node.value {
            Value::Int(bytes) => {
                u64::try_from(*bytes).map_err(|_| crate::capture::SizeError::NoNumber)
            }
            Value::Str(text) => crate::capture::parse_size(text),
            _ => {
                self.wrong_type(node, &format!("`{key}` {context}"), "a size")
                    .hint(HINT);
                return None;
            }
        };
        match parsed {
            Ok(value) => Some(Sp {
                value,
                loc: node.loc,
            }),
            Err(reason) => {
                let written = match &node.value {
                    Value::Str(text) => text.to_string(),
                    Value::Int(bytes) => bytes.to_string(),
                    _ => String::new(),
                };
                self.error(
                    "bad-value",
                    node.loc,
                    format!("invalid size `{written}` for `{key}` {context}: {reason}"),
                )
                .hint(HINT);
                None
            }
        }
    }

    pub(super) fn boolean(&mut self, node: &Node, key: &str, context: &str) -> Option<Sp<bool>> {
        match node.value {
            Value::Bool(value) => Some(Sp {
                value,
                loc: node.loc,
            }),
            _ => {
                self.wrong_type(node, &format!("`{key}` {context}"), "`true` or `false`")
                    .hint(format!(
                        "write `{key}: true` or `{key}: false`, without quotes"
                    ));
                None
            }
        }
    }

    /// A string, or a whole number read as its decimal text (names like `2024` are fine).
    pub(super) fn string(&mut self, node: &Node, what: &str) -> Option<Sp<String>> {
        let value = match &node.value {
            Value::Str(text) => text.to_string(),
            Value::Int(number) => number.to_string(),
            _ => {
                self.wrong_type(node, what, "a string");
                return None;
            }
        };
        if value.contains('\0') {
            self.error(
                "bad-value",
                node.loc,
                format!("{what} contains a NUL character"),
            );
            return None;
        }
        Some(Sp {
            value,
            loc: node.loc,
        })
    }

    pub(super) fn non_empty_string(&mut self, node: &Node, what: &str) -> Option<Sp<String>> {
        let text = self.string(node, what)?;
        if text.value.trim().is_empty() {
            self.error("bad-value", node.loc, format!("{what} is empty"));
            return None;
        }
        Some(text)
    }

    /// A list of non-empty strings; `null` is an empty list.
    pub(super) fn string_list(&mut self, node: &Node, what: &str) -> Vec<Sp<String>> {
        match &node.value {
            Value::Null => Vec::new(),
            Value::Seq(items) => items
                .iter()
                .filter_map(|item| match &item.value {
                    // The common case, without formatting a message nobody will read.
                    Value::Str(text) if !text.trim().is_empty() && !text.contains('\0') => {
                        Some(Sp {
                            value: text.to_string(),
                            loc: item.loc,
                        })
                    }
                    _ => self.non_empty_string(item, &format!("an item of {what}")),
                })
                .collect(),
            _ => {
                self.wrong_type(node, what, "a list")
                    .hint("write a list as `[a, b]` or as lines starting with `- `");
                Vec::new()
            }
        }
    }

    fn env(&mut self, node: &Node, what: &str) -> BTreeMap<String, Sp<String>> {
        let mut env = BTreeMap::new();
        let map = match &node.value {
            Value::Null => return env,
            Value::Map(map) => map,
            _ => {
                self.wrong_type(node, what, "a mapping of variable names to values")
                    .hint("write it as `env: { NAME: value }`");
                return env;
            }
        };
        for (key, value) in map {
            let Some(name) = self.string(key, &format!("a variable name in {what}")) else {
                continue;
            };
            if name.value.is_empty() || name.value.contains('=') {
                self.error(
                    "bad-value",
                    key.loc,
                    format!(
                        "`{}` in {what} is not a valid environment variable name",
                        name.value
                    ),
                )
                .hint("a variable name is non-empty and has no `=`");
                continue;
            }
            let text = match &value.value {
                Value::Str(text) => text.to_string(),
                Value::Int(number) => number.to_string(),
                Value::Bool(flag) => flag.to_string(),
                Value::Float(_) => {
                    self.wrong_type(value, &format!("`{}` in {what}", name.value), "a string")
                        .hint("quote it so no digit is lost, e.g. \"1.10\"");
                    continue;
                }
                Value::Map(_)
                    if self.refuse_secret_flag(value, &format!("`{}` in {what}", name.value)) =>
                {
                    continue;
                }
                _ => {
                    self.wrong_type(value, &format!("`{}` in {what}", name.value), "a string")
                        .hint("use \"\" for an empty value");
                    continue;
                }
            };
            if text.contains('\0') {
                self.error(
                    "bad-value",
                    value.loc,
                    format!("`{}` in {what} contains a NUL character", name.value),
                );
                continue;
            }
            let text = Sp {
                value: text,
                loc: value.loc,
            };
            if env.insert(name.value.clone(), text).is_some() {
                self.error(
                    "duplicate-key",
                    key.loc,
                    format!("`{}` is set twice in {what}", name.value),
                );
            }
        }
        env
    }

    /// A hook: a command (string or list), or `{execute, timeout}`.
    fn hook(&mut self, node: &Node, key: &str) -> Option<(Sp<Command>, Option<Duration>)> {
        let Value::Map(_) = node.value else {
            return self
                .command(node, key, "the pipeline")
                .map(|command| (command, None));
        };
        let (entries, _) = self.entries(node, &format!("`{key}`"), HOOK_KEYS, &[]);
        let mut command = None;
        let mut timeout = None;
        for (entry, value) in entries {
            match entry {
                "execute" => command = self.command(value, "execute", &format!("`{key}`")),
                "timeout" => {
                    timeout = self
                        .duration(value, "timeout", &format!("of `{key}`"))
                        .map(|timeout| timeout.value);
                }
                _ => {}
            }
        }
        match command {
            Some(command) => Some((command, timeout)),
            None => {
                self.error(
                    "missing-key",
                    node.loc,
                    format!("`{key}` has no `execute` command"),
                )
                .hint("write `execute: ./notify.sh` under it, or give the command directly: `on_failure: ./notify.sh`");
                None
            }
        }
    }

    pub(super) fn command(&mut self, node: &Node, key: &str, label: &str) -> Option<Sp<Command>> {
        let what = format!("`{key}` of {label}");
        self.warn_secret_env(node, &what);
        let command = match &node.value {
            Value::Str(script) => {
                if script.trim().is_empty() {
                    self.error("empty-command", node.loc, format!("{what} is empty"))
                        .hint(
                            "give a shell command, e.g. `./units/fetch_data.sh`, or remove the key",
                        );
                    return None;
                }
                if script.contains('\0') {
                    self.error(
                        "bad-value",
                        node.loc,
                        format!("{what} contains a NUL character"),
                    );
                    return None;
                }
                Command::Shell(script.to_string())
            }
            // `execute: true` means the program `true`, not a boolean.
            Value::Bool(flag) => Command::Shell(flag.to_string()),
            Value::Int(number) => Command::Shell(number.to_string()),
            Value::Seq(items) => {
                if items.is_empty() {
                    self.error(
                        "empty-command",
                        node.loc,
                        format!("{what} is an empty list"),
                    )
                    .hint("a list command is `[program, arg, ...]`");
                    return None;
                }
                let mut argv = Vec::with_capacity(items.len());
                for item in items {
                    let arg = match &item.value {
                        Value::Str(text) => text.to_string(),
                        Value::Int(number) => number.to_string(),
                        Value::Float(number) => number.to_string(),
                        Value::Bool(flag) => flag.to_string(),
                        _ => {
                            self.wrong_type(item, &format!("an argument of {what}"), "a string")
                                .hint(
                                    "quote an argument that YAML would read as a mapping or list",
                                );
                            return None;
                        }
                    };
                    if arg.contains('\0') {
                        self.error(
                            "bad-value",
                            item.loc,
                            format!("an argument of {what} contains a NUL character"),
                        );
                        return None;
                    }
                    argv.push(arg);
                }
                if argv[0].trim().is_empty() {
                    self.error(
                        "empty-command",
                        items[0].loc,
                        format!("the program of {what} is empty"),
                    );
                    return None;
                }
                Command::Argv(argv)
            }
            Value::Null => {
                self.error("empty-command", node.loc, format!("{what} is empty"))
                    .hint("give a shell command, e.g. `./units/fetch_data.sh`, or remove the key");
                return None;
            }
            _ => {
                self.wrong_type(node, &what, "a command string or a list `[program, arg, ...]`")
                    .hint("write `execute: ./script.sh arg` (run by /bin/sh) or `execute: [./script.sh, arg]` (no shell)");
                return None;
            }
        };
        Some(Sp {
            value: command,
            loc: node.loc,
        })
    }

    fn unit(&mut self, node: &Node, position: usize) -> Option<UnitSpec> {
        if !matches!(node.value, Value::Map(_)) {
            self.wrong_type(node, &format!("unit #{}", position + 1), "a mapping")
                .hint("a unit is written as `- name: ...` followed by its keys, e.g. `execute:`");
            return None;
        }
        // The name first, so every other message can say which unit it is about.
        let mut unit = UnitSpec {
            name: None,
            deps: Vec::new(),
            settings: UnitSettings::default(),
            prepare: None,
            execute: None,
            cleanup: None,
            inputs: Vec::new(),
            outputs: Vec::new(),
            env: BTreeMap::new(),
            foreach: None,
            allow_empty: None,
            when: None,
            instance: None,
            acknowledge: Vec::new(),
            secrets: Vec::new(),
            skip_when: None,
            deadline: None,
        };
        let mut name_seen = false;
        if let Value::Map(map) = &node.value
            && let Some((_, name_node)) = map
                .iter()
                .find(|(key, _)| matches!(&key.value, Value::Str(text) if text == "name"))
        {
            name_seen = true;
            unit.name =
                self.non_empty_string(name_node, &format!("the name of unit #{}", position + 1));
        }
        let label = unit.label(position);
        let context = format!("in {label}");
        let mut execute_seen = false;
        let (entries, suggested) = self.entries(node, &context, UNIT_KEYS, TOP_LEVEL_KEYS);
        for (key, value) in entries {
            match key {
                "name" => {}
                "deps" => unit.deps = self.string_list(value, &format!("`deps` of {label}")),
                "prepare" => unit.prepare = self.command(value, key, &label),
                "execute" => {
                    execute_seen = true;
                    unit.execute = self.command(value, key, &label);
                }
                "cleanup" => unit.cleanup = self.command(value, key, &label),
                "inputs" => unit.inputs = self.string_list(value, &format!("`inputs` of {label}")),
                "acknowledge" => {
                    unit.acknowledge =
                        self.string_list(value, &format!("`acknowledge` of {label}"));
                }
                "outputs" => {
                    unit.outputs = self.string_list(value, &format!("`outputs` of {label}"));
                }
                "env" => unit.env = self.env(value, &format!("the `env` of {label}")),
                "secrets" => {
                    unit.secrets = self.string_list(value, &format!("`secrets` of {label}"));
                }
                "foreach" => unit.foreach = self.foreach(value, &label).map(Box::new),
                "allow_empty" => unit.allow_empty = self.boolean(value, key, &context),
                "when" => unit.when = self.when(value, &label).map(Box::new),
                "deadline" => {
                    unit.deadline = self.deadline(value, &format!("`deadline` of {label}"))
                }
                _ => self.setting(unit.settings.make_mut(), key, value, &context),
            }
        }
        self.allow_empty_needs_foreach(&unit, &label);
        // A misspelt key was already reported with its suggestion: do not also say it is missing.
        if !name_seen && !suggested.contains(&"name") {
            self.error(
                "missing-key",
                node.loc,
                format!("unit #{} has no `name`", position + 1),
            )
            .hint("give every unit a unique `name:` made of letters, digits, `_`, `.` and `-`");
        }
        if !execute_seen && !suggested.contains(&"execute") {
            let loc = unit.name.as_ref().map_or(node.loc, |name| name.loc);
            self.error(
                "missing-execute",
                loc,
                format!("{label} has no `execute` command"),
            )
            .hint("add `execute:` with the command the unit runs");
        }
        Some(unit)
    }
}
