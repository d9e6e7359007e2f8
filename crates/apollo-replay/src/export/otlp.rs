//! OTLP/JSON traces: the run as one OpenTelemetry trace, in the file format an OpenTelemetry
//! collector's `otlpjsonfile` receiver reads (`{"resourceSpans": [...]}`, one message a line).
//!
//! * the trace id is derived from the run id (32 hex digits), every span id (16 hex digits)
//!   from the run id and what the span is — ids are hex, as OTLP/JSON prescribes, not base64;
//! * a root span for the run, from its start to its end (or its last record), with an event
//!   per resume and a `apollo not running` child span over each resume gap;
//! * a span per unit that has anything recorded, over its attempts, with a `retry` event at
//!   each later attempt's start, a `reused` or `skipped` event, and human marks as events;
//! * a child span per attempt with its real times, and a child span per phase (`prepare`,
//!   `execute`, `cleanup`); an attempt apollo never saw end gets a `cut_off` event;
//! * status `ERROR` for failed, timed out and cut-off attempts and units, `OK` for done ones,
//!   unset for running ones; times are Unix nanoseconds as strings.

use std::io::{self, Write};

use super::otlp_model::{
    ERROR, KeyValue, OK, Resource, ResourceSpans, Scope, ScopeSpans, Span, SpanEvent, Status,
    TracesData, UNSET, boolean, event, int, nanos, string,
};
use apollo_core::UnitState;
use apollo_core::event::{ExitStatus, PhaseRecord};
use chrono::{DateTime, TimeDelta, Utc};

use super::{attempt_error, attempt_state, derived_hex, pipeline, run_end, run_id};
use crate::{Attempt, Timeline, UnitTimeline};

/// Writes `timeline` as one OTLP/JSON `TracesData` document to `out`, on one line (the
/// collector's `otlpjsonfile` receiver, like its file exporter, reads a message a line).
pub fn write_otlp_json(timeline: &Timeline, mut out: impl Write) -> io::Result<()> {
    serde_json::to_writer(&mut out, &traces(timeline))?;
    out.write_all(b"\n")
}

/// Builds the spans of one trace.
struct Tracer<'t> {
    timeline: &'t Timeline,
    trace_id: String,
    spans: Vec<Span>,
}

impl Tracer<'_> {
    fn span_id(&self, what: &[&str]) -> String {
        let mut parts = vec![run_id(self.timeline), "span"];
        parts.extend_from_slice(what);
        derived_hex(&parts, 8)
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "a span's fields, each named once"
    )]
    fn push(
        &mut self,
        span_id: String,
        parent: &str,
        name: String,
        (start, end): (DateTime<Utc>, DateTime<Utc>),
        attributes: Vec<KeyValue>,
        events: Vec<SpanEvent>,
        status: Status,
    ) {
        self.spans.push(Span {
            trace_id: self.trace_id.clone(),
            span_id,
            parent_span_id: parent.to_owned(),
            name,
            kind: 1,
            start_time_unix_nano: nanos(start),
            end_time_unix_nano: nanos(end.max(start)),
            attributes,
            events,
            status,
        });
    }
}

fn traces(timeline: &Timeline) -> TracesData {
    let run_id = run_id(timeline);
    let mut tracer = Tracer {
        timeline,
        trace_id: derived_hex(&[run_id, "trace"], 16),
        spans: Vec::new(),
    };
    let root = run_span(&mut tracer);
    for unit in &timeline.units {
        unit_spans(&mut tracer, &root, unit);
    }
    let mut resource = vec![
        string("service.name", "apollo"),
        string("service.version", env!("CARGO_PKG_VERSION")),
        string("apollo.pipeline", pipeline(timeline)),
        string("apollo.run_id", run_id),
    ];
    if let Some(host) = &timeline.host {
        resource.push(string("host.name", host.as_str()));
    }
    TracesData {
        resource_spans: vec![ResourceSpans {
            resource: Resource {
                attributes: resource,
            },
            scope_spans: vec![ScopeSpans {
                scope: Scope {
                    name: "apollo",
                    version: env!("CARGO_PKG_VERSION"),
                },
                spans: tracer.spans,
            }],
        }],
    }
}

