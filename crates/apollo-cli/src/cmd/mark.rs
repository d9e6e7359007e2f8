//! `apollo mark RUN UNIT --succeeded|--failed|--rerun`: record a human's verdict on a unit
//! whose attempt was cut off, or allow a done `idempotent: false` unit whose inputs changed to
//! run again, so the next `apollo run` can proceed (DESIGN §7, §17). The verdict itself is
//! apollo-runner's [`apollo_runner::mark`]; this maps the arguments and says what it did.

use std::io::Write;
use std::path::Path;

use apollo_core::event::Verdict;
use apollo_runner::{MarkRequest, PreviousOutcome};

use crate::cmd::run::notices::StderrNotices;
use crate::cmd::run::runner_error;
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::state;

/// Arguments of `apollo mark`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("verdict").required(true).args(["succeeded", "failed", "rerun"])))]
pub(crate) struct MarkArgs {
    /// The run: an id, a unique prefix or suffix, `latest`, `latest~N` or `last-success`
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
    /// Allow it to run again on the next resume: for a unit that succeeded and is not idempotent but whose inputs or outputs changed (the run stopped with exit 5), or a cut-off attempt to run again without calling it failed
    #[arg(long)]
    pub(crate) rerun: bool,
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
    let run_id = state::resolve_run(&state, &args.run)?;
    let verdict = if args.succeeded {
        Verdict::Succeeded
    } else if args.rerun {
        Verdict::Rerun
    } else {
        Verdict::Failed
    };
    let request = MarkRequest::new(&args.unit, verdict)
        .note(args.note.clone())
        .force(args.force);
    let marked = apollo_runner::mark(&state, &run_id, &request, &mut StderrNotices::new(stderr))
        .map_err(runner_error)?;
    let done = matches!(
        marked.previous,
        PreviousOutcome::Succeeded | PreviousOutcome::MarkedSucceeded
    );
    let (verdict_text, next) = match verdict {
        Verdict::Succeeded => ("succeeded", "it will not run again"),
        Verdict::Rerun if done => (
            "allowed to run again",
            "it runs again (once) if its inputs or outputs changed",
        ),
        Verdict::Rerun => ("allowed to run again", "it will run again"),
        _ => ("failed", "it will run again"),
    };
    writeln!(
        stdout,
        "apollo: marked `{}` attempt {} of run {run_id} {verdict_text} (it {}); {next} when `apollo run` resumes the run",
        args.unit, marked.attempt, marked.previous
    )
    .map_err(output)?;
    Ok(Exit::Success)
}
