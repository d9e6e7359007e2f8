//! `apollo runs`, `apollo replay`, `apollo diff`: the recorded runs, one run as a timeline, and
//! two runs compared unit by unit.

use std::io::{BufWriter, Write};
use std::path::Path;

use apollo_replay::{
    EncodedRecord, Filter, Format, JsonRecord, JsonRecords, ReplayError, ReplayOptions, TimeBound,
};
use apollo_store::{JournalReader, ReadOptions, StoreError, StoredRecord};

use crate::cmd::StateArgs;
use crate::error::{CliError, output};
use crate::exit::Exit;
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

/// Arguments of `apollo replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The run: an id, a unique prefix or suffix, `latest`, `latest~N` or `last-success`
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
    /// The first run (an id, a unique prefix or suffix, `latest`, `latest~N` or `last-success`)
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
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
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
    let mut options = ReplayOptions::new(format)
        .filter(filter)
        .color(format == Format::Text && color_stdout())
        .live(crate::cmd::logs::live_holder_pid(&state, &run_id))
        .workers(run_workers(&state, &run_id))
        .now(chrono::Utc::now());
    // The `run end` line prints the run model's counts, as `runs` and `show` do.
    if format == Format::Text
        && let Ok(model) = state::run_model(&state, &run_id, &mut std::io::sink())
    {
        options = options.counts_of(&model);
    }
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
    let mut timeline = apollo_replay::Timeline::from_records_with_workers(records, options.workers)
        .map_err(ReplayError::Read)?;
    timeline.live = options.live.is_some();
    timeline.set_not_idempotent(extras.not_idempotent.iter().map(String::as_str));
    let timeline = if options.filter.is_all() {
        timeline
    } else {
        timeline.filtered(&options.filter)
    };
    let mut html_extras = extras.extras().excerpts(excerpts);
    if let Some(now) = options.now {
        html_extras = html_extras.now(now);
    }
    apollo_replay::write_html_with(&timeline, &mut out, &html_extras).map_err(ReplayError::Write)
}

/// What the HTML page takes from the run's definition snapshot: each unit's timeout and deps.
#[derive(Debug, Clone, Default)]
struct HtmlDefinition {
    timeouts_ms: std::collections::HashMap<String, u64>,
    deps: std::collections::HashMap<String, Vec<String>>,
    /// The `idempotent: false` units: a cut-off attempt of one needs a verdict.
    not_idempotent: Vec<String>,
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
        not_idempotent: (definition.units.iter())
            .filter(|unit| !unit.idempotent)
            .map(|unit| unit.name.clone())
            .collect(),
    }
}

/// The end of an attempt's captured stderr (or stdout), as the HTML and JUnit reports show it.
fn excerpt_of(run: &apollo_store::RunDir, unit: &str, attempt: u32) -> Option<String> {
    // The attempt's folder as the store names it: a fan-out instance `load[eu]` is
    // `units/load__eu/` (issue 35: instances had no excerpt).
    let dir = run.attempt_dir(unit, attempt).ok()?;
    crate::excerpt::of_attempt(dir.path(), JUNIT_EXCERPT_LINES).map(|excerpt| {
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
    let timeline = state::run_model(state, run_id, stderr)?;
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
