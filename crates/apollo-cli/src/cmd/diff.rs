//! `apollo diff`: two runs compared unit by unit, through the run model's diff.

use std::io::{BufWriter, Write};
use std::path::Path;

use apollo_core::event::InputManifestRef;
use apollo_store::ReadOptions;

use super::replay::{DiffArgs, TableFormat, color_stdout};
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::state;

/// Each unit's commands, by (unit, phase), from the definition snapshot `run` started with;
/// `None` when it cannot be read.
fn definition_commands(
    state: &apollo_store::StateDir,
    run: &apollo_store::RunId,
) -> Option<std::collections::HashMap<(String, String), apollo_core::Command>> {
    let started = state::run_started(state, run).ok()?;
    let definition = state.read_blob(&started.definition_hash).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&definition).ok()?;
    let mut commands = std::collections::HashMap::new();
    for unit in value.get("units")?.as_array()? {
        let Some(name) = unit.get("name").and_then(serde_json::Value::as_str) else {
            continue;
        };
        for phase in ["prepare", "execute", "cleanup"] {
            if let Some(command) = unit
                .get(phase)
                .and_then(|command| serde_json::from_value(command.clone()).ok())
            {
                commands.insert((name.to_owned(), phase.to_owned()), command);
            }
        }
    }
    Some(commands)
}

/// What `apollo diff` reads besides the two journals.
struct DiffReads {
    run_dirs: [std::path::PathBuf; 2],
    live: [bool; 2],
}

impl apollo_replay::ManifestLoader for DiffReads {
    fn load(
        &self,
        side: apollo_replay::Side,
        reference: &InputManifestRef,
    ) -> Result<Vec<apollo_core::event::InputComponent>, String> {
        let index = usize::from(side != apollo_replay::Side::A);
        apollo_store::read_input_manifest(&self.run_dirs[index], reference)
            .map_err(|error| error.to_string())
    }

    fn is_live(&self, side: apollo_replay::Side) -> bool {
        self.live[usize::from(side != apollo_replay::Side::A)]
    }
}

/// `apollo diff`: exit 0 when every unit's status, input hash and output hash match, 1 when not.
pub(crate) fn diff(
    args: &DiffArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
    let run_a = state::resolve_run(&state, &args.run_a)?;
    let run_b = state::resolve_run(&state, &args.run_b)?;
    let (mut reader_a, _) = state::read_records(&state, &run_a, ReadOptions::default())?;
    let (mut reader_b, _) = state::read_records(&state, &run_b, ReadOptions::default())?;
    // Input lists too large for a record are in their run's manifest files; a run an apollo
    // is writing now shows its unfinished units running.
    let manifests = DiffReads {
        run_dirs: [&run_a, &run_b].map(|run| state.runs_dir().join(run.as_str())),
        live: [&run_a, &run_b].map(|run| crate::cmd::logs::live_holder_pid(&state, run).is_some()),
    };
    let mut diff =
        apollo_replay::diff_records_with_manifests(&mut reader_a, &mut reader_b, &manifests)?;
    // A command that changed only because values are now quoted says so (DESIGN §18): read
    // run B's definition only when a command changed.
    let command_changed = diff.units.iter().any(|unit| {
        (unit.input_changes.iter())
            .any(|change| change.kind == apollo_core::event::InputKind::Command)
    });
    if command_changed && let Some(commands) = definition_commands(&state, &run_b) {
        diff.mark_quoting_changes(&|unit, phase| {
            commands.get(&(unit.to_owned(), phase.to_owned())).cloned()
        });
    }
    state::print_warnings(&reader_a.take_warnings(), stderr);
    state::print_warnings(&reader_b.take_warnings(), stderr);
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
