//! `apollo show RUN UNIT` and `apollo logs RUN UNIT`: one unit's attempts, and its output.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use apollo_core::event::{ExitStatus, InputKind, SkipReason};
use apollo_replay::{AttemptState, Timeline};
use apollo_store::{ReadOptions, RunId, StateDir};

use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::progress::human_duration;
use crate::state;

/// Arguments of `apollo show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The run: an id, a unique prefix, `latest` or `latest~N`
    #[arg(value_name = "RUN")]
    pub(crate) run: String,
    /// The unit
    #[arg(value_name = "UNIT")]
    pub(crate) unit: String,
}

/// Arguments of `apollo logs`.
#[derive(Debug, clap::Args)]
pub(crate) struct LogsArgs {
    /// The run: an id, a unique prefix, `latest` or `latest~N`
    #[arg(value_name = "RUN")]
    pub(crate) run: String,
    /// The unit
    #[arg(value_name = "UNIT")]
    pub(crate) unit: String,
    /// Which attempt [default: the last one]
    #[arg(long, value_name = "N")]
    pub(crate) attempt: Option<u32>,
    /// Print stderr instead of stdout
    #[arg(long)]
    pub(crate) stderr: bool,
}

fn timeline(
    state: &StateDir,
    run_id: &RunId,
    stderr: &mut dyn Write,
) -> Result<Timeline, CliError> {
    let (mut reader, _) = state::read_records(state, run_id, ReadOptions::default())?;
    let timeline = Timeline::from_records(&mut reader)?;
    state::print_warnings(&reader.take_warnings(), stderr);
    Ok(timeline)
}

/// The state directory, the resolved run and its timeline, after checking that the run has
/// the unit (shared by `show` and `logs`).
fn unit_of_run(
    state_dir: Option<&Path>,
    run: &str,
    unit: &str,
    stderr: &mut dyn Write,
) -> Result<(StateDir, RunId, Timeline), CliError> {
    let state = state::open_existing(&state::state_dir_path(state_dir, None))?;
    let run_id = state::resolve_run(&state, run)?;
    let timeline = timeline(&state, &run_id, stderr)?;
    if timeline.unit(unit).is_none() {
        return Err(unknown_unit(&run_id, unit, &timeline));
    }
    Ok((state, run_id, timeline))
}

fn attempt_dir(state: &StateDir, run_id: &RunId, unit: &str, attempt: u32) -> PathBuf {
    state
        .runs_dir()
        .join(run_id.as_str())
        .join("units")
        .join(unit)
        .join(attempt.to_string())
}

fn unknown_unit(run_id: &RunId, unit: &str, timeline: &Timeline) -> CliError {
    let known: Vec<&str> = timeline
        .units
        .iter()
        .map(|unit| unit.name.as_str())
        .take(10)
        .collect();
    CliError::Usage {
        message: format!(
            "run {run_id} has no unit `{unit}`; its units: {}",
            known.join(", ")
        ),
    }
}

fn describe_exit(exit: Option<ExitStatus>) -> String {
    match exit {
        Some(ExitStatus::Code(code)) => format!("exit {code}"),
        Some(ExitStatus::Signal(signal)) => format!("signal {signal}"),
        None => "-".to_owned(),
    }
}

