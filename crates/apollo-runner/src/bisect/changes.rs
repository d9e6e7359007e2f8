//! The plan of a bisect: the two attempts of the unit (and of the upstream units rebuilt
//! along the path), and the changes between them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use apollo_core::capture::FileEntry;
use apollo_store::{RunId, StateDir};

use super::BisectRequest;
use super::definition::definition_changes;
use crate::error::RunnerError;
use crate::reproduce::{Prepared, ReproduceRequest, inside, prepare};

/// What changed between GOOD's and BAD's attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeKind {
    /// An input file's content (SHA-256; `None`: absent in that run).
    File {
        /// Its path, relative to the project.
        path: String,
        /// In GOOD's attempt.
        good: Option<String>,
        /// In BAD's attempt.
        bad: Option<String>,
    },
    /// A param the unit receives (`APOLLO_PARAM_<NAME>`; `None`: not set).
    Param {
        /// The param (as the runs' params name it, else its variable).
        name: String,
        /// Its variable (`APOLLO_PARAM_DAY`).
        variable: String,
        /// Its value in GOOD's run.
        good: Option<String>,
        /// In BAD's.
        bad: Option<String>,
    },
    /// An environment variable of the unit (`None`: not set).
    Env {
        /// The variable.
        name: String,
        /// Its value in GOOD's run.
        good: Option<String>,
        /// In BAD's.
        bad: Option<String>,
    },
    /// The unit's command, or another part of its definition (timeout, outputs, workdir…):
    /// applied, the unit runs as BAD's definition says, with the env of the step.
    Command {
        /// GOOD's, for people (the command, or the keys that differ).
        good: String,
        /// BAD's.
        bad: String,
    },
}

/// One change, and the units on the path it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// What changed.
    pub kind: ChangeKind,
    /// The units it concerns (the bisected unit, or upstream units with `--upstream`).
    pub units: Vec<String>,
    /// For a param: the units whose command has its value interpolated (`${params.x}`),
    /// which it changes too when applied.
    pub(super) interpolated: Vec<String>,
}

impl Change {
    /// For people: `file data/input.csv (4f5e2a1b… → 9a1b07c3…)`.
    pub fn describe(&self) -> String {
        let short = |hash: &Option<String>| {
            hash.as_deref().map_or("absent".to_owned(), |h| {
                format!("{}…", &h[..h.len().min(8)])
            })
        };
        let value = |value: &Option<String>| {
            value
                .as_deref()
                .map_or("unset".to_owned(), |v| format!("{v:?}"))
        };
        let what = match &self.kind {
            ChangeKind::File { path, good, bad } => {
                format!("file {path} ({} → {})", short(good), short(bad))
            }
            ChangeKind::Param {
                name, good, bad, ..
            } => {
                format!("param {name} ({} → {})", value(good), value(bad))
            }
            ChangeKind::Env { name, good, bad } => {
                format!("env {name} ({} → {})", value(good), value(bad))
            }
            ChangeKind::Command { good, bad } => format!("command ({good:?} → {bad:?})"),
        };
        let interpolated = if self.interpolated.is_empty() {
            ""
        } else {
            ", in the command too"
        };
        format!("{what} of {}{interpolated}", self.units.join(", "))
    }
}

/// One unit on the path: its attempt in each run.
pub(super) struct PathUnit {
    pub(super) good: Prepared,
    pub(super) bad: Prepared,
}

impl PathUnit {
    pub(super) fn name(&self) -> &str {
        &self.good.unit.name
    }
}

/// What [`plan_bisect`] found: the changes to try, before anything runs.
#[non_exhaustive]
pub struct BisectPlan {
    pub(super) request: BisectRequest,
    pub(super) state: StateDir,
    pub(super) project: PathBuf,
    /// The units that run in each step, the bisected unit last.
    pub(super) path: Vec<PathUnit>,
    /// The changes tried.
    pub(super) changes: Vec<Change>,
    /// GOOD's input files every step starts from (those rebuilt units produce left out).
    pub(super) good_files: BTreeMap<String, FileEntry>,
    /// BAD's version of each changed file it has.
    pub(super) bad_files: BTreeMap<String, FileEntry>,
    notes: Vec<String>,
}

impl BisectPlan {
    /// The changes a bisect tries.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// The units a step may run, as either run's definition has them (the `apollo` binary
    /// reads the secrets they receive).
    pub fn units(&self) -> impl Iterator<Item = &apollo_core::Unit> {
        (self.path.iter()).flat_map(|unit| [&unit.good.unit, &unit.bad.unit])
    }

