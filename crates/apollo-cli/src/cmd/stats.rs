//! `apollo stats [UNIT]`: each unit's history over a pipeline's last runs — duration
//! percentiles of its successful attempts, how often it failed or needed a retry — and a flag
//! on a `timeout` below 1.5 × its p95 (false timeouts ahead) or above 10 × it (failures found
//! late). The seed's first lesson: set each timeout to its real duration plus about 50%.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use apollo_runner::read::{self, UnitStats};
use apollo_store::{RunId, StateDir};

use crate::cmd::StateArgs;
use crate::cmd::replay::TableFormat;
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::progress::human_duration;
use crate::state;

/// Arguments of `apollo stats`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatsArgs {
    /// Only this unit
    #[arg(value_name = "UNIT")]
    pub(crate) unit: Option<String>,
    /// The pipeline [default: the latest run's]
    #[arg(long, value_name = "NAME")]
    pub(crate) pipeline: Option<String>,
    /// How many of its latest runs to look at
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) runs: u32,
    /// Which runs count: ordinary runs, reproductions (`apollo reproduce`), bisect steps
    /// (`apollo bisect`), or all
    #[arg(long, value_enum, default_value_t = KindFilter::Run)]
    pub(crate) kind: KindFilter,
    /// Output format
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub(crate) format: TableFormat,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

/// `stats --kind`: which kinds of run count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum KindFilter {
    /// Runs of the pipeline (`apollo run`)
    Run,
    /// Reproductions (`apollo reproduce`)
    Reproduction,
    /// Bisect steps (`apollo bisect`)
    Bisect,
    /// All of them
    All,
}

impl KindFilter {
    fn admits(self, kind: apollo_core::event::RunKind) -> bool {
        match self {
            KindFilter::Run => kind.is_run(),
            KindFilter::Reproduction => kind == apollo_core::event::RunKind::Reproduction,
            KindFilter::Bisect => kind == apollo_core::event::RunKind::Bisect,
            KindFilter::All => true,
        }
    }
}

