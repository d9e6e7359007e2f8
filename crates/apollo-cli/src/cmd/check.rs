//! `apollo check [CONFIG] [--format text|json] [--plan]`: validate a config.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use apollo_core::Pipeline;
use apollo_core::config::{self, LoadError};
use apollo_core::diagnostic::{Diagnostic, render_all};
use serde::Serialize;

use super::ConfigArg;
use crate::error::{CliError, output};
use crate::exit::Exit;

/// How `check` prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CheckFormat {
    /// Diagnostics on stderr like a compiler; a summary (and the plan) on stdout
    Text,
    /// One JSON document on stdout: validity, counts, diagnostics (and the plan)
    Json,
}

/// Arguments of `apollo check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArg,
    /// Output format
    #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
    pub(crate) format: CheckFormat,
    /// Also print the execution plan: the units layer by layer (a layer's units may run in parallel)
    #[arg(long)]
    pub(crate) plan: bool,
    /// Check with this value of a param: `-p day=2026-11-30` (repeatable; a required param given no value is checked with a placeholder)
    #[arg(short = 'p', long = "param", value_name = "NAME=VALUE")]
    pub(crate) params: Vec<String>,
    /// Check with the params of a YAML or JSON file holding a mapping of names to values
    #[arg(long, value_name = "FILE")]
    pub(crate) params_file: Option<std::path::PathBuf>,
}

/// The JSON document of `check --format json`.
#[derive(Debug, Serialize)]
struct Report<'a> {
    /// `apollo.check/1`.
    schema: &'static str,
    file: &'a Path,
    valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pipeline: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    units: Option<usize>,
    errors: usize,
    warnings: usize,
    diagnostics: &'a [Diagnostic],
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<Vec<Vec<&'a str>>>,
    /// With the plan: each unit with a `when:`, by name — `{"skipped": true, "condition"}`
    /// for an expression found false now, `{"command"}` for a condition decided when it runs.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    when: BTreeMap<&'a str, serde_json::Value>,
}

/// The units of `pipeline` with a `when:` decided now (false) or when they run (a command),
/// for the JSON plan.
fn conditions(pipeline: &Pipeline) -> BTreeMap<&str, serde_json::Value> {
    let mut conditions = BTreeMap::new();
    for unit in &pipeline.units {
        let value = match (&unit.skip_when, &unit.when_command) {
            (Some(condition), _) => {
                serde_json::json!({"skipped": true, "condition": condition})
            }
            (None, Some(command)) => serde_json::json!({"command": command.display()}),
            (None, None) => continue,
        };
        conditions.insert(unit.name.as_str(), value);
    }
    conditions
}

/// How the plan names a unit: with why it is skipped (a `when:` expression false now) or
/// what it waits for (a `when: {command}`, decided when it runs).
fn planned_name(unit: &apollo_core::Unit) -> String {
    match (&unit.skip_when, &unit.when_command) {
        (Some(condition), _) => format!("{} (skipped: when: {condition} is false)", unit.name),
        (None, Some(command)) => {
            format!("{} (runs if `{}` succeeds)", unit.name, command.display())
        }
        (None, None) => unit.name.clone(),
    }
}

/// Validates the config; exit 0 when valid (warnings allowed), 2 when not.
pub(crate) fn run(
    args: &CheckArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let path = args.config.resolve()?;
    let options = config::LoadOptions::default()
        .params(crate::cmd::run::param_overrides(
            &args.params,
            args.params_file.as_deref(),
        )?)
        .placeholders(true)
        .check_notes(true);
    let (pipeline, mut diagnostics) =
        match crate::memory::freeing_at_once(|| config::load_with(&path, &options)) {
            Ok(loaded) => (Some(loaded.pipeline), loaded.warnings),
            Err(LoadError::Invalid { diagnostics, .. }) => (None, diagnostics),
            Err(error) => return Err(error.into()),
        };
    if let Some(pipeline) = &pipeline {
        diagnostics.extend(special_files(pipeline, &path));
        diagnostics.extend(folder_inputs(pipeline, &path));
        diagnostics.extend(late_without_deadline(pipeline, &path));
    }
    let n_errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let n_warnings = diagnostics.len() - n_errors;
    let plan = match (&pipeline, args.plan) {
        (Some(pipeline), true) => Some(layers(pipeline)),
        _ => None,
    };
    match args.format {
        CheckFormat::Json => {
            let report = Report {
                schema: "apollo.check/1",
                file: &path,
                valid: pipeline.is_some(),
                pipeline: pipeline.as_ref().map(|p| p.name.as_str()),
                units: pipeline.as_ref().map(|p| p.units.len()),
                errors: n_errors,
                warnings: n_warnings,
                diagnostics: &diagnostics,
                when: match (&pipeline, &plan) {
                    (Some(pipeline), Some(_)) => conditions(pipeline),
                    _ => BTreeMap::new(),
                },
                plan,
            };
            let mut text = serde_json::to_string_pretty(&report)
                .map_err(|error| output(std::io::Error::other(error)))?;
            text.push('\n');
            stdout.write_all(text.as_bytes()).map_err(output)?;
        }
        CheckFormat::Text => {
            // Diagnostics go to stderr; if it is closed there is no one left to tell.
            let _ = stderr.write_all(render_all(&diagnostics).as_bytes());
            match &pipeline {
                Some(pipeline) => {
                    let mut text = format!(
                        "{}: pipeline `{}` is valid ({} unit{}, {} warning{})\n",
                        path.display(),
                        pipeline.name,
                        pipeline.units.len(),
                        plural(pipeline.units.len()),
                        n_warnings,
                        plural(n_warnings)
                    );
                    if let Some(plan) = &plan {
                        text.push_str(&render_plan(pipeline, plan));
                    }
                    stdout.write_all(text.as_bytes()).map_err(output)?;
                }
                None => {
                    let _ = writeln!(
                        stderr,
                        "error: `{}` is invalid: {n_errors} error{}, {n_warnings} warning{}",
                        path.display(),
                        plural(n_errors),
                        plural(n_warnings)
                    );
                }
            }
        }
    }
    stdout.flush().map_err(output)?;
    let valid = pipeline.is_some();
    // The process ends with the check: freeing 100,000 units one by one would be 3% of it.
    std::mem::forget(pipeline);
    Ok(if valid { Exit::Success } else { Exit::Usage })
}

