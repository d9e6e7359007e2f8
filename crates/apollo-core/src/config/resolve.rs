//! A valid [`Spec`] → the resolved [`Pipeline`]: defaults inherited, built-in defaults filled
//! in, paths made absolute, pipeline env merged under each unit's env.

use std::path::{Path, PathBuf};

use super::schema::{ResourcesSpec, Settings, Sp, Spec};
use super::secrets::SourceSpec;
use crate::capture::{CapturePolicy, DEFAULT_CAPTURE_MAX_FILE};
use crate::model::{Capacity, DEFAULT_HOOK_TIMEOUT, Hook, Pipeline, SecretSource, Unit};
use crate::validate::{DEFAULT_KILL_GRACE, DEFAULT_RETRY_DELAY};

/// Builds the pipeline. `config_path` and `base_dir` are absolute. Units the walk could not
/// read (no name or no `execute`) are skipped; callers only resolve specs without errors.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(crate) fn resolve(spec: Spec, config_path: PathBuf, base_dir: PathBuf) -> Pipeline {
    let name = match &spec.name {
        Some(name) => name.value.clone(),
        None => default_name(&config_path),
    };
    let max_parallel = spec
        .max_parallel
        .as_ref()
        .map_or_else(default_max_parallel, |count| count.value);
    let defaults = &spec.defaults;
    let capacity = capacity(&spec.max_cpus, &spec.max_memory);
    let secrets: std::collections::BTreeMap<String, SecretSource> = spec
        .secrets
        .iter()
        .cloned()
        .map(|(name, source)| {
            let source = match source.value {
                SourceSpec::Env(variable) => SecretSource::Env(variable),
                SourceSpec::File(path) => SecretSource::File(base_dir.join(path)),
                SourceSpec::Command(command) => SecretSource::Command(command),
            };
            (name.value, source)
        })
        .collect();
    let mut specs = spec.units;
    let mut units = Vec::with_capacity(specs.len());
    // From the last unit back, handing the specs' memory back as they are used (each spec is
    // moved out; the list is trimmed every few thousand): 100,000 units and their specs are
    // never all held at once. Put back in config order at the end.
    while let Some(unit) = specs.pop() {
        if specs.len().is_multiple_of(4096) {
            specs.shrink_to_fit();
        }
        let (Some(unit_name), Some(execute)) = (unit.name, unit.execute) else {
            continue;
        };
        let settings = &unit.settings;
        let deps = without_repeats(unit.deps);
        let outputs: Vec<String> = unit
            .outputs
            .into_iter()
            .map(|output| output.value)
            .collect();
        // `reuse: true` in `defaults` applies to units that declare outputs; `check` refuses
        // it written on a unit without any.
        let reuse = !outputs.is_empty()
            && inherit(settings, defaults, |s| s.reuse.as_ref().map(|r| r.value)).unwrap_or(false);
        let mut env: std::collections::BTreeMap<String, String> = spec
            .env
            .iter()
            .map(|(name, value)| (name.clone(), value.value.clone()))
            .collect();
        env.extend(
            unit.env
                .into_iter()
                .map(|(name, value)| (name, value.value)),
        );
        let (resources, queue_timeout) = resources(settings, defaults);
        units.push(Unit {
            name: unit_name.value,
            deps,
            timeout: inherit(settings, defaults, |s| s.timeout.as_ref().map(|t| t.value)).flatten(),
            retries: inherit(settings, defaults, |s| s.retries.as_ref().map(|r| r.value))
                .unwrap_or(0),
            retry_delay: inherit(settings, defaults, |s| {
                s.retry_delay.as_ref().map(|d| d.value)
            })
            .unwrap_or(DEFAULT_RETRY_DELAY),
            retry_on_exit: inherit(settings, defaults, |s| {
                s.retry_on_exit.as_ref().map(|codes| codes.value.clone())
            })
            .unwrap_or_default(),
            retry_max_delay: inherit(settings, defaults, |s| {
                s.retry_max_delay.as_ref().map(|d| d.value)
            }),
            kill_grace: inherit(settings, defaults, |s| {
                s.kill_grace.as_ref().map(|d| d.value)
            })
            .unwrap_or(DEFAULT_KILL_GRACE),
            prepare: unit.prepare.map(|command| command.value),
            execute: execute.value,
            cleanup: unit.cleanup.map(|command| command.value),
            cleanup_timeout: inherit(settings, defaults, |s| {
                s.cleanup_timeout.as_ref().map(|d| d.value)
            })
            .unwrap_or(crate::model::DEFAULT_CLEANUP_TIMEOUT),
            inputs: unit.inputs.into_iter().map(|input| input.value).collect(),
            outputs,
            env,
            workdir: inherit(settings, defaults, |s| {
                s.workdir.as_ref().map(|w| w.value.clone())
            })
            .map_or_else(|| base_dir.clone(), |workdir| base_dir.join(workdir)),
            idempotent: inherit(settings, defaults, |s| {
                s.idempotent.as_ref().map(|i| i.value)
            })
            .unwrap_or(true),
            capture: CapturePolicy {
                mode: inherit(settings, defaults, |s| s.capture.as_ref().map(|c| c.value))
                    .unwrap_or_default(),
                max_file: inherit(settings, defaults, |s| {
                    s.capture_max_file.as_ref().map(|m| m.value)
                })
                .unwrap_or(DEFAULT_CAPTURE_MAX_FILE),
            },
            // `reuse: true` in `defaults` applies to units that declare outputs; `check`
            // refuses it written on a unit without any.
            reuse,
            executor: inherit(settings, defaults, |s| s.executor.as_ref().map(|e| e.value))
                .unwrap_or_default(),
            resources,
            queue_timeout,
            secrets: unit
                .secrets
                .iter()
                .filter_map(|name| Some((name.value.clone(), secrets.get(&name.value)?.clone())))
                .collect(),
            skip_when: unit.skip_when,
            when_command: super::when::command(unit.when.as_deref()).map(|c| c.value.clone()),
            log_limit: inherit(settings, defaults, |s| {
                s.log_limit.as_ref().map(|l| l.value)
            })
            .flatten(),
            deadline: unit.deadline.map(|deadline| deadline.value),
        });
    }
    units.reverse();
    let hooks = spec
        .hooks
        .into_iter()
        .map(|(when, command, timeout)| Hook {
            when,
            command: command.value,
            timeout: timeout.unwrap_or(DEFAULT_HOOK_TIMEOUT),
        })
        .collect();
    Pipeline {
        name,
        config_path,
        base_dir,
        max_parallel,
        units,
        hooks,
        capacity,
        max_jobs: spec
            .max_jobs
            .as_ref()
            .map(|count| usize::try_from(count.value).unwrap_or(usize::MAX)),
        blob_store_max: (spec.blob_store_max.as_ref())
            .map_or(Some(crate::capture::DEFAULT_BLOB_STORE_MAX), |max| {
                max.value
            }),
        durability: spec.durability.as_ref().map(|durability| durability.value),
        sync_interval: (spec.sync_interval.as_ref()).map(|interval| interval.value),
        cost: spec.cost.map(|cost| cost.value),
        journal_segment_size: spec.journal_segment_size.map(|size| size.value),
        deadline: spec.deadline.map(|deadline| deadline.value),
    }
}

