//! What `apollo run` prints around the engine's progress: the opening line, the summary, and
//! the dry-run plan.

use std::io::Write;
use std::time::Duration;

use apollo_core::Pipeline;
use apollo_core::engine::{Planned, RunReport, UnitResult};
use apollo_core::event::RunStatus;
use apollo_runner::{OpenRun, Opening, Plan};
use apollo_store::RunId;

use crate::error::{CliError, output};
use crate::excerpt;
use crate::progress::{RunNotes, human_duration};

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `apollo: run … of …` or `apollo: resuming run … of …`.
pub(crate) fn opening_line(run: &OpenRun<'_>, pipeline: &Pipeline) -> String {
    let n_units = pipeline.units.len();
    match run.opening() {
        Opening::Resumed => format!(
            "apollo: resuming run {} of `{}`: {} of {n_units} unit{} already done",
            run.run_id(),
            crate::excerpt::clean_line(&pipeline.name),
            run.n_done(),
            plural(n_units)
        ),
        _ => format!(
            "apollo: run {} of `{}`: {n_units} unit{} (state in {})",
            run.run_id(),
            crate::excerpt::clean_line(&pipeline.name),
            plural(n_units),
            run.state_dir().path().display()
        ),
    }
}

/// The summary after the run: counts, each failed unit with the end of its output and the
/// command that prints all of it, and what to do next.
///
/// The counts are the run model's one set of unit states (`UnitResult::state`), printed as
/// every text view prints them (`progress::counts_text`).
pub(crate) fn summary(
    run_id: &RunId,
    report: &RunReport,
    notes: &RunNotes,
    elapsed: Duration,
) -> String {
    let counts: apollo_core::UnitCounts = (report.units.iter())
        .map(|(_, result)| result.state())
        .collect();
    let n_flaky = report
        .units
        .iter()
        .filter(|(unit, result)| {
            matches!(result, UnitResult::Succeeded { .. }) && notes.flaky.contains(unit)
        })
        .count();
    let status = report
        .status
        .map_or("incomplete (--only)", RunStatus::as_str);
    let mut summary = format!(
        "apollo: run {run_id} {status} in {}: {}",
        human_duration(elapsed),
        counts.text(n_flaky)
    );
    if n_flaky > 0 {
        let flaky: Vec<&str> = notes.flaky.iter().map(String::as_str).collect();
        summary.push_str(&format!(
            "\n  flaky: {} (passed only after a retry)",
            flaky.join(", ")
        ));
    }
    for (unit, result) in &report.units {
        if let UnitResult::Failed {
            attempt,
            log_dir,
            error,
            ..
        } = result
        {
            let what = result.state().label();
            summary.push_str(&format!("\n  {what}: {unit} (attempt {attempt})"));
            if let Some(error) = error {
                summary.push_str(&format!(": {error}"));
            }
            // A quick, silent attempt has no files; one that ran a while has empty ones.
            match excerpt::of_attempt(log_dir, excerpt::EXCERPT_LINES) {
                Some(excerpt) => {
                    summary.push('\n');
                    summary.push_str(&excerpt::render(
                        &excerpt,
                        "          ",
                        run_id.as_str(),
                        unit,
                        None,
                    ));
                }
                None if !log_dir.as_os_str().is_empty() => {
                    summary.push_str("\n          logs: none (it wrote nothing)");
                }
                None => {}
            }
        }
    }
    match report.status {
        Some(RunStatus::Failed) => summary.push_str(
            "\n  fix the cause, then `apollo run` resumes: what succeeded is not run again",
        ),
        Some(RunStatus::Interrupted) => {
            summary.push_str("\n  `apollo run` resumes it: what succeeded is not run again")
        }
        None => summary
            .push_str("\n  the run stays open: `apollo run` resumes it with the remaining units"),
        Some(RunStatus::Succeeded) => {}
    }
    summary
}

