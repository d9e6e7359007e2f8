//! Inputs checked again when an attempt ends (issue 36): an input changed under a running
//! attempt makes what it built untrustworthy, even when the change was undone before the end.

use std::path::{Path, PathBuf};

use crate::event::AttemptStatus;
use crate::executor::AttemptOutcome;
use crate::hash_cache::{FileStamp, INPUTS_CHANGED};
use crate::model::Unit;

/// Issue 36: an attempt that succeeded while one of its declared input files changed (an
/// edit, a `git checkout` back to the content hashed) made its outputs from content its
/// record does not name. An idempotent unit's attempt then fails, saying which files changed
/// (a retry, if it has one, hashes them again); an `idempotent: false` unit's side effects
/// happened and it stays done, with the fact in its record's `error`, which keeps the
/// success out of reuse by other runs (`apollo_store`'s reuse index).
pub(super) fn inputs_held_still(
    outcome: &mut AttemptOutcome,
    unit: &Unit,
    stamps: &[(PathBuf, FileStamp)],
    base_dir: &Path,
) {
    if outcome.status != AttemptStatus::Succeeded || stamps.is_empty() {
        return;
    }
    let changed = crate::hash_cache::changed_since(stamps);
    if changed.is_empty() {
        return;
    }
    let names: Vec<String> = changed
        .iter()
        .take(5)
        .map(|path| {
            path.strip_prefix(base_dir)
                .unwrap_or(path)
                .display()
                .to_string()
        })
        .collect();
    let more = changed.len().saturating_sub(names.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let files = format!("`{}`{more}", names.join("`, `"));
    if unit.idempotent {
        outcome.status = AttemptStatus::Failed;
        outcome.error = Some(format!(
            "{INPUTS_CHANGED} ({files}): what it made may come from content no longer there, so it is not recorded as a success; run it again (a retry hashes them again)"
        ));
    } else {
        outcome.error = Some(format!(
            "{INPUTS_CHANGED} ({files}): kept as done (idempotent: false), never reused by another run"
        ));
    }
}
