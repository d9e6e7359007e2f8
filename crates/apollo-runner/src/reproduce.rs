//! [`reproduce`]: re-run one recorded attempt with the inputs it had then (DESIGN §12).
//!
//! The attempt's captured input files (upstream outputs it declared as inputs included) are
//! restored from the blob store into a scratch directory laid out like the project (the config
//! folder), and the unit runs there exactly as the **run's definition snapshot** recorded it —
//! its commands, env and workdir, not today's config — through the engine, so under the same
//! supervision (timeout, kill grace, process group) as in a run. Its outputs are then compared
//! file by file with the attempt's recorded manifest.
//!
//! Nothing of the original run or project is written: inputs are restored (or, when they were
//! not captured, copied) into the scratch directory, and a unit whose workdir or declared
//! outputs lie outside the project is refused (it would write outside the scratch directory).
//! The reproduction is a run of its own in the state directory (identity `reproduce:` and the
//! original's, with a `run_reproduces` record naming the original), so `replay` and `show`
//! work on it and `apollo run` never resumes it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

use apollo_core::capture::FileEntry;
use apollo_core::event::{AttemptStatus, Event, FileSide, RunReproduces, UnitFiles};
use apollo_core::{CancelToken, Executor};
use apollo_store::{BlobStore, Durability, JournalReader, ReadOptions, RunId, read_files_manifest};

mod compare;
mod isolation;
mod prepare;
mod run;
mod scratch;

pub(crate) use compare::compare_outputs;
use compare::compared;
pub use isolation::{Isolation, NoIsolation};
use prepare::refused;
pub use prepare::reproduced_unit;
pub(crate) use prepare::{Prepared, prepare};
pub(crate) use run::ScratchRun;
pub(crate) use scratch::alone_in;
use scratch::{recorded_inputs, scratch_dir};

use crate::error::RunnerError;

/// The largest recorded and reproduced output shown as a unified diff when they differ.
pub const MAX_DIFF_BYTES: u64 = 64 * 1024;

/// What to reproduce: build it with [`ReproduceRequest::new`] and the setters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReproduceRequest {
    /// The state directory.
    pub state_dir: PathBuf,
    /// The original run.
    pub run: RunId,
    /// The unit.
    pub unit: String,
    /// The attempt (`None`: the unit's last recorded attempt).
    pub attempt: Option<u32>,
    /// Run in this directory (created; must be empty or absent) and keep it. `None`: a new
    /// temporary directory, removed afterwards unless [`keep`](Self::keep).
    pub into: Option<PathBuf>,
    /// Keep the temporary scratch directory.
    pub keep: bool,
    /// How the reproduction's journal is written.
    pub durability: Durability,
    /// Run an `idempotent: false` unit all the same (its charge, mail or deploy happens
    /// again: the scratch directory holds its files, not its effects on the world).
    pub allow_side_effects: bool,
}

impl ReproduceRequest {
    /// The last attempt of `unit` in `run`, in a temporary directory removed afterwards.
    pub fn new(state_dir: impl Into<PathBuf>, run: RunId, unit: impl Into<String>) -> Self {
        Self {
            state_dir: state_dir.into(),
            run,
            unit: unit.into(),
            attempt: None,
            into: None,
            keep: false,
            durability: Durability::Fsync,
            allow_side_effects: false,
        }
    }

    /// Attempt `attempt` instead of the last one.
    pub fn attempt(mut self, attempt: Option<u32>) -> Self {
        self.attempt = attempt;
        self
    }

    /// Run in `into` (kept).
    pub fn into_dir(mut self, into: Option<PathBuf>) -> Self {
        self.into = into;
        self
    }

    /// Keep the temporary scratch directory.
    pub fn keep(mut self, keep: bool) -> Self {
        self.keep = keep;
        self
    }

    /// With this durability for the reproduction's journal.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Whether an `idempotent: false` unit may run again (see [`allow_side_effects`](struct@Self)).
    pub fn allow_side_effects(mut self, allow: bool) -> Self {
        self.allow_side_effects = allow;
        self
    }
}

