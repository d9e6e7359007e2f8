//! `apollo run [CONFIG]` and `apollo resume [RUN]`: run a pipeline, or resume the run that
//! stopped half-way, with every step journaled before it matters.
//!
//! The session itself (lock, run choice, records, sweeps, engine) is apollo-runner's; these
//! files map arguments onto it (`args.rs`), drive it with the process executor
//! (`execute.rs`, `strays.rs`) and render what it reports (`render.rs`, `notices.rs`,
//! `errors.rs`; `stopped.rs` for a run that stopped for a human, from the run model).

mod args;
mod errors;
mod execute;
mod executors;
pub(crate) mod notices;
mod otlp_file;
mod render;
mod stopped;
mod strays;

use std::io::Write;
use std::path::{Path, PathBuf};

use apollo_runner::RunTarget;

pub(crate) use args::{ResumeArgs, RunArgs, param_overrides};
pub(crate) use errors::runner_error;

use crate::error::CliError;
use crate::exit::Exit;
use crate::state;

/// `apollo run`.
pub(crate) fn run(
    args: &RunArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let config_path = args.config.resolve()?;
    let target = if args.fresh {
        RunTarget::Fresh
    } else {
        RunTarget::LatestIfIncomplete
    };
    execute::execute(
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
    execute::execute(
        &config_path,
        Some(&state_path),
        RunTarget::Named(run_id),
        &args.execution,
        stdout,
        stderr,
    )
}
