//! `apollo export RUN --format FORMAT`: a recorded run for other tools — OpenTelemetry traces,
//! W3C PROV, OpenLineage events, or a Workflow Run RO-Crate. The renderers are apollo-replay's
//! (pure functions of the run model); this command reads the run, the definition snapshot and
//! the captured files from the state directory and writes the result.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use apollo_replay::{CrateFile, DEFINITION_FILE, RoCrate, Timeline};
use apollo_store::StateDir;

use crate::cmd::StateArgs;
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::state;

/// Formats of `apollo export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExportFormat {
    /// OpenTelemetry traces as OTLP/JSON: the run a trace, units, attempts and phases spans (for an OpenTelemetry collector's otlpjsonfile receiver)
    OtlpJson,
    /// W3C PROV-JSON: attempts as activities, files, commands and outputs as entities, apollo and markers as agents
    ProvJson,
    /// OpenLineage run events, one JSON object a line: START and COMPLETE/FAIL/ABORT per unit attempt, with the declared files as datasets
    Openlineage,
    /// A Workflow Run RO-Crate (Provenance Run Crate profile) in the folder given with --output
    RoCrate,
}

impl ExportFormat {
    fn name(self) -> &'static str {
        match self {
            ExportFormat::OtlpJson => "otlp-json",
            ExportFormat::ProvJson => "prov-json",
            ExportFormat::Openlineage => "openlineage",
            ExportFormat::RoCrate => "ro-crate",
        }
    }
}

/// Arguments of `apollo export`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// The run: an id, a unique prefix or suffix, `latest`, `latest~N` or `last-success`
    #[arg(value_name = "RUN", default_value = "latest")]
    pub(crate) run: String,
    /// The format
    #[arg(long, value_enum)]
    pub(crate) format: ExportFormat,
    /// Where to write it: a file (default: stdout), or for ro-crate a new or empty folder
    #[arg(long, short = 'o', value_name = "PATH")]
    pub(crate) output: Option<PathBuf>,
    /// ro-crate: also copy the run's declared input and output files from the blob store into the crate
    #[arg(long)]
    pub(crate) with_files: bool,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

/// Runs `apollo export`.
pub(crate) fn export(
    args: &ExportArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    if args.with_files && args.format != ExportFormat::RoCrate {
        return Err(CliError::Usage {
            message: format!(
                "--with-files copies files into an RO-Crate; `--format {}` is one document \
                 (use `--format ro-crate --output DIR --with-files`)",
                args.format.name()
            ),
        });
    }
    let crate_dir = match (args.format, &args.output) {
        (ExportFormat::RoCrate, Some(dir)) => Some(dir.as_path()),
        (ExportFormat::RoCrate, None) => {
            return Err(CliError::Usage {
                message: "an RO-Crate is a folder: give it with `--output DIR`".to_owned(),
            });
        }
        _ => None,
    };
    if let Some(dir) = crate_dir {
        check_crate_dir(dir)?;
    }
    let state = args.state.open(state_dir)?;
    let run = state::resolve_run(&state, &args.run)?;
    let mut timeline = state::run_model(&state, &run, stderr)?;
    read_manifests(&state, &run, &mut timeline, stderr)?;
    match (args.format, crate_dir) {
        (ExportFormat::RoCrate, Some(dir)) => {
            write_crate(&state, &timeline, dir, args.with_files, stdout, stderr)?;
        }
        (format, _) => write_document(format, &timeline, args.output.as_deref(), stdout)?,
    }
    Ok(Exit::Success)
}

/// Fills in the lists the journal keeps in manifest files (a unit with 100,000 input files):
/// the renderers read records only. A manifest that cannot be read is a warning, and the
/// attempt is exported without that list.
fn read_manifests(
    state: &StateDir,
    run: &apollo_store::RunId,
    timeline: &mut Timeline,
    stderr: &mut dyn Write,
) -> Result<(), CliError> {
    let run_dir = state.run_dir(run)?;
    let run_dir = run_dir.path();
    for unit in &mut timeline.units {
        for attempt in &mut unit.attempts {
            let what = format!("{} attempt {}", unit.name, attempt.number);
            let mut warn = |list: &str, error: apollo_store::StoreError| {
                let _ = writeln!(
                    stderr,
                    "warning: {what}: its {list} are not exported: {error}"
                );
            };
            if let Some(reference) = attempt.inputs_manifest.clone() {
                match apollo_store::read_input_manifest(run_dir, &reference) {
                    Ok(components) => attempt.inputs = components,
                    Err(error) => warn("input components", error),
                }
            }
            let files = &mut attempt.files;
            for (manifest, list, name) in [
                (&files.inputs_manifest, &mut files.inputs, "input files"),
                (&files.outputs_manifest, &mut files.outputs, "output files"),
            ] {
                if let Some(reference) = manifest {
                    match apollo_store::read_files_manifest(run_dir, reference) {
                        Ok(entries) => *list = entries,
                        Err(error) => warn(name, error),
                    }
                }
            }
        }
    }
    Ok(())
}

