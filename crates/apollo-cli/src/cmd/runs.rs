//! `apollo runs`: every run of the state directory, newest last, with the run model's counts.

use std::io::{BufWriter, Write};
use std::path::Path;

use apollo_core::UnitState;

use crate::cmd::StateArgs;
use crate::cmd::replay::{TableFormat, color_stdout};
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::progress::human_duration;

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

/// A run's cost in the COST column: its total for people (`Money::human`) and the currency;
/// `-` without.
fn cost_text(line: &apollo_runner::read::RunLine) -> String {
    let Some(cost) = &line.cost else {
        return "-".to_owned();
    };
    let total = (cost["total"].as_str())
        .and_then(|total| total.parse::<apollo_core::cost::Money>().ok())
        .unwrap_or_default()
        .human();
    match cost["currency"].as_str() {
        Some(currency) => format!("{total} {currency}"),
        None => total,
    }
}

/// A reproduction's verdict in words, as every view says it (`apollo_replay::verdict_text`:
/// `reproduced`, or `not reproduced` and why).
pub(crate) fn verdict_text(verdict: &apollo_core::event::ReproductionCompared) -> String {
    apollo_replay::verdict_text(verdict)
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
    let summaries = apollo_runner::read::list_runs(&state, true)?;
    let holder_pid = state
        .lock_holder()
        .ok()
        .flatten()
        .and_then(|holder| holder.pid);
    let mut lines: Vec<apollo_runner::read::RunLine> =
        apollo_runner::read::run_lines(&state, &summaries, chrono::Utc::now())
            .into_iter()
            .filter(|line| {
                args.pipeline
                    .as_deref()
                    .is_none_or(|name| line.pipeline.as_deref() == Some(name))
            })
            .collect();
    // A run that ran with a price table (`cost:`) is folded and priced.
    let reads = apollo_runner::read::CostReads::new();
    apollo_runner::read::add_costs(&state, &summaries, &mut lines, &reads);
    let mut out = BufWriter::new(stdout);
    match args.format {
        TableFormat::Json => {
            let document = apollo_runner::read::runs_document(&lines);
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
                    .filter_map(|line| line.pipeline.as_deref().map(str::len))
                    .max()
                    .unwrap_or(8)
                    .max(8);
                // A PARAMS column only when some run has params.
                let any_params = lines.iter().any(|line| !line.params.is_empty());
                // A COST column only when some run has a cost.
                let costs: Vec<String> = lines.iter().map(cost_text).collect();
                let cost_width = costs.iter().map(|text| text.chars().count()).max();
                let cost_width = cost_width.filter(|_| lines.iter().any(|l| l.cost.is_some()));
                let cost_column = |text: &str| {
                    cost_width.map_or_else(String::new, |width| format!("{text:>width$}  "))
                };
                writeln!(
                    out,
                    "{:<22}  {:<width$}  {:<19}  {:>9}  {:<11}  {}units{}",
                    "RUN",
                    "PIPELINE",
                    "STARTED (UTC)",
                    "DURATION",
                    "STATUS",
                    cost_column("COST"),
                    if any_params { "  params" } else { "" }
                )
                .map_err(output)?;
                let color = color_stdout();
                for (line, cost) in lines.iter().zip(&costs) {
                    let duration = line.duration_ms.map_or_else(
                        || "-".to_owned(),
                        |ms| {
                            human_duration(std::time::Duration::from_millis(
                                ms.max(0).unsigned_abs(),
                            ))
                        },
                    );
                    // Reused units are done too, and counted apart. A reproduction says so first,
                    // with its verdict: its status is whether the attempt ran again, not whether
                    // it came out the same.
                    let mut units = String::new();
                    if line.kind != "run" {
                        units.push_str(&format!("{}: ", line.kind));
                    }
                    if let Some(verdict) = &line.reproduction {
                        units.push_str(&format!("{}; ", verdict_text(verdict)));
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
                    for state in [
                        UnitState::Running,
                        UnitState::CutOff,
                        UnitState::NeedsVerdict,
                    ] {
                        if counts.get(state) > 0 {
                            units.push_str(&format!(", {} {}", counts.get(state), state.label()));
                        }
                    }
                    if let Some(problem) = &line.problem {
                        units.push_str(&format!(" ({problem})"));
                    }
                    if let Some(Some(late)) = line.late_by_ms {
                        let late = human_duration(std::time::Duration::from_millis(late));
                        units.push_str(&format!(", LATE by {late}"));
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
                        units.push_str(&format!("  {}", params_text(&line.params)));
                    }
                    let cost = cost_column(cost);
                    writeln!(
                        out,
                        "{:<22}  {:<width$}  {:<19}  {:>9}  {status}  {cost}{units}",
                        line.id,
                        // A name is the config's text: escaped, so it cannot move the cursor.
                        crate::excerpt::clean_line(line.pipeline.as_deref().unwrap_or("?")),
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
