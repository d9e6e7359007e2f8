//! Embedding Apollo-11 in another program, with public API only: load a pipeline, run it with
//! the real process executor (a `Dispatch` is the simplest executor factory: a pipeline with
//! an `executor: slurm` unit would be refused, as this program offers no Slurm executor), see
//! it fail, fix the cause, resume it, replay it, and diff it with a second run through the
//! read side. Exits non-zero if anything is not as expected.
//!
//! `cargo run -p apollo-runner --example embed`
#![forbid(unsafe_code)]

use std::path::Path;
use std::process::ExitCode;

use apollo_core::engine::{Notice, Observer};
use apollo_core::event::RunStatus;
use apollo_core::{CancelToken, Loaded, config};
use apollo_exec::{ExecOptions, ProcessExecutor};
use apollo_replay::{Format, ReplayOptions, replay, write_diff_text};
use apollo_runner::{
    Dispatch, FinishedRun, Opened, Opening, RunSelector, RunSession, RunTarget, SessionNotice,
    SweepError, read,
};
use apollo_store::{ReadOptions, RunId};

type Error = Box<dyn std::error::Error>;

/// `fetch` copies an input file; `flaky` fails until a marker file exists; `report` needs
/// both.
const PIPELINE: &str = "\
name: embedded
units:
  - name: fetch
    inputs: [data.txt]
    outputs: [fetched.txt]
    execute: cp data.txt fetched.txt
  - name: flaky
    execute: test -e marker
  - name: report
    deps: [fetch, flaky]
    execute: cat fetched.txt
";

/// Prints one line per finished attempt.
struct Lines;

impl Observer for Lines {
    fn notice(&mut self, notice: &Notice<'_>) {
        if let Notice::Finished { unit, record, .. } = notice {
            println!(
                "  {unit:<8} attempt {}: {:?}",
                record.attempt, record.status
            );
        }
    }
}

/// Prints what the session says besides the units' progress.
fn session_notice(notice: &SessionNotice<'_>) {
    match notice {
        SessionNotice::Warning(warning) => eprintln!("warning: {warning}"),
        SessionNotice::Swept { run, n_killed, .. } if *n_killed > 0 => {
            eprintln!("killed {n_killed} stray processes of run {run}");
        }
        SessionNotice::SweepFailed { run, error, .. } => {
            eprintln!("warning: could not sweep run {run}: {error}");
        }
        _ => {}
    }
}

/// The sweep that matches the process executor.
fn sweep(run: &RunId) -> Result<u32, SweepError> {
    Ok(apollo_exec::kill_stray_processes(run.as_str())?)
}

fn check(condition: bool, what: &str) -> Result<(), Error> {
    if condition {
        Ok(())
    } else {
        Err(format!("not as expected: {what}").into())
    }
}

/// Opens a session with `target` and runs it to the end.
fn run_once(
    state_dir: &Path,
    config_path: &Path,
    loaded: &Loaded,
    target: RunTarget,
) -> Result<FinishedRun, Error> {
    let sweep = sweep;
    let session = RunSession::new(state_dir, config_path, loaded, &sweep).target(target);
    let run = match session.open(&mut session_notice)? {
        Opened::Ready(run) => run,
        Opened::NothingToResume(run) => return Err(format!("run {run} had nothing to do").into()),
    };
    let verb = match run.opening() {
        Opening::Resumed => "resuming",
        _ => "starting",
    };
    println!(
        "{verb} run {} ({} of {} units already done)",
        run.run_id(),
        run.n_done(),
        loaded.pipeline.units.len()
    );
    let local = ProcessExecutor::new(ExecOptions::default());
    let finished = run.run(
        &Dispatch::new(&local),
        &mut Lines,
        &CancelToken::new(),
        &mut session_notice,
    )?;
    println!("run {}: {:?}", finished.run_id, finished.report.status);
    Ok(finished)
}

fn main() -> ExitCode {
    match embed() {
        Ok(()) => {
            println!("embed: everything as expected");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("embed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn embed() -> Result<(), Error> {
    let project = tempfile::tempdir()?;
    let config_path = project.path().join("pipeline.yaml");
    std::fs::write(&config_path, PIPELINE)?;
    std::fs::write(project.path().join("data.txt"), "version 1\n")?;
    let state_dir = project.path().join(".apollo");
    let loaded = config::load(&config_path)?;

    // 1. The first run fails: `flaky` finds no marker, `report` is skipped.
    let first = run_once(
        &state_dir,
        &config_path,
        &loaded,
        RunTarget::LatestIfIncomplete,
    )?;
    check(
        first.report.status == Some(RunStatus::Failed),
        "the first run fails",
    )?;

    // 2. Fix the cause and resume: the same run, `fetch` is not run again.
    std::fs::write(project.path().join("marker"), "")?;
    let resumed = run_once(
        &state_dir,
        &config_path,
        &loaded,
        RunTarget::LatestIfIncomplete,
    )?;
    check(
        resumed.run_id == first.run_id,
        "the resume continues the run",
    )?;
    check(resumed.opening == Opening::Resumed, "the run is resumed")?;
    check(
        resumed.report.status == Some(RunStatus::Succeeded),
        "the resumed run succeeds",
    )?;

    // 3. Replay it: the text timeline, to stdout.
    let state = read::open(&state_dir)?.ok_or("no state directory")?;
    println!("\nreplay of run {}:", first.run_id);
    replay(
        read::read_records(&state, &first.run_id, ReadOptions::default())?.0,
        std::io::stdout().lock(),
        &ReplayOptions::new(Format::Text),
    )?;

    // 4. A second, fresh run with a changed input, and the diff of the two.
    std::fs::write(project.path().join("data.txt"), "version 2\n")?;
    let second = run_once(&state_dir, &config_path, &loaded, RunTarget::Fresh)?;
    check(second.run_id != first.run_id, "a fresh run is a new run")?;
    check(
        second.report.status == Some(RunStatus::Succeeded),
        "the second run succeeds",
    )?;
    let (diff, _warnings) = read::diff(&state, &first.run_id, &second.run_id)?;
    println!("\ndiff:");
    write_diff_text(&diff, std::io::stdout().lock(), false)?;
    let changed: Vec<&str> = diff
        .changed_units()
        .map(|unit| unit.unit.as_str())
        .collect();
    check(
        changed == ["fetch", "report"],
        &format!("the diff names fetch and report (it names {changed:?})"),
    )?;

    // 5. Name runs as a user does: `latest~1`, `last-success`.
    let earlier: RunSelector = "latest~1".parse()?;
    check(
        earlier.resolve(&state)? == first.run_id,
        "latest~1 is the first run",
    )?;
    check(
        RunSelector::LastSuccess.resolve(&state)? == second.run_id,
        "last-success is the second run",
    )?;
    Ok(())
}