/// `--dry-run`: what would run, unit by unit, and why.
pub(crate) fn dry_run(
    plan: &Plan,
    pipeline: &Pipeline,
    stdout: &mut dyn Write,
) -> Result<(), CliError> {
    match &plan.resumes {
        Some(run_id) => writeln!(
            stdout,
            "dry run: would resume run {run_id} of `{}`",
            crate::excerpt::clean_line(&pipeline.name)
        ),
        None => writeln!(
            stdout,
            "dry run: would start a new run of `{}`",
            crate::excerpt::clean_line(&pipeline.name)
        ),
    }
    .map_err(output)?;
    let width = plan
        .units
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    let conditions = when_commands(pipeline);
    for (name, planned) in &plan.units {
        let verb = if planned.stops_run() {
            "stop"
        } else if planned.runs() {
            "run"
        } else {
            "skip"
        };
        let reason = planned_reason(planned, conditions.get(name.as_str()));
        writeln!(stdout, "  {verb:<4}  {name:<width$}  {reason}").map_err(output)?;
    }
    let n_may_be_reused = (plan.units.iter())
        .filter(|(_, planned)| planned.may_be_reused())
        .count();
    writeln!(
        stdout,
        "{} of {} unit{} would run{}",
        plan.n_to_run(),
        plan.units.len(),
        plural(plan.units.len()),
        if n_may_be_reused > 0 {
            format!(" ({n_may_be_reused} of them only if an upstream output changes, else reused)")
        } else {
            String::new()
        }
    )
    .map_err(output)?;
    let stops: Vec<&str> = plan
        .units
        .iter()
        .filter(|(_, planned)| planned.stops_run())
        .map(|(name, _)| name.as_str())
        .collect();
    if !stops.is_empty() {
        writeln!(
            stdout,
            "the run would stop for a human's verdict (exit 5) at {}: `apollo mark RUN UNIT --rerun` allows a rerun",
            stops.join(", ")
        )
        .map_err(output)?;
    }
    Ok(())
}

/// The last object of `run --format json`: the run's end, its counts (the same set as the
/// text summary) and each failed unit with the end of its output.
pub(crate) fn summary_json(
    run_id: &RunId,
    report: &RunReport,
    notes: &RunNotes,
    elapsed: Duration,
) -> serde_json::Value {
    let units: Vec<serde_json::Value> = report
        .units
        .iter()
        .map(|(unit, result)| {
            let state = result.state();
            let detail = match result {
                UnitResult::Succeeded { attempt } if notes.flaky.contains(unit) => {
                    serde_json::json!({"attempt": attempt, "flaky": true})
                }
                UnitResult::Succeeded { attempt } | UnitResult::SelfSkipped { attempt } => {
                    serde_json::json!({"attempt": attempt})
                }
                UnitResult::SkippedWhen { condition } => serde_json::json!({"when": condition}),
                UnitResult::ReusedFromRun { run_id, attempt } => {
                    serde_json::json!({"from_run": run_id, "attempt": attempt})
                }
                UnitResult::Failed {
                    attempt,
                    log_dir,
                    error,
                    ..
                } => serde_json::json!({
                    "attempt": attempt, "error": error, "log_dir": log_dir,
                    "excerpt": excerpt::of_attempt(log_dir, excerpt::EXCERPT_LINES)
                        .map(|excerpt| serde_json::json!({"stream": excerpt.stream, "lines": excerpt.lines})),
                }),
                UnitResult::SkippedUpstream { upstream } => serde_json::json!({"upstream": upstream}),
                UnitResult::CutOff { attempt, .. } => serde_json::json!({"attempt": attempt}),
                _ => serde_json::json!({}),
            };
            let status = state.as_str();
            let mut value = serde_json::json!({"unit": unit, "status": status});
            if let (Some(object), serde_json::Value::Object(extra)) = (value.as_object_mut(), detail) {
                object.extend(extra);
            }
            value
        })
        .collect();
    let counts: apollo_core::UnitCounts = (report.units.iter())
        .map(|(_, result)| result.state())
        .collect();
    serde_json::json!({
        "schema": crate::run_events::RUN_EVENTS_SCHEMA,
        "event": "summary",
        "counts": counts.to_json(),
        "run_id": run_id.as_str(),
        "status": report.status.map(RunStatus::as_str),
        "elapsed_ms": u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        "units": units,
    })
}

