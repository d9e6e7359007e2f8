//! A Workflow Run RO-Crate (<https://www.researchobject.org/workflow-run-crate/>), Provenance
//! Run Crate profile 0.5: a directory with `ro-crate-metadata.json` describing the run.
//!
//! * the root dataset conforms to the Process, Workflow and Provenance Run Crate profiles;
//!   its main entity is the pipeline's definition snapshot (`pipeline.json`, the resolved
//!   definition the run used, from the blob store), a `ComputationalWorkflow` whose steps
//!   (`HowToStep`) are the units, each with its tool (`SoftwareApplication`);
//! * the run is a `CreateAction` of the workflow (`#run`), each unit attempt a `CreateAction`
//!   of its tool with its real start and end, status, error, and as `object` and `result`
//!   its declared input and output files (`File`s with `sha256` and `contentSize`);
//! * a `ControlAction` per attempt ties it to its step, and an `OrganizeAction` of apollo
//!   (`#apollo`) orchestrates them all, its result the run.
//!
//! With files ([`ro_crate`]'s `with_file`), each file whose bytes the blob store holds is
//! part of the crate at `files/HASH12/PATH` (the caller copies it, [`RoCrate::files`]);
//! the others are described by a local id (`#file/PATH@HASH12`) only.

use std::collections::BTreeMap;
use std::io::{self, Write};

use apollo_core::capture::FileEntry;
use serde_json::{Value, json};

use super::{PRODUCER, attempt_error, attempt_state, pipeline, rfc3339, run_end, run_id};
use crate::{Attempt, Timeline, UnitTimeline};

const PROFILES: [(&str, &str); 3] = [
    ("https://w3id.org/ro/wfrun/process/0.5", "Process Run Crate"),
    (
        "https://w3id.org/ro/wfrun/workflow/0.5",
        "Workflow Run Crate",
    ),
    (
        "https://w3id.org/ro/wfrun/provenance/0.5",
        "Provenance Run Crate",
    ),
];
const WORKFLOW_PROFILE: &str = "https://w3id.org/workflowhub/workflow-ro-crate/1.0";

/// The crate's file holding the pipeline's definition snapshot.
pub const DEFINITION_FILE: &str = "pipeline.json";

/// A Workflow Run RO-Crate: its metadata, and the files the caller puts in its directory.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RoCrate {
    /// The content of `ro-crate-metadata.json`.
    pub metadata: Value,
    /// The files to copy from the blob store into the crate.
    pub files: Vec<CrateFile>,
}

/// A file of the run to copy from the blob store into the crate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CrateFile {
    /// Where in the crate, relative to its directory (`files/0a1b2c3d4e5f/data/out.csv`).
    pub path: String,
    /// Its SHA-256: the blob to copy.
    pub sha256: String,
    /// Its permission bits.
    pub mode: u32,
}

impl RoCrate {
    /// Writes `ro-crate-metadata.json`'s content to `out`.
    pub fn write_metadata(&self, mut out: impl Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut out, &self.metadata)?;
        out.write_all(b"\n")
    }
}

/// The RO-Crate of `timeline`. `definition`: whether the crate holds the definition snapshot
/// as [`DEFINITION_FILE`] (the caller writes it). `with_file`: for `--with-files`, whether a
/// file (by SHA-256) can be copied into the crate; `None` describes files without them.
pub fn ro_crate(
    timeline: &Timeline,
    definition: bool,
    with_file: Option<&dyn Fn(&str) -> bool>,
) -> RoCrate {
    let mut builder = Builder {
        timeline,
        with_file,
        graph: Vec::new(),
        files: BTreeMap::new(),
        copies: Vec::new(),
    };
    builder.build(definition);
    let Builder {
        graph,
        files,
        copies,
        ..
    } = builder;
    let mut graph = graph;
    graph.extend(files.into_values());
    let metadata = json!({
        "@context": [
            "https://w3id.org/ro/crate/1.1/context",
            {"sha256": "https://w3id.org/ro/terms/workflow-run#sha256"},
        ],
        "@graph": graph,
    });
    RoCrate {
        metadata,
        files: copies,
    }
}

struct Builder<'t> {
    timeline: &'t Timeline,
    with_file: Option<&'t dyn Fn(&str) -> bool>,
    graph: Vec<Value>,
    /// File entities by id.
    files: BTreeMap<String, Value>,
    copies: Vec<CrateFile>,
}

fn id(value: &str) -> Value {
    json!({"@id": value})
}

/// `text` as a URI path: characters other than letters, digits and `._~/-` percent-encoded.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"._~/-".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A recorded path as a relative path inside the crate: no root, no `..`.
fn inside(path: &str) -> String {
    (path.split('/'))
        .filter(|part| !part.is_empty() && *part != ".")
        .map(|part| if part == ".." { "_" } else { part })
        .collect::<Vec<_>>()
        .join("/")
}