/// How one input file was brought into the scratch directory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputSource {
    /// Restored from the blob store: the bytes the attempt had.
    Captured,
    /// Not captured (the reason); copied from the project as it is now.
    CurrentDisk(String),
    /// Not captured (the reason), and no longer on disk: absent in the scratch directory.
    Missing(String),
    /// An absolute path outside the project: not sandboxed, the unit reads it where it is.
    NotSandboxed,
    /// Captured, but its blob is no longer in the blob store (evicted under
    /// `blob_store_max`, or deleted by hand): copied from the project as it is now
    /// (`on_disk`), else absent in the scratch directory.
    BlobGone {
        /// Whether the file was on disk now, and copied from there.
        on_disk: bool,
    },
}

/// One recorded input file and where its bytes came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputNote {
    /// Its path, relative to the project.
    pub path: String,
    /// Where its bytes came from.
    pub source: InputSource,
}

/// One output compared with the recorded manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputComparison {
    /// Its path, relative to the project.
    pub path: String,
    /// Its recorded SHA-256 (`None`: not in the recorded manifest — a new file).
    pub recorded: Option<String>,
    /// Its SHA-256 now (`None`: not produced).
    pub now: Option<String>,
    /// A unified diff, for small text files that differ and whose recorded bytes were
    /// captured.
    pub diff: Option<String>,
}

impl OutputComparison {
    /// Whether the reproduced file is the recorded one.
    pub fn identical(&self) -> bool {
        self.recorded.is_some() && self.recorded == self.now
    }
}

/// What [`reproduce`] found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Reproduction {
    /// The original run.
    pub original: RunId,
    /// The unit.
    pub unit: String,
    /// The attempt reproduced.
    pub attempt: u32,
    /// The reproduction's own run.
    pub run_id: RunId,
    /// The scratch directory (removed by now unless kept).
    pub scratch: PathBuf,
    /// Whether the scratch directory was kept.
    pub kept: bool,
    /// How the recorded attempt ended (`None`: it never ended, apollo died).
    pub recorded_status: Option<AttemptStatus>,
    /// How the reproduction ended.
    pub status: AttemptStatus,
    /// The recorded input files and where their bytes came from.
    pub inputs: Vec<InputNote>,
    /// Every recorded or reproduced output, compared.
    pub outputs: Vec<OutputComparison>,
    /// The attempt succeeded and its unit declares outputs, but it recorded no output manifest
    /// (it was recorded before capture existed, journal format before 1.3): its outputs
    /// cannot be compared, and [`outputs`](Self::outputs) is empty.
    pub outputs_unrecorded: bool,
    /// Why the unit ran with the real project writable (`None`: it saw it read-only, see
    /// [`Isolation`]).
    pub not_isolated: Option<String>,
}

impl Reproduction {
    /// Whether the attempt was reproduced: the same status, and every output identical (what
    /// its `reproduction_compared` record says).
    pub fn reproduced(&self) -> bool {
        compared(self.recorded_status.as_ref(), self.status, &self.outputs).reproduced
    }
}

/// What the original run's journal says about the attempt.
#[derive(Default)]
pub(crate) struct Recorded {
    pub(crate) identity: Option<String>,
    pub(crate) pipeline: String,
    pub(crate) config_path: String,
    /// The original run's params (their values are in its definition snapshot already).
    pub(crate) params: BTreeMap<String, serde_json::Value>,
    /// The definition snapshot in effect when each attempt started.
    pub(crate) definition_of_attempt: BTreeMap<u32, String>,
    pub(crate) status_of_attempt: BTreeMap<u32, AttemptStatus>,
    pub(crate) inputs: BTreeMap<u32, Vec<FileEntry>>,
    pub(crate) outputs: BTreeMap<u32, Vec<FileEntry>>,
}

pub(crate) fn read_recorded(
    run_dir: &Path,
    unit: &str,
) -> Result<Recorded, apollo_store::StoreError> {
    let mut recorded = Recorded::default();
    let mut definition = String::new();
    for record in JournalReader::open(run_dir, ReadOptions::default())? {
        match record?.event {
            Event::RunStarted(started) => {
                recorded.identity = started.identity;
                recorded.pipeline = started.pipeline;
                recorded.config_path = started.config_path;
                recorded.params = started.params;
                definition = started.definition_hash;
            }
            Event::RunResumed(resumed) => definition = resumed.definition_hash,
            Event::UnitStarted(started) if started.unit == unit => {
                (recorded.definition_of_attempt).insert(started.attempt, definition.clone());
            }
            Event::UnitFinished(finished) if finished.unit == unit => {
                (recorded.status_of_attempt).insert(finished.attempt, finished.status);
            }
            Event::UnitFiles(UnitFiles {
                unit: files_unit,
                attempt,
                side,
                files,
                manifest,
            }) if files_unit == unit => {
                let files = match manifest {
                    Some(reference) => read_files_manifest(run_dir, &reference)?,
                    None => files,
                };
                match side {
                    FileSide::Inputs => recorded.inputs.insert(attempt, files),
                    FileSide::Outputs => recorded.outputs.insert(attempt, files),
                };
            }
            _ => {}
        }
    }
    Ok(recorded)
}

