//! Starting attempts: deciding for each ready unit whether it runs (the resume policy) and
//! queuing its `unit_started` in the next batch.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Scheduler;
use crate::engine::api::UnitResult;
use crate::engine::observer::{Notice, Observer};
use crate::engine::policy::{Decision, decide, output_changes, reused_output_hash};
use crate::engine::units::State;
use crate::engine::workers::{Done, Job, failed_to_start};
use crate::event::UnitStarted;
use crate::hash;

impl Scheduler<'_> {
    /// Decide and queue the `unit_started` of ready units, up to the pacer's commit limit
    /// (`max_parallel` running plus a lookahead per worker). The attempts go into the batch at
    /// once, so a stop during this very call (a unit whose inputs changed, an input that
    /// cannot be read) takes them back with the rest.
    pub(super) fn start_ready(&mut self, observer: &mut dyn Observer) {
        let max_parallel = self.options.max_parallel.max(1);
        let limit = self.pacer.commit_limit(max_parallel);
        // A worker raises `halt` itself when an attempt fails for good (see `Job`).
        while !self.stop_starting && !self.halt.load(Ordering::SeqCst) && self.running < limit {
            let Some(unit_idx) = self.queue.peek() else {
                break;
            };
            // Only idempotent units are committed ahead: a non-idempotent unit's
            // `unit_started` must mean its process is about to exist, because after a crash
            // that record makes apollo stop and ask a human.
            let ahead = self.running >= max_parallel;
            if ahead && !self.pipeline.units[unit_idx].idempotent {
                break;
            }
            self.queue.pop();
            let unit = &self.pipeline.units[unit_idx];
            let upstream: Vec<(&str, &str)> = self
                .dag
                .deps(unit_idx)
                .iter()
                .map(|&dep_idx| {
                    (
                        self.pipeline.units[dep_idx].name.as_str(),
                        self.units[dep_idx].output_hash.as_deref().unwrap_or(""),
                    )
                })
                .collect();
            let components = hash::input_components(unit, &self.pipeline.base_dir, &upstream);
            let (inputs, hash_error) = match components {
                Ok(inputs) => (inputs, None),
                Err(error) => (Vec::new(), Some(error.to_string())),
            };
            let input_hash = hash::combine_components(&inputs);
            if self.units[unit_idx].attempts_here == 0 && hash_error.is_none() {
                let output_changes = output_changes(self.prior, unit, &self.pipeline.base_dir);
                let decision = decide(
                    self.prior,
                    unit,
                    &input_hash,
                    &inputs,
                    &output_changes,
                    self.options.on_input_change,
                );
                observer.notice(&Notice::Decided {
                    unit: &unit.name,
                    decision: &decision,
                });
                match decision {
                    Decision::Reuse { .. } => {
                        self.reuse(unit_idx);
                        continue;
                    }
                    Decision::ChangedNeedsVerdict { .. } => {
                        self.input_change_error = decision.stop_error(&unit.name);
                        self.stop();
                        break;
                    }
                    _ => {}
                }
            }
            let attempt = self.units[unit_idx].begin_attempt();
            let started = UnitStarted {
                unit: unit.name.clone(),
                attempt,
                input_hash,
                inputs,
            };
            self.running += 1;
            if let Some(error) = hash_error {
                // The attempt cannot start: record it as failed without spawning.
                self.batch.push_start(started, None);
                observer.notice(&Notice::Started {
                    unit: &unit.name,
                    attempt,
                });
                self.finish_attempt(Done {
                    worker: None,
                    unit_idx,
                    attempt,
                    queued: Duration::ZERO,
                    log_dir: PathBuf::new(),
                    outcome: failed_to_start(error),
                    outputs: None,
                    awaits_ack: false,
                });
                continue;
            }
            let halt_on_failure =
                !self.options.keep_going && self.units[unit_idx].attempts_here > unit.retries;
            let job = Job {
                unit_idx,
                attempt,
                committed_at: Instant::now(),
                halt_on_failure,
            };
            self.batch.push_start(started, Some(job));
        }
    }

    fn reuse(&mut self, unit_idx: usize) {
        let unit = &self.pipeline.units[unit_idx];
        let slot = &mut self.units[unit_idx];
        slot.output_hash = Some(reused_output_hash(
            self.prior,
            unit,
            &self.pipeline.base_dir,
        ));
        slot.state = State::Done;
        slot.result = Some(UnitResult::Reused);
        self.queue.complete(self.dag, unit_idx);
    }
}
