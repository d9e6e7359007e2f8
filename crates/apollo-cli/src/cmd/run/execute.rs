//! Driving a run session for `apollo run` and `apollo resume`: open it, print the opening
//! line, run the engine with the process executor (and the Slurm executor for units that ask for
//! it), live progress and signal handling, print
//! the summary.

use std::io::Write;
use std::path::Path;

use apollo_core::CancelToken;
use apollo_core::config::{self, Loaded};
use apollo_core::diagnostic::render_all;
use apollo_core::dispatch::Dispatch;
use apollo_core::event::RunStatus;
use apollo_core::model::ExecutorKind;
use apollo_exec::{ExecOptions, ProcessExecutor};
use apollo_runner::{Opened, RunSession, RunTarget};
use apollo_slurm::{SlurmExecutor, SlurmOptions};

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

/// Loads and validates the config; diagnostics (and warnings) go to stderr.
fn load_config(path: &Path, stderr: &mut dyn Write) -> Result<Loaded, CliError> {
    let loaded = config::load(path)?;
    if !loaded.warnings.is_empty() {
        let _ = stderr.write_all(render_all(&loaded.warnings).as_bytes());
    }
    Ok(loaded)
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
    let loaded = load_config(config_path, stderr)?;
    let pipeline = &loaded.pipeline;
    let state_path = state::state_dir_path(state_dir, Some(config_path));
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
    let local = ProcessExecutor::new(ExecOptions::default());
    // A Slurm executor (and its poller thread) only when some unit runs on Slurm.
    let slurm = pipeline
        .units
        .iter()
        .any(|unit| unit.executor == ExecutorKind::Slurm)
        .then(|| SlurmExecutor::new(SlurmOptions::default()));
    let executor = match &slurm {
        Some(slurm) => Dispatch::new(&local).with_slurm(slurm),
        None => Dispatch::new(&local),
    };
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
    // What the run cost the cluster's controller (issue 15: O(jobs + polls)).
    if let Some(slurm) = &slurm
        && execution.explain
    {
        let _ = writeln!(stderr, "slurm: {}", slurm.client_calls());
    }
    drop(slurm);
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
