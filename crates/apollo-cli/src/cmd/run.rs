//! `apollo run [CONFIG]` and `apollo resume [RUN]`: run a pipeline, or resume the run that
//! stopped half-way, with every step journaled before it matters.

use std::io::Write;
use std::path::{Path, PathBuf};

use apollo_core::config::{self, Loaded};
use apollo_core::diagnostic::render_all;
use apollo_core::engine::{
    self, AttemptLogs, EngineError, EngineOptions, OnInputChange, UnitResult,
};
use apollo_core::event::{Event, RunResumed, RunStarted, RunStatus};
use apollo_core::{CancelToken, PriorState, hash};
use apollo_exec::{ExecOptions, ProcessExecutor};
use apollo_store::{
    Durability, JournalWriter, ReadOptions, RunId, RunState, StateDir, WriterOptions,
};

use super::ConfigArg;
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::progress::{Progress, human_duration};
use crate::signals::SignalWatch;
use crate::state;

/// What to do when a succeeded unit's inputs changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum InputChange {
    /// Run it again with the new inputs
    Rerun,
    /// Stop before running anything and say what changed (exit 5)
    Fail,
}

/// Journal durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DurabilityArg {
    /// fdatasync every batch of records before acting on it (the default; what makes resume safe)
    Fsync,
    /// Never fsync: for tests and benchmarks only; a crash may lose records
    None,
}

/// Options shared by `run` and `resume`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExecutionArgs {
    /// Keep running every unit that does not depend on a failed one (like `make -k`)
    #[arg(long, short = 'k')]
    pub(crate) keep_going: bool,
    /// When a unit that already succeeded in this run has different inputs now
    #[arg(long, value_enum, default_value_t = InputChange::Rerun, value_name = "WHAT")]
    pub(crate) on_input_change: InputChange,
    /// Run only these units, and whatever of their upstream has not succeeded
    #[arg(long, value_name = "UNIT", num_args = 1..)]
    pub(crate) only: Vec<String>,
    /// Print what would run and why, without running anything or writing state
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Say for every unit why it runs or is not run again
    #[arg(long)]
    pub(crate) explain: bool,
    /// Units running at once [default: the config's max_parallel]
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_parallel: Option<u32>,
    /// Wait for another apollo using the state directory to finish, instead of exiting 4
    #[arg(long)]
    pub(crate) wait: bool,
    /// Journal durability
    #[arg(long, value_enum, default_value_t = DurabilityArg::Fsync, value_name = "MODE")]
    pub(crate) durability: DurabilityArg,
}

/// Arguments of `apollo run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArg,
    /// Start a new run even if the latest one is incomplete
    #[arg(long)]
    pub(crate) fresh: bool,
    #[command(flatten)]
    pub(crate) execution: ExecutionArgs,
}

/// Arguments of `apollo resume`.
#[derive(Debug, clap::Args)]
pub(crate) struct ResumeArgs {
    /// The run: an id, a unique prefix, `latest` or `latest~N`
    #[arg(value_name = "RUN", default_value = "latest")]
    pub(crate) run: String,
    /// The pipeline config [default: the one the run was started from]
    #[arg(long, short = 'c', value_name = "CONFIG")]
    pub(crate) config: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) execution: ExecutionArgs,
}

/// Which run to run.
enum Target {
    /// A new run.
    Fresh,
    /// The latest run of the pipeline if it is incomplete, else a new one.
    LatestIfIncomplete,
    /// This run, which must not have succeeded.
    Named(RunId),
}

/// `apollo run`.
pub(crate) fn run(
    args: &RunArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let config_path = args.config.resolve()?;
    let target = if args.fresh {
        Target::Fresh
    } else {
        Target::LatestIfIncomplete
    };
    execute(
        &config_path,
        state_dir,
        target,
        &args.execution,
        stdout,
        stderr,
    )
}

/// `apollo resume`.
pub(crate) fn resume(
    args: &ResumeArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state_path = state::state_dir_path(state_dir, args.config.as_deref());
    let state = state::open_existing(&state_path)?;
    let run_id = state::resolve_run(&state, &args.run)?;
    let config_path = match &args.config {
        Some(path) => path.clone(),
        None => PathBuf::from(state::run_started(&state, &run_id)?.config_path),
    };
    execute(
        &config_path,
        Some(&state_path),
        Target::Named(run_id),
        &args.execution,
        stdout,
        stderr,
    )
}

