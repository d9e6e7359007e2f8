//! The streaming text timeline (`apollo replay`): one aligned line per event.

use std::collections::HashMap;
use std::io::{self, Write};

use apollo_core::Phase;
use apollo_core::Record;
use apollo_core::event::{
    AttemptStatus, Event, ExitStatus, PhaseRecord, SkipReason, UnitFinished, Verdict,
};
use chrono::{DateTime, Utc};

use crate::display::{
    first_line, format_offset, offset_ms, push_duration, push_offset, short_hash, skip_reason_text,
    terminal_safe,
};
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
}

impl Default for TextOptions {
    fn default() -> Self {
        Self {
            filter: Filter::all(),
            color: false,
            phases: true,
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
/// Phase lines follow their attempt's `finish` line (that is when the journal learns of them)
/// and show their own start offsets. Attempts that never finished get an `abandoned` line at
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
    /// Attempts started and not yet finished: (unit, attempt) → start and input hash.
    open: HashMap<(String, u32), OpenAttempt>,
    /// Buffers for one line and one column, reused so lines cost no allocation.
    line: String,
    scratch: String,
}

#[derive(Debug)]
struct OpenAttempt {
    seq: u64,
    start: DateTime<Utc>,
}

const MIN_UNIT_WIDTH: usize = 4;
const MAX_UNIT_WIDTH: usize = 32;
const EVENT_WIDTH: usize = 10;
const DURATION_WIDTH: usize = 9;
const STATUS_WIDTH: usize = 15;
const HASH_WIDTH: usize = 12;

/// One line's columns before padding.
struct Line<'a> {
    offset_ms: u64,
    unit: &'a str,
    attempt: Option<u32>,
    event: &'a str,
    duration_ms: Option<u64>,
    status: &'a str,
    hash: String,
    detail: String,
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
            open: HashMap::new(),
            line: String::new(),
            scratch: String::new(),
        }
    }

    /// Renders the next record (records must come in journal order).
    pub fn write_record(&mut self, record: &Record) -> io::Result<()> {
        if matches!(record.event, Event::RunStarted(_)) {
            self.origin = Some(record.ts);
        }
        let origin = *self.origin.get_or_insert(record.ts);
        let offset = offset_ms(origin, record.ts);
        let keep = self.options.filter.keeps(record, origin);
        match &record.event {
            Event::RunStarted(started) => {
                self.widen_units(&started.units);
                if keep {
                    let detail = format!(
                        "run {} · pipeline {} · {} units · pid {} on {}",
                        started.run_id,
                        started.pipeline,
                        started.units.len(),
                        started.pid,
                        started.host
                    );
                    self.write_line(&Line {
                        offset_ms: 0,
                        unit: "-",
                        attempt: None,
                        event: "run start",
                        duration_ms: None,
                        status: "running",
                        hash: String::new(),
                        detail,
                    })?;
                }
            }
            Event::RunResumed(resumed) => {
                self.widen_units(&resumed.units);
                let mut abandoned: Vec<_> = self.open.drain().collect();
                abandoned.sort_unstable_by_key(|(_, open)| open.seq);
                if keep {
                    let detail = format!(
                        "pid {} on {} · {} attempt(s) abandoned",
                        resumed.pid,
                        resumed.host,
                        abandoned.len()
                    );
                    self.write_line(&Line {
                        offset_ms: offset,
                        unit: "-",
                        attempt: None,
                        event: "resume",
                        duration_ms: None,
                        status: "running",
                        hash: String::new(),
                        detail,
                    })?;
                }
                if self.options.filter.keeps_time(record.ts, origin) {
                    for ((unit, attempt), open) in &abandoned {
                        self.write_unfinished(unit, *attempt, open, offset, "abandoned")?;
                    }
                }
            }
            Event::UnitStarted(started) => {
                self.widen_unit(&started.unit);
                self.open.insert(
                    (started.unit.clone(), started.attempt),
                    OpenAttempt {
                        seq: record.seq,
                        start: record.ts,
                    },
                );
                if keep {
                    self.write_line(&Line {
                        offset_ms: offset,
                        unit: &started.unit,
                        attempt: Some(started.attempt),
                        event: "start",
                        duration_ms: None,
                        status: "running",
                        hash: format!("in {}", short_hash(&started.input_hash)),
                        detail: String::new(),
                    })?;
                }
            }
            Event::UnitFinished(finished) => {
                self.widen_unit(&finished.unit);
                let start = self
                    .open
                    .remove(&(finished.unit.clone(), finished.attempt))
                    .map(|open| open.start);
                if keep {
                    self.write_finished(finished, offset, start)?;
                }
            }
            Event::UnitSkipped(skipped) => {
                self.widen_unit(&skipped.unit);
                if keep {
                    let status = match &skipped.reason {
                        SkipReason::UpstreamFailed { .. } => "upstream_failed",
                        SkipReason::Interrupted => "not_started",
                    };
                    let detail = skip_reason_text(&skipped.reason);
                    self.write_line(&Line {
                        offset_ms: offset,
                        unit: &skipped.unit,
                        attempt: None,
                        event: "skip",
                        duration_ms: None,
                        status,
                        hash: String::new(),
                        detail,
                    })?;
                }
            }
            Event::UnitMarked(marked) => {
                self.widen_unit(&marked.unit);
                if keep {
                    let status = match marked.verdict {
                        Verdict::Succeeded => "marked_succeeded",
                        Verdict::Failed => "marked_failed",
                        Verdict::Rerun => "marked_rerun",
                    };
                    let mut detail = format!("by {}", marked.by);
                    if let Some(note) = &marked.note {
                        detail.push_str(": ");
                        detail.push_str(first_line(note));
                    }
                    self.write_line(&Line {
                        offset_ms: offset,
                        unit: &marked.unit,
                        attempt: Some(marked.attempt),
                        event: "mark",
                        duration_ms: None,
                        status,
                        hash: String::new(),
                        detail,
                    })?;
                }
            }
            Event::RunFinished(finished) => {
                if keep {
                    let detail = format!(
                        "{} succeeded · {} failed · {} skipped",
                        finished.succeeded, finished.failed, finished.skipped
                    );
                    self.write_line(&Line {
                        offset_ms: offset,
                        unit: "-",
                        attempt: None,
                        event: "run end",
                        duration_ms: Some(offset),
                        status: finished.status.as_str(),
                        hash: String::new(),
                        detail,
                    })?;
                }
            }
            // A kind this version does not know: say so rather than hide it.
            other => {
                if keep {
                    self.write_line(&Line {
                        offset_ms: offset,
                        unit: other.unit().unwrap_or("-"),
                        attempt: None,
                        event: other.kind(),
                        duration_ms: None,
                        status: "",
                        hash: String::new(),
                        detail: String::new(),
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Reports the attempts still open (no `unit_finished`), flushes, and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        let mut open: Vec<_> = self.open.drain().collect();
        open.sort_unstable_by_key(|(_, open)| open.seq);
        for ((unit, attempt), open) in &open {
            let origin = self.origin.unwrap_or(open.start);
            if self.options.filter.keeps_time(open.start, origin) {
                let offset = offset_ms(origin, open.start);
                self.write_unfinished(unit, *attempt, open, offset, "unfinished")?;
            }
        }
        self.out.flush()?;
        Ok(self.out)
    }

    fn write_unfinished(
        &mut self,
        unit: &str,
        attempt: u32,
        open: &OpenAttempt,
        offset: u64,
        event: &str,
    ) -> io::Result<()> {
        if !self.options.filter.keeps_unit(unit) {
            return Ok(());
        }
        let start_offset = offset_ms(self.origin.unwrap_or(open.start), open.start);
        self.write_line(&Line {
            offset_ms: offset,
            unit,
            attempt: Some(attempt),
            event,
            duration_ms: None,
            status: "unfinished",
            hash: String::new(),
            detail: format!(
                "started at {}; apollo stopped before it finished",
                format_offset(start_offset)
            ),
        })
    }

    fn write_finished(
        &mut self,
        finished: &UnitFinished,
        offset: u64,
        start: Option<DateTime<Utc>>,
    ) -> io::Result<()> {
        let mut detail = String::new();
        if let Some(exit) = finished.exit.filter(|exit| *exit != ExitStatus::Code(0)) {
            detail.push_str(&describe_exit(Some(exit)));
        }
        if finished.timed_out && finished.status != AttemptStatus::TimedOut {
            append_detail(&mut detail, "timed out");
        }
        if let Some(phase) = finished.failed_phase {
            append_detail(&mut detail, &format!("in {phase}"));
        }
        if let Some(error) = finished.error.as_deref().map(first_line)
            && !error.is_empty()
        {
            detail.push_str(if detail.is_empty() { "" } else { ": " });
            detail.push_str(error);
        }
        self.write_line(&Line {
            offset_ms: offset,
            unit: &finished.unit,
            attempt: Some(finished.attempt),
            event: "finish",
            duration_ms: Some(finished.duration_ms),
            status: finished.status.as_str(),
            hash: finished
                .output_hash
                .as_deref()
                .map(|hash| format!("out {}", short_hash(hash)))
                .unwrap_or_default(),
            detail,
        })?;
        if self.options.phases {
            let origin = self.origin.unwrap_or_default();
            // Without a start on record, phases are placed from the measured duration.
            let attempt_start = start.map_or_else(
                || offset.saturating_sub(finished.duration_ms),
                |start| offset_ms(origin, start),
            );
            for phase in &finished.phases {
                self.write_phase(finished, phase, attempt_start)?;
            }
        }
        Ok(())
    }

    fn write_phase(
        &mut self,
        finished: &UnitFinished,
        phase: &PhaseRecord,
        attempt_start: u64,
    ) -> io::Result<()> {
        let event = format!("  {}", phase.phase);
        let status = match phase.exit {
            _ if phase.timed_out => "timed_out",
            Some(ExitStatus::Code(0)) => "ok",
            Some(ExitStatus::Code(77))
                if phase.phase == Phase::Execute && finished.status == AttemptStatus::Skipped =>
            {
                "skipped"
            }
            Some(_) => "failed",
            None => "not_started",
        };
        let detail = describe_exit(phase.exit);
        self.write_line(&Line {
            offset_ms: attempt_start.saturating_add(phase.offset_ms),
            unit: &finished.unit,
            attempt: Some(finished.attempt),
            event: &event,
            duration_ms: Some(phase.duration_ms),
            status,
            hash: String::new(),
            detail,
        })
    }

    fn widen_units(&mut self, units: &[String]) {
        for unit in units {
            self.widen_unit(unit);
        }
    }

    fn widen_unit(&mut self, unit: &str) {
        let width = unit.chars().count().min(MAX_UNIT_WIDTH);
        self.unit_width = self.unit_width.max(width);
    }

    fn write_line(&mut self, line: &Line<'_>) -> io::Result<()> {
        if !self.header_written {
            self.header_written = true;
            let header = format!(
                "{:<12} {:<unit_width$}  {:<4}{:<EVENT_WIDTH$}{:>DURATION_WIDTH$}  {:<STATUS_WIDTH$}{:<HASH_WIDTH$}{}",
                "OFFSET",
                "UNIT",
                "ATT",
                "EVENT",
                "DURATION",
                "STATUS",
                "HASH",
                "DETAIL",
                unit_width = self.unit_width,
            );
            self.paint(&header, "2");
            self.line.push('\n');
            self.out.write_all(self.line.as_bytes())?;
            self.line.clear();
        }
        use std::fmt::Write as _;
        let color = self.options.color;
        let mut text = std::mem::take(&mut self.line);
        // Columns are written straight into the line buffer and padded after, so a line
        // costs no allocation beyond its owned detail text.
        let column_start = text.len();
        push_offset(&mut text, line.offset_ms);
        pad_to(&mut text, column_start + 12);
        text.push(' ');
        let unit = terminal_safe(line.unit);
        text.push_str(&unit);
        let unit_chars = unit.chars().count();
        text.extend(std::iter::repeat_n(
            ' ',
            self.unit_width.saturating_sub(unit_chars) + 2,
        ));
        let column_start = text.len();
        if let Some(attempt) = line.attempt {
            let _ = write!(text, "#{attempt}");
        }
        pad_to(&mut text, column_start + 4);
        let column_start = text.len();
        text.push_str(line.event);
        pad_to(&mut text, column_start + EVENT_WIDTH);
        self.scratch.clear();
        if let Some(duration_ms) = line.duration_ms {
            push_duration(&mut self.scratch, duration_ms);
        }
        text.extend(std::iter::repeat_n(
            ' ',
            DURATION_WIDTH.saturating_sub(self.scratch.len()),
        ));
        text.push_str(&self.scratch);
        text.push_str("  ");
        let status_code = status_color(line.status).filter(|_| color);
        push_padded(&mut text, line.status, STATUS_WIDTH, status_code);
        let hash_code = (color && !line.hash.is_empty()).then_some("2");
        push_padded(&mut text, &line.hash, HASH_WIDTH, hash_code);
        text.push_str(&terminal_safe(&line.detail));
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
        text.push('\n');
        let result = self.out.write_all(text.as_bytes());
        text.clear();
        self.line = text;
        result
    }

    fn paint(&mut self, text: &str, code: &str) {
        if self.options.color {
            self.line.push_str("\x1b[");
            self.line.push_str(code);
            self.line.push('m');
            self.line.push_str(text.trim_end());
            self.line.push_str("\x1b[0m");
        } else {
            self.line.push_str(text.trim_end());
        }
    }
}

/// Pads an ASCII column with spaces until the line is `len` bytes long.
fn pad_to(line: &mut String, len: usize) {
    line.extend(std::iter::repeat_n(' ', len.saturating_sub(line.len())));
}

/// Appends `text` padded to `width`, painted with the SGR `code` when there is one. The
/// padding stays outside the escape so trailing blanks can be trimmed.
fn push_padded(line: &mut String, text: &str, width: usize, code: Option<&str>) {
    match code {
        Some(code) => {
            line.push_str("\x1b[");
            line.push_str(code);
            line.push('m');
            line.push_str(text);
            line.push_str("\x1b[0m");
        }
        None => line.push_str(text),
    }
    let n_chars = text.chars().count();
    line.extend(std::iter::repeat_n(' ', width.saturating_sub(n_chars)));
}

fn append_detail(detail: &mut String, text: &str) {
    if !detail.is_empty() {
        detail.push_str(", ");
    }
    detail.push_str(text);
}

/// `exit 3`, `signal 9`, or `could not start`.
pub(crate) fn describe_exit(exit: Option<ExitStatus>) -> String {
    match exit {
        Some(ExitStatus::Code(code)) => format!("exit {code}"),
        Some(ExitStatus::Signal(signal)) => format!("signal {signal}"),
        None => "could not start".to_owned(),
    }
}

/// The ANSI SGR code a status is painted with.
fn status_color(status: &str) -> Option<&'static str> {
    match status {
        "succeeded" | "ok" | "marked_succeeded" => Some("32"),
        "failed" | "timed_out" | "marked_failed" => Some("1;31"),
        "interrupted" | "unfinished" | "not_started" => Some("33"),
        "skipped" | "upstream_failed" => Some("36"),
        "running" => Some("34"),
        _ => None,
    }
}
