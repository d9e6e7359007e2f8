//! `apollo bisect GOOD BAD UNIT`: which change of a unit's inputs between two runs flipped its
//! output, tried in halves in scratch trees (issue 40, item 4). The work is apollo-runner's
//! [`apollo_runner::bisect`]; this maps the arguments, runs `--check`, and renders each
//! verdict as it comes and the answer.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use apollo_core::CancelToken;
use apollo_exec::{ClientCommand, ExecOptions, PrivateMounts, ProcessExecutor};
use apollo_runner::{
    BisectOutcome, BisectPlan, BisectRequest, BisectStep, Bisection, Check, CheckVerdict,
};

use crate::cmd::replay::TableFormat;
use crate::cmd::reproduce::{ReadOnlyProject, secrets_for};
use crate::cmd::run::runner_error;
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::signals::SignalWatch;
use crate::state;

/// How long one `--check` may take before it is killed (and the bisect stops).
const CHECK_TIMEOUT: Duration = Duration::from_secs(3600);

/// Arguments of `apollo bisect`.
#[derive(Debug, clap::Args)]
pub(crate) struct BisectArgs {
    /// The run where UNIT's output was as wanted: an id, a unique prefix or suffix, `latest`,
    /// `latest~N` or `last-success`
    #[arg(value_name = "GOOD")]
    pub(crate) good: String,
    /// The run where it was not (same forms)
    #[arg(value_name = "BAD")]
    pub(crate) bad: String,
    /// The unit
    #[arg(value_name = "UNIT")]
    pub(crate) unit: String,
    /// Judge each step by this shell command, run in the step's scratch tree after the unit
    /// (exit 0 = good) [default: the same outcome and outputs as GOOD's attempt]
    #[arg(long, value_name = "CMD")]
    pub(crate) check: Option<String>,
    /// Also rebuild, in each step, the upstream units whose own inputs changed (and those
    /// between them and UNIT), and try their changes
    #[arg(long)]
    pub(crate) upstream: bool,
    /// Build the steps' scratch trees in this directory (created, must be empty) and keep them
    #[arg(long, value_name = "DIR")]
    pub(crate) into: Option<PathBuf>,
    /// Run `idempotent: false` units all the same: what they do outside their files (a
    /// charge, a mail, a deploy) happens again at every step
    #[arg(long)]
    pub(crate) allow_side_effects: bool,
    /// Output format (`json`: one `apollo.bisect/1` document at the end)
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub(crate) format: TableFormat,
}

/// Runs the bisect: exit 0 when a change (or a minimal set) is named, 1 when none is (no
/// change, or the ends do not reproduce), 130 when interrupted.
pub(crate) fn run(
    args: &BisectArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    // First, while apollo has one thread: the namespaces in which the units will see the
    // project read-only (as `apollo reproduce`).
    let isolation = ReadOnlyProject(PrivateMounts::enter());
    let state_path = state::state_dir_path(state_dir, None);
    let state = state::open_existing(&state_path)?;
    let good = state::resolve_run(&state, &args.good)?;
    let bad = state::resolve_run(&state, &args.bad)?;
    let request = BisectRequest::new(state.path(), good, bad, &args.unit)
        .upstream(args.upstream)
        .into_dir(args.into.clone())
        .allow_side_effects(args.allow_side_effects);
    let plan = apollo_runner::plan_bisect(&request).map_err(runner_error)?;
    let secrets = secrets_for(plan.units(), plan.project(), "bisect")?;
    let text = args.format == TableFormat::Text;
    if text {
        render_plan(&plan, stdout, stderr).map_err(output)?;
    }
    let cancel = CancelToken::new();
    let signals = SignalWatch::install(&cancel).map_err(|error| CliError::Usage {
        message: format!("cannot install signal handlers: {error}"),
    })?;
    let executor = ProcessExecutor::new(ExecOptions::default()).with_secrets(secrets);
    let check = args.check.as_deref().map(ShellCheck);
    let mut written = Ok(());
    let mut on_step = |step: &BisectStep| {
        if text && written.is_ok() {
            written = render_step(&plan, step, stdout);
        }
    };
    let result = apollo_runner::bisect(
        &plan,
        &executor,
        &isolation,
        check.as_ref().map(|check| check as &dyn Check),
        &mut on_step,
        &cancel,
    );
    drop(signals);
    written.map_err(output)?;
    let bisection = result.map_err(runner_error)?;
    match args.format {
        TableFormat::Text => render_answer(&bisection, stdout, stderr),
        TableFormat::Json => render_json(&bisection, stdout),
    }
    .map_err(output)?;
    Ok(match bisection.outcome {
        BisectOutcome::Found(_) => Exit::Success,
        BisectOutcome::Interrupted => Exit::Interrupted,
        _ => Exit::Failure,
    })
}

/// `--check CMD`: `/bin/sh -c CMD` in the step's scratch tree, through apollo-exec.
struct ShellCheck<'c>(&'c str);

impl Check for ShellCheck<'_> {
    fn check(&self, scratch: &Path) -> Result<CheckVerdict, String> {
        let ended = ClientCommand::program("/bin/sh")
            .args(["-c", self.0])
            .current_dir(scratch)
            .timeout(CHECK_TIMEOUT)
            .run()
            .map_err(|error| error.to_string())?;
        Ok(CheckVerdict {
            good: ended.success(),
            detail: match ended.code {
                Some(code) => format!("exit {code}"),
                None => "killed by a signal".to_owned(),
            },
        })
    }
}

