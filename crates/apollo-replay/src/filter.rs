//! Which records a replay shows: by unit, and by a time window.

use std::str::FromStr;

use apollo_core::Record;
use chrono::{DateTime, Utc};

/// Selects the records a replay shows. The default shows everything.
///
/// Run-level records (`run_started`, `run_resumed`, `run_finished`) are kept by a unit filter,
/// because they give the unit's lines their context; the time window applies to every record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Filter {
    /// Only these units (any of them); empty means every unit.
    pub units: Vec<String>,
    /// Only records at or after this instant.
    pub since: Option<TimeBound>,
    /// Only records at or before this instant.
    pub until: Option<TimeBound>,
}

/// One end of a replay's time window: an absolute instant, or an offset from the run's start
/// (the offsets the text timeline prints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeBound {
    /// This instant.
    At(DateTime<Utc>),
    /// This many milliseconds after the run started.
    FromStart(u64),
}

impl TimeBound {
    /// The instant, for a run that started at `origin`.
    pub fn resolve(self, origin: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            TimeBound::At(instant) => instant,
            TimeBound::FromStart(offset_ms) => {
                let offset_ms = i64::try_from(offset_ms).unwrap_or(i64::MAX);
                origin
                    .checked_add_signed(chrono::Duration::milliseconds(offset_ms))
                    .unwrap_or(DateTime::<Utc>::MAX_UTC)
            }
        }
    }
}

impl From<DateTime<Utc>> for TimeBound {
    fn from(instant: DateTime<Utc>) -> Self {
        TimeBound::At(instant)
    }
}

/// A `--since`/`--until` value that is neither an RFC 3339 instant nor an offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid time `{0}`: expected an RFC 3339 instant (2026-11-30T02:15:07Z) or an offset from \
     the run's start (+01:30, +1:02:03.5, +90s, +1500ms, +2m, +1h)"
)]
pub struct InvalidTimeBound(pub String);

impl FromStr for TimeBound {
    type Err = InvalidTimeBound;

    /// Parses an RFC 3339 instant, or an offset from the run's start written with a leading
    /// `+`: clock style `+SS[.mmm]`, `+MM:SS[.mmm]`, `+H:MM:SS[.mmm]` (as the text timeline
    /// prints offsets), or a number with a unit: `+1500ms`, `+90s`, `+2m`, `+1h`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidTimeBound(text.to_owned());
        let Some(offset) = text.trim().strip_prefix('+') else {
            return DateTime::parse_from_rfc3339(text.trim())
                .map(|instant| TimeBound::At(instant.with_timezone(&Utc)))
                .map_err(|_| invalid());
        };
        parse_offset_ms(offset)
            .map(TimeBound::FromStart)
            .ok_or_else(invalid)
    }
}

/// `SS[.mmm]`, `MM:SS[.mmm]`, `H:MM:SS[.mmm]`, or `<number>ms|s|m|h`, in milliseconds.
fn parse_offset_ms(text: &str) -> Option<u64> {
    for (suffix, scale) in [("ms", 1.0), ("s", 1e3), ("m", 60e3), ("h", 3_600e3)] {
        if let Some(number) = text.strip_suffix(suffix) {
            let value: f64 = number.parse().ok()?;
            return (value.is_finite() && value >= 0.0 && value * scale < 1e15)
                .then(|| (value * scale).round() as u64);
        }
    }
    let mut parts = text.rsplit(':');
    let seconds: f64 = parts.next()?.parse().ok()?;
    let minutes: u64 = parts.next().map_or(Some(0), |part| part.parse().ok())?;
    let hours: u64 = parts.next().map_or(Some(0), |part| part.parse().ok())?;
    if parts.next().is_some() || !(0.0..1e9).contains(&seconds) {
        return None;
    }
    let whole_ms = hours
        .checked_mul(60)?
        .checked_add(minutes)?
        .checked_mul(60_000)?;
    whole_ms.checked_add((seconds * 1e3).round() as u64)
}

