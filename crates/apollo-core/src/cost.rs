//! Cost: a pipeline's price table (`cost:`) and the price of one attempt (issue 40, DESIGN §18
//! "Cost and deadlines").
//!
//! Money is a decimal, never a float: a [`Money`] is a whole number of billionths of the
//! currency unit (nine decimal places), written as a decimal string (`"0.0125"`) in the
//! definition snapshot and in every JSON document. A price table holds what the user wrote
//! (`cpu_hour: 0.05` is exactly 0.05); an attempt's price is computed from its recorded
//! numbers with integer arithmetic and rounded once, half up, to the nearest billionth.
//!
//! ```
//! use apollo_core::cost::{CostTable, Money, Usage};
//!
//! let mut table = CostTable::default();
//! table.cpu_hour = Some("0.05".parse().unwrap());
//! table.gib_hour = Some("0.01".parse().unwrap());
//! // Two CPU-hours, and 1 GiB held for one hour.
//! let usage = Usage::local(2 * 3_600_000, 1 << 20, 3_600_000);
//! assert_eq!(table.price(&usage), "0.11".parse::<Money>().unwrap());
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Decimal places a [`Money`] keeps (and a price may be written with).
pub const MONEY_DECIMALS: u32 = 9;
const NANOS_PER_UNIT: i128 = 1_000_000_000;
const MS_PER_HOUR: i128 = 3_600_000;
const KIB_PER_GIB: i128 = 1 << 20;

/// An amount of money: a whole number of billionths of the currency unit. Exact: sums never
/// drift, and it reads and writes as a decimal string.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Money {
    nanos: i128,
}

impl Money {
    /// Nothing.
    pub const ZERO: Money = Money { nanos: 0 };

    /// The amount of `nanos` billionths of the currency unit.
    pub const fn from_nanos(nanos: i128) -> Money {
        Money { nanos }
    }

    /// The amount in billionths of the currency unit.
    pub const fn nanos(self) -> i128 {
        self.nanos
    }

    /// Whether the amount is zero.
    pub const fn is_zero(self) -> bool {
        self.nanos == 0
    }

    /// The amount for people: two decimal places from 1 up (`12.35`), four significant digits
    /// below (`0.02700`, `0.00001389`: a local attempt at cloud prices costs millionths), `0`
    /// for nothing. Rounded half up.
    pub fn human(self) -> String {
        let magnitude = self.nanos.saturating_abs();
        if magnitude == 0 {
            return "0".to_owned();
        }
        if magnitude >= NANOS_PER_UNIT {
            return self.to_places(2);
        }
        let digits = magnitude.ilog10() + 1;
        self.to_places((13 - digits).clamp(2, MONEY_DECIMALS))
    }

    /// The amount rounded half up (away from zero) to `places` decimal places (at most nine),
    /// as text with exactly that many: `0.0125` to 3 places is `0.013`, to 2 places `0.01`.
    pub fn to_places(self, places: u32) -> String {
        let places = places.min(MONEY_DECIMALS);
        let step = 10_i128.pow(MONEY_DECIMALS - places);
        let magnitude = self.nanos.saturating_abs();
        let rounded = (magnitude + step / 2) / step;
        let scale = 10_i128.pow(places);
        let sign = if self.nanos < 0 && rounded != 0 {
            "-"
        } else {
            ""
        };
        if places == 0 {
            return format!("{sign}{rounded}");
        }
        let width = places as usize;
        format!(
            "{sign}{}.{:0width$}",
            rounded / scale,
            rounded % scale,
            width = width
        )
    }
}

impl std::ops::Add for Money {
    type Output = Money;

    fn add(self, other: Money) -> Money {
        Money {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }
}

impl std::ops::AddAssign for Money {
    fn add_assign(&mut self, other: Money) {
        *self = *self + other;
    }
}

impl std::iter::Sum for Money {
    fn sum<I: Iterator<Item = Money>>(iter: I) -> Money {
        iter.fold(Money::ZERO, |total, amount| total + amount)
    }
}

/// The exact decimal, without trailing zeros: `0.0125`, `3`, `-1.5`.
impl fmt::Display for Money {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let magnitude = self.nanos.saturating_abs();
        let whole = magnitude / NANOS_PER_UNIT;
        let fraction = magnitude % NANOS_PER_UNIT;
        if self.nanos < 0 {
            formatter.write_str("-")?;
        }
        if fraction == 0 {
            return write!(formatter, "{whole}");
        }
        let digits = format!("{fraction:09}");
        write!(formatter, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

/// Why a text is not an amount of money.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MoneyError {
    /// Not a plain decimal number (`0.05`, `12`, `1.5e3` is refused).
    #[error("`{0}` is not a decimal number")]
    NotDecimal(String),
    /// More decimal places than a [`Money`] keeps.
    #[error("`{0}` has more than 9 decimal places")]
    TooPrecise(String),
    /// Too large to be an amount.
    #[error("`{0}` is too large")]
    TooLarge(String),
}

/// Parses a plain decimal: optional `-`, digits, optionally `.` and up to nine digits.
impl FromStr for Money {
    type Err = MoneyError;

