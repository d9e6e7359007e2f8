//! `apollo show [RUN]` without a unit: the run's summary.

use std::io::{BufWriter, Write};

use apollo_store::{RunId, StateDir};

use super::read_timeline;
use crate::cmd::replay::TableFormat;
use crate::error::{CliError, output};
use crate::exit::Exit;

/// `apollo show [RUN]` without a unit: the run's summary — its status and counts as `runs`
/// gives them, then each unit's state (the closed set of the run model), attempts and time.
pub(super) fn show_run(
    state: &StateDir,
    run_id: &RunId,
    format: TableFormat,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let summary = state.run_summary(run_id)?;
    let timeline = read_timeline(state, run_id, stderr)?;
    let counts = timeline.counts();
    let reads = apollo_runner::read::CostReads::new();
    let cost = apollo_runner::read::run_cost(state, &timeline, &reads);
    let mut out = BufWriter::new(stdout);
    if format == TableFormat::Json {
        let document =
            apollo_runner::read::show_run_document(run_id, &summary, &timeline, cost.as_ref());
        serde_json::to_writer_pretty(&mut out, &document).map_err(|error| output(error.into()))?;
        writeln!(out).map_err(output)?;
        out.flush().map_err(output)?;
        return Ok(Exit::Success);
    }
    let pipeline = crate::excerpt::clean_line(summary.pipeline.as_deref().unwrap_or("?"));
    writeln!(
        out,
        "run {run_id} of `{pipeline}`: {}{}{}",
        summary.state.as_str(),
        if summary.kind.is_run() {
            String::new()
        } else {
            format!(" ({})", summary.kind.as_str())
        },
        // The default goes unsaid.
        if summary.durability.is_fsync() {
            String::new()
        } else {
            format!(" (durability {})", summary.durability)
        }
    )
    .map_err(output)?;
    if let Some(problem) = &summary.problem {
        writeln!(out, "  problem: {problem}").map_err(output)?;
    }
    writeln!(out, "  {}, of {} units", counts.text(0), summary.n_units).map_err(output)?;
    // The verdict as the run model has it (the reproduction's `reproduction_compared`).
    if let Some(verdict) = &timeline.facts.compared {
        let verdict = crate::cmd::runs::verdict_text(verdict);
        writeln!(out, "  reproduction: {verdict}").map_err(output)?;
    }
    if let Some(cost) = &cost {
        writeln!(out, "  {}", run_cost_text(cost)).map_err(output)?;
    }
    write!(out, "{}", deadline_text(timeline.deadline().as_ref())).map_err(output)?;
    let width = (timeline.units.iter())
        .map(|unit| unit.name.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    for unit in &timeline.units {
        let mut line = format!(
            "  {:<width$}  {:<25}",
            crate::excerpt::clean_line(&unit.name),
            timeline.state_of(unit).label()
        );
        match (&unit.reused, unit.last_attempt()) {
            (Some(reused), _) => line.push_str(&format!(
                "  from run {} attempt {}{}",
                reused.from_run,
                reused.from_attempt,
                crate::excerpt::restored_text(&reused.restored)
            )),
            (None, Some(last)) => line.push_str(&format!(
                "  {} attempt{}, last {}",
                unit.attempts.len(),
                if unit.attempts.len() == 1 { "" } else { "s" },
                crate::progress::human_duration(std::time::Duration::from_millis(
                    last.duration_ms()
                ))
            )),
            (None, None) => {}
        }
        if let Some(late) = timeline.unit_deadline(unit).and_then(|d| d.late_by) {
            line.push_str(&format!(
                "  LATE by {}",
                crate::progress::human_duration(late)
            ));
        }
        if let Some(unit_cost) = cost.as_ref().and_then(|cost| cost.unit(&unit.name)) {
            line.push_str(&unit_cost_text(
                cost.as_ref(),
                unit_cost,
                unit.reused.is_some(),
            ));
        }
        writeln!(out, "{}", line.trim_end()).map_err(output)?;
    }
    writeln!(out, "  details: apollo show {run_id} UNIT").map_err(output)?;
    out.flush().map_err(output)?;
    Ok(Exit::Success)
}

/// A deadline's line (`  deadline 2026-12-04 06:00:00 UTC: late by 2m 30s`), or nothing
/// without one.
pub(super) fn deadline_text(deadline: Option<&apollo_replay::DeadlineStatus>) -> String {
    let Some(deadline) = deadline else {
        return String::new();
    };
    let at = deadline.deadline.format("%Y-%m-%d %H:%M:%S UTC");
    let standing = match (deadline.ended, deadline.late_by) {
        (_, Some(late)) => format!("late by {}", crate::progress::human_duration(late)),
        (Some(_), None) => "met".to_owned(),
        (None, None) if deadline.deadline < chrono::Utc::now() => "passed, not ended".to_owned(),
        (None, None) => "not ended".to_owned(),
    };
    format!("  deadline {at}: {standing}\n")
}

/// The run's cost line: `cost 0.0123 EUR, wasted 0.0040 EUR, saved 0.0100 EUR`.
pub(super) fn run_cost_text(cost: &apollo_replay::RunCost) -> String {
    let mut text = format!(
        "cost {}, wasted {}, saved {}",
        cost.show(cost.total),
        cost.show(cost.wasted),
        cost.show(cost.saved)
    );
    if cost.saved_unknown > 0 {
        text.push_str(&format!(
            " (and {} reused unit{} whose original attempt is not priced)",
            cost.saved_unknown,
            if cost.saved_unknown == 1 { "" } else { "s" }
        ));
    }
    text
}

/// A unit's cost after its line in the run's summary: `  cost 0.0080 EUR (wasted 0.0040
/// EUR)`, or for a reused unit `  saved 0.0100 EUR`; nothing for a unit that never ran.
pub(super) fn unit_cost_text(
    cost: Option<&apollo_replay::RunCost>,
    unit_cost: &apollo_replay::UnitCost,
    reused: bool,
) -> String {
    let Some(cost) = cost else {
        return String::new();
    };
    let mut text = String::new();
    if !unit_cost.attempts.is_empty() {
        text.push_str(&format!("  cost {}", cost.show(unit_cost.total)));
        if !unit_cost.wasted.is_zero() {
            text.push_str(&format!(" (wasted {})", cost.show(unit_cost.wasted)));
        }
    }
    match unit_cost.saved {
        Some(saved) => text.push_str(&format!("  saved {}", cost.show(saved))),
        None if reused => {
            text.push_str("  saved: not priced (its original run is gone or had no `cost:`)")
        }
        None => {}
    }
    text
}
