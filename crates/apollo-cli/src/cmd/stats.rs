//! `apollo stats [UNIT]`: each unit's history over a pipeline's last runs — duration
//! percentiles of its successful attempts, how often it failed or needed a retry — and a flag
//! on a `timeout` below 1.5 × its p95 (false timeouts ahead) or above 10 × it (failures found
//! late). The seed's first lesson: set each timeout to its real duration plus about 50%.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use apollo_core::event::AttemptStatus;
use apollo_replay::{AttemptState, Timeline, UnitStatus};
use apollo_store::{ReadOptions, RunId, StateDir};
use serde::Serialize;

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
    /// Which runs count: ordinary runs, reproductions (`apollo reproduce`), or both
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
    /// Both
    All,
}

impl KindFilter {
    fn admits(self, kind: apollo_core::event::RunKind) -> bool {
        match self {
            KindFilter::Run => kind.is_run(),
            KindFilter::Reproduction => !kind.is_run(),
            KindFilter::All => true,
        }
    }
}

/// Below this multiple of p95, a timeout will cut off ordinary runs.
const TIMEOUT_TIGHT: f64 = 1.5;
/// Above this multiple of p95, a timeout lets a hung unit hold its slot far too long.
const TIMEOUT_LOOSE: f64 = 10.0;

/// One unit's numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct UnitStats {
    pub(crate) unit: String,
    /// Runs (of those looked at) in which the unit ran.
    pub(crate) runs: usize,
    /// Successful attempts measured.
    pub(crate) samples: usize,
    pub(crate) p50_ms: Option<u64>,
    pub(crate) p90_ms: Option<u64>,
    pub(crate) p95_ms: Option<u64>,
    pub(crate) max_ms: Option<u64>,
    /// Share of its runs in which it failed for good (failed or timed out).
    pub(crate) failure_rate: f64,
    /// Share of its runs in which it needed more than one attempt.
    pub(crate) retry_rate: f64,
    /// Attempts that ended by the timeout.
    pub(crate) timeouts: usize,
    /// The unit's current `timeout` (the latest run's definition).
    pub(crate) timeout_ms: Option<u64>,
    /// `too_tight` (< 1.5 × p95), `too_loose` (> 10 × p95), or absent.
    pub(crate) timeout_flag: Option<&'static str>,
    /// 1.5 × p95, rounded up to a second, when the timeout is flagged.
    pub(crate) suggested_timeout_ms: Option<u64>,
}

/// The `q`-quantile (nearest rank) of sorted `values`.
fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// What one run says about each unit: its successful durations, whether it failed for good,
/// whether it took more than one attempt, how many attempts timed out.
#[derive(Default)]
struct History {
    durations: Vec<u64>,
    runs: usize,
    failed_runs: usize,
    retried_runs: usize,
    timeouts: usize,
}

fn add_run(histories: &mut BTreeMap<String, History>, timeline: &Timeline) {
    for unit in &timeline.units {
        if unit.attempts.is_empty() {
            continue;
        }
        let history = histories.entry(unit.name.clone()).or_default();
        history.runs += 1;
        if unit.attempts.len() > 1 {
            history.retried_runs += 1;
        }
        if matches!(unit.status, UnitStatus::Failed | UnitStatus::TimedOut) {
            history.failed_runs += 1;
        }
        for attempt in &unit.attempts {
            match attempt.state {
                AttemptState::Finished(AttemptStatus::Succeeded) => {
                    history.durations.push(attempt.duration_ms());
                }
                AttemptState::Finished(AttemptStatus::TimedOut) => history.timeouts += 1,
                _ => {}
            }
        }
    }
}

