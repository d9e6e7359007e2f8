//! The run a reproduction (or a bisect step) writes: its `run_started` and `run_reproduces`
//! under the state directory's lock, then the engine on its scratch pipeline.

use apollo_core::engine::{self, EngineOptions, NoObserver, UnitResult};
use apollo_core::event::{AttemptStatus, Event, RunKind, RunReproduces, RunStarted};
use apollo_core::{CancelToken, Executor, Pipeline, PriorState};
use apollo_store::{Durability, JournalWriter, RunId, StateDir, StateLock};

use super::Recorded;
use crate::error::RunnerError;
use crate::logs::RunLogs;

/// A run in a scratch directory: of which kind, after which recorded attempt.
pub(crate) struct ScratchRun<'r> {
    /// `reproduction` or `bisect` (its identity is the kind's prefix and the original's).
    pub(crate) kind: RunKind,
    /// What the original run's journal says (its identity, config path and params).
    pub(crate) recorded: &'r Recorded,
    /// The attempt it starts from, and the scratch directory.
    pub(crate) reproduces: RunReproduces,
    /// How its journal is written.
    pub(crate) durability: Durability,
}

impl ScratchRun<'_> {
    /// Writes the run (under the state directory's lock, `lock`: held by the caller across
    /// a bisect's steps, so no helper process of a step's attempt that outlives it for an
    /// instant holds it against the next) and runs the engine on `pipeline`:
    /// the run's id, each of its units' status, in `pipeline`'s order (`interrupted` for
    /// one that never ended: cut off, or not run because an upstream unit failed), and its
    /// journal, still open for what is recorded after the run (a reproduction's verdict).
    pub(crate) fn run(
        &self,
        state: &StateDir,
        lock: &mut StateLock,
        pipeline: &Pipeline,
        executor: &dyn Executor,
        cancel: &CancelToken,
    ) -> Result<(RunId, Vec<AttemptStatus>, JournalWriter), RunnerError> {
        let definition_hash = state.put_blob_streamed(lock, None, |out| {
            crate::session::write_definition_snapshot(pipeline, out)
        })?;
        let run_id = state.new_run_id();
        let run_dir = state.create_run(&run_id)?;
        // The segment size of the pipeline it reproduces (its snapshot's), the durability asked.
        let options = crate::pipeline_writer_options(pipeline).durability(self.durability);
        let mut journal = JournalWriter::create(run_dir.path(), run_id.as_str(), options)?;
        journal.watch_lock(lock)?;
        let recorded = self.recorded;
        let original_identity =
            (recorded.identity.clone()).unwrap_or_else(|| recorded.pipeline.clone());
        let prefix = match self.kind {
            RunKind::Bisect => "bisect",
            _ => "reproduce",
        };
        journal.append_batch(&[
            Event::RunStarted(RunStarted {
                run_id: run_id.to_string(),
                pipeline: pipeline.name.clone(),
                config_path: recorded.config_path.clone(),
                // What a reproduction runs is the snapshot itself.
                config_hash: definition_hash.clone(),
                definition_hash,
                apollo_version: env!("CARGO_PKG_VERSION").to_owned(),
                host: String::new(),
                pid: std::process::id(),
                units: (pipeline.units.iter())
                    .map(|unit| unit.name.clone())
                    .collect(),
                identity: Some(format!("{prefix}:{original_identity}")),
                params: recorded.params.clone(),
                run_kind: self.kind,
                durability: self.durability,
                // A reproduction (or a bisect's step) is not held to the run's deadline.
                deadlines: None,
            }),
            Event::RunReproduces(self.reproduces.clone()),
        ])?;
        lock.set_run(&run_id)?;
        let blobs = state.blob_store(self.durability)?;
        let options =
            EngineOptions::new(run_id.as_str(), pipeline).capture(std::sync::Arc::new(blobs));
        let logs = RunLogs { run: run_dir };
        let report = engine::run(
            pipeline,
            &PriorState::empty(),
            &options,
            &mut journal,
            executor,
            &logs,
            cancel,
            &mut NoObserver,
        )
        .map_err(|source| RunnerError::Engine {
            run: run_id.clone(),
            source,
        })?;
        let statuses = (pipeline.units.iter())
            .map(|unit| {
                let result = (report.units.iter())
                    .find(|(name, _)| *name == unit.name)
                    .map(|(_, result)| result);
                match result {
                    Some(UnitResult::Succeeded { .. }) => AttemptStatus::Succeeded,
                    Some(UnitResult::SelfSkipped { .. }) => AttemptStatus::Skipped,
                    // A `when: {command}` false in the scratch tree ends the attempt `skipped`
                    // (its `unit_finished`, which every view shows), not interrupted (issue 35,
                    // found by tests/e2e/agreement.rs seed 6).
                    Some(UnitResult::SkippedWhen { .. }) => AttemptStatus::Skipped,
                    Some(UnitResult::Failed { .. }) => AttemptStatus::Failed,
                    _ => AttemptStatus::Interrupted,
                }
            })
            .collect();
        Ok((run_id, statuses, journal))
    }
}
