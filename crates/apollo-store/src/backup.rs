//! `apollo backup DEST`: copy finished runs consistently, then prune DEST.

use std::fs::{self, File};
use std::io;
use std::path::Path;

use chrono::{DateTime, Utc};

use crate::blobs::referenced_blobs;
use crate::error::StoreError;
use crate::fsutil::{fsync_dir, random_hex};
use crate::retention::{PruneOptions, PruneReport, prune, remove_leftovers, select};
use crate::run_id::RunId;
use crate::state_dir::StateDir;
use crate::verify::verify;
use crate::writer::Durability;

/// What [`backup`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackupReport {
    /// Runs copied now (new ones, and the [`refreshed`](Self::refreshed) ones).
    pub copied: Vec<RunId>,
    /// Runs whose copy at the destination was replaced because the run changed since it was
    /// copied (resumed and finished again); also in [`copied`](Self::copied).
    pub refreshed: Vec<RunId>,
    /// Finished runs already present, unchanged, at the destination.
    pub already_there: Vec<RunId>,
    /// Runs not copied because they are not finished (running or incomplete).
    pub unfinished: Vec<RunId>,
    /// Runs not copied because the destination's retention (`keep_days`) would delete them
    /// at once (older, and not the latest of their pipeline).
    pub too_old: Vec<RunId>,
    /// Runs not copied because their journal is damaged, with the reason.
    pub failed: Vec<(RunId, String)>,
    /// Bytes of the runs' folders copied (journals, logs, manifests).
    pub copied_bytes: u64,
    /// Bytes of blobs copied (definition snapshots, captured files) that the destination did
    /// not hold yet.
    pub copied_blob_bytes: u64,
    /// What pruning the destination did.
    pub pruned: PruneReport,
}

/// Copies every finished run of `state` that `dest` (a state directory, created if missing)
/// does not have yet, or has a copy of that is out of date (the run was resumed since: its
/// journal's files differ in name or size), with the blobs its journal names, then prunes
/// `dest` with
/// `keep_days` (the latest run of each pipeline is always kept). Runs that pruning would
/// delete at once are not copied.
///
/// Each run is copied into `dest/runs/.backup-…`, every file and folder fsynced, then renamed
/// to its id and the parent fsynced: a run in `dest/runs/` is always complete. An out-of-date
/// copy is swapped with the new one in one `renameat2(RENAME_EXCHANGE)` (two renames where the
/// filesystem cannot exchange; a crash between them leaves the run to copy again next time),
/// then deleted. A run whose
/// journal is corrupt is not copied and is listed in [`BackupReport::failed`].
pub fn backup(
    state: &StateDir,
    dest: &Path,
    keep_days: Option<u32>,
    now: DateTime<Utc>,
) -> Result<BackupReport, StoreError> {
    // The source's `runs/` and `blobs/` are checked as the destination's are (a link planted
    // there is refused, not copied from).
    state.check_fixed_folders()?;
    // A new destination is shared as the source is; an existing one keeps its own sharing.
    let sharing = (!dest.exists()).then(|| state.sharing()).transpose()?;
    let dest = StateDir::open_or_create_as(dest, sharing)?;
    if dest.path().canonicalize().ok() == state.path().canonicalize().ok() {
        return Err(StoreError::invalid(
            "the backup destination is the state directory itself",
        ));
    }
    remove_leftovers(&dest)?;
    let mut report = BackupReport::default();
    let summaries = state.list_runs()?;
    let would_prune = select(
        &summaries,
        PruneOptions {
            keep_days,
            keep_runs: None,
        },
        now,
    )
    .deleted;
    for summary in summaries {
        let id = summary.id.clone();
        if !summary.state.is_finished() {
            report.unfinished.push(id);
            continue;
        }
        if would_prune.contains(&id) {
            report.too_old.push(id);
            continue;
        }
        // Opened as a run is (`StateDir::run_dir`: a link where a run folder belongs is
        // refused): another project's run linked in is reported, never copied.
        let run_dir = match state.run_dir(&id) {
            Ok(run_dir) => run_dir.path().to_path_buf(),
            Err(error) => {
                report.failed.push((id, error.to_string()));
                continue;
            }
        };
        let final_path = dest.runs_dir().join(id.as_str());
        let stale = final_path.exists();
        if stale && journal_files(&final_path)? == journal_files(&run_dir)? {
            report.already_there.push(id);
            continue;
        }
        let verified = verify(&run_dir)?;
        if let Some(corruption) = verified.corruptions.first() {
            report.failed.push((id, corruption.to_string()));
            continue;
        }
        // The blobs the run needs (definition snapshots, captured files), before the run
        // whose journal names them. A blob missing here is not copied (its run says so when
        // it needs it); one whose content no longer matches its name is not copied either. A
        // blob can go while it is copied (the end of a run evicts the oldest runs' captures
        // under `blob_store_max`; backup does not take the lock): then it is missing too.
        let source_blobs = state.existing_blob_store();
        let dest_blobs = dest.blob_store(Durability::Fsync)?;
        for hash in referenced_blobs(&run_dir)? {
            let source = source_blobs.path(&hash)?;
            if dest_blobs.contains(&hash) || !source_blobs.contains(&hash) {
                continue;
            }
            let copied = match dest_blobs.put_file(&source) {
                Ok(copied) => copied,
                Err(_) if !source_blobs.contains(&hash) => continue,
                Err(error) => return Err(error),
            };
            if copied.sha256 == hash {
                report.copied_blob_bytes += copied.size;
            } else {
                dest_blobs.remove(&copied.sha256)?;
                report.failed.push((
                    id.clone(),
                    format!(
                        "blob {hash} is damaged: its content hashes to {}",
                        copied.sha256
                    ),
                ));
            }
        }
        let temp = dest
            .runs_dir()
            .join(format!(".backup-{id}-{}", random_hex(4)));
        report.copied_bytes += copy_tree_durable(&run_dir, &temp)?;
        if stale {
            replace_copy(&dest.runs_dir(), &temp, &final_path)?;
            report.refreshed.push(id.clone());
        } else {
            fs::rename(&temp, &final_path)
                .map_err(|source| StoreError::io("rename into", &final_path, source))?;
            fsync_dir(&dest.runs_dir())?;
        }
        report.copied.push(id);
    }
    if keep_days.is_some() {
        report.pruned = prune(
            &dest,
            PruneOptions {
                keep_days,
                keep_runs: None,
            },
            now,
        )?;
    }
    Ok(report)
}

