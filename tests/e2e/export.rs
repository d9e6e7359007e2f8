//! `apollo export` (issue 40) of real runs — a succeeded one, a failed then resumed one, one
//! whose apollo was killed mid-unit — each format checked by its own ecosystem's validator
//! (`tests/e2e/export/validate.py`, which says which validator checks what):
//!
//! * OTLP/JSON: `opentelemetry-proto`'s protobuf classes (`json_format.Parse`, which rejects
//!   unknown fields), then the hex trace and span ids OTLP/JSON prescribes;
//! * PROV-JSON: `prov`'s `ProvDocument.deserialize(format='json')`;
//! * OpenLineage: `openlineage-python`'s event and facet classes, each event rebuilt with them
//!   and serialized back equal;
//! * RO-Crate: `roc-validator`, Provenance Run Crate 0.5 profile, offline (the RO-Crate 1.1
//!   JSON-LD context is vendored beside the script).
//!
//! Without the validators these tests print `SKIPPED:` and pass, except under `CI=true`
//! (`.ci/run` installs them in `target/export-validators`).
#![allow(clippy::disallowed_methods)] // The tests run the Python validators.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::Apollo;

/// The Python with the validators: `$APOLLO_EXPORT_VALIDATORS` (a python), else the venv
/// `.ci/run` makes, else `python3` — if it can import them all.
fn validators() -> Option<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = [
        std::env::var_os("APOLLO_EXPORT_VALIDATORS").map(PathBuf::from),
        Some(workspace.join("target/export-validators/bin/python")),
        Some(PathBuf::from("python3")),
    ];
    let imports = "import prov.model, openlineage.client.event_v2, \
                   opentelemetry.proto.trace.v1.trace_pb2, google.protobuf.json_format, \
                   rocrate_validator.services";
    candidates.into_iter().flatten().find(|python| {
        Command::new(python)
            .args(["-c", imports])
            .output()
            .is_ok_and(|output| output.status.success())
    })
}

fn require_validators() -> Option<PathBuf> {
    let found = validators();
    let available = apollo_core::testing::require(
        found.is_some(),
        "the export validators (prov, openlineage-python, opentelemetry-proto, roc-validator)",
        "python3 -m venv target/export-validators && target/export-validators/bin/pip install \
         prov openlineage-python opentelemetry-proto roc-validator",
    );
    found.filter(|_| available)
}