/// A single-document format to `path` (replaced atomically) or stdout.
fn write_document(
    format: ExportFormat,
    timeline: &Timeline,
    path: Option<&Path>,
    stdout: &mut dyn Write,
) -> Result<(), CliError> {
    let render = |out: &mut dyn Write| match format {
        ExportFormat::OtlpJson => apollo_replay::write_otlp_json(timeline, out),
        ExportFormat::ProvJson => apollo_replay::write_prov_json(timeline, out),
        _ => apollo_replay::write_openlineage(timeline, out),
    };
    match path {
        None => {
            let mut out = BufWriter::new(stdout);
            render(&mut out).map_err(output)?;
            out.flush().map_err(output)
        }
        Some(path) => write_atomically(path, |out| render(out)),
    }
}

/// Writes `path` through a temporary file beside it, renamed over it once complete: a reader
/// never sees half a document.
pub(crate) fn write_atomically(
    path: &Path,
    render: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), CliError> {
    let name = path.file_name().map_or_else(
        || "export".into(),
        |name| name.to_string_lossy().into_owned(),
    );
    let temporary = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let written = (|| {
        let mut out = BufWriter::new(fs::File::create(&temporary)?);
        render(&mut out)?;
        out.into_inner()
            .map_err(io::IntoInnerError::into_error)?
            .sync_all()?;
        fs::rename(&temporary, path)
    })();
    written.map_err(|error| {
        let _ = fs::remove_file(&temporary);
        cannot_write(path, &error)
    })
}

fn cannot_write(path: &Path, error: &io::Error) -> CliError {
    output(io::Error::new(
        error.kind(),
        format!("`{}`: {error}", path.display()),
    ))
}

/// The crate's folder must be new or empty: an export never mixes with other files.
fn check_crate_dir(dir: &Path) -> Result<(), CliError> {
    match fs::read_dir(dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(CliError::Usage {
            message: format!(
                "`{}` is not empty: an RO-Crate goes into a new or empty folder",
                dir.display()
            ),
        }),
        Ok(false) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotADirectory => Err(CliError::Usage {
            message: format!("`{}` is a file: an RO-Crate is a folder", dir.display()),
        }),
        Err(error) => Err(cannot_write(dir, &error)),
    }
}

fn write_crate(
    state: &StateDir,
    timeline: &Timeline,
    dir: &Path,
    with_files: bool,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<(), CliError> {
    fs::create_dir_all(dir).map_err(|error| cannot_write(dir, &error))?;
    let definition =
        (timeline.facts.definition_hash.as_deref()).and_then(|hash| state.read_blob(hash).ok());
    match &definition {
        Some(bytes) => {
            let path = dir.join(DEFINITION_FILE);
            write_atomically(&path, |out| out.write_all(bytes))?;
        }
        None => {
            let _ = writeln!(
                stderr,
                "warning: the run's definition snapshot is not in the blob store: the crate describes the pipeline without it"
            );
        }
    }
    let has_blob = |hash: &str| state.has_blob(hash);
    let with_file: Option<&dyn Fn(&str) -> bool> = with_files.then_some(&has_blob);
    let exported: RoCrate = apollo_replay::ro_crate(timeline, definition.is_some(), with_file);
    for file in &exported.files {
        copy_blob(state, dir, file)?;
    }
    let metadata = dir.join("ro-crate-metadata.json");
    write_atomically(&metadata, |out| exported.write_metadata(out))?;
    let copied = if with_files {
        format!(", {} files", exported.files.len())
    } else {
        String::new()
    };
    writeln!(
        stdout,
        "wrote the RO-Crate of run {} to {}{copied}",
        run_name(timeline),
        dir.display()
    )
    .map_err(output)?;
    Ok(())
}

fn run_name(timeline: &Timeline) -> &str {
    timeline.run_id.as_deref().unwrap_or("?")
}

/// Copies a blob into the crate, checking that the copy still has the blob's hash.
fn copy_blob(state: &StateDir, dir: &Path, file: &CrateFile) -> Result<(), CliError> {
    let dest = dir.join(&file.path);
    let Some(blob) = state.blob_file(&file.sha256)? else {
        return Err(CliError::Store(apollo_store::StoreError::NotFound {
            what: format!("blob {}", file.sha256),
        }));
    };
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent).map_err(|error| cannot_write(parent, &error))?;
    }
    fs::copy(&blob, &dest).map_err(|error| cannot_write(&dest, &error))?;
    let actual =
        apollo_core::hash::sha256_file(&dest).map_err(|error| cannot_write(&dest, &error))?;
    if actual != file.sha256 {
        return Err(CliError::CorruptRun {
            message: format!(
                "the blob {} in the state directory no longer has its content (it hashes to {actual}): \
                 `apollo verify` checks the store",
                file.sha256
            ),
        });
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = file.mode & 0o777;
    fs::set_permissions(&dest, fs::Permissions::from_mode(mode | 0o400))
        .map_err(|error| cannot_write(&dest, &error))
}
