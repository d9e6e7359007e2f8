//! One run's records merged into its pipeline's successes (see the module docs of
//! `reuse_index`).

use foldhash::{HashMap, HashMapExt};

use apollo_core::event::{AttemptStatus, Event, InputComponent};

use super::Pipeline;
use crate::run_id::RunId;

/// What one run's records mean for its pipeline's successes, merged in journal order: a
/// succeeded `unit_finished` with its own `unit_started`, and a `unit_reused`.
pub(super) struct RunMerge {
    run: String,
    /// (unit, attempt) → the input hash and components its `unit_started` recorded.
    started: HashMap<(String, u32), (String, Vec<InputComponent>)>,
}

impl RunMerge {
    pub(super) fn new(run: &RunId) -> Self {
        Self {
            run: run.to_string(),
            started: HashMap::new(),
        }
    }

    /// Merge the run's next record into `pipeline`; whether the index file would change.
    pub(super) fn event(&mut self, pipeline: &mut Pipeline, event: Event) -> bool {
        match event {
            Event::UnitStarted(unit_started) => {
                self.started.insert(
                    (unit_started.unit, unit_started.attempt),
                    (unit_started.input_hash, unit_started.inputs),
                );
                false
            }
            // A job reattached to ran under the inputs of the attempt that submitted it
            // (`apollo_core::resume::PriorState` follows the same rule): its success counts
            // under those.
            Event::UnitSubmitted(submitted) => {
                if let Some(from) = submitted.reattached_from
                    && let Some(earlier) =
                        self.started.get(&(submitted.unit.clone(), from)).cloned()
                {
                    self.started
                        .insert((submitted.unit, submitted.attempt), earlier);
                }
                false
            }
            Event::UnitFinished(finished) => {
                // Its inputs changed under it: a success of its run, never reused by another.
                if apollo_core::hash_cache::inputs_changed_while_running(&finished) {
                    return false;
                }
                let (AttemptStatus::Succeeded, Some(output_hash)) =
                    (finished.status, finished.output_hash)
                else {
                    return false;
                };
                let Some((input_hash, inputs)) = self
                    .started
                    .remove(&(finished.unit.clone(), finished.attempt))
                else {
                    return false;
                };
                let run = (self.run.as_str(), finished.attempt);
                pipeline.merge(&finished.unit, run, &input_hash, &output_hash, inputs)
            }
            Event::UnitReused(reused) => {
                let run = (reused.from_run.as_str(), reused.from_attempt);
                let (input, output) = (&reused.input_hash, &reused.output_hash);
                pipeline.merge(&reused.unit, run, input, output, reused.inputs)
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use apollo_core::event::{UnitFinished, UnitStarted, UnitSubmitted};

    use super::*;
    use crate::reuse_index::Digest;

    fn started(attempt: u32, input_hash: &str) -> Event {
        Event::UnitStarted(UnitStarted {
            unit: "a".into(),
            attempt,
            input_hash: input_hash.into(),
            inputs: vec![],
            inputs_manifest: None,
        })
    }

    fn submitted(attempt: u32, reattached_from: Option<u32>) -> Event {
        Event::UnitSubmitted(UnitSubmitted {
            unit: "a".into(),
            attempt,
            executor: "slurm".into(),
            job_id: "7".into(),
            reattached_from,
            partition: None,
            nodes: None,
            mem_mib: None,
        })
    }

    fn succeeded(attempt: u32) -> Event {
        Event::UnitFinished(UnitFinished {
            unit: "a".into(),
            attempt,
            status: AttemptStatus::Succeeded,
            exit: None,
            failed_phase: None,
            timed_out: false,
            duration_ms: 1,
            queued_ms: 0,
            output_hash: Some("ab".repeat(32)),
            stdout_bytes: 0,
            stderr_bytes: 0,
            user_cpu_ms: 0,
            sys_cpu_ms: 0,
            max_rss_kib: 0,
            leftovers_killed: 0,
            phases: vec![],
            error: None,
        })
    }

    /// Issue 36 item 5: a job reattached to after apollo's death made its outputs from the
    /// inputs its submitting attempt hashed; an input edited while apollo was dead must not
    /// make those outputs reusable under the new input hash.
    #[test]
    fn a_reattached_success_is_indexed_under_the_inputs_its_job_started_with() {
        let (old, new) = ("11".repeat(32), "22".repeat(32));
        let run = RunId::from_parts(chrono::Utc::now(), 1);
        let mut pipeline = Pipeline::default();
        let mut merge = RunMerge::new(&run);
        for event in [
            started(1, &old),
            submitted(1, None),
            started(2, &new),
            submitted(2, Some(1)),
            succeeded(2),
        ] {
            merge.event(&mut pipeline, event);
        }
        let unit = pipeline.units.find("a").unwrap();
        assert!(pipeline.by_input.contains_key(&(unit, Digest::new(&old))));
        assert!(!pipeline.by_input.contains_key(&(unit, Digest::new(&new))));
    }
}