/// Loads and validates the config; diagnostics (and warnings) go to stderr.
fn load_config(path: &Path, stderr: &mut dyn Write) -> Result<Loaded, CliError> {
    let loaded = config::load(path)?;
    if !loaded.warnings.is_empty() {
        let _ = stderr.write_all(render_all(&loaded.warnings).as_bytes());
    }
    Ok(loaded)
}

struct StoreLogs {
    run: apollo_store::RunDir,
}

impl AttemptLogs for StoreLogs {
    fn log_dir(&self, unit: &str, attempt: u32) -> Result<PathBuf, String> {
        self.run
            .attempt_log_dir(unit, attempt)
            .map_err(|error| error.to_string())
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn execute(
    config_path: &Path,
    state_dir: Option<&Path>,
    target: Target,
    execution: &ExecutionArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let loaded = load_config(config_path, stderr)?;
    let pipeline = &loaded.pipeline;
    let state_path = state::state_dir_path(state_dir, Some(config_path));

    let mut options = EngineOptions::new(String::new(), pipeline);
    options.keep_going = execution.keep_going;
    options.on_input_change = match execution.on_input_change {
        InputChange::Rerun => OnInputChange::Rerun,
        InputChange::Fail => OnInputChange::Fail,
    };
    if !execution.only.is_empty() {
        options.only = Some(execution.only.clone());
    }
    if let Some(max_parallel) = execution.max_parallel {
        options.max_parallel = usize::try_from(max_parallel).unwrap_or(usize::MAX);
    }

    if execution.dry_run {
        return dry_run(pipeline, &state_path, target, options, stdout, stderr);
    }

    let state = StateDir::open_or_create(&state_path)?;
    let mut lock = match state.lock(false) {
        Err(error) if execution.wait && error.kind() == apollo_store::ErrorKind::Locked => {
            let _ = writeln!(
                stderr,
                "apollo: the state directory is in use; waiting for the lock (--wait)"
            );
            state.lock(true)?
        }
        other => other?,
    };

    // Which run: a new one, or the one to resume.
    let resume_id = match target {
        Target::Fresh => None,
        Target::Named(run_id) => {
            let summary = state.run_summary(&run_id)?;
            if summary.state == RunState::Succeeded {
                writeln!(stdout, "run {run_id} succeeded: nothing to resume").map_err(output)?;
                return Ok(Exit::Success);
            }
            Some(run_id)
        }
        Target::LatestIfIncomplete => match state.latest_run(&pipeline.name)? {
            Some(run_id) => {
                let summary = state.run_summary(&run_id)?;
                match summary.state {
                    RunState::Succeeded => None,
                    RunState::Corrupt => {
                        return Err(CliError::CorruptRun {
                            message: format!(
                                "the latest run {run_id} of `{}` cannot be read: {}; inspect it with `apollo verify {run_id}`, or start a new run with `apollo run --fresh`",
                                pipeline.name,
                                summary.problem.unwrap_or_default()
                            ),
                        });
                    }
                    _ => Some(run_id),
                }
            }
            None => None,
        },
    };

    let writer_options = WriterOptions {
        durability: match execution.durability {
            DurabilityArg::Fsync => Durability::Fsync,
            DurabilityArg::None => Durability::None,
        },
        faults: fault_plan_from_env()?,
        ..WriterOptions::default()
    };
    let definition = serde_json::to_vec_pretty(pipeline).map_err(|error| CliError::Usage {
        message: format!("cannot snapshot the pipeline definition: {error}"),
    })?;
    let definition_hash = state.put_blob(&definition)?;
    let config_hash = hash::sha256_hex(loaded.source.as_bytes());
    let host = host_name();
    let unit_names: Vec<String> = pipeline
        .units
        .iter()
        .map(|unit| unit.name.clone())
        .collect();

    if resume_id.is_none()
        && let Some(previous) = state.latest_run(&pipeline.name)?
    {
        sweep_strays(&previous, "left running by units of the previous", stderr);
    }
    let (run_id, mut journal, prior) = match resume_id {
        None => {
            let run_id = state.new_run_id();
            let run_dir = state.create_run(&run_id)?;
            let mut journal =
                JournalWriter::create(run_dir.path(), run_id.as_str(), writer_options)?;
            journal.watch_lock(&lock)?;
            journal.append_batch(&[Event::RunStarted(RunStarted {
                run_id: run_id.to_string(),
                pipeline: pipeline.name.clone(),
                config_path: absolute(config_path).display().to_string(),
                config_hash,
                definition_hash,
                apollo_version: env!("CARGO_PKG_VERSION").to_owned(),
                host,
                pid: std::process::id(),
                units: unit_names,
            })])?;
            lock.set_run(&run_id)?;
            writeln!(
                stdout,
                "apollo: run {run_id} of `{}`: {} unit{} (state in {})",
                pipeline.name,
                pipeline.units.len(),
                plural(pipeline.units.len()),
                state.path().display()
            )
            .map_err(output)?;
            (run_id, journal, PriorState::empty())
        }
        Some(run_id) => {
            let run_dir = state.run_dir(&run_id)?;
            let (mut journal, recovery) =
                JournalWriter::open_for_append(run_dir.path(), writer_options)?;
            journal.watch_lock(&lock)?;
            state::print_warnings(&recovery.warnings, stderr);
            let mut prior = PriorState::empty();
            let mut recorded_pipeline = None;
            let warnings = state::fold_events(&state, &run_id, |record| {
                if let Event::RunStarted(started) = &record.event {
                    recorded_pipeline = Some(started.pipeline.clone());
                }
                prior.apply(&record.event);
            })?;
            state::print_warnings(&warnings, stderr);
            if let Some(recorded) = recorded_pipeline.filter(|recorded| *recorded != pipeline.name)
            {
                return Err(CliError::Usage {
                    message: format!(
                        "run {run_id} is a run of pipeline `{recorded}`, not `{}`; pass its config with `--config`",
                        pipeline.name
                    ),
                });
            }
            // Refuse before recording a resume that cannot proceed (a human verdict is
            // needed, say): each refusal would otherwise add a `run_resumed` record.
            engine::preflight(pipeline, &prior, &options)
                .map_err(|error| engine_error(error, run_id.as_str()))?;
            lock.set_run(&run_id)?;
            // What the previous apollo's units left running (whatever escaped its guard)
            // must not race their own rerun.
            sweep_strays(&run_id, "left running by the previous apollo of", stderr);
            journal.append_batch(&[Event::RunResumed(RunResumed {
                config_hash,
                definition_hash,
                apollo_version: env!("CARGO_PKG_VERSION").to_owned(),
                host,
                pid: std::process::id(),
                units: unit_names,
            })])?;
            let n_done = prior.count_done(pipeline.units.iter().map(|unit| unit.name.as_str()));
            writeln!(
                stdout,
                "apollo: resuming run {run_id} of `{}`: {n_done} of {} unit{} already succeeded",
                pipeline.name,
                pipeline.units.len(),
                plural(pipeline.units.len())
            )
            .map_err(output)?;
            (run_id, journal, prior)
        }
    };
    stdout.flush().map_err(output)?;
    options.run_id = run_id.to_string();

    let cancel = CancelToken::new();
    let signals = SignalWatch::install(&cancel).map_err(|error| CliError::Usage {
        message: format!("cannot install signal handlers: {error}"),
    })?;
    let executor = ProcessExecutor::new(ExecOptions::default());
    let logs = StoreLogs {
        run: state.run_dir(&run_id)?,
    };
    let n_units = match &options.only {
        Some(_) => engine::dry_run(pipeline, &prior, &options)
            .map(|plan| {
                plan.iter()
                    .filter(|(_, planned)| !matches!(planned, engine::Planned::OutOfScope))
                    .count()
            })
            .unwrap_or(pipeline.units.len()),
        None => pipeline.units.len(),
    };
    let name_width = pipeline
        .units
        .iter()
        .map(|unit| unit.name.len())
        .max()
        .unwrap_or(0)
        .min(40);
    let mut progress = Progress::new(
        (n_units, options.max_parallel),
        name_width,
        execution.explain,
        stdout,
    );
    let result = engine::run(
        pipeline,
        &prior,
        &options,
        &mut journal,
        &executor,
        &logs,
        &cancel,
        &mut progress,
    );
    let elapsed = progress.elapsed();
    progress.finish();
    drop(signals);
    // Every attempt is over: a process of this run still alive left its process group
    // (`setsid`, a daemon). Nothing of a run outlives it.
    sweep_strays(
        &run_id,
        "that units left running outside their process groups in",
        stderr,
    );
    let report = match result {
        Ok(report) => report,
        Err(error) => return Err(engine_error(error, run_id.as_str())),
    };

    // The summary.
    let n_ran = report.count(|result| {
        matches!(
            result,
            UnitResult::Succeeded { .. } | UnitResult::SelfSkipped { .. }
        )
    });
    let n_reused = report.count(|result| matches!(result, UnitResult::Reused));
    let n_failed = report.count(|result| matches!(result, UnitResult::Failed { .. }));
    let n_skipped = report.count(|result| matches!(result, UnitResult::SkippedUpstream { .. }));
    let n_not_started = report.count(|result| matches!(result, UnitResult::NotRun));
    let status = report
        .status
        .map_or("incomplete (--only)", RunStatus::as_str);
    let mut summary = format!(
        "apollo: run {run_id} {status} in {}: {n_ran} succeeded, {n_reused} already done, {n_failed} failed, {n_skipped} skipped, {n_not_started} not started",
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
    // The run is recorded; a closed stdout must not turn success into failure.
    let _ = writeln!(stdout, "{summary}");
    let _ = stdout.flush();
    Ok(match report.status {
        Some(RunStatus::Succeeded) | None => Exit::Success,
        Some(RunStatus::Failed) => Exit::Failure,
        Some(RunStatus::Interrupted) => Exit::Interrupted,
    })
}

fn dry_run(
    pipeline: &apollo_core::Pipeline,
    state_path: &Path,
    target: Target,
    options: EngineOptions,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    // Read only: no lock, no recovery, nothing written.
    let state = state_path
        .join("runs")
        .is_dir()
        .then(|| StateDir::open_existing(state_path))
        .transpose()?;
    let run_id = match (&state, target) {
        (_, Target::Fresh) | (None, _) => None,
        (Some(state), Target::Named(run_id)) => Some((state, run_id)),
        (Some(state), Target::LatestIfIncomplete) => match state.latest_run(&pipeline.name)? {
            Some(run_id) if state.run_summary(&run_id)?.state != RunState::Succeeded => {
                Some((state, run_id))
            }
            _ => None,
        },
    };
    let mut prior = PriorState::empty();
    match &run_id {
        Some((state, run_id)) => {
            let (mut reader, _) = state::read_records(state, run_id, ReadOptions::default())?;
            for record in &mut reader {
                prior.apply(&record?.event);
            }
            state::print_warnings(&reader.take_warnings(), stderr);
            writeln!(
                stdout,
                "dry run: would resume run {run_id} of `{}`",
                pipeline.name
            )
            .map_err(output)?;
        }
        None => writeln!(
            stdout,
            "dry run: would start a new run of `{}`",
            pipeline.name
        )
        .map_err(output)?,
    }
    let plan = engine::dry_run(pipeline, &prior, &options).map_err(|error| {
        engine_error(
            error,
            run_id
                .as_ref()
                .map_or("(new)", |(_, run_id)| run_id.as_str()),
        )
    })?;
    let width = plan.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut n_run = 0;
    for (name, planned) in &plan {
        let verb = if planned.runs() {
            n_run += 1;
            "run"
        } else {
            "skip"
        };
        writeln!(stdout, "  {verb:<4}  {name:<width$}  {planned}").map_err(output)?;
    }
    writeln!(
        stdout,
        "{n_run} of {} unit{} would run",
        plan.len(),
        plural(plan.len())
    )
    .map_err(output)?;
    Ok(Exit::Success)
}

/// Kill what units of `run_id` left running outside their process groups (found by their
/// `APOLLO_RUN_ID`), and say so.
fn sweep_strays(run_id: &RunId, what: &str, stderr: &mut dyn Write) {
    match apollo_exec::kill_stray_processes(run_id.as_str()) {
        Ok(0) => {}
        Ok(n_killed) => {
            let _ = writeln!(
                stderr,
                "apollo: killed {n_killed} process{} {what} run {run_id}",
                if n_killed == 1 { "" } else { "es" }
            );
        }
        Err(error) => {
            let _ = writeln!(
                stderr,
                "warning: could not look for processes {what} run {run_id}: {error}"
            );
        }
    }
}

fn engine_error(error: EngineError, run_id: &str) -> CliError {
    match error {
        EngineError::NeedsVerdict { unit, attempt } => CliError::NeedsVerdict {
            run: run_id.to_owned(),
            unit,
            attempt,
        },
        EngineError::InputsChanged { unit, changes } => CliError::InputsChanged {
            run: run_id.to_owned(),
            unit,
            changes,
        },
        EngineError::Journal(error) => CliError::Journal(error),
        other => CliError::Usage {
            message: other.to_string(),
        },
    }
}

/// `APOLLO_FAULTS=write:5:ENOSPC,fsync:3:EIO` injects journal I/O faults: a testing hook for
/// the crash and full-disk tests, documented in apollo-store.
fn fault_plan_from_env() -> Result<apollo_store::FaultPlan, CliError> {
    match std::env::var("APOLLO_FAULTS") {
        Ok(text) if !text.is_empty() => text.parse().map_err(|error| CliError::Usage {
            message: format!("APOLLO_FAULTS: {error}"),
        }),
        _ => Ok(apollo_store::FaultPlan::default()),
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}
