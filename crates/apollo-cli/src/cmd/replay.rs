//! `apollo runs`, `apollo replay`, `apollo diff`: the recorded runs, one run as a timeline, and
//! two runs compared unit by unit.

use std::io::{BufWriter, Write};
use std::path::Path;

use apollo_core::event::InputManifestRef;
use apollo_replay::{
    EncodedRecord, Filter, Format, JsonRecord, JsonRecords, ReplayError, ReplayOptions, TimeBound,
};
use apollo_store::{JournalReader, ReadOptions, StoreError, StoredRecord};
use serde::Serialize;

use crate::cmd::StateArgs;
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
    /// JUnit XML for CI test reporters: one test case per unit, failures with the end of their stderr, retries as flaky
    Junit,
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
    #[command(flatten)]
    pub(crate) state: StateArgs,
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
    #[command(flatten)]
    pub(crate) state: StateArgs,
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
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

/// Whether to colour text on stdout (`--color`, `NO_COLOR`, `CLICOLOR_FORCE`, a terminal).
pub(crate) fn color_stdout() -> bool {
    crate::color::stdout()
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
    succeeded: u32,
    /// Reused from earlier runs (not in `succeeded`).
    reused: u32,
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
    let state = args.state.open(state_dir)?;
    let summaries = state.list_runs()?;
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
            succeeded: summary.succeeded,
            reused: summary.reused,
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
                    units += &format!(
                        "{}/{} ok",
                        line.succeeded.saturating_add(line.reused),
                        line.units
                    );
                    if line.reused > 0 {
                        units.push_str(&format!(" ({} reused)", line.reused));
                    }
                    if line.failed > 0 {
                        units.push_str(&format!(", {} failed", line.failed));
                    }
                    if line.skipped > 0 {
                        units.push_str(&format!(", {} skipped", line.skipped));
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
    let state = args.state.open(state_dir)?;
    let run_id = state::resolve_run(&state, &args.run)?;
    let mut filter = Filter::all();
    if !args.unit.is_empty() {
        let units = state::run_started(&state, &run_id)?.units;
        if let Some(unknown) = args.unit.iter().find(|unit| !units.contains(unit)) {
            let message = match state::closest(unknown, units.iter().map(String::as_str)) {
                Some(close) => {
                    format!("run {run_id} has no unit `{unknown}`; did you mean `{close}`?")
                }
                None => format!(
                    "run {run_id} has no unit `{unknown}`; its units: {}",
                    units.join(", ")
                ),
            };
            return Err(CliError::Usage { message });
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
        ReplayFormat::Junit => {
            let mut out = BufWriter::new(stdout);
            write_junit_report(&state, &run_id, &mut out, stderr)?;
            out.flush().map_err(output)?;
            return Ok(Exit::Success);
        }
    };
    let options = ReplayOptions::new(format)
        .filter(filter)
        .color(format == Format::Text && color_stdout())
        .live(crate::cmd::logs::live_holder_pid(&state, &run_id))
        .workers(run_workers(&state, &run_id));
    let run_dir = state.run_dir(&run_id)?;
    let excerpts = |unit: &str, attempt: u32| excerpt_of(&run_dir, unit, attempt);
    let definition = if format == Format::Html {
        html_definition(&state, &run_id)
    } else {
        HtmlDefinition::default()
    };
    let read_options = ReadOptions::default().salvage(args.salvage);
    let (mut reader, _) = state::read_records(&state, &run_id, read_options.clone())?;
    let Some(since) = since else {
        let result = if format == Format::Json {
            let mut records = StoredJson {
                first: None,
                reader: &mut reader,
            };
            write_json(&mut records, stdout, &options.filter)
        } else {
            render(
                &mut reader,
                BufWriter::new(stdout),
                &options,
                (&excerpts, &definition),
            )
        };
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
    if let Some(first) = &first {
        reader.skip_through(first.seq);
    }
    let result = if format == Format::Json {
        let mut records = StoredJson {
            first,
            reader: &mut reader,
        };
        write_json(&mut records, stdout, &options.filter)
    } else {
        let records = first.into_iter().map(Ok).chain(&mut reader);
        render(
            records,
            BufWriter::new(stdout),
            &options,
            (&excerpts, &definition),
        )
    };
    state::print_warnings(&reader.take_warnings(), stderr);
    result.map_err(replay_error)?;
    Ok(Exit::Success)
}

/// `--format json`: the records the journal holds in the writer's exact form are copied out
/// as they are stored instead of being decoded and encoded again (the same bytes, a fraction
/// of the work); the others are decoded.
fn write_json(
    records: &mut StoredJson<'_>,
    stdout: &mut dyn Write,
    filter: &Filter,
) -> Result<(), ReplayError<StoreError>> {
    let out = BufWriter::with_capacity(JSON_BUFFER_BYTES, stdout);
    apollo_replay::write_json_records(records, out, filter)
}

/// The output buffer of `--format json`: a million records are half a gigabyte of JSON.
const JSON_BUFFER_BYTES: usize = 256 * 1024;

/// A run's records for `apollo_replay::write_json_records`: `first` (read apart, with
/// `--since`), then the reader's.
struct StoredJson<'r> {
    first: Option<apollo_core::Record>,
    reader: &'r mut JournalReader,
}

impl JsonRecords for StoredJson<'_> {
    type Error = StoreError;

    fn next_record(&mut self) -> Option<Result<JsonRecord<'_>, StoreError>> {
        if let Some(first) = self.first.take() {
            return Some(Ok(JsonRecord::Decoded(first)));
        }
        Some(self.reader.next_stored()?.map(|record| match record {
            StoredRecord::Decoded(record) => JsonRecord::Decoded(record),
            StoredRecord::Verbatim(record) => JsonRecord::Encoded(EncodedRecord::new(
                record.seq(),
                record.ts(),
                record.ts_text(),
                Some(record.unit()),
                record.event_fields(),
            )),
        }))
    }
}

