//! One step of a bisect: a scratch tree with GOOD's inputs and some of BAD's changes, the
//! units run there as a run of kind `bisect`, and the verdict.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use apollo_core::capture::FileEntry;
use apollo_core::event::{AttemptStatus, RunKind, RunReproduces};
use apollo_core::{CancelToken, Executor};
use apollo_store::StateLock;

use super::changes::{BisectPlan, ChangeKind, PathUnit};
use super::definition::substitute;
use super::{BisectStep, Check};
use crate::error::RunnerError;
use crate::reproduce::{Isolation, ScratchRun, alone_in, compare_outputs};

/// The steps of one bisect, in one folder of scratch trees.
pub(super) struct Steps<'p> {
    plan: &'p BisectPlan,
    executor: &'p dyn Executor,
    check: Option<&'p dyn Check>,
    cancel: &'p CancelToken,
    root: PathBuf,
    temporary: bool,
    taken: Vec<BisectStep>,
    /// The state directory's lock, held from the first step to the last.
    lock: StateLock,
}

impl<'p> Steps<'p> {
    pub(super) fn new(
        plan: &'p BisectPlan,
        executor: &'p dyn Executor,
        check: Option<&'p dyn Check>,
        cancel: &'p CancelToken,
    ) -> Result<Self, RunnerError> {
        let request = &plan.request;
        let lock = plan.state.lock(false)?;
        let (root, temporary) = match &request.into {
            Some(into) => {
                if fs::read_dir(into).is_ok_and(|mut entries| entries.next().is_some()) {
                    return Err(request.refused(format!("{} is not empty", into.display())));
                }
                fs::create_dir_all(into).map_err(|error| {
                    request.refused(format!("cannot create {}: {error}", into.display()))
                })?;
                (into.clone(), false)
            }
            // Under the state directory (never the project), private, under a random name.
            None => {
                let tmp = plan.state.path().join("tmp");
                // Private, as everything apollo makes in the state directory (DESIGN §18).
                let made = std::os::unix::fs::DirBuilderExt::mode(
                    fs::DirBuilder::new().recursive(true),
                    0o700,
                )
                .create(&tmp)
                .and_then(|()| {
                    tempfile::Builder::new()
                        .prefix(&format!("bisect-{}-", request.unit))
                        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
                        .tempdir_in(&tmp)
                });
                let folder = made.map_err(|error| {
                    request.refused(format!(
                        "cannot create a scratch folder in {}: {error} (or pass --into DIR)",
                        tmp.display()
                    ))
                })?;
                (folder.keep(), true)
            }
        };
        let root = root.canonicalize().unwrap_or(root);
        Ok(Self {
            lock,
            plan,
            executor,
            check,
            cancel,
            root,
            temporary,
            taken: Vec::new(),
        })
    }

    /// Makes the project read-only for the units the steps run: why not, if it could not.
    pub(super) fn isolate(&self, isolation: &dyn Isolation) -> Option<String> {
        let state = self.plan.state.path();
        let state = state.canonicalize().unwrap_or_else(|_| state.to_path_buf());
        let project = (self.plan.project.canonicalize()).unwrap_or(self.plan.project.clone());
        // A scratch folder inside the state directory is writable with it (one mount: a file
        // restored from the blob store is renamed into place within one mount).
        let writable: Vec<&Path> = if self.root.starts_with(&state) {
            vec![&state]
        } else {
            vec![&self.root, &state]
        };
        isolation.read_only(&project, &writable).err()
    }

    /// Runs one step with the changes `applied` on top of GOOD's inputs.
    pub(super) fn run(&mut self, applied: &[usize]) -> Result<BisectStep, RunnerError> {
        let plan = self.plan;
        let request = &plan.request;
        let number = self.taken.len() + 1;
        let scratch = self.root.join(format!("step-{number}"));
        let io = |what: &str, path: &Path, error: std::io::Error| {
            request.refused(format!(
                "step {number}: cannot {what} {}: {error}",
                path.display()
            ))
        };
        fs::create_dir_all(&scratch).map_err(|error| io("create", &scratch, error))?;
        let blobs = plan.state.existing_blob_store();
        for file in self.files(applied).values() {
            let dest = scratch.join(&file.path);
            if let Some(parent) = dest.parent() {
                fs::create_dir_all(parent).map_err(|error| io("create", parent, error))?;
            }
            blobs
                .restore(&file.sha256, &dest, file.mode)
                .map_err(|error| request.refused(format!("step {number}: {error}")))?;
        }
        let mut units = Vec::new();
        for unit in &plan.path {
            units.push(self.compose(unit, applied, &scratch));
            // The folders its recorded outputs were in existed when it ran.
            for side in [&unit.good, &unit.bad] {
                for output in side
                    .recorded
                    .outputs
                    .get(&side.attempt)
                    .into_iter()
                    .flatten()
                {
                    if let Some(parent) = Path::new(&output.path).parent() {
                        let folder = scratch.join(parent);
                        fs::create_dir_all(&folder)
                            .map_err(|error| io("create", &folder, error))?;
                    }
                }
            }
        }
        let target = &plan.path[plan.path.len() - 1];
        let Some(target_unit) = units.last().cloned() else {
            return Err(request.refused("no unit to run"));
        };
        let pipeline = alone_in(&target.good.definition, units, &scratch);
        let scratch_run = ScratchRun {
            kind: RunKind::Bisect,
            recorded: &target.good.recorded,
            reproduces: RunReproduces {
                run: request.good.to_string(),
                unit: request.unit.clone(),
                attempt: target.good.attempt,
                scratch: scratch.display().to_string(),
            },
            durability: request.durability,
        };
        let (run_id, statuses, _journal) = scratch_run.run(
            &plan.state,
            &mut self.lock,
            &pipeline,
            self.executor,
            self.cancel,
        )?;
        let status = (statuses.last().copied()).unwrap_or(AttemptStatus::Interrupted);
        let verdict = match self.check {
            // Stopped by a signal: not judged (the search stops).
            _ if self.cancel.is_cancelled() => (false, "interrupted".to_owned()),
            Some(check) => check
                .check(&scratch)
                .map(|verdict| (verdict.good, format!("check: {}", verdict.detail)))
                .map_err(|error| request.refused(format!("step {number}: --check: {error}")))?,
            None => self.same_as_good(target, &target_unit, status, &scratch),
        };
        if self.temporary {
            let _ = fs::remove_dir_all(&scratch);
        }
        let step = BisectStep {
            number,
            applied: applied.to_vec(),
            run_id,
            scratch,
            status,
            good: verdict.0,
            why: verdict.1,
        };
        self.taken.push(step.clone());
        Ok(step)
    }