/// The unit's `resources:` merged over the `defaults:` ones, field by field.
/// The names of `deps` in order, each once. A long list (a unit after a 100,000-item fan-out
/// depends on every instance) is checked against a set, not against itself.
fn without_repeats(deps: Vec<Sp<String>>) -> Vec<String> {
    let mut kept: Vec<String> = Vec::with_capacity(deps.len());
    if deps.len() <= 16 {
        for dep in deps {
            if !kept.contains(&dep.value) {
                kept.push(dep.value);
            }
        }
        return kept;
    }
    let mut seen = std::collections::HashSet::with_capacity(deps.len());
    for dep in deps {
        if seen.insert(dep.value.clone()) {
            kept.push(dep.value);
        }
    }
    kept
}

fn resources(
    unit: &Settings,
    defaults: &Settings,
) -> (crate::model::Resources, Option<std::time::Duration>) {
    let none = ResourcesSpec::default();
    let defaults = defaults.resources.as_ref().map_or(&none, |r| &r.value);
    let merged = unit
        .resources
        .as_ref()
        .map_or(&none, |r| &r.value)
        .over(defaults);
    (merged.resolve(), merged.queue_timeout.flatten())
}

fn capacity(max_cpus: &Option<Sp<u32>>, max_memory: &Option<Sp<u64>>) -> Capacity {
    Capacity {
        cpus: max_cpus.as_ref().map(|cpus| cpus.value),
        memory: max_memory.as_ref().map(|memory| memory.value),
    }
}

/// The unit's own setting, else the pipeline default.
fn inherit<T>(
    unit: &Settings,
    defaults: &Settings,
    get: impl Fn(&Settings) -> Option<T>,
) -> Option<T> {
    get(unit).or_else(|| get(defaults))
}

/// The pipeline name when the config sets none: the file stem (`daily.yaml` → `daily`).
pub(crate) fn default_name(config_path: &Path) -> String {
    config_path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .filter(|stem| !stem.is_empty())
        .unwrap_or_else(|| "pipeline".to_owned())
}

/// One unit per CPU, when `max_parallel` is not set.
fn default_max_parallel() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}