/// The run's span and its resume gaps; returns its id.
fn run_span(tracer: &mut Tracer<'_>) -> String {
    let timeline = tracer.timeline;
    let root = tracer.span_id(&["run"]);
    let counts = timeline.counts();
    let mut attributes = vec![
        string("apollo.run_id", run_id(timeline)),
        string("apollo.pipeline", pipeline(timeline)),
        string("apollo.status", timeline.status_str()),
        string("apollo.run_kind", timeline.facts.run_kind.as_str()),
        int(
            "apollo.resumes",
            i64::try_from(timeline.resumes.len()).unwrap_or(i64::MAX),
        ),
    ];
    for state in UnitState::ALL {
        let n = counts.get(state);
        if n > 0 {
            attributes.push(int(count_key(state), n));
        }
    }
    if let Some(reproduces) = &timeline.facts.reproduces {
        let what = format!(
            "{} {} attempt {}",
            reproduces.run, reproduces.unit, reproduces.attempt
        );
        attributes.push(string("apollo.reproduces", what));
    }
    let mut events = Vec::new();
    for (index, resume) in timeline.resumes.iter().enumerate() {
        let gap_ms = (resume.ts - resume.previous_last_ts).num_milliseconds();
        events.push(event(
            resume.ts,
            "resumed",
            vec![
                string("apollo.host", resume.host.as_str()),
                int("apollo.pid", resume.pid),
                int("apollo.gap_ms", gap_ms),
                boolean("apollo.after_crash", resume.after_crash),
                int(
                    "apollo.abandoned_attempts",
                    i64::try_from(resume.n_abandoned).unwrap_or(0),
                ),
            ],
        ));
        let gap_id = tracer.span_id(&["gap", &index.to_string()]);
        let why = if resume.after_crash {
            "crashed or killed"
        } else {
            "stopped"
        };
        tracer.push(
            gap_id,
            &root,
            "apollo not running".to_owned(),
            (resume.previous_last_ts, resume.ts),
            vec![string("apollo.gap", why), int("apollo.gap_ms", gap_ms)],
            Vec::new(),
            Status::new(UNSET, None),
        );
    }
    let code = match timeline.status_str() {
        "succeeded" => OK,
        "running" => UNSET,
        _ => ERROR,
    };
    let message = Some(format!("run {}", timeline.status_str()));
    let name = format!("run {}", pipeline(timeline));
    let span = (timeline.origin(), run_end(timeline));
    tracer.push(
        root.clone(),
        "",
        name,
        span,
        attributes,
        events,
        Status::new(code, message),
    );
    root
}

/// `apollo.units.succeeded`, … for the run span's counts.
fn count_key(state: UnitState) -> &'static str {
    match state {
        UnitState::Succeeded => "apollo.units.succeeded",
        UnitState::Failed => "apollo.units.failed",
        UnitState::Skipped => "apollo.units.skipped",
        UnitState::SkippedWhen => "apollo.units.skipped_when",
        UnitState::UpstreamFailed => "apollo.units.upstream_failed",
        UnitState::Reused => "apollo.units.reused",
        UnitState::AlreadyDone => "apollo.units.already_done",
        UnitState::Running => "apollo.units.running",
        UnitState::CutOff => "apollo.units.cut_off",
        UnitState::NeedsVerdict => "apollo.units.needs_verdict",
        _ => "apollo.units.not_started",
    }
}

fn unit_spans(tracer: &mut Tracer<'_>, root: &str, unit: &UnitTimeline) {
    let timeline = tracer.timeline;
    let state = timeline.state_of(unit);
    let mut instants: Vec<DateTime<Utc>> = unit.skips.iter().map(|skip| skip.ts).collect();
    instants.extend(unit.reused.iter().map(|reused| reused.ts));
    let start = (unit.attempts.iter().map(|attempt| attempt.start))
        .chain(instants.iter().copied())
        .min();
    let end = (unit.attempts.iter().map(|attempt| attempt.end))
        .chain(instants.iter().copied())
        .max();
    let (Some(start), Some(end)) = (start, end) else {
        // Nothing recorded: the unit never started (its state says so in the counts).
        return;
    };
    let unit_id = tracer.span_id(&["unit", &unit.name]);
    let mut events = Vec::new();
    let mut previous: Option<&Attempt> = None;
    for attempt in &unit.attempts {
        if let Some(previous) = previous {
            events.push(event(
                attempt.start,
                "retry",
                vec![
                    int("apollo.attempt", attempt.number),
                    string("apollo.previous_state", attempt_state(timeline, previous)),
                ],
            ));
        }
        previous = Some(attempt);
        attempt_span(tracer, &unit_id, unit, attempt);
    }
    for skip in &unit.skips {
        let why = crate::display::skip_reason_text(&skip.reason);
        events.push(event(
            skip.ts,
            "skipped",
            vec![string("apollo.reason", why)],
        ));
    }
    if let Some(reused) = &unit.reused {
        events.push(event(
            reused.ts,
            "reused",
            vec![
                string("apollo.from_run", reused.from_run.as_str()),
                int("apollo.from_attempt", reused.from_attempt),
                string("apollo.output_hash", reused.output_hash.as_str()),
            ],
        ));
    }
    for mark in &unit.marks {
        let mut attributes = vec![
            int("apollo.attempt", mark.attempt),
            string("apollo.verdict", mark.verdict.as_str()),
            string("apollo.by", mark.by.as_str()),
        ];
        if let Some(note) = &mark.note {
            attributes.push(string("apollo.note", note.as_str()));
        }
        events.push(event(mark.ts, "marked", attributes));
    }
    events.sort_by_key(|event| event.time_unix_nano.parse::<u64>().unwrap_or(0));
    let code = match state {
        UnitState::Failed | UnitState::CutOff | UnitState::NeedsVerdict => ERROR,
        // Not run because an upstream failed: that unit's span holds the error.
        UnitState::Running | UnitState::NotStarted | UnitState::UpstreamFailed => UNSET,
        _ => OK,
    };
    let message = unit
        .last_attempt()
        .and_then(|last| attempt_error(timeline, last));
    let message = message.or_else(|| Some(state.label().to_owned()));
    let attributes = vec![
        string("apollo.unit", unit.name.as_str()),
        string("apollo.state", state.as_str()),
        int(
            "apollo.attempts",
            i64::try_from(unit.attempts.len()).unwrap_or(0),
        ),
    ];
    let name = unit.name.clone();
    tracer.push(
        unit_id,
        root,
        name,
        (start, end),
        attributes,
        events,
        Status::new(code, message),
    );
}