fn render_plan(
    plan: &BisectPlan,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> std::io::Result<()> {
    for note in plan.notes() {
        writeln!(stderr, "note: {note}")?;
    }
    let rebuilt = plan.rebuilt();
    if !rebuilt.is_empty() {
        writeln!(stdout, "rebuilt in each step: {}", rebuilt.join(", "))?;
    }
    let n = plan.changes().len();
    writeln!(stdout, "{n} change{}:", if n == 1 { "" } else { "s" })?;
    for (index, change) in plan.changes().iter().enumerate() {
        writeln!(stdout, "  [{}] {}", index + 1, change.describe())?;
    }
    Ok(())
}

fn applied_list(applied: &[usize]) -> String {
    if applied.is_empty() {
        return "none (GOOD's inputs)".to_owned();
    }
    let list: Vec<String> = applied.iter().map(|i| format!("[{}]", i + 1)).collect();
    list.join(" ")
}

fn render_step(
    plan: &BisectPlan,
    step: &BisectStep,
    stdout: &mut dyn Write,
) -> std::io::Result<()> {
    let all = step.applied.len() == plan.changes().len() && !step.applied.is_empty();
    writeln!(
        stdout,
        "step {}: {} with {}: {} ({})",
        step.number,
        if step.good { "good" } else { "bad" },
        if all {
            "all changes".to_owned()
        } else {
            applied_list(&step.applied)
        },
        step.why,
        step.run_id
    )
}

fn render_answer(
    bisection: &Bisection,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> std::io::Result<()> {
    if let Some(why) = &bisection.not_isolated {
        writeln!(
            stderr,
            "warning: not isolated: the units ran with your project writable ({why})"
        )?;
    }
    if bisection.kept {
        writeln!(stdout, "scratch trees kept in {}", bisection.root.display())?;
    }
    match &bisection.outcome {
        BisectOutcome::Found(found) if found.len() == 1 => writeln!(
            stdout,
            "found: {} flips {}'s output",
            bisection.changes[found[0]].describe(),
            bisection.unit
        ),
        BisectOutcome::Found(found) => {
            writeln!(
                stdout,
                "found: these {} changes flip {}'s output only together:",
                found.len(),
                bisection.unit
            )?;
            for &index in found {
                writeln!(
                    stdout,
                    "  [{}] {}",
                    index + 1,
                    bisection.changes[index].describe()
                )?;
            }
            Ok(())
        }
        BisectOutcome::NoChanges => writeln!(
            stdout,
            "not found: {}'s inputs, params, env and command are the same in {} and {}",
            bisection.unit, bisection.good, bisection.bad
        ),
        BisectOutcome::GoodNotReproduced => writeln!(
            stdout,
            "inconclusive: with GOOD's inputs alone the step was judged bad ({} does not \
             reproduce GOOD's output: not deterministic, or it depends on something apollo did \
             not record)",
            bisection.unit
        ),
        BisectOutcome::BadNotReproduced => writeln!(
            stdout,
            "inconclusive: with all of BAD's changes the step was judged good (what flipped the \
             output is not among the recorded changes; try --upstream)"
        ),
        _ => writeln!(stdout, "interrupted"),
    }
}

fn render_json(bisection: &Bisection, stdout: &mut dyn Write) -> std::io::Result<()> {
    let changes: Vec<serde_json::Value> = (bisection.changes.iter())
        .map(|change| {
            let mut value = match &change.kind {
                apollo_runner::ChangeKind::File { path, good, bad } => serde_json::json!({
                    "kind": "file", "path": path, "good": good, "bad": bad,
                }),
                apollo_runner::ChangeKind::Param {
                    name,
                    variable,
                    good,
                    bad,
                } => serde_json::json!({
                    "kind": "param", "name": name, "variable": variable, "good": good, "bad": bad,
                }),
                apollo_runner::ChangeKind::Env { name, good, bad } => serde_json::json!({
                    "kind": "env", "name": name, "good": good, "bad": bad,
                }),
                apollo_runner::ChangeKind::Command { good, bad } => serde_json::json!({
                    "kind": "command", "good": good, "bad": bad,
                }),
                _ => serde_json::json!({"kind": "unknown"}),
            };
            value["units"] = serde_json::json!(change.units);
            value["description"] = serde_json::json!(change.describe());
            value
        })
        .collect();
    let steps: Vec<serde_json::Value> = (bisection.steps.iter())
        .map(|step| {
            serde_json::json!({
                "step": step.number,
                "applied": step.applied,
                "run": step.run_id.as_str(),
                "status": step.status.as_str(),
                "good": step.good,
                "why": step.why,
            })
        })
        .collect();
    let (outcome, found) = match &bisection.outcome {
        BisectOutcome::Found(found) => ("found", found.clone()),
        BisectOutcome::NoChanges => ("no_changes", Vec::new()),
        BisectOutcome::GoodNotReproduced => ("good_not_reproduced", Vec::new()),
        BisectOutcome::BadNotReproduced => ("bad_not_reproduced", Vec::new()),
        _ => ("interrupted", Vec::new()),
    };
    let value = serde_json::json!({
        "schema": "apollo.bisect/1",
        "good": bisection.good.as_str(),
        "bad": bisection.bad.as_str(),
        "unit": bisection.unit,
        "outcome": outcome,
        "found": found,
        "changes": changes,
        "steps": steps,
        "scratch": bisection.root,
        "kept": bisection.kept,
        "isolated": bisection.not_isolated.is_none(),
        "not_isolated": bisection.not_isolated,
    });
    writeln!(stdout, "{value}")
}
