//! What `apollo run` prints around the engine's progress: the opening line, the summary, and
//! the dry-run plan.

use std::io::Write;
use std::time::Duration;

use apollo_core::Pipeline;
use apollo_core::engine::{RunReport, UnitResult};
use apollo_core::event::RunStatus;
use apollo_runner::{OpenRun, Opening, Plan};
use apollo_store::RunId;

use crate::error::{CliError, output};
use crate::progress::human_duration;

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `apollo: run … of …` or `apollo: resuming run … of …`.
pub(crate) fn opening_line(run: &OpenRun<'_>, pipeline: &Pipeline) -> String {
    let n_units = pipeline.units.len();
    match run.opening() {
        Opening::Resumed => format!(
            "apollo: resuming run {} of `{}`: {} of {n_units} unit{} already succeeded",
            run.run_id(),
            pipeline.name,
            run.n_done(),
            plural(n_units)
        ),
        _ => format!(
            "apollo: run {} of `{}`: {n_units} unit{} (state in {})",
            run.run_id(),
            pipeline.name,
            plural(n_units),
            run.state_dir().path().display()
        ),
    }
}

/// The summary after the run: counts, each failed unit with its logs, and what to do next.
pub(crate) fn summary(run_id: &RunId, report: &RunReport, elapsed: Duration) -> String {
    let n_ran = report.count(|result| {
        matches!(
            result,
            UnitResult::Succeeded { .. } | UnitResult::SelfSkipped { .. }
        )
    });
    let n_reused = report.count(|result| matches!(result, UnitResult::Reused));
    let n_from_runs = report.count(|result| matches!(result, UnitResult::ReusedFromRun { .. }));
    let n_failed = report.count(|result| matches!(result, UnitResult::Failed { .. }));
    let n_skipped = report.count(|result| matches!(result, UnitResult::SkippedUpstream { .. }));
    let n_not_started = report.count(|result| matches!(result, UnitResult::NotRun));
    let status = report
        .status
        .map_or("incomplete (--only)", RunStatus::as_str);
    // Units reused from earlier runs are counted apart, when there are any (DESIGN §17).
    let reused = if n_from_runs > 0 {
        format!("{n_from_runs} reused, ")
    } else {
        String::new()
    };
    let mut summary = format!(
        "apollo: run {run_id} {status} in {}: {n_ran} succeeded, {n_reused} already done, {reused}{n_failed} failed, {n_skipped} skipped, {n_not_started} not started",
        human_duration(elapsed)
    );
    for (unit, result) in &report.units {
        if let UnitResult::Failed {
            attempt,
            log_dir,
            error,
        } = result
        {
            summary.push_str(&format!("\n  failed: {unit} (attempt {attempt})"));
            if let Some(error) = error {
                summary.push_str(&format!(": {error}"));
            }
            // A quick, silent attempt has no files; one that ran a while has empty ones.
            let wrote_something = ["stdout", "stderr"].iter().any(|name| {
                std::fs::metadata(log_dir.join(name)).is_ok_and(|metadata| metadata.len() > 0)
            });
            if wrote_something {
                summary.push_str(&format!(
                    "\n          logs: {}/{{stdout,stderr}}",
                    log_dir.display()
                ));
            } else if !log_dir.as_os_str().is_empty() {
                summary.push_str("\n          logs: none (it wrote nothing)");
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
            pipeline.name
        ),
        None => writeln!(
            stdout,
            "dry run: would start a new run of `{}`",
            pipeline.name
        ),
    }
    .map_err(output)?;
    let width = plan
        .units
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    for (name, planned) in &plan.units {
        let verb = if planned.stops_run() {
            "stop"
        } else if planned.runs() {
            "run"
        } else {
            "skip"
        };
        writeln!(stdout, "  {verb:<4}  {name:<width$}  {planned}").map_err(output)?;
    }
    writeln!(
        stdout,
        "{} of {} unit{} would run",
        plan.n_to_run(),
        plan.units.len(),
        plural(plan.units.len())
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
