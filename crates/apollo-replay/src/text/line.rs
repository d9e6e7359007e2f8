//! Laying out one timeline line: the header, the aligned columns and their colours.
//!
//! The record methods in `records.rs` decide *what* a line says (a [`Line`]); this file alone
//! decides how it looks, so column widths and colours change in one place.

use std::io::{self, Write};

use super::TextRenderer;
use crate::display::{push_duration, push_offset, terminal_safe};

/// The narrowest and widest the unit column gets (longer names overflow it).
pub(super) const MIN_UNIT_WIDTH: usize = 4;
pub(super) const MAX_UNIT_WIDTH: usize = 32;
const EVENT_WIDTH: usize = 10;
const DURATION_WIDTH: usize = 9;
const STATUS_WIDTH: usize = 15;
const HASH_WIDTH: usize = 12;

/// One line's columns before padding.
pub(super) struct Line<'a> {
    pub(super) offset_ms: u64,
    pub(super) unit: &'a str,
    pub(super) attempt: Option<u32>,
    pub(super) event: &'a str,
    pub(super) duration_ms: Option<u64>,
    pub(super) status: &'a str,
    pub(super) hash: String,
    pub(super) detail: String,
}

impl<'a> Line<'a> {
    /// A line about the whole run (unit column `-`), with no attempt, duration or hash.
    pub(super) fn run(offset_ms: u64, event: &'a str, status: &'a str, detail: String) -> Self {
        Self {
            offset_ms,
            unit: "-",
            attempt: None,
            event,
            duration_ms: None,
            status,
            hash: String::new(),
            detail,
        }
    }
}

impl<W: Write> TextRenderer<W> {
    /// Writes `line`, preceded by the column header before the first line.
    pub(super) fn write_line(&mut self, line: &Line<'_>) -> io::Result<()> {
        if !self.header_written {
            self.write_header()?;
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
        // `out ` and a short hash fill the column: a detail after it (`exit 77`) must not run
        // into the hash (`out 3b5ca438exit 77`; found by tests/e2e/agreement.rs, seed 2).
        if line.hash.chars().count() >= HASH_WIDTH && !line.detail.is_empty() {
            text.push(' ');
        }
        text.push_str(&terminal_safe(&line.detail));
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
        text.push('\n');
        // Held until no line can come before it (see `TextRenderer::release_lines`).
        self.held_count += 1;
        self.held.push(std::cmp::Reverse((
            line.offset_ms,
            self.held_count,
            text.clone(),
        )));
        text.clear();
        self.line = text;
        Ok(())
    }

    /// The column titles, dimmed when colour is on. The unit column is as wide as the units
    /// seen so far (every unit of the run once `run_started` has been read).
    fn write_header(&mut self) -> io::Result<()> {
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
        Ok(())
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

/// The ANSI SGR code a status is painted with.
fn status_color(status: &str) -> Option<&'static str> {
    match status {
        "succeeded" | "ok" | "marked_succeeded" => Some("32"),
        "failed" | "timed_out" | "marked_failed" => Some("1;31"),
        "interrupted" | "unfinished" | "not_started" => Some("33"),
        "skipped" | "skipped_when" | "upstream_failed" => Some("36"),
        "running" => Some("34"),
        _ => None,
    }
}
