//! The files around a run's journal: an attempt's captured output, the definition snapshot
//! and the file manifests a unit's attempts recorded, and the journal's size (how a follower
//! sees a live run grow).

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom};

use apollo_core::Event;
use apollo_core::capture::FileEntry;
use apollo_core::event::FileSide;
use apollo_store::{AttemptDir, ReadOptions, RunId, StateDir, StoreError};

/// The folder of an attempt's captured output, checked as the executor checks it before it
/// writes there ([`StateDir::attempt_dir`]): the unit's name, read from the journal, must be
/// a plain folder name, and `units/`, `units/<unit>/` and the attempt's folder missing or
/// real folders. An error for a damaged or altered journal (a name such as `../../x` would
/// read files named like logs outside the run folder) or a planted link.
pub fn attempt_dir(
    state: &StateDir,
    run: &RunId,
    unit: &str,
    attempt: u32,
) -> Result<AttemptDir, StoreError> {
    state.attempt_dir(run, unit, attempt)
}

/// Which captured stream of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogStream {
    /// What it wrote to standard output.
    Stdout,
    /// What it wrote to standard error.
    Stderr,
}

impl LogStream {
    /// `stdout` or `stderr`: the file's name in the attempt's folder.
    pub fn as_str(self) -> &'static str {
        match self {
            LogStream::Stdout => "stdout",
            LogStream::Stderr => "stderr",
        }
    }
}

/// The end of an attempt's captured stream.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tail {
    /// Its last bytes (at most what was asked for; may start inside a UTF-8 character).
    pub bytes: Vec<u8>,
    /// The file's whole length when read.
    pub len: u64,
}

/// The last `max_bytes` of an attempt's `stream`; `None` when the attempt wrote nothing to it
/// (no file). Only a regular file is read: a FIFO or a link to `/dev/zero` planted there
/// cannot block or stream forever.
pub fn tail(
    state: &StateDir,
    run: &RunId,
    (unit, attempt): (&str, u32),
    stream: LogStream,
    max_bytes: u64,
) -> Result<Option<Tail>, StoreError> {
    let path = attempt_dir(state, run, unit, attempt)?.stream(stream.as_str());
    let Some(mut file) = apollo_store::open_regular_file(&path)? else {
        return Ok(None);
    };
    let io = |error| StoreError::Io {
        action: "read captured output",
        path: path.clone(),
        error,
    };
    let len = file.metadata().map_err(io)?.len();
    let start = len.saturating_sub(max_bytes);
    file.seek(SeekFrom::Start(start)).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(len - start).read_to_end(&mut bytes).map_err(io)?;
    Ok(Some(Tail { bytes, len }))
}

/// The total size of a run's journal segments: it grows with every record, so a follower of a
/// live run compares it instead of reading the journal again.
pub fn journal_len(state: &StateDir, run: &RunId) -> Result<u64, StoreError> {
    let dir = state.run_dir(run)?.journal_dir();
    let entries = std::fs::read_dir(&dir).map_err(|error| StoreError::Io {
        action: "list journal segments",
        path: dir.clone(),
        error,
    })?;
    Ok(entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.metadata().ok())
        .filter(std::fs::Metadata::is_file)
        .map(|metadata| metadata.len())
        .sum())
}

/// A value that changes when the runs list changes — a run starts (a folder in `runs/`), its
/// journal grows while an apollo writes it (a unit starts or ends), or that apollo stops (the
/// lock's holder changes) — and otherwise stays: a `stat` of `runs/`, the lock probe (which
/// takes no lock on a handle that never locks) and the written run's journal length. A
/// long-lived reader polls it to list the runs again only when something moved.
pub fn runs_fingerprint(state: &StateDir) -> u64 {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut hasher = std::hash::DefaultHasher::new();
    if let Ok(meta) = std::fs::metadata(state.runs_dir()) {
        (
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime_nsec(),
            meta.nlink(),
        )
            .hash(&mut hasher);
    }
    let holder = state.lock_holder().ok().flatten();
    if let Some(holder) = &holder {
        (holder.pid, &holder.run, holder.unverified).hash(&mut hasher);
        let written = (holder.run.as_deref()).and_then(|run| run.parse::<RunId>().ok());
        if let Some(run) = written {
            journal_len(state, &run).ok().hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// What the journal records about a unit beyond the run model: the definition snapshot the
/// run last used, and its attempts' file manifests.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RecordedFiles {
    /// The definition snapshot the run last started or resumed with, when its blob is kept.
    pub definition: Option<apollo_core::Pipeline>,
    /// Each attempt's input and output files, by (attempt, side).
    pub files: BTreeMap<(u32, FileSide), Vec<FileEntry>>,
}

/// [`RecordedFiles`] of `unit` in `run`.
pub fn recorded_files(
    state: &StateDir,
    run: &RunId,
    unit: &str,
) -> Result<RecordedFiles, StoreError> {
    let (reader, run_dir) = super::read_records(state, run, ReadOptions::default())?;
    let mut definition_hash = None;
    let mut files = BTreeMap::new();
    for record in reader {
        match record?.event {
            Event::RunStarted(started) => definition_hash = Some(started.definition_hash),
            Event::RunResumed(resumed) => definition_hash = Some(resumed.definition_hash),
            Event::UnitFiles(listed) if listed.unit == unit => {
                let entries = match &listed.manifest {
                    Some(reference) => {
                        apollo_store::read_files_manifest(&run_dir, reference).unwrap_or_default()
                    }
                    None => listed.files,
                };
                files.insert((listed.attempt, listed.side), entries);
            }
            _ => {}
        }
    }
    let definition = definition_hash
        .and_then(|hash| state.read_blob(&hash).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    Ok(RecordedFiles { definition, files })
}

/// Each unit's commands, by (unit, phase), from the definition snapshot `run` started with;
/// `None` when it cannot be read.
pub(super) fn definition_commands(
    state: &StateDir,
    run: &RunId,
) -> Option<HashMap<(String, String), apollo_core::Command>> {
    let started = super::run_started(state, run).ok()?;
    let definition = state.read_blob(&started.definition_hash).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&definition).ok()?;
    let mut commands = HashMap::new();
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
