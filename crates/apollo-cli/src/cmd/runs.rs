//! `apollo runs`: every run of the state directory, newest last, with the run model's counts.

use std::io::{BufWriter, Write};
use std::path::Path;

use apollo_core::UnitState;
use serde::Serialize;

use crate::cmd::StateArgs;
use crate::cmd::replay::{TableFormat, color_stdout};
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::progress::human_duration;
use crate::state;

/// Arguments of `apollo runs`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunsArgs {
    /// Only runs of this pipeline
    #[arg(long, value_name = "NAME")]
    pub(crate) pipeline: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub(crate) format: TableFormat,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

#[derive(Serialize)]
struct RunLine<'a> {
    id: &'a str,
    pipeline: Option<&'a str>,
    /// RFC 3339, UTC.
    started: Option<chrono::DateTime<chrono::Utc>>,
    /// RFC 3339, UTC.
    finished: Option<chrono::DateTime<chrono::Utc>>,
    duration_ms: Option<i64>,
    status: &'static str,
    /// `run`, or `reproduction` (`apollo reproduce`): never a pipeline's latest run.
    kind: &'static str,
    /// How its journal was made durable: `fsync`, `batched` or `none`.
    durability: &'static str,
    /// The pid of the apollo running it, for a running run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    units: usize,
    /// How many units are in each state of the run model (every state, zeros included).
    #[serde(serialize_with = "serialize_counts")]
    counts: apollo_core::UnitCounts,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<&'a str>,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    params: &'a std::collections::BTreeMap<String, serde_json::Value>,
}

fn serialize_counts<S: serde::Serializer>(
    counts: &apollo_core::UnitCounts,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&counts.to_json(), serializer)
}

/// The schema of `apollo runs --format json`.
const RUNS_SCHEMA: &str = "apollo.runs/2";