    fn from_str(text: &str) -> Result<Money, MoneyError> {
        let not_decimal = || MoneyError::NotDecimal(text.to_owned());
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = match digits.split_once('.') {
            Some((whole, fraction)) => (whole, fraction),
            None => (digits, ""),
        };
        let all_digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
        if (whole.is_empty() && fraction.is_empty())
            || !all_digits(whole)
            || !all_digits(fraction)
            || (digits.contains('.') && fraction.is_empty())
        {
            return Err(not_decimal());
        }
        if fraction.len() > MONEY_DECIMALS as usize {
            return Err(MoneyError::TooPrecise(text.to_owned()));
        }
        let too_large = || MoneyError::TooLarge(text.to_owned());
        let whole: i128 = if whole.is_empty() {
            0
        } else if whole.len() > 20 {
            return Err(too_large());
        } else {
            whole.parse().map_err(|_| not_decimal())?
        };
        let mut fraction_nanos: i128 = if fraction.is_empty() {
            0
        } else {
            fraction.parse().map_err(|_| not_decimal())?
        };
        fraction_nanos *= 10_i128.pow(MONEY_DECIMALS - fraction.len() as u32);
        let nanos = whole
            .checked_mul(NANOS_PER_UNIT)
            .and_then(|nanos| nanos.checked_add(fraction_nanos))
            .ok_or_else(too_large)?;
        Ok(Money {
            nanos: if negative { -nanos } else { nanos },
        })
    }
}

impl Serialize for Money {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Money {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Money, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A pipeline's price table (`cost:`). Every price is optional: an attempt pays for what the
/// table prices and nothing else.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct CostTable {
    /// Price of one CPU-hour (user + system CPU time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_hour: Option<Money>,
    /// Price of one GiB of memory held for one hour (local: the attempt's largest resident
    /// set over its wall time; Slurm: the memory requested over the job's wall time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gib_hour: Option<Money>,
    /// Price of one node-hour, by Slurm partition (a Slurm attempt pays its nodes × its wall
    /// time at its partition's price).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_hour: BTreeMap<String, Money>,
    /// The currency's name as the views print it (`EUR`, `core-hours`), if given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

/// What a Slurm attempt asked for when it was submitted (its `unit_submitted`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlurmRequest {
    /// The partition the job ran in, when known.
    pub partition: Option<String>,
    /// How many nodes it asked for.
    pub nodes: u32,
    /// The memory it asked for, in MiB, when it asked (else memory is not priced).
    pub mem_mib: Option<u64>,
}

/// What one attempt used, as its records say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Usage {
    /// User + system CPU time, in milliseconds.
    pub cpu_ms: u64,
    /// The largest resident set, in KiB (local attempts' memory).
    pub max_rss_kib: u64,
    /// Wall time, in milliseconds.
    pub wall_ms: u64,
    /// For a Slurm attempt, what it was submitted with: its memory is priced by the request,
    /// and its nodes by the partition's `node_hour`.
    pub slurm: Option<SlurmRequest>,
}

impl Usage {
    /// A local attempt's use: CPU time, largest resident set, wall time.
    pub fn local(cpu_ms: u64, max_rss_kib: u64, wall_ms: u64) -> Usage {
        Usage {
            cpu_ms,
            max_rss_kib,
            wall_ms,
            slurm: None,
        }
    }

    /// A Slurm attempt's use: CPU time (as far as recorded), wall time and the request.
    pub fn slurm(cpu_ms: u64, wall_ms: u64, request: SlurmRequest) -> Usage {
        Usage {
            cpu_ms,
            max_rss_kib: 0,
            wall_ms,
            slurm: Some(request),
        }
    }
}

impl CostTable {
    /// Whether the table prices anything.
    pub fn prices_anything(&self) -> bool {
        self.cpu_hour.is_some() || self.gib_hour.is_some() || !self.node_hour.is_empty()
    }

    /// The price of an attempt that used `usage`: CPU-hours × `cpu_hour` + GiB-hours ×
    /// `gib_hour` (a local attempt's largest resident set, a Slurm attempt's requested
    /// memory, over its wall time) + nodes × wall hours × its partition's `node_hour`. Computed
    /// exactly and rounded once, half up, to a billionth.
    pub fn price(&self, usage: &Usage) -> Money {
        let price = |money: Option<Money>| money.map_or(0, Money::nanos);
        let wall_ms = i128::from(usage.wall_ms);
        // Everything over the common denominator ms-per-hour × KiB-per-GiB.
        let mut numerator = i128::from(usage.cpu_ms) * price(self.cpu_hour) * KIB_PER_GIB;
        let memory_kib = match &usage.slurm {
            Some(request) => request
                .mem_mib
                .map_or(0, |mib| i128::from(mib).saturating_mul(1024)),
            None => i128::from(usage.max_rss_kib),
        };
        numerator = numerator.saturating_add(
            memory_kib
                .saturating_mul(wall_ms)
                .saturating_mul(price(self.gib_hour)),
        );
        if let Some(request) = &usage.slurm
            && let Some(partition) = &request.partition
            && let Some(node_hour) = self.node_hour.get(partition)
        {
            let node_part = i128::from(request.nodes)
                .saturating_mul(wall_ms)
                .saturating_mul(node_hour.nanos())
                .saturating_mul(KIB_PER_GIB);
            numerator = numerator.saturating_add(node_part);
        }
        let denominator = MS_PER_HOUR * KIB_PER_GIB;
        Money::from_nanos((numerator + denominator / 2) / denominator)
    }

    /// `amount` for people ([`Money::human`]), then the currency when one is named
    /// (`0.01250 EUR`).
    pub fn show(&self, amount: Money) -> String {
        match &self.currency {
            Some(currency) => format!("{} {currency}", amount.human()),
            None => amount.human(),
        }
    }
}

#[cfg(test)]
mod tests;