/// The units with a `when: {command}`, by name, with the condition's text: it is decided
/// only when the unit runs, so the plan says what it waits for.
fn when_commands(pipeline: &Pipeline) -> std::collections::HashMap<&str, String> {
    (pipeline.units.iter())
        .filter_map(|unit| Some((unit.name.as_str(), unit.when_command.as_ref()?.display())))
        .collect()
}

/// Why `planned`, and for a unit that runs with a `when: {command}`, on what condition.
fn planned_reason(planned: &Planned, condition: Option<&String>) -> String {
    match condition {
        Some(condition) if planned.runs() => {
            format!("{planned}; runs if `{condition}` succeeds, else skipped")
        }
        _ => planned.to_string(),
    }
}

/// `--dry-run --format json`: the plan as one document.
pub(crate) fn dry_run_json(
    plan: &Plan,
    pipeline: &Pipeline,
    stdout: &mut dyn Write,
) -> Result<(), CliError> {
    let conditions = when_commands(pipeline);
    let units: Vec<serde_json::Value> = plan
        .units
        .iter()
        .map(|(name, planned)| {
            let action = if planned.stops_run() {
                "stop"
            } else if planned.runs() {
                "run"
            } else {
                "skip"
            };
            let reason = planned_reason(planned, conditions.get(name.as_str()));
            let mut unit = serde_json::json!({"unit": name, "action": action, "reason": reason});
            if !planned.restores().is_empty() {
                unit["restores"] = serde_json::json!(planned.restores());
            }
            unit
        })
        .collect();
    let document = serde_json::json!({
        "schema": "apollo.plan/1",
        "pipeline": pipeline.name,
        "resumes": plan.resumes.as_ref().map(RunId::as_str),
        "n_to_run": plan.n_to_run(),
        "units": units,
    });
    serde_json::to_writer_pretty(&mut *stdout, &document).map_err(|error| output(error.into()))?;
    writeln!(stdout).map_err(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_shows_why_a_unit_failed_and_counts_as_run_finished_does() {
        let log_dir = tempfile::tempdir().unwrap();
        std::fs::write(
            log_dir.path().join("stderr"),
            "loading rows\nTraceback (most recent call last):\n  File \"report.py\", line 3\nKeyError: 'total'\n",
        )
        .unwrap();
        let run_id: RunId = "20261201T030000Z-3f9a".parse().unwrap();
        let report = RunReport {
            status: Some(RunStatus::Failed),
            units: vec![
                ("fetch".to_owned(), UnitResult::Succeeded { attempt: 2 }),
                ("early".to_owned(), UnitResult::Reused),
                ("deploy".to_owned(), UnitResult::NotRun),
                ("holiday".to_owned(), UnitResult::SelfSkipped { attempt: 1 }),
                (
                    "report".to_owned(),
                    UnitResult::Failed {
                        attempt: 2,
                        log_dir: log_dir.path().to_path_buf(),
                        error: Some("execute exited with code 1".to_owned()),
                        awaits_verdict: false,
                    },
                ),
                (
                    "publish".to_owned(),
                    UnitResult::SkippedUpstream {
                        upstream: "report".to_owned(),
                    },
                ),
            ],
        };
        let mut notes = RunNotes::default();
        notes.flaky.insert("fetch".to_owned());
        insta::assert_snapshot!(summary(
            &run_id,
            &report,
            &notes,
            Duration::from_millis(1500)
        ));
    }
}
