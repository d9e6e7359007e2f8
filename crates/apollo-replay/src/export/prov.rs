//! W3C PROV-JSON (<https://www.w3.org/submissions/prov-json/>): what each attempt used and
//! generated, and who ran it.
//!
//! * **activities**: the run (`run:run`) and each attempt (`run:UNIT/attempt-N`), with their
//!   real start and end times, state, exit and error;
//! * **entities**: the pipeline definition snapshot, each declared input and output file at a
//!   given content (`run:file/PATH@HASH`, with its SHA-256 and size), the unit's commands and
//!   env variables as hashed, and each unit output (`run:output/UNIT@HASH`, the hash its
//!   dependents saw — reused outputs name the run that made them);
//! * **agents**: apollo (a software agent, with its version and host) and the people who
//!   marked units;
//! * **relations**: `used` (an attempt its inputs, the run its definition),
//!   `wasGeneratedBy` (outputs by their attempt), `wasAssociatedWith` (every activity with
//!   apollo, marked attempts with the person), `wasStartedBy` (an attempt by the run) and
//!   `wasInformedBy` (an attempt by the upstream attempt whose output it used, a retry by the
//!   attempt before it).

use std::collections::BTreeMap;
use std::io::{self, Write};

use apollo_core::event::InputKind;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{PRODUCER, attempt_error, attempt_state, rfc3339, run_end, run_id};
use crate::{Attempt, Timeline, UnitTimeline};

/// Writes `timeline` as one PROV-JSON document to `out`.
pub fn write_prov_json(timeline: &Timeline, mut out: impl Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut out, &document(timeline))?;
    out.write_all(b"\n")
}

type Records = BTreeMap<String, Map<String, Value>>;

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct ProvDocument {
    prefix: BTreeMap<&'static str, String>,
    entity: Records,
    activity: Records,
    agent: Records,
    used: Records,
    was_generated_by: Records,
    was_associated_with: Records,
    was_started_by: Records,
    was_informed_by: Records,
}

