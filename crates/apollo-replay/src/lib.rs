//! apollo-replay: a run's journal as a timeline, two runs as a diff, and renderers for both.
//!
//! * [`Timeline`] — built by streaming a run's records ([`Timeline::from_records`] or
//!   [`TimelineBuilder`]): per unit its attempts (phases, status, exit, hashes, CPU, RSS,
//!   first error line), skips and human marks; the run's start, resumes and end. Attempts are
//!   laid out on parallel **lanes** (interval partitioning), and attempts apollo never saw
//!   finish are [`AttemptState::Unfinished`].
//! * Renderers of a run, all behind [`replay`] and [`Format`]:
//!   * [`write_text`] / [`TextRenderer`] — the aligned, optionally coloured text timeline of
//!     `apollo replay`; streams, so memory does not grow with the journal's length;
//!   * [`write_json`] — one JSON object per event (JSON Lines); streams too;
//!   * [`write_chrome_trace`] — a Trace Event Format document for Perfetto /
//!     chrome://tracing, one track per lane; streams too;
//!   * [`write_html`] — a self-contained HTML page with an SVG Gantt chart.
//! * [`RunDiff`] — two runs compared unit by unit: status, input (naming the components that
//!   changed: "input file data/raw.csv changed", "upstream fetch_data output changed"),
//!   output, duration; [`RunDiff::is_same`] decides `apollo diff`'s exit status. Rendered by
//!   [`write_diff_text`] and [`write_diff_json`].
//! * [`Filter`] — by unit and by time window ([`TimeBound`]: an instant, or an offset from
//!   the run's start such as `+01:30`, parsed from `--since`/`--until`).
//!
//! Input is any `IntoIterator<Item = Result<apollo_core::Record, E>>`, such as apollo-store's
//! journal reader; a read error stops rendering and comes back as [`ReplayError::Read`],
//! apart from write errors ([`ReplayError::Write`]; a closed pipe is
//! [`ReplayError::is_broken_pipe`]).
//!
//! # Example
//!
//! ```
//! use apollo_core::event::*;
//! use apollo_core::{Event, Phase};
//! use apollo_replay::{TextOptions, Timeline, write_text};
//! use apollo_core::Record;
//! use chrono::{DateTime, Utc};
//!
//! let at = |ms: i64| DateTime::<Utc>::from_timestamp_millis(1_796_000_000_000 + ms).unwrap();
//! let records = vec![
//!     Record { seq: 1, ts: at(0), event: Event::RunStarted(RunStarted {
//!         run_id: "20261130T021507Z-3f9a".into(), pipeline: "etl".into(),
//!         config_path: "pipeline.yaml".into(), config_hash: "c0".repeat(32),
//!         definition_hash: "d0".repeat(32), apollo_version: "0.1.0".into(),
//!         host: "box".into(), pid: 42, units: vec!["fetch".into()],
//!     }) },
//!     Record { seq: 2, ts: at(5), event: Event::UnitStarted(UnitStarted {
//!         unit: "fetch".into(), attempt: 1, input_hash: "ab".repeat(32), inputs: vec![],
//!     }) },
//!     Record { seq: 3, ts: at(1_255), event: Event::UnitFinished(UnitFinished {
//!         unit: "fetch".into(), attempt: 1, status: AttemptStatus::Succeeded,
//!         exit: Some(ExitStatus::Code(0)), failed_phase: None, timed_out: false,
//!         duration_ms: 1_250, queued_ms: 0, output_hash: Some("cd".repeat(32)), stdout_bytes: 10,
//!         stderr_bytes: 0, user_cpu_ms: 3, sys_cpu_ms: 1, max_rss_kib: 2048,
//!         leftovers_killed: 0,
//!         phases: vec![PhaseRecord { phase: Phase::Execute, offset_ms: 0,
//!             duration_ms: 1_250, exit: Some(ExitStatus::Code(0)), timed_out: false }],
//!         error: None,
//!     }) },
//! ];
//!
//! // The text timeline, streamed into any `io::Write`.
//! let mut out = Vec::new();
//! let reads = records.iter().cloned().map(Ok::<_, std::io::Error>);
//! write_text(reads, &mut out, &TextOptions::default()).unwrap();
//! let text = String::from_utf8(out).unwrap();
//! assert_eq!(text.lines().nth(3).unwrap(),
//!            "+00:01.255   fetch  #1  finish       1.250s  succeeded      out cdcdcdcd");
//!
//! // The same records as a timeline: one unit, one attempt on lane 0.
//! let timeline = Timeline::from_records(records.into_iter().map(Ok::<_, std::io::Error>)).unwrap();
//! assert_eq!(timeline.n_lanes, 1);
//! assert_eq!(timeline.unit("fetch").unwrap().attempts[0].duration_ms(), 1_250);
//! ```

#![warn(missing_docs)]

mod chrome;
mod diff;
mod display;
mod error;
mod filter;
mod html;
mod json;
mod text;
mod timeline;

#[cfg(test)]
mod browser_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

use std::io::Write;
use std::str::FromStr;

use apollo_core::Record;

pub use chrome::write_chrome_trace;
pub use diff::{
    Change, ComponentChange, InputChange, Presence, RunDiff, RunSide, UnitDiff, write_diff_json,
    write_diff_text,
};
pub use error::ReplayError;
pub use filter::{Filter, InvalidTimeBound, TimeBound};
pub use html::write_html;
pub use json::write_json;
pub use text::{TextOptions, TextRenderer, write_text};
pub use timeline::{
    Attempt, AttemptState, Mark, Resume, RunEnd, Skip, Timeline, TimelineBuilder, UnitStatus,
    UnitTimeline,
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
                .color(options.color);
            write_text(records, out, &text_options)
        }
        Format::Json => write_json(records, out, &options.filter),
        Format::ChromeTrace => write_chrome_trace(records, out, &options.filter),
        Format::Html => {
            let timeline = Timeline::from_records(records).map_err(ReplayError::Read)?;
            let timeline = if options.filter.is_all() {
                timeline
            } else {
                timeline.filtered(&options.filter)
            };
            write_html(&timeline, out)?;
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
    let timeline_a = Timeline::from_records(run_a)?;
    let timeline_b = Timeline::from_records(run_b)?;
    Ok(RunDiff::new(&timeline_a, &timeline_b))
}
