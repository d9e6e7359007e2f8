//! The command line, as clap derive types. One variant of [`Command`] per subcommand; each
//! subcommand's arguments and code live in `cmd/<name>.rs`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::cmd;
use crate::exit::Exit;

/// Apollo-11: a crash-safe task orchestrator with state replay.
#[derive(Debug, Parser)]
#[command(
    name = "apollo",
    version,
    about = "Apollo-11: a crash-safe task orchestrator with state replay",
    long_about = "Apollo-11: a crash-safe task orchestrator with state replay.\n\n\
        A pipeline is a YAML file of units (commands with dependencies, inputs and outputs). \
        Without a CONFIG argument, commands look for apollo.yaml, pipeline.yaml and \
        config/pipeline.yaml in the current folder, in that order.",
    after_long_help = Exit::help_table(),
    propagate_version = true
)]
pub(crate) struct Cli {
    /// Options every command accepts.
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
    /// The command to run.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options shared by every command.
#[derive(Debug, clap::Args)]
pub(crate) struct GlobalArgs {
    /// Directory holding the run journal and state [default: `.apollo/` beside the config]
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        help_heading = "Global options"
    )]
    pub(crate) state_dir: Option<PathBuf>,
    /// When to colour the output
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t = crate::color::ColorArg::Auto,
        value_name = "WHEN",
        help_heading = "Global options"
    )]
    pub(crate) color: crate::color::ColorArg,
    /// Say less: no line per succeeded unit, only failures, warnings and the summary
    #[arg(
        long,
        short = 'q',
        global = true,
        help_heading = "Global options",
        conflicts_with = "verbose"
    )]
    pub(crate) quiet: bool,
    /// Say more: also a line when each unit starts or is reused from an earlier run
    #[arg(long, short = 'v', global = true, help_heading = "Global options")]
    pub(crate) verbose: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a pipeline, or resume its latest run if that one stopped half-way
    #[command(after_long_help = Exit::help_table())]
    Run(cmd::run::RunArgs),
    /// Resume a run that stopped half-way (failed, interrupted, or apollo was killed)
    #[command(after_long_help = Exit::help_table())]
    Resume(cmd::run::ResumeArgs),
    /// Record a human's verdict on a unit that was cut off mid-attempt, or allow a changed one to run again
    #[command(after_long_help = Exit::help_table())]
    Mark(cmd::mark::MarkArgs),
    /// List the recorded runs: id, pipeline, start, duration, status, unit counts
    Runs(cmd::runs::RunsArgs),
    /// Replay a run as a timeline (text, JSON, Chrome trace for Perfetto, or an HTML Gantt chart)
    #[command(after_long_help = Exit::help_table())]
    Replay(cmd::replay::ReplayArgs),
    /// Compare two runs unit by unit: status, inputs (and which changed), outputs, durations
    #[command(after_long_help = Exit::help_table())]
    Diff(cmd::replay::DiffArgs),
    /// Export a run for other tools: OpenTelemetry traces, W3C PROV, OpenLineage events, or a Workflow Run RO-Crate
    #[command(after_long_help = Exit::help_table())]
    Export(cmd::export::ExportArgs),
    /// Re-run one recorded attempt with the inputs it had then, in a scratch directory, and compare its outputs
    #[command(after_long_help = Exit::help_table())]
    Reproduce(cmd::reproduce::ReproduceArgs),
    /// Find which input change between a good and a bad run flipped a unit's output: changes tried in halves, in scratch trees
    #[command(after_long_help = Exit::help_table())]
    Bisect(cmd::bisect::BisectArgs),
    /// Show a run's summary (every unit's state), or one unit's attempts: outcome, phases, hashes, log paths
    Show(cmd::show::ShowArgs),
    /// Print the captured stdout (or stderr) of a unit's attempt or of every unit, or follow a running attempt (-f)
    Logs(cmd::logs::LogsArgs),
    /// Check the integrity of run journals (exit 3 on corruption)
    #[command(after_long_help = Exit::help_table())]
    Verify(cmd::verify::VerifyArgs),
    /// Delete old runs (never a running run, never the latest run of a pipeline)
    Prune(cmd::prune::PruneArgs),
    /// Copy finished runs to another folder, consistently, and prune old copies there
    Backup(cmd::prune::BackupArgs),
    /// Validate a pipeline config and report every problem at once
    #[command(after_long_help = Exit::help_table())]
    Check(cmd::check::CheckArgs),
    /// Print the dependency graph as Graphviz dot or Mermaid
    #[command(after_long_help = Exit::help_table())]
    Graph(cmd::graph::GraphArgs),
    /// Print a shell completion script
    Completions(cmd::completions::CompletionsArgs),
    /// Stop the apollo running in this state directory, from another shell, as Ctrl-C would
    #[command(after_long_help = Exit::help_table())]
    Stop(cmd::stop::StopArgs),
    /// Per-unit durations (percentiles), failure and retry rates over the last runs, and timeouts set too tight or too loose
    Stats(cmd::stats::StatsArgs),
    /// Serve a local, read-only web view of every run, live, behind a token (until Ctrl-C)
    Serve(cmd::serve::ServeArgs),
    /// Write the man pages to a folder (what `cargo xtask man` runs)
    #[command(hide = true)]
    GenerateMan(cmd::man::ManArgs),
    /// Print the JSON Schema of pipeline files (for editors: completion and checks)
    Schema(cmd::schema::SchemaArgs),
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn top_level_help_lists_commands_and_exit_codes() {
        let help = Cli::command().render_long_help().to_string();
        insta::assert_snapshot!(help);
    }

    #[test]
    fn check_help() {
        let mut command = Cli::command();
        command.build();
        let help = command
            .find_subcommand_mut("check")
            .expect("check exists")
            .render_long_help()
            .to_string();
        insta::assert_snapshot!(help);
    }

    #[test]
    fn graph_help() {
        let mut command = Cli::command();
        command.build();
        let help = command
            .find_subcommand_mut("graph")
            .expect("graph exists")
            .render_long_help()
            .to_string();
        insta::assert_snapshot!(help);
    }

    #[test]
    fn help_of_the_run_state_commands() {
        let mut command = Cli::command();
        command.build();
        for name in [
            "run", "resume", "mark", "runs", "replay", "diff", "show", "logs", "verify", "prune",
            "backup", "export",
        ] {
            let help = command
                .find_subcommand_mut(name)
                .expect("command exists")
                .render_long_help()
                .to_string();
            insta::assert_snapshot!(format!("help_{name}"), help);
        }
    }

    #[test]
    fn completions_help() {
        let mut command = Cli::command();
        command.build();
        let help = command
            .find_subcommand_mut("completions")
            .expect("completions exists")
            .render_long_help()
            .to_string();
        insta::assert_snapshot!(help);
    }
}
