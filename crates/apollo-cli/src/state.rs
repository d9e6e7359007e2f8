//! Finding the state directory and naming runs in it, for every command that reads or writes
//! run state.
//!
//! The state directory is, in order: `--state-dir`, `$APOLLO_STATE_DIR`, `.apollo/` beside the
//! pipeline config (the one given, else the default one found in the current folder), else
//! `.apollo/` in the current folder.
//!
//! A RUN argument is a full run id, a unique prefix or suffix of one, `latest` (the newest
//! run), `latest~N` (the N-th run before the newest) or `last-success` (the newest run that
//! finished succeeded); reproductions are never `latest` nor `last-success`.

use std::path::{Path, PathBuf};

use apollo_store::{JournalReader, ReadOptions, RunId, StateDir, Warning};

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
    apollo_runner::read::open(path)?.ok_or_else(|| CliError::NoState {
        checked: vec![absolute(path)],
        nearby: Vec::new(),
    })
}

/// The state directory a command that reads (or prunes) existing state works on:
/// `--state-dir`, `$APOLLO_STATE_DIR`, `.apollo/` beside `-c CONFIG`, `.apollo/` beside the
/// default config of the current folder, else the nearest `.apollo/` in the current folder or
/// a parent, the way git and cargo look for theirs. The upward search stops at a filesystem
/// boundary; in a folder owned by another user (whose `.apollo` could be planted) it takes
/// only a state directory shared with a group of the user's, and refuses any other. When
/// nothing is found the error names every absolute path checked and the `.apollo` folders of
/// immediate subfolders.
pub(crate) fn find_existing(
    explicit: Option<&Path>,
    config: Option<&Path>,
) -> Result<StateDir, CliError> {
    if explicit.is_some()
        || config.is_some()
        || std::env::var_os("APOLLO_STATE_DIR").is_some_and(|value| !value.is_empty())
    {
        return open_existing(&state_dir_path(explicit, config));
    }
    let cwd = std::env::current_dir().map_err(CliError::CurrentDir)?;
    let mut checked = Vec::new();
    if let Some(config) = apollo_core::config::find_default_config(&cwd) {
        let beside = config.parent().unwrap_or(&cwd).join(".apollo");
        if beside.join("runs").is_dir() {
            return Ok(StateDir::open_existing(&beside)?);
        }
        checked.push(beside);
    }
    for (folder, mine) in search_folders(&cwd) {
        let candidate = folder.join(".apollo");
        if checked.contains(&candidate) {
            continue;
        }
        if mine || owned_by_me(&candidate) {
            if candidate.join("runs").is_dir() {
                return Ok(StateDir::open_existing(&candidate)?);
            }
        } else if let Some(found) = foreign_state_dir(&candidate)? {
            return Ok(found);
        }
        checked.push(candidate);
    }
    Err(CliError::NoState {
        checked,
        nearby: state_dirs_below(&cwd),
    })
}

/// `cwd` and its parents, up to (not across) a filesystem boundary, each with whether it is
/// the user's own (root's is every folder).
fn search_folders(cwd: &Path) -> Vec<(PathBuf, bool)> {
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::geteuid().as_raw();
    let Ok(start) = std::fs::metadata(cwd) else {
        return vec![(cwd.to_path_buf(), true)];
    };
    let mut folders = Vec::new();
    for folder in cwd.ancestors() {
        let Ok(metadata) = std::fs::metadata(folder) else {
            break;
        };
        if metadata.dev() != start.dev() {
            break;
        }
        folders.push((folder.to_path_buf(), uid == 0 || metadata.uid() == uid));
    }
    folders
}

/// Whether `path` (not followed) is a folder of this user.
fn owned_by_me(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|metadata| {
        metadata.is_dir() && metadata.uid() == rustix::process::geteuid().as_raw()
    })
}

