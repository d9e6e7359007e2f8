//! Reading back what a run already did.

use apollo_core::PriorState;
use apollo_core::event::Event;
use apollo_store::{JournalReader, ReadOptions, RunId, StateDir};

use crate::error::RunnerError;
use crate::notice::{SessionObserver, report_warnings};

/// What a run's `run_started` recorded that a resume checks: its pipeline and its params.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    pub(crate) pipeline: Option<String>,
    pub(crate) params: apollo_core::config::Params,
}

/// Folds `run`'s journal into the state the engine resumes from, streaming; also what its
/// `run_started` recorded. Read warnings go to `observer`.
pub(crate) fn fold_prior(
    state: &StateDir,
    run: &RunId,
    observer: &mut dyn SessionObserver,
) -> Result<(PriorState, Recorded), RunnerError> {
    let run_dir = state.run_dir(run)?;
    let mut reader = JournalReader::open(run_dir.path(), ReadOptions::default())?;
    let mut prior = PriorState::empty();
    let mut recorded = Recorded::default();
    for record in &mut reader {
        let record = record?;
        if let Event::RunStarted(started) = &record.event {
            recorded.pipeline = Some(started.pipeline.clone());
            recorded.params = started.params.clone();
        }
        prior.apply(&record.event);
    }
    report_warnings(&reader.take_warnings(), observer);
    // Done units whose input lists were too large for a record: read so a changed input
    // can be explained component by component (an unreadable one is explained as such).
    prior.load_input_manifests(|reference| {
        apollo_store::read_input_manifest(run_dir.path(), reference)
            .map_err(|error| error.to_string())
    });
    Ok((prior, recorded))
}
