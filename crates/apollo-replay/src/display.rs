//! Small formatting helpers shared by the renderers: offsets, durations, short hashes and
//! user text made safe for a terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

use apollo_core::event::{ReproductionCompared, SkipReason};
use chrono::{DateTime, Utc};

/// Why a unit was skipped, in words.
pub(crate) fn skip_reason_text(reason: &SkipReason) -> String {
    match reason {
        SkipReason::UpstreamFailed { upstream } => format!("upstream {upstream} failed"),
        SkipReason::Interrupted => "the run was interrupted before it started".to_owned(),
        SkipReason::When { condition } => format!("when: {condition} is false"),
    }
}

/// A reproduction's verdict in words: `reproduced`, or `not reproduced` and why (`recorded
/// succeeded, now failed`, `outputs differ (out/x.csv)`), each path made safe for a terminal.
pub fn verdict_text(compared: &ReproductionCompared) -> String {
    if compared.reproduced {
        return "reproduced".to_owned();
    }
    let mut text = "not reproduced".to_owned();
    if let Some(recorded) = compared.recorded_status.filter(|s| *s != compared.status) {
        let now = compared.status.as_str();
        text.push_str(&format!(" · recorded {}, now {now}", recorded.as_str()));
    }
    if !compared.outputs_differ.is_empty() {
        let paths = compared.outputs_differ.join(", ");
        text.push_str(&format!(" · outputs differ ({})", terminal_safe(&paths)));
    }
    text
}

/// `ts` minus `duration_ms` (a journal value: any size), or `floor` if that is earlier or
/// out of chrono's range.
pub(crate) fn before(ts: DateTime<Utc>, duration_ms: u64, floor: DateTime<Utc>) -> DateTime<Utc> {
    let duration =
        chrono::TimeDelta::try_milliseconds(i64::try_from(duration_ms).unwrap_or(i64::MAX));
    duration
        .and_then(|duration| ts.checked_sub_signed(duration))
        .map_or(floor, |start| start.max(floor))
}

/// When an attempt's processes really started: `started` (its `unit_started` time) plus the
/// `queued_ms` it waited for a worker after being committed ahead, never after `end`.
pub(crate) fn after_queue(
    started: DateTime<Utc>,
    queued_ms: u64,
    end: DateTime<Utc>,
) -> DateTime<Utc> {
    if queued_ms == 0 {
        return started;
    }
    let queued = chrono::TimeDelta::try_milliseconds(i64::try_from(queued_ms).unwrap_or(i64::MAX));
    queued
        .and_then(|queued| started.checked_add_signed(queued))
        .map_or(started, |start| start.min(end))
        .max(started)
}

/// Where an attempt really ran: from its `unit_started` time plus the `queued_ms` it waited
/// for a worker, for its measured `duration_ms`, never past its `unit_finished` time
/// (`finished`). The record times alone are not it: an attempt committed ahead starts after
/// its record, and an outcome waits for the next commit, so its record may be written well
/// after the worker went on to its next attempt (drawing attempts from record to record
/// stacked them on dozens of lanes for two workers).
pub(crate) fn real_span(
    started: DateTime<Utc>,
    finished: DateTime<Utc>,
    queued_ms: u64,
    duration_ms: u64,
) -> (DateTime<Utc>, DateTime<Utc>) {
    let start = after_queue(started, queued_ms, finished);
    let duration =
        chrono::TimeDelta::try_milliseconds(i64::try_from(duration_ms).unwrap_or(i64::MAX));
    let end = duration
        .and_then(|duration| start.checked_add_signed(duration))
        .map_or(finished, |end| end.min(finished))
        .max(start);
    (start, end)
}

/// Milliseconds from `origin` to `ts`; zero when `ts` is earlier.
pub(crate) fn offset_ms(origin: DateTime<Utc>, ts: DateTime<Utc>) -> u64 {
    u64::try_from((ts - origin).num_milliseconds()).unwrap_or(0)
}

/// Microseconds from `origin` to `ts`; zero when `ts` is earlier.
pub(crate) fn offset_us(origin: DateTime<Utc>, ts: DateTime<Utc>) -> u64 {
    (ts - origin)
        .num_microseconds()
        .and_then(|us| u64::try_from(us).ok())
        .unwrap_or(0)
}

/// An offset from the run's start: `+00:01.234`, or `+1:02:03.456` past an hour.
pub(crate) fn format_offset(offset_ms: u64) -> String {
    let mut text = String::with_capacity(12);
    push_offset(&mut text, offset_ms);
    text
}

