//! The exports of synthetic runs: a run with everything (retry, skip, crash, mark, resume,
//! timeout, upstream failure), one with declared files, one cut off by a kill, one live, and
//! a reproduction — each format snapshotted. The formats' own validators check real runs'
//! exports in the end-to-end tests (`tests/e2e/export.rs`).

use apollo_core::event::{FileSide, RunStatus};

use super::*;
use crate::testkit::{RunBuilder, showcase_run};

fn timeline(run: &RunBuilder) -> Timeline {
    Timeline::from_records(run.reads()).unwrap()
}

/// A run whose units declare files: `extract` reads `in/raw.csv` and writes `out/clean.csv`,
/// `load` reads that; `load` fails once, then succeeds.
fn files_run() -> RunBuilder {
    let mut run = RunBuilder::new("20261130T021507Z-f11e", &["extract", "load"]);
    run.file("extract", "in/raw.csv", "raw")
        .dep("load", "extract");
    run.start(10, "extract", 1)
        .files(10, "extract", 1, FileSide::Inputs, &[("in/raw.csv", "raw")])
        .files(
            900,
            "extract",
            1,
            FileSide::Outputs,
            &[("out/clean.csv", "clean"), ("out/my report.txt", "r")],
        )
        .succeed(900, "extract", 1)
        .start(910, "load", 1)
        .files(
            910,
            "load",
            1,
            FileSide::Inputs,
            &[("out/clean.csv", "clean")],
        )
        .fail(1_400, "load", 1, 3, "load: table locked")
        .start(1_500, "load", 2)
        .files(
            1_500,
            "load",
            2,
            FileSide::Inputs,
            &[("out/clean.csv", "clean")],
        )
        .succeed(2_000, "load", 2)
        .end(2_010, RunStatus::Succeeded, 2, 0, 0);
    run
}

/// A run apollo was killed in: `b` never finished, `c` never started.
fn killed_run() -> RunBuilder {
    let mut run = RunBuilder::new("20261130T021507Z-dead", &["a", "b", "c"]);
    run.dep("b", "a").dep("c", "b");
    run.start(5, "a", 1).succeed(500, "a", 1).start(510, "b", 1);
    run
}

/// The OTLP/JSON export, checked to be one line, pretty-printed for reading.
fn otlp(timeline: &Timeline) -> String {
    let mut out = Vec::new();
    write_otlp_json(timeline, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.matches('\n').count(), 1, "one message, one line");
    let document: serde_json::Value = serde_json::from_str(&text).unwrap();
    serde_json::to_string_pretty(&document).unwrap() + "\n"
}