/// A run's params on one line: `day=2026-11-30 regions=eu,us`.
fn params_text(params: &std::collections::BTreeMap<String, serde_json::Value>) -> String {
    params
        .iter()
        .map(|(name, value)| {
            let value = match value {
                serde_json::Value::String(text) => text.clone(),
                serde_json::Value::Array(items) => items
                    .iter()
                    .map(|item| match item {
                        serde_json::Value::String(text) => text.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            format!("{name}={value}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `apollo runs`.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(crate) fn runs(
    args: &RunsArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
    // The run model's counts: kept in the runs index for a finished run once counted, so a
    // listing of many finished runs folds no journal.
    let summaries = state.list_runs_counted(&mut |id| {
        state::run_model(&state, id, &mut std::io::sink())
            .ok()
            .map(|model| model.counts())
    })?;
    let holder_pid = state
        .lock_holder()
        .ok()
        .flatten()
        .and_then(|holder| holder.pid);
    let lines: Vec<RunLine<'_>> = summaries
        .iter()
        .filter(|summary| {
            args.pipeline
                .as_deref()
                .is_none_or(|name| summary.pipeline.as_deref() == Some(name))
        })
        .map(|summary| RunLine {
            id: summary.id.as_str(),
            pipeline: summary.pipeline.as_deref(),
            started: summary.started,
            finished: summary.finished,
            // A live run has lasted until now, not until its last record (issue 35: a run
            // whose unit was running showed 0.05 s, like a killed one).
            duration_ms: summary
                .started
                .zip(match summary.state {
                    apollo_store::RunState::Running => Some(chrono::Utc::now()),
                    _ => summary.finished.or(summary.last_record),
                })
                .map(|(start, end)| (end - start).num_milliseconds()),
            status: summary.state.as_str(),
            kind: summary.kind.as_str(),
            durability: summary.durability.as_str(),
            pid: holder_pid.filter(|_| summary.state == apollo_store::RunState::Running),
            units: summary.n_units,
            // The run model's counts; a run whose journal cannot be read counts nothing (its
            // status says corrupt, and why).
            counts: summary.counts.unwrap_or_default(),
            problem: summary.problem.as_deref(),
            params: &summary.params,
        })
        .collect();
    let mut out = BufWriter::new(stdout);
    match args.format {
        TableFormat::Json => {
            let document = serde_json::json!({"schema": RUNS_SCHEMA, "runs": lines});
            serde_json::to_writer_pretty(&mut out, &document)
                .map_err(|error| output(error.into()))?;
            writeln!(out).map_err(output)?;
        }
        TableFormat::Text => {
            if lines.is_empty() {
                match &args.pipeline {
                    Some(name) => {
                        let mut pipelines: Vec<&str> = summaries
                            .iter()
                            .filter_map(|summary| summary.pipeline.as_deref())
                            .collect();
                        pipelines.sort_unstable();
                        pipelines.dedup();
                        writeln!(
                            out,
                            "no runs of pipeline `{name}`; pipelines with runs: {}",
                            if pipelines.is_empty() {
                                "none".to_owned()
                            } else {
                                pipelines.join(", ")
                            }
                        )
                        .map_err(output)?;
                    }
                    None => writeln!(out, "no runs yet").map_err(output)?,
                }
            } else {
                let width = lines
                    .iter()
                    .filter_map(|line| line.pipeline.map(str::len))
                    .max()
                    .unwrap_or(8)
                    .max(8);
                // A PARAMS column only when some run has params.
                let any_params = lines.iter().any(|line| !line.params.is_empty());
                writeln!(
                    out,
                    "{:<22}  {:<width$}  {:<19}  {:>9}  {:<11}  units{}",
                    "RUN",
                    "PIPELINE",
                    "STARTED (UTC)",
                    "DURATION",
                    "STATUS",
                    if any_params { "  params" } else { "" }
                )
                .map_err(output)?;
                let color = color_stdout();
                for line in &lines {
                    let duration = line.duration_ms.map_or_else(
                        || "-".to_owned(),
                        |ms| {
                            human_duration(std::time::Duration::from_millis(
                                ms.max(0).unsigned_abs(),
                            ))
                        },
                    );
                    // Reused units are done too, and counted apart. A reproduction says so first:
                    // its status is whether the attempt ran again, not a run of the pipeline.
                    let mut units = String::new();
                    if line.kind != "run" {
                        units.push_str(&format!("{}: ", line.kind));
                    }
                    let counts = &line.counts;
                    let reused = counts.get(UnitState::Reused);
                    let ok = counts.get(UnitState::Succeeded)
                        + counts.get(UnitState::AlreadyDone)
                        + reused;
                    units += &format!("{ok}/{} ok", line.units);
                    if reused > 0 {
                        units.push_str(&format!(" ({reused} reused)"));
                    }
                    let failed = counts.get(UnitState::Failed);
                    if failed > 0 {
                        units.push_str(&format!(", {failed} failed"));
                    }
                    if counts.skipped_all() > 0 {
                        units.push_str(&format!(", {} skipped", counts.skipped_all()));
                    }
                    for state in [UnitState::Running, UnitState::CutOff] {
                        if counts.get(state) > 0 {
                            units.push_str(&format!(", {} {}", counts.get(state), state.label()));
                        }
                    }
                    if let Some(problem) = line.problem {
                        units.push_str(&format!(" ({problem})"));
                    }
                    // The default goes unsaid; any other mode is worth a glance.
                    if line.durability != "fsync" {
                        units.push_str(&format!(" (durability {})", line.durability));
                    }
                    if line.status == "running"
                        && let Some(pid) = holder_pid
                    {
                        units.push_str(&format!(" (apollo pid {pid})"));
                    }
                    let status =
                        crate::color::paint(color, line.status, &format!("{:<11}", line.status));
                    if !line.params.is_empty() {
                        units.push_str(&format!("  {}", params_text(line.params)));
                    }
                    writeln!(
                        out,
                        "{:<22}  {:<width$}  {:<19}  {:>9}  {status}  {units}",
                        line.id,
                        // A name is the config's text: escaped, so it cannot move the cursor.
                        crate::excerpt::clean_line(line.pipeline.unwrap_or("?")),
                        line.started.map_or_else(
                            || "-".to_owned(),
                            |ts| ts.format("%Y-%m-%d %H:%M:%S").to_string()
                        ),
                        duration,
                    )
                    .map_err(output)?;
                }
            }
        }
    }
    out.flush().map_err(output)?;
    Ok(Exit::Success)
}
