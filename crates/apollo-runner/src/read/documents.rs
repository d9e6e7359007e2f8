//! The JSON documents of the read commands (`apollo runs`, `apollo show --format json`), built
//! here once so that the CLI and `apollo serve`'s JSON endpoints give the same document.

use std::collections::BTreeMap;

use apollo_replay::{AttemptState, Timeline, UnitState, UnitTimeline};
use apollo_store::{RunId, RunState, RunSummary, StateDir};
use chrono::{DateTime, Utc};
use serde::Serialize;

/// The schema of `apollo runs --format json`.
pub const RUNS_SCHEMA: &str = "apollo.runs/2";
/// The schema of `apollo show RUN --format json`.
pub const SHOW_RUN_SCHEMA: &str = "apollo.show_run/3";
/// The schema of `apollo show RUN UNIT --format json`.
pub const SHOW_UNIT_SCHEMA: &str = "apollo.show_unit/3";

/// One run of `apollo runs`: its summary, with the run model's counts.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct RunLine {
    /// The run's id.
    pub id: String,
    /// The pipeline, from `run_started`.
    pub pipeline: Option<String>,
    /// RFC 3339, UTC.
    pub started: Option<DateTime<Utc>>,
    /// RFC 3339, UTC.
    pub finished: Option<DateTime<Utc>>,
    /// How long it ran; a live run has lasted until now.
    pub duration_ms: Option<i64>,
    /// `running`, `succeeded`, `failed`, `interrupted`, `incomplete` or `corrupt`.
    pub status: &'static str,
    /// `run`, or `reproduction` (`apollo reproduce`): never a pipeline's latest run.
    pub kind: &'static str,
    /// How its journal was made durable: `fsync`, `batched` or `none`.
    pub durability: &'static str,
    /// The pid of the apollo running it, for a running run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Units in the pipeline.
    pub units: usize,
    /// How many units are in each state of the run model (every state, zeros included).
    #[serde(serialize_with = "serialize_counts")]
    pub counts: apollo_core::UnitCounts,
    /// Why its journal cannot be read, for a corrupt run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The run's params.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, serde_json::Value>,
    /// What the run cost, when it ran with a price table ([`add_costs`]; `None` until then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<serde_json::Value>,
    /// The run's deadline (RFC 3339, UTC), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    /// By how much it ended after its deadline (absent when it has none; `null` while on
    /// time or not ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_by_ms: Option<Option<u64>>,
    /// A reproduction's verdict (its `reproduction_compared` record: `reproduced`, the
    /// `recorded_status` and `status`, the `outputs_differ`); absent for other runs and for a
    /// reproduction that never compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reproduction: Option<apollo_core::event::ReproductionCompared>,
}

impl RunLine {
    /// The deadline and lateness of a run that `started` … `finished` with `deadline`.
    pub(crate) fn with_deadline(
        mut self,
        deadline: Option<DateTime<Utc>>,
        finished: Option<DateTime<Utc>>,
    ) -> Self {
        self.deadline = deadline;
        self.late_by_ms = deadline.map(|deadline| {
            let late = finished.and_then(|end| apollo_core::deadline::late_by(deadline, end));
            late.map(|late| u64::try_from(late.as_millis()).unwrap_or(u64::MAX))
        });
        self
    }

    /// Whether the run ended after its deadline.
    pub fn is_late(&self) -> bool {
        matches!(self.late_by_ms, Some(Some(_)))
    }
}

fn serialize_counts<S: serde::Serializer>(
    counts: &apollo_core::UnitCounts,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    Serialize::serialize(&counts.to_json(), serializer)
}

/// The lines of `apollo runs` for `summaries` ([`super::list_runs`]), as of `now`.
pub fn run_lines(state: &StateDir, summaries: &[RunSummary], now: DateTime<Utc>) -> Vec<RunLine> {
    let holder_pid = (state.lock_holder().ok().flatten()).and_then(|holder| holder.pid);
    (summaries.iter())
        .map(|summary| {
            RunLine {
                id: summary.id.as_str().to_owned(),
                pipeline: summary.pipeline.clone(),
                started: summary.started,
                finished: summary.finished,
                duration_ms: duration_ms(
                    summary.state,
                    summary.started,
                    summary.finished.or(summary.last_record),
                    now,
                ),
                status: summary.state.as_str(),
                kind: summary.kind.as_str(),
                durability: summary.durability.as_str(),
                pid: holder_pid.filter(|_| summary.state == RunState::Running),
                units: summary.n_units,
                // The run model's counts; a run whose journal cannot be read counts nothing (its
                // status says corrupt, and why).
                counts: summary.counts.unwrap_or_default(),
                problem: summary.problem.clone(),
                params: summary.params.clone(),
                cost: None,
                deadline: None,
                late_by_ms: None,
                reproduction: summary.reproduction.clone(),
            }
            .with_deadline(summary.deadline, summary.finished)
        })
        .collect()
}

