//! The one place where errors become a message on stderr and an exit code.

use std::io::{self, Write};
use std::path::PathBuf;

use apollo_core::config::{DEFAULT_CONFIG_NAMES, LoadError};
use apollo_core::diagnostic::{Diagnostic, render_all};

use crate::exit::Exit;

/// Everything that can stop a command early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// No CONFIG argument and none of the default names exists.
    #[error(
        "no pipeline config found in `{}`: looked for {}",
        cwd.display(),
        DEFAULT_CONFIG_NAMES.map(|name| format!("`{name}`")).join(", ")
    )]
    NoConfig {
        /// The folder searched.
        cwd: PathBuf,
    },
    /// The current directory could not be determined.
    #[error("cannot determine the current directory")]
    CurrentDir(#[source] io::Error),
    /// The config could not be read.
    #[error(transparent)]
    Load(LoadError),
    /// The config is invalid; the diagnostics say why.
    #[error("could not load `{}` ({n_errors} error{s})", path.display(), s = if *n_errors == 1 { "" } else { "s" })]
    InvalidConfig {
        /// The config file.
        path: PathBuf,
        /// All diagnostics (errors and warnings).
        diagnostics: Vec<Diagnostic>,
        /// How many of them are errors.
        n_errors: usize,
    },
    /// Reading a captured output file failed.
    #[error("cannot read `{}`", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Writing the command's output failed.
    #[error("cannot write the output")]
    Output(#[source] io::Error),
    /// A reading command found no state directory.
    #[error(
        "no apollo state found: checked {}",
        checked.iter().map(|path| format!("`{}`", path.display())).collect::<Vec<_>>().join(", ")
    )]
    NoState {
        /// The state directories looked for, absolute.
        checked: Vec<PathBuf>,
        /// State directories found in immediate subfolders (relative to the current folder).
        nearby: Vec<PathBuf>,
    },
    /// The state directory of a run cannot be created or written.
    #[error("the state directory `{}` cannot be created or written: `{}`: {problem}", path.display(), checked.display())]
    StateNotWritable {
        /// The state directory, absolute.
        path: PathBuf,
        /// The folder or file found not writable, absolute.
        checked: PathBuf,
        /// Why.
        problem: String,
    },
    /// A RUN argument names no run.
    #[error("no run `{spec}` in `{}`: {hint}", state_dir.display())]
    UnknownRun {
        /// The argument.
        spec: String,
        /// The state directory searched.
        state_dir: PathBuf,
        /// What to do.
        hint: String,
    },
    /// A bad combination of arguments, or a request that makes no sense for the state found.
    #[error("{message}")]
    Usage {
        /// What is wrong and what to do.
        message: String,
    },
    /// The run to resume is still being run by another apollo (its lock file was deleted).
    #[error("{message}")]
    RunInUse {
        /// What is wrong and what to do.
        message: String,
    },
    /// The run to resume cannot be read.
    #[error("{message}")]
    CorruptRun {
        /// What is wrong and what to do.
        message: String,
    },
    /// The journal or state directory failed (corrupt, locked, I/O).
    #[error(transparent)]
    Store(#[from] apollo_store::StoreError),
    /// A non-idempotent unit was cut off mid-attempt (crash, Ctrl-C, SIGTERM, timeout).
    #[error(
        "unit `{unit}` (attempt {attempt}) of run {run} {how}, and it is `idempotent: false`: its \
         side effects may be half done, so apollo will not run anything until you decide{}",
        job.as_deref().map(|job| format!("; {job}")).unwrap_or_default()
    )]
    NeedsVerdict {
        /// The run.
        run: String,
        /// The unit.
        unit: String,
        /// The attempt cut off.
        attempt: u32,
        /// How it was cut off ("was running when apollo stopped", "was cut off by its timeout").
        how: String,
        /// Its Slurm job, when it is still queued or running ("its Slurm job 63 is still
        /// running: …").
        job: Option<String>,
    },
    /// An attempt needs a human (a Slurm submission in doubt, an earlier job still running).
    #[error("unit `{unit}` (attempt {attempt}) of run {run} needs you: {reason}")]
    NeedsHuman {
        /// The run.
        run: String,
        /// The unit.
        unit: String,
        /// The attempt.
        attempt: u32,
        /// What happened.
        reason: String,
        /// Whether the attempt was left in flight (a verdict settles it).
        left_in_flight: bool,
    },
    /// A done non-idempotent unit's inputs or outputs changed (`--on-input-change=auto`).
    #[error(
        "unit `{unit}` succeeded earlier in run {run} (attempt {attempt}) and is `idempotent: false`, \
         but since then: {}; apollo will not run it again without your say-so",
        changes.join(", ")
    )]
    ChangedNeedsVerdict {
        /// The run.
        run: String,
        /// The unit.
        unit: String,
        /// The attempt that succeeded.
        attempt: u32,
        /// What changed.
        changes: Vec<String>,
    },
    /// `--on-input-change=fail` and a succeeded unit's inputs (or outputs) changed.
    #[error("unit `{unit}` succeeded earlier in run {run}, but since then: {}", changes.join(", "))]
    InputsChanged {
        /// The run.
        run: String,
        /// The unit.
        unit: String,
        /// What changed.
        changes: Vec<String>,
    },
    /// Appending to the journal failed mid-run.
    #[error("the journal could not be written; the run was stopped")]
    Journal(#[source] apollo_core::JournalError),
}

