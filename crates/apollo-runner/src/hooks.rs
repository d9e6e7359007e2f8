//! Pipeline hooks (DESIGN §16): `on_failure`, `on_success` and `on_finish` run once when a run
//! ends, through the run's executor (supervised and time-limited like a unit), before the lock
//! is released; each one's end is recorded as `hook_finished`. A hook never changes the run's
//! status: its failure is reported ([`HookOutcome`]) and recorded, nothing more.
//!
//! A hook gets, besides what a unit gets (`APOLLO_RUN_ID`, …): `APOLLO_RUN_STATUS`
//! (`succeeded`, `failed`, `interrupted`, `needs_human`), `APOLLO_FAILED_UNITS` (the failed
//! units, space-separated) and `APOLLO_SUMMARY_JSON`, the path of a JSON summary of the run
//! (`runs/<run>/hooks/summary.json`). Its output goes to `runs/<run>/hooks/<hook>/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use apollo_core::engine::{RunReport, UnitResult};
use apollo_core::event::{AttemptStatus, HookFinished, RunLate};
use apollo_core::model::{Hook, HookWhen};
use apollo_core::{
    AttemptContext, AttemptOutcome, AttemptRequest, CancelRegistration, CancelToken, Event,
    Executor, Journal, Pipeline, Unit,
};
use apollo_store::{RunId, StateDir};

/// The schema of the summary a hook reads (`APOLLO_SUMMARY_JSON`): version 2 calls a unit
/// reused from an earlier run `reused` (with `from_run`), not `not_started`.
pub const HOOK_SUMMARY_SCHEMA: &str = "apollo.hook_summary/3";

/// How long a hook's command gets between SIGTERM and SIGKILL when its time is up.
const HOOK_KILL_GRACE: Duration = Duration::from_secs(5);

/// How one hook went.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HookOutcome {
    /// Which hook.
    pub when: HookWhen,
    /// What was recorded (`hook_finished`).
    pub record: HookFinished,
    /// Where its stdout and stderr are.
    pub log_dir: PathBuf,
}

impl HookOutcome {
    /// Whether the hook's command succeeded.
    pub fn succeeded(&self) -> bool {
        self.record.status == AttemptStatus::Succeeded
    }
}

/// The hooks that fire for a run that ended `run_status`, in config order (`on_late` alone
/// for a run found late, [`RunEnd::late`]).
fn firing(pipeline: &Pipeline, run_status: &str, late: bool) -> Vec<Hook> {
    pipeline
        .hooks
        .iter()
        .filter(|hook| late == (hook.when == HookWhen::OnLate))
        .filter(|hook| match hook.when {
            HookWhen::OnFinish => true,
            HookWhen::OnSuccess => run_status == "succeeded",
            HookWhen::OnFailure => matches!(run_status, "failed" | "needs_human"),
            // Fired while the run goes on (`late.rs`), never at its end.
            HookWhen::OnLate => late,
        })
        .cloned()
        .collect()
}

/// What a hook is told about the run.
pub(crate) struct RunEnd<'a> {
    pub(crate) run_id: &'a RunId,
    /// The state directory the run is in.
    pub(crate) state: &'a StateDir,
    /// `succeeded`, `failed`, `interrupted` or `needs_human`.
    pub(crate) status: &'a str,
    /// The engine's report, when the engine got to the end.
    pub(crate) report: Option<&'a RunReport>,
    /// The unit that stopped the run for a human's verdict.
    pub(crate) needs_verdict: Option<&'a str>,
    /// For `on_late`, fired while the run goes on (`status` `running`): its `run_late`.
    pub(crate) late: Option<&'a RunLate>,
}

/// Whether the engine stopped because a human must decide (hooks then run with
/// `APOLLO_RUN_STATUS=needs_human`).
pub(crate) fn needs_human(error: &apollo_core::EngineError) -> bool {
    use apollo_core::EngineError;
    matches!(
        error,
        EngineError::NeedsVerdict { .. }
            | EngineError::ChangedNeedsVerdict { .. }
            | EngineError::InputsChanged { .. }
            | EngineError::NeedsHuman { .. }
    )
}

/// The unit a human's verdict is asked for, when `error` is such a stop.
pub(crate) fn verdict_unit(error: &apollo_core::EngineError) -> Option<&str> {
    use apollo_core::EngineError;
    match error {
        EngineError::NeedsVerdict { unit, .. }
        | EngineError::ChangedNeedsVerdict { unit, .. }
        | EngineError::NeedsHuman { unit, .. } => Some(unit),
        _ => None,
    }
}

