//! Durations in configs: integer seconds (`30`) or strings of number+unit pairs
//! (`500ms`, `45s`, `2m`, `1h30m`, `1d`).

use std::time::Duration;

/// The units a duration string may use, longest first so `ms` wins over `m`.
const UNITS: [(&str, u64); 5] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// Why a duration string was rejected (lowercase, reads after "invalid duration `x`: ").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Nothing but whitespace.
    #[error("it is empty")]
    Empty,
    /// A number without a unit, but not alone (`1h30`).
    #[error("`{number}` has no unit")]
    MissingUnit {
        /// The number missing its unit.
        number: String,
    },
    /// A unit apollo does not know (`5min`).
    #[error("unknown unit `{unit}` (the units are ms, s, m, h and d)")]
    UnknownUnit {
        /// The unknown unit as written.
        unit: String,
    },
    /// A unit with no number before it, or any other character out of place.
    #[error("unexpected `{text}`")]
    Unexpected {
        /// The unexpected text.
        text: String,
    },
    /// More than about 584 million years.
    #[error("it is too long")]
    Overflow,
}

/// Parses a duration string: `"30"` (seconds), `"500ms"`, `"45s"`, `"2m"`, `"1h30m"`, `"1d"`,
/// with optional spaces between parts (`"1h 30m"`).
///
/// ```
/// use std::time::Duration;
/// use apollo_core::config::parse_duration;
///
/// assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
/// assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
/// assert!(parse_duration("5 minutes").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    if text.bytes().all(|byte| byte.is_ascii_digit()) {
        let seconds: u64 = text.parse().map_err(|_| DurationError::Overflow)?;
        return Ok(Duration::from_secs(seconds));
    }
    let mut total_ms: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        rest = rest.trim_start();
        let digits_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits_len == 0 {
            let text: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
            return Err(DurationError::Unexpected { text });
        }
        let (number, after) = rest.split_at(digits_len);
        // `1 h` and `1h` are the same.
        let after = after.trim_start();
        let unit_len = after
            .char_indices()
            .find(|&(_, c)| !c.is_alphabetic())
            .map_or(after.len(), |(index, _)| index);
        let (unit, after_unit) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit {
                number: number.to_owned(),
            });
        }
        let Some(&(_, unit_ms)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(DurationError::UnknownUnit {
                unit: unit.to_owned(),
            });
        };
        let value: u64 = number.parse().map_err(|_| DurationError::Overflow)?;
        total_ms = value
            .checked_mul(unit_ms)
            .and_then(|part_ms| total_ms.checked_add(part_ms))
            .ok_or(DurationError::Overflow)?;
        rest = after_unit;
    }
    Ok(Duration::from_millis(total_ms))
}

/// Formats a duration the way configs write it (`1h30m`, `500ms`, `0s`).
pub fn format_duration(duration: Duration) -> String {
    let mut ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    for &(name, unit_ms) in UNITS.iter().rev() {
        if ms >= unit_ms {
            out.push_str(&format!("{}{name}", ms / unit_ms));
            ms %= unit_ms;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_forms() {
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("45s"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1 h 30 m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        assert_eq!(parse_duration(" "), Err(DurationError::Empty));
        assert_eq!(
            parse_duration("1h30"),
            Err(DurationError::MissingUnit {
                number: "30".into()
            })
        );
        assert_eq!(
            parse_duration("5min"),
            Err(DurationError::UnknownUnit { unit: "min".into() })
        );
        assert_eq!(
            parse_duration("soon"),
            Err(DurationError::Unexpected {
                text: "soon".into()
            })
        );
        assert_eq!(
            parse_duration("-5s"),
            Err(DurationError::Unexpected { text: "-5s".into() })
        );
        assert_eq!(
            parse_duration("99999999999999999999d"),
            Err(DurationError::Overflow)
        );
        assert_eq!(
            parse_duration("999999999999999d"),
            Err(DurationError::Overflow)
        );
    }

    #[test]
    fn format_round_trips() {
        for text in ["1h30m", "500ms", "45s", "1d2h3m4s5ms", "0s"] {
            let duration = parse_duration(text).unwrap();
            assert_eq!(format_duration(duration), text);
        }
    }
}
