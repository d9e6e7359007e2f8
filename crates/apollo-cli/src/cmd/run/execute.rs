//! Driving a run session for `apollo run` and `apollo resume`: open it, print the opening
//! line, run the engine with the run's executors (`executors.rs`), live progress and signal
//! handling, print the summary.

use std::io::Write;
use std::path::Path;

use apollo_core::CancelToken;
use apollo_core::config::{LoadOptions, Loaded, ParamInput, ParamOverride};
use apollo_core::diagnostic::render_all;
use apollo_core::event::RunStatus;
use apollo_core::model::ExecutorKind;
use apollo_exec::{ExecOptions, ProcessExecutor, SecretValues};
use apollo_runner::{Opened, RunSession, RunTarget};
use apollo_slurm::{SlurmExecutor, SlurmOptions};

use super::args::ExecutionArgs;
use super::errors::runner_error;
use super::executors::RunExecutors;
use super::notices::{HeldNotices, StderrNotices};
use super::otlp_file::{FinalTrace, TraceFile};
use super::render;
use super::stopped;
use super::strays::ProcessSweep;
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::progress::Progress;
use crate::signals::SignalWatch;
use crate::state;

/// Loads and validates the config with `params` (through the state directory's parse cache:
/// an unchanged config is not parsed again); diagnostics go to stderr, and warnings too when
/// `warn`.
fn load_config(
    path: &Path,
    state_path: &Path,
    params: Vec<ParamOverride>,
    warn: bool,
    stderr: &mut dyn Write,
) -> Result<Loaded, CliError> {
    // A parse of 100,000 units runs with the allocator set for it (see `memory.rs`); a cache
    // hit does not need it.
    let loaded = apollo_runner::load_cached_parsing_with(
        state_path,
        path,
        &LoadOptions::default().params(params),
        &|config, options| {
            crate::memory::freeing_at_once(|| apollo_core::config::load_with(config, options))
        },
    )?;
    if warn && !loaded.warnings.is_empty() {
        let _ = stderr.write_all(render_all(&loaded.warnings).as_bytes());
    }
    Ok(loaded)
}

/// The pipeline with the params the run will have: those given on the command line, and for a
/// resume, the run's recorded ones for every param not given (a resume keeps its run's
/// params: a `today` default stays the day the run started). A given value that differs from
/// the recorded one is refused when the session opens.
fn load_for_run(
    config_path: &Path,
    state_path: &Path,
    target: &RunTarget,
    execution: &ExecutionArgs,
    stderr: &mut dyn Write,
) -> Result<Loaded, CliError> {
    let given = execution.param_overrides()?;
    let loaded = load_config(config_path, state_path, given.clone(), false, stderr)?;
    // A pipeline without params has none recorded to keep: no run to look up.
    let recorded = if loaded.params.is_empty() {
        None
    } else {
        let sweep = ProcessSweep::new(state_path);
        let probe =
            RunSession::new(state_path, config_path, &loaded, &sweep).target(target.clone());
        probe.recorded_params().map_err(runner_error)?
    };
    let reload = match &recorded {
        Some((_, recorded)) => recorded.iter().any(|(name, value)| {
            loaded.params.get(name).is_some_and(|now| now != value)
                && !given.iter().any(|param| param.name == *name)
        }),
        None => false,
    };
    let Some((run, recorded)) = recorded.filter(|_| reload) else {
        if !loaded.warnings.is_empty() {
            let _ = stderr.write_all(render_all(&loaded.warnings).as_bytes());
        }
        return Ok(loaded);
    };
    let mut params: Vec<ParamOverride> = recorded
        .into_iter()
        .filter(|(name, _)| loaded.params.contains_key(name))
        .map(|(name, value)| ParamOverride {
            name,
            value: ParamInput::Json(value),
            origin: format!("recorded in run {run}"),
        })
        .collect();
    params.extend(given);
    load_config(config_path, state_path, params, true, stderr)
}

/// The values of the secrets the pipeline's units receive, read now that the run starts
/// (never by `check` or `--dry-run`, which run no `{command: ...}`). A secret that cannot be
/// read stops the run before anything is recorded, as a config error.
fn read_secrets(pipeline: &apollo_core::Pipeline, dry_run: bool) -> Result<SecretValues, CliError> {
    if dry_run {
        return Ok(SecretValues::new());
    }
    SecretValues::read_for(&pipeline.units, &pipeline.base_dir).map_err(|error| {
        CliError::Usage {
            message: format!(
                "{error}
  = help: the run was not started; make the secret available from its source (see `secrets:` in {}), then run again",
                pipeline.config_path.display()
            ),
        }
    })
}