fn status(state: &str) -> &'static str {
    match state {
        "succeeded" | "skipped" => "http://schema.org/CompletedActionStatus",
        "running" => "http://schema.org/ActiveActionStatus",
        _ => "http://schema.org/FailedActionStatus",
    }
}

fn step_id(unit: &str) -> String {
    format!("{DEFINITION_FILE}#step/{}", encode(unit))
}

fn tool_id(unit: &str) -> String {
    format!("{DEFINITION_FILE}#tool/{}", encode(unit))
}

fn attempt_id(unit: &str, attempt: u32) -> String {
    format!("#attempt/{}/{attempt}", encode(unit))
}

impl Builder<'_> {
    fn build(&mut self, definition: bool) {
        let timeline = self.timeline;
        // The workflow's steps are the units that ran in this run: the profile wants each step
        // tied to a tool an action ran (reused, skipped and never started units ran nothing).
        let ran: Vec<&UnitTimeline> = (timeline.units.iter())
            .filter(|unit| !unit.attempts.is_empty())
            .collect();
        let mut root = json!({
            "@id": "./",
            "@type": "Dataset",
            "name": format!("apollo run {} of {}", run_id(timeline), pipeline(timeline)),
            "description": format!(
                "Provenance of the apollo run {} of the pipeline {}: {}.",
                run_id(timeline), pipeline(timeline), timeline.status_str()
            ),
            "datePublished": rfc3339(run_end(timeline)),
            "conformsTo": PROFILES.iter().map(|(uri, _)| id(uri)).chain([id(WORKFLOW_PROFILE)]).collect::<Vec<_>>(),
            "mainEntity": id(DEFINITION_FILE),
            "license": id("#license"),
            "mentions": [id("#run")],
        });
        self.graph.push(json!({
            "@id": "ro-crate-metadata.json",
            "@type": "CreativeWork",
            "conformsTo": [id("https://w3id.org/ro/crate/1.1"), id(WORKFLOW_PROFILE)],
            "about": id("./"),
        }));
        for (uri, name) in PROFILES {
            self.graph
                .push(json!({"@id": uri, "@type": "CreativeWork", "name": name, "version": "0.5"}));
        }
        self.graph.push(json!({
            "@id": "#license",
            "@type": "CreativeWork",
            "name": "not stated",
            "description": "apollo records no license for a pipeline's files: state one before publishing this crate.",
        }));
        self.graph.push(json!({"@id": WORKFLOW_PROFILE, "@type": "CreativeWork", "name": "Workflow RO-Crate", "version": "1.0"}));
        self.workflow(&ran, definition);
        let mut controls = Vec::new();
        let (mut run_objects, mut run_results) = (Vec::new(), Vec::new());
        for unit in &ran {
            for attempt in &unit.attempts {
                let (objects, results) = self.attempt(unit, attempt);
                run_objects.extend(objects);
                run_results.extend(results);
                let control = format!("#control/{}/{}", encode(&unit.name), attempt.number);
                self.graph.push(json!({
                    "@id": control,
                    "@type": "ControlAction",
                    "name": format!("orchestrate {} attempt {}", unit.name, attempt.number),
                    "instrument": id(&step_id(&unit.name)),
                    "object": id(&attempt_id(&unit.name, attempt.number)),
                }));
                controls.push(id(&control));
            }
        }
        run_objects.sort_by_key(Value::to_string);
        run_objects.dedup();
        run_results.sort_by_key(Value::to_string);
        run_results.dedup();
        let run = self.run_action(run_objects, run_results);
        self.graph.push(run);
        self.graph.push(json!({
            "@id": "#orchestration",
            "@type": "OrganizeAction",
            "name": format!("apollo orchestrating run {}", run_id(timeline)),
            "instrument": id("#apollo"),
            "object": controls,
            "result": id("#run"),
            "startTime": rfc3339(timeline.origin()),
            "endTime": rfc3339(run_end(timeline)),
        }));
        self.graph.push(json!({
            "@id": "#apollo",
            "@type": "SoftwareApplication",
            "name": "apollo",
            "version": timeline.facts.apollo_version.as_deref().unwrap_or(env!("CARGO_PKG_VERSION")),
            "url": PRODUCER,
        }));
        let mut parts = vec![id(DEFINITION_FILE)];
        parts.extend(self.copies.iter().map(|file| id(&encode(&file.path))));
        root["hasPart"] = json!(parts);
        self.graph.insert(1, root);
    }

    /// The run's `CreateAction`, with the files its attempts used and made.
    fn run_action(&self, run_objects: Vec<Value>, run_results: Vec<Value>) -> Value {
        let timeline = self.timeline;
        let mut run = json!({
            "@id": "#run",
            "@type": "CreateAction",
            "name": format!("apollo run {} of {}", run_id(timeline), pipeline(timeline)),
            "instrument": id(DEFINITION_FILE),
            "agent": id("#apollo"),
            "startTime": rfc3339(timeline.origin()),
            "endTime": rfc3339(run_end(timeline)),
            "actionStatus": status(timeline.status_str()),
            "object": run_objects,
            "result": run_results,
            "identifier": run_id(timeline),
        });
        if !matches!(timeline.status_str(), "succeeded" | "running") {
            run["error"] = json!(format!("run {}", timeline.status_str()));
        }
        let mut description = vec![format!(
            "an apollo {} that {}",
            timeline.facts.run_kind.as_str(),
            match timeline.status_str() {
                "running" => "is running".to_owned(),
                "incomplete" => "stopped before it finished (apollo was killed)".to_owned(),
                status => format!("ended {status}"),
            }
        )];
        if let Some(reproduces) = &timeline.facts.reproduces {
            description.push(format!(
                "it reproduces {} attempt {} of run {}",
                reproduces.unit, reproduces.attempt, reproduces.run
            ));
        }
        if !timeline.resumes.is_empty() {
            let resumes: Vec<String> = (timeline.resumes.iter())
                .map(|resume| rfc3339(resume.ts))
                .collect();
            description.push(format!("resumed at {}", resumes.join(", ")));
        }
        run["description"] = json!(description.join("; "));
        run
    }

    fn workflow(&mut self, units: &[&UnitTimeline], definition: bool) {
        let timeline = self.timeline;
        let mut workflow = json!({
            "@id": DEFINITION_FILE,
            "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow", "HowTo"],
            "name": pipeline(timeline),
            "encodingFormat": "application/json",
            "programmingLanguage": id("#apollo-pipeline"),
            "hasPart": units.iter().map(|unit| id(&tool_id(&unit.name))).collect::<Vec<_>>(),
            "step": units.iter().map(|unit| id(&step_id(&unit.name))).collect::<Vec<_>>(),
            "input": [],
            "output": [],
        });
        if let Some(hash) = &timeline.facts.definition_hash {
            workflow["sha256"] = json!(hash);
        }
        if let Some(config) = &timeline.facts.config_path {
            workflow["alternateName"] = json!(config);
        }
        if !definition {
            workflow["description"] = json!("the definition snapshot was not in the blob store");
        }
        self.graph.push(workflow);
        self.graph.push(json!({
            "@id": "#apollo-pipeline",
            "@type": "ComputerLanguage",
            "name": "apollo pipeline definition",
            "url": id(env!("CARGO_PKG_REPOSITORY")),
        }));
        for (position, unit) in units.iter().enumerate() {
            self.graph.push(json!({
                "@id": step_id(&unit.name),
                "@type": "HowToStep",
                "name": unit.name,
                "position": position.to_string(),
                "workExample": id(&tool_id(&unit.name)),
            }));
            self.graph.push(json!({
                "@id": tool_id(&unit.name),
                "@type": "SoftwareApplication",
                "name": unit.name,
                "input": [],
                "output": [],
            }));
        }
    }

    /// The attempt's action; returns its objects and results.
    fn attempt(&mut self, unit: &UnitTimeline, attempt: &Attempt) -> (Vec<Value>, Vec<Value>) {
        let timeline = self.timeline;
        let objects: Vec<Value> = (attempt.files.inputs.iter())
            .map(|file| id(&self.file(file)))
            .collect();
        let results: Vec<Value> = (attempt.files.outputs.iter())
            .map(|file| id(&self.file(file)))
            .collect();
        let state = attempt_state(timeline, attempt);
        let mut action = json!({
            "@id": attempt_id(&unit.name, attempt.number),
            "@type": "CreateAction",
            "name": format!("{} attempt {}", unit.name, attempt.number),
            "instrument": id(&tool_id(&unit.name)),
            "agent": id("#apollo"),
            "startTime": rfc3339(attempt.start),
            "endTime": rfc3339(attempt.end),
            "actionStatus": status(state),
            "description": format!("apollo attempt state: {state}"),
            "object": objects,
            "result": results,
        });
        if let Some(error) = attempt_error(timeline, attempt) {
            action["error"] = json!(error);
        }
        self.graph.push(action);
        (objects, results)
    }

    /// The file's entity (added once); returns its id.
    fn file(&mut self, file: &FileEntry) -> String {
        let short = file.sha256.get(..12).unwrap_or(&file.sha256);
        let copied = file.captured() && self.with_file.is_some_and(|has| has(&file.sha256));
        let (entity_id, path) = if copied {
            let path = format!("files/{short}/{}", inside(&file.path));
            (encode(&path), Some(path))
        } else {
            (
                format!("#file/{}@{short}", encode(&inside(&file.path))),
                None,
            )
        };
        if !self.files.contains_key(&entity_id) {
            if let Some(path) = path {
                self.copies.push(CrateFile {
                    path,
                    sha256: file.sha256.clone(),
                    mode: file.mode,
                });
            }
            let entity = json!({
                "@id": entity_id,
                "@type": "File",
                "name": file.path,
                "sha256": file.sha256,
                "contentSize": file.size.to_string(),
            });
            self.files.insert(entity_id.clone(), entity);
        }
        entity_id
    }
}
