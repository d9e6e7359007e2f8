//! `apollo serve`: a local, read-only web view of the state directory's runs (apollo-serve),
//! until Ctrl-C or SIGTERM.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::cmd::StateArgs;
use crate::error::{CliError, output};
use crate::exit::Exit;

/// Arguments of `apollo serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on; anything but loopback makes the pages reachable from other
    /// machines (the token is still required on every request)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub(crate) bind: IpAddr,
    /// The port [default: a free one]
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) port: u16,
    /// Read the access token from this file (one line, 16 to 256 characters of A-Z a-z 0-9
    /// - _ . ~) instead of generating one
    #[arg(long, value_name = "F")]
    pub(crate) token_file: Option<PathBuf>,
    /// Open the URL in the desktop's browser (`xdg-open`)
    #[arg(long)]
    pub(crate) open: bool,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

/// `apollo serve`.
pub(crate) fn serve(
    args: &ServeArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
    let token = match &args.token_file {
        Some(path) => apollo_serve::Token::from_file(path),
        None => apollo_serve::Token::generate(),
    }
    .map_err(|error| CliError::Usage {
        message: error.to_string(),
    })?;
    let options = apollo_serve::Options::new(state.path(), token)
        .bind(args.bind)
        .port(args.port);
    let server = apollo_serve::Server::bind(options).map_err(serve_error)?;
    let url = server.url();
    writeln!(
        stdout,
        "apollo serve: {} (read only), Ctrl-C stops it\n{url}",
        crate::state::absolute(state.path()).display()
    )
    .map_err(output)?;
    stdout.flush().map_err(output)?;
    if !args.bind.is_loopback() {
        let _ = writeln!(
            stderr,
            "warning: listening on {}: anyone who can reach it and has the token sees every run",
            args.bind
        );
    }
    if args.open {
        let url = url.clone();
        // xdg-open hands the URL to the browser and returns; a thread, so a slow desktop
        // never delays serving.
        std::thread::spawn(move || {
            let opened = apollo_exec::ClientCommand::program("xdg-open")
                .arg(url)
                .timeout(std::time::Duration::from_secs(30))
                .run();
            if !opened
                .as_ref()
                .is_ok_and(apollo_exec::ClientOutput::success)
            {
                let _ = writeln!(
                    std::io::stderr(),
                    "warning: could not open a browser (xdg-open); open the URL above yourself"
                );
            }
        });
    }
    server.run().map_err(serve_error)?;
    let _ = writeln!(stderr, "apollo serve: stopped");
    Ok(Exit::Success)
}

fn serve_error(error: apollo_serve::ServeError) -> CliError {
    match error {
        apollo_serve::ServeError::Store(error) => CliError::Store(error),
        other => CliError::Usage {
            message: other.to_string(),
        },
    }
}