/// A hook's cancellation: raised when `run_cancel` rises above the level it has now. A hook
/// still runs after the stop that ended its run (it is how a stopped run tells anyone), and a
/// stop asked *while* it runs (`apollo stop`, Ctrl-C) ends it — recorded interrupted, the run
/// keeping the status it had (issue 36: `apollo stop` during a hook waited for the hook).
fn hook_cancel(run_cancel: &CancelToken) -> (CancelToken, CancelRegistration) {
    let hook = CancelToken::new();
    let level_at_start = run_cancel.level();
    let registration = run_cancel.on_cancel({
        let hook = hook.clone();
        let run_cancel = run_cancel.clone();
        move || {
            let level = run_cancel.level();
            if level > level_at_start {
                hook.cancel(level);
            }
        }
    });
    (hook, registration)
}

/// Runs the hooks that fire for `end`, one after another, recording each one's end in
/// `journal`. A hook that cannot be recorded is still reported. A rise of `run_cancel` while a
/// hook runs ends that hook and skips the ones after it (see [`hook_cancel`]).
pub(crate) fn run_hooks(
    pipeline: &Pipeline,
    end: &RunEnd<'_>,
    executor: &dyn Executor,
    journal: &mut dyn Journal,
    run_cancel: &CancelToken,
) -> Vec<HookOutcome> {
    let level_at_start = run_cancel.level();
    let hooks = firing(pipeline, end.status, end.late.is_some());
    if hooks.is_empty() {
        return Vec::new();
    }
    // Before a hook, everything recorded is synced, whatever the journal's durability mode
    // (DESIGN §18): a hook tells the world, and what it told must survive a power loss.
    // Best effort, as recording a hook is: a failed sync is in the hook's record below.
    let synced = journal.append_strict(&[]);
    let failed_units = failed_units(end);
    // Absolute: a hook runs in the pipeline's folder, not where apollo was started.
    let hooks_dir = end.state.hooks_path(end.run_id);
    let hooks_dir = std::path::absolute(&hooks_dir).unwrap_or(hooks_dir);
    let (summary_path, summary_error) = match write_summary(pipeline, end, &failed_units) {
        Ok(path) => (std::path::absolute(&path).unwrap_or(path), None),
        // The hooks still run (they tell someone the run ended) and are told where it
        // would be; the error goes with each hook's record.
        Err(error) => (hooks_dir.join("summary.json"), Some(error)),
    };
    let mut outcomes = Vec::with_capacity(hooks.len());
    for hook in hooks {
        // Stopped during an earlier hook: the rest do not start.
        if run_cancel.level() > level_at_start {
            break;
        }
        let (cancel, _registration) = hook_cancel(run_cancel);
        // Checked as an attempt's log folder is: a link planted as `hooks/` or
        // `hooks/<hook>/` would send the hook's output outside the state directory.
        let checked_log_dir = end
            .state
            .run_dir(end.run_id)
            .and_then(|run| run.hook_log_dir(hook.when.as_str()));
        let (log_dir, outcome) = match checked_log_dir {
            Ok(log_dir) => {
                let log_dir = std::path::absolute(&log_dir).unwrap_or(log_dir);
                let unit = hook_unit(pipeline, &hook, end, &failed_units, &summary_path);
                // A hook runs even after Ctrl-C (it is how a stopped run tells anyone); its
                // own time limit bounds it, and a stop asked while it runs ends it.
                let request = AttemptRequest::new(end.run_id.as_str(), &unit, 1, &log_dir);
                let outcome = executor.run_attempt(&request, &AttemptContext::new(&cancel));
                (log_dir, outcome)
            }
            // Still run — `on_failure` is how someone hears that the run failed, and a link
            // planted in the run folder must not silence it — with its output in a private
            // temporary folder, removed after it: not kept, never written through the link.
            // The refusal goes with its record.
            Err(error) => {
                let refused = format!("its output was not kept: {error}");
                let outcome = match tempfile::Builder::new()
                    .prefix("apollo-hook-")
                    .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
                    .tempdir()
                {
                    Ok(private) => {
                        let unit = hook_unit(pipeline, &hook, end, &failed_units, &summary_path);
                        let request =
                            AttemptRequest::new(end.run_id.as_str(), &unit, 1, private.path());
                        let mut outcome =
                            executor.run_attempt(&request, &AttemptContext::new(&cancel));
                        outcome.error = Some(
                            outcome
                                .error
                                .map_or(refused.clone(), |error| format!("{error}; {refused}")),
                        );
                        outcome
                    }
                    Err(temp_error) => {
                        let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Failed);
                        outcome.error = Some(format!(
                            "not run: {error}; and no temporary folder for its output: \
                             {temp_error}"
                        ));
                        outcome
                    }
                };
                (hooks_dir.join(hook.when.as_str()), outcome)
            }
        };
        let mut error = outcome.error.clone();
        if let Err(sync_error) = &synced {
            let note = format!("the journal was not synced before it: {sync_error}");
            error = Some(error.map_or(note.clone(), |error| format!("{error}; {note}")));
        }
        if let Some(summary_error) = &summary_error {
            let note = format!("the run summary could not be written: {summary_error}");
            error = Some(error.map_or(note.clone(), |error| format!("{error}; {note}")));
        }
        let record = HookFinished {
            hook: hook.when.as_str().to_owned(),
            run_status: end.status.to_owned(),
            status: outcome.status,
            exit: outcome.exit,
            duration_ms: u64::try_from(outcome.wall_time.as_millis()).unwrap_or(u64::MAX),
            error,
        };
        let mut record = record;
        if let Err(journal_error) = journal.append(&[Event::HookFinished(record.clone())]) {
            // Recording a hook is best effort: the run's end is recorded already.
            let note = format!("not recorded in the journal: {journal_error}");
            record.error = Some(
                record
                    .error
                    .map_or(note.clone(), |error| format!("{error}; {note}")),
            );
        }
        outcomes.push(HookOutcome {
            when: hook.when,
            record,
            log_dir,
        });
    }
    outcomes
}

