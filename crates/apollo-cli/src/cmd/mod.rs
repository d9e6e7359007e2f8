//! One module per subcommand. A command gets its parsed arguments and the output streams, and
//! returns the exit code of a normal outcome or a [`CliError`] (rendered in `error.rs`).
//!
//! Adding a command: a new `cmd/<name>.rs` with its `Args` struct and `run` function, one
//! variant in `cli::Command`, one arm in [`dispatch`].

pub(crate) mod bisect;
pub(crate) mod check;
pub(crate) mod completions;
pub(crate) mod diff;
pub(crate) mod export;
pub(crate) mod graph;
pub(crate) mod logs;
pub(crate) mod man;
pub(crate) mod mark;
pub(crate) mod prune;
pub(crate) mod replay;
pub(crate) mod reproduce;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod schema;
pub(crate) mod serve;
pub(crate) mod show;
pub(crate) mod stats;
pub(crate) mod stop;
pub(crate) mod verify;

use std::io::Write;
use std::path::{Path, PathBuf};

use std::collections::HashMap;

use apollo_core::{Dag, Pipeline, config};

use crate::cli::{Cli, Command};
use crate::error::CliError;
use crate::exit::Exit;

/// Runs the parsed command line.
pub(crate) fn dispatch(
    cli: Cli,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state_dir = cli.global.state_dir.as_deref();
    match cli.command {
        Command::Run(args) => run::run(&args, state_dir, stdout, stderr),
        Command::Resume(args) => run::resume(&args, state_dir, stdout, stderr),
        Command::Mark(args) => mark::run(&args, state_dir, stdout, stderr),
        Command::Runs(args) => runs::runs(&args, state_dir, stdout),
        Command::Replay(args) => replay::replay(&args, state_dir, stdout, stderr),
        Command::Diff(args) => diff::diff(&args, state_dir, stdout, stderr),
        Command::Reproduce(args) => reproduce::run(&args, state_dir, stdout, stderr),
        Command::Bisect(args) => bisect::run(&args, state_dir, stdout, stderr),
        Command::Show(args) => show::show(&args, state_dir, stdout, stderr),
        Command::Logs(args) => logs::logs(&args, state_dir, stdout, stderr),
        Command::Verify(args) => verify::run(&args, state_dir, stdout, stderr),
        Command::Prune(args) => prune::prune(&args, state_dir, stdout),
        Command::Backup(args) => prune::backup(&args, state_dir, stdout, stderr),
        Command::Check(args) => check::run(&args, stdout, stderr),
        Command::Graph(args) => graph::run(&args, stdout, stderr),
        Command::Completions(args) => completions::run(&args, stdout),
        Command::Stop(args) => stop::stop(&args, state_dir, stdout),
        Command::GenerateMan(args) => man::run(&args, stdout),
        Command::Stats(args) => stats::stats(&args, state_dir, stdout, stderr),
        Command::Schema(args) => schema::run(&args, stdout),
        Command::Export(args) => export::export(&args, state_dir, stdout, stderr),
        Command::Serve(args) => serve::serve(&args, state_dir, stdout, stderr),
    }
}

/// The optional CONFIG argument shared by commands that read a pipeline.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArg {
    /// The pipeline config [default: the first of apollo.yaml, pipeline.yaml, config/pipeline.yaml in the current folder]
    #[arg(value_name = "CONFIG")]
    pub(crate) config: Option<PathBuf>,
}

impl ConfigArg {
    /// The config path: the argument, else the first default name found in the current folder.
    pub(crate) fn resolve(&self) -> Result<PathBuf, CliError> {
        if let Some(path) = &self.config {
            return Ok(path.clone());
        }
        let cwd = std::env::current_dir().map_err(CliError::CurrentDir)?;
        find_in(&cwd)
    }
}

/// The default config in `cwd`, named relative to it (as the user would type it).
fn find_in(cwd: &Path) -> Result<PathBuf, CliError> {
    let found = config::find_default_config(cwd).ok_or_else(|| CliError::NoConfig {
        cwd: cwd.to_owned(),
    })?;
    Ok(found
        .strip_prefix(cwd)
        .map_or(found.clone(), Path::to_path_buf))
}

/// `-c/--config` of the commands that read existing state: which pipeline's state directory.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct StateArgs {
    /// The pipeline config whose state to read [default: search this folder and its parents for `.apollo`]
    #[arg(long, short = 'c', value_name = "CONFIG")]
    pub(crate) config: Option<PathBuf>,
}

impl StateArgs {
    /// The existing state directory (see [`crate::state::find_existing`]).
    pub(crate) fn open(
        &self,
        state_dir: Option<&Path>,
    ) -> Result<apollo_store::StateDir, CliError> {
        crate::state::find_existing(state_dir, self.config.as_deref())
    }
}

/// The dependency graph of a loaded (hence validated) pipeline.
pub(crate) fn dag_of(pipeline: &Pipeline) -> Dag {
    let index: HashMap<&str, usize> = pipeline
        .units
        .iter()
        .enumerate()
        .map(|(unit_idx, unit)| (unit.name.as_str(), unit_idx))
        .collect();
    Dag::from_deps(
        pipeline
            .units
            .iter()
            .map(|unit| {
                unit.deps
                    .iter()
                    .filter_map(|dep| index.get(dep.as_str()).copied())
                    .collect()
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_default_config_names_the_three_candidates() {
        let dir = tempfile::tempdir().unwrap();
        let error = find_in(dir.path()).unwrap_err();
        let message = error.to_string();
        for name in ["`apollo.yaml`", "`pipeline.yaml`", "`config/pipeline.yaml`"] {
            assert!(message.contains(name), "{message}");
        }
        assert_eq!(error.exit(), Exit::Usage);
    }

    #[test]
    fn default_config_is_named_relative_to_the_current_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pipeline.yaml"), "").unwrap();
        assert_eq!(find_in(dir.path()).unwrap(), PathBuf::from("pipeline.yaml"));
    }
}