/// `apollo show`.
pub(crate) fn show(
    args: &ShowArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let (state, run_id, timeline) = unit_of_run(state_dir, &args.run, &args.unit, stderr)?;
    let Some(unit) = timeline.unit(&args.unit) else {
        return Err(unknown_unit(&run_id, &args.unit, &timeline));
    };
    let mut out = BufWriter::new(stdout);
    let mut text = format!(
        "unit {} of run {run_id}: {}\n",
        unit.name,
        unit.status.as_str().replace('_', " ")
    );
    for skip in &unit.skips {
        let why = match &skip.reason {
            SkipReason::UpstreamFailed { upstream } => format!("upstream `{upstream}` failed"),
            SkipReason::Interrupted => "the run was interrupted before it started".to_owned(),
        };
        text.push_str(&format!(
            "  skipped at {}: {why}\n",
            skip.ts.format("%Y-%m-%d %H:%M:%S UTC")
        ));
    }
    for attempt in &unit.attempts {
        let started = attempt.start.format("%Y-%m-%d %H:%M:%S%.3f UTC");
        text.push_str(&format!(
            "\nattempt {}: {} ({}), started {started}, {}\n",
            attempt.number,
            attempt.state.as_str(),
            describe_exit(attempt.exit()),
            human_duration(std::time::Duration::from_millis(attempt.duration_ms()))
        ));
        if let Some(job) = &attempt.job {
            match job.reattached_from {
                Some(from) => text.push_str(&format!(
                    "  job: {} {}, reattached (submitted by attempt {from} before apollo died)\n",
                    job.executor, job.job_id
                )),
                None => text.push_str(&format!("  job: {} {}\n", job.executor, job.job_id)),
            }
        }
        if let Some(error) = attempt
            .outcome
            .as_ref()
            .and_then(|outcome| outcome.error.as_deref())
        {
            for line in error.lines() {
                text.push_str(&format!("  error: {line}\n"));
            }
        }
        for phase in attempt.phases() {
            text.push_str(&format!(
                "  {:<8} +{:>8}  {:>8}  {}{}\n",
                phase.phase.as_str(),
                human_duration(std::time::Duration::from_millis(phase.offset_ms)),
                human_duration(std::time::Duration::from_millis(phase.duration_ms)),
                describe_exit(phase.exit),
                if phase.timed_out { " (timed out)" } else { "" }
            ));
        }
        if let Some(input_hash) = &attempt.input_hash {
            text.push_str(&format!("  input hash  {input_hash}\n"));
        }
        let from_manifest;
        let mut inputs = attempt.inputs.as_slice();
        if let Some(reference) = &attempt.inputs_manifest {
            // An input list too large for a record: in the run's manifest file.
            let run_dir = state.runs_dir().join(run_id.as_str());
            match apollo_store::read_input_manifest(&run_dir, reference) {
                Ok(components) => {
                    text.push_str(&format!(
                        "  inputs      {} components, from input manifest {}\n",
                        reference.count, reference.sha256
                    ));
                    from_manifest = components;
                    inputs = &from_manifest;
                }
                Err(error) => text.push_str(&format!(
                    "  inputs      {} components in input manifest {}, which cannot be read: {error}\n",
                    reference.count, reference.sha256
                )),
            }
        }
        for component in inputs {
            let kind = match component.kind {
                InputKind::Command => "command",
                InputKind::Env => "env",
                InputKind::File => "file",
                InputKind::Upstream => "upstream",
            };
            text.push_str(&format!(
                "    {kind:<8} {:<24} {}\n",
                component.name,
                &component.hash[..component.hash.len().min(16)]
            ));
        }
        if let Some(output_hash) = attempt.output_hash() {
            text.push_str(&format!("  output hash {output_hash}\n"));
        }
        if let Some(outcome) = &attempt.outcome {
            text.push_str(&format!(
                "  stdout {} B, stderr {} B, cpu {} ms user + {} ms sys, max rss {} KiB{}\n",
                outcome.stdout_bytes,
                outcome.stderr_bytes,
                outcome.user_cpu_ms,
                outcome.sys_cpu_ms,
                outcome.max_rss_kib,
                if outcome.leftovers_killed > 0 {
                    format!(", {} leftover processes killed", outcome.leftovers_killed)
                } else {
                    String::new()
                }
            ));
        }
        if matches!(
            attempt.state,
            AttemptState::Finished(_) | AttemptState::Unfinished
        ) {
            text.push_str(&format!(
                "  logs        {}/{{stdout,stderr}}\n",
                attempt_dir(&state, &run_id, &unit.name, attempt.number).display()
            ));
        }
    }
    for mark in &unit.marks {
        let verdict = mark.verdict.as_str();
        text.push_str(&format!(
            "\nattempt {} marked {verdict} by {} at {}{}\n",
            mark.attempt,
            mark.by,
            mark.ts.format("%Y-%m-%d %H:%M:%S UTC"),
            mark.note
                .as_deref()
                .map(|note| format!(": {note}"))
                .unwrap_or_default()
        ));
    }
    out.write_all(text.as_bytes()).map_err(output)?;
    out.flush().map_err(output)?;
    Ok(Exit::Success)
}

/// `apollo logs`: streams the attempt's captured stdout (or stderr).
pub(crate) fn logs(
    args: &LogsArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let (state, run_id, timeline) = unit_of_run(state_dir, &args.run, &args.unit, stderr)?;
    let Some(unit) = timeline.unit(&args.unit) else {
        return Err(unknown_unit(&run_id, &args.unit, &timeline));
    };
    let attempt = match args.attempt {
        Some(number) => number,
        None => unit
            .last_attempt()
            .map(|attempt| attempt.number)
            .ok_or_else(|| CliError::Usage {
                message: format!(
                    "unit `{}` never started in run {run_id}: it has no logs",
                    unit.name
                ),
            })?,
    };
    if !unit
        .attempts
        .iter()
        .any(|recorded| recorded.number == attempt)
    {
        return Err(CliError::Usage {
            message: format!(
                "unit `{}` has no attempt {attempt} in run {run_id} (it has {})",
                unit.name,
                unit.attempts.len()
            ),
        });
    }
    let path = attempt_dir(&state, &run_id, &unit.name, attempt).join(if args.stderr {
        "stderr"
    } else {
        "stdout"
    });
    // Only a regular file: a FIFO or a link to /dev/zero there must not block or stream forever.
    let mut file = match apollo_store::open_regular_file(&path) {
        Ok(Some(file)) => file,
        // The attempt wrote nothing (a quick, silent attempt leaves no file), or apollo died
        // before its first process started.
        Ok(None) => {
            let _ = writeln!(
                stderr,
                "apollo: attempt {attempt} of `{}` wrote nothing to {}",
                unit.name,
                if args.stderr { "stderr" } else { "stdout" }
            );
            return Ok(Exit::Success);
        }
        Err(error) => return Err(error.into()),
    };
    std::io::copy(&mut file, stdout).map_err(output)?;
    stdout.flush().map_err(output)?;
    Ok(Exit::Success)
}