/// `apollo_replay::replay`, except that the HTML page also shows the end of each failed
/// unit's stderr (which replay, reading no files, cannot fetch itself).
fn render<I, W>(
    records: I,
    mut out: W,
    options: &ReplayOptions,
    (excerpts, extras): (apollo_replay::ExcerptSource<'_>, &HtmlDefinition),
) -> Result<(), ReplayError<StoreError>>
where
    I: IntoIterator<Item = Result<apollo_core::Record, StoreError>>,
    W: Write,
{
    if options.format != Format::Html {
        return apollo_replay::replay(records, out, options);
    }
    let timeline = apollo_replay::Timeline::from_records_with_workers(records, options.workers)
        .map_err(ReplayError::Read)?;
    let timeline = if options.filter.is_all() {
        timeline
    } else {
        timeline.filtered(&options.filter)
    };
    apollo_replay::write_html_with(&timeline, &mut out, &extras.extras().excerpts(excerpts))
        .map_err(ReplayError::Write)
}

/// What the HTML page takes from the run's definition snapshot: each unit's timeout and deps.
#[derive(Debug, Clone, Default)]
struct HtmlDefinition {
    timeouts_ms: std::collections::HashMap<String, u64>,
    deps: std::collections::HashMap<String, Vec<String>>,
}

impl HtmlDefinition {
    fn extras(&self) -> apollo_replay::HtmlExtras<'static> {
        apollo_replay::HtmlExtras::new()
            .timeouts_ms(self.timeouts_ms.clone())
            .deps(self.deps.clone())
    }
}

/// The units' timeouts and deps from the definition snapshot of `run_id` (empty when it
/// cannot be read).
fn html_definition(state: &apollo_store::StateDir, run_id: &apollo_store::RunId) -> HtmlDefinition {
    let Some(definition) = state::run_started(state, run_id)
        .ok()
        .and_then(|started| state.read_blob(&started.definition_hash).ok())
        .and_then(|bytes| serde_json::from_slice::<apollo_core::Pipeline>(&bytes).ok())
    else {
        return HtmlDefinition::default();
    };
    HtmlDefinition {
        timeouts_ms: definition
            .units
            .iter()
            .filter_map(|unit| {
                Some((
                    unit.name.clone(),
                    u64::try_from(unit.timeout?.as_millis()).ok()?,
                ))
            })
            .collect(),
        deps: definition
            .units
            .iter()
            .map(|unit| (unit.name.clone(), unit.deps.clone()))
            .collect(),
    }
}

/// The end of an attempt's captured stderr (or stdout), as the HTML and JUnit reports show it.
fn excerpt_of(run: &apollo_store::RunDir, unit: &str, attempt: u32) -> Option<String> {
    // The attempt's folder as the store names it: a fan-out instance `load[eu]` is
    // `units/load__eu/` (issue 35: instances had no excerpt).
    let dir = run.attempt_log_dir(unit, attempt).ok()?;
    crate::excerpt::of_attempt(&dir, JUNIT_EXCERPT_LINES).map(|excerpt| {
        let mut text = excerpt.lines.join("\n");
        text.push('\n');
        text
    })
}

/// Writes run `run_id` as JUnit XML to `out`, with the end of each failed attempt's stderr.
pub(crate) fn write_junit_report(
    state: &apollo_store::StateDir,
    run_id: &apollo_store::RunId,
    out: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<(), CliError> {
    let (mut reader, _) = state::read_records(state, run_id, ReadOptions::default())?;
    let timeline = apollo_replay::Timeline::from_records(&mut reader)?;
    state::print_warnings(&reader.take_warnings(), stderr);
    let run_dir = state.run_dir(run_id)?;
    let excerpts = |unit: &str, attempt: u32| excerpt_of(&run_dir, unit, attempt);
    apollo_replay::write_junit(&timeline, out, &excerpts).map_err(output)
}

/// How many lines of a failed attempt's output a JUnit report carries.
const JUNIT_EXCERPT_LINES: usize = 40;

/// How many attempts the run could run at once: `max_parallel` of the definition it started
/// with (its snapshot in the blob store). `None` when the snapshot cannot be read. (A run
/// started with a larger `-j` than its config's is drawn on the config's number of lanes.)
pub(crate) fn run_workers(
    state: &apollo_store::StateDir,
    run_id: &apollo_store::RunId,
) -> Option<usize> {
    let started = state::run_started(state, run_id).ok()?;
    let definition = state.read_blob(&started.definition_hash).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&definition).ok()?;
    value
        .get("max_parallel")?
        .as_u64()
        .and_then(|workers| usize::try_from(workers).ok())
}