impl Filter {
    /// A filter that shows everything.
    pub fn all() -> Self {
        Self::default()
    }

    /// Also show `unit` (the first call narrows from "every unit" to this one).
    pub fn unit(mut self, unit: impl Into<String>) -> Self {
        self.units.push(unit.into());
        self
    }

    /// Only records at or after `since`.
    pub fn since(mut self, since: impl Into<TimeBound>) -> Self {
        self.since = Some(since.into());
        self
    }

    /// Only records at or before `until`.
    pub fn until(mut self, until: impl Into<TimeBound>) -> Self {
        self.until = Some(until.into());
        self
    }

    /// Whether the filter keeps everything.
    pub fn is_all(&self) -> bool {
        self.units.is_empty() && !self.has_window()
    }

    /// Whether the filter has a time window.
    pub fn has_window(&self) -> bool {
        self.since.is_some() || self.until.is_some()
    }

    /// Whether `unit` passes the unit filter.
    pub fn keeps_unit(&self, unit: &str) -> bool {
        self.units.is_empty() || self.units.iter().any(|wanted| wanted == unit)
    }

    /// Whether an interval `[start, end]` overlaps the time window of a run that started at
    /// `origin`.
    pub fn overlaps(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        origin: DateTime<Utc>,
    ) -> bool {
        self.since.is_none_or(|since| end >= since.resolve(origin))
            && self
                .until
                .is_none_or(|until| start <= until.resolve(origin))
    }

    /// Whether the instant `ts` is inside the time window of a run that started at `origin`.
    pub fn keeps_time(&self, ts: DateTime<Utc>, origin: DateTime<Utc>) -> bool {
        self.overlaps(ts, ts, origin)
    }

    /// Whether the record, of a run that started at `origin`, passes the filter.
    pub fn keeps(&self, record: &Record, origin: DateTime<Utc>) -> bool {
        self.keeps_time(record.ts, origin)
            && record.event.unit().is_none_or(|unit| self.keeps_unit(unit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_bounds_parse_instants_and_offsets() {
        let parse = |text: &str| text.parse::<TimeBound>();
        assert_eq!(parse("+01:30"), Ok(TimeBound::FromStart(90_000)));
        assert_eq!(parse("+00:01.234"), Ok(TimeBound::FromStart(1_234)));
        assert_eq!(parse("+1:02:03.5"), Ok(TimeBound::FromStart(3_723_500)));
        assert_eq!(parse("+45"), Ok(TimeBound::FromStart(45_000)));
        assert_eq!(parse("+1500ms"), Ok(TimeBound::FromStart(1_500)));
        assert_eq!(parse("+90s"), Ok(TimeBound::FromStart(90_000)));
        assert_eq!(parse("+2m"), Ok(TimeBound::FromStart(120_000)));
        assert_eq!(parse("+1h"), Ok(TimeBound::FromStart(3_600_000)));
        let instant = DateTime::parse_from_rfc3339("2026-11-30T02:15:07Z").unwrap();
        assert_eq!(
            parse("2026-11-30T02:15:07Z"),
            Ok(TimeBound::At(instant.with_timezone(&Utc)))
        );
        for bad in [
            "",
            "+",
            "+x",
            "+-1s",
            "+1:2:3:4",
            "yesterday",
            "+NaNs",
            "+1e300s",
        ] {
            let error = parse(bad).unwrap_err();
            assert!(
                error.to_string().starts_with("invalid time"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn offsets_resolve_against_the_run_start() {
        let origin = DateTime::parse_from_rfc3339("2026-11-30T02:15:07Z").unwrap();
        let origin = origin.with_timezone(&Utc);
        let resolved = TimeBound::FromStart(1_500).resolve(origin);
        assert_eq!((resolved - origin).num_milliseconds(), 1_500);
        assert_eq!(
            TimeBound::FromStart(u64::MAX).resolve(origin),
            DateTime::<Utc>::MAX_UTC
        );
    }
}
