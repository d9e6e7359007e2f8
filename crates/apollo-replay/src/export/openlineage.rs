//! OpenLineage run events (<https://openlineage.io/spec/2-0-2/OpenLineage.json>), one JSON
//! object a line, in time order — what a lineage backend (Marquez, DataHub, …) ingests.
//!
//! * the run is a job named after the pipeline, in the namespace of the pipeline: `START` at
//!   its start, `RUNNING` at each resume, and `COMPLETE`, `FAIL` or `ABORT` at its end (none
//!   while it runs);
//! * each unit is a job `UNIT` in the pipeline's namespace, each of its attempts a run of it
//!   (with the `parent` facet naming the pipeline's run): `START` at the attempt's start, then
//!   `COMPLETE` (succeeded, skipped itself), `FAIL` (failed, timed out; with the
//!   `errorMessage` facet) or `ABORT` (interrupted, cut off) at its end;
//! * datasets are the unit's declared input files (on `START`) and outputs (on `COMPLETE`),
//!   named as OpenLineage names local files (namespace `file`, name the absolute path: the
//!   recorded path joined to the config's folder), each with its SHA-256 as the `version`
//!   facet (outputs also with their size as `outputStatistics`).
//!
//! Run ids are UUIDs derived from the run id and attempt (version 8, "custom"), so two
//! exports of the same run name the same runs. Units that did not run (reused, skipped, not
//! started) have no events.

use std::io::{self, Write};

use apollo_core::capture::FileEntry;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{
    PRODUCER, attempt_error, attempt_state, derived_hex, pipeline, rfc3339, run_end, run_id,
};
use crate::{Attempt, Timeline, UnitTimeline};

const SCHEMA_URL: &str = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent";
const PARENT_SCHEMA: &str =
    "https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet";
const ERROR_SCHEMA: &str = "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet";
const ENGINE_SCHEMA: &str = "https://openlineage.io/spec/facets/1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet";
const JOB_TYPE_SCHEMA: &str =
    "https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet";
const VERSION_SCHEMA: &str = "https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json#/$defs/DatasetVersionDatasetFacet";
const STATISTICS_SCHEMA: &str = "https://openlineage.io/spec/facets/1-0-2/OutputStatisticsOutputDatasetFacet.json#/$defs/OutputStatisticsOutputDatasetFacet";

