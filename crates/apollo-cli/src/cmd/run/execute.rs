//! Driving a run session for `apollo run` and `apollo resume`: open it, print the opening
//! line, run the engine with the process executor, live progress and signal handling, print
//! the summary.

use std::io::Write;
use std::path::Path;

use apollo_core::CancelToken;
use apollo_core::config::{self, LoadOptions, Loaded, ParamInput, ParamOverride};
use apollo_core::diagnostic::render_all;
use apollo_core::event::RunStatus;
use apollo_exec::{ExecOptions, ProcessExecutor};
use apollo_runner::{Opened, RunSession, RunTarget};

use super::args::ExecutionArgs;
use super::errors::runner_error;
use super::notices::{HeldNotices, StderrNotices};
use super::render;
use super::strays::ProcessSweep;
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::progress::Progress;
use crate::signals::SignalWatch;
use crate::state;

/// Loads and validates the config with `params`; diagnostics go to stderr, and warnings
/// too when `warn`.
fn load_config(
    path: &Path,
    params: Vec<ParamOverride>,
    warn: bool,
    stderr: &mut dyn Write,
) -> Result<Loaded, CliError> {
    let loaded = config::load_with(path, &LoadOptions::default().params(params))?;
    if warn && !loaded.warnings.is_empty() {
        let _ = stderr.write_all(render_all(&loaded.warnings).as_bytes());
    }
    Ok(loaded)
}

/// The pipeline with the params the run will have: those given on the command line, and for a
/// resume, the run's recorded ones for every param not given (a resume keeps its run's
/// params: a `today` default stays the day the run started). A given value that differs from
/// the recorded one is refused when the session opens.
fn load_for_run(
    config_path: &Path,
    state_path: &Path,
    target: &RunTarget,
    execution: &ExecutionArgs,
    stderr: &mut dyn Write,
) -> Result<Loaded, CliError> {
    let given = execution.param_overrides()?;
    let loaded = load_config(config_path, given.clone(), false, stderr)?;
    let sweep = ProcessSweep;
    let probe = RunSession::new(state_path, config_path, &loaded, &sweep).target(target.clone());
    let recorded = probe.recorded_params().map_err(runner_error)?;
    let reload = match &recorded {
        Some((_, recorded)) => recorded.iter().any(|(name, value)| {
            loaded.params.get(name).is_some_and(|now| now != value)
                && !given.iter().any(|param| param.name == *name)
        }),
        None => false,
    };
    let Some((run, recorded)) = recorded.filter(|_| reload) else {
        if !loaded.warnings.is_empty() {
            let _ = stderr.write_all(render_all(&loaded.warnings).as_bytes());
        }
        return Ok(loaded);
    };
    let mut params: Vec<ParamOverride> = recorded
        .into_iter()
        .filter(|(name, _)| loaded.params.contains_key(name))
        .map(|(name, value)| ParamOverride {
            name,
            value: ParamInput::Json(value),
            origin: format!("recorded in run {run}"),
        })
        .collect();
    params.extend(given);
    load_config(config_path, params, true, stderr)
}

/// Runs (or plans, with `--dry-run`) the pipeline at `config_path` on `target`.
pub(super) fn execute(
    config_path: &Path,
    state_dir: Option<&Path>,
    target: RunTarget,
    execution: &ExecutionArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state_path = state::state_dir_path(state_dir, Some(config_path));
    let loaded = load_for_run(config_path, &state_path, &target, execution, stderr)?;
    let pipeline = &loaded.pipeline;
    let sweep = ProcessSweep;
    let session = execution
        .configure(RunSession::new(&state_path, config_path, &loaded, &sweep).target(target))?;

    if execution.dry_run {
        let plan = session
            .plan(&mut StderrNotices::new(stderr))
            .map_err(runner_error)?;
        render::dry_run(&plan, pipeline, stdout)?;
        return Ok(Exit::Success);
    }

    let open_run = match session
        .open(&mut StderrNotices::new(stderr))
        .map_err(runner_error)?
    {
        Opened::Ready(open_run) => open_run,
        Opened::NothingToResume(run_id) => {
            writeln!(stdout, "run {run_id} succeeded: nothing to resume").map_err(output)?;
            return Ok(Exit::Success);
        }
    };
    writeln!(stdout, "{}", render::opening_line(&open_run, pipeline)).map_err(output)?;
    stdout.flush().map_err(output)?;

    let cancel = CancelToken::new();
    let signals = SignalWatch::install(&cancel).map_err(|error| CliError::Usage {
        message: format!("cannot install signal handlers: {error}"),
    })?;
    let executor = ProcessExecutor::new(ExecOptions::default());
    let name_width = pipeline
        .units
        .iter()
        .map(|unit| unit.name.len())
        .max()
        .unwrap_or(0)
        .min(40);
    let mut progress = Progress::new(
        (
            open_run.n_units_in_scope(),
            open_run.engine_options().max_parallel,
        ),
        name_width,
        execution.explain,
        stdout,
    );
    let mut held = HeldNotices::default();
    let result = open_run.run(&executor, &mut progress, &cancel, &mut held);
    let elapsed = progress.elapsed();
    progress.finish();
    drop(signals);
    held.write_to(stderr);
    let finished = result.map_err(runner_error)?;

    // The run is recorded; a closed stdout must not turn success into failure.
    let _ = writeln!(
        stdout,
        "{}",
        render::summary(&finished.run_id, &finished.report, elapsed)
    );
    let _ = stdout.flush();
    Ok(match finished.report.status {
        Some(RunStatus::Succeeded) | None => Exit::Success,
        Some(RunStatus::Failed) => Exit::Failure,
        Some(RunStatus::Interrupted) => Exit::Interrupted,
    })
}