/// The units that failed for good (and the one that needs a verdict).
fn failed_units(end: &RunEnd<'_>) -> Vec<String> {
    let mut failed: Vec<String> = end
        .report
        .map(|report| {
            report
                .units
                .iter()
                .filter(|(_, result)| matches!(result, UnitResult::Failed { .. }))
                .map(|(unit, _)| unit.clone())
                .collect()
        })
        .unwrap_or_default();
    if let Some(unit) = end.needs_verdict {
        failed.push(unit.to_owned());
    }
    failed
}

/// The hook as a unit the executor can run: its command as `execute`, its timeout, the
/// pipeline's folder as working directory, and the run's end in its environment.
fn hook_unit(
    pipeline: &Pipeline,
    hook: &Hook,
    end: &RunEnd<'_>,
    failed_units: &[String],
    summary_path: &Path,
) -> Unit {
    let mut env = BTreeMap::from([
        ("APOLLO_RUN_STATUS".to_owned(), end.status.to_owned()),
        ("APOLLO_FAILED_UNITS".to_owned(), failed_units.join(" ")),
        (
            "APOLLO_SUMMARY_JSON".to_owned(),
            summary_path.display().to_string(),
        ),
        ("APOLLO_HOOK".to_owned(), hook.when.as_str().to_owned()),
    ]);
    if let Some(late) = end.late {
        env.insert("APOLLO_DEADLINE".to_owned(), late.deadline.clone());
        let predicted = late.predicted_finish.clone();
        env.insert("APOLLO_PREDICTED_FINISH".to_owned(), predicted);
    }
    Unit {
        skip_when: None,
        when_command: None,
        log_limit: None,
        queue_timeout: None,
        deadline: None,
        name: hook.when.as_str().to_owned(),
        deps: Vec::new(),
        timeout: Some(hook.timeout),
        retries: 0,
        retry_delay: Duration::ZERO,
        retry_on_exit: Vec::new(),
        retry_max_delay: None,
        kill_grace: HOOK_KILL_GRACE,
        prepare: None,
        execute: hook.command.clone(),
        cleanup: None,
        cleanup_timeout: apollo_core::model::DEFAULT_CLEANUP_TIMEOUT,
        inputs: Vec::new(),
        outputs: Vec::new(),
        env,
        workdir: pipeline.base_dir.clone(),
        idempotent: true,
        reuse: false,
        // Hooks run on this machine.
        executor: apollo_core::model::ExecutorKind::Local,
        resources: Default::default(),
        // A hook receives no secret (its summary JSON names units, never values).
        secrets: Default::default(),
        // A hook declares no files.
        capture: apollo_core::capture::CapturePolicy {
            mode: apollo_core::capture::CaptureMode::None,
            ..Default::default()
        },
    }
}