fn attempt_span(tracer: &mut Tracer<'_>, parent: &str, unit: &UnitTimeline, attempt: &Attempt) {
    let timeline = tracer.timeline;
    let number = attempt.number.to_string();
    let attempt_id = tracer.span_id(&["attempt", &unit.name, &number]);
    let state = attempt_state(timeline, attempt);
    let mut attributes = vec![
        string("apollo.unit", unit.name.as_str()),
        int("apollo.attempt", attempt.number),
        string("apollo.state", state),
    ];
    push_exit(&mut attributes, attempt.exit());
    if let Some(hash) = &attempt.input_hash {
        attributes.push(string("apollo.input_hash", hash.as_str()));
    }
    if let Some(hash) = attempt.output_hash() {
        attributes.push(string("apollo.output_hash", hash));
    }
    if let Some(outcome) = &attempt.outcome {
        attributes.push(boolean("apollo.timed_out", outcome.timed_out));
        attributes.push(int("apollo.duration_ms", clamp(outcome.duration_ms)));
        attributes.push(int("apollo.user_cpu_ms", clamp(outcome.user_cpu_ms)));
        attributes.push(int("apollo.sys_cpu_ms", clamp(outcome.sys_cpu_ms)));
        attributes.push(int("apollo.max_rss_kib", clamp(outcome.max_rss_kib)));
    }
    if let Some(job) = &attempt.job {
        attributes.push(string("apollo.executor", job.executor.as_str()));
        attributes.push(string("apollo.job_id", job.job_id.as_str()));
    }
    let error = attempt_error(timeline, attempt);
    if let Some(error) = &error {
        attributes.push(string("apollo.error", error.as_str()));
    }
    let mut events = Vec::new();
    if state == "cut_off" {
        let why = "apollo stopped before the attempt finished; it ends at the last record";
        events.push(event(
            attempt.end,
            "cut_off",
            vec![string("apollo.reason", why)],
        ));
    }
    if attempt.timed_out() {
        events.push(event(attempt.end, "timed_out", Vec::new()));
    }
    let code = match state {
        "succeeded" | "skipped" => OK,
        "running" => UNSET,
        _ => ERROR,
    };
    let name = format!("{} attempt {}", unit.name, attempt.number);
    let span = (attempt.start, attempt.end);
    let status = Status::new(code, error);
    tracer.push(
        attempt_id.clone(),
        parent,
        name,
        span,
        attributes,
        events,
        status,
    );
    for phase in attempt.phases() {
        phase_span(tracer, &attempt_id, unit, attempt, phase);
    }
}

fn phase_span(
    tracer: &mut Tracer<'_>,
    parent: &str,
    unit: &UnitTimeline,
    attempt: &Attempt,
    phase: &PhaseRecord,
) {
    let number = attempt.number.to_string();
    let span_id = tracer.span_id(&["phase", &unit.name, &number, phase.phase.as_str()]);
    // Within the attempt: the phases' milliseconds are rounded apart from the attempt's.
    let start = (attempt.start + millis(phase.offset_ms)).min(attempt.end);
    let end = (start + millis(phase.duration_ms)).min(attempt.end);
    let mut attributes = vec![
        string("apollo.unit", unit.name.as_str()),
        int("apollo.attempt", attempt.number),
        string("apollo.phase", phase.phase.as_str()),
        boolean("apollo.timed_out", phase.timed_out),
    ];
    push_exit(&mut attributes, phase.exit);
    let ok = phase.exit == Some(ExitStatus::Code(0)) && !phase.timed_out;
    let message = Some(crate::text::describe_exit(phase.exit));
    let status = Status::new(if ok { OK } else { ERROR }, message);
    let name = phase.phase.as_str().to_owned();
    tracer.push(
        span_id,
        parent,
        name,
        (start, end),
        attributes,
        Vec::new(),
        status,
    );
}

fn push_exit(attributes: &mut Vec<KeyValue>, exit: Option<ExitStatus>) {
    match exit {
        Some(ExitStatus::Code(code)) => attributes.push(int("apollo.exit_code", code)),
        Some(ExitStatus::Signal(signal)) => attributes.push(int("apollo.exit_signal", signal)),
        None => {}
    }
}

fn millis(ms: u64) -> TimeDelta {
    TimeDelta::milliseconds(clamp(ms))
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