/// Exports the latest run in every format into `dir` and has the validators check them all.
fn export_and_validate(apollo: &mut Apollo, python: &Path, name: &str) -> PathBuf {
    let dir = apollo.path(&format!("exports/{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut pairs: Vec<String> = Vec::new();
    for (format, file) in [
        ("otlp-json", "trace.json"),
        ("prov-json", "prov.json"),
        ("openlineage", "lineage.jsonl"),
    ] {
        let path = dir.join(file);
        let path_text = path.to_str().unwrap();
        apollo
            .args(&[
                "export", "latest", "--format", format, "--output", path_text,
            ])
            .run()
            .code(0);
        pairs.extend([format.to_owned(), path_text.to_owned()]);
    }
    let crate_dir = dir.join("crate");
    let crate_text = crate_dir.to_str().unwrap();
    let made = apollo
        .args(&[
            "export",
            "latest",
            "--format",
            "ro-crate",
            "-o",
            crate_text,
            "--with-files",
        ])
        .run();
    made.code(0);
    assert!(
        made.stdout.contains("wrote the RO-Crate"),
        "{}",
        made.stdout
    );
    pairs.extend(["ro-crate".to_owned(), crate_text.to_owned()]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/export/validate.py");
    let checked = Command::new(python)
        .arg(script)
        .args(&pairs)
        .output()
        .expect("run the validators");
    assert!(
        checked.status.success(),
        "the validators reject the {name} run's exports:\n{}\n{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    dir
}

const PIPELINE: &str = "name: export-demo
units:
  - name: extract
    inputs: [data/raw.csv]
    outputs: [out/clean.csv]
    execute: mkdir -p out && cp data/raw.csv out/clean.csv
  - name: load
    deps: [extract]
    inputs: [out/clean.csv]
    outputs: [out/loaded.txt]
    execute: bin/count load && test -e load.ok && bin/block load && cp out/clean.csv out/loaded.txt
";

fn project() -> Apollo {
    let apollo = Apollo::new();
    apollo.file("data/raw.csv", "id,value\n1,42\n");
    apollo.config(PIPELINE);
    apollo
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

#[test]
fn a_succeeded_run_exports_in_every_format_its_validator_accepts() {
    let Some(python) = require_validators() else {
        return;
    };
    let mut apollo = project();
    apollo.file("load.ok", "");
    apollo.file("markers/load.release", "");
    apollo.args(&["run"]).run().code(0);
    let dir = export_and_validate(&mut apollo, &python, "succeeded");
    let lineage = read(&dir, "lineage.jsonl");
    let completes = lineage.matches("\"eventType\":\"COMPLETE\"").count();
    assert_eq!(completes, 3, "two units and the run: {lineage}");
    let clean = apollo_core::hash::sha256_hex(b"id,value\n1,42\n");
    assert!(
        lineage.contains(&clean),
        "the dataset's version is its hash: {lineage}"
    );
    // --with-files: the files are in the crate, byte for byte.
    let copied = dir.join(format!("crate/files/{}/out/clean.csv", &clean[..12]));
    assert_eq!(std::fs::read_to_string(copied).unwrap(), "id,value\n1,42\n");
    assert!(dir.join("crate/pipeline.json").is_file());
}

#[test]
fn a_failed_then_resumed_run_exports_both_attempts_at_their_real_times() {
    let Some(python) = require_validators() else {
        return;
    };
    let mut apollo = project();
    apollo.file("markers/load.release", "");
    apollo.args(&["run"]).run().code(1);
    apollo.file("load.ok", "");
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.run_ids().len(), 1, "the run was resumed");
    let dir = export_and_validate(&mut apollo, &python, "resumed");
    let trace: serde_json::Value = serde_json::from_str(&read(&dir, "trace.json")).unwrap();
    let spans = trace["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    let named = |name: &str| spans.iter().find(|span| span["name"] == name).unwrap();
    let (first, second) = (named("load attempt 1"), named("load attempt 2"));
    assert_eq!(
        first["status"]["code"], 2,
        "the failed attempt is an error: {first}"
    );
    let ends =
        |span: &serde_json::Value, key: &str| span[key].as_str().unwrap().parse::<u64>().unwrap();
    assert!(ends(first, "endTimeUnixNano") <= ends(second, "startTimeUnixNano"));
    assert!(
        spans
            .iter()
            .any(|span| span["name"] == "apollo not running"),
        "the resume gap"
    );
    let lineage = read(&dir, "lineage.jsonl");
    let load: Vec<&str> = (lineage.lines())
        .filter(|line| line.contains("\"name\":\"load\""))
        .collect();
    assert_eq!(load.len(), 4, "START FAIL START COMPLETE: {lineage}");
    assert!(
        load[1].contains("\"eventType\":\"FAIL\"")
            && load[3].contains("\"eventType\":\"COMPLETE\"")
    );
}

#[test]
fn a_killed_run_exports_its_cut_off_unit() {
    let Some(python) = require_validators() else {
        return;
    };
    let mut apollo = project();
    apollo.file("load.ok", "");
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("load.started");
    running.kill9();
    apollo.assert_no_processes_left();
    let dir = export_and_validate(&mut apollo, &python, "killed");
    let trace = read(&dir, "trace.json");
    assert!(trace.contains("\"name\":\"cut_off\""), "{trace}");
    let lineage = read(&dir, "lineage.jsonl");
    let last_load = lineage
        .lines()
        .rfind(|line| line.contains("\"name\":\"load\""))
        .unwrap();
    assert!(last_load.contains("\"eventType\":\"ABORT\""), "{last_load}");
    assert!(read(&dir, "prov.json").contains("\"apollo:state\": \"cut_off\""));
}

#[test]
fn export_refuses_what_it_cannot_do_with_a_usage_error() {
    let mut apollo = project();
    apollo.file("load.ok", "");
    apollo.file("markers/load.release", "");
    apollo.args(&["run"]).run().code(0);
    let no_dir = apollo.args(&["export", "--format", "ro-crate"]).run();
    no_dir.code(2);
    assert!(no_dir.stderr.contains("--output DIR"), "{}", no_dir.stderr);
    let files = apollo
        .args(&["export", "--format", "otlp-json", "--with-files"])
        .run();
    files.code(2);
    assert!(files.stderr.contains("--with-files"), "{}", files.stderr);
    let taken = apollo
        .args(&["export", "--format", "ro-crate", "-o", "data"])
        .run();
    taken.code(2);
    assert!(taken.stderr.contains("is not empty"), "{}", taken.stderr);
    let unknown = apollo
        .args(&["export", "nosuchrun", "--format", "prov-json"])
        .run();
    unknown.code(2);
    // stdout by default: one JSON document.
    let printed = apollo.args(&["export", "--format", "prov-json"]).run();
    printed.code(0);
    let document: serde_json::Value = serde_json::from_str(&printed.stdout).unwrap();
    assert!(
        document["activity"]["run:extract/attempt-1"].is_object(),
        "{document}"
    );
}

#[test]
fn the_bundled_example_exports_valid_documents_also_failed_and_resumed() {
    let Some(python) = require_validators() else {
        return;
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut apollo = Apollo::new();
    for folder in ["config", "units", "data/raw"] {
        crate::example::copy_dir(&repo.join(folder), &apollo.path(folder));
    }
    let _ = std::fs::remove_dir_all(apollo.path("config/.apollo"));
    apollo.args(&["run"]).run().code(0);
    export_and_validate(&mut apollo, &python, "example");
    // A second run whose last unit fails, then resumed once the script is repaired.
    let script = apollo.path("units/save_result.sh");
    let good = std::fs::read_to_string(&script).unwrap();
    apollo.file(
        "units/save_result.sh",
        "#!/bin/sh\n[ \"$1\" = prepare ] || [ \"$1\" = cleanup ] || { echo broken >&2; exit 4; }\n",
    );
    apollo.args(&["run", "--fresh"]).run().code(1);
    apollo.file("units/save_result.sh", &good);
    apollo.args(&["run"]).run().code(0);
    let runs = std::fs::read_dir(apollo.path("config/.apollo/runs"))
        .unwrap()
        .count();
    assert_eq!(runs, 2, "the failed run was resumed");
    let dir = export_and_validate(&mut apollo, &python, "example-resumed");
    let lineage = read(&dir, "lineage.jsonl");
    assert!(lineage.contains("\"eventType\":\"FAIL\""), "{lineage}");
    assert!(
        lineage.contains("\"eventType\":\"RUNNING\""),
        "the resume: {lineage}"
    );
}

/// The spans of an OTLP/JSON document, by name.
fn span_names(trace: &str) -> Vec<String> {
    let Ok(document) = serde_json::from_str::<serde_json::Value>(trace) else {
        return Vec::new();
    };
    let spans = &document["resourceSpans"][0]["scopeSpans"][0]["spans"];
    (spans.as_array().into_iter().flatten())
        .filter_map(|span| Some(span["name"].as_str()?.to_owned()))
        .collect()
}

#[test]
fn run_with_otlp_file_keeps_the_trace_up_to_date_while_it_runs() {
    let mut apollo = Apollo::new();
    apollo.config(
        "name: traced
units:
  - name: a
    execute: bin/count a
  - name: b
    deps: [a]
    execute: bin/block b
",
    );
    let running = apollo.args(&["run", "--otlp-file", "trace.json"]).spawn();
    apollo.wait_for_marker("b.started");
    // `a` ended while `b` runs: the file already holds its span (a complete document, the
    // file being replaced, never rewritten in place).
    let path = apollo.path("trace.json");
    let deadline = std::time::Instant::now() + crate::support::SAFETY_TIMEOUT;
    while !span_names(&std::fs::read_to_string(&path).unwrap_or_default())
        .contains(&"a attempt 1".to_owned())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the trace never showed a's attempt"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    apollo.release("b.release");
    running.wait().code(0);
    let trace = std::fs::read_to_string(&path).unwrap();
    let names = span_names(&trace);
    assert!(names.contains(&"b attempt 1".to_owned()), "{names:?}");
    assert!(names.contains(&"run traced".to_owned()), "{names:?}");
    assert!(trace.contains("\"stringValue\":\"succeeded\""), "{trace}");
    // The same document `apollo export` writes once the run has ended.
    let exported = apollo.args(&["export", "--format", "otlp-json"]).run();
    exported.code(0);
    assert_eq!(exported.stdout, trace);
    if let Some(python) = validators() {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/export/validate.py");
        let checked = Command::new(python)
            .arg(script)
            .arg("otlp-json")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            checked.status.success(),
            "{}",
            String::from_utf8_lossy(&checked.stderr)
        );
    }
}

#[test]
fn files_the_journal_keeps_in_a_manifest_are_exported_too() {
    // Enough files that the attempt's input list does not fit in a record (1 MiB).
    const N_FILES: usize = 12_000;
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: big
    inputs: [data/*.csv]
    execute: bin/count big
",
    );
    let shm = PathBuf::from("/dev/shm");
    let (data, _keep) = if shm.is_dir() {
        let dir = tempfile::tempdir_in(&shm).unwrap();
        std::os::unix::fs::symlink(dir.path(), apollo.path("data")).unwrap();
        (dir.path().to_path_buf(), Some(dir))
    } else {
        std::fs::create_dir(apollo.path("data")).unwrap();
        (apollo.path("data"), None)
    };
    for file_idx in 0..N_FILES {
        std::fs::File::create(data.join(format!("part-{file_idx:06}.csv"))).unwrap();
    }
    apollo.args(&["run"]).run().code(0);
    assert!(
        apollo
            .journal_text()
            .contains("\"inputs_manifest\":{\"sha256\":")
    );
    let exported = apollo.args(&["export", "--format", "prov-json"]).run();
    exported.code(0);
    assert!(!exported.stderr.contains("warning"), "{}", exported.stderr);
    let last = format!("run:file/data/part-{:06}.csv@", N_FILES - 1);
    assert!(
        exported.stdout.contains(&last),
        "the manifest's files are entities"
    );
}