/// Writes `timeline` as OpenLineage run events to `out`, one JSON object a line.
pub fn write_openlineage(timeline: &Timeline, mut out: impl Write) -> io::Result<()> {
    for event in events(timeline) {
        serde_json::to_writer(&mut out, &event)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RunEvent {
    event_type: &'static str,
    event_time: String,
    run: Run,
    job: Job,
    inputs: Vec<Dataset>,
    outputs: Vec<Dataset>,
    producer: &'static str,
    #[serde(rename = "schemaURL")]
    schema_url: &'static str,
    /// When the event happened, to order the events (not written).
    #[serde(skip)]
    at: DateTime<Utc>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run {
    run_id: String,
    facets: Map<String, Value>,
}

#[derive(Serialize)]
struct Job {
    namespace: String,
    name: String,
    facets: Map<String, Value>,
}

#[derive(Serialize)]
struct Dataset {
    namespace: String,
    name: String,
    facets: Map<String, Value>,
}

/// A facet: its fields with the `_producer` and `_schemaURL` every facet carries.
fn facet(schema: &str, fields: Value) -> Value {
    let mut facet = json!({"_producer": PRODUCER, "_schemaURL": schema});
    if let (Some(facet), Value::Object(fields)) = (facet.as_object_mut(), fields) {
        facet.extend(fields);
    }
    facet
}

/// A UUID (version 8, RFC 9562 variant) derived from `parts`.
fn uuid(parts: &[&str]) -> String {
    let hex = derived_hex(parts, 16);
    let variant = u8::from_str_radix(&hex[16..17], 16).unwrap_or(0) & 0x3 | 0x8;
    format!(
        "{}-{}-8{}-{:x}{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        variant,
        &hex[17..20],
        &hex[20..32]
    )
}

struct Lineage<'t> {
    timeline: &'t Timeline,
    run_uuid: String,
    /// The config's folder, which recorded paths are relative to.
    base: Option<&'t str>,
}

impl Lineage<'_> {
    fn event(&self, event_type: &'static str, at: DateTime<Utc>, run: Run, job: Job) -> RunEvent {
        RunEvent {
            event_type,
            event_time: rfc3339(at),
            run,
            job,
            inputs: Vec::new(),
            outputs: Vec::new(),
            producer: PRODUCER,
            schema_url: SCHEMA_URL,
            at,
        }
    }

    fn job(&self, name: &str, job_type: &str) -> Job {
        let mut facets = Map::new();
        let job_type =
            json!({"processingType": "BATCH", "integration": "APOLLO", "jobType": job_type});
        facets.insert("jobType".to_owned(), facet(JOB_TYPE_SCHEMA, job_type));
        Job {
            namespace: pipeline(self.timeline).to_owned(),
            name: name.to_owned(),
            facets,
        }
    }

    fn run(&self, run_id: String, error: Option<String>, parent: bool) -> Run {
        let mut facets = Map::new();
        let engine = json!({"version": env!("CARGO_PKG_VERSION"), "name": "apollo"});
        facets.insert("processing_engine".to_owned(), facet(ENGINE_SCHEMA, engine));
        if parent {
            let parent = json!({
                "run": {"runId": self.run_uuid},
                "job": {"namespace": pipeline(self.timeline), "name": pipeline(self.timeline)},
            });
            facets.insert("parent".to_owned(), facet(PARENT_SCHEMA, parent));
        }
        if let Some(message) = error {
            let error = json!({"message": message, "programmingLanguage": "shell"});
            facets.insert("errorMessage".to_owned(), facet(ERROR_SCHEMA, error));
        }
        Run { run_id, facets }
    }

    fn dataset(&self, file: &FileEntry, output: bool) -> Dataset {
        let mut facets = Map::new();
        let version = json!({"datasetVersion": file.sha256});
        facets.insert("version".to_owned(), facet(VERSION_SCHEMA, version));
        if output {
            let statistics = json!({"size": file.size});
            facets.insert(
                "outputStatistics".to_owned(),
                facet(STATISTICS_SCHEMA, statistics),
            );
        }
        Dataset {
            namespace: "file".to_owned(),
            name: absolute(self.base, &file.path),
            facets,
        }
    }
}

/// `path` (relative to `base`, or absolute) as an absolute path, `.` and `..` resolved by
/// name (the files may be gone): what OpenLineage names a local file.
fn absolute(base: Option<&str>, path: &str) -> String {
    let joined = match base {
        Some(base) if !path.starts_with('/') => format!("{base}/{path}"),
        _ => path.to_owned(),
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    if joined.starts_with('/') {
        format!("/{}", parts.join("/"))
    } else {
        parts.join("/")
    }
}

fn events(timeline: &Timeline) -> Vec<RunEvent> {
    let lineage = Lineage {
        timeline,
        run_uuid: uuid(&[run_id(timeline), "run"]),
        base: (timeline.facts.config_path.as_deref())
            .and_then(|config| config.rsplit_once('/'))
            .map(|(folder, _)| folder),
    };
    let mut events = run_events(&lineage);
    for unit in &timeline.units {
        for attempt in &unit.attempts {
            attempt_events(&lineage, unit, attempt, &mut events);
        }
    }
    // Stable: a unit's START stays before its end at the same millisecond.
    events.sort_by_key(|event| event.at);
    events
}

fn run_events(lineage: &Lineage<'_>) -> Vec<RunEvent> {
    let timeline = lineage.timeline;
    let job = || lineage.job(pipeline(timeline), "DAG");
    let run = |error| lineage.run(lineage.run_uuid.clone(), error, false);
    let mut events = vec![lineage.event("START", timeline.origin(), run(None), job())];
    for resume in &timeline.resumes {
        events.push(lineage.event("RUNNING", resume.ts, run(None), job()));
    }
    let end = match timeline.status_str() {
        "running" => return events,
        "succeeded" => ("COMPLETE", None),
        "failed" => (
            "FAIL",
            Some(format!(
                "run failed: {} units failed",
                timeline.counts().get(apollo_core::UnitState::Failed)
            )),
        ),
        status => ("ABORT", Some(format!("run {status}"))),
    };
    events.push(lineage.event(end.0, run_end(timeline), run(end.1), job()));
    events
}

fn attempt_events(
    lineage: &Lineage<'_>,
    unit: &UnitTimeline,
    attempt: &Attempt,
    events: &mut Vec<RunEvent>,
) {
    let timeline = lineage.timeline;
    let number = attempt.number.to_string();
    let attempt_uuid = uuid(&[run_id(timeline), "attempt", &unit.name, &number]);
    let job = || lineage.job(&unit.name, "TASK");
    let run = |error| lineage.run(attempt_uuid.clone(), error, true);
    let mut start = lineage.event("START", attempt.start, run(None), job());
    start.inputs = (attempt.files.inputs.iter())
        .map(|file| lineage.dataset(file, false))
        .collect();
    events.push(start);
    let event_type = match attempt_state(timeline, attempt) {
        "running" => return,
        "succeeded" | "skipped" => "COMPLETE",
        "failed" | "timed_out" => "FAIL",
        _ => "ABORT",
    };
    let mut end = lineage.event(
        event_type,
        attempt.end,
        run(attempt_error(timeline, attempt)),
        job(),
    );
    end.inputs = (attempt.files.inputs.iter())
        .map(|file| lineage.dataset(file, false))
        .collect();
    end.outputs = (attempt.files.outputs.iter())
        .map(|file| lineage.dataset(file, true))
        .collect();
    events.push(end);
}
