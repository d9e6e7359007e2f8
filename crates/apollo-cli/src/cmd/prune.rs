//! `apollo prune` and `apollo backup`: retention of old runs, and consistent copies of
//! finished runs elsewhere.

use std::io::Write;
use std::path::{Path, PathBuf};

use apollo_store::{PruneOptions, PruneReport, StoreError};

use crate::cmd::StateArgs;
use crate::error::{CliError, output};
use crate::exit::Exit;

/// Arguments of `apollo prune`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("keep").required(true).multiple(true).args(["keep_days", "keep_runs"])))]
pub(crate) struct PruneArgs {
    /// Keep the runs that started at most N×24 hours ago (0: none for its age). The rules add
    /// up: a run is deleted only when no --keep-* rule given keeps it, so `--keep-runs 3
    /// --keep-days 0` keeps the 3 newest runs of each pipeline, whatever their age, and
    /// `--keep-runs 3 --keep-days 7` those and every run of the last 7 days
    #[arg(long, value_name = "N")]
    pub(crate) keep_days: Option<u32>,
    /// Keep the N newest runs of each pipeline (per pipeline, not in all; 0: none for its rank)
    #[arg(long, value_name = "N")]
    pub(crate) keep_runs: Option<usize>,
    #[command(flatten)]
    pub(crate) state: StateArgs,
    /// Say what would be deleted, and delete nothing
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// Arguments of `apollo backup`.
#[derive(Debug, clap::Args)]
pub(crate) struct BackupArgs {
    /// The destination folder (a state directory of its own; created if needed)
    #[arg(value_name = "DEST")]
    pub(crate) dest: PathBuf,
    /// At the destination, delete backed-up runs that started more than N days ago
    #[arg(long, value_name = "N")]
    pub(crate) keep_days: Option<u32>,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

fn print_prune(report: &PruneReport, stdout: &mut dyn Write) -> std::io::Result<()> {
    for run in &report.deleted {
        writeln!(stdout, "deleted {run}")?;
    }
    for run in &report.kept_running {
        writeln!(stdout, "kept {run} (running)")?;
    }
    for run in &report.kept_latest {
        writeln!(stdout, "kept {run} (latest run of its pipeline)")?;
    }
    for run in &report.kept_reused {
        writeln!(stdout, "kept {run} (a kept run reused its outputs)")?;
    }
    // The total counts the blobs swept too: the captured files are most of what a run holds
    // (issue 36: "freed 0.0 MiB" for a prune that deleted 229 MiB of blobs).
    let blob_bytes = report.blobs.as_ref().map_or(0, |blobs| blobs.freed_bytes);
    writeln!(
        stdout,
        "pruned {} run{}, freed {} ({} of runs, {} of blobs)",
        report.deleted.len(),
        if report.deleted.len() == 1 { "" } else { "s" },
        apollo_core::capture::human_size(report.freed_bytes + blob_bytes),
        apollo_core::capture::human_size(report.freed_bytes),
        apollo_core::capture::human_size(blob_bytes),
    )?;
    match &report.blobs {
        Some(blobs) => writeln!(
            stdout,
            "deleted {} blob{} no kept run references ({}), kept {}",
            blobs.removed,
            if blobs.removed == 1 { "" } else { "s" },
            apollo_core::capture::human_size(blobs.freed_bytes),
            blobs.kept
        ),
        None => writeln!(
            stdout,
            "kept every blob: another apollo is running here (its run may be capturing)"
        ),
    }
}

/// `apollo prune --dry-run`: what would go.
fn print_prune_plan(report: &PruneReport, stdout: &mut dyn Write) -> std::io::Result<()> {
    for run in &report.deleted {
        writeln!(stdout, "would delete {run}")?;
    }
    for run in &report.kept_running {
        writeln!(stdout, "would keep {run} (running)")?;
    }
    for run in &report.kept_latest {
        writeln!(stdout, "would keep {run} (latest run of its pipeline)")?;
    }
    for run in &report.kept_reused {
        writeln!(stdout, "would keep {run} (a kept run reused its outputs)")?;
    }
    writeln!(
        stdout,
        "dry run: would prune {} run{}, freeing {:.1} MiB; nothing was deleted",
        report.deleted.len(),
        if report.deleted.len() == 1 { "" } else { "s" },
        report.freed_bytes as f64 / (1024.0 * 1024.0)
    )
}

/// `apollo prune`: never a running run, never the latest run of a pipeline.
pub(crate) fn prune(
    args: &PruneArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
    let mut options = PruneOptions::default();
    if let Some(keep_days) = args.keep_days {
        options = options.keep_days(keep_days);
    }
    if let Some(keep_runs) = args.keep_runs {
        options = options.keep_runs(keep_runs);
    }
    if args.dry_run {
        let report = apollo_store::plan_prune(&state, options, chrono::Utc::now())?;
        print_prune_plan(&report, stdout).map_err(output)?;
        return Ok(Exit::Success);
    }
    let report = apollo_store::prune(&state, options, chrono::Utc::now())
        .map_err(|error| blocked_by_unreadable_runs(&state, error))?;
    print_prune(&report, stdout).map_err(output)?;
    Ok(Exit::Success)
}

/// `apollo backup DEST`: copies finished runs (temp name, fsync, rename), then prunes DEST.
pub(crate) fn backup(
    args: &BackupArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
    let report = apollo_store::backup(&state, &args.dest, args.keep_days, chrono::Utc::now())?;
    for run in &report.copied {
        writeln!(stdout, "copied {run}").map_err(output)?;
    }
    for run in &report.unfinished {
        writeln!(stdout, "not copied {run} (not finished)").map_err(output)?;
    }
    for (run, error) in &report.failed {
        let _ = writeln!(stderr, "error: could not copy {run}: {error}");
    }
    writeln!(
        stdout,
        "backed up {} run{} ({:.1} MiB: {:.1} MiB of runs, {:.1} MiB of blobs) to {}; {} already there",
        report.copied.len(),
        if report.copied.len() == 1 { "" } else { "s" },
        (report.copied_bytes + report.copied_blob_bytes) as f64 / (1024.0 * 1024.0),
        report.copied_bytes as f64 / (1024.0 * 1024.0),
        report.copied_blob_bytes as f64 / (1024.0 * 1024.0),
        args.dest.display(),
        report.already_there.len()
    )
    .map_err(output)?;
    if !report.pruned.deleted.is_empty() {
        print_prune(&report.pruned, stdout).map_err(output)?;
    }
    Ok(if report.failed.is_empty() {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// A prune stopped by `error`: when runs here cannot be read, that is why (prune must know
/// every kept run's blobs before it removes any), said with what to do; else `error` itself.
fn blocked_by_unreadable_runs(state: &apollo_store::StateDir, error: StoreError) -> CliError {
    let unreadable: Vec<String> = (state.list_runs().unwrap_or_default().into_iter())
        .filter(|run| run.state == apollo_store::RunState::Corrupt)
        .map(|run| run.id.to_string())
        .collect();
    let Some(first) = unreadable.first() else {
        return CliError::Store(error);
    };
    CliError::CorruptRun {
        message: format!(
            "prune stopped before removing anything: run {} cannot be read ({error}), so which \
             blobs it needs is unknown; mend its folder (`apollo verify {}` says what is wrong) \
             or move it out of `runs/`, then prune again",
            unreadable.join(", "),
            first
        ),
    }
}
