//! `on_late` (issue 40 item 3): the pipeline's deadline watched while a run goes on.
//!
//! When the pipeline sets `on_late` and the run has a `deadline:`, the engine is given a
//! [`LateWatch`]: the deadline and each unit's history — the p50 and p95 of its successful
//! attempts over the pipeline's last [`HISTORY_RUNS`] runs (same identity, ordinary runs), as
//! `apollo stats` computes them. The engine evaluates the predicted finish when a unit ends and
//! when the deadline comes, and the first time the run is late records `run_late` and says so;
//! [`fire`] then runs the hook on a thread of its own (the run goes on meanwhile) with
//! `APOLLO_RUN_STATUS=running`, `APOLLO_DEADLINE`, `APOLLO_PREDICTED_FINISH` and the summary's
//! `late`. Its `hook_finished` is recorded when the run ends. Once per run: a resume of a run
//! that recorded `run_late` watches nothing.

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use apollo_core::deadline::UnitHistory;
use apollo_core::engine::{EngineOptions, LateWatch};
use apollo_core::event::RunLate;
use apollo_core::model::HookWhen;
use apollo_core::{CancelToken, Event, Executor, Journal, MemoryJournal, Pipeline};
use apollo_store::{RunId, StateDir};

use crate::hooks::{HookOutcome, RunEnd, run_hooks};
use crate::notice::{SessionNotice, SessionObserver};

/// How many of the pipeline's latest runs the history is taken from (`apollo stats`' default).
const HISTORY_RUNS: usize = 20;

/// `options` watching the run's deadline for `on_late` ([`watch`]), when there is one to watch.
pub(crate) fn watched(
    options: EngineOptions,
    state: &StateDir,
    pipeline: &Pipeline,
    run_id: &RunId,
    identity: &str,
) -> EngineOptions {
    match watch(state, pipeline, run_id, identity) {
        Some(watch) => options.late(watch),
        None => options,
    }
}

/// What the engine watches for `on_late`, or `None`: no `on_late` hook or no run deadline.
/// (A run that recorded `run_late` already is not watched: the engine finds it in the prior
/// state.)
fn watch(
    state: &StateDir,
    pipeline: &Pipeline,
    run_id: &RunId,
    identity: &str,
) -> Option<LateWatch> {
    let has_hook = (pipeline.hooks.iter()).any(|hook| hook.when == HookWhen::OnLate);
    if !has_hook || pipeline.deadline.is_none() {
        return None;
    }
    let runs = state.list_runs().ok()?;
    let deadline = runs.iter().find(|run| &run.id == run_id)?.deadline?;
    let earlier: Vec<&RunId> = (runs.iter())
        .filter(|run| &run.id != run_id && run.kind.is_run())
        .filter(|run| match &run.identity {
            Some(theirs) => theirs == identity,
            None => run.pipeline.as_deref() == Some(pipeline.name.as_str()),
        })
        .map(|run| &run.id)
        .collect();
    let latest = &earlier[earlier.len().saturating_sub(HISTORY_RUNS)..];
    // A run that cannot be read adds nothing to the history (the prediction says which units
    // have none).
    let models: Vec<_> = (latest.iter())
        .filter_map(|run| crate::read::run_model(state, run).ok())
        .map(|model| model.timeline)
        .collect();
    let by_name: BTreeMap<String, UnitHistory> =
        (crate::read::unit_stats(&models, &BTreeMap::new()).into_iter())
            .filter_map(|stats| {
                let history = UnitHistory {
                    p50: Duration::from_millis(stats.p50_ms?),
                    p95: Duration::from_millis(stats.p95_ms?),
                };
                Some((stats.unit, history))
            })
            .collect();
    let history = (pipeline.units.iter())
        .map(|unit| by_name.get(&unit.name).copied())
        .collect();
    Some(LateWatch::new(deadline, history))
}

/// What the `on_late` hook's thread needs.
pub(crate) struct LateHook<'a> {
    /// Where the engine's `run_late` comes from (through the observer).
    pub(crate) late: Receiver<RunLate>,
    pub(crate) pipeline: &'a Pipeline,
    pub(crate) state: &'a StateDir,
    pub(crate) run_id: &'a RunId,
    pub(crate) executor: &'a dyn Executor,
    pub(crate) cancel: &'a CancelToken,
}

/// The sender the engine's observer passes `run_late` on through, and the hook's side, when
/// `options` watch the deadline.
pub(crate) fn hook<'a>(
    options: &EngineOptions,
    pipeline: &'a Pipeline,
    state: &'a StateDir,
    run_id: &'a RunId,
    executor: &'a dyn Executor,
    cancel: &'a CancelToken,
) -> (Option<Sender<RunLate>>, Option<LateHook<'a>>) {
    if options.late.is_none() {
        return (None, None);
    }
    let (sender, late) = std::sync::mpsc::channel();
    let hook = LateHook {
        late,
        pipeline,
        state,
        run_id,
        executor,
        cancel,
    };
    (Some(sender), Some(hook))
}

/// How `on_late` went: the hook's outcome and the records of its end, not yet in the journal.
pub(crate) type Fired = (Vec<HookOutcome>, Vec<Event>);

/// Runs `run` (the engine) with `hook`'s thread beside it, and returns what `run` gave and how
/// the hook went. `run` must drop the sender of `hook.late` before it returns: the thread waits
/// for a `run_late` until then.
pub(crate) fn beside<R>(hook: Option<LateHook<'_>>, run: impl FnOnce() -> R) -> (R, Option<Fired>) {
    std::thread::scope(|scope| {
        let thread = hook.map(|hook| scope.spawn(move || fire(hook)));
        let result = run();
        let fired = thread.and_then(|thread| thread.join().ok().flatten());
        (result, fired)
    })
}

/// Records the end of `on_late` now that the engine is done with the journal (best effort, as
/// every hook's record) and tells `observer` how it went.
pub(crate) fn record(
    fired: Option<Fired>,
    journal: &mut dyn Journal,
    observer: &mut dyn SessionObserver,
) {
    let Some((outcomes, events)) = fired else {
        return;
    };
    let _ = journal.append(&events);
    for outcome in &outcomes {
        observer.notice(&SessionNotice::Hook(outcome));
    }
}

/// Waits for the engine's `run_late` (none: the run was never late, and the sender is gone)
/// and runs the `on_late` hook, recording its end in memory: the engine owns the journal
/// until the run ends, when [`record`] appends it.
fn fire(hook: LateHook<'_>) -> Option<Fired> {
    let LateHook {
        late,
        pipeline,
        state,
        run_id,
        executor,
        cancel,
    } = hook;
    let record = late.recv().ok()?;
    let end = RunEnd {
        run_id,
        state,
        status: "running",
        report: None,
        needs_verdict: None,
        late: Some(&record),
    };
    let mut journal = MemoryJournal::default();
    let outcomes = run_hooks(pipeline, &end, executor, &mut journal, cancel);
    Some((outcomes, journal.events))
}

/// The hook summary's `late`: the deadline, the predicted finish (p50 and p95), the units on
/// the critical path and those with no history.
pub(crate) fn summary(late: &RunLate) -> serde_json::Value {
    serde_json::json!({
        "deadline": late.deadline,
        "predicted_finish": late.predicted_finish,
        "predicted_finish_p95": late.predicted_finish_p95,
        "critical_path": late.critical_path,
        "no_history": late.no_history,
    })
}