/// Re-runs the recorded attempt `request` names through `executor` (see the module docs)
/// and compares its outputs with the recorded manifest. `cancel` stops it like a run.
///
/// Takes the state directory's lock while the reproduction's run is written. The unit runs
/// with the project writable: [`reproduce_isolated`] makes it read-only.
pub fn reproduce(
    request: &ReproduceRequest,
    executor: &dyn Executor,
    cancel: &CancelToken,
) -> Result<Reproduction, RunnerError> {
    reproduce_isolated(request, executor, &NoIsolation, cancel)
}

/// [`reproduce`], with the project made read-only through `isolation` just before the unit
/// runs (the scratch directory and the state directory stay writable).
pub fn reproduce_isolated(
    request: &ReproduceRequest,
    executor: &dyn Executor,
    isolation: &dyn Isolation,
    cancel: &CancelToken,
) -> Result<Reproduction, RunnerError> {
    let refuse = |problem: String| refused(request, problem);
    let Prepared {
        state,
        recorded,
        attempt,
        definition,
        mut unit,
        project,
        workdir,
    } = prepare(request)?;
    let (scratch, temporary) = scratch_dir(request, attempt)?;
    let io = |what: &str, path: &Path, error: std::io::Error| {
        refuse(format!("cannot {what} {}: {error}", path.display()))
    };
    fs::create_dir_all(&scratch).map_err(|error| io("create", &scratch, error))?;
    let scratch = scratch
        .canonicalize()
        .map_err(|error| io("resolve", &scratch, error))?;

    let result = (|| -> Result<_, RunnerError> {
        let blobs = state.existing_blob_store();
        let recorded_inputs = recorded_inputs(&recorded, attempt, &unit, &project);
        let inputs = materialise_inputs(&blobs, &recorded_inputs, &project, &scratch)
            .map_err(|(path, error)| io("write", &path, error))?;
        let scratch_workdir = scratch.join(&workdir);
        fs::create_dir_all(&scratch_workdir)
            .map_err(|error| io("create", &scratch_workdir, error))?;
        // The folders the recorded outputs were in existed when the unit ran.
        for output in recorded.outputs.get(&attempt).into_iter().flatten() {
            if let Some(parent) = Path::new(&output.path).parent() {
                let folder = scratch.join(parent);
                fs::create_dir_all(&folder).map_err(|error| io("create", &folder, error))?;
            }
        }

        // The unit alone, exactly as recorded, in the scratch directory: its upstream
        // outputs are among its restored inputs.
        unit.workdir = scratch_workdir;
        unit.deps.clear();
        let pipeline = alone_in(&definition, vec![unit.clone()], &scratch);
        let state_path = state.path().canonicalize();
        let state_path = state_path.as_deref().unwrap_or(state.path());
        let project = project.canonicalize().unwrap_or_else(|_| project.clone());
        let not_isolated = isolation.read_only(&project, &[&scratch, state_path]).err();
        let scratch_run = ScratchRun {
            kind: apollo_core::event::RunKind::Reproduction,
            recorded: &recorded,
            reproduces: RunReproduces {
                run: request.run.to_string(),
                unit: request.unit.clone(),
                attempt,
                scratch: scratch.display().to_string(),
            },
            durability: request.durability,
        };
        let mut lock = state.lock(false)?;
        let (run_id, statuses, mut journal) =
            scratch_run.run(&state, &mut lock, &pipeline, executor, cancel)?;
        let status = statuses.first().copied();
        let status = (run_id, status.unwrap_or(AttemptStatus::Interrupted));
        let outputs = compare_outputs(
            &state,
            &unit,
            recorded
                .outputs
                .get(&attempt)
                .map_or(&[][..], Vec::as_slice),
            &scratch,
        );
        // The verdict in the reproduction's own journal, after its `run_finished`: what
        // `apollo runs` and `show` say of it (issue 35: one whose outputs differed was listed
        // as succeeded).
        let compared = compared(recorded.status_of_attempt.get(&attempt), status.1, &outputs);
        journal.append_batch(&[Event::ReproductionCompared(compared)])?;
        drop(journal);
        Ok((status, inputs, outputs, not_isolated))
    })();
    let kept = !temporary || request.keep;
    if !kept {
        let _ = fs::remove_dir_all(&scratch);
    }
    let ((run_id, status), inputs, outputs, not_isolated) = result?;
    let recorded_status = recorded.status_of_attempt.get(&attempt).copied();
    let outputs_unrecorded = recorded_status == Some(AttemptStatus::Succeeded)
        && !unit.outputs.is_empty()
        && !recorded.outputs.contains_key(&attempt);
    Ok(Reproduction {
        original: request.run.clone(),
        unit: request.unit.clone(),
        attempt,
        run_id,
        scratch,
        kept,
        recorded_status,
        status,
        inputs,
        outputs,
        outputs_unrecorded,
        not_isolated,
    })
}

