//! `apollo runs`, `apollo replay`, `apollo diff`: the recorded runs, one run as a timeline, and
//! two runs compared unit by unit.

use std::io::{BufWriter, IsTerminal, Write};
use std::path::Path;

use apollo_core::event::InputManifestRef;
use apollo_replay::{Filter, Format, ReplayError, ReplayOptions, TimeBound};
use apollo_store::{ReadOptions, StoreError};
use serde::Serialize;

use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::progress::human_duration;
use crate::state;

/// Output formats of `runs` and `diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TableFormat {
    /// Aligned text for people
    Text,
    /// JSON for tools
    Json,
}

/// Output formats of `replay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ReplayFormat {
    /// An aligned timeline: offset, unit, attempt, event, duration, status, hashes, errors
    Text,
    /// One JSON object per event
    Json,
    /// A Trace Event file for Perfetto / chrome://tracing, one track per parallel lane
    ChromeTrace,
    /// A self-contained HTML page with a Gantt chart
    Html,
}

/// Arguments of `apollo runs`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunsArgs {
    /// Only runs of this pipeline
    #[arg(long, value_name = "NAME")]
    pub(crate) pipeline: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub(crate) format: TableFormat,
}

/// Arguments of `apollo replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The run: an id, a unique prefix, `latest` or `latest~N`
    #[arg(value_name = "RUN", default_value = "latest")]
    pub(crate) run: String,
    /// Only these units
    #[arg(long, value_name = "UNIT")]
    pub(crate) unit: Vec<String>,
    /// Only events from this moment: an offset from the run's start (`+90s`, `+01:30`) or an RFC 3339 time
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub(crate) since: Option<String>,
    /// Only events up to this moment (same forms as --since)
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub(crate) until: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value_t = ReplayFormat::Text)]
    pub(crate) format: ReplayFormat,
    /// Read past corrupt records (with a warning each) instead of stopping at the first
    #[arg(long)]
    pub(crate) salvage: bool,
}

/// Arguments of `apollo diff`.
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// The first run (an id, a unique prefix, `latest` or `latest~N`)
    #[arg(value_name = "RUN_A")]
    pub(crate) run_a: String,
    /// The second run
    #[arg(value_name = "RUN_B")]
    pub(crate) run_b: String,
    /// Output format
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub(crate) format: TableFormat,
}

/// Whether to colour text on stdout: a terminal, and `NO_COLOR` unset.
pub(crate) fn color_stdout() -> bool {
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
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
    units: usize,
    succeeded: u32,
    failed: u32,
    skipped: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<&'a str>,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    params: &'a std::collections::BTreeMap<String, serde_json::Value>,
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

/// `apollo runs`.
pub(crate) fn runs(
    args: &RunsArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = state::open_existing(&state::state_dir_path(state_dir, None))?;
    let summaries = state.list_runs()?;
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
            duration_ms: summary
                .started
                .zip(summary.finished.or(summary.last_record))
                .map(|(start, end)| (end - start).num_milliseconds()),
            status: summary.state.as_str(),
            units: summary.n_units,
            succeeded: summary.succeeded,
            failed: summary.failed,
            skipped: summary.skipped,
            problem: summary.problem.as_deref(),
            params: &summary.params,
        })
        .collect();
    let mut out = BufWriter::new(stdout);
    match args.format {
        TableFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &lines).map_err(|error| output(error.into()))?;
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
                for line in &lines {
                    let duration = line.duration_ms.map_or_else(
                        || "-".to_owned(),
                        |ms| {
                            human_duration(std::time::Duration::from_millis(
                                ms.max(0).unsigned_abs(),
                            ))
                        },
                    );
                    let mut units = format!("{}/{} ok", line.succeeded, line.units);
                    if line.failed > 0 {
                        units.push_str(&format!(", {} failed", line.failed));
                    }
                    if line.skipped > 0 {
                        units.push_str(&format!(", {} skipped", line.skipped));
                    }
                    if let Some(problem) = line.problem {
                        units.push_str(&format!(" ({problem})"));
                    }
                    if !line.params.is_empty() {
                        units.push_str(&format!("  {}", params_text(line.params)));
                    }
                    writeln!(
                        out,
                        "{:<22}  {:<width$}  {:<19}  {:>9}  {:<11}  {units}",
                        line.id,
                        line.pipeline.unwrap_or("?"),
                        line.started.map_or_else(
                            || "-".to_owned(),
                            |ts| ts.format("%Y-%m-%d %H:%M:%S").to_string()
                        ),
                        duration,
                        line.status
                    )
                    .map_err(output)?;
                }
            }
        }
    }
    out.flush().map_err(output)?;
    Ok(Exit::Success)
}

fn parse_bound(flag: &str, text: &str) -> Result<TimeBound, CliError> {
    text.parse::<TimeBound>().map_err(|error| CliError::Usage {
        message: format!("{flag} {text}: {error}"),
    })
}

