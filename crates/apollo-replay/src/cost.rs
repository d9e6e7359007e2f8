//! A run's cost, folded from its records (issue 40, DESIGN §18 "Cost and deadlines"): each
//! attempt's recorded use priced by the table of the definition snapshot it ran under, summed
//! per unit and per run, with **wasted** (failed and cut-off attempts) and **saved** (reused
//! units, at the price of their original attempt) beside.
//!
//! This crate reads records only: the caller hands in the price table of each definition
//! snapshot and the price of a reused unit's original attempt (apollo-runner reads both from
//! the state directory).

use apollo_core::UnitState;
use apollo_core::cost::{CostTable, Money, SlurmRequest, Usage};
use apollo_core::event::AttemptStatus;
use serde::Serialize;

use crate::timeline::{Attempt, AttemptState, Reused, Timeline, UnitTimeline};

/// A run's cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunCost {
    /// The currency's name, when the price table names one.
    pub currency: Option<String>,
    /// Every attempt of the run, priced.
    pub total: Money,
    /// What the failed and cut-off attempts cost (part of `total`).
    pub wasted: Money,
    /// What the reused units cost when their original attempts ran (not part of `total`).
    pub saved: Money,
    /// Reused units whose original attempt could not be priced (its run gone, or run without
    /// a price table): left out of `saved`.
    pub saved_unknown: u32,
    /// Each unit the run has recorded something for, in the run's order.
    pub units: Vec<UnitCost>,
}

/// One unit's cost in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct UnitCost {
    /// The unit.
    pub unit: String,
    /// Its attempts' cost, summed.
    pub total: Money,
    /// What its failed and cut-off attempts cost.
    pub wasted: Money,
    /// When it was reused: what its original attempt cost (`None` when that is unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved: Option<Money>,
    /// Each attempt, in order.
    pub attempts: Vec<AttemptCost>,
}

/// One attempt's cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AttemptCost {
    /// The attempt number.
    pub attempt: u32,
    /// Its price.
    pub cost: Money,
    /// Whether it was wasted: it failed, timed out, was interrupted or was cut off.
    pub wasted: bool,
}

impl RunCost {
    /// The cost of the unit called `name`.
    pub fn unit(&self, name: &str) -> Option<&UnitCost> {
        self.units.iter().find(|unit| unit.unit == name)
    }

    /// `amount` for people ([`Money::human`]) and the currency (`0.01250 EUR`).
    pub fn show(&self, amount: Money) -> String {
        match &self.currency {
            Some(currency) => format!("{} {currency}", amount.human()),
            None => amount.human(),
        }
    }
}

/// What an attempt used, from its records: CPU time, largest resident set and wall time of a
/// local attempt; for a cluster job the request recorded at submission and the wall time of
/// its phases (the job's run time, not its time in the queue). An attempt without its end
/// (apollo died) has only its wall time.
pub fn attempt_usage(attempt: &Attempt) -> Usage {
    let Some(outcome) = &attempt.outcome else {
        let wall_ms = attempt.duration_ms();
        return match &attempt.job {
            Some(job) => Usage::slurm(0, wall_ms, slurm_request(job)),
            None => Usage::local(0, 0, wall_ms),
        };
    };
    let cpu_ms = outcome.user_cpu_ms.saturating_add(outcome.sys_cpu_ms);
    match &attempt.job {
        Some(job) => {
            let phases = &outcome.phases;
            let wall_ms = match (phases.first(), phases.last()) {
                (Some(first), Some(last)) => {
                    (last.offset_ms + last.duration_ms).saturating_sub(first.offset_ms)
                }
                _ => 0,
            };
            Usage::slurm(cpu_ms, wall_ms, slurm_request(job))
        }
        None => Usage::local(cpu_ms, outcome.max_rss_kib, outcome.duration_ms),
    }
}

fn slurm_request(job: &apollo_core::event::UnitSubmitted) -> SlurmRequest {
    let mut request = SlurmRequest::default();
    request.partition.clone_from(&job.partition);
    request.nodes = job.nodes.unwrap_or(1);
    request.mem_mib = job.mem_mib;
    request
}

impl Timeline {
    /// The run's cost, or `None` when no definition snapshot of the run has a price table
    /// (then no view shows a cost). `table` gives the price table of a definition snapshot
    /// by its hash; `saved` the price of a reused unit's original attempt.
    pub fn cost(
        &self,
        table: &dyn Fn(&str) -> Option<CostTable>,
        saved: &dyn Fn(&Reused) -> Option<Money>,
    ) -> Option<RunCost> {
        let tables: Vec<Option<CostTable>> = (self.facts.definitions.iter())
            .map(|hash| table(hash))
            .collect();
        let latest = tables.iter().rev().flatten().next()?;
        let mut run = RunCost {
            currency: latest.currency.clone(),
            total: Money::ZERO,
            wasted: Money::ZERO,
            saved: Money::ZERO,
            saved_unknown: 0,
            units: Vec::new(),
        };
        for unit in self.units.iter().filter(|unit| !unit.is_empty()) {
            let unit_cost = self.unit_cost(unit, &tables, saved);
            run.total += unit_cost.total;
            run.wasted += unit_cost.wasted;
            match (&unit.reused, unit_cost.saved) {
                (Some(_), Some(amount)) => run.saved += amount,
                (Some(_), None) => run.saved_unknown += 1,
                (None, _) => {}
            }
            run.units.push(unit_cost);
        }
        Some(run)
    }

    fn unit_cost(
        &self,
        unit: &UnitTimeline,
        tables: &[Option<CostTable>],
        saved: &dyn Fn(&Reused) -> Option<Money>,
    ) -> UnitCost {
        let running = self.state_of(unit) == UnitState::Running;
        let n_attempts = unit.attempts.len();
        let attempts: Vec<AttemptCost> = (unit.attempts.iter().enumerate())
            .map(|(index, attempt)| {
                // The process that started it: one more for each resume before it.
                let process = (self.resumes.iter())
                    .filter(|resume| resume.seq < attempt.seq)
                    .count();
                let cost = (tables.get(process).cloned().flatten())
                    .map_or(Money::ZERO, |table| table.price(&attempt_usage(attempt)));
                let still_running = running && index + 1 == n_attempts;
                AttemptCost {
                    attempt: attempt.number,
                    cost,
                    wasted: is_wasted(attempt.state) && !still_running,
                }
            })
            .collect();
        UnitCost {
            unit: unit.name.clone(),
            total: attempts.iter().map(|attempt| attempt.cost).sum(),
            wasted: (attempts.iter())
                .filter(|attempt| attempt.wasted)
                .map(|attempt| attempt.cost)
                .sum(),
            saved: unit.reused.as_ref().and_then(saved),
            attempts,
        }
    }
}

/// Whether an attempt that ended so is wasted work: it failed, timed out, was interrupted or
/// has no end (cut off).
fn is_wasted(state: AttemptState) -> bool {
    match state {
        AttemptState::Finished(status) => matches!(
            status,
            AttemptStatus::Failed | AttemptStatus::TimedOut | AttemptStatus::Interrupted
        ),
        AttemptState::Unfinished => true,
    }
}

#[cfg(test)]
mod tests;
