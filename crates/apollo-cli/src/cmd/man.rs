//! `apollo generate-man DIR` (hidden; what `cargo xtask man` runs): one man page per command,
//! `apollo.1` and `apollo-<command>.1`, generated from the clap definition so they never drift
//! from `--help`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::{CliError, output};
use crate::exit::Exit;

/// Arguments of `apollo generate-man`.
#[derive(Debug, clap::Args)]
pub(crate) struct ManArgs {
    /// The folder to write the pages to (created if needed)
    #[arg(value_name = "DIR")]
    pub(crate) dir: PathBuf,
}

/// Writes the pages, and names each on `stdout`.
pub(crate) fn run(args: &ManArgs, stdout: &mut dyn Write) -> Result<Exit, CliError> {
    let write_error = |path: &Path, error: std::io::Error| CliError::Usage {
        message: format!("cannot write `{}`: {error}", path.display()),
    };
    std::fs::create_dir_all(&args.dir).map_err(|error| write_error(&args.dir, error))?;
    let mut command = Cli::command();
    command.build();
    let mut pages = vec![("apollo".to_owned(), command.clone())];
    for subcommand in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        let name = format!("apollo-{}", subcommand.get_name());
        // A page is titled by its command's name; clap wants a 'static one.
        let title: &'static str = Box::leak(name.clone().into_boxed_str());
        pages.push((name, subcommand.clone().name(title)));
    }
    for (name, page) in pages {
        let path = args.dir.join(format!("{name}.1"));
        let mut bytes = Vec::new();
        clap_mangen::Man::new(page)
            .render(&mut bytes)
            .map_err(|error| write_error(&path, error))?;
        std::fs::write(&path, bytes).map_err(|error| write_error(&path, error))?;
        writeln!(stdout, "{}", path.display()).map_err(output)?;
    }
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_per_command_naming_its_options() {
        let dir = tempfile::tempdir().unwrap();
        let mut stdout = Vec::new();
        run(
            &ManArgs {
                dir: dir.path().to_path_buf(),
            },
            &mut stdout,
        )
        .unwrap();
        let top = std::fs::read_to_string(dir.path().join("apollo.1")).unwrap();
        assert!(top.contains(".TH apollo"), "{top}");
        let logs = std::fs::read_to_string(dir.path().join("apollo-logs.1")).unwrap();
        assert!(logs.contains("follow"), "{logs}");
        assert!(!dir.path().join("apollo-generate-man.1").exists());
    }
}
