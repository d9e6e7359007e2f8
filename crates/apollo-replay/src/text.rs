//! The streaming text timeline (`apollo replay`): one aligned line per event.
//!
//! This file holds the public face ([`TextOptions`], [`write_text`], [`TextRenderer`]) and the
//! dispatch from a record to its kind's method. What each record kind writes lives in
//! `records.rs`, one method per kind; how a line is laid out (columns, widths, colours) lives
//! in `line.rs`.

mod line;
mod records;

use std::collections::HashMap;
use std::io::{self, Write};

use apollo_core::Record;
use apollo_core::event::Event;
use chrono::{DateTime, Utc};

use self::line::{MAX_UNIT_WIDTH, MIN_UNIT_WIDTH};
use self::records::Context;
pub(crate) use self::records::describe_exit;
use crate::display::offset_ms;
use crate::{Filter, ReplayError};

/// How the text timeline is rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TextOptions {
    /// Which records to show.
    pub filter: Filter,
    /// Colour statuses with ANSI escapes (the CLI decides from the terminal and `NO_COLOR`).
    pub color: bool,
    /// Show one line per phase under each finished attempt.
    pub phases: bool,
    /// The run is being run right now, by the apollo with this pid: its open attempts are
    /// `running`, not `unfinished` (the reader found the run's lock held; see
    /// [`ReplayOptions::live`](crate::ReplayOptions::live)).
    pub live: Option<u32>,
    /// The run model's counts, printed by the `run end` line (see
    /// [`ReplayOptions::counts`](crate::ReplayOptions::counts)); without them, the tally of the
    /// `run_finished` record.
    pub counts: Option<(u64, apollo_core::UnitCounts)>,
}

impl Default for TextOptions {
    fn default() -> Self {
        Self {
            filter: Filter::all(),
            color: false,
            phases: true,
            live: None,
            counts: None,
        }
    }
}

impl TextOptions {
    /// Options with this filter.
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filter = filter;
        self
    }

    /// Options with colour on or off.
    pub fn color(mut self, color: bool) -> Self {
        self.color = color;
        self
    }

    /// Options for a run being run now by the apollo with pid `pid` (`None`: not running).
    pub fn live(mut self, pid: Option<u32>) -> Self {
        self.live = pid;
        self
    }

    /// Options whose final `run end` line (the record with that sequence number) prints the
    /// run model's `counts`.
    pub fn counts(mut self, counts: Option<(u64, apollo_core::UnitCounts)>) -> Self {
        self.counts = counts;
        self
    }

    /// Options with phase lines on or off.
    pub fn phases(mut self, phases: bool) -> Self {
        self.phases = phases;
        self
    }
}

/// Renders a run's records as a text timeline, streaming: each line is written as soon as its
/// record arrives, and memory is bounded by the number of attempts running at once, not by the
/// journal's length.
///
/// Columns: offset from the run's start, unit, attempt, event (or phase), duration, status,
/// short hash (input at start, output at finish), detail (first error line, reasons, notes).
/// Phase lines come just before their attempt's `finish` line (the journal learns of them with
/// it), at their own start offsets, so an attempt's lines read in time order. Attempts that never finished get an `abandoned` line at
/// the resume that gave up on them, or an `unfinished` line at the end.
pub fn write_text<I, E, W>(records: I, out: W, options: &TextOptions) -> Result<(), ReplayError<E>>
where
    I: IntoIterator<Item = Result<Record, E>>,
    W: Write,
{
    let mut renderer = TextRenderer::new(out, options.clone());
    for record in records {
        let record = record.map_err(ReplayError::Read)?;
        renderer.write_record(&record)?;
    }
    renderer.finish()?;
    Ok(())
}

/// The state of [`write_text`], for callers that feed records one by one.
#[derive(Debug)]
pub struct TextRenderer<W: Write> {
    out: W,
    options: TextOptions,
    origin: Option<DateTime<Utc>>,
    unit_width: usize,
    header_written: bool,
    /// The offset of the latest record, where a live run's last line goes.
    last_offset: u64,
    /// The offset of the latest record a running apollo wrote (not `apollo mark`): an attempt
    /// it left unfinished ran at least until then.
    last_alive_offset: u64,
    /// The same before the current record (what a resume's abandoned attempts are measured
    /// against).
    previous_alive_offset: u64,
    /// Attempts started and not yet finished: (unit, attempt) → when they started.
    open: HashMap<(String, u32), OpenAttempt>,
    /// Buffers for one line and one column, reused.
    line: String,
    scratch: String,
    /// Lines written and not yet printed, by offset (then in the order written): an attempt's
    /// phase lines are known when it ends, and go where they happened among the others.
    held: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64, String)>>,
    /// Lines held so far (orders lines of equal offset as they were written).
    held_count: u64,
}

/// An attempt with a `unit_started` and no `unit_finished` yet.
#[derive(Debug)]
struct OpenAttempt {
    /// The `unit_started` record's sequence number, so open attempts are listed in order.
    seq: u64,
    /// When the attempt started.
    start: DateTime<Utc>,
}