/// How long a run ran: a live run has lasted until now, not until its last record (issue 35:
/// a run whose unit was running showed 0.05 s, like a killed one).
pub(crate) fn duration_ms(
    state: RunState,
    started: Option<DateTime<Utc>>,
    ended: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<i64> {
    let end = match state {
        RunState::Running => Some(now),
        _ => ended,
    };
    started
        .zip(end)
        .map(|(start, end)| (end - start).num_milliseconds())
}

/// Sets the `cost` of each of `lines` (from [`run_lines`]; `summaries` holds their runs)
/// whose run ran with a price table: the run folded and priced ([`super::run_cost`]). A run
/// whose definition snapshot has no `cost:` is not folded.
pub fn add_costs(
    state: &StateDir,
    summaries: &[RunSummary],
    lines: &mut [RunLine],
    reads: &super::CostReads,
) {
    let by_id: std::collections::HashMap<&str, &RunSummary> = (summaries.iter())
        .map(|summary| (summary.id.as_str(), summary))
        .collect();
    for line in lines {
        let Some(summary) = by_id.get(line.id.as_str()) else {
            continue;
        };
        let priced =
            (summary.definition_hash.as_deref()).is_some_and(|hash| reads.has_table(state, hash));
        if priced
            && let Ok(model) = super::run_model(state, &summary.id)
            && let Some(cost) = super::run_cost(state, &model.timeline, reads)
        {
            line.cost = Some(run_cost_json(&cost));
        }
    }
}

/// A run's cost in JSON: `{"currency", "total", "wasted", "saved", "saved_unknown"}`, the
/// amounts decimal strings.
pub fn run_cost_json(cost: &apollo_replay::RunCost) -> serde_json::Value {
    serde_json::json!({
        "currency": cost.currency,
        "total": cost.total,
        "wasted": cost.wasted,
        "saved": cost.saved,
        "saved_unknown": cost.saved_unknown,
    })
}

fn unit_cost_json(cost: &apollo_replay::UnitCost) -> serde_json::Value {
    let mut value = serde_json::json!({"total": cost.total, "wasted": cost.wasted});
    if let Some(saved) = cost.saved {
        value["saved"] = serde_json::json!(saved);
    }
    value
}

/// `apollo runs --format json` (schema [`RUNS_SCHEMA`]).
pub fn runs_document(lines: &[RunLine]) -> serde_json::Value {
    serde_json::json!({"schema": RUNS_SCHEMA, "runs": lines})
}

/// `apollo show RUN --format json` (schema [`SHOW_RUN_SCHEMA`]): the run's status and counts
/// as `runs` gives them, then each unit's state, attempts and time — and, when the run ran
/// with a price table, its `cost` ([`super::run_cost`]) and each unit's.
pub fn show_run_document(
    run: &RunId,
    summary: &RunSummary,
    timeline: &Timeline,
    cost: Option<&apollo_replay::RunCost>,
) -> serde_json::Value {
    let units: Vec<serde_json::Value> = (timeline.units.iter())
        .map(|unit| {
            let mut value = serde_json::json!({
                "unit": unit.name,
                "status": timeline.state_of(unit).as_str(),
                "attempts": unit.attempts.len(),
                "duration_ms": unit.last_attempt().map(apollo_replay::Attempt::duration_ms),
            });
            if let (Some(reused), Some(object)) = (&unit.reused, value.as_object_mut()) {
                object.insert("from_run".to_owned(), reused.from_run.as_str().into());
                object.insert("from_attempt".to_owned(), reused.from_attempt.into());
                if !reused.restored.is_empty() {
                    object.insert("restored".to_owned(), reused.restored.clone().into());
                }
            }
            if let Some(unit_cost) = cost.and_then(|cost| cost.unit(&unit.name)) {
                value["cost"] = unit_cost_json(unit_cost);
            }
            if let Some(deadline) = timeline.unit_deadline(unit) {
                value["deadline"] = deadline_json(&deadline);
            }
            value
        })
        .collect();
    let mut document = serde_json::json!({
        "schema": SHOW_RUN_SCHEMA,
        "run": run.as_str(),
        "pipeline": summary.pipeline,
        "kind": summary.kind.as_str(),
        "durability": summary.durability.as_str(),
        "status": summary.state.as_str(),
        "problem": summary.problem,
        "n_units": summary.n_units,
        "counts": timeline.counts().to_json(),
        "units": units,
    });
    // A reproduction's verdict, as the run model has it.
    if let Some(verdict) = &timeline.facts.compared {
        document["reproduction"] = serde_json::json!(verdict);
    }
    if let Some(cost) = cost {
        document["cost"] = run_cost_json(cost);
    }
    if let Some(deadline) = timeline.deadline() {
        document["deadline"] = deadline_json(&deadline);
    }
    document
}

/// A deadline in the JSON documents (`apollo show`, `serve`): `{"at", "late_by_ms"}`, the
/// instant in UTC and by how much it was missed (`null` while on time or not ended).
pub fn deadline_json(deadline: &apollo_replay::DeadlineStatus) -> serde_json::Value {
    serde_json::json!({"at": deadline.deadline, "late_by_ms": deadline.late_by_ms()})
}

/// `apollo show RUN UNIT --format json` (schema [`SHOW_UNIT_SCHEMA`]): the unit's status and
/// attempts, each with its `unit_finished` record as the journal holds it. `live` is the pid of
/// the apollo running the run ([`super::live_holder_pid`]). With the run's `cost`, each
/// attempt has its `cost` and whether it was `wasted`, and the unit its own `cost`. With the
/// unit's own `deadline` ([`Timeline::unit_deadline`]), its `deadline` ([`deadline_json`]).
pub fn show_unit_document(
    state: &StateDir,
    run: &RunId,
    (unit, unit_state): (&UnitTimeline, UnitState),
    live: Option<u32>,
    cost: Option<&apollo_replay::RunCost>,
    deadline: Option<&apollo_replay::DeadlineStatus>,
) -> serde_json::Value {
    let unit_cost = cost.and_then(|cost| cost.unit(&unit.name));
    let running = |attempt: &apollo_replay::Attempt| {
        live.is_some() && attempt.state == AttemptState::Unfinished
    };
    let attempts: Vec<serde_json::Value> = (unit.attempts.iter())
        .map(|attempt| {
            let mut value = serde_json::json!({
                "number": attempt.number,
                "state": if running(attempt) { "running" } else { attempt.state.as_str() },
                "started": attempt.start,
                "ended": (attempt.state != AttemptState::Unfinished).then_some(attempt.end),
                "duration_ms": attempt.duration_ms(),
                "input_hash": attempt.input_hash,
                "inputs": attempt.inputs,
                "outcome": attempt.outcome,
                "log_dir": super::attempt_dir(state, run, &unit.name, attempt.number)
                    .ok()
                    .map(apollo_store::AttemptDir::into_path),
            });
            let priced = (unit_cost.into_iter())
                .flat_map(|unit_cost| &unit_cost.attempts)
                .find(|priced| priced.attempt == attempt.number);
            if let Some(priced) = priced {
                value["cost"] = serde_json::json!(priced.cost);
                value["wasted"] = priced.wasted.into();
            }
            value
        })
        .collect();
    let skips: Vec<serde_json::Value> = (unit.skips.iter())
        .map(|skip| serde_json::json!({"ts": skip.ts, "reason": skip.reason}))
        .collect();
    let marks: Vec<serde_json::Value> = (unit.marks.iter())
        .map(|mark| {
            serde_json::json!({
                "ts": mark.ts, "attempt": mark.attempt, "verdict": mark.verdict.as_str(),
                "by": mark.by, "note": mark.note,
            })
        })
        .collect();
    let mut document = serde_json::json!({
        "schema": SHOW_UNIT_SCHEMA,
        "run": run.as_str(),
        "unit": unit.name,
        "status": unit_state.as_str(),
        "apollo_pid": live,
        "attempts": attempts,
        "skips": skips,
        "marks": marks,
    });
    if let (Some(cost), Some(unit_cost)) = (cost, unit_cost) {
        document["cost"] = unit_cost_json(unit_cost);
        document["cost"]["currency"] = serde_json::json!(cost.currency);
    }
    if let Some(deadline) = deadline {
        document["deadline"] = deadline_json(deadline);
    }
    // Reused from an earlier run: which attempt, and the files put back from the blob store.
    if let Some(reused) = &unit.reused {
        document["reused"] = serde_json::json!({
            "ts": reused.ts, "from_run": reused.from_run, "from_attempt": reused.from_attempt,
            "input_hash": reused.input_hash, "output_hash": reused.output_hash,
            "restored": reused.restored,
        });
    }
    document
}