impl CliError {
    /// The exit code this error ends the process with.
    pub(crate) fn exit(&self) -> Exit {
        match self {
            CliError::NoConfig { .. }
            | CliError::CurrentDir(_)
            | CliError::Load(_)
            | CliError::InvalidConfig { .. } => Exit::Usage,
            // A closed stdout (`apollo graph | head`) is the reader's choice, not a failure.
            CliError::Output(error) if error.kind() == io::ErrorKind::BrokenPipe => Exit::Success,
            CliError::Output(_) | CliError::ReadFile { .. } => Exit::Failure,
            CliError::NoState { .. }
            | CliError::StateNotWritable { .. }
            | CliError::UnknownRun { .. }
            | CliError::Usage { .. } => Exit::Usage,
            CliError::Store(error) => store_exit(error),
            CliError::CorruptRun { .. } => Exit::Corruption,
            CliError::RunInUse { .. } => Exit::Locked,
            CliError::NeedsVerdict { .. }
            | CliError::NeedsHuman { .. }
            | CliError::ChangedNeedsVerdict { .. }
            | CliError::InputsChanged { .. } => Exit::VerdictNeeded,
            CliError::Journal(_) => Exit::JournalIo,
        }
    }
}

impl From<LoadError> for CliError {
    fn from(error: LoadError) -> Self {
        match error {
            LoadError::Invalid { path, diagnostics } => {
                let n_errors = diagnostics.iter().filter(|d| d.is_error()).count();
                CliError::InvalidConfig {
                    path,
                    diagnostics,
                    n_errors,
                }
            }
            other => CliError::Load(other),
        }
    }
}

/// The exit code of a store error (DESIGN §10).
pub(crate) fn store_exit(error: &apollo_store::StoreError) -> Exit {
    use apollo_store::ErrorKind;
    match error.kind() {
        ErrorKind::Corruption | ErrorKind::NewerVersion => Exit::Corruption,
        ErrorKind::Locked => Exit::Locked,
        // Modes or an owner keep this user out: the state directory's problem, not the disk's.
        ErrorKind::Io if permission_denied(error) => Exit::Usage,
        ErrorKind::Io => Exit::JournalIo,
        _ => Exit::Usage,
    }
}