/// [`format_offset`] into an existing buffer.
pub(crate) fn push_offset(text: &mut String, offset_ms: u64) {
    let millis = offset_ms % 1000;
    let total_seconds = offset_ms / 1000;
    let seconds = total_seconds % 60;
    let total_minutes = total_seconds / 60;
    if total_minutes < 60 {
        let _ = write!(text, "+{total_minutes:02}:{seconds:02}.{millis:03}");
    } else {
        let minutes = total_minutes % 60;
        let hours = total_minutes / 60;
        let _ = write!(text, "+{hours}:{minutes:02}:{seconds:02}.{millis:03}");
    }
}

/// A duration for humans: `850ms`, `1.234s`, `2m03.4s`, `1h02m03s`.
pub(crate) fn format_duration(duration_ms: u64) -> String {
    let mut text = String::with_capacity(9);
    push_duration(&mut text, duration_ms);
    text
}

/// [`format_duration`] into an existing buffer.
pub(crate) fn push_duration(text: &mut String, duration_ms: u64) {
    let _ = if duration_ms < 1000 {
        write!(text, "{duration_ms}ms")
    } else if duration_ms < 60_000 {
        write!(text, "{}.{:03}s", duration_ms / 1000, duration_ms % 1000)
    } else if duration_ms < 3_600_000 {
        let minutes = duration_ms / 60_000;
        let tenths = (duration_ms % 60_000) / 100;
        write!(text, "{minutes}m{:02}.{}s", tenths / 10, tenths % 10)
    } else {
        let hours = duration_ms / 3_600_000;
        let minutes = (duration_ms % 3_600_000) / 60_000;
        let seconds = (duration_ms % 60_000) / 1000;
        write!(text, "{hours}h{minutes:02}m{seconds:02}s")
    };
}

/// A signed duration difference: `+1.200s`, `-850ms`, `0ms`.
pub(crate) fn format_delta(delta_ms: i64) -> String {
    let sign = match delta_ms {
        d if d > 0 => "+",
        d if d < 0 => "-",
        _ => "",
    };
    format!("{sign}{}", format_duration(delta_ms.unsigned_abs()))
}

/// The first 8 characters of a hex hash.
pub(crate) fn short_hash(hash: &str) -> &str {
    hash.get(..8).unwrap_or(hash)
}

/// The first non-empty line of a possibly multi-line text, trimmed.
pub(crate) fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
}

/// User text (unit names, error lines) made safe for a terminal: control characters, which
/// could move the cursor or change colours, are shown escaped instead of interpreted.
pub(crate) fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut safe = String::with_capacity(text.len() + 8);
    for character in text.chars() {
        if character.is_control() {
            let _ = write!(safe, "{}", character.escape_default());
        } else {
            safe.push(character);
        }
    }
    Cow::Owned(safe)
}

/// Text escaped for HTML element content and attribute values.
pub(crate) fn html_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            // Control characters other than newline and tab are not valid in HTML text.
            c if c.is_control() && c != '\n' && c != '\t' => escaped.push('\u{fffd}'),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_switch_to_hours_past_an_hour() {
        assert_eq!(format_offset(0), "+00:00.000");
        assert_eq!(format_offset(61_234), "+01:01.234");
        assert_eq!(format_offset(3_723_456), "+1:02:03.456");
    }

    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(format_duration(850), "850ms");
        assert_eq!(format_duration(1_234), "1.234s");
        assert_eq!(format_duration(123_456), "2m03.4s");
        assert_eq!(format_duration(3_723_000), "1h02m03s");
        assert_eq!(format_delta(-850), "-850ms");
        assert_eq!(format_delta(1_200), "+1.200s");
        assert_eq!(format_delta(0), "0ms");
    }

    #[test]
    fn user_text_cannot_inject_terminal_escapes_or_markup() {
        assert_eq!(terminal_safe("a\u{1b}[31mb"), "a\\u{1b}[31mb");
        assert_eq!(
            html_escape("<b onclick='x'>&</b>"),
            "&lt;b onclick=&#39;x&#39;&gt;&amp;&lt;/b&gt;"
        );
        assert_eq!(first_line("\n  boom  \nmore"), "boom");
        assert_eq!(short_hash("abc"), "abc");
        assert_eq!(short_hash("0123456789abcdef"), "01234567");
    }
}