    /// The upstream units rebuilt in each step (with `--upstream`), in dependency order.
    pub fn rebuilt(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.path.iter().map(PathUnit::name).collect();
        names.pop();
        names
    }

    /// The project the runs ran in (secrets' `{command: …}` run there).
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// What people should know before the steps run (an upstream unit not rebuilt, an input
    /// outside the project read where it is).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

/// Reads both runs' attempts of the unit (and, with [`BisectRequest::upstream`], of its
/// upstream units), lists the changes between them and refuses, before anything runs, what
/// a step could not do: an input not captured or whose blob is gone, an `idempotent: false`
/// unit without [`BisectRequest::allow_side_effects`].
///
/// # Errors
///
/// [`RunnerError::Bisect`] naming what stands in the way; the state directory's errors.
pub fn plan_bisect(request: &BisectRequest) -> Result<BisectPlan, RunnerError> {
    let attempt = |run: &RunId, unit: &str| {
        let reproduce =
            ReproduceRequest::new(&request.state_dir, run.clone(), unit).allow_side_effects(true);
        prepare(&reproduce).map_err(|error| match error {
            RunnerError::Reproduce { problem, .. } => {
                request.refused(format!("unit `{unit}` in run {run}: {problem}"))
            }
            other => other,
        })
    };
    let target = PathUnit {
        good: attempt(&request.good, &request.unit)?,
        bad: attempt(&request.bad, &request.unit)?,
    };
    let mut notes = Vec::new();
    let mut path = Vec::new();
    if request.upstream {
        path = upstream(request, &target, &attempt, &mut notes)?;
    }
    path.push(target);
    for unit in &path {
        let idempotent = unit.good.unit.idempotent && unit.bad.unit.idempotent;
        if !(idempotent || request.allow_side_effects) {
            return Err(request.refused(format!(
                "unit `{}` is `idempotent: false`: each step runs it again, and what it does \
                 outside its files (a charge, a mail, a deploy) happens again",
                unit.name()
            )));
        }
    }
    let project = path[path.len() - 1].bad.project.clone();
    let state = StateDir::open_existing(&request.state_dir)?;
    let rebuilt: BTreeSet<String> = (path.iter().rev().skip(1)).flat_map(produced).collect();
    let files = Files::of(&path, &rebuilt, &project, &mut notes);
    let mut changes = files.changes();
    changes.extend(definition_changes(&path));
    let plan = BisectPlan {
        request: request.clone(),
        state,
        project,
        path,
        changes,
        good_files: files.good,
        bad_files: files.bad,
        notes,
    };
    check_blobs(&plan)?;
    Ok(plan)
}

/// The upstream units rebuilt along the path to `target`: each upstream unit with an
/// attempt in both runs whose own inputs, params, env or command changed, and every
/// upstream unit between one of those and the target.
fn upstream(
    request: &BisectRequest,
    target: &PathUnit,
    attempt: &dyn Fn(&RunId, &str) -> Result<Prepared, RunnerError>,
    notes: &mut Vec<String>,
) -> Result<Vec<PathUnit>, RunnerError> {
    let definition = &target.bad.definition;
    let mut candidates = Vec::new();
    for name in ancestors(definition, target.name()) {
        let good = attempt(&request.good, &name);
        let bad = attempt(&request.bad, &name);
        match (good, bad) {
            (Ok(good), Ok(bad)) => candidates.push(PathUnit { good, bad }),
            (Err(RunnerError::Bisect { problem, .. }), _)
            | (_, Err(RunnerError::Bisect { problem, .. })) => notes.push(format!(
                "upstream unit `{name}` is not rebuilt ({problem}): its outputs are taken as \
                 the unit's recorded inputs"
            )),
            (Err(error), _) | (_, Err(error)) => return Err(error),
        }
    }
    let all_produced: BTreeSet<String> = candidates.iter().flat_map(produced).collect();
    let project = &target.bad.project;
    let mut changed = BTreeSet::new();
    for unit in &candidates {
        let alone = std::slice::from_ref(unit);
        let files = Files::of(alone, &all_produced, project, &mut Vec::new());
        if !files.changes().is_empty() || !definition_changes(alone).is_empty() {
            changed.insert(unit.name().to_owned());
        }
    }
    let rebuilt: Vec<PathUnit> = (candidates.into_iter())
        .filter(|unit| {
            changed.contains(unit.name())
                || ancestors(definition, unit.name()).any(|name| changed.contains(&name))
        })
        .collect();
    Ok(rebuilt)
}

/// The units `name` depends on, directly or not, in `definition` (dependencies first).
fn ancestors(
    definition: &apollo_core::Pipeline,
    name: &str,
) -> impl Iterator<Item = String> + use<> {
    let deps_of = |name: &str| {
        (definition.units.iter())
            .find(|unit| unit.name == name)
            .map(|unit| unit.deps.clone())
            .unwrap_or_default()
    };
    let mut order: Vec<String> = Vec::new();
    let mut stack: Vec<(String, bool)> = deps_of(name).into_iter().map(|d| (d, false)).collect();
    let mut seen = BTreeSet::new();
    while let Some((unit, expanded)) = stack.pop() {
        if expanded {
            order.push(unit);
            continue;
        }
        if !seen.insert(unit.clone()) {
            continue;
        }
        stack.push((unit.clone(), true));
        stack.extend(deps_of(&unit).into_iter().map(|d| (d, false)));
    }
    order.into_iter()
}

/// The files a unit's attempts produced (either run's output manifest).
fn produced(unit: &PathUnit) -> Vec<String> {
    [&unit.good, &unit.bad]
        .into_iter()
        .flat_map(|side| {
            side.recorded
                .outputs
                .get(&side.attempt)
                .into_iter()
                .flatten()
        })
        .map(|file| file.path.clone())
        .collect()
}

/// The input files of the units on a path, in each run.
struct Files {
    good: BTreeMap<String, FileEntry>,
    bad: BTreeMap<String, FileEntry>,
    readers: BTreeMap<String, Vec<String>>,
}

impl Files {
    /// The path's input files but those in `rebuilt` (produced in the step) and those
    /// outside `project` (read where they are: noted).
    fn of(
        path: &[PathUnit],
        rebuilt: &BTreeSet<String>,
        project: &Path,
        notes: &mut Vec<String>,
    ) -> Files {
        let mut files = Files {
            good: BTreeMap::new(),
            bad: BTreeMap::new(),
            readers: BTreeMap::new(),
        };
        for unit in path {
            for (side, map) in [(&unit.good, &mut files.good), (&unit.bad, &mut files.bad)] {
                for file in side
                    .recorded
                    .inputs
                    .get(&side.attempt)
                    .into_iter()
                    .flatten()
                {
                    if rebuilt.contains(&file.path) {
                        continue;
                    }
                    if inside(project, &project.join(&file.path)).is_none() {
                        let note = format!(
                            "input {} of `{}` is outside the project: read where it is, not tried",
                            file.path,
                            unit.name()
                        );
                        if !notes.contains(&note) {
                            notes.push(note);
                        }
                        continue;
                    }
                    map.entry(file.path.clone()).or_insert_with(|| file.clone());
                    let readers = files.readers.entry(file.path.clone()).or_default();
                    if !readers.iter().any(|reader| reader == unit.name()) {
                        readers.push(unit.name().to_owned());
                    }
                }
            }
        }
        files
    }

