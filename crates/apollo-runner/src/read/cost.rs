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
