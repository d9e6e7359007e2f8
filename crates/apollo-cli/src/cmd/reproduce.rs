//! `apollo reproduce RUN UNIT`: re-run one recorded attempt with the inputs it had then, in a
//! scratch directory, and compare its outputs with the recorded ones (DESIGN §12). The work is
//! apollo-runner's [`apollo_runner::reproduce`]; this maps the arguments and renders the result.

use std::io::Write;
use std::path::{Path, PathBuf};

use apollo_core::CancelToken;
use apollo_exec::{ExecOptions, ProcessExecutor};
use apollo_exec::{IsolationError, PrivateMounts, SecretValues};
use apollo_runner::{InputSource, Isolation, ReproduceRequest, Reproduction, describe_input};

use crate::cmd::replay::TableFormat;
use crate::cmd::run::runner_error;
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::signals::SignalWatch;
use crate::state;

/// Arguments of `apollo reproduce`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReproduceArgs {
    /// The run: an id, a unique prefix or suffix, `latest`, `latest~N` or `last-success`
    #[arg(value_name = "RUN")]
    pub(crate) run: String,
    /// The unit
    #[arg(value_name = "UNIT")]
    pub(crate) unit: String,
    /// The attempt to reproduce [default: the unit's last attempt in the run]
    #[arg(long, value_name = "N")]
    pub(crate) attempt: Option<u32>,
    /// Run in this directory (created, must be empty) and keep it
    #[arg(long, value_name = "DIR")]
    pub(crate) into: Option<PathBuf>,
    /// Keep the temporary scratch directory
    #[arg(long)]
    pub(crate) keep: bool,
    /// Reproduce an `idempotent: false` unit all the same: what it does outside its files (a
    /// charge, a mail, a deploy) happens again
    #[arg(long)]
    pub(crate) allow_side_effects: bool,
    /// Output format
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub(crate) format: TableFormat,
}

