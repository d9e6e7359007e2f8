//! Run ids: `20261130T021507Z-3f9a`, UTC time then a 4-hex-digit suffix; they sort by time.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDateTime, Utc};

use crate::error::StoreError;

/// A run's id: `YYYYMMDDTHHMMSSZ-xxxx` (UTC start time, then 4 lowercase hex digits).
///
/// Ids sort by time as strings. Within one second the suffix is chosen above every existing
/// run's suffix for that second (see [`StateDir::new_run_id`](crate::StateDir::new_run_id)),
/// so they sort by creation order too.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(String);

const TIME_FORMAT: &str = "%Y%m%dT%H%M%SZ";
const TIME_LEN: usize = 16;

impl RunId {
    /// The id for a run started at `time` with `suffix` (0..=0xffff).
    pub fn from_parts(time: DateTime<Utc>, suffix: u16) -> Self {
        Self(format!("{}-{suffix:04x}", time.format(TIME_FORMAT)))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The UTC second the run was started.
    pub fn started_at(&self) -> DateTime<Utc> {
        // Checked when the id was made or parsed.
        NaiveDateTime::parse_from_str(&self.0[..TIME_LEN], TIME_FORMAT)
            .map(|naive| naive.and_utc())
            .unwrap_or_default()
    }

    /// The time part (`20261130T021507Z`).
    pub(crate) fn time_part(&self) -> &str {
        &self.0[..TIME_LEN]
    }

    /// The suffix as a number.
    pub(crate) fn suffix(&self) -> u16 {
        u16::from_str_radix(&self.0[TIME_LEN + 1..], 16).unwrap_or(0)
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for RunId {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<Self, StoreError> {
        let bad = || {
            StoreError::invalid(format!(
                "`{text}` is not a run id (expected the form 20261130T021507Z-3f9a)"
            ))
        };
        if text.len() != TIME_LEN + 5 || !text.is_ascii() || text.as_bytes()[TIME_LEN] != b'-' {
            return Err(bad());
        }
        NaiveDateTime::parse_from_str(&text[..TIME_LEN], TIME_FORMAT).map_err(|_| bad())?;
        let suffix = &text[TIME_LEN + 1..];
        if !suffix
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
        {
            return Err(bad());
        }
        Ok(Self(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn ids_round_trip_and_sort_by_time() {
        let time = Utc.with_ymd_and_hms(2026, 11, 30, 2, 15, 7).unwrap();
        let id = RunId::from_parts(time, 0x3f9a);
        assert_eq!(id.as_str(), "20261130T021507Z-3f9a");
        assert_eq!(id.started_at(), time);
        assert_eq!("20261130T021507Z-3f9a".parse::<RunId>().unwrap(), id);
        let later = RunId::from_parts(time + chrono::Duration::seconds(1), 0);
        assert!(id < later);
    }

    #[test]
    fn malformed_ids_are_refused() {
        for text in [
            "",
            "x",
            "20261130T021507Z_3f9a",
            "20261330T021507Z-3f9a",
            "20261130T021507Z-3F9A",
            "../../etc/passwd",
            "20261130T021507Z-3f9ä",
        ] {
            assert!(text.parse::<RunId>().is_err(), "{text}");
        }
    }
}