    fn changes(&self) -> Vec<Change> {
        (self.readers.iter())
            .filter_map(|(path, readers)| {
                let good = self.good.get(path).map(|file| file.sha256.clone());
                let bad = self.bad.get(path).map(|file| file.sha256.clone());
                (good != bad).then(|| Change {
                    kind: ChangeKind::File {
                        path: path.clone(),
                        good,
                        bad,
                    },
                    units: readers.clone(),
                    interpolated: Vec::new(),
                })
            })
            .collect()
    }
}

/// Every file a step may restore is captured and its blob is in the store.
fn check_blobs(plan: &BisectPlan) -> Result<(), RunnerError> {
    let blobs = plan.state.existing_blob_store();
    let changed: BTreeSet<&str> = (plan.changes.iter())
        .filter_map(|change| match &change.kind {
            ChangeKind::File { path, .. } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    let needed = (plan
        .good_files
        .values()
        .map(|file| (file, &plan.request.good)))
    .chain(
        (plan.bad_files.values())
            .filter(|file| changed.contains(file.path.as_str()))
            .map(|file| (file, &plan.request.bad)),
    );
    let mut problems = Vec::new();
    for (file, run) in needed {
        if let Some(reason) = &file.not_captured {
            problems.push(format!(
                "input {} of run {run} was not captured ({reason})",
                file.path
            ));
        } else if !blobs.contains(&file.sha256) {
            problems.push(format!(
                "the blob of input {} of run {run} is gone (evicted under blob_store_max, or \
                 deleted)",
                file.path
            ));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(plan.request.refused(format!(
        "{}; a step restores every input from the blob store, so nothing was run",
        problems.join("; ")
    )))
}
