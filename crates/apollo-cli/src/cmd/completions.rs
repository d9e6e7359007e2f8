//! `apollo completions <shell>`: print a completion script.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;
use crate::error::{CliError, output};
use crate::exit::Exit;

/// Arguments of `apollo completions`.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Example (bash):\n  apollo completions bash > ~/.local/share/bash-completion/completions/apollo"
)]
pub(crate) struct CompletionsArgs {
    /// The shell to generate completions for
    #[arg(value_enum)]
    pub(crate) shell: Shell,
}

/// Writes the completion script for `args.shell` to `stdout`.
pub(crate) fn run(args: &CompletionsArgs, stdout: &mut dyn Write) -> Result<Exit, CliError> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "apollo", &mut script);
    stdout.write_all(&script).map_err(output)?;
    stdout.flush().map_err(output)?;
    Ok(Exit::Success)
}
