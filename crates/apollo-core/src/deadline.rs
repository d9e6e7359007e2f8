//! Deadlines (issue 40 item 3, DESIGN §18 "Cost and deadlines"): `deadline: 06:00` or
//! `deadline: 2h`, on a run and per unit.
//!
//! A [`Deadline`] is what the config says; it is resolved once, when a run starts, against the
//! run's start and the local time zone, into an instant stored in UTC in `run_started` (journal
//! format 1.9): a resume keeps the instant resolved at the first start. A deadline never kills
//! or stops anything; the views say by how much a run (or a unit) ended after it.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, NaiveTime, TimeDelta, TimeZone, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub mod predict;
pub use predict::{Prediction, Progress, UnitHistory, is_late, predict};

/// A deadline as the config writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Deadline {
    /// `HH:MM`: the first time the local clock reads it after the run starts.
    At {
        /// 0–23.
        hour: u8,
        /// 0–59.
        minute: u8,
    },
    /// A duration after the run starts (`2h`, `90m`).
    After(Duration),
}

/// Why a deadline was refused (lowercase, reads after "invalid deadline `x`: ").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DeadlineError(String);

impl Deadline {
    /// Parses `HH:MM` (24-hour local clock time) or a duration (`2h`, `1h30m`, `45m`).
    pub fn parse(text: &str) -> Result<Self, DeadlineError> {
        let text = text.trim();
        if let Some((hour, minute)) = text.split_once(':') {
            let clock = |part: &str, max: u8| {
                (part.len() == 2 && part.bytes().all(|byte| byte.is_ascii_digit()))
                    .then(|| part.parse::<u8>().ok())
                    .flatten()
                    .filter(|value| *value <= max)
            };
            return match (clock(hour, 23), clock(minute, 59)) {
                (Some(hour), Some(minute)) => Ok(Deadline::At { hour, minute }),
                _ => Err(DeadlineError(format!(
                    "`{text}` is not a clock time from 00:00 to 23:59"
                ))),
            };
        }
        let duration = crate::config::parse_duration(text)
            .map_err(|error| DeadlineError(format!("`{text}`: {error}")))?;
        if duration.is_zero() {
            return Err(DeadlineError(format!("`{text}` is zero")));
        }
        Ok(Deadline::After(duration))
    }

    /// The instant the deadline stands for, for a run that started at `start`, with clock
    /// times read in `zone`: the first such local time strictly after `start` (a clock time a
    /// daylight-saving change skips is taken an hour later; one it repeats, at its first
    /// occurrence).
    pub fn resolve<Tz: TimeZone>(self, start: DateTime<Utc>, zone: &Tz) -> DateTime<Utc> {
        match self {
            Deadline::After(duration) => {
                start + TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
            }
            Deadline::At { hour, minute } => {
                let time = NaiveTime::from_hms_opt(u32::from(hour), u32::from(minute), 0)
                    .unwrap_or(NaiveTime::MIN); // ok: parse bounds hour and minute
                let local_day = start.with_timezone(zone).date_naive();
                // Two days ahead is enough: the time comes once a day, or an hour after a gap.
                for day in local_day.iter_days().take(3) {
                    let wall = day.and_time(time);
                    let instant = zone
                        .from_local_datetime(&wall)
                        .earliest()
                        .or_else(|| {
                            zone.from_local_datetime(&(wall + TimeDelta::hours(1)))
                                .earliest()
                        })
                        .map(|instant| instant.with_timezone(&Utc));
                    if let Some(instant) = instant.filter(|instant| *instant > start) {
                        return instant;
                    }
                }
                start + TimeDelta::days(1)
            }
        }
    }
}

impl fmt::Display for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Deadline::At { hour, minute } => write!(f, "{hour:02}:{minute:02}"),
            Deadline::After(duration) => f.write_str(&crate::config::format_duration(*duration)),
        }
    }
}

// In a definition snapshot a deadline is the text the config could have written.
impl Serialize for Deadline {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Deadline {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Deadline::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// How much later than `deadline` something ended at `end`: `None` when it was on time.
pub fn late_by(deadline: DateTime<Utc>, end: DateTime<Utc>) -> Option<Duration> {
    (end > deadline).then(|| (end - deadline).to_std().unwrap_or_default())
}

/// A deadline instant as the journal stores it: RFC 3339 in UTC, to the microsecond (as record timestamps).
pub fn to_journal(instant: DateTime<Utc>) -> String {
    instant.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// A deadline instant read back from the journal (`None` when it is not RFC 3339).
pub fn from_journal(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|instant| instant.with_timezone(&Utc))
}

#[cfg(test)]
mod tests;
