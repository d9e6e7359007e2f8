//! `apollo show RUN UNIT`: one unit's attempts (and the helpers `apollo logs` shares).

use std::io::{BufWriter, Write};
use std::path::Path;

use apollo_core::capture::{FileEntry, human_size};
use apollo_core::event::{AttemptStatus, ExitStatus, FileSide, InputKind, SkipReason};
use apollo_replay::{AttemptState, DeadlineStatus, Timeline, UnitState};
use apollo_runner::read::attempt_dir;
use apollo_store::{RunId, StateDir};

use crate::cmd::StateArgs;
use crate::cmd::replay::TableFormat;
use crate::error::{CliError, output};
use crate::excerpt;
use crate::exit::Exit;
use crate::progress::human_duration;
use crate::state;

mod run;
use run::show_run;

/// Arguments of `apollo show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The run: an id, a unique prefix or suffix, `latest`, `latest~N` or `last-success` [default: latest]; a unit
    /// name alone is that unit of the latest run
    #[arg(value_name = "RUN")]
    pub(crate) run: Option<String>,
    /// The unit [default: the run's summary, every unit's state]
    #[arg(value_name = "UNIT")]
    pub(crate) unit: Option<String>,
    /// Print the run's definition snapshot (the resolved pipeline it ran: commands, env,
    /// workdirs), as JSON
    #[arg(long)]
    pub(crate) definition: bool,
    #[command(flatten)]
    pub(crate) state: StateArgs,
    /// Output format (json: one document with the unit's attempts and their records)
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub(crate) format: TableFormat,
}

/// The run's model ([`state::run_model`]); store warnings go to `stderr`.
pub(super) fn read_timeline(
    state: &StateDir,
    run_id: &RunId,
    stderr: &mut dyn Write,
) -> Result<Timeline, CliError> {
    state::run_model(state, run_id, stderr)
}

/// The state directory, the resolved run and its timeline, after checking that the run has
/// the unit (shared by `show` and `logs`).
pub(super) fn unit_of_run(
    state_args: &StateArgs,
    state_dir: Option<&Path>,
    run: &str,
    unit: &str,
    stderr: &mut dyn Write,
) -> Result<(StateDir, RunId, Timeline), CliError> {
    let state = state_args.open(state_dir)?;
    let run_id = state::resolve_run(&state, run)?;
    let timeline = read_timeline(&state, &run_id, stderr)?;
    if timeline.unit(unit).is_none() {
        return Err(unknown_unit(&run_id, unit, &timeline));
    }
    Ok((state, run_id, timeline))
}

/// "run … has no unit …", with the closest unit name when there is one.
pub(super) fn unknown_unit(run_id: &RunId, unit: &str, timeline: &Timeline) -> CliError {
    let names = timeline.units.iter().map(|unit| unit.name.as_str());
    let message = match state::closest(unit, names.clone()) {
        Some(close) => format!("run {run_id} has no unit `{unit}`; did you mean `{close}`?"),
        None => format!(
            "run {run_id} has no unit `{unit}`; its units: {}",
            names.take(10).collect::<Vec<_>>().join(", ")
        ),
    };
    CliError::Usage { message }
}

fn describe_exit(exit: Option<ExitStatus>) -> String {
    match exit {
        Some(ExitStatus::Code(code)) => format!("exit {code}"),
        Some(ExitStatus::Signal(signal)) => format!("signal {signal}"),
        None => "-".to_owned(),
    }
}