/// `path` relative to `project`, when it is inside it (lexically: no `..` climbing out).
pub(crate) fn inside(project: &Path, path: &Path) -> Option<PathBuf> {
    let relative = path.strip_prefix(project).ok()?;
    let mut depth = 0usize;
    for component in relative.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => depth = depth.checked_sub(1)?,
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(relative.to_path_buf())
}

/// Brings each recorded input into the scratch directory: from its blob when captured (and
/// intact), else copied from the project as it is now, else noted missing.
fn materialise_inputs(
    blobs: &BlobStore,
    recorded: &[FileEntry],
    project: &Path,
    scratch: &Path,
) -> Result<Vec<InputNote>, (PathBuf, std::io::Error)> {
    let mut notes = Vec::with_capacity(recorded.len());
    for file in recorded {
        let relative = Path::new(&file.path);
        let Some(relative) = inside(project, &project.join(relative)) else {
            notes.push(InputNote {
                path: file.path.clone(),
                source: InputSource::NotSandboxed,
            });
            continue;
        };
        let dest = scratch.join(&relative);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).map_err(|error| (parent.to_path_buf(), error))?;
        }
        let mut gone = false;
        let reason = match &file.not_captured {
            None => match blobs.restore(&file.sha256, &dest, file.mode) {
                Ok(_) => {
                    notes.push(InputNote {
                        path: file.path.clone(),
                        source: InputSource::Captured,
                    });
                    continue;
                }
                Err(error) => {
                    gone = error.kind() == apollo_store::ErrorKind::NotFound;
                    format!("its blob cannot be restored: {error}")
                }
            },
            Some(reason) => reason.clone(),
        };
        let source = project.join(&relative);
        let on_disk = match fs::copy(&source, &dest) {
            Ok(_) => true,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
            Err(error) => return Err((source, error)),
        };
        let source = match (gone, on_disk) {
            (true, on_disk) => InputSource::BlobGone { on_disk },
            (false, true) => InputSource::CurrentDisk(reason),
            (false, false) => InputSource::Missing(reason),
        };
        notes.push(InputNote {
            path: file.path.clone(),
            source,
        });
    }
    Ok(notes)
}

/// The note for an input that was not restored from the blob store, for people:
/// `"not captured (3.1 GiB > 64 MiB): taken from the current disk"`.
pub fn describe_input(note: &InputNote) -> Option<String> {
    match &note.source {
        InputSource::Captured => None,
        InputSource::CurrentDisk(reason) => Some(format!(
            "input {} was not captured ({reason}): taken from the current disk",
            note.path
        )),
        InputSource::Missing(reason) => Some(format!(
            "input {} was not captured ({reason}) and is no longer on disk: missing",
            note.path
        )),
        InputSource::NotSandboxed => Some(format!(
            "input {} is outside the project: not sandboxed, read where it is",
            note.path
        )),
        InputSource::BlobGone { on_disk } => Some(format!(
            "input {} was captured, but its blob is no longer in the blob store (evicted under \
             blob_store_max, or deleted): {}",
            note.path,
            if *on_disk {
                "taken from the current disk"
            } else {
                "it is no longer on disk either: missing"
            }
        )),
    }
}
