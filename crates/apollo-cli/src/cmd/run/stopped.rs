//! The summary of a run that stopped for a human (exit 5): the run ended because a unit needs
//! a verdict, or the next run refused to proceed before anything ran. The engine gives no
//! report then, so the summary is rendered from the run model (apollo-runner's
//! `stopped_run_model`, as the hook summary is): the same line and `summary` event as every
//! other run end, with the unit(s) a human must decide about and the command that decides.
//! The refusal's message and its advice still go to stderr as the error.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use apollo_core::UnitState;
use apollo_replay::Timeline;

use crate::error::CliError;
use crate::exit::Exit;
use crate::progress::{RunNotes, human_duration};

/// The run status a stop for a human has in the summary event: the hooks'
/// `APOLLO_RUN_STATUS` for the same end.
const STATUS: &str = "needs_human";

/// A unit the run stopped at, and what settles it.
struct Stop {
    unit: String,
    attempt: Option<u32>,
    /// `needs a verdict` (`apollo mark` settles it) or `needs you`.
    label: &'static str,
    reason: String,
    /// The commands that settle it, each whole.
    next: Vec<String>,
    /// Said when no command settles it (a Slurm job still running).
    wait: Option<&'static str>,
}

/// The commands that record a verdict on a cut-off attempt.
fn marks(run: &str, unit: &str) -> Vec<String> {
    vec![
        format!("apollo mark {run} {unit} --succeeded"),
        format!("apollo mark {run} {unit} --rerun"),
    ]
}

/// The run and the unit `error` stopped at, when it is a stop for a human.
fn stop_of(error: &CliError) -> Option<(&str, Stop)> {
    let stop = |unit: &str, attempt, label, reason: String, next, wait| Stop {
        unit: unit.to_owned(),
        attempt,
        label,
        reason,
        next,
        wait,
    };
    Some(match error {
        CliError::NeedsVerdict {
            run,
            unit,
            attempt,
            how,
            job,
        } => {
            let reason = match job {
                Some(job) => format!("{how}; {job}"),
                None => how.clone(),
            };
            let marks = marks(run, unit);
            (
                run,
                stop(unit, Some(*attempt), "needs a verdict", reason, marks, None),
            )
        }
        CliError::NeedsHuman {
            run,
            unit,
            attempt,
            reason,
            left_in_flight,
        } => {
            let (label, next, wait) = if *left_in_flight {
                ("needs a verdict", marks(run, unit), None)
            } else {
                let wait = "once that job has ended (or you cancelled it), `apollo run` carries on";
                ("needs you", Vec::new(), Some(wait))
            };
            (
                run,
                stop(unit, Some(*attempt), label, reason.clone(), next, wait),
            )
        }
        CliError::ChangedNeedsVerdict {
            run,
            unit,
            attempt,
            changes,
        } => {
            let reason = format!(
                "`idempotent: false`, and since it succeeded: {}",
                changes.join(", ")
            );
            let next = vec![format!("apollo mark {run} {unit} --rerun")];
            (
                run,
                stop(unit, Some(*attempt), "needs a verdict", reason, next, None),
            )
        }
        CliError::InputsChanged { run, unit, changes } => {
            let reason = format!("since it succeeded: {}", changes.join(", "));
            let next = vec!["apollo run --on-input-change=rerun".to_owned()];
            (run, stop(unit, None, "needs you", reason, next, None))
        }
        _ => return None,
    })
}

/// The units to name: the one the run stopped at, then any other the model says needs a
/// verdict (a run whose units were killed together).
fn stops(run: &str, first: Stop, timeline: &Timeline) -> Vec<Stop> {
    let others = (timeline.units.iter())
        .filter(|unit| unit.listed && unit.name != first.unit)
        .filter(|unit| timeline.state_of(unit) == UnitState::NeedsVerdict)
        .map(|unit| Stop {
            unit: unit.name.clone(),
            attempt: unit.last_attempt().map(|attempt| attempt.number),
            label: "needs a verdict",
            reason: "cut off".to_owned(),
            next: marks(run, &unit.name),
            wait: None,
        })
        .collect::<Vec<_>>();
    std::iter::once(first).chain(others).collect()
}

/// Where and how `apollo run` writes the summary of a stop for a human.
pub(super) struct StopSummary<'a> {
    state_path: &'a Path,
    json: bool,
    /// When the session began to open: a refused run's summary says how long it took.
    opening: Instant,
}

impl<'a> StopSummary<'a> {
    pub(super) fn new(state_path: &'a Path, json: bool) -> Self {
        Self {
            state_path,
            json,
            opening: Instant::now(),
        }
    }

