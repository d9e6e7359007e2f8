//! `apollo diff`: two runs compared unit by unit, through the read side's diff
//! (`apollo_runner::read::diff`).

use std::io::{BufWriter, Write};
use std::path::Path;

use super::replay::{DiffArgs, TableFormat, color_stdout};
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::state;

/// `apollo diff`: exit 0 when every unit's state, input hash and output hash match, 1 when not.
pub(crate) fn diff(
    args: &DiffArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
    let run_a = state::resolve_run(&state, &args.run_a)?;
    let run_b = state::resolve_run(&state, &args.run_b)?;
    let (diff, warnings) = apollo_runner::read::diff(&state, &run_a, &run_b)?;
    state::print_warnings(&warnings, stderr);
    let mut out = BufWriter::new(stdout);
    match args.format {
        TableFormat::Text => apollo_replay::write_diff_text(&diff, &mut out, color_stdout()),
        TableFormat::Json => apollo_replay::write_diff_json(&diff, &mut out),
    }
    .map_err(output)?;
    out.flush().map_err(output)?;
    Ok(if diff.is_same() {
        Exit::Success
    } else {
        Exit::Failure
    })
}