    /// The input files of a step: GOOD's, with the applied file changes.
    fn files(&self, applied: &[usize]) -> BTreeMap<String, FileEntry> {
        let mut files = self.plan.good_files.clone();
        for &index in applied {
            if let ChangeKind::File { path, .. } = &self.plan.changes[index].kind {
                match self.plan.bad_files.get(path) {
                    Some(file) => files.insert(path.clone(), file.clone()),
                    None => files.remove(path),
                };
            }
        }
        files
    }

    /// `unit` as GOOD's definition has it, with the applied changes that concern it, set to
    /// run in `scratch` among the path's units.
    fn compose(&self, unit: &PathUnit, applied: &[usize], scratch: &Path) -> apollo_core::Unit {
        let name = unit.name();
        let concerns = |index: &usize| {
            let change = &self.plan.changes[*index];
            change
                .units
                .iter()
                .any(|u| u == name)
                .then_some(&change.kind)
        };
        let changes: Vec<&ChangeKind> = applied.iter().filter_map(concerns).collect();
        let command = (changes.iter()).any(|kind| matches!(kind, ChangeKind::Command { .. }));
        let side = if command { &unit.bad } else { &unit.good };
        let mut composed = side.unit.clone();
        composed.env = unit.good.unit.env.clone();
        for &index in applied {
            let change = &self.plan.changes[index];
            if !change.units.iter().any(|u| u == name) {
                continue;
            }
            let variable = match &change.kind {
                ChangeKind::Env { name, .. } => name.clone(),
                ChangeKind::Param {
                    variable,
                    good: Some(was),
                    bad: Some(now),
                    ..
                } if change.interpolated.iter().any(|u| u == name) => {
                    substitute(&mut composed, was, now);
                    variable.clone()
                }
                ChangeKind::Param { variable, .. } => variable.clone(),
                _ => continue,
            };
            match unit.bad.unit.env.get(&variable) {
                Some(value) => composed.env.insert(variable, value.clone()),
                None => composed.env.remove(&variable),
            };
        }
        composed.workdir = scratch.join(&side.workdir);
        let on_path: BTreeSet<&str> = self.plan.path.iter().map(PathUnit::name).collect();
        composed.deps.retain(|dep| on_path.contains(dep.as_str()));
        composed
    }

    /// The default verdict: the same outcome as GOOD's attempt, and the same outputs.
    fn same_as_good(
        &self,
        target: &PathUnit,
        unit: &apollo_core::Unit,
        status: AttemptStatus,
        scratch: &Path,
    ) -> (bool, String) {
        let good = &target.good;
        let recorded_status = good.recorded.status_of_attempt.get(&good.attempt).copied();
        if let Some(recorded) = recorded_status
            && recorded != status
        {
            return (
                false,
                format!("{} (GOOD's attempt {})", status.as_str(), recorded.as_str()),
            );
        }
        let recorded = good.recorded.outputs.get(&good.attempt);
        let outputs = compare_outputs(
            &self.plan.state,
            unit,
            recorded.map_or(&[][..], Vec::as_slice),
            scratch,
        );
        let differing: Vec<&str> = (outputs.iter())
            .filter(|output| !output.identical())
            .map(|output| output.path.as_str())
            .collect();
        if differing.is_empty() {
            let n = outputs.len();
            (
                true,
                format!(
                    "{n} output{} identical to GOOD's",
                    if n == 1 { "" } else { "s" }
                ),
            )
        } else {
            (
                false,
                format!("differs from GOOD's: {}", differing.join(", ")),
            )
        }
    }

    /// The folder of the scratch trees, whether it is kept, and the steps taken; removes a
    /// temporary folder.
    pub(super) fn finish(self) -> (PathBuf, bool, Vec<BisectStep>) {
        if self.temporary {
            let _ = fs::remove_dir_all(&self.root);
        }
        (self.root, !self.temporary, self.taken)
    }
}
