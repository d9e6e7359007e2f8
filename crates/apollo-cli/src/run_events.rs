//! The events of `apollo run --format json`: one JSON object per line, each with
//! `"schema": "apollo.run_events/2"`.

use apollo_core::engine::{Decision, Notice};

/// The schema every event of `apollo run --format json` carries.
pub(crate) const RUN_EVENTS_SCHEMA: &str = "apollo.run_events/2";

/// The event a notice of the engine prints, if any.
pub(crate) fn event(notice: &Notice<'_>) -> Option<serde_json::Value> {
    let mut event = match notice {
        Notice::Decided { unit, decision } => Some(serde_json::json!({
            "event": "decided", "unit": unit,
            "runs": !matches!(decision, Decision::Reuse { .. } | Decision::Reused { .. }),
            "reason": decision.to_string(),
        })),
        Notice::Started { unit, attempt } => Some(serde_json::json!({
            "event": "started", "unit": unit, "attempt": attempt,
        })),
        Notice::Finished {
            unit,
            record,
            retry_in,
            log_dir,
        } => Some(serde_json::json!({
            "event": "finished", "unit": unit, "record": record,
            "retry_in_ms": retry_in.map(|delay| u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)),
            "log_dir": log_dir,
        })),
        Notice::Skipped { unit, upstream } => Some(serde_json::json!({
            "event": "skipped", "unit": unit, "upstream_failed": upstream,
        })),
        Notice::SkippedWhen { unit, condition } => Some(serde_json::json!({
            "event": "skipped", "unit": unit, "when": condition,
        })),
        Notice::Reused {
            unit,
            from_run,
            from_attempt,
            restored,
        } => Some(serde_json::json!({
            "event": "reused", "unit": unit, "from_run": from_run,
            "from_attempt": from_attempt, "restored": restored,
        })),
        // The run is late (`on_late` fires): its `run_late` record.
        Notice::Late { record } => Some(serde_json::json!({"event": "late", "record": record})),
        _ => None,
    };
    if let Some(object) = event.as_mut().and_then(serde_json::Value::as_object_mut) {
        object.insert("schema".to_owned(), RUN_EVENTS_SCHEMA.into());
    }
    event
}
