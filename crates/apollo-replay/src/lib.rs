#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod chrome;
mod cost;
mod diff;
mod display;
mod error;
mod export;
mod filter;
mod html;
mod json;
mod junit;
mod text;
mod timeline;

#[cfg(test)]
mod agreement_tests;
#[cfg(test)]
mod browser_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod reuse_view_tests;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

use std::io::Write;
use std::str::FromStr;

use apollo_core::Record;

pub use apollo_core::{UnitCounts, UnitState};
use chrono::{DateTime, Utc};

pub use chrome::{write_chrome_trace, write_chrome_trace_with_workers};
pub use cost::{AttemptCost, RunCost, UnitCost, attempt_usage};
pub use diff::{
    Change, ComponentChange, InputChange, ManifestLoader, Presence, RunDiff, RunSide, Side,
    UnitDiff, write_diff_json, write_diff_text,
};
pub use display::verdict_text;
pub use error::ReplayError;
pub use export::{
    CrateFile, DEFINITION_FILE, ExportFormat, RoCrate, UnknownExportFormat, ro_crate,
    write_openlineage, write_otlp_json, write_prov_json,
};
pub use filter::{Filter, InvalidTimeBound, TimeBound};
pub use html::{HtmlExtras, write_html, write_html_with};
pub use json::{EncodedRecord, JsonRecord, JsonRecords, write_json, write_json_records};
pub use junit::{ExcerptSource, write_junit};
pub use text::{TextOptions, TextRenderer, write_text};
pub use timeline::{
    Attempt, AttemptFiles, AttemptState, DeadlineStatus, Deadlines, Mark, Resume, Reused, RunEnd,
    RunFacts, Skip, Timeline, TimelineBuilder, UnitStatus, UnitTimeline,
};

/// An output format of `apollo replay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Format {
    /// The aligned text timeline.
    #[default]
    Text,
    /// One JSON object per event.
    Json,
    /// A Trace Event Format document (Perfetto, chrome://tracing).
    ChromeTrace,
    /// A self-contained HTML page with a Gantt chart.
    Html,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 4] = [
        Format::Text,
        Format::Json,
        Format::ChromeTrace,
        Format::Html,
    ];

    /// The format's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::ChromeTrace => "chrome-trace",
            Format::Html => "html",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A format name that is not one of [`Format::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown replay format `{0}` (expected text, json, chrome-trace or html)")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|format| format.as_str() == name)
            .ok_or_else(|| UnknownFormat(name.to_owned()))
    }
}

/// What [`replay`] renders, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplayOptions {
    /// The output format.
    pub format: Format,
    /// Which units and time window to show.
    pub filter: Filter,
    /// Colour the text format (ignored by the others).
    pub color: bool,
    /// The run is being run right now by the apollo with this pid (the reader checked its
    /// lock): the text format shows its open attempts as `running`, not `unfinished`.
    pub live: Option<u32>,
    /// At most this many attempts ran at once (the run's `max_parallel`): lanes in the Chrome
    /// trace and the HTML chart never outnumber them. `None`: unknown.
    pub workers: Option<usize>,
    /// When the reader looked at a live run ([`live`](Self::live)): the Chrome trace draws
    /// the run and its open attempts until then, as `running`, and the HTML report's duration
    /// runs until then (not cut short at the last record, like a killed run's).
    pub now: Option<DateTime<Utc>>,
    /// The run model's counts ([`Timeline::counts`]) and the sequence number of the run's
    /// last `run_finished` ([`Timeline::finished`]), when the caller has them: the text
    /// format's line for that record prints them as every other view does, rather than the
    /// tally the record carries (an earlier `run end`, before a resume, keeps its own).
    pub counts: Option<(u64, apollo_core::UnitCounts)>,
}

impl ReplayOptions {
    /// Options for `format`, showing everything, without colour.
    pub fn new(format: Format) -> Self {
        Self {
            format,
            ..Self::default()
        }
    }

    /// With this filter.
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filter = filter;
        self
    }

    /// With colour on or off.
    pub fn color(mut self, color: bool) -> Self {
        self.color = color;
        self
    }

    /// For a run that ran at most `workers` attempts at once (`None`: unknown).
    pub fn workers(mut self, workers: Option<usize>) -> Self {
        self.workers = workers;
        self
    }

    /// For a run being run now by the apollo with pid `pid` (`None`: it is not).
    pub fn live(mut self, pid: Option<u32>) -> Self {
        self.live = pid;
        self
    }

    /// With the run model's counts, for the run's final `run end` (see
    /// [`counts`](Self::counts)); nothing when the run has not finished.
    pub fn counts_of(mut self, model: &Timeline) -> Self {
        self.counts = model.finished.map(|end| (end.seq, model.counts()));
        self
    }

    /// Looked at `now` (see [`now`](Self::now)).
    pub fn now(mut self, now: DateTime<Utc>) -> Self {
        self.now = Some(now);
        self
    }
}

/// Renders a run's records in the chosen format: `apollo replay` in one call.
///
/// Text, JSON and Chrome trace stream record by record: memory is bounded by the attempts
/// running at once. HTML needs the whole picture (its time scale is the run's length), so it
/// first builds the run's [`Timeline`] (one entry per attempt), then keeps what the filter
/// selects.
pub fn replay<I, E, W>(records: I, out: W, options: &ReplayOptions) -> Result<(), ReplayError<E>>
where
    I: IntoIterator<Item = Result<Record, E>>,
    W: Write,
{
    match options.format {
        Format::Text => {
            let text_options = TextOptions::default()
                .filter(options.filter.clone())
                .color(options.color)
                .live(options.live)
                .counts(options.counts);
            write_text(records, out, &text_options)
        }
        Format::Json => write_json(records, out, &options.filter),
        Format::ChromeTrace => {
            let live_until = options.now.filter(|_| options.live.is_some());
            chrome::write_chrome_trace_live(
                records,
                out,
                &options.filter,
                options.workers,
                live_until,
            )
        }
        Format::Html => {
            let mut timeline = Timeline::from_records_with_workers(records, options.workers)
                .map_err(ReplayError::Read)?;
            timeline.live = options.live.is_some();
            let timeline = if options.filter.is_all() {
                timeline
            } else {
                timeline.filtered(&options.filter)
            };
            let extras = options
                .now
                .map_or_else(HtmlExtras::new, |now| HtmlExtras::new().now(now));
            write_html_with(&timeline, out, &extras)?;
            Ok(())
        }
    }
}

/// Builds both runs' timelines and compares them: `apollo diff A B` in one call. A read error
/// from either run stops the diff.
pub fn diff_records<A, B, E>(run_a: A, run_b: B) -> Result<RunDiff, E>
where
    A: IntoIterator<Item = Result<Record, E>>,
    B: IntoIterator<Item = Result<Record, E>>,
{
    RunDiff::from_records(run_a, run_b, &diff::NoManifests)
}

/// [`diff_records`], reading with `manifests` the input lists of units whose input changed
/// and whose records keep them in an input manifest (as `apollo diff` does).
pub fn diff_records_with_manifests<A, B, E>(
    run_a: A,
    run_b: B,
    manifests: &dyn ManifestLoader,
) -> Result<RunDiff, E>
where
    A: IntoIterator<Item = Result<Record, E>>,
    B: IntoIterator<Item = Result<Record, E>>,
{
    RunDiff::from_records(run_a, run_b, manifests)
}
