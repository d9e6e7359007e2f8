//! The one place where errors become a message on stderr and an exit code.

use std::io::{self, Write};
use std::path::PathBuf;

use apollo_core::config::{DEFAULT_CONFIG_NAMES, LoadError};
use apollo_core::diagnostic::{Diagnostic, render_all};

use crate::exit::Exit;

/// Everything that can stop a command early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// No CONFIG argument and none of the default names exists.
    #[error(
        "no pipeline config found in `{}`: looked for {}",
        cwd.display(),
        DEFAULT_CONFIG_NAMES.map(|name| format!("`{name}`")).join(", ")
    )]
    NoConfig {
        /// The folder searched.
        cwd: PathBuf,
    },
    /// The current directory could not be determined.
    #[error("cannot determine the current directory")]
    CurrentDir(#[source] io::Error),
    /// The config could not be read.
    #[error(transparent)]
    Load(LoadError),
    /// The config is invalid; the diagnostics say why.
    #[error("could not load `{}` ({n_errors} error{s})", path.display(), s = if *n_errors == 1 { "" } else { "s" })]
    InvalidConfig {
        /// The config file.
        path: PathBuf,
        /// All diagnostics (errors and warnings).
        diagnostics: Vec<Diagnostic>,
        /// How many of them are errors.
        n_errors: usize,
    },
    /// Writing the command's output failed.
    #[error("cannot write the output")]
    Output(#[source] io::Error),
}

impl CliError {
    /// The exit code this error ends the process with.
    pub(crate) fn exit(&self) -> Exit {
        match self {
            CliError::NoConfig { .. }
            | CliError::CurrentDir(_)
            | CliError::Load(_)
            | CliError::InvalidConfig { .. } => Exit::Usage,
            // A closed stdout (`apollo graph | head`) is the reader's choice, not a failure.
            CliError::Output(error) if error.kind() == io::ErrorKind::BrokenPipe => Exit::Success,
            CliError::Output(_) => Exit::Failure,
        }
    }
}

impl From<LoadError> for CliError {
    fn from(error: LoadError) -> Self {
        match error {
            LoadError::Invalid { path, diagnostics } => {
                let n_errors = diagnostics.iter().filter(|d| d.is_error()).count();
                CliError::InvalidConfig {
                    path,
                    diagnostics,
                    n_errors,
                }
            }
            other => CliError::Load(other),
        }
    }
}

/// Writes `error` to `stderr` (with its diagnostics and cause chain) and returns its exit code.
/// A broken stdout pipe prints nothing.
pub(crate) fn report(error: &CliError, stderr: &mut dyn Write) -> Exit {
    let exit = error.exit();
    if matches!(error, CliError::Output(cause) if cause.kind() == io::ErrorKind::BrokenPipe) {
        return exit;
    }
    let mut text = String::new();
    if let CliError::InvalidConfig { diagnostics, .. } = error {
        text.push_str(&render_all(diagnostics));
    }
    text.push_str(&format!("error: {error}\n"));
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!("  caused by: {cause}\n"));
        source = cause.source();
    }
    if let CliError::NoConfig { .. } = error {
        text.push_str(
            "  = help: pass the config file's path: `apollo check path/to/pipeline.yaml`\n",
        );
    }
    // If stderr itself is gone there is no one left to tell.
    let _ = stderr.write_all(text.as_bytes());
    exit
}

/// Wraps an output error.
pub(crate) fn output(error: io::Error) -> CliError {
    CliError::Output(error)
}