    /// For an `error` of the session's opening (a resume refused before anything ran): see
    /// [`Self::ended`].
    pub(super) fn refused(&self, error: CliError, stdout: &mut dyn Write) -> CliError {
        let elapsed = self.opening.elapsed();
        self.ended(error, &RunNotes::default(), elapsed, stdout)
    }

    /// Writes the summary of the run `error` stopped for a human to `stdout` (text, or the
    /// JSON stream's `summary` event) and hands `error` back; any other error is handed back
    /// as it is. A run model that cannot be read prints no summary: the error says what
    /// matters.
    pub(super) fn ended(
        &self,
        error: CliError,
        notes: &RunNotes,
        elapsed: Duration,
        stdout: &mut dyn Write,
    ) -> CliError {
        if error.exit() != Exit::VerdictNeeded {
            return error;
        }
        let Some((run, first)) = stop_of(&error) else {
            return error;
        };
        let model = run.parse::<apollo_store::RunId>().ok().and_then(|run_id| {
            let state = apollo_store::StateDir::open_existing(self.state_path).ok()?;
            apollo_runner::read::stopped_run_model(&state, &run_id).ok()
        });
        let Some(model) = model else {
            return error;
        };
        let stops = stops(run, first, &model.timeline);
        let summary = if self.json {
            summary_json(run, &model.timeline, &stops, elapsed).to_string()
        } else {
            summary_text(run, &model.timeline, &stops, notes, elapsed)
        };
        // The stop is recorded; a closed stdout must not hide the error's exit code.
        let _ = writeln!(stdout, "{summary}");
        let _ = stdout.flush();
        error
    }
}

fn summary_text(
    run: &str,
    timeline: &Timeline,
    stops: &[Stop],
    notes: &RunNotes,
    elapsed: Duration,
) -> String {
    let n_flaky = (timeline.units.iter())
        .filter(|unit| notes.flaky.contains(&unit.name))
        .filter(|unit| timeline.state_of(unit) == UnitState::Succeeded)
        .count();
    let mut summary = format!(
        "apollo: run {run} stopped for a verdict in {}: {}",
        human_duration(elapsed),
        timeline.counts().text(n_flaky)
    );
    for stop in stops {
        summary.push_str(&format!("\n  {}: {}", stop.label, stop.unit));
        if let Some(attempt) = stop.attempt {
            summary.push_str(&format!(" (attempt {attempt})"));
        }
        summary.push_str(&format!(": {}", crate::excerpt::clean_line(&stop.reason)));
    }
    for stop in stops {
        let commands: Vec<String> = stop.next.iter().map(|next| format!("`{next}`")).collect();
        match (commands.as_slice(), stop.wait) {
            ([done, again], _) => summary.push_str(&format!(
                "\n  look at what {} did (`apollo logs {run} {}`), then {done} if its work is complete or {again} if it must run again; `apollo run` then proceeds",
                stop.unit, stop.unit
            )),
            ([one], _) => summary.push_str(&format!(
                "\n  {one} allows {} to run again, then `apollo run`",
                stop.unit
            )),
            (_, Some(wait)) => summary.push_str(&format!("\n  {wait}")),
            _ => {}
        }
    }
    summary
}

/// The `summary` event of `run --format json` for a stop: the usual fields (`status`
/// `needs_human`, the counts, each unit's state from the model) and `needs_verdict`, the units
/// a human must decide about with the commands (`next`) that decide.
fn summary_json(
    run: &str,
    timeline: &Timeline,
    stops: &[Stop],
    elapsed: Duration,
) -> serde_json::Value {
    let units: Vec<serde_json::Value> = (timeline.units.iter())
        .filter(|unit| unit.listed)
        .map(|unit| {
            serde_json::json!({
                "unit": unit.name,
                "status": timeline.state_of(unit).as_str(),
                "attempt": unit.last_attempt().map(|attempt| attempt.number),
            })
        })
        .collect();
    let needs_verdict: Vec<serde_json::Value> = (stops.iter())
        .map(|stop| {
            serde_json::json!({
                "unit": stop.unit,
                "attempt": stop.attempt,
                "reason": stop.reason,
                "next": stop.next,
            })
        })
        .collect();
    serde_json::json!({
        "schema": crate::run_events::RUN_EVENTS_SCHEMA,
        "event": "summary",
        "counts": timeline.counts().to_json(),
        "run_id": run,
        "status": STATUS,
        "elapsed_ms": u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        "units": units,
        "needs_verdict": needs_verdict,
    })
}
