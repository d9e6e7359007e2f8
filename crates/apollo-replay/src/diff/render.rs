//! [`RunDiff`] written out: the aligned text of `apollo diff` and its JSON document.

use std::io::{self, Write};

use apollo_core::UnitState;

use serde::Serialize;

use super::{Change, RunDiff, RunSide, UnitDiff};
use crate::display::{format_delta, format_duration, terminal_safe};

/// Writes the diff as an aligned table, a "why" line per unit that differs, and a verdict.
pub fn write_diff_text<W: Write>(diff: &RunDiff, mut out: W, color: bool) -> io::Result<()> {
    for (label, side) in [("A", &diff.run_a), ("B", &diff.run_b)] {
        writeln!(
            out,
            "{label}  {}  {}  {}",
            terminal_safe(side.run_id.as_deref().unwrap_or("?")),
            terminal_safe(side.pipeline.as_deref().unwrap_or("?")),
            side.status
        )?;
    }
    for (name, a, b) in diff.changed_params() {
        let shown = |value: Option<&serde_json::Value>| match value {
            None => "(unset)".to_owned(),
            Some(serde_json::Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        };
        writeln!(
            out,
            "param {}: {} → {}",
            terminal_safe(name),
            terminal_safe(&shown(a)),
            terminal_safe(&shown(b))
        )?;
    }
    writeln!(out)?;

    let unit_width = (diff.units.iter())
        .map(|unit| unit.unit.chars().count())
        .chain([4])
        .max()
        .unwrap_or(4);
    let status_width = 17;
    writeln!(
        out,
        "{:<unit_width$}  {:<status_width$}{:<status_width$}{:<9}{:<9}{:>12}{:>12}{:>10}",
        "UNIT", "STATUS A", "STATUS B", "INPUT", "OUTPUT", "DURATION A", "DURATION B", "DELTA"
    )?;
    let paint = |text: String, changed: bool| {
        if color && changed {
            format!("\x1b[1;33m{text}\x1b[0m")
        } else {
            text
        }
    };
    for unit in &diff.units {
        let status = |state: Option<UnitState>| state.map_or("-", UnitState::as_str);
        let duration = |ms: Option<u64>| ms.map(format_duration).unwrap_or_else(|| "-".into());
        let status_changed = unit.state_a != unit.state_b;
        let mut line = paint(
            format!("{:<unit_width$}  ", terminal_safe(&unit.unit)),
            !unit.is_same(),
        );
        line.push_str(&format!("{:<status_width$}", status(unit.state_a)));
        line.push_str(&paint(
            format!("{:<status_width$}", status(unit.state_b)),
            status_changed,
        ));
        line.push_str(&paint(
            format!("{:<9}", unit.input.as_str()),
            unit.input == Change::Changed,
        ));
        line.push_str(&paint(
            format!("{:<9}", unit.output.as_str()),
            unit.output == Change::Changed,
        ));
        let delta = (unit.duration_delta_ms.map(format_delta)).unwrap_or_else(|| "-".into());
        line.push_str(&format!(
            "{:>12}{:>12}{delta:>10}",
            duration(unit.duration_a_ms),
            duration(unit.duration_b_ms),
        ));
        writeln!(out, "{}", line.trim_end())?;
    }

    let changed: Vec<&UnitDiff> = diff.changed_units().collect();
    write_why(&mut out, &changed, unit_width)?;
    writeln!(out)?;
    if changed.is_empty() {
        writeln!(
            out,
            "runs match: {} units with the same status, inputs and outputs",
            diff.units.len()
        )?;
    } else {
        writeln!(
            out,
            "runs differ: {} of {} units changed",
            changed.len(),
            diff.units.len()
        )?;
    }
    out.flush()
}

/// The `why:` section: a line of reasons per unit that differs, and under it any changed
/// command of several lines, line by line.
fn write_why<W: Write>(out: &mut W, changed: &[&UnitDiff], unit_width: usize) -> io::Result<()> {
    if !changed.is_empty() {
        writeln!(out)?;
        writeln!(out, "why:")?;
        for unit in changed {
            writeln!(
                out,
                "  {:<unit_width$}  {}",
                terminal_safe(&unit.unit),
                terminal_safe(&unit.reasons().join("; "))
            )?;
            // A changed command of several lines, line by line under the reasons.
            let line_diffs = unit
                .input_changes
                .iter()
                .filter_map(|change| change.command_line_diff());
            for line in line_diffs.flatten() {
                writeln!(out, "  {:unit_width$}  {}", "", terminal_safe(&line))?;
            }
        }
    }
    Ok(())
}

/// Writes the diff as one JSON document: `{"same": bool, "run_a": …, "run_b": …, "units":
/// [{…, "same": bool, "reasons": [...]}]}`.
pub fn write_diff_json<W: Write>(diff: &RunDiff, mut out: W) -> io::Result<()> {
    #[derive(Serialize)]
    struct UnitJson<'a> {
        #[serde(flatten)]
        unit: &'a UnitDiff,
        same: bool,
        reasons: Vec<String>,
    }
    #[derive(Serialize)]
    struct DiffJson<'a> {
        schema: &'static str,
        same: bool,
        run_a: &'a RunSide,
        run_b: &'a RunSide,
        units: Vec<UnitJson<'a>>,
    }
    let document = DiffJson {
        schema: "apollo.diff/2",
        same: diff.is_same(),
        run_a: &diff.run_a,
        run_b: &diff.run_b,
        units: (diff.units.iter())
            .map(|unit| UnitJson {
                unit,
                same: unit.is_same(),
                reasons: unit.reasons(),
            })
            .collect(),
    };
    serde_json::to_writer_pretty(&mut out, &document)?;
    out.write_all(b"\n")?;
    out.flush()
}
