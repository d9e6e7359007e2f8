//! Laying out a reproduction: its scratch directory, the inputs it restores, the pipeline
//! of its unit alone.

use std::borrow::Cow;
use std::fs;
use std::path::{Path, PathBuf};

use apollo_core::Pipeline;
use apollo_core::capture::FileEntry;
use apollo_core::hash;

use super::{Recorded, ReproduceRequest, refused};
use crate::error::RunnerError;

/// The scratch directory (`--into`, else a new temporary one) and whether it is temporary.
pub(crate) fn scratch_dir(
    request: &ReproduceRequest,
    attempt: u32,
) -> Result<(PathBuf, bool), RunnerError> {
    let refuse = |problem: String| refused(request, problem);
    Ok(match &request.into {
        Some(into) => {
            if fs::read_dir(into).is_ok_and(|mut entries| entries.next().is_some()) {
                return Err(refuse(format!("{} is not empty", into.display())));
            }
            (into.clone(), false)
        }
        // New, private (0700) and under a random name: on a shared /tmp another user could
        // otherwise make the folder first, and choose where the unit runs.
        None => {
            let folder = tempfile::Builder::new()
                .prefix(&format!(
                    "apollo-reproduce-{}-{}-{attempt}-",
                    request.run, request.unit
                ))
                .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .tempdir()
                .map_err(|error| {
                    refuse(format!(
                        "cannot create a scratch directory in {}: {error} (or pass --into DIR)",
                        std::env::temp_dir().display()
                    ))
                })?;
            (folder.keep(), true)
        }
    })
}

/// The recorded input files of `attempt`; for one recorded before capture existed (journal
/// format < 1.3, no manifest), the unit's declared inputs as they are now, each said so.
pub(crate) fn recorded_inputs<'r>(
    recorded: &'r Recorded,
    attempt: u32,
    unit: &apollo_core::Unit,
    project: &Path,
) -> Cow<'r, [FileEntry]> {
    if let Some(files) = recorded.inputs.get(&attempt) {
        return Cow::Borrowed(files.as_slice());
    }
    (hash::expand_inputs(unit, project).into_iter())
        .map(|path| FileEntry {
            path: path
                .strip_prefix(project)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned(),
            sha256: String::new(),
            size: 0,
            mode: 0o644,
            not_captured: Some("recorded before capture existed, journal format < 1.3".to_owned()),
        })
        .collect()
}

/// A pipeline of `units` alone (in dependency order, their workdirs and deps already set for
/// the scratch directory), in the scratch directory: the outputs of upstream units left out
/// are among their restored inputs.
pub(crate) fn alone_in(
    definition: &Pipeline,
    units: Vec<apollo_core::Unit>,
    scratch: &Path,
) -> Pipeline {
    Pipeline {
        name: definition.name.clone(),
        config_path: scratch
            .join((definition.config_path.file_name()).unwrap_or("pipeline.yaml".as_ref())),
        base_dir: scratch.to_path_buf(),
        max_parallel: 1,
        units,
        // A reproduction notifies nobody.
        hooks: Vec::new(),
        capacity: definition.capacity,
        max_jobs: definition.max_jobs,
        // A reproduction evicts nothing: it ends without looking at the store's size.
        blob_store_max: None,
        durability: None,
        sync_interval: None,
        cost: definition.cost.clone(),
        journal_segment_size: definition.journal_segment_size,
        // A reproduction is not held to the run's deadline.
        deadline: None,
    }
}
