//! `apollo export`: a recorded run in the formats other tools read — OpenTelemetry traces
//! ([`write_otlp_json`]), W3C PROV ([`write_prov_json`]), OpenLineage run events
//! ([`write_openlineage`]) and a Workflow Run RO-Crate ([`ro_crate`]).
//!
//! Each renderer is a pure function of the run model ([`Timeline`]): any recorded run
//! exports, a succeeded one as a failed, resumed, killed or still running one, and a
//! reproduction. The shapes are hand-written serde structures (the Rust crates for these
//! formats are immature); each format is checked in tests by its own ecosystem's validator.
//!
//! Every id is derived from the run id, so exporting the same run twice gives the same
//! document, and an attempt keeps its ids as the run goes on (a live export converges).

mod openlineage;
mod otlp;
mod otlp_model;
mod prov;
mod ro_crate;

#[cfg(test)]
mod tests;

use std::str::FromStr;

use apollo_core::event::AttemptStatus;
use chrono::{DateTime, SecondsFormat, Utc};

use crate::{Attempt, AttemptState, Timeline};

pub use openlineage::write_openlineage;
pub use otlp::write_otlp_json;
pub use prov::write_prov_json;
pub use ro_crate::{CrateFile, DEFINITION_FILE, RoCrate, ro_crate};

/// A format of `apollo export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExportFormat {
    /// OpenTelemetry traces as OTLP/JSON (`{"resourceSpans": [...]}`).
    OtlpJson,
    /// W3C PROV-JSON.
    ProvJson,
    /// OpenLineage run events, one JSON object a line.
    OpenLineage,
    /// A Workflow Run RO-Crate (Provenance Run Crate profile): a directory.
    RoCrate,
}

impl ExportFormat {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [ExportFormat; 4] = [
        ExportFormat::OtlpJson,
        ExportFormat::ProvJson,
        ExportFormat::OpenLineage,
        ExportFormat::RoCrate,
    ];

    /// The format's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::OtlpJson => "otlp-json",
            ExportFormat::ProvJson => "prov-json",
            ExportFormat::OpenLineage => "openlineage",
            ExportFormat::RoCrate => "ro-crate",
        }
    }

    /// Whether the format is a directory rather than one document.
    pub fn is_directory(self) -> bool {
        self == ExportFormat::RoCrate
    }
}

impl std::fmt::Display for ExportFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A format name that is not one of [`ExportFormat::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown export format `{0}` (expected otlp-json, prov-json, openlineage or ro-crate)")]
pub struct UnknownExportFormat(pub String);

impl FromStr for ExportFormat {
    type Err = UnknownExportFormat;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ExportFormat::ALL
            .into_iter()
            .find(|format| format.as_str() == name)
            .ok_or_else(|| UnknownExportFormat(name.to_owned()))
    }
}

/// Who wrote an export: apollo's repository and version (OpenLineage's `producer`, the
/// agents of PROV and RO-Crate).
pub(crate) const PRODUCER: &str = concat!(
    env!("CARGO_PKG_REPOSITORY"),
    "/releases/tag/v",
    env!("CARGO_PKG_VERSION")
);

/// `bytes` bytes of hex (2 digits each) derived from `parts`: the same parts, the same id.
pub(crate) fn derived_hex(parts: &[&str], bytes: usize) -> String {
    let joined = parts.join("\u{0}");
    let mut hex = apollo_core::hash::sha256_hex(joined.as_bytes());
    hex.truncate(bytes * 2);
    hex
}

/// The run's id, or `run` for a timeline without `run_started`.
pub(crate) fn run_id(timeline: &Timeline) -> &str {
    timeline.run_id.as_deref().unwrap_or("run")
}

/// The pipeline's name, or `pipeline`.
pub(crate) fn pipeline(timeline: &Timeline) -> &str {
    timeline.pipeline.as_deref().unwrap_or("pipeline")
}

/// When the run ended: its `run_finished`, else its last record.
pub(crate) fn run_end(timeline: &Timeline) -> DateTime<Utc> {
    (timeline.finished.map(|end| end.ts))
        .or(timeline.last_ts)
        .unwrap_or_else(|| timeline.origin())
}

/// An attempt's state for exports: how it finished, or `running` (an apollo is writing the
/// run) or `cut_off` (apollo stopped before it finished).
pub(crate) fn attempt_state(timeline: &Timeline, attempt: &Attempt) -> &'static str {
    match attempt.state {
        AttemptState::Finished(status) => status.as_str(),
        AttemptState::Unfinished if timeline.live && timeline.finished.is_none() => "running",
        AttemptState::Unfinished => "cut_off",
    }
}

/// An RFC 3339 timestamp with milliseconds, in UTC (`2026-11-30T02:15:07.010Z`).
pub(crate) fn rfc3339(ts: DateTime<Utc>) -> String {
    ts.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// An attempt's error for users: its error line, `timed out`, `cut off: …`, or its exit.
pub(crate) fn attempt_error(timeline: &Timeline, attempt: &Attempt) -> Option<String> {
    match attempt.state {
        AttemptState::Finished(AttemptStatus::Succeeded | AttemptStatus::Skipped) => None,
        AttemptState::Unfinished if attempt_state(timeline, attempt) == "running" => None,
        AttemptState::Unfinished => Some("cut off: apollo stopped before it finished".to_owned()),
        AttemptState::Finished(_) => Some(match attempt.error_line() {
            Some(line) => line.to_owned(),
            None => crate::text::describe_exit(attempt.exit()),
        }),
    }
}