/// Whether `error` is the kernel refusing this user (EACCES, EPERM).
fn permission_denied(error: &apollo_store::StoreError) -> bool {
    error
        .io_error()
        .is_some_and(|error| error.kind() == io::ErrorKind::PermissionDenied)
}

/// The `= help:` lines that say what to do next, per error.
fn help_lines(error: &CliError) -> Vec<String> {
    match error {
        CliError::NoConfig { .. } => {
            vec!["pass the config file's path: `apollo check path/to/pipeline.yaml`".to_owned()]
        }
        CliError::Load(_) => vec![
            "check the path (relative paths start from the current folder), or run `apollo check` without one to use apollo.yaml, pipeline.yaml or config/pipeline.yaml".to_owned(),
        ],
        CliError::NoState { nearby, .. } if !nearby.is_empty() => nearby
            .iter()
            .map(|path| {
                format!(
                    "found `{}`: pass its pipeline with `-c CONFIG`, or `--state-dir {}`",
                    path.display(),
                    path.display()
                )
            })
            .collect(),
        CliError::NoState { .. } => vec![
            "start a run with `apollo run`, or name the pipeline with `-c CONFIG` or the state directory with `--state-dir`".to_owned(),
        ],
        CliError::StateNotWritable { checked, .. } => vec![
            format!(
                "apollo must write there: check its permissions and owner (`ls -ld {}`), and that its filesystem is not mounted read-only",
                checked.display()
            ),
            "or keep the state elsewhere: `apollo run --state-dir PATH` (or APOLLO_STATE_DIR)".to_owned(),
            "reading commands (`apollo runs`, `replay`, `show`, `logs`, `run --dry-run`) need no write access".to_owned(),
        ],
        CliError::NeedsVerdict { run, unit, .. } => vec![
            format!("look at what it did: `apollo logs {run} {unit}`"),
            format!("if its work is complete:   `apollo mark {run} {unit} --succeeded`"),
            format!("if it must run again:      `apollo mark {run} {unit} --failed` (or --rerun)"),
            "then `apollo run` proceeds from your verdict".to_owned(),
        ],
        CliError::NeedsHuman {
            run,
            unit,
            left_in_flight: true,
            ..
        } => vec![
            format!("if its work is complete:   `apollo mark {run} {unit} --succeeded`"),
            format!("if it must run again:      `apollo mark {run} {unit} --failed` (or --rerun)"),
            "then `apollo run` proceeds from your verdict".to_owned(),
        ],
        CliError::NeedsHuman { .. } => vec![
            "once that job has ended (or you cancelled it), `apollo run` carries on".to_owned(),
        ],
        CliError::ChangedNeedsVerdict { run, unit, .. } => vec![
            format!("to let this unit run again: `apollo mark {run} {unit} --rerun`, then `apollo run`"),
            "to let every changed unit run again: `apollo run --on-input-change=rerun`".to_owned(),
            "or restore what it had, or start over with `apollo run --fresh`".to_owned(),
        ],
        CliError::InputsChanged { .. } => vec![
            "to run it again with the new inputs: `apollo run --on-input-change=rerun` (or `auto`: rerun what is idempotent)".to_owned(),
            "or restore the inputs it had, or start over with `apollo run --fresh`".to_owned(),
        ],
        CliError::Store(store) => store_help(store),
        // The journal's own error wraps the store's: its advice is the store error's (a moved
        // run folder is not a full disk).
        CliError::Journal(journal) => {
            let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(journal);
            while let Some(error) = cause {
                if let Some(store) = error.downcast_ref::<apollo_store::StoreError>() {
                    return store_help(store);
                }
                cause = error.source();
            }
            vec![
                "nothing acknowledged was lost; free space or fix the disk, then `apollo run` carries on from what was recorded".to_owned(),
            ]
        }
        _ => Vec::new(),
    }
}