/// The execution layers by unit name.
fn layers(pipeline: &Pipeline) -> Vec<Vec<&str>> {
    super::dag_of(pipeline)
        .layers()
        .into_iter()
        .map(|layer| {
            layer
                .into_iter()
                .map(|unit_idx| pipeline.units[unit_idx].name.as_str())
                .collect()
        })
        .collect()
}

fn render_plan(pipeline: &Pipeline, plan: &[Vec<&str>]) -> String {
    let mut text = format!(
        "\nexecution plan: {} layer{} (max_parallel: {} unit{} at once)\n",
        plan.len(),
        plural(plan.len()),
        pipeline.max_parallel,
        plural(pipeline.max_parallel)
    );
    let width = plan.len().to_string().len();
    let units: std::collections::HashMap<&str, &apollo_core::Unit> = (pipeline.units.iter())
        .map(|unit| (unit.name.as_str(), unit))
        .collect();
    for (layer_idx, layer) in plan.iter().enumerate() {
        let names: Vec<String> = (layer.iter())
            .map(|name| match units.get(name) {
                Some(unit) => planned_name(unit),
                None => (*name).to_owned(),
            })
            .collect();
        text.push_str(&format!(
            "  layer {:>width$}: {}\n",
            layer_idx + 1,
            names.join(", ")
        ));
    }
    text
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// A warning when `on_late` is set but the pipeline has no `deadline:`: the hook never fires.
fn late_without_deadline(pipeline: &Pipeline, config: &Path) -> Option<Diagnostic> {
    let has_late =
        (pipeline.hooks.iter()).any(|hook| hook.when == apollo_core::model::HookWhen::OnLate);
    (has_late && pipeline.deadline.is_none()).then(|| {
        Diagnostic::new(
            apollo_core::Severity::Warning,
            "late-without-deadline",
            config,
            "`on_late` is set but the pipeline has no `deadline:`".to_owned(),
        )
        .with_hint("it fires only for a run with a deadline (a unit's own does not count)")
    })
}

/// A warning for each declared input or output that exists now and is a FIFO, a device or a
/// socket: its content may never end, so a run refuses it (the unit fails).
fn special_files(pipeline: &Pipeline, config: &Path) -> Vec<Diagnostic> {
    let mut warnings = Vec::new();
    for unit in &pipeline.units {
        for (what, path, kind) in
            apollo_core::hash::special_declared_files(unit, &pipeline.base_dir)
        {
            let message = format!(
                "{what} `{}` of unit `{}` is {kind}, not a regular file",
                path.display(),
                unit.name
            );
            warnings.push(
                Diagnostic::new(
                    apollo_core::Severity::Warning,
                    "special-file",
                    config,
                    message,
                )
                .with_hint("a run refuses it and fails the unit: its content may never end"),
            );
        }
    }
    warnings
}

/// A warning for each input named as a plain path (not a glob) that is a folder now: a run
/// refuses it ("it is a directory, not a regular file"); a glob names its files.
fn folder_inputs(pipeline: &Pipeline, config: &Path) -> Vec<Diagnostic> {
    let mut warnings = Vec::new();
    for unit in &pipeline.units {
        for input in unit
            .inputs
            .iter()
            .filter(|input| !input.contains(['*', '?', '[']))
        {
            if !pipeline.base_dir.join(input).is_dir() {
                continue;
            }
            let folder = input.trim_end_matches('/');
            warnings.push(
                Diagnostic::new(
                    apollo_core::Severity::Warning,
                    "folder-input",
                    config,
                    format!("input `{input}` of unit `{}` is a folder, not a file", unit.name),
                )
                .with_hint(format!(
                    "a run refuses it (it is a directory, not a regular file): name its files with a glob, `{folder}/**` (every file below it) or `{folder}/*` (those directly in it)"
                )),
            );
        }
    }
    warnings
}
