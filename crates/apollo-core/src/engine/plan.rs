//! `apollo run --dry-run`: what a run would do, decided without running anything.
//!
//! Units are visited in topological order. A unit whose dependencies are all done (and not
//! about to run) gets the same decision the engine would make, from its input hash computed
//! now. A unit downstream of one that will run cannot be decided yet — its inputs include that
//! upstream's output — so the plan says which upstream it waits for. A `reuse: true` unit that
//! has not run in this run is looked up among earlier runs' successes and its outputs checked,
//! as the engine does: the plan says "reused: inputs identical to run … attempt 1", or why not.

use super::api::{EngineError, EngineOptions, OnInputChange};
use super::policy::{
    Decision, check_in_flight, check_outputs, decide, known_change, reused_output_hash, scope,
    unit_limits,
};
use super::reuse::{self, ReuseCheck};
use crate::cancel::CancelToken;
use crate::dag::Dag;
use crate::hash;
use crate::model::Pipeline;
use crate::resume::{PriorState, PriorUnitState};

/// What a run would do with one unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned {
    /// Decided now: [`Decision::Reuse`] (not run) or a reason to run.
    Decided(Decision),
    /// Will run because upstream units run first.
    AfterUpstream {
        /// The upstream units that will run.
        upstream: Vec<String>,
        /// Whether the unit succeeded earlier: then it runs only if an upstream output changes.
        done_before: bool,
        /// Whether a change of those outputs stops the run for a human instead (a done
        /// non-idempotent unit under `OnInputChange::Auto`, or any done unit under `Fail`).
        stops_if_changed: bool,
        /// Whether an earlier run's success may stand for it once its upstream ran (`reuse:
        /// true`): it is then reused if their outputs come out as they were.
        reusable: bool,
    },
    /// Not part of this run (`--only` leaves it out).
    OutOfScope,
    /// Skipped by apollo: its `when:` was false when the pipeline was loaded.
    SkippedWhen {
        /// The condition, as it will be recorded.
        condition: String,
    },
}

impl std::fmt::Display for Planned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // What a plan would restore, it has not restored yet.
            Planned::Decided(Decision::Reused {
                run_id,
                attempt,
                restored,
            }) => {
                write!(
                    f,
                    "reused: inputs identical to run {run_id} attempt {attempt}"
                )?;
                if !restored.is_empty() {
                    write!(f, "; would restore {}", restored.join(", "))?;
                }
                Ok(())
            }
            Planned::Decided(decision) => decision.fmt(f),
            Planned::AfterUpstream {
                upstream,
                done_before: true,
                stops_if_changed: false,
                ..
            } => write!(
                f,
                "succeeded earlier; runs again only if the output of {} changes",
                upstream.join(", ")
            ),
            Planned::AfterUpstream {
                upstream,
                done_before: true,
                stops_if_changed: true,
                ..
            } => write!(
                f,
                "succeeded earlier; if the output of {} changes, the run stops for a human's verdict",
                upstream.join(", ")
            ),
            Planned::AfterUpstream {
                upstream,
                done_before: false,
                reusable: true,
                ..
            } => write!(
                f,
                "runs after {}, unless their output comes out as an earlier run's did: then reused",
                upstream.join(", ")
            ),
            Planned::AfterUpstream {
                upstream,
                done_before: false,
                ..
            } => {
                write!(f, "runs after {}", upstream.join(", "))
            }
            Planned::OutOfScope => f.write_str("not selected by --only"),
            Planned::SkippedWhen { condition } => write!(f, "skipped: when: {condition} is false"),
        }
    }
}

impl Planned {
    /// Whether the run would stop at this unit for a human's verdict (exit 5).
    pub fn stops_run(&self) -> bool {
        matches!(self, Planned::Decided(decision) if decision.stops_run())
    }

    /// Whether the unit runs only if an upstream output changes, else an earlier run's success
    /// stands for it (see [`Planned::AfterUpstream`]'s `reusable`).
    pub fn may_be_reused(&self) -> bool {
        matches!(self, Planned::AfterUpstream { reusable: true, .. })
    }

    /// The outputs a reuse would put back from the blob store (missing or changed on disk),
    /// sorted; empty for a unit not reused, or reused as its outputs are.
    pub fn restores(&self) -> &[String] {
        match self {
            Planned::Decided(Decision::Reused { restored, .. }) => restored,
            _ => &[],
        }
    }

    /// Whether the unit would (or may) run.
    pub fn runs(&self) -> bool {
        match self {
            Planned::Decided(decision) => decision.runs(),
            Planned::AfterUpstream { .. } => true,
            Planned::OutOfScope | Planned::SkippedWhen { .. } => false,
        }
    }
}

