//! [`bisect`]: which change of a unit's inputs between two runs flipped its output.
//!
//! Between a run where the unit's output was as wanted (GOOD) and one where it was not (BAD),
//! the unit's changed inputs are listed ([`plan_bisect`]): its input files (from the two
//! attempts' input manifests), the params it receives, its env, and its command (the rest of
//! its definition). Each step builds a scratch tree with GOOD's inputs and a subset of those
//! changes — every file restored from the blob store, never from the project — and runs the
//! unit there as [`reproduce`](crate::reproduce) does (the same supervision, the project
//! read-only through [`Isolation`]), then judges it: by a [`Check`] the caller runs in the
//! scratch tree, else "the same outcome and outputs as GOOD's attempt" (hashes). The first
//! two steps confirm that GOOD's inputs give a good result and all of BAD's a bad one; then
//! the changes are halved (delta debugging with interference: when neither half flips the
//! output alone, each half is narrowed with the other applied) until one change, or a
//! minimal set of changes needed together, is named.
//!
//! With [`BisectRequest::upstream`], the unit's upstream units whose own inputs changed are
//! rebuilt in the scratch tree along the path to it (with every unit between), and their
//! changes are tried too; the files they produce are then not changes of their own.
//!
//! Every step is a run of kind `bisect` in the state directory (a `run_reproduces` record
//! names GOOD's attempt and the step's scratch tree): `runs` marks it, `stats` leaves it out,
//! `latest` never names it.

use std::path::PathBuf;

use apollo_core::event::AttemptStatus;
use apollo_core::{CancelToken, Executor};
use apollo_store::{Durability, RunId};

mod changes;
mod definition;
mod search;
mod step;

pub use changes::{BisectPlan, Change, ChangeKind, plan_bisect};

use crate::error::RunnerError;
use crate::reproduce::Isolation;

/// What to bisect: build it with [`BisectRequest::new`] and the setters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BisectRequest {
    /// The state directory.
    pub state_dir: PathBuf,
    /// The run where the unit's output was as wanted.
    pub good: RunId,
    /// The run where it was not.
    pub bad: RunId,
    /// The unit.
    pub unit: String,
    /// Rebuild upstream units whose inputs changed too.
    pub upstream: bool,
    /// Build the steps' scratch trees in this directory (created; must be empty or absent)
    /// and keep them. `None`: a new folder under the state directory's `tmp/`, removed
    /// afterwards.
    pub into: Option<PathBuf>,
    /// How the steps' journals are written.
    pub durability: Durability,
    /// Run `idempotent: false` units all the same.
    pub allow_side_effects: bool,
}

impl BisectRequest {
    /// `unit` between `good` and `bad`, alone, in a temporary folder.
    pub fn new(
        state_dir: impl Into<PathBuf>,
        good: RunId,
        bad: RunId,
        unit: impl Into<String>,
    ) -> Self {
        Self {
            state_dir: state_dir.into(),
            good,
            bad,
            unit: unit.into(),
            upstream: false,
            into: None,
            durability: Durability::Fsync,
            allow_side_effects: false,
        }
    }

    /// Whether upstream units whose inputs changed are rebuilt along the path.
    pub fn upstream(mut self, upstream: bool) -> Self {
        self.upstream = upstream;
        self
    }

    /// Build the scratch trees in `into` (kept).
    pub fn into_dir(mut self, into: Option<PathBuf>) -> Self {
        self.into = into;
        self
    }

    /// With this durability for the steps' journals.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Whether `idempotent: false` units may run again.
    pub fn allow_side_effects(mut self, allow: bool) -> Self {
        self.allow_side_effects = allow;
        self
    }

    pub(crate) fn refused(&self, problem: impl Into<String>) -> RunnerError {
        RunnerError::Bisect {
            good: self.good.clone(),
            bad: self.bad.clone(),
            unit: self.unit.clone(),
            problem: problem.into(),
        }
    }
}