impl ProvDocument {
    /// A relation with a fresh blank id (`_:used3`).
    fn relate(&mut self, kind: &str, fields: Value) {
        let (records, prefix) = match kind {
            "used" => (&mut self.used, "u"),
            "wasGeneratedBy" => (&mut self.was_generated_by, "g"),
            "wasAssociatedWith" => (&mut self.was_associated_with, "a"),
            "wasStartedBy" => (&mut self.was_started_by, "s"),
            _ => (&mut self.was_informed_by, "i"),
        };
        let id = format!("_:{prefix}{}", records.len() + 1);
        records.insert(id, object(fields));
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// `text` as the local part of a qualified name: characters other than letters, digits and
/// `._~/-` percent-encoded, so a path with spaces or colons stays one name.
fn local(text: &str) -> String {
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

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn attempt_id(unit: &str, attempt: u32) -> String {
    format!("run:{}/attempt-{attempt}", local(unit))
}

fn output_id(unit: &str, hash: &str) -> String {
    format!("run:output/{}@{}", local(unit), short(hash))
}

fn document(timeline: &Timeline) -> ProvDocument {
    let mut doc = ProvDocument::default();
    let namespace = concat!(env!("CARGO_PKG_REPOSITORY"), "/ns/prov#");
    doc.prefix.insert("apollo", namespace.to_owned());
    doc.prefix
        .insert("run", format!("urn:apollo:run:{}:", run_id(timeline)));
    let agent = json!({
        "prov:type": "prov:SoftwareAgent",
        "prov:label": "apollo",
        "apollo:version": timeline.facts.apollo_version.as_deref().unwrap_or(env!("CARGO_PKG_VERSION")),
        "apollo:host": timeline.host.as_deref().unwrap_or(""),
        "apollo:exporter": PRODUCER,
    });
    doc.agent.insert("run:apollo".to_owned(), object(agent));
    let mut run = json!({
        "prov:type": "apollo:Run",
        "prov:label": format!("run {} of {}", run_id(timeline), super::pipeline(timeline)),
        "prov:startTime": rfc3339(timeline.origin()),
        "prov:endTime": rfc3339(run_end(timeline)),
        "apollo:run_id": run_id(timeline),
        "apollo:pipeline": super::pipeline(timeline),
        "apollo:status": timeline.status_str(),
        "apollo:run_kind": timeline.facts.run_kind.as_str(),
        "apollo:resumes": timeline.resumes.len(),
    });
    if let Some(reproduces) = &timeline.facts.reproduces {
        run["apollo:reproduces"] = json!(format!(
            "{} {} attempt {}",
            reproduces.run, reproduces.unit, reproduces.attempt
        ));
    }
    doc.activity.insert("run:run".to_owned(), object(run));
    doc.relate(
        "wasAssociatedWith",
        json!({"prov:activity": "run:run", "prov:agent": "run:apollo"}),
    );
    if let Some(hash) = &timeline.facts.definition_hash {
        let definition = json!({
            "prov:type": "apollo:PipelineDefinition",
            "prov:label": timeline.facts.config_path.as_deref().unwrap_or("pipeline definition"),
            "apollo:sha256": hash,
        });
        doc.entity
            .insert("run:definition".to_owned(), object(definition));
        doc.relate(
            "used",
            json!({"prov:activity": "run:run", "prov:entity": "run:definition",
                   "prov:time": rfc3339(timeline.origin())}),
        );
    }
    for unit in &timeline.units {
        unit_records(&mut doc, timeline, unit);
    }
    doc
}

fn unit_records(doc: &mut ProvDocument, timeline: &Timeline, unit: &UnitTimeline) {
    let mut previous: Option<&Attempt> = None;
    for attempt in &unit.attempts {
        attempt_records(doc, timeline, unit, attempt);
        if let Some(previous) = previous {
            doc.relate(
                "wasInformedBy",
                json!({"prov:informed": attempt_id(&unit.name, attempt.number),
                       "prov:informant": attempt_id(&unit.name, previous.number)}),
            );
        }
        previous = Some(attempt);
    }
    if let Some(reused) = &unit.reused {
        let entity = json!({
            "prov:type": "apollo:UnitOutput",
            "prov:label": format!("output of {}", unit.name),
            "apollo:unit": unit.name,
            "apollo:hash": reused.output_hash,
            "apollo:reused_from": format!("run {} attempt {}", reused.from_run, reused.from_attempt),
        });
        doc.entity
            .insert(output_id(&unit.name, &reused.output_hash), object(entity));
    }
}

fn attempt_records(
    doc: &mut ProvDocument,
    timeline: &Timeline,
    unit: &UnitTimeline,
    attempt: &Attempt,
) {
    let id = attempt_id(&unit.name, attempt.number);
    let mut activity = json!({
        "prov:type": "apollo:Attempt",
        "prov:label": format!("{} attempt {}", unit.name, attempt.number),
        "prov:startTime": rfc3339(attempt.start),
        "prov:endTime": rfc3339(attempt.end),
        "apollo:unit": unit.name,
        "apollo:attempt": attempt.number,
        "apollo:state": attempt_state(timeline, attempt),
    });
    if let Some(apollo_core::event::ExitStatus::Code(code)) = attempt.exit() {
        activity["apollo:exit_code"] = json!(code);
    }
    if let Some(apollo_core::event::ExitStatus::Signal(signal)) = attempt.exit() {
        activity["apollo:exit_signal"] = json!(signal);
    }
    if let Some(hash) = &attempt.input_hash {
        activity["apollo:input_hash"] = json!(hash);
    }
    if let Some(error) = attempt_error(timeline, attempt) {
        activity["apollo:error"] = json!(error);
    }
    doc.activity.insert(id.clone(), object(activity));
    doc.relate(
        "wasAssociatedWith",
        json!({"prov:activity": id, "prov:agent": "run:apollo"}),
    );
    doc.relate(
        "wasStartedBy",
        json!({"prov:activity": id, "prov:starter": "run:run", "prov:time": rfc3339(attempt.start)}),
    );
    used_inputs(doc, timeline, unit, attempt, &id);
    let used_at = rfc3339(attempt.start);
    for file in &attempt.files.inputs {
        let entity_id = file_entity(doc, file);
        doc.relate(
            "used",
            json!({"prov:activity": id, "prov:entity": entity_id, "prov:time": used_at}),
        );
    }
    let generated_at = rfc3339(attempt.end);
    for file in &attempt.files.outputs {
        let entity_id = file_entity(doc, file);
        doc.relate(
            "wasGeneratedBy",
            json!({"prov:entity": entity_id, "prov:activity": id, "prov:time": generated_at}),
        );
    }
    if let Some(hash) = attempt.output_hash() {
        let entity = json!({
            "prov:type": "apollo:UnitOutput",
            "prov:label": format!("output of {}", unit.name),
            "apollo:unit": unit.name,
            "apollo:hash": hash,
        });
        let entity_id = output_id(&unit.name, hash);
        doc.entity.insert(entity_id.clone(), object(entity));
        doc.relate(
            "wasGeneratedBy",
            json!({"prov:entity": entity_id, "prov:activity": id, "prov:time": generated_at}),
        );
    }
    for mark in unit
        .marks
        .iter()
        .filter(|mark| mark.attempt == attempt.number)
    {
        let person = format!("run:person/{}", local(&mark.by));
        let agent = json!({"prov:type": "prov:Person", "prov:label": mark.by});
        doc.agent.insert(person.clone(), object(agent));
        let role = format!("apollo:marked_{}", mark.verdict.as_str());
        doc.relate(
            "wasAssociatedWith",
            json!({"prov:activity": id, "prov:agent": person, "prov:role": role}),
        );
    }
}

/// The attempt's `used` of its command, env and upstream components (and its input files'
/// components when no `unit_files` lists them).
fn used_inputs(
    doc: &mut ProvDocument,
    timeline: &Timeline,
    unit: &UnitTimeline,
    attempt: &Attempt,
    id: &str,
) {
    let used_at = rfc3339(attempt.start);
    for component in &attempt.inputs {
        let (entity_id, entity) = match component.kind {
            InputKind::File if !attempt.files.inputs.is_empty() => continue,
            InputKind::Upstream => {
                inform_by_upstream(doc, timeline, id, &component.name, &component.hash);
                let entity = json!({
                    "prov:type": "apollo:UnitOutput",
                    "prov:label": format!("output of {}", component.name),
                    "apollo:unit": component.name,
                    "apollo:hash": component.hash,
                });
                (output_id(&component.name, &component.hash), entity)
            }
            kind => {
                let kind_name = match kind {
                    InputKind::Command => "command",
                    InputKind::Env => "env",
                    _ => "file",
                };
                let entity = json!({
                    "prov:type": format!("apollo:{kind_name}"),
                    "prov:label": component.name,
                    "apollo:hash": component.hash,
                });
                let name = match kind {
                    InputKind::Command => format!("{}/{}", unit.name, component.name),
                    _ => component.name.clone(),
                };
                (
                    format!(
                        "run:{kind_name}/{}@{}",
                        local(&name),
                        short(&component.hash)
                    ),
                    entity,
                )
            }
        };
        doc.entity
            .entry(entity_id.clone())
            .or_insert_with(|| object(entity));
        doc.relate(
            "used",
            json!({"prov:activity": id, "prov:entity": entity_id, "prov:time": used_at}),
        );
    }
}

/// The attempt of `upstream` that generated `hash`, when it ran in this run.
fn inform_by_upstream(
    doc: &mut ProvDocument,
    timeline: &Timeline,
    informed: &str,
    upstream: &str,
    hash: &str,
) {
    let Some(unit) = timeline.unit(upstream) else {
        return;
    };
    if let Some(source) = unit
        .attempts
        .iter()
        .find(|attempt| attempt.output_hash() == Some(hash))
    {
        doc.relate(
            "wasInformedBy",
            json!({"prov:informed": informed, "prov:informant": attempt_id(upstream, source.number)}),
        );
    }
}

fn file_entity(doc: &mut ProvDocument, file: &apollo_core::capture::FileEntry) -> String {
    let id = format!("run:file/{}@{}", local(&file.path), short(&file.sha256));
    let entity = json!({
        "prov:type": "apollo:File",
        "prov:label": file.path,
        "apollo:path": file.path,
        "apollo:sha256": file.sha256,
        "apollo:size": file.size,
    });
    doc.entity
        .entry(id.clone())
        .or_insert_with(|| object(entity));
    id
}