/// The `.apollo` at `candidate` in a folder of another user (DESIGN §18 "Permissions"): used
/// when it is a state directory shared with a group this user is in (2770, its `sharing` file
/// says `group`); `None` when there is no folder there; any other is refused with an error
/// naming it, whose it is, and what to do (a folder of another user could have been planted,
/// and a private state directory is its owner's alone).
fn foreign_state_dir(candidate: &Path) -> Result<Option<StateDir>, CliError> {
    use apollo_core::sharing::Sharing;
    use std::os::unix::fs::MetadataExt;
    let Ok(metadata) = std::fs::symlink_metadata(candidate) else {
        return Ok(None);
    };
    if !metadata.is_dir() {
        return Ok(None);
    }
    let in_group = rustix::process::getegid().as_raw() == metadata.gid()
        || rustix::process::getgroups()
            .is_ok_and(|groups| groups.iter().any(|gid| gid.as_raw() == metadata.gid()));
    if in_group && Sharing::of_folder_mode(metadata.mode()) == Sharing::Group {
        let state = StateDir::open_existing(candidate)?;
        if state.sharing()? == Sharing::Group {
            return Ok(Some(state));
        }
    }
    let why = if Sharing::of_folder_mode(metadata.mode()) == Sharing::Group {
        format!(
            "it is shared with group {}, which you are not in",
            metadata.gid()
        )
    } else {
        "it is private".to_owned()
    };
    Err(CliError::Usage {
        message: format!(
            "the nearest state directory, `{}`, belongs to another user (uid {}) and {why}: apollo does not use another user's state directory\n  = help: to share one with a team, its owner makes it with `apollo run --state-dir-mode group` (see \"Sharing a state directory with a team\" in the guide); to keep your own, pass `--state-dir DIR` or run from a folder of yours",
            candidate.display(),
            metadata.uid(),
        ),
    })
}

/// `.apollo` folders (with runs) in immediate subfolders of `cwd`, sorted, at most ten.
fn state_dirs_below(cwd: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(cwd) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(".apollo"))
        .filter(|candidate| candidate.join("runs").is_dir())
        .map(|candidate| {
            candidate
                .strip_prefix(cwd)
                .map_or(candidate.clone(), Path::to_path_buf)
        })
        .collect();
    found.sort();
    found.truncate(10);
    found
}

/// Checks, before a run opens it, that the state directory at `path` can be created (its
/// nearest existing ancestor is a writable folder) or written (it, its `runs/` and its `lock`
/// are writable). A state directory apollo cannot write is a usage problem (exit 2, with the
/// advice to fix permissions or pick another `--state-dir`), not a journal I/O failure (6).
pub(crate) fn ensure_writable(path: &Path) -> Result<(), CliError> {
    let not_writable = |checked: &Path, problem: String| CliError::StateNotWritable {
        path: absolute(path),
        checked: absolute(checked),
        problem,
    };
    let mut existing = path;
    loop {
        match std::fs::metadata(existing) {
            Ok(metadata) if metadata.is_dir() => break,
            Ok(_) => return Err(not_writable(existing, "it is not a folder".to_owned())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                existing = match existing.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => parent,
                    _ => Path::new("."),
                };
            }
            Err(error) => return Err(not_writable(existing, error.to_string())),
        }
    }
    let mut to_check = vec![existing.to_path_buf()];
    if existing == path {
        to_check.extend(
            [path.join("runs"), path.join("lock")]
                .into_iter()
                .filter(|inner| inner.exists()),
        );
    }
    for checked in &to_check {
        let mode = if checked.is_dir() {
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK
        } else {
            rustix::fs::Access::WRITE_OK
        };
        if let Err(errno) = rustix::fs::access(checked, mode) {
            return Err(not_writable(
                checked,
                std::io::Error::from(errno).to_string(),
            ));
        }
    }
    Ok(())
}