/// The names and sizes of the files in a run's `journal/` folder, sorted: what tells a copy
/// from a run that was resumed since (a journal only grows, by records and new segments). A
/// segment's size is where its records end: space allocated ahead takes records without
/// changing the file's size.
fn journal_files(run_dir: &Path) -> Result<Vec<(std::ffi::OsString, u64)>, StoreError> {
    let journal = run_dir.join("journal");
    let entries = match fs::read_dir(&journal) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(StoreError::io("list", &journal, source)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| StoreError::io("list", &journal, source))?;
        let meta = entry
            .metadata()
            .map_err(|source| StoreError::io("stat", entry.path(), source))?;
        let mut len = meta.len();
        if meta.is_file()
            && let Some(name) = entry.file_name().to_str()
            && crate::segment::parse_segment_file_name(name).is_some()
        {
            let (file, file_len) = crate::segment::open_segment_for_read(&entry.path())?;
            len = crate::segment::data_end(&file, file_len)
                .map_err(|source| StoreError::io("read", entry.path(), source))?;
        }
        files.push((entry.file_name(), len));
    }
    files.sort();
    Ok(files)
}

/// Puts the fresh copy `temp` where the out-of-date copy `final_path` is (both in `runs_dir`),
/// then deletes the old one.
fn replace_copy(runs_dir: &Path, temp: &Path, final_path: &Path) -> Result<(), StoreError> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    match renameat_with(CWD, temp, CWD, final_path, RenameFlags::EXCHANGE) {
        // `temp` now holds the old copy.
        Ok(()) => {
            fsync_dir(runs_dir)?;
            fs::remove_dir_all(temp).map_err(|source| StoreError::io("remove", temp, source))?;
        }
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            let old = runs_dir.join(format!(".backup-old-{}", random_hex(4)));
            fs::rename(final_path, &old)
                .map_err(|source| StoreError::io("rename", final_path, source))?;
            fs::rename(temp, final_path)
                .map_err(|source| StoreError::io("rename into", final_path, source))?;
            fsync_dir(runs_dir)?;
            fs::remove_dir_all(&old).map_err(|source| StoreError::io("remove", &old, source))?;
        }
        Err(errno) => return Err(StoreError::io("exchange", final_path, errno.into())),
    }
    fsync_dir(runs_dir)
}

/// Gives `to` the permission bits of `from` (never set-id bits, but a folder's setgid bit,
/// which keeps a shared state directory's group on what is created in it).
fn keep_mode(from: &Path, to: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::PermissionsExt;
    let metadata =
        fs::symlink_metadata(from).map_err(|source| StoreError::io("stat", from, source))?;
    let kept = if metadata.is_dir() { 0o2777 } else { 0o777 };
    let mode = metadata.permissions().mode();
    fs::set_permissions(to, fs::Permissions::from_mode(mode & kept))
        .map_err(|source| StoreError::io("set the permissions of", to, source))
}

/// Copies the tree at `from` to `to` (which must not exist), fsyncing every file and folder,
/// each with the permission bits of its source (a private run stays private in the backup;
/// DESIGN §18). Returns the bytes copied.
fn copy_tree_durable(from: &Path, to: &Path) -> Result<u64, StoreError> {
    fs::create_dir(to).map_err(|source| StoreError::io("create directory", to, source))?;
    keep_mode(from, to)?;
    let mut n_bytes = 0;
    let entries = fs::read_dir(from).map_err(|source| StoreError::io("list", from, source))?;
    for entry in entries {
        let entry = entry.map_err(|source| StoreError::io("list", from, source))?;
        let kind = entry
            .file_type()
            .map_err(|source| StoreError::io("stat", entry.path(), source))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            n_bytes += copy_tree_durable(&entry.path(), &target)?;
        } else if kind.is_file() {
            let mut source_file = File::open(entry.path())
                .map_err(|source| StoreError::io("open", entry.path(), source))?;
            let mut target_file = File::create_new(&target)
                .map_err(|source| StoreError::io("create", &target, source))?;
            n_bytes += io::copy(&mut source_file, &mut target_file)
                .map_err(|source| StoreError::io("copy to", &target, source))?;
            keep_mode(&entry.path(), &target)?;
            target_file
                .sync_all()
                .map_err(|source| StoreError::io("fsync", &target, source))?;
        }
    }
    fsync_dir(to)?;
    Ok(n_bytes)
}