/// The plan for every unit, in topological order. Fails as the run would before starting
/// anything (a non-idempotent unit in flight, an unknown `--only` unit).
///
/// Input files and done units' outputs are hashed here, on the calling thread, within each
/// unit's timeout and `cancel`, as the engine's hashing threads do: a file that cannot be
/// hashed in time is decided as the engine would (an input: the unit runs and fails; an
/// output: it changed). Once `cancel` is raised the units not yet decided are planned as runs
/// ([`Decision::FirstRun`] or their prior reason) without reading anything more.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub fn dry_run(
    pipeline: &Pipeline,
    prior: &PriorState,
    options: &EngineOptions,
    cancel: &CancelToken,
) -> Result<Vec<(String, Planned)>, EngineError> {
    let dag = Dag::new(pipeline)?;
    let in_scope = scope(pipeline, &dag, options.only.as_deref())?;
    check_in_flight(pipeline, prior, &in_scope)?;
    let mut output_hashes: Vec<Option<String>> = vec![None; pipeline.units.len()];
    let mut will_run = vec![false; pipeline.units.len()];
    let mut plan = Vec::with_capacity(pipeline.units.len());
    for unit_idx in dag.topo_order() {
        let unit = &pipeline.units[unit_idx];
        if !in_scope[unit_idx] {
            plan.push((unit.name.clone(), Planned::OutOfScope));
            continue;
        }
        if let Some(condition) = &unit.skip_when {
            // As the run records it: its dependents get the same fixed output hash.
            output_hashes[unit_idx] = Some(super::outputs::when_false_hash(unit));
            plan.push((
                unit.name.clone(),
                Planned::SkippedWhen {
                    condition: condition.clone(),
                },
            ));
            continue;
        }
        let running_upstream: Vec<String> = dag
            .deps(unit_idx)
            .iter()
            .filter(|&&dep_idx| will_run[dep_idx])
            .map(|&dep_idx| pipeline.units[dep_idx].name.clone())
            .collect();
        let done_before = matches!(
            prior.unit(&unit.name).map(|prior_unit| &prior_unit.state),
            Some(PriorUnitState::Done { .. })
        );
        if !running_upstream.is_empty() {
            // A non-idempotent unit may already be known to stop the run (its own inputs or
            // outputs changed): the preflight refuses before its upstream runs.
            if !unit.idempotent
                && let Some(decision) = known_change(
                    pipeline,
                    &dag,
                    prior,
                    unit_idx,
                    options.on_input_change,
                    cancel,
                )
                && decision.stops_run()
            {
                plan.push((unit.name.clone(), Planned::Decided(decision)));
                continue;
            }
            will_run[unit_idx] = true;
            plan.push((
                unit.name.clone(),
                Planned::AfterUpstream {
                    upstream: running_upstream,
                    done_before,
                    stops_if_changed: match options.on_input_change {
                        OnInputChange::Auto => !unit.idempotent && !rerun_allowed(prior, unit),
                        OnInputChange::Rerun => false,
                        OnInputChange::Fail => true,
                    },
                    // Issue 35: "run b" was predicted in a chain the real run then reused.
                    reusable: !done_before
                        && crate::engine::reuse::wants_check(options.reuse.as_ref(), prior, unit),
                },
            ));
            continue;
        }
        let upstream: Vec<(&str, &str)> = dag
            .deps(unit_idx)
            .iter()
            .map(|&dep_idx| {
                (
                    pipeline.units[dep_idx].name.as_str(),
                    output_hashes[dep_idx].as_deref().unwrap_or(""),
                )
            })
            .collect();
        let limits = unit_limits(unit, cancel).with_cache(options.hash_cache.as_deref());
        let inputs = hash::input_components_within(unit, &pipeline.base_dir, &upstream, &limits);
        let outputs = inputs
            .as_ref()
            .ok()
            .map(|_| check_outputs(prior, unit, &pipeline.base_dir, &limits));
        let (decision, marked_hash) = match (inputs, outputs) {
            (Ok(inputs), Some(Ok(outputs))) => {
                let input_hash = hash::combine_components(&inputs);
                let decision = decide(
                    prior,
                    unit,
                    &input_hash,
                    &inputs,
                    &outputs.changes,
                    options.on_input_change,
                );
                let decision = match (&decision, options.reuse.as_ref()) {
                    (Decision::FirstRun, Some(reuse))
                        if reuse::wants_check(Some(reuse), prior, unit) =>
                    {
                        let base_dir = &pipeline.base_dir;
                        match reuse::check_reading(
                            reuse,
                            unit,
                            base_dir,
                            &input_hash,
                            &inputs,
                            &limits,
                        ) {
                            ReuseCheck::Reusable(candidate) => {
                                output_hashes[unit_idx] = Some(candidate.output_hash.clone());
                                reuse::reused(candidate)
                            }
                            ReuseCheck::NotReused(why) => Decision::NotReused(why),
                        }
                    }
                    _ => decision,
                };
                (decision, outputs.marked_hash)
            }
            // Not hashed (an input that cannot be, or a cancellation): it would run.
            _ => (Decision::FirstRun, None),
        };
        match decision {
            Decision::Reuse { .. } => {
                output_hashes[unit_idx] = Some(reused_output_hash(prior, unit, marked_hash));
            }
            // Its output hash was set from the earlier run's record above.
            Decision::Reused { .. } => {}
            // The run would stop here: what depends on it would not run.
            Decision::ChangedNeedsVerdict { .. } => {}
            _ => will_run[unit_idx] = true,
        }
        plan.push((unit.name.clone(), Planned::Decided(decision)));
    }
    Ok(plan)
}

fn rerun_allowed(prior: &PriorState, unit: &crate::model::Unit) -> bool {
    matches!(
        prior.unit(&unit.name).map(|prior_unit| &prior_unit.state),
        Some(PriorUnitState::Done {
            rerun_allowed: true,
            ..
        })
    )
}