/// The numbers for each unit, given its current timeout.
fn compute(
    histories: BTreeMap<String, History>,
    timeouts: &BTreeMap<String, u64>,
) -> Vec<UnitStats> {
    histories
        .into_iter()
        .map(|(unit, mut history)| {
            history.durations.sort_unstable();
            let p95 = percentile(&history.durations, 0.95);
            let timeout_ms = timeouts.get(&unit).copied();
            let timeout_flag = match (timeout_ms, p95) {
                (Some(timeout), Some(p95)) if (timeout as f64) < TIMEOUT_TIGHT * p95 as f64 => {
                    Some("too_tight")
                }
                (Some(timeout), Some(p95)) if (timeout as f64) > TIMEOUT_LOOSE * p95 as f64 => {
                    Some("too_loose")
                }
                _ => None,
            };
            let suggested_timeout_ms = timeout_flag.and(p95).map(|p95| {
                let suggested = (TIMEOUT_TIGHT * p95 as f64).ceil() as u64;
                suggested.div_ceil(1000).max(1) * 1000
            });
            let rate = |count: usize| {
                if history.runs == 0 {
                    0.0
                } else {
                    count as f64 / history.runs as f64
                }
            };
            UnitStats {
                runs: history.runs,
                samples: history.durations.len(),
                p50_ms: percentile(&history.durations, 0.50),
                p90_ms: percentile(&history.durations, 0.90),
                p95_ms: p95,
                max_ms: history.durations.last().copied(),
                failure_rate: rate(history.failed_runs),
                retry_rate: rate(history.retried_runs),
                timeouts: history.timeouts,
                timeout_ms,
                timeout_flag,
                suggested_timeout_ms,
                unit,
            }
        })
        .collect()
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
        if let (Some(flag), Some(suggested), Some(p95)) =
            (unit.timeout_flag, unit.suggested_timeout_ms, unit.p95_ms)
        {
            let (bound, why) = if flag == "too_tight" {
                ("below 1.5", "ordinary runs will time out")
            } else {
                ("above 10", "a hung run holds its slot long before it fails")
            };
            advice.push(format!(
                "  {}: timeout {} is {bound} × its p95 of {}: {why}; `timeout: {}s` fits (p95 + 50%)",
                unit.unit,
                duration(unit.timeout_ms),
                duration(Some(p95)),
                suggested / 1000
            ));
        }
    }
    for line in advice {
        text.push_str(&line);
        text.push('\n');
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

/// Each unit's timeout in milliseconds, from the definition snapshot of `run`.
fn timeouts_of(state: &StateDir, run: &RunId) -> BTreeMap<String, u64> {
    let Some(definition) = state::run_started(state, run)
        .ok()
        .and_then(|started| state.read_blob(&started.definition_hash).ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
    else {
        return BTreeMap::new();
    };
    definition["units"]
        .as_array()
        .map(|units| {
            units
                .iter()
                .filter_map(|unit| {
                    Some((unit["name"].as_str()?.to_owned(), unit["timeout"].as_u64()?))
                })
                .collect()
        })
        .unwrap_or_default()
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
    let mut histories = BTreeMap::new();
    for run in &runs {
        let (mut reader, _) = state::read_records(&state, run, ReadOptions::default())?;
        let timeline = Timeline::from_records(&mut reader)?;
        state::print_warnings(&reader.take_warnings(), stderr);
        add_run(&mut histories, &timeline);
    }
    if let Some(unit) = &args.unit {
        if !histories.contains_key(unit) {
            let message = match state::closest(unit, histories.keys().map(String::as_str)) {
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
        histories.retain(|name, _| name == unit);
    }
    let stats = compute(histories, &timeouts_of(&state, latest));
    let mut out = BufWriter::new(stdout);
    match args.format {
        TableFormat::Json => {
            let document = serde_json::json!({
                "schema": "apollo.stats/1",
                "pipeline": pipeline,
                "runs": runs.iter().map(RunId::as_str).collect::<Vec<_>>(),
                "units": stats,
            });
            serde_json::to_writer_pretty(&mut out, &document)
                .map_err(|error| output(error.into()))?;
            writeln!(out).map_err(output)?;
        }
        TableFormat::Text => out
            .write_all(render_text(&stats, runs.len(), &pipeline).as_bytes())
            .map_err(output)?,
    }
    out.flush().map_err(output)?;
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<u64> = (1..=20).collect();
        assert_eq!(percentile(&values, 0.5), Some(10));
        assert_eq!(percentile(&values, 0.95), Some(19));
        assert_eq!(percentile(&[7], 0.95), Some(7));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn the_stats_table_flags_tight_and_loose_timeouts() {
        let mut histories = BTreeMap::new();
        histories.insert(
            "fetch".to_owned(),
            History {
                durations: (1..=20).map(|n| n * 1000).collect(),
                runs: 20,
                failed_runs: 1,
                retried_runs: 2,
                timeouts: 1,
            },
        );
        histories.insert(
            "load".to_owned(),
            History {
                durations: vec![500; 10],
                runs: 10,
                ..History::default()
            },
        );
        histories.insert(
            "report".to_owned(),
            History {
                durations: vec![2000; 5],
                runs: 5,
                ..History::default()
            },
        );
        let timeouts = BTreeMap::from([
            ("fetch".to_owned(), 20_000),
            ("load".to_owned(), 3_600_000),
            ("report".to_owned(), 4_000),
        ]);
        let stats = compute(histories, &timeouts);
        assert_eq!(stats[0].timeout_flag, Some("too_tight"));
        assert_eq!(stats[0].suggested_timeout_ms, Some(29_000));
        assert_eq!(stats[1].timeout_flag, Some("too_loose"));
        assert_eq!(stats[2].timeout_flag, None);
        insta::assert_snapshot!(render_text(&stats, 20, "etl"));
    }
}
