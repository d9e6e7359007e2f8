//! Reading back what a run already did.

use apollo_core::PriorState;
use apollo_core::event::Event;
use apollo_store::{JournalReader, ReadOptions, RunId, StateDir};

use crate::error::RunnerError;
use crate::notice::{SessionObserver, report_warnings};
use apollo_store::process::{host_name, is_live_apollo};

/// What a run's `run_started` recorded that a resume checks: its pipeline and its params.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    pub(crate) pipeline: Option<String>,
    pub(crate) params: apollo_core::config::Params,
}

/// A run's journal, read once: the state the engine resumes from, what its `run_started`
/// recorded, and the reader, at the journal's end, for the writer to take over
/// ([`JournalWriter::open_for_append_after`](apollo_store::JournalWriter::open_for_append_after)).
pub(crate) struct Folded {
    pub(crate) prior: PriorState,
    pub(crate) recorded: Recorded,
    /// Its read warnings (a torn tail) not taken yet.
    pub(crate) reader: JournalReader,
}

/// Folds `run`'s journal into the state the engine resumes from, streaming; also what its
/// `run_started` recorded. Refuses ([`RunnerError::RunInUse`]) a run that the apollo which last
/// started or resumed it, on this host, is still running: the lock normally says so; this
/// catches a lock file deleted under a live apollo (which notices only at its next commit),
/// so two apollos never run one run's units. Read warnings stay in the returned reader.
pub(crate) fn fold_journal(state: &StateDir, run: &RunId) -> Result<Folded, RunnerError> {
    let run_dir = state.run_dir(run)?;
    let mut reader = JournalReader::open(run_dir.path(), ReadOptions::default())?;
    let mut prior = PriorState::empty();
    let mut recorded = Recorded::default();
    let mut last_opener = None;
    let mut problem = None;
    for record in &mut reader {
        let record = match record {
            Ok(record) => record,
            Err(error) => {
                problem = Some(error);
                break;
            }
        };
        match &record.event {
            Event::RunStarted(started) => {
                recorded.pipeline = Some(started.pipeline.clone());
                recorded.params = started.params.clone();
                last_opener = Some((started.host.clone(), started.pid, record.ts.timestamp()));
            }
            Event::RunResumed(resumed) => {
                last_opener = Some((resumed.host.clone(), resumed.pid, record.ts.timestamp()));
            }
            _ => {}
        }
        prior.apply(&record.event);
    }
    // Checked even when the journal could not be read to its end: a live apollo's run is
    // in use whatever else is wrong with it.
    if let Some((host, pid, recorded_at)) = last_opener
        && host == host_name()
        && is_live_apollo(pid, recorded_at)
    {
        return Err(RunnerError::RunInUse {
            run: run.clone(),
            pid,
            host,
        });
    }
    if let Some(error) = problem {
        return Err(error.into());
    }
    // Done units whose input lists were too large for a record: read so a changed input
    // can be explained component by component (an unreadable one is explained as such).
    prior.load_input_manifests(|reference| {
        apollo_store::read_input_manifest(run_dir.path(), reference)
            .map_err(|error| error.to_string())
    });
    Ok(Folded {
        prior,
        recorded,
        reader,
    })
}

/// [`fold_journal`] for a caller that does not append: read warnings go to `observer`.
pub(crate) fn fold_prior(
    state: &StateDir,
    run: &RunId,
    observer: &mut dyn SessionObserver,
) -> Result<(PriorState, Recorded), RunnerError> {
    let mut folded = fold_journal(state, run)?;
    report_warnings(&folded.reader.take_warnings(), observer);
    Ok((folded.prior, folded.recorded))
}

/// The state directory's lock: at once, or (with `wait`) after saying that it waits.
pub(crate) fn acquire_lock(
    state: &StateDir,
    wait: bool,
    observer: &mut dyn SessionObserver,
) -> Result<apollo_store::StateLock, RunnerError> {
    match state.lock(false) {
        Err(error) if wait && error.kind() == apollo_store::ErrorKind::Locked => {
            observer.notice(&crate::notice::SessionNotice::WaitingForLock);
            Ok(state.lock(true)?)
        }
        other => Ok(other?),
    }
}
