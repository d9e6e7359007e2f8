//! `apollo mark RUN UNIT --succeeded|--failed`: record a human's verdict on a unit whose
//! attempt was cut off, so the next `apollo run` can proceed (DESIGN §7).

use std::io::Write;
use std::path::Path;

use apollo_core::PriorState;
use apollo_core::event::{Event, UnitMarked, Verdict};
use apollo_core::resume::PriorUnitState;
use apollo_store::{JournalWriter, WriterOptions};

use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::state;

/// Arguments of `apollo mark`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("verdict").required(true).args(["succeeded", "failed"])))]
pub(crate) struct MarkArgs {
    /// The run: an id, a unique prefix, `latest` or `latest~N`
    #[arg(value_name = "RUN")]
    pub(crate) run: String,
    /// The unit
    #[arg(value_name = "UNIT")]
    pub(crate) unit: String,
    /// Its work is complete: do not run it again
    #[arg(long)]
    pub(crate) succeeded: bool,
    /// It must run again
    #[arg(long)]
    pub(crate) failed: bool,
    /// Why, for whoever reads the journal later
    #[arg(long, value_name = "TEXT")]
    pub(crate) note: Option<String>,
    /// Record the verdict even though the unit's last attempt has a recorded outcome
    #[arg(long)]
    pub(crate) force: bool,
}

/// Appends the verdict to the run's journal, under the state directory's lock.
pub(crate) fn run(
    args: &MarkArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state_path = state::state_dir_path(state_dir, None);
    let state = state::open_existing(&state_path)?;
    let _lock = state.lock(false)?;
    let run_id = state::resolve_run(&state, &args.run)?;
    let mut prior = PriorState::empty();
    let warnings = state::fold_events(&state, &run_id, |record| prior.apply(&record.event))?;
    state::print_warnings(&warnings, stderr);
    let Some(unit) = prior.unit(&args.unit) else {
        return Err(CliError::Usage {
            message: format!(
                "run {run_id} has no record of unit `{}`: only a unit that started can be marked (`apollo show {run_id} UNIT` shows a unit's attempts)",
                args.unit
            ),
        });
    };
    let attempt = unit.last_attempt;
    let previous = match &unit.state {
        PriorUnitState::InFlight { .. } => "was in flight when apollo stopped",
        PriorUnitState::Done { marked: true, .. } => "was already marked succeeded",
        PriorUnitState::Done { .. } => "had succeeded",
        PriorUnitState::NotDone => "had not succeeded",
    };
    if !matches!(unit.state, PriorUnitState::InFlight { .. }) && !args.force {
        return Err(CliError::Usage {
            message: format!(
                "unit `{}` of run {run_id} {previous} (attempt {attempt}): `apollo mark` is for an attempt that was cut off mid-run; to override a recorded outcome anyway, add --force",
                args.unit
            ),
        });
    }
    let verdict = if args.succeeded {
        Verdict::Succeeded
    } else {
        Verdict::Failed
    };
    let run_dir = state.run_dir(&run_id)?;
    let (mut journal, recovery) =
        JournalWriter::open_for_append(run_dir.path(), WriterOptions::default())?;
    state::print_warnings(&recovery.warnings, stderr);
    let by = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".to_owned());
    journal.append_batch(&[Event::UnitMarked(UnitMarked {
        unit: args.unit.clone(),
        attempt,
        verdict,
        by,
        note: args.note.clone(),
    })])?;
    let verdict_text = if args.succeeded {
        "succeeded"
    } else {
        "failed"
    };
    let next = if args.succeeded {
        "it will not run again"
    } else {
        "it will run again"
    };
    writeln!(
        stdout,
        "apollo: marked `{}` attempt {attempt} of run {run_id} {verdict_text} (it {previous}); {next} when `apollo run` resumes the run",
        args.unit
    )
    .map_err(output)?;
    Ok(Exit::Success)
}