fn replay_error(error: ReplayError<StoreError>) -> CliError {
    match error {
        ReplayError::Read(error) => CliError::Store(error),
        ReplayError::Write(error) => output(error),
        other => CliError::Usage {
            message: other.to_string(),
        },
    }
}

/// `apollo replay`.
pub(crate) fn replay(
    args: &ReplayArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = state::open_existing(&state::state_dir_path(state_dir, None))?;
    let run_id = state::resolve_run(&state, &args.run)?;
    let mut filter = Filter::all();
    if !args.unit.is_empty() {
        let units = state::run_started(&state, &run_id)?.units;
        if let Some(unknown) = args.unit.iter().find(|unit| !units.contains(unit)) {
            return Err(CliError::Usage {
                message: format!(
                    "run {run_id} has no unit `{unknown}`; its units: {}",
                    units.join(", ")
                ),
            });
        }
    }
    for unit in &args.unit {
        filter = filter.unit(unit.clone());
    }
    let since = args
        .since
        .as_deref()
        .map(|text| parse_bound("--since", text))
        .transpose()?;
    if let Some(since) = since {
        filter = filter.since(since);
    }
    if let Some(until) = &args.until {
        filter = filter.until(parse_bound("--until", until)?);
    }
    let format = match args.format {
        ReplayFormat::Text => Format::Text,
        ReplayFormat::Json => Format::Json,
        ReplayFormat::ChromeTrace => Format::ChromeTrace,
        ReplayFormat::Html => Format::Html,
    };
    let options = ReplayOptions::new(format)
        .filter(filter)
        .color(format == Format::Text && color_stdout());
    let read_options = ReadOptions::default().salvage(args.salvage);
    let (mut reader, _) = state::read_records(&state, &run_id, read_options.clone())?;
    let Some(since) = since else {
        let result = apollo_replay::replay(&mut reader, BufWriter::new(stdout), &options);
        state::print_warnings(&reader.take_warnings(), stderr);
        result.map_err(replay_error)?;
        return Ok(Exit::Success);
    };
    // With --since, the store opens only the segments that reach the window. The run's first
    // record still leads the stream: it is the origin relative bounds count from, and the
    // renderers need it. (--until stays with the renderer's filter, so an attempt that ends
    // after it keeps its finish.)
    let first = reader.next().transpose()?;
    state::print_warnings(&reader.take_warnings(), stderr);
    drop(reader);
    let window = match &first {
        Some(first) => read_options.since(since.resolve(first.ts)),
        None => read_options,
    };
    let (mut reader, _) = state::read_records(&state, &run_id, window)?;
    let first_seq = first.as_ref().map_or(0, |first| first.seq);
    let records = first.into_iter().map(Ok).chain(
        (&mut reader).filter(|record| !matches!(record, Ok(record) if record.seq <= first_seq)),
    );
    let result = apollo_replay::replay(records, BufWriter::new(stdout), &options);
    state::print_warnings(&reader.take_warnings(), stderr);
    result.map_err(replay_error)?;
    Ok(Exit::Success)
}

/// `apollo diff`: exit 0 when every unit's status, input hash and output hash match, 1 when not.
pub(crate) fn diff(
    args: &DiffArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = state::open_existing(&state::state_dir_path(state_dir, None))?;
    let run_a = state::resolve_run(&state, &args.run_a)?;
    let run_b = state::resolve_run(&state, &args.run_b)?;
    let (mut reader_a, _) = state::read_records(&state, &run_a, ReadOptions::default())?;
    let (mut reader_b, _) = state::read_records(&state, &run_b, ReadOptions::default())?;
    // Input lists too large for a record are in their run's manifest files.
    let run_dirs = [&run_a, &run_b].map(|run| state.runs_dir().join(run.as_str()));
    let manifests = |side: apollo_replay::Side, reference: &InputManifestRef| {
        let run_dir = match side {
            apollo_replay::Side::A => &run_dirs[0],
            _ => &run_dirs[1],
        };
        apollo_store::read_input_manifest(run_dir, reference).map_err(|error| error.to_string())
    };
    let diff =
        apollo_replay::diff_records_with_manifests(&mut reader_a, &mut reader_b, &manifests)?;
    state::print_warnings(&reader_a.take_warnings(), stderr);
    state::print_warnings(&reader_b.take_warnings(), stderr);
    let mut out = BufWriter::new(stdout);
    match args.format {
        TableFormat::Text => apollo_replay::write_diff_text(&diff, &mut out, color_stdout()),
        TableFormat::Json => apollo_replay::write_diff_json(&diff, &mut out),
    }
    .map_err(output)?;
    out.flush().map_err(output)?;
    Ok(if diff.is_same() {
        Exit::Success
    } else {
        Exit::Failure
    })
}