/// Runs (or plans, with `--dry-run`) the pipeline at `config_path` on `target`.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(super) fn execute(
    config_path: &Path,
    state_dir: Option<&Path>,
    target: RunTarget,
    execution: &ExecutionArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state_path = state::state_dir_path(state_dir, Some(config_path));
    let mut loaded = load_for_run(config_path, &state_path, &target, execution, stderr)?;
    // The run needs the pipeline, not its YAML (8 MB for 100,000 units, held for hours).
    loaded.release_source();
    let pipeline = &loaded.pipeline;
    // `-j N` above what the CPUs allow is said once, not left to look like a slow run.
    if let (Some(asked), Some(cap)) = (
        execution.max_parallel,
        apollo_core::engine::local_parallelism_cap(pipeline),
    ) && usize::try_from(asked).unwrap_or(usize::MAX) > cap
    {
        let _ = writeln!(
            stderr,
            "note: -j {asked}: at most {cap} local unit{} run at once here: {}, and each unit takes its `cpus:` (1 by default)",
            if cap == 1 { "" } else { "s" },
            match pipeline.capacity.cpus {
                Some(cpus) => format!("`max_cpus: {cpus}`"),
                None => "this machine's CPUs (`max_cpus:` not set)".to_owned(),
            }
        );
    }
    let sweep = ProcessSweep::new(&state_path);
    // Created before the session so that a resume refused for a human's verdict still runs
    // `on_failure` on this machine; the Slurm executor only when the run asks for it.
    let executors = RunExecutors::new(
        ProcessExecutor::new(ExecOptions::default().state_dir(sweep.state_dir())),
        pipeline,
        read_secrets(pipeline, execution.dry_run)?,
    )?;
    let session = execution.configure(
        RunSession::new(&state_path, config_path, &loaded, &sweep)
            .target(target)
            .hooks_executor(&executors.local),
    )?;

    if execution.dry_run {
        let plan = session
            .plan(&mut StderrNotices::new(stderr))
            .map_err(runner_error)?;
        match execution.format {
            crate::cmd::replay::TableFormat::Json => render::dry_run_json(&plan, pipeline, stdout)?,
            crate::cmd::replay::TableFormat::Text => render::dry_run(&plan, pipeline, stdout)?,
        }
        return Ok(Exit::Success);
    }

    state::ensure_writable(&state_path)?;
    let json = execution.format == crate::cmd::replay::TableFormat::Json;
    let stop = stopped::StopSummary::new(&state_path, json);
    let open_run = match session
        .open(&mut StderrNotices::new(stderr))
        .map_err(|error| with_live_job(runner_error(error), pipeline, &state_path))
        .map_err(|error| stop.refused(error, stdout))?
    {
        Opened::Ready(open_run) => open_run,
        Opened::NothingToResume(run_id) => {
            writeln!(stdout, "run {run_id} succeeded: nothing to resume").map_err(output)?;
            return Ok(Exit::Success);
        }
    };
    if json {
        let opened = serde_json::json!({
            "schema": crate::run_events::RUN_EVENTS_SCHEMA,
            "event": "run",
            "run_id": open_run.run_id().as_str(),
            "pipeline": pipeline.name,
            "resumed": matches!(open_run.opening(), apollo_runner::Opening::Resumed),
            "units": open_run.n_units_in_scope(),
            "state_dir": open_run.state_dir().path(),
        });
        writeln!(stdout, "{opened}").map_err(output)?;
    } else {
        writeln!(stdout, "{}", render::opening_line(&open_run, pipeline)).map_err(output)?;
    }
    stdout.flush().map_err(output)?;

    let run_id = open_run.run_id().clone();
    let cancel = CancelToken::new();
    let signals = SignalWatch::install(&cancel).map_err(|error| CliError::Usage {
        message: format!("cannot install signal handlers: {error}"),
    })?;
    let name_width = pipeline
        .units
        .iter()
        .map(|unit| unit.name.len())
        .max()
        .unwrap_or(0)
        .min(40);
    let mut progress = Progress::new(
        (
            open_run.n_units_in_scope(),
            open_run.engine_options().max_parallel,
        ),
        name_width,
        execution.explain,
        open_run.run_id().to_string(),
        pipeline
            .units
            .iter()
            .filter_map(|unit| Some((unit.name.clone(), unit.timeout?)))
            .collect(),
        stdout,
    );
    if json {
        progress.json_lines();
    }
    if execution.stream
        && let Ok(run) = open_run.state_dir().run_dir(open_run.run_id())
    {
        progress.stream_output(&run);
    }
    let mut held = HeldNotices::default();
    let mut observer = TraceFile::new(&mut progress, execution, &state_path, &run_id);
    let result = open_run.run(&executors, &mut observer, &cancel, &mut held);
    let trace = observer.detach();
    let elapsed = progress.elapsed();
    let notes = progress.notes();
    progress.finish();
    drop(signals);
    held.write_to(stderr);
    write_reports(trace, execution, &state_path, &run_id, stderr);
    // What the run cost the cluster's controller (issue 15: O(jobs + polls)).
    if let Some(calls) = executors.slurm_calls()
        && execution.explain
    {
        let _ = writeln!(stderr, "slurm: {calls}");
    }
    drop(executors);
    let finished =
        result.map_err(|error| stop.ended(runner_error(error), &notes, elapsed, stdout))?;

    // The run is recorded; a closed stdout must not turn success into failure.
    let summary = if json {
        render::summary_json(&finished.run_id, &finished.report, &notes, elapsed).to_string()
    } else {
        render::summary(&finished.run_id, &finished.report, &notes, elapsed)
    };
    let _ = writeln!(stdout, "{summary}");
    let _ = stdout.flush();
    Ok(match finished.report.status {
        Some(RunStatus::Succeeded) | None => Exit::Success,
        Some(RunStatus::Failed) => Exit::Failure,
        Some(RunStatus::Interrupted) => Exit::Interrupted,
    })
}