/// `apollo show`.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(crate) fn show(
    args: &ShowArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
    let (run_id, unit) = state::run_and_unit(&state, args.run.as_deref(), args.unit.as_deref())?;
    if args.definition {
        return show_definition(&args.state, run_id.as_str(), state_dir, stdout);
    }
    let Some(unit_name) = unit.as_deref() else {
        return show_run(&state, &run_id, args.format, stdout, stderr);
    };
    let (state, run_id, timeline) =
        unit_of_run(&args.state, state_dir, run_id.as_str(), unit_name, stderr)?;
    let Some(unit) = timeline.unit(unit_name) else {
        return Err(unknown_unit(&run_id, unit_name, &timeline));
    };
    let live = crate::cmd::logs::live_holder_pid(&state, &run_id);
    let reads = apollo_runner::read::CostReads::new();
    let cost = apollo_runner::read::run_cost(&state, &timeline, &reads);
    if args.format == TableFormat::Json {
        let unit = (unit, timeline.state_of(unit));
        let deadline = timeline.unit_deadline(unit.0);
        return show_json(
            &state,
            &run_id,
            unit,
            live,
            (cost.as_ref(), deadline),
            stdout,
        );
    }
    let unit_cost = cost.as_ref().and_then(|cost| cost.unit(unit_name));
    let recorded = recorded_files(&state, &run_id, unit_name)?;
    let mut out = BufWriter::new(stdout);
    let status = match (live, timeline.state_of(unit)) {
        (Some(pid), UnitState::Running) => format!("running (apollo pid {pid})"),
        (_, state) => state.label().to_owned(),
    };
    let status = crate::color::paint(
        crate::color::stdout(),
        status.split(' ').next().unwrap_or(""),
        &status,
    );
    let mut text = format!("unit {} of run {run_id}: {status}\n", unit.name);
    text.push_str(&run::deadline_text(timeline.unit_deadline(unit).as_ref()));
    if let Some(unit_cost) = unit_cost {
        let line = run::unit_cost_text(cost.as_ref(), unit_cost, unit.reused.is_some());
        if !line.is_empty() {
            text.push_str(&format!("  {}\n", line.trim_start()));
        }
    }
    if let Some(definition) = &recorded.definition
        && let Some(defined) = definition.units.iter().find(|u| u.name == unit_name)
    {
        text.push_str(&definition_text(defined));
    }
    // A `when: {command}` ran as its attempt's first phase before apollo skipped the unit.
    let after_condition = (unit.attempts.last())
        .and_then(|attempt| attempt.outcome.as_ref())
        .is_some_and(apollo_core::event::UnitFinished::when_false);
    for skip in &unit.skips {
        let why = match &skip.reason {
            SkipReason::UpstreamFailed { upstream } => format!("upstream `{upstream}` failed"),
            SkipReason::Interrupted => "the run was interrupted before it started".to_owned(),
            SkipReason::When { condition } if after_condition => {
                format!("when: {condition} is false (apollo skipped it; only the condition ran)")
            }
            SkipReason::When { condition } => {
                format!("when: {condition} is false (apollo skipped it; nothing ran)")
            }
        };
        text.push_str(&format!(
            "  skipped at {}: {why}\n",
            skip.ts.format("%Y-%m-%d %H:%M:%S UTC")
        ));
    }
    if let Some(reused) = &unit.reused {
        text.push_str(&format!(
            "  reused at {}: inputs identical to run {} attempt {} (input {}, output {}){}; `apollo show {} {}` shows that attempt\n",
            reused.ts.format("%Y-%m-%d %H:%M:%S UTC"),
            reused.from_run,
            reused.from_attempt,
            short(&reused.input_hash),
            short(&reused.output_hash),
            crate::excerpt::restored_text(&reused.restored),
            reused.from_run,
            unit.name,
        ));
    }
    for attempt in &unit.attempts {
        let started = attempt.start.format("%Y-%m-%d %H:%M:%S%.3f UTC");
        if attempt.state == AttemptState::Unfinished && live.is_some() {
            let running_for = (chrono::Utc::now() - attempt.start)
                .to_std()
                .unwrap_or_default();
            text.push_str(&format!(
                "\nattempt {}: running, started {started}, {} so far\n",
                attempt.number,
                human_duration(running_for)
            ));
        } else if attempt.state == AttemptState::Unfinished {
            // It ran at least until the last record its apollo wrote.
            text.push_str(&format!(
                "\nattempt {}: cut off after ≥ {}, started {started}: apollo stopped before it finished\n",
                attempt.number,
                human_duration(std::time::Duration::from_millis(attempt.duration_ms()))
            ));
        } else {
            text.push_str(&format!(
                "\nattempt {}: {} ({}), started {started}, {}\n",
                attempt.number,
                attempt.state.as_str(),
                describe_exit(attempt.exit()),
                human_duration(std::time::Duration::from_millis(attempt.duration_ms()))
            ));
        }
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
            match state
                .run_dir(&run_id)
                .and_then(|run| run.read_input_manifest(reference))
            {
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
        if let Some(files) = recorded.files.get(&(attempt.number, FileSide::Inputs)) {
            text.push_str(&files_text("input files", files));
        }
        if let Some(output_hash) = attempt.output_hash() {
            text.push_str(&format!("  output hash {output_hash}\n"));
        }
        if let Some(files) = recorded.files.get(&(attempt.number, FileSide::Outputs)) {
            text.push_str(&files_text("output files", files));
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
        let priced = (unit_cost
            .into_iter()
            .flat_map(|unit_cost| &unit_cost.attempts))
        .find(|priced| priced.attempt == attempt.number);
        if let (Some(cost), Some(priced)) = (&cost, priced) {
            let wasted = if priced.wasted { " (wasted)" } else { "" };
            text.push_str(&format!(
                "  cost        {}{wasted}\n",
                cost.show(priced.cost)
            ));
        }
        let dir = attempt_dir(&state, &run_id, &unit.name, attempt.number);
        if matches!(
            attempt.state,
            AttemptState::Finished(AttemptStatus::Failed | AttemptStatus::TimedOut)
        ) && let Ok(dir) = &dir
            && let Some(excerpt) = excerpt::of_attempt(dir.path(), excerpt::EXCERPT_LINES)
        {
            let attempt_arg = (Some(attempt.number) != unit.last_attempt().map(|last| last.number))
                .then_some(attempt.number);
            text.push_str(&excerpt::render(
                &excerpt,
                "  ",
                run_id.as_str(),
                &unit.name,
                attempt_arg,
            ));
            text.push('\n');
        }
        if matches!(
            attempt.state,
            AttemptState::Finished(_) | AttemptState::Unfinished
        ) {
            text.push_str(&match &dir {
                Ok(dir) => format!("  logs        {}/{{stdout,stderr}}\n", dir.path().display()),
                Err(error) => format!("  logs        none: {error}\n"),
            });
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

fn recorded_files(
    state: &StateDir,
    run_id: &RunId,
    unit: &str,
) -> Result<apollo_runner::read::RecordedFiles, CliError> {
    Ok(apollo_runner::read::recorded_files(state, run_id, unit)?)
}

/// The unit as the run's definition snapshot recorded it: what reproducing it by hand needs.
fn definition_text(unit: &apollo_core::Unit) -> String {
    let mut text = String::from("  as recorded in the run's definition snapshot:\n");
    let commands = [
        ("when", unit.when_command.as_ref()),
        ("prepare", unit.prepare.as_ref()),
        ("execute", Some(&unit.execute)),
        ("cleanup", unit.cleanup.as_ref()),
    ];
    for (phase, command) in commands {
        if let Some(command) = command {
            text.push_str(&format!("    {phase:<8} {}\n", command.display()));
        }
    }
    text.push_str(&format!("    workdir  {}\n", unit.workdir.display()));
    for (name, value) in &unit.env {
        text.push_str(&format!("    env      {name}={value}\n"));
    }
    text
}

/// A manifest, one file a line: path, short hash, size, mode, and why it was not captured.
fn files_text(what: &str, files: &[FileEntry]) -> String {
    let mut text = format!("  {what}:\n");
    for file in files {
        text.push_str(&format!(
            "    {:<32} {} {:>9} {:o}{}\n",
            file.path,
            &file.sha256[..file.sha256.len().min(16)],
            human_size(file.size),
            file.mode,
            match &file.not_captured {
                None => String::new(),
                Some(reason) => format!("  not captured: {reason}"),
            }
        ));
    }
    text
}

/// `apollo show RUN --definition`: the definition snapshot the run last used (the one its
/// latest `run_started`/`run_resumed` names).
fn show_definition(
    state_args: &StateArgs,
    run: &str,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = state_args.open(state_dir)?;
    let run_id = state::resolve_run(&state, run)?;
    let Some(bytes) = apollo_runner::read::last_definition_snapshot(&state, &run_id)? else {
        return Err(CliError::Usage {
            message: format!("run {run_id} records no definition snapshot"),
        });
    };
    stdout.write_all(&bytes).map_err(output)?;
    if !bytes.ends_with(b"\n") {
        writeln!(stdout).map_err(output)?;
    }
    Ok(Exit::Success)
}

/// `apollo show --format json`: the unit's status and attempts, each with its `unit_finished`
/// record as the journal holds it.
fn show_json(
    state: &StateDir,
    run_id: &RunId,
    (unit, unit_state): (&apollo_replay::UnitTimeline, UnitState),
    live: Option<u32>,
    (cost, deadline): (Option<&apollo_replay::RunCost>, Option<DeadlineStatus>),
    stdout: &mut dyn Write,
) -> Result<Exit, CliError> {
    let unit = (unit, unit_state);
    let document =
        apollo_runner::read::show_unit_document(state, run_id, unit, live, cost, deadline.as_ref());
    let mut out = BufWriter::new(stdout);
    serde_json::to_writer_pretty(&mut out, &document).map_err(|error| output(error.into()))?;
    writeln!(out).map_err(output)?;
    out.flush().map_err(output)?;
    Ok(Exit::Success)
}

/// The first 12 characters of a hash.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}