/// Reproduces the attempt; exit 0 when it was reproduced, 1 when its outputs (or its
/// outcome) differ.
pub(crate) fn run(
    args: &ReproduceArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    // First, while apollo has one thread: the namespaces in which the unit will see the
    // project read-only (issue 36, item 13).
    let isolation = ReadOnlyProject(PrivateMounts::enter());
    let state_path = state::state_dir_path(state_dir, None);
    let state = state::open_existing(&state_path)?;
    let run_id = state::resolve_run(&state, &args.run)?;
    let request = ReproduceRequest::new(state.path(), run_id, &args.unit)
        .attempt(args.attempt)
        .into_dir(args.into.clone())
        .keep(args.keep)
        .allow_side_effects(args.allow_side_effects);
    let cancel = CancelToken::new();
    let signals = SignalWatch::install(&cancel).map_err(|error| CliError::Usage {
        message: format!("cannot install signal handlers: {error}"),
    })?;
    // The secrets the unit receives, from the sources its definition recorded, read now as a
    // run reads them when it starts (and never written down).
    let (unit, project) = apollo_runner::reproduced_unit(&request).map_err(runner_error)?;
    let secrets = secrets_for(std::iter::once(&unit), &project, "reproduce")?;
    let executor = ProcessExecutor::new(ExecOptions::default()).with_secrets(secrets);
    let result = apollo_runner::reproduce_isolated(&request, &executor, &isolation, &cancel);
    drop(signals);
    let reproduction = result.map_err(runner_error)?;
    match args.format {
        TableFormat::Text => render_text(&reproduction, stdout, stderr),
        TableFormat::Json => render_json(&reproduction, stdout),
    }
    .map_err(output)?;
    Ok(if reproduction.reproduced() {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// The secrets `units` receive, from the sources their definition recorded, read now as a
/// run reads them when it starts (and never written down); `command` names what to do again.
pub(crate) fn secrets_for<'u>(
    units: impl IntoIterator<Item = &'u apollo_core::Unit>,
    project: &Path,
    command: &str,
) -> Result<SecretValues, CliError> {
    SecretValues::read_for(units, project).map_err(|error| CliError::Usage {
        message: format!(
            "{error}
  = help: nothing was run; make the secret available from its source, then {command} again"
        ),
    })
}

/// apollo-exec's private mounts as the runner's isolation, or why there are none.
pub(crate) struct ReadOnlyProject(pub(crate) Result<PrivateMounts, IsolationError>);

impl Isolation for ReadOnlyProject {
    fn read_only(&self, project: &Path, writable: &[&Path]) -> Result<(), String> {
        match &self.0 {
            Ok(mounts) => mounts
                .read_only(project, writable)
                .map_err(|error| error.to_string()),
            Err(error) => Err(error.to_string()),
        }
    }
}

fn short(hash: Option<&str>) -> &str {
    hash.map_or("none", |hash| &hash[..hash.len().min(8)])
}

fn render_text(
    reproduction: &Reproduction,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> std::io::Result<()> {
    for note in &reproduction.inputs {
        if let Some(text) = describe_input(note) {
            writeln!(stderr, "warning: {text}")?;
        }
    }
    if let Some(why) = &reproduction.not_isolated {
        writeln!(
            stderr,
            "warning: not isolated: the unit ran with your project writable ({why}); what it \
             wrote outside its scratch directory is in your files"
        )?;
    }
    if reproduction.outputs_unrecorded {
        writeln!(
            stderr,
            "warning: attempt {} recorded no output manifest (it was recorded before capture \
             existed): its outputs cannot be compared",
            reproduction.attempt
        )?;
    }
    writeln!(
        stdout,
        "reproduction {} of {} {} attempt {} in {}{}",
        reproduction.run_id,
        reproduction.original,
        reproduction.unit,
        reproduction.attempt,
        reproduction.scratch.display(),
        if reproduction.kept { "" } else { " (removed)" }
    )?;
    if let Some(recorded) = reproduction.recorded_status
        && recorded != reproduction.status
    {
        writeln!(
            stdout,
            "outcome differs: recorded {}, now {}",
            recorded.as_str(),
            reproduction.status.as_str()
        )?;
    }
    let differing: Vec<_> = (reproduction.outputs.iter())
        .filter(|output| !output.identical())
        .collect();
    if reproduction.reproduced() {
        let n = reproduction.outputs.len();
        let outputs = if reproduction.outputs_unrecorded {
            "outputs not compared: none recorded".to_owned()
        } else {
            format!("{n} output{} identical", if n == 1 { "" } else { "s" })
        };
        return match reproduction.recorded_status {
            Some(recorded) if recorded != apollo_core::event::AttemptStatus::Succeeded => {
                writeln!(
                    stdout,
                    "reproduced: {} again, as recorded ({outputs})",
                    recorded.as_str().replace('_', " ")
                )
            }
            _ => writeln!(stdout, "reproduced: {outputs}"),
        };
    }
    if !differing.is_empty() {
        let list: Vec<String> = differing
            .iter()
            .map(|output| {
                format!(
                    "{} (recorded {}…, now {}…)",
                    output.path,
                    short(output.recorded.as_deref()),
                    short(output.now.as_deref())
                )
            })
            .collect();
        writeln!(stdout, "outputs differ: {}", list.join(", "))?;
        for output in differing {
            if let Some(diff) = &output.diff {
                write!(stdout, "{diff}")?;
            }
        }
    }
    Ok(())
}

fn render_json(reproduction: &Reproduction, stdout: &mut dyn Write) -> std::io::Result<()> {
    let inputs: Vec<serde_json::Value> = (reproduction.inputs.iter())
        .map(|note| {
            let (source, reason) = match &note.source {
                InputSource::Captured => ("captured", None),
                InputSource::CurrentDisk(reason) => ("current_disk", Some(reason.as_str())),
                InputSource::Missing(reason) => ("missing", Some(reason.as_str())),
                InputSource::NotSandboxed => ("not_sandboxed", None),
                InputSource::BlobGone { on_disk: true } => (
                    "current_disk",
                    Some("its blob is no longer in the blob store"),
                ),
                InputSource::BlobGone { on_disk: false } => {
                    ("missing", Some("its blob is no longer in the blob store"))
                }
                _ => ("unknown", None),
            };
            serde_json::json!({"path": note.path, "source": source, "not_captured": reason})
        })
        .collect();
    let outputs: Vec<serde_json::Value> = (reproduction.outputs.iter())
        .map(|output| {
            serde_json::json!({
                "path": output.path,
                "recorded": output.recorded,
                "now": output.now,
                "identical": output.identical(),
                "diff": output.diff,
            })
        })
        .collect();
    let value = serde_json::json!({
        "schema": "apollo.reproduce/1",
        "reproduced": reproduction.reproduced(),
        "run": reproduction.run_id.as_str(),
        "original": reproduction.original.as_str(),
        "unit": reproduction.unit,
        "attempt": reproduction.attempt,
        "scratch": reproduction.scratch,
        "kept": reproduction.kept,
        "recorded_status": reproduction.recorded_status.map(|status| status.as_str()),
        "status": reproduction.status.as_str(),
        "inputs": inputs,
        "outputs": outputs,
        "outputs_unrecorded": reproduction.outputs_unrecorded,
        "isolated": reproduction.not_isolated.is_none(),
        "not_isolated": reproduction.not_isolated,
    });
    writeln!(stdout, "{value}")
}