/// What to do about a store error. apollo-store's messages state facts only; the advice that
/// names apollo's commands and flags lives here.
fn store_help(error: &apollo_store::StoreError) -> Vec<String> {
    use apollo_store::ErrorKind;
    let advice: &[&str] = match (error.kind(), error) {
        (_, apollo_store::StoreError::StateChanged { .. }) => &[
            "something removed or replaced apollo's state directory while this run was active (a `git clean`, an `rm -rf .apollo`?); nothing was started after it was noticed",
            "keep the state directory out of clean-ups; units already started may have kept running: check what they did before the next `apollo run`",
        ],
        (_, apollo_store::StoreError::UnexpectedFileType { .. }) => &[
            "the state directory is apollo's: something replaced one of its files or folders (a link to another project's `.apollo`?), and apollo neither writes nor deletes through it",
            "move it away and put back the real one, or use another state directory with `--state-dir`",
        ],
        // A run's place in creation order, not a journal: verify and salvage do not apply.
        (_, apollo_store::StoreError::Corruption { path, .. })
            if path.file_name().is_some_and(|name| name == "sequence") =>
        {
            &[
                "runs are never ordered by a guess: until it is mended, apollo neither lists, resumes nor prunes the runs here",
                "write the run's number back (the runs made before it have lower ones: `head .apollo/runs/*/sequence`), or move that run's folder out of `runs/` to set the run aside",
            ]
        }
        (ErrorKind::Corruption, _) => &[
            "`apollo verify` gives a full report; `apollo replay --salvage` reads past bad records",
        ],
        (ErrorKind::Locked, _) => &[
            "wait for it to finish, or pass --wait to `apollo run` to wait for the lock",
            "or use another state directory with `--state-dir`",
        ],
        (ErrorKind::Io, _) if permission_denied(error) => &[
            "its modes or its owner keep you out: ask the state directory's owner to share it (`apollo verify --fix-permissions` makes it private again), or use one of your own with `--state-dir`",
        ],
        (ErrorKind::Io, _) => &[
            "nothing acknowledged was lost; free space or fix the disk, then `apollo run` carries on from what was recorded",
        ],
        _ => &[],
    };
    advice.iter().map(|line| (*line).to_owned()).collect()
}

/// Writes `error` to `stderr` (with its diagnostics and cause chain) and returns its exit code.
/// A broken stdout pipe prints nothing.
pub(crate) fn report(error: &CliError, stderr: &mut dyn Write) -> Exit {
    let exit = error.exit();
    if matches!(error, CliError::Output(cause) if cause.kind() == io::ErrorKind::BrokenPipe) {
        return exit;
    }
    let mut text = String::new();
    if let CliError::InvalidConfig { diagnostics, .. } = error {
        text.push_str(&render_all(diagnostics));
    }
    // Messages quote what users and units wrote (a RUN argument, a unit name, an error line):
    // control characters are escaped and very long lines cut, so a message cannot move the
    // cursor or bury the terminal.
    let safe = |message: String| {
        message
            .lines()
            .map(|line| crate::excerpt::clean_line_to(line, MAX_MESSAGE_LINE_CHARS))
            .collect::<Vec<_>>()
            .join("\n")
    };
    text.push_str(&format!(
        "{} {}\n",
        crate::color::paint(crate::color::stderr(), "error:", "error:"),
        safe(error.to_string())
    ));
    // Each error says its own part and returns its cause from `source()` (never both), so the
    // chain is walked once and every cause printed once.
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!("  caused by: {}\n", safe(cause.to_string())));
        source = cause.source();
    }
    for help in help_lines(error) {
        text.push_str(&format!("  = help: {help}\n"));
    }
    // If stderr itself is gone there is no one left to tell.
    let _ = stderr.write_all(text.as_bytes());
    exit
}

/// Longer lines of an error message are cut (a message names at most a few paths and units).
const MAX_MESSAGE_LINE_CHARS: usize = 2000;

/// Wraps an output error.
pub(crate) fn output(error: io::Error) -> CliError {
    CliError::Output(error)
}
