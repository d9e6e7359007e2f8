//! `apollo run --dry-run`: what a run would do, decided without running anything.
//!
//! Units are visited in topological order. A unit whose dependencies are all done (and not
//! about to run) gets the same decision the engine would make, from its input hash computed
//! now. A unit downstream of one that will run cannot be decided yet — its inputs include that
//! upstream's output — so the plan says which upstream it waits for.

use super::api::{EngineError, EngineOptions, OnInputChange};
use super::policy::{
    Decision, check_in_flight, decide, known_change, output_changes, reused_output_hash, scope,
};
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
    },
    /// Not part of this run (`--only` leaves it out).
    OutOfScope,
}

impl std::fmt::Display for Planned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Planned::Decided(decision) => decision.fmt(f),
            Planned::AfterUpstream {
                upstream,
                done_before: true,
                stops_if_changed: false,
            } => write!(
                f,
                "succeeded earlier; runs again only if the output of {} changes",
                upstream.join(", ")
            ),
            Planned::AfterUpstream {
                upstream,
                done_before: true,
                stops_if_changed: true,
            } => write!(
                f,
                "succeeded earlier; if the output of {} changes, the run stops for a human's verdict",
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
        }
    }
}

impl Planned {
    /// Whether the run would stop at this unit for a human's verdict (exit 5).
    pub fn stops_run(&self) -> bool {
        matches!(self, Planned::Decided(decision) if decision.stops_run())
    }

    /// Whether the unit would (or may) run.
    pub fn runs(&self) -> bool {
        match self {
            Planned::Decided(decision) => decision.runs(),
            Planned::AfterUpstream { .. } => true,
            Planned::OutOfScope => false,
        }
    }
}

/// The plan for every unit, in topological order. Fails as the run would before starting
/// anything (a non-idempotent unit in flight, an unknown `--only` unit).
pub fn dry_run(
    pipeline: &Pipeline,
    prior: &PriorState,
    options: &EngineOptions,
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
                && let Some(decision) =
                    known_change(pipeline, &dag, prior, unit_idx, options.on_input_change)
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
        let decision = match hash::input_components(unit, &pipeline.base_dir, &upstream) {
            Ok(inputs) => decide(
                prior,
                unit,
                &hash::combine_components(&inputs),
                &inputs,
                &output_changes(prior, unit, &pipeline.base_dir),
                options.on_input_change,
            ),
            Err(_) => Decision::FirstRun,
        };
        match decision {
            Decision::Reuse { .. } => {
                output_hashes[unit_idx] = Some(reused_output_hash(prior, unit, &pipeline.base_dir));
            }
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
