//! A run's cost (issue 40): the run model's [`Timeline::cost`] with what it needs from the
//! state directory — each definition snapshot's price table, and for a reused unit the price
//! of its original attempt in the run it was reused from (priced by that run's own table).

use std::cell::RefCell;
use std::collections::HashMap;

use apollo_core::cost::{CostTable, Money};
use apollo_replay::{Reused, RunCost, Timeline};
use apollo_store::{RunId, StateDir};

/// What a cost fold has read, kept for the next run's (`apollo runs`, `stats`): the price
/// table of each definition snapshot, and the cost of each run reused from.
#[derive(Debug, Default)]
pub struct CostReads {
    tables: RefCell<HashMap<String, Option<CostTable>>>,
    sources: RefCell<HashMap<String, Option<RunCost>>>,
}

impl CostReads {
    /// Nothing read yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the definition snapshot `hash` has a price table.
    pub fn has_table(&self, state: &StateDir, hash: &str) -> bool {
        self.table(state, hash).is_some()
    }

    /// The price table of the definition snapshot `hash` (`None`: none, or its blob is gone).
    fn table(&self, state: &StateDir, hash: &str) -> Option<CostTable> {
        if let Some(table) = self.tables.borrow().get(hash) {
            return table.clone();
        }
        let table = read_table(state, hash);
        self.tables
            .borrow_mut()
            .insert(hash.to_owned(), table.clone());
        table
    }

    /// The price of the attempt a reused unit stands for, in the run it came from.
    fn saved(&self, state: &StateDir, unit: &str, reused: &Reused) -> Option<Money> {
        let cached = self.sources.borrow().contains_key(&reused.from_run);
        if !cached {
            let source = (reused.from_run.parse::<RunId>().ok())
                .and_then(|run| super::run_model(state, &run).ok())
                .and_then(|model| self.price(state, &model.timeline, false));
            self.sources
                .borrow_mut()
                .insert(reused.from_run.clone(), source);
        }
        let sources = self.sources.borrow();
        let source = sources.get(&reused.from_run)?.as_ref()?;
        let attempt = (source.unit(unit)?.attempts.iter())
            .find(|attempt| attempt.attempt == reused.from_attempt)?;
        Some(attempt.cost)
    }

    fn price(&self, state: &StateDir, timeline: &Timeline, with_saved: bool) -> Option<RunCost> {
        // Which unit a reuse is about: the callback sees the record only.
        let reused_units: HashMap<u64, &str> = (timeline.units.iter())
            .filter_map(|unit| Some((unit.reused.as_ref()?.seq, unit.name.as_str())))
            .collect();
        timeline.cost(&|hash| self.table(state, hash), &|reused| {
            let unit = reused_units.get(&reused.seq)?;
            // A source run's own reuses are not followed: its attempts are what is priced.
            with_saved
                .then(|| self.saved(state, unit, reused))
                .flatten()
        })
    }
}

/// The run's cost, or `None` when it ran without a price table (`cost:`). Reads the run's
/// definition snapshots and, for its reused units, the runs they came from.
pub fn run_cost(state: &StateDir, timeline: &Timeline, reads: &CostReads) -> Option<RunCost> {
    reads.price(state, timeline, true)
}

/// The `cost:` of the definition snapshot `hash`, read without building the whole pipeline.
fn read_table(state: &StateDir, hash: &str) -> Option<CostTable> {
    #[derive(serde::Deserialize)]
    struct CostOnly {
        #[serde(default)]
        cost: Option<CostTable>,
    }
    let bytes = state.read_blob(hash).ok()?;
    serde_json::from_slice::<CostOnly>(&bytes).ok()?.cost
}

/// One unit's cost over a pipeline's runs (`apollo stats`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct UnitCostStats {
    /// The unit.
    pub unit: String,
    /// Runs (of those priced) in which it ran an attempt.
    pub runs: usize,
    /// Its cost per such run: `total` / `runs`, rounded half up to a billionth.
    pub mean: Money,
    /// Its attempts' cost over those runs.
    pub total: Money,
    /// What its failed and cut-off attempts cost (part of `total`).
    pub wasted: Money,
    /// What its reuses saved (its original attempts' cost; not part of `total`).
    pub saved: Money,
}

/// The cost of each unit over `runs` (a pipeline's run models), with the currency of the
/// latest priced run; `None` when none of them ran with a price table.
pub fn unit_cost_stats<'t>(
    state: &StateDir,
    runs: impl IntoIterator<Item = &'t Timeline>,
    reads: &CostReads,
) -> Option<(Option<String>, Vec<UnitCostStats>)> {
    let mut by_unit: std::collections::BTreeMap<String, UnitCostStats> = Default::default();
    let mut currency = None;
    let mut priced = false;
    for timeline in runs {
        let Some(cost) = run_cost(state, timeline, reads) else {
            continue;
        };
        priced = true;
        currency.clone_from(&cost.currency);
        for unit in cost.units {
            let stats = by_unit
                .entry(unit.unit.clone())
                .or_insert_with(|| UnitCostStats {
                    unit: unit.unit.clone(),
                    runs: 0,
                    mean: Money::ZERO,
                    total: Money::ZERO,
                    wasted: Money::ZERO,
                    saved: Money::ZERO,
                });
            stats.runs += usize::from(!unit.attempts.is_empty());
            stats.total += unit.total;
            stats.wasted += unit.wasted;
            stats.saved += unit.saved.unwrap_or_default();
        }
    }
    let units = (by_unit.into_values())
        .map(|mut stats| {
            let runs = i128::try_from(stats.runs).unwrap_or(i128::MAX).max(1);
            stats.mean = Money::from_nanos((stats.total.nanos() + runs / 2) / runs);
            stats
        })
        .collect();
    priced.then_some((currency, units))
}
