//! The `apollo` binary: parse the command line, run one command, turn its outcome into an
//! exit code. Everything else lives in the library crates; see `cli.rs` for the commands and
//! `exit.rs` for the exit-code table.
// mimalloc's option calls (`memory.rs`) are the only `unsafe`; everything else is safe code.
#![deny(unsafe_code)]

mod cli;
mod cmd;
mod color;
mod error;
mod excerpt;
mod exit;
mod memory;
mod progress;
mod run_events;
mod signals;
mod state;
mod stream;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::exit::Exit;

fn main() -> ExitCode {
    // A write over the file size limit (`ulimit -f`) must fail with EFBIG (a journal I/O
    // error, exit 6, with its message) instead of killing apollo with SIGXFSZ. Caught rather
    // than ignored: apollo-exec resets caught signals to their default in units.
    let _ = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    // The handles are not held locked: the signal watcher and the progress line write to
    // stderr from other threads while a run is in progress.
    run(
        std::env::args_os(),
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    )
    .into()
}

/// Runs `apollo` with `args` (program name first), writing to the given streams.
fn run(
    args: impl IntoIterator<Item = std::ffi::OsString>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Exit {
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(clap_error) => {
            // `--help` and `--version` are "errors" that go to stdout and exit 0.
            let text = clap_error.render().to_string();
            // Nothing useful can be done if the stream is closed; the exit code still tells.
            if clap_error.use_stderr() {
                let _ = stderr.write_all(text.as_bytes());
                return Exit::Usage;
            }
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
            return Exit::Success;
        }
    };
    color::init(cli.global.color);
    progress::set_verbosity(cli.global.quiet, cli.global.verbose);
    match cmd::dispatch(cli, stdout, stderr) {
        Ok(exit) => exit,
        Err(error) => error::report(&error, stderr),
    }
}

#[cfg(test)]
mod tests;
