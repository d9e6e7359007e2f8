//! [`mark`]: record a human's verdict on a unit whose attempt was cut off (DESIGN §7), or
//! allow a done non-idempotent unit whose inputs changed to run again (§17), so the next
//! resume proceeds.

use apollo_core::event::{AttemptStatus, Event, UnitMarked, Verdict};
use apollo_core::resume::PriorUnitState;
use apollo_store::{JournalWriter, RunId, StateDir, WriterOptions};

use crate::error::RunnerError;
use crate::notice::{SessionObserver, report_warnings};
use crate::state::fold_prior;

/// A verdict to record: build it with [`MarkRequest::new`] and the setters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MarkRequest {
    /// The unit.
    pub unit: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Why, for whoever reads the journal later.
    pub note: Option<String>,
    /// Who decided (default: `$USER`, else `$LOGNAME`, else `unknown`).
    pub by: String,
    /// Record the verdict even though the unit's last attempt has a recorded outcome (a
    /// [`Verdict::Rerun`] on a unit that succeeded needs no force: that is what it is for).
    pub force: bool,
}

impl MarkRequest {
    /// `verdict` on `unit`, by the current user, without a note, not forced.
    pub fn new(unit: impl Into<String>, verdict: Verdict) -> Self {
        let by = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .unwrap_or_else(|_| "unknown".to_owned());
        Self {
            unit: unit.into(),
            verdict,
            note: None,
            by,
            force: false,
        }
    }

    /// Why, for whoever reads the journal later.
    pub fn note(mut self, note: Option<String>) -> Self {
        self.note = note;
        self
    }

    /// Who decided.
    pub fn by(mut self, by: impl Into<String>) -> Self {
        self.by = by.into();
        self
    }

    /// Record the verdict even though the unit's last attempt has a recorded outcome.
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }
}

/// What a unit's records said before the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PreviousOutcome {
    /// Its last attempt was in flight when apollo stopped (what a verdict is for).
    InFlight,
    /// Its last attempt was interrupted (Ctrl-C, SIGTERM) after its processes started.
    Interrupted,
    /// Its last attempt was cut off by its timeout.
    TimedOut,
    /// Its last attempt was cut off by a signal apollo did not send (killed from outside, out
    /// of memory, a Slurm job gone without its result).
    Killed,
    /// A human had already marked it succeeded.
    MarkedSucceeded,
    /// It had succeeded (or skipped itself).
    Succeeded,
    /// Its last attempt had not succeeded.
    NotDone,
}

impl std::fmt::Display for PreviousOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PreviousOutcome::InFlight => "was in flight when apollo stopped",
            PreviousOutcome::Interrupted => "was interrupted when apollo was stopped",
            PreviousOutcome::TimedOut => "was cut off by its timeout",
            PreviousOutcome::Killed => "was cut off by a signal apollo did not send",
            PreviousOutcome::MarkedSucceeded => "was already marked succeeded",
            PreviousOutcome::Succeeded => "had succeeded",
            PreviousOutcome::NotDone => "had not succeeded",
        })
    }
}

/// A recorded verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Marked {
    /// The attempt the verdict is about (the unit's last).
    pub attempt: u32,
    /// What its records said before.
    pub previous: PreviousOutcome,
}

/// Appends `request`'s verdict on the unit's last attempt to `run`'s journal (durably), under
/// the state directory's lock. Refuses a unit the run has no record of, and — unless forced —
/// a unit whose last attempt has a recorded outcome, except [`Verdict::Rerun`] on a unit that
/// succeeded. Store warnings go to `observer`.
pub fn mark(
    state: &StateDir,
    run: &RunId,
    request: &MarkRequest,
    observer: &mut dyn SessionObserver,
) -> Result<Marked, RunnerError> {
    let _lock = state.lock(false)?;
    let (prior, _) = fold_prior(state, run, observer)?;
    let Some(unit) = prior.unit(&request.unit) else {
        return Err(RunnerError::UnitNotStarted {
            run: run.clone(),
            unit: request.unit.clone(),
        });
    };
    let attempt = unit.last_attempt;
    let previous = match &unit.state {
        PriorUnitState::InFlight { .. } => PreviousOutcome::InFlight,
        PriorUnitState::CutOff {
            status: AttemptStatus::TimedOut,
            ..
        } => PreviousOutcome::TimedOut,
        PriorUnitState::CutOff {
            status: AttemptStatus::Failed,
            ..
        } => PreviousOutcome::Killed,
        PriorUnitState::CutOff { .. } => PreviousOutcome::Interrupted,
        PriorUnitState::Done { marked: true, .. } => PreviousOutcome::MarkedSucceeded,
        PriorUnitState::Done { .. } => PreviousOutcome::Succeeded,
        PriorUnitState::NotDone => PreviousOutcome::NotDone,
    };
    let cut_off = matches!(
        previous,
        PreviousOutcome::InFlight
            | PreviousOutcome::Interrupted
            | PreviousOutcome::TimedOut
            | PreviousOutcome::Killed
    );
    let rerun_of_done = request.verdict == Verdict::Rerun
        && matches!(
            previous,
            PreviousOutcome::Succeeded | PreviousOutcome::MarkedSucceeded
        );
    if !cut_off && !rerun_of_done && !request.force {
        return Err(RunnerError::OutcomeRecorded {
            run: run.clone(),
            unit: request.unit.clone(),
            attempt,
            previous,
        });
    }
    let run_dir = state.run_dir(run)?;
    // The run's journal keeps the segment size (and durability) its pipeline asked for: the
    // definition snapshot the run recorded says which; without it, the store's defaults.
    let options = crate::read::definition(state, run)
        .map_or_else(WriterOptions::default, |pipeline| {
            crate::pipeline_writer_options(&pipeline)
        });
    let (mut journal, recovery) = JournalWriter::open_for_append(run_dir.path(), options)?;
    report_warnings(&recovery.warnings, observer);
    journal.append_batch(&[Event::UnitMarked(UnitMarked {
        unit: request.unit.clone(),
        attempt,
        verdict: request.verdict,
        by: request.by.clone(),
        note: request.note.clone(),
    })])?;
    Ok(Marked { attempt, previous })
}