/// Each unit's commands, by (unit, phase), from the definition snapshot `run` started with;
/// `None` when it cannot be read.
fn definition_commands(
    state: &apollo_store::StateDir,
    run: &apollo_store::RunId,
) -> Option<std::collections::HashMap<(String, String), apollo_core::Command>> {
    let started = state::run_started(state, run).ok()?;
    let definition = state.read_blob(&started.definition_hash).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&definition).ok()?;
    let mut commands = std::collections::HashMap::new();
    for unit in value.get("units")?.as_array()? {
        let Some(name) = unit.get("name").and_then(serde_json::Value::as_str) else {
            continue;
        };
        for phase in ["prepare", "execute", "cleanup"] {
            if let Some(command) = unit
                .get(phase)
                .and_then(|command| serde_json::from_value(command.clone()).ok())
            {
                commands.insert((name.to_owned(), phase.to_owned()), command);
            }
        }
    }
    Some(commands)
}

/// `apollo diff`: exit 0 when every unit's status, input hash and output hash match, 1 when not.
pub(crate) fn diff(
    args: &DiffArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
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
    let mut diff =
        apollo_replay::diff_records_with_manifests(&mut reader_a, &mut reader_b, &manifests)?;
    // A command that changed only because values are now quoted says so (DESIGN §18): read
    // run B's definition only when a command changed.
    let command_changed = diff.units.iter().any(|unit| {
        (unit.input_changes.iter())
            .any(|change| change.kind == apollo_core::event::InputKind::Command)
    });
    if command_changed && let Some(commands) = definition_commands(&state, &run_b) {
        diff.mark_quoting_changes(&|unit, phase| {
            commands.get(&(unit.to_owned(), phase.to_owned())).cloned()
        });
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use apollo_core::Event;
    use apollo_core::testing::EVERY_KIND_JSONL as EVERY_KIND;
    use apollo_store::{Durability, JournalWriter, StateDir, WriterOptions};

    /// A state directory holding one run whose journal has every kind of record, several
    /// times, over several segments.
    fn every_kind_run() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let id = state.new_run_id();
        let run_dir = state.create_run(&id).unwrap();
        let mut writer = JournalWriter::create(
            run_dir.path(),
            id.as_str(),
            WriterOptions::default()
                .durability(Durability::None)
                .segment_max_bytes(3_000),
        )
        .unwrap();
        for repetition in 0..3 {
            for line in EVERY_KIND.lines().filter(|line| !line.is_empty()) {
                let event: Event = serde_json::from_str(line).unwrap();
                if repetition > 0 && matches!(event, Event::RunStarted(_)) {
                    continue;
                }
                writer.append_batch(&[event]).unwrap();
            }
        }
        drop(writer);
        let run_dir = run_dir.path().to_path_buf();
        (dir, run_dir)
    }

    fn cli_json(state_dir: &Path, unit: Vec<String>, since: Option<&str>) -> String {
        let args = ReplayArgs {
            run: "latest".to_owned(),
            unit,
            since: since.map(str::to_owned),
            until: None,
            format: ReplayFormat::Json,
            salvage: false,
            state: StateArgs::default(),
        };
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let exit = replay(&args, Some(state_dir), &mut stdout, &mut stderr).unwrap();
        assert_eq!(exit, Exit::Success, "{}", String::from_utf8_lossy(&stderr));
        String::from_utf8(stdout).unwrap()
    }

    /// The general path: every record decoded, then serialized.
    fn general_json(run_dir: &Path, filter: &Filter) -> String {
        let reader = JournalReader::open(run_dir, ReadOptions::default()).unwrap();
        let mut out = Vec::new();
        apollo_replay::write_json(reader, &mut out, filter).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn replay_json_is_byte_identical_to_decoding_and_serializing_every_record() {
        let (dir, run_dir) = every_kind_run();
        let all = cli_json(dir.path(), Vec::new(), None);
        assert_eq!(all, general_json(&run_dir, &Filter::all()));
        assert_eq!(all.lines().count(), 19 + 2 * 18);
        assert_eq!(
            cli_json(dir.path(), vec!["a".to_owned(), "c".to_owned()], None),
            general_json(&run_dir, &Filter::all().unit("a").unit("c"))
        );
        // --since: the run's first record, then the window (read from a later segment).
        let late_ts = JournalReader::open(&run_dir, ReadOptions::default())
            .unwrap()
            .nth(40)
            .unwrap()
            .unwrap()
            .ts;
        let since = late_ts.to_rfc3339();
        let windowed = cli_json(dir.path(), Vec::new(), Some(&since));
        assert_eq!(
            windowed,
            general_json(&run_dir, &Filter::all().since(late_ts))
        );
        assert!(windowed.lines().count() >= 11, "{windowed}");
    }
}