impl<W: Write> TextRenderer<W> {
    /// A renderer writing to `out`.
    pub fn new(out: W, options: TextOptions) -> Self {
        Self {
            out,
            options,
            origin: None,
            unit_width: MIN_UNIT_WIDTH,
            header_written: false,
            last_offset: 0,
            last_alive_offset: 0,
            previous_alive_offset: 0,
            open: HashMap::new(),
            line: String::new(),
            scratch: String::new(),
            held: std::collections::BinaryHeap::new(),
            held_count: 0,
        }
    }

    /// Renders the next record (records must come in journal order).
    pub fn write_record(&mut self, record: &Record) -> io::Result<()> {
        if matches!(record.event, Event::RunStarted(_)) {
            self.origin = Some(record.ts);
        }
        let origin = *self.origin.get_or_insert(record.ts);
        let context = Context {
            seq: record.seq,
            ts: record.ts,
            origin,
            offset: offset_ms(origin, record.ts),
            keep: self.options.filter.keeps(record, origin),
        };
        self.last_offset = self.last_offset.max(context.offset);
        self.previous_alive_offset = self.last_alive_offset;
        if !matches!(record.event, Event::UnitMarked(_)) {
            self.last_alive_offset = self.last_alive_offset.max(context.offset);
        }
        let written = match &record.event {
            Event::RunStarted(started) => self.write_run_started(started, &context),
            Event::RunResumed(resumed) => self.write_run_resumed(resumed, &context),
            Event::UnitStarted(started) => self.write_unit_started(started, &context),
            Event::UnitFinished(finished) => self.write_unit_finished(finished, &context),
            Event::UnitSkipped(skipped) => self.write_unit_skipped(skipped, &context),
            Event::UnitMarked(marked) => self.write_unit_marked(marked, &context),
            Event::RunFinished(finished) => self.write_run_finished(finished, &context),
            // A manifest is what an attempt saw, not a step of the timeline (`show` prints it).
            Event::UnitFiles(_) => Ok(()),
            Event::HookFinished(hook) => self.write_hook_finished(hook, &context),
            Event::UnitReused(reused) => self.write_unit_reused(reused, &context),
            other => self.write_other(other, &context),
        };
        written?;
        // Every line still to come is at this record's time or later, or belongs to an
        // attempt still open (its phases start at its start or later).
        let watermark = (self.open.values())
            .map(|open| offset_ms(origin, open.start))
            .fold(context.offset, u64::min);
        self.release_lines(Some(watermark))
    }

    /// Prints the held lines up to `watermark` (all of them with `None`), in time order.
    fn release_lines(&mut self, watermark: Option<u64>) -> io::Result<()> {
        while let Some(std::cmp::Reverse((offset, _, _))) = self.held.peek() {
            if watermark.is_some_and(|watermark| *offset > watermark) {
                break;
            }
            if let Some(std::cmp::Reverse((_, _, text))) = self.held.pop() {
                self.out.write_all(text.as_bytes())?;
            }
        }
        Ok(())
    }

    /// Reports the attempts still open (no `unit_finished`), flushes, and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        // The report of open attempts comes after the timeline, whatever their offsets.
        self.release_lines(None)?;
        let mut open: Vec<_> = self.open.drain().collect();
        open.sort_unstable_by_key(|(_, open)| open.seq);
        // Measured against the last record, as if a resume came next.
        self.previous_alive_offset = self.last_alive_offset;
        for ((unit, attempt), open) in &open {
            let origin = self.origin.unwrap_or(open.start);
            if self.options.filter.keeps_time(open.start, origin) {
                let offset = offset_ms(origin, open.start);
                let event = if self.options.live.is_some() {
                    "running"
                } else {
                    "unfinished"
                };
                self.write_unfinished(unit, *attempt, open, offset, event)?;
            }
        }
        self.release_lines(None)?;
        if let Some(pid) = self.options.live {
            self.write_still_running(pid)?;
        }
        self.release_lines(None)?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Makes the unit column wide enough for all of `units`.
    fn widen_units(&mut self, units: &[String]) {
        for unit in units {
            self.widen_unit(unit);
        }
    }

    /// Makes the unit column wide enough for `unit` (up to its maximum).
    fn widen_unit(&mut self, unit: &str) {
        let width = unit.chars().count().min(MAX_UNIT_WIDTH);
        self.unit_width = self.unit_width.max(width);
    }
}

#[cfg(test)]
mod order_tests {
    use super::*;

    /// An attempt's phase lines are known when it ends, yet the timeline prints every line
    /// in time order (issue 35: they came out among later lines).
    #[test]
    fn the_timeline_is_in_time_order() {
        let mut out = Vec::new();
        write_text(
            crate::testkit::showcase_run().reads(),
            &mut out,
            &TextOptions::default(),
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let offsets: Vec<&str> = (text.lines())
            .filter_map(|line| line.split_whitespace().next())
            .filter(|offset| offset.starts_with('+'))
            .collect();
        assert!(offsets.len() > 20, "{text}");
        assert!(offsets.is_sorted(), "{text}");
    }
}