/// What a [`Check`] said about one step's scratch tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckVerdict {
    /// Whether the output is as wanted (the check exited 0).
    pub good: bool,
    /// How the check ended, for people (`exit 1`).
    pub detail: String,
}

/// A user's judge of a step (`--check CMD`): run by the caller (apollo-runner spawns
/// nothing) in the step's scratch tree, after the unit ran.
pub trait Check {
    /// Judges the scratch tree at `scratch` (laid out like the project).
    ///
    /// # Errors
    ///
    /// Why the check could not be run to its end: the bisect stops there.
    fn check(&self, scratch: &std::path::Path) -> Result<CheckVerdict, String>;
}

/// One step: which changes were applied, and the verdict.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BisectStep {
    /// 1, 2, … in the order the steps ran.
    pub number: usize,
    /// The changes applied on top of GOOD's inputs (indices into [`BisectPlan::changes`]).
    pub applied: Vec<usize>,
    /// The step's own run (kind `bisect`).
    pub run_id: RunId,
    /// The scratch tree it ran in (removed by now unless kept).
    pub scratch: PathBuf,
    /// How the unit's attempt ended (`interrupted`: it did not end, or an upstream unit
    /// rebuilt before it failed).
    pub status: AttemptStatus,
    /// Whether the output was as wanted.
    pub good: bool,
    /// Why, for people: the check's exit, or which outputs differ from GOOD's.
    pub why: String,
}

/// How a bisect ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BisectOutcome {
    /// The change that flips the output (one index), or the minimal set of changes that
    /// flips it only together (several).
    Found(Vec<usize>),
    /// The unit's inputs, params, env and command are the same in both runs.
    NoChanges,
    /// With GOOD's inputs alone, the scratch tree was judged bad: the unit does not
    /// reproduce GOOD's output (not deterministic, or it depends on something not recorded).
    GoodNotReproduced,
    /// With all of BAD's changes, the scratch tree was judged good: what flipped the output
    /// is not among the recorded changes.
    BadNotReproduced,
    /// Stopped by a signal.
    Interrupted,
}

/// What [`bisect`] found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Bisection {
    /// The good run.
    pub good: RunId,
    /// The bad run.
    pub bad: RunId,
    /// The unit.
    pub unit: String,
    /// The changes tried.
    pub changes: Vec<Change>,
    /// The steps, in order.
    pub steps: Vec<BisectStep>,
    /// How it ended.
    pub outcome: BisectOutcome,
    /// The folder the scratch trees were in.
    pub root: PathBuf,
    /// Whether it was kept.
    pub kept: bool,
    /// Why the units ran with the real project writable (`None`: read-only).
    pub not_isolated: Option<String>,
}

/// Runs the search `plan` describes (see the module docs), each step through `executor`,
/// telling `on_step` each verdict as it comes. Takes the state directory's lock while a step
/// runs; `cancel` stops it between steps and inside one.
///
/// # Errors
///
/// A step that cannot be built or recorded, or a [`Check`] that cannot run.
pub fn bisect(
    plan: &BisectPlan,
    executor: &dyn Executor,
    isolation: &dyn Isolation,
    check: Option<&dyn Check>,
    on_step: &mut dyn FnMut(&BisectStep),
    cancel: &CancelToken,
) -> Result<Bisection, RunnerError> {
    let mut steps = step::Steps::new(plan, executor, check, cancel)?;
    let not_isolated = steps.isolate(isolation);
    let outcome = search::run::<RunnerError>(plan.changes.len(), &mut |applied: &[usize]| {
        let step = steps.run(applied)?;
        on_step(&step);
        Ok(if cancel.is_cancelled() {
            search::Probe::Stop
        } else if step.good {
            search::Probe::Good
        } else {
            search::Probe::Bad
        })
    });
    let (root, kept, taken) = steps.finish();
    let outcome = outcome?;
    Ok(Bisection {
        good: plan.request.good.clone(),
        bad: plan.request.bad.clone(),
        unit: plan.request.unit.clone(),
        changes: plan.changes.clone(),
        steps: taken,
        outcome,
        root,
        kept,
        not_isolated,
    })
}
