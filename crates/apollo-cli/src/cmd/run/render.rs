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
use crate::excerpt;
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

/// The summary after the run: counts, each failed unit with the end of its output and the
/// command that prints all of it, and what to do next.
///
/// The counts are the run's one set (DESIGN §17): a unit that skipped itself (exit 77) is
/// skipped, not succeeded, as `apollo runs` and the journal's `run_finished` count it; a unit
/// not run because an upstream failed is "not run".
pub(crate) fn summary(run_id: &RunId, report: &RunReport, elapsed: Duration) -> String {
    let n_succeeded = report.count(|result| matches!(result, UnitResult::Succeeded { .. }));
    let n_self_skipped = report.count(|result| matches!(result, UnitResult::SelfSkipped { .. }));
    let n_reused = report.count(|result| matches!(result, UnitResult::Reused));
    let n_failed = report.count(|result| matches!(result, UnitResult::Failed { .. }));
    let n_upstream_failed =
        report.count(|result| matches!(result, UnitResult::SkippedUpstream { .. }));
    let n_not_started = report.count(|result| matches!(result, UnitResult::NotRun));
    let status = report
        .status
        .map_or("incomplete (--only)", RunStatus::as_str);
    let mut summary = format!(
        "apollo: run {run_id} {status} in {}: {n_succeeded} succeeded, {n_reused} already done, {n_failed} failed, {n_self_skipped} skipped, {n_upstream_failed} not run (upstream failed), {n_not_started} not started",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_shows_why_a_unit_failed_and_counts_self_skips_as_skips() {
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
                ("fetch".to_owned(), UnitResult::Succeeded { attempt: 1 }),
                ("holiday".to_owned(), UnitResult::SelfSkipped { attempt: 1 }),
                (
                    "report".to_owned(),
                    UnitResult::Failed {
                        attempt: 2,
                        log_dir: log_dir.path().to_path_buf(),
                        error: Some("execute exited with code 1".to_owned()),
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
        insta::assert_snapshot!(summary(&run_id, &report, Duration::from_millis(1500)));
    }
}
