//! Earlier successes for the reuse tests, from a first run's events.

use std::collections::HashMap;

use super::*;
use crate::event::UnitFinished;

/// Earlier successes, from a first run's events, as apollo-store's index would give them.
pub(super) struct EventsSource {
    by_unit: HashMap<String, ReuseCandidate>,
}

impl EventsSource {
    pub(super) fn from_events(run_id: &str, events: &[Event]) -> Self {
        let mut started = HashMap::new();
        let mut by_unit = HashMap::new();
        for event in events {
            match event {
                Event::UnitStarted(event) => {
                    started.insert((event.unit.clone(), event.attempt), event.clone());
                }
                Event::UnitFinished(UnitFinished {
                    unit,
                    attempt,
                    status: AttemptStatus::Succeeded,
                    output_hash: Some(output_hash),
                    ..
                }) => {
                    let start = &started[&(unit.clone(), *attempt)];
                    by_unit.insert(
                        unit.clone(),
                        ReuseCandidate {
                            run_id: run_id.to_owned(),
                            attempt: *attempt,
                            input_hash: start.input_hash.clone(),
                            inputs: start.inputs.clone(),
                            output_hash: output_hash.clone(),
                            restored: Vec::new(),
                        },
                    );
                }
                _ => {}
            }
        }
        Self { by_unit }
    }
}

impl ReuseSource for EventsSource {
    fn find(&self, unit: &str, input_hash: &str) -> Option<ReuseCandidate> {
        self.by_unit
            .get(unit)
            .filter(|candidate| candidate.input_hash == input_hash)
            .cloned()
    }

    fn latest(&self, unit: &str) -> Option<ReuseCandidate> {
        self.by_unit.get(unit).cloned()
    }
}
