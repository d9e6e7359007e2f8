//! Finding the state directory and naming runs in it, for every command that reads or writes
//! run state.
//!
//! The state directory is, in order: `--state-dir`, `$APOLLO_STATE_DIR`, `.apollo/` beside the
//! pipeline config (the one given, else the default one found in the current folder), else
//! `.apollo/` in the current folder.
//!
//! A RUN argument is a full run id, a unique prefix of one, `latest` (the newest run), or
//! `latest~N` (the N-th run before the newest).

use std::path::{Path, PathBuf};

use apollo_core::event::Event;
use apollo_store::{JournalReader, ReadOptions, RunId, StateDir, StoreError, Warning};

use crate::error::CliError;

/// The state directory to use, per the module docs. `config` is the pipeline config when
/// the command has one.
pub(crate) fn state_dir_path(explicit: Option<&Path>, config: Option<&Path>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    if let Some(path) = std::env::var_os("APOLLO_STATE_DIR").filter(|value| !value.is_empty()) {
        return PathBuf::from(path);
    }
    let config = config.map(Path::to_path_buf).or_else(|| {
        let cwd = std::env::current_dir().ok()?;
        apollo_core::config::find_default_config(&cwd)
    });
    match config {
        Some(config) => {
            let folder = config
                .parent()
                .filter(|parent| !parent.as_os_str().is_empty());
            folder.unwrap_or(Path::new(".")).join(".apollo")
        }
        None => PathBuf::from(".apollo"),
    }
}

/// Opens an existing state directory for reading commands, with a helpful error when there
/// is none.
pub(crate) fn open_existing(path: &Path) -> Result<StateDir, CliError> {
    if !path.join("runs").is_dir() {
        return Err(CliError::NoState {
            path: path.to_path_buf(),
        });
    }
    Ok(StateDir::open_existing(path)?)
}

/// Resolves a RUN argument (see the module docs).
pub(crate) fn resolve_run(state: &StateDir, spec: &str) -> Result<RunId, CliError> {
    let ids = state.run_ids()?;
    let not_found = |hint: String| CliError::UnknownRun {
        spec: spec.to_owned(),
        state_dir: state.path().to_path_buf(),
        hint,
    };
    if ids.is_empty() {
        return Err(not_found(
            "there are no runs yet: start one with `apollo run`".to_owned(),
        ));
    }
    if let Some(back) = spec.strip_prefix("latest") {
        let steps = match back {
            "" => 0,
            _ => back
                .strip_prefix('~')
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| not_found("write `latest` or `latest~N`, N a number".to_owned()))?,
        };
        // A reproduction (`apollo reproduce`) is never "latest": name it by its id.
        let runs: Vec<&RunId> = (ids.iter().rev())
            .filter(|id| !is_reproduction(state, id))
            .collect();
        return runs
            .get(steps)
            .map(|id| (*id).clone())
            .ok_or_else(|| not_found(format!("there are only {} runs", runs.len())));
    }
    let matches: Vec<&RunId> = ids
        .iter()
        .filter(|id| id.as_str().starts_with(spec))
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(not_found("`apollo runs` lists the runs".to_owned())),
        several => Err(not_found(format!(
            "it matches {} runs ({}, ...): give more of the id",
            several.len(),
            several
                .iter()
                .take(3)
                .map(|id| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Reads every record of a run (the run's journal must fit the purpose: used for folding
/// state, whose size does not grow with the journal).
pub(crate) fn read_records(
    state: &StateDir,
    run: &RunId,
    options: ReadOptions,
) -> Result<(JournalReader, PathBuf), CliError> {
    let run_dir = state.run_dir(run)?;
    let path = run_dir.path().to_path_buf();
    let reader = JournalReader::open(&path, options)?;
    Ok((reader, path))
}

/// The `run_started` event of a run.
pub(crate) fn run_started(
    state: &StateDir,
    run: &RunId,
) -> Result<apollo_core::event::RunStarted, CliError> {
    let (mut reader, path) = read_records(state, run, ReadOptions::default())?;
    if let Some(record) = reader.next()
        && let Event::RunStarted(started) = record?.event
    {
        return Ok(started);
    }
    Err(CliError::Store(StoreError::Corruption {
        path,
        offset: 0,
        seq: Some(1),
        what: "the run's first record is not `run_started`".to_owned(),
    }))
}

/// Print store warnings (torn tails, salvaged records) to stderr.
pub(crate) fn print_warnings(warnings: &[Warning], stderr: &mut dyn std::io::Write) {
    for warning in warnings {
        let _ = writeln!(stderr, "warning: {warning}");
    }
}

/// Whether run `id` was made by `apollo reproduce` (its `run_started` identity says so).
fn is_reproduction(state: &StateDir, id: &RunId) -> bool {
    let Ok(run_dir) = state.run_dir(id) else {
        return false;
    };
    let Ok(mut records) = JournalReader::open(run_dir.path(), ReadOptions::default()) else {
        return false;
    };
    matches!(
        records.next(),
        Some(Ok(record)) if matches!(&record.event, Event::RunStarted(started)
            if started.identity.as_deref().is_some_and(|identity| identity.starts_with("reproduce:")))
    )
}