/// The reports of a run that has ended: `--otlp-file`'s last render, `--junit`'s report.
fn write_reports(
    trace: FinalTrace,
    execution: &ExecutionArgs,
    state_path: &Path,
    run_id: &apollo_store::RunId,
    stderr: &mut dyn Write,
) {
    trace.write(stderr);
    if let Some(path) = &execution.junit {
        write_junit_file(state_path, run_id, path, stderr);
    }
}

/// `--junit PATH`: the run as JUnit XML, written through a temporary file and renamed so a CI
/// reporter never reads half a report. A report that cannot be written is a warning: the run
/// is recorded, and its exit code says how it went.
fn write_junit_file(
    state_path: &Path,
    run_id: &apollo_store::RunId,
    path: &Path,
    stderr: &mut dyn Write,
) {
    let result = (|| -> Result<(), CliError> {
        let state = apollo_store::StateDir::open_existing(state_path)?;
        let mut xml = Vec::new();
        crate::cmd::replay::write_junit_report(&state, run_id, &mut xml, stderr)?;
        let partial = path.with_extension("xml.partial");
        std::fs::write(&partial, &xml)
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|source| CliError::Usage {
                message: format!("cannot write `{}`: {source}", path.display()),
            })
    })();
    if let Err(error) = result {
        let _ = writeln!(stderr, "warning: no JUnit report: {error}");
    }
}

/// A refusal for a verdict on a Slurm unit says whether the attempt's job is still queued or
/// running (issue 36): a human who marks the unit must know that a job still works on it.
fn with_live_job(error: CliError, pipeline: &apollo_core::Pipeline, state_path: &Path) -> CliError {
    let CliError::NeedsVerdict {
        run,
        unit,
        attempt,
        how,
        job: None,
    } = error
    else {
        return error;
    };
    let on_slurm = pipeline
        .unit_index(&unit)
        .is_some_and(|unit_idx| pipeline.units[unit_idx].executor == ExecutorKind::Slurm);
    let job = on_slurm
        .then(|| {
            let state = apollo_store::StateDir::open_existing(state_path).ok()?;
            let run_id: apollo_store::RunId = run.parse().ok()?;
            let dir = state
                .run_dir(&run_id)
                .ok()?
                .attempt_dir(&unit, attempt)
                .ok()?;
            SlurmExecutor::new(SlurmOptions::default()).describe_for_verdict(
                &run,
                &unit,
                attempt,
                dir.path(),
            )
        })
        .flatten();
    CliError::NeedsVerdict {
        run,
        unit,
        attempt,
        how,
        job,
    }
}