/// The text table, and a line of advice per flagged timeout.
pub(crate) fn render_text(stats: &[UnitStats], n_runs: usize, pipeline: &str) -> String {
    let duration = |ms: Option<u64>| {
        ms.map_or_else(
            || "-".to_owned(),
            |ms| human_duration(Duration::from_millis(ms)),
        )
    };
    let width = stats
        .iter()
        .map(|unit| unit.unit.len())
        .max()
        .unwrap_or(4)
        .clamp(4, 40);
    let mut text = format!(
        "pipeline `{pipeline}`, last {n_runs} run{}\n{:<width$}  {:>4}  {:>8}  {:>8}  {:>8}  {:>8}  {:>5}  {:>5}  {:>8}\n",
        if n_runs == 1 { "" } else { "s" },
        "UNIT",
        "RUNS",
        "P50",
        "P90",
        "P95",
        "MAX",
        "FAIL",
        "RETRY",
        "TIMEOUT"
    );
    let mut advice = Vec::new();
    let human = |ms: u64| duration(Some(ms));
    for unit in stats {
        let percent = |rate: f64| format!("{:.0}%", rate * 100.0);
        text.push_str(&format!(
            "{:<width$}  {:>4}  {:>8}  {:>8}  {:>8}  {:>8}  {:>5}  {:>5}  {:>8}{}\n",
            unit.unit,
            unit.runs,
            duration(unit.p50_ms),
            duration(unit.p90_ms),
            duration(unit.p95_ms),
            duration(unit.max_ms),
            percent(unit.failure_rate),
            percent(unit.retry_rate),
            unit.timeout_ms
                .map_or_else(|| "none".to_owned(), |ms| duration(Some(ms))),
            match unit.timeout_flag {
                Some("too_tight") => "  ⚠ tight",
                Some(_) => "  ⚠ loose",
                None => "",
            }
        ));
        if let Some(line) = unit.advice(&human) {
            advice.push(format!("  {}: {line}", unit.unit));
        }
    }
    for line in advice {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// The cost table under the stats: each unit's mean cost per run it ran in, its total, and
/// what was wasted and saved, for people (`Money::human`).
pub(crate) fn render_cost_text(currency: Option<&str>, units: &[read::UnitCostStats]) -> String {
    let width = (units.iter().map(|unit| unit.unit.len()))
        .max()
        .unwrap_or(4)
        .clamp(4, 40);
    let mut text = format!(
        "cost{}\n{:<width$}  {:>4}  {:>12}  {:>12}  {:>12}  {:>12}\n",
        currency
            .map(|currency| format!(" ({currency})"))
            .unwrap_or_default(),
        "UNIT",
        "RUNS",
        "MEAN",
        "TOTAL",
        "WASTED",
        "SAVED"
    );
    for unit in units {
        text.push_str(&format!(
            "{:<width$}  {:>4}  {:>12}  {:>12}  {:>12}  {:>12}\n",
            unit.unit,
            unit.runs,
            unit.mean.human(),
            unit.total.human(),
            unit.wasted.human(),
            unit.saved.human()
        ));
    }
    text
}

/// The latest `n` runs of `pipeline` of the kinds `kind` admits (oldest first).
fn runs_of(
    state: &StateDir,
    pipeline: &str,
    kind: KindFilter,
    n: usize,
) -> Result<Vec<RunId>, CliError> {
    let mut ids: Vec<RunId> = state
        .list_runs()?
        .into_iter()
        .filter(|summary| summary.pipeline.as_deref() == Some(pipeline))
        .filter(|summary| kind.admits(summary.kind))
        .map(|summary| summary.id)
        .collect();
    let skip = ids.len().saturating_sub(n);
    ids.drain(..skip);
    Ok(ids)
}

/// `apollo stats`.
pub(crate) fn stats(
    args: &StatsArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
    let pipeline = match &args.pipeline {
        Some(name) => name.clone(),
        None => {
            let latest = state::resolve_run(&state, "latest")?;
            state::run_started(&state, &latest)?.pipeline
        }
    };
    let runs = runs_of(
        &state,
        &pipeline,
        args.kind,
        usize::try_from(args.runs).unwrap_or(usize::MAX),
    )?;
    let Some(latest) = runs.last() else {
        return Err(CliError::Usage {
            message: format!("no runs of pipeline `{pipeline}`"),
        });
    };
    let mut models = Vec::with_capacity(runs.len());
    for run in &runs {
        let model = read::run_model(&state, run)?;
        state::print_warnings(&model.warnings, stderr);
        models.push(model.timeline);
    }
    let mut stats = read::unit_stats(&models, &read::timeouts(&state, latest));
    let mut cost = read::unit_cost_stats(&state, &models, &read::CostReads::new());
    if let Some(unit) = &args.unit {
        if !stats.iter().any(|stats| &stats.unit == unit) {
            let names = stats.iter().map(|stats| stats.unit.as_str());
            let message = match state::closest(unit, names) {
                Some(close) => format!(
                    "unit `{unit}` did not run in the last {} runs of `{pipeline}`; did you mean `{close}`?",
                    runs.len()
                ),
                None => format!(
                    "unit `{unit}` did not run in the last {} runs of `{pipeline}`",
                    runs.len()
                ),
            };
            return Err(CliError::Usage { message });
        }
        stats.retain(|stats| &stats.unit == unit);
        if let Some((_, costs)) = &mut cost {
            costs.retain(|cost| &cost.unit == unit);
        }
    }
    let mut out = BufWriter::new(stdout);
    match args.format {
        TableFormat::Json => {
            let mut document = serde_json::json!({
                "schema": "apollo.stats/1",
                "pipeline": pipeline,
                "runs": runs.iter().map(RunId::as_str).collect::<Vec<_>>(),
                "units": stats,
            });
            if let Some((currency, units)) = &cost {
                document["cost"] = serde_json::json!({"currency": currency, "units": units});
            }
            serde_json::to_writer_pretty(&mut out, &document)
                .map_err(|error| output(error.into()))?;
            writeln!(out).map_err(output)?;
        }
        TableFormat::Text => {
            let mut text = render_text(&stats, runs.len(), &pipeline);
            if let Some((currency, units)) = &cost {
                text.push_str(&render_cost_text(currency.as_deref(), units));
            }
            out.write_all(text.as_bytes()).map_err(output)?;
        }
    }
    out.flush().map_err(output)?;
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers as `apollo_runner::read::unit_stats` gives them (its tests cover the sums).
    fn numbers(
        unit: &str,
        (p50, p95): (u64, u64),
        timeout: u64,
        flag: Option<&'static str>,
    ) -> UnitStats {
        UnitStats {
            unit: unit.to_owned(),
            runs: 20,
            samples: 20,
            p50_ms: Some(p50),
            p90_ms: Some(p95),
            p95_ms: Some(p95),
            max_ms: Some(p95),
            failure_rate: 0.05,
            retry_rate: 0.1,
            timeouts: 1,
            timeout_ms: Some(timeout),
            timeout_flag: flag,
            suggested_timeout_ms: flag.map(|_| (p95 * 3 / 2).div_ceil(1000) * 1000),
        }
    }

    #[test]
    fn the_stats_table_flags_tight_and_loose_timeouts() {
        let stats = [
            numbers("fetch", (10_000, 19_000), 20_000, Some("too_tight")),
            numbers("load", (500, 500), 3_600_000, Some("too_loose")),
            numbers("report", (2_000, 2_000), 4_000, None),
        ];
        insta::assert_snapshot!(render_text(&stats, 20, "etl"));
    }
}