/// `path` made absolute against the current folder (for messages).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Resolves a RUN argument (see the module docs) through apollo-runner's [`RunSelector`], the
/// one rule every reader of runs uses.
///
/// [`RunSelector`]: apollo_runner::RunSelector
pub(crate) fn resolve_run(state: &StateDir, spec: &str) -> Result<RunId, CliError> {
    use apollo_runner::{RunSelector, SelectError};
    let not_found = |hint: String| CliError::UnknownRun {
        spec: spec.to_owned(),
        state_dir: state.path().to_path_buf(),
        hint,
    };
    let selector: RunSelector = spec.parse().map_err(|_| {
        not_found("write a run id (or a unique prefix or suffix of one), `latest`, `latest~N` or `last-success`".to_owned())
    })?;
    selector.resolve(state).map_err(|error| match error {
        SelectError::NoRuns => {
            not_found("there are no runs yet: start one with `apollo run`".to_owned())
        }
        SelectError::TooFewRuns { have } => not_found(format!("there are only {have} runs")),
        SelectError::NoSuccess => {
            not_found("no run has finished succeeded yet (`apollo runs` lists the runs)".to_owned())
        }
        SelectError::NotFound { .. } => {
            let ids = state.run_ids().unwrap_or_default();
            not_found(match closest(spec, ids.iter().map(RunId::as_str)) {
                Some(close) => format!("did you mean `{close}`? (`apollo runs` lists the runs)"),
                None => "`apollo runs` lists the runs".to_owned(),
            })
        }
        SelectError::Ambiguous { matches, .. } => not_found(format!(
            "it matches {} runs ({}, ...): give more of the id",
            matches.len(),
            matches
                .iter()
                .take(3)
                .map(RunId::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        SelectError::Store(error) => CliError::Store(error),
        _ => not_found("`apollo runs` lists the runs".to_owned()),
    })
}

/// Reads every record of a run (the run's journal must fit the purpose: used for folding
/// state, whose size does not grow with the journal).
pub(crate) fn read_records(
    state: &StateDir,
    run: &RunId,
    options: ReadOptions,
) -> Result<(JournalReader, PathBuf), CliError> {
    Ok(apollo_runner::read::read_records(state, run, options)?)
}

/// The run model of `run` ([`apollo_runner::read::run_model`]): its journal folded once, with
/// [`live`](apollo_replay::Timeline::live) set from the state directory's lock. Every view
/// that shows a run's states or counts renders this; store warnings go to `stderr`.
pub(crate) fn run_model(
    state: &StateDir,
    run: &RunId,
    stderr: &mut dyn std::io::Write,
) -> Result<apollo_replay::Timeline, CliError> {
    let model = apollo_runner::read::run_model(state, run)?;
    print_warnings(&model.warnings, stderr);
    Ok(model.timeline)
}

/// The `run_started` event of a run.
pub(crate) fn run_started(
    state: &StateDir,
    run: &RunId,
) -> Result<apollo_core::event::RunStarted, CliError> {
    Ok(apollo_runner::read::run_started(state, run)?)
}

/// Print store warnings (torn tails, salvaged records) to stderr.
pub(crate) fn print_warnings(warnings: &[Warning], stderr: &mut dyn std::io::Write) {
    for warning in warnings {
        let _ = writeln!(stderr, "warning: {warning}");
    }
}

/// The run and unit that `apollo show` and `apollo logs` were given as `[RUN] [UNIT]`: none is
/// the latest run; one is a run if it names one (an id, a unique prefix or suffix, `latest~N`, `last-success`), else a
/// unit of the latest run (`apollo logs clean_data`); two are a run and a unit.
pub(crate) fn run_and_unit(
    state: &StateDir,
    first: Option<&str>,
    second: Option<&str>,
) -> Result<(RunId, Option<String>), CliError> {
    match (first, second) {
        (None, _) => Ok((resolve_run(state, "latest")?, None)),
        (Some(run), Some(unit)) => Ok((resolve_run(state, run)?, Some(unit.to_owned()))),
        (Some(word), None) => match resolve_run(state, word) {
            Ok(run) => Ok((run, None)),
            Err(error) => {
                let latest = resolve_run(state, "latest").map_err(|_| error)?;
                let is_unit = run_started(state, &latest)
                    .is_ok_and(|started| started.units.iter().any(|unit| unit == word));
                if is_unit {
                    Ok((latest, Some(word.to_owned())))
                } else {
                    Err(CliError::Usage {
                        message: format!(
                            "`{word}` is neither a run (an id, a unique prefix or suffix, `latest`, `latest~N`, `last-success`) nor a unit of the latest run {latest}; `apollo runs` lists the runs"
                        ),
                    })
                }
            }
        },
    }
}

/// The closest of `candidates` to `word`, when it is close enough to be a plausible typo
/// ("did you mean …?" for unit names and run ids).
pub(crate) fn closest<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    let mut best: Option<(f64, &str)> = None;
    for candidate in candidates {
        let score = strsim::jaro_winkler(word, candidate);
        if score >= 0.8 && best.is_none_or(|(best_score, _)| score > best_score) {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_suggests_typos_only() {
        assert_eq!(closest("reprot", ["fetch", "report"]), Some("report"));
        assert_eq!(closest("zzz", ["fetch", "report"]), None);
    }

    #[test]
    fn nothing_found_names_the_absolute_paths_checked_and_state_dirs_below() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("p/.apollo/runs")).unwrap();
        let nearby = state_dirs_below(dir.path());
        assert_eq!(nearby, vec![PathBuf::from("p/.apollo")]);
        let folders = search_folders(&dir.path().join("p"));
        assert_eq!(
            folders
                .first()
                .map(|(folder, mine)| (folder.as_path(), *mine)),
            Some((dir.path().join("p").as_path(), true))
        );
        assert!(folders.iter().all(|(folder, _)| folder.is_absolute()));
    }
}
