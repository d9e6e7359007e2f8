//! What the engine tells the outside world while it runs: [`Notice`]s to an [`Observer`]
//! (progress output, `--explain`), and the notices it holds back until the journal holds
//! what they report.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::policy::Decision;
use crate::event::{UnitFinished, UnitSubmitted};
use crate::model::Pipeline;

/// What the engine tells its observer (progress output, `--explain`).
#[derive(Debug)]
#[non_exhaustive]
pub enum Notice<'a> {
    /// The engine decided whether `unit` runs.
    Decided {
        /// The unit.
        unit: &'a str,
        /// The decision and its reason.
        decision: &'a Decision,
    },
    /// An attempt is durably recorded as started and about to spawn.
    Started {
        /// The unit.
        unit: &'a str,
        /// The attempt number.
        attempt: u32,
    },
    /// A running attempt was handed to an external scheduler (its `unit_submitted` is
    /// durable).
    Submitted {
        /// The unit.
        unit: &'a str,
        /// The attempt number.
        attempt: u32,
        /// Which executor took it.
        executor: &'a str,
        /// The scheduler's id for the job.
        job_id: &'a str,
    },
    /// An attempt ended (its `unit_finished` is durable).
    Finished {
        /// The unit.
        unit: &'a str,
        /// The attempt's record.
        record: &'a UnitFinished,
        /// When the unit will be tried again, if it will.
        retry_in: Option<Duration>,
        /// Where the attempt's stdout and stderr are.
        log_dir: &'a Path,
    },
    /// The unit was reused from an earlier run: not run (its `unit_reused` is durable).
    Reused {
        /// The unit.
        unit: &'a str,
        /// The run whose attempt did the work.
        from_run: &'a str,
        /// That attempt.
        from_attempt: u32,
        /// The output files put back from the blob store to reuse it (sorted; usually none).
        restored: &'a [String],
    },
    /// The unit will not run: an upstream failed.
    Skipped {
        /// The unit.
        unit: &'a str,
        /// The failed upstream unit.
        upstream: &'a str,
    },
    /// The run is late (its `run_late` is durable): its predicted finish passed its deadline,
    /// or the deadline came with units not done. Told once per run, while it goes on.
    Late {
        /// The record.
        record: &'a crate::event::RunLate,
    },
    /// The unit did not run: its `when:` was false — an expression at load
    /// ([`crate::model::Unit::skip_when`]), or its `when: {command}` at the start of an
    /// attempt (then after that attempt's [`Notice::Finished`], whose record says
    /// [`UnitFinished::when_false`](crate::event::UnitFinished::when_false)).
    SkippedWhen {
        /// The unit.
        unit: &'a str,
        /// The condition.
        condition: &'a str,
    },
}

/// Receives [`Notice`]s from the engine thread.
pub trait Observer {
    /// Called for every notice, on the engine thread; keep it quick.
    fn notice(&mut self, notice: &Notice<'_>);

    /// Called before the engine waits for something to happen: a good moment to write out
    /// what the notices since the last call produced, in one go.
    fn flush(&mut self) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl Observer for NoObserver {
    fn notice(&mut self, _notice: &Notice<'_>) {}
}

/// A notice held back until the batch holding its record is durable: "ok" on the screen must
/// mean the journal holds it. Small (the records boxed): a run reusing thousands of units
/// holds a notice for each until a durable append.
pub(super) enum HeldNotice {
    Submitted {
        unit_idx: usize,
        record: Box<UnitSubmitted>,
    },
    Finished {
        unit_idx: usize,
        record: Box<UnitFinished>,
        retry_in: Option<Duration>,
        log_dir: PathBuf,
    },
    Skipped {
        unit_idx: usize,
        upstream: String,
    },
    SkippedWhen {
        unit_idx: usize,
    },
    Reused {
        unit_idx: usize,
        from_run: String,
        from_attempt: u32,
        restored: Vec<String>,
    },
}

impl HeldNotice {
    /// Tell `observer`, now that the record is durable.
    pub(super) fn deliver(self, pipeline: &Pipeline, observer: &mut dyn Observer) {
        match self {
            HeldNotice::Submitted { unit_idx, record } => observer.notice(&Notice::Submitted {
                unit: &pipeline.units[unit_idx].name,
                attempt: record.attempt,
                executor: &record.executor,
                job_id: &record.job_id,
            }),
            HeldNotice::Finished {
                unit_idx,
                record,
                retry_in,
                log_dir,
            } => observer.notice(&Notice::Finished {
                unit: &pipeline.units[unit_idx].name,
                record: &record,
                retry_in,
                log_dir: &log_dir,
            }),
            HeldNotice::Reused {
                unit_idx,
                from_run,
                from_attempt,
                restored,
            } => observer.notice(&Notice::Reused {
                unit: &pipeline.units[unit_idx].name,
                from_run: &from_run,
                from_attempt,
                restored: &restored,
            }),
            HeldNotice::Skipped { unit_idx, upstream } => observer.notice(&Notice::Skipped {
                unit: &pipeline.units[unit_idx].name,
                upstream: &upstream,
            }),
            HeldNotice::SkippedWhen { unit_idx } => {
                let unit = &pipeline.units[unit_idx];
                let command = unit
                    .when_command
                    .as_ref()
                    .map(crate::model::Command::display);
                observer.notice(&Notice::SkippedWhen {
                    unit: &unit.name,
                    condition: unit
                        .skip_when
                        .as_deref()
                        .or(command.as_deref())
                        .unwrap_or(""),
                });
            }
        }
    }
}