/// The units of a run the engine stopped without its report (a human must decide), or of one
/// going on (`on_late`): as the run model has them, so the hook is told what `show` says (a
/// cut-off `idempotent: false` unit is `needs_verdict`). Empty when the journal cannot be read.
fn units_from_model(end: &RunEnd<'_>) -> Vec<serde_json::Value> {
    // At the run's end the engine has stopped: nothing of the run runs now, though this
    // apollo holds the lock. (`on_late` is told of a run that goes on.)
    let model = match end.late {
        None => crate::read::stopped_run_model(end.state, end.run_id),
        Some(_) => crate::read::run_model(end.state, end.run_id),
    };
    let Ok(model) = model else {
        return Vec::new();
    };
    let timeline = &model.timeline;
    (timeline.units.iter())
        .filter(|unit| unit.listed)
        .map(|unit| {
            let attempt = unit.last_attempt().map(|attempt| attempt.number);
            let status = timeline.state_of(unit).as_str();
            serde_json::json!({"name": unit.name, "status": status, "attempt": attempt})
        })
        .collect()
}

/// Writes the JSON summary hooks get the path of (`runs/<run>/hooks/summary.json`) and
/// returns its path. apollo-store writes it under the run folder's descriptor and renames it
/// into place, so a link or a FIFO planted in the run folder of an interrupted run is refused
/// or replaced, never written through or blocked on.
fn write_summary(
    pipeline: &Pipeline,
    end: &RunEnd<'_>,
    failed_units: &[String],
) -> Result<PathBuf, String> {
    let units: Vec<serde_json::Value> = end
        .report
        .map(|report| {
            report
                .units
                .iter()
                .map(|(unit, result)| {
                    let attempt = match result {
                        UnitResult::Succeeded { attempt }
                        | UnitResult::SelfSkipped { attempt }
                        | UnitResult::ReusedFromRun { attempt, .. }
                        | UnitResult::Failed { attempt, .. }
                        | UnitResult::CutOff { attempt, .. } => Some(*attempt),
                        _ => None,
                    };
                    let status = result.state().as_str();
                    let mut entry =
                        serde_json::json!({"name": unit, "status": status, "attempt": attempt});
                    // Reused: `attempt` is the earlier run's attempt that did the work.
                    if let (UnitResult::ReusedFromRun { run_id, .. }, Some(object)) =
                        (result, entry.as_object_mut())
                    {
                        object.insert("from_run".to_owned(), run_id.as_str().into());
                    }
                    entry
                })
                .collect()
        })
        .unwrap_or_else(|| units_from_model(end));
    let mut summary = serde_json::json!({
        "schema": HOOK_SUMMARY_SCHEMA,
        "run_id": end.run_id.as_str(),
        "pipeline": pipeline.name,
        "status": end.status,
        "failed_units": failed_units,
        "units": units,
    });
    if let Some(late) = end.late {
        summary["late"] = crate::late::summary(late);
    }
    let text = serde_json::to_vec_pretty(&summary).map_err(|error| error.to_string())?;
    end.state
        .run_dir(end.run_id)
        .and_then(|run| run.write_hook_summary(&text))
        .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo_core::Command;

    fn pipeline_with(hooks: &[HookWhen]) -> Pipeline {
        Pipeline {
            name: "p".into(),
            config_path: PathBuf::from("/p/pipeline.yaml"),
            base_dir: PathBuf::from("/p"),
            max_parallel: 1,
            units: Vec::new(),
            hooks: hooks
                .iter()
                .map(|&when| Hook {
                    when,
                    command: Command::Shell("true".into()),
                    timeout: Duration::from_secs(1),
                })
                .collect(),
            capacity: Default::default(),
            max_jobs: None,
            blob_store_max: None,
            durability: None,
            sync_interval: None,
            cost: None,
            journal_segment_size: None,
            deadline: None,
        }
    }

    #[test]
    fn which_hooks_fire_for_which_end() {
        let all = pipeline_with(&[HookWhen::OnFailure, HookWhen::OnSuccess, HookWhen::OnFinish]);
        let fired = |status| -> Vec<&str> {
            firing(&all, status, false)
                .iter()
                .map(|hook| hook.when.as_str())
                .collect()
        };
        assert_eq!(fired("succeeded"), ["on_success", "on_finish"]);
        assert_eq!(fired("failed"), ["on_failure", "on_finish"]);
        assert_eq!(fired("needs_human"), ["on_failure", "on_finish"]);
        assert_eq!(fired("interrupted"), ["on_finish"]);
    }
}