fn prov(timeline: &Timeline) -> String {
    let mut out = Vec::new();
    write_prov_json(timeline, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn lineage(timeline: &Timeline) -> String {
    let mut out = Vec::new();
    write_openlineage(timeline, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn crate_metadata(timeline: &Timeline, with_files: bool) -> (String, Vec<CrateFile>) {
    let every_blob = |_: &str| true;
    let with_file: Option<&dyn Fn(&str) -> bool> = with_files.then_some(&every_blob);
    let exported = ro_crate(timeline, true, with_file);
    let mut out = Vec::new();
    exported.write_metadata(&mut out).unwrap();
    (String::from_utf8(out).unwrap(), exported.files)
}

#[test]
fn otlp_json_of_a_showcase_run() {
    insta::assert_snapshot!(otlp(&timeline(&showcase_run())));
}

#[test]
fn prov_json_of_a_showcase_run() {
    insta::assert_snapshot!(prov(&timeline(&showcase_run())));
}

#[test]
fn openlineage_of_a_showcase_run() {
    insta::assert_snapshot!(lineage(&timeline(&showcase_run())));
}

#[test]
fn ro_crate_of_a_showcase_run() {
    insta::assert_snapshot!(crate_metadata(&timeline(&showcase_run()), false).0);
}

#[test]
fn exports_of_a_run_with_files_name_each_file_with_its_hash() {
    let timeline = timeline(&files_run());
    insta::assert_snapshot!("files_prov", prov(&timeline));
    insta::assert_snapshot!("files_openlineage", lineage(&timeline));
    let (metadata, files) = crate_metadata(&timeline, true);
    insta::assert_snapshot!("files_ro_crate", metadata);
    let paths: Vec<&str> = files.iter().map(|file| file.path.as_str()).collect();
    assert_eq!(paths.len(), 3, "{paths:?}");
    assert!(
        paths.iter().all(|path| path.starts_with("files/")),
        "{paths:?}"
    );
    assert!(
        metadata.contains("files/"),
        "copied files are part of the crate"
    );
    let (without, none) = crate_metadata(&timeline, false);
    assert!(none.is_empty());
    assert!(without.contains("#file/out/my%20report.txt@"), "{without}");
}

#[test]
fn a_killed_run_exports_its_unfinished_attempt_as_cut_off() {
    let timeline = timeline(&killed_run());
    let otlp = otlp(&timeline);
    assert!(otlp.contains("\"name\": \"cut_off\""), "{otlp}");
    assert!(otlp.contains("\"stringValue\": \"cut_off\""), "{otlp}");
    let lineage = lineage(&timeline);
    let last_b = lineage
        .lines()
        .rfind(|line| line.contains("\"name\":\"b\""))
        .unwrap();
    assert!(last_b.contains("\"eventType\":\"ABORT\""), "{last_b}");
    assert!(
        lineage
            .lines()
            .last()
            .unwrap()
            .contains("\"eventType\":\"ABORT\"")
    );
    assert!(prov(&timeline).contains("\"apollo:state\": \"cut_off\""));
    let (metadata, _) = crate_metadata(&timeline, false);
    assert!(metadata.contains("FailedActionStatus"), "{metadata}");
}

#[test]
fn a_live_run_exports_its_open_attempt_as_running_without_an_end_event() {
    let mut timeline = timeline(&killed_run());
    timeline.live = true;
    let otlp = otlp(&timeline);
    assert!(!otlp.contains("\"name\": \"cut_off\""), "{otlp}");
    assert!(otlp.contains("\"stringValue\": \"running\""), "{otlp}");
    let lineage = lineage(&timeline);
    let b_events: Vec<&str> = (lineage.lines())
        .filter(|line| line.contains("\"name\":\"b\""))
        .collect();
    assert_eq!(b_events.len(), 1, "only b's START: {lineage}");
    assert!(!lineage.contains("\"eventType\":\"ABORT\""), "{lineage}");
}

#[test]
fn a_resumed_run_shows_each_attempt_at_its_real_time_and_the_gap() {
    let timeline = timeline(&showcase_run());
    let otlp = otlp(&timeline);
    assert!(otlp.contains("\"name\": \"apollo not running\""), "{otlp}");
    assert!(otlp.contains("\"name\": \"resumed\""), "{otlp}");
    // slow's first attempt ends at the last record before the crash (+4 s), its second
    // starts after the resume (+60.01 s).
    let base = crate::testkit::at(0).timestamp_nanos_opt().unwrap();
    let nanos = |ms: i64| format!("\"{}\"", base + ms * 1_000_000);
    assert!(otlp.contains(&nanos(4_000)), "{otlp}");
    assert!(otlp.contains(&nanos(60_010)), "{otlp}");
    assert!(lineage(&timeline).contains("\"eventType\":\"RUNNING\""));
}

#[test]
fn a_reproduction_says_so_in_the_trace_the_provenance_and_the_crate() {
    let mut run = RunBuilder::new("20261201T000000Z-beef", &["transform"]);
    run.reproduces("20261130T021507Z-3f9a", "transform", 1)
        .start(10, "transform", 1)
        .succeed(400, "transform", 1)
        .end(410, RunStatus::Succeeded, 1, 0, 0);
    let timeline = timeline(&run);
    assert!(otlp(&timeline).contains("\"stringValue\": \"reproduction\""));
    assert!(prov(&timeline).contains("\"apollo:run_kind\": \"reproduction\""));
    let (metadata, _) = crate_metadata(&timeline, false);
    assert!(
        metadata.contains(
            "an apollo reproduction that ended succeeded; \
             it reproduces transform attempt 1 of run 20261130T021507Z-3f9a"
        ),
        "{metadata}"
    );
}

#[test]
fn ids_are_hex_of_the_lengths_otlp_prescribes_and_stable() {
    let timeline = timeline(&showcase_run());
    let document: serde_json::Value = serde_json::from_str(&otlp(&timeline)).unwrap();
    let spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    let is_hex = |text: &str, len: usize| {
        text.len() == len
            && text
                .bytes()
                .all(|byte| byte.is_ascii_hexdigit() && !byte.is_ascii_uppercase())
    };
    let mut span_ids = std::collections::HashSet::new();
    for span in spans {
        assert!(is_hex(span["traceId"].as_str().unwrap(), 32), "{span}");
        assert!(is_hex(span["spanId"].as_str().unwrap(), 16), "{span}");
        assert!(
            span_ids.insert(span["spanId"].as_str().unwrap().to_owned()),
            "{span}"
        );
    }
    assert_eq!(otlp(&timeline), otlp(&timeline));
}

#[test]
fn openlineage_names_files_by_their_absolute_path() {
    let mut run = RunBuilder::new("20261201T000000Z-f11e", &["extract"]);
    run.start(10, "extract", 1)
        .files(
            10,
            "extract",
            1,
            FileSide::Inputs,
            &[("../data/raw.csv", "raw")],
        )
        .succeed(400, "extract", 1);
    let mut timeline = timeline(&run);
    timeline.facts.config_path = Some("/srv/etl/config/pipeline.yaml".to_owned());
    let lineage = lineage(&timeline);
    assert!(
        lineage.contains(r#""namespace":"file","name":"/srv/etl/data/raw.csv""#),
        "{lineage}"
    );
}

#[test]
fn export_formats_parse_from_their_names() {
    for format in ExportFormat::ALL {
        assert_eq!(format.as_str().parse::<ExportFormat>(), Ok(format));
    }
    let error = "xml".parse::<ExportFormat>().unwrap_err();
    assert!(error.to_string().contains("otlp-json"), "{error}");
}
