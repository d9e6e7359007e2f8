//! Resolving a pipeline's deadlines when a run starts (issue 40 item 3): the run's `deadline:`
//! and each unit's, from the run's start and the local time zone, into the instants
//! `run_started` records (journal format 1.9). A resume keeps what the first start resolved.

use apollo_core::Pipeline;
use apollo_core::deadline::to_journal;
use apollo_core::event::{RunDeadlines, UnitDeadline};
use chrono::{DateTime, TimeZone, Utc};

/// The run's deadline and its units' (in config order), resolved for a run starting at
/// `start` with clock times read in `zone`; `None` when the pipeline sets none.
pub(crate) fn resolve<Tz: TimeZone>(
    pipeline: &Pipeline,
    start: DateTime<Utc>,
    zone: &Tz,
) -> Option<Box<RunDeadlines>> {
    let run = pipeline
        .deadline
        .map(|deadline| to_journal(deadline.resolve(start, zone)));
    let units = pipeline
        .units
        .iter()
        .filter_map(|unit| {
            Some(UnitDeadline {
                unit: unit.name.clone(),
                at: to_journal(unit.deadline?.resolve(start, zone)),
            })
        })
        .collect::<Vec<_>>();
    (run.is_some() || !units.is_empty()).then(|| Box::new(RunDeadlines { run, units }))
}

/// [`resolve`] for a run starting now, by the clock its journal writer stamps records with.
pub(crate) fn at_start(
    pipeline: &Pipeline,
    options: &apollo_store::WriterOptions,
) -> Option<Box<RunDeadlines>> {
    let now = options
        .clock
        .as_ref()
        .map_or_else(Utc::now, |clock| clock());
    resolve(pipeline, now, &chrono::Local)
}
