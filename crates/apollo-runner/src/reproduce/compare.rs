//! Comparing a reproduction's outputs with the recorded ones.

use std::fs;
use std::io::Read;
use std::path::Path;

use apollo_core::capture::FileEntry;
use apollo_core::event::{AttemptStatus, ReproductionCompared};
use apollo_core::hash::{self, sha256_file};
use apollo_store::StateDir;

use super::{MAX_DIFF_BYTES, OutputComparison};

/// Every recorded output and every file the declared outputs stand for now, compared.
pub(crate) fn compare_outputs(
    state: &StateDir,
    unit: &apollo_core::Unit,
    recorded: &[FileEntry],
    scratch: &Path,
) -> Vec<OutputComparison> {
    let mut comparisons: Vec<OutputComparison> = recorded
        .iter()
        .map(|file| {
            let now_path = scratch.join(&file.path);
            let now = sha256_file(&now_path).ok();
            let diff = (now.as_deref() != Some(file.sha256.as_str()) && now.is_some())
                .then(|| text_diff(state, file, &now_path))
                .flatten();
            OutputComparison {
                path: file.path.clone(),
                recorded: Some(file.sha256.clone()),
                now,
                diff,
            }
        })
        .collect();
    // Files the declared outputs stand for now that the recorded manifest does not list
    // (only when there is one: a failed attempt recorded no outputs).
    if recorded.is_empty() {
        return comparisons;
    }
    if let Ok(paths) = hash::expand_outputs(unit, scratch) {
        for path in paths {
            let name = path
                .strip_prefix(scratch)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            if recorded.iter().all(|file| file.path != name) {
                comparisons.push(OutputComparison {
                    path: name,
                    recorded: None,
                    now: sha256_file(&path).ok(),
                    diff: None,
                });
            }
        }
    }
    comparisons
}

/// A unified diff of a small recorded text output (its captured bytes) and the file at
/// `now_path`.
fn text_diff(state: &StateDir, recorded: &FileEntry, now_path: &Path) -> Option<String> {
    if recorded.not_captured.is_some() || recorded.size > MAX_DIFF_BYTES {
        return None;
    }
    // No more than one byte over the limit is read: a large output is not diffed.
    let mut now_bytes = Vec::new();
    (fs::File::open(now_path).ok()?)
        .take(MAX_DIFF_BYTES + 1)
        .read_to_end(&mut now_bytes)
        .ok()?;
    if now_bytes.len() as u64 > MAX_DIFF_BYTES {
        return None;
    }
    // Read through the store's folders without following a link, only if a regular file,
    // and checked against its name: a damaged or planted blob is not shown as what was
    // recorded.
    let blob_bytes = (state.read_blob_within(&recorded.sha256, MAX_DIFF_BYTES)).ok()?;
    let before = String::from_utf8(blob_bytes).ok()?;
    let after = String::from_utf8(now_bytes).ok()?;
    let diff = similar::TextDiff::from_lines(&before, &after);
    Some(
        diff.unified_diff()
            .header(
                &format!("recorded/{}", recorded.path),
                &format!("now/{}", recorded.path),
            )
            .to_string(),
    )
}

/// The `reproduction_compared` record of a reproduction that ended `status`, of an attempt
/// recorded `recorded_status`, whose outputs compared as `outputs`: the one rule of whether an
/// attempt was reproduced ([`super::Reproduction::reproduced`] asks it too).
pub(crate) fn compared(
    recorded_status: Option<&AttemptStatus>,
    status: AttemptStatus,
    outputs: &[OutputComparison],
) -> ReproductionCompared {
    let mut outputs_differ: Vec<String> = (outputs.iter())
        .filter(|output| !output.identical())
        .map(|output| output.path.clone())
        .collect();
    outputs_differ.sort_unstable();
    let recorded_status = recorded_status.copied();
    ReproductionCompared {
        reproduced: recorded_status.is_none_or(|recorded| recorded == status)
            && outputs_differ.is_empty(),
        recorded_status,
        status,
        outputs_differ,
    }
}
