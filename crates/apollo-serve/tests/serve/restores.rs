//! Restored outputs and a reproduction's verdict in `serve` (issue 35): the run page and the
//! run's JSON name the files a reused unit got back from the blob store, and say a
//! reproduction's verdict, as `apollo show` does — from the run model.

use apollo_core::Event;
use apollo_core::event::{AttemptStatus, ReproductionCompared};
use apollo_store::{Durability, JournalReader, JournalWriter, ReadOptions, WriterOptions};

use crate::common;

const PIPELINE: &str = "units:\n  - name: make\n    reuse: true\n    outputs: [out/made.txt]\n    execute: mkdir -p out && echo made > out/made.txt\n  - name: keep\n    reuse: true\n    outputs: [out/kept.txt]\n    execute: mkdir -p out && echo kept > out/kept.txt\n";

#[test]
fn the_run_page_and_json_name_the_outputs_a_reuse_restored() {
    let (dir, config) = common::project(PIPELINE);
    common::run_pipeline(&config);
    std::fs::remove_file(dir.path().join("out/made.txt")).unwrap();
    common::run_pipeline(&config);
    assert!(dir.path().join("out/made.txt").exists(), "restored");
    let served = common::Served::start(&dir.path().join(".apollo"));
    let page = served.ok("/runs/latest");
    assert!(
        page.contains("<span class=\"restored\">restored out/made.txt</span>"),
        "{page}"
    );
    assert_eq!(page.matches("class=\"restored\"").count(), 1, "{page}");
    let unit = served.ok("/runs/latest/units/make");
    assert!(
        unit.contains("<span class=\"restored\">Restored out/made.txt</span> from the blob store."),
        "{unit}"
    );
    assert!(!served.ok("/runs/latest/units/keep").contains("Restored"));
    let api = served.get("/api/runs/latest");
    let document: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    assert_eq!(
        document["units"][0]["restored"],
        serde_json::json!(["out/made.txt"])
    );
    assert!(document["units"][1].get("restored").is_none(), "{document}");
}

/// Appends `event` to the journal of the only run in `state_dir` (every checksum right).
fn append(state_dir: &std::path::Path, event: Event) {
    let run = (std::fs::read_dir(state_dir.join("runs")).unwrap().next())
        .unwrap()
        .unwrap();
    let run_dir = run.path();
    let run_id = run.file_name().into_string().unwrap();
    let mut events: Vec<Event> = (JournalReader::open(&run_dir, ReadOptions::default()).unwrap())
        .map(|record| record.unwrap().event)
        .collect();
    events.push(event);
    for segment in std::fs::read_dir(run_dir.join("journal")).unwrap() {
        std::fs::remove_file(segment.unwrap().path()).unwrap();
    }
    let options = WriterOptions::default().durability(Durability::None);
    let mut writer = JournalWriter::create(&run_dir, &run_id, options).unwrap();
    writer.append_batch(&events).unwrap();
}

#[test]
fn the_run_page_and_json_say_a_reproductions_verdict_from_the_run_model() {
    let (dir, config) = common::project("units:\n  - name: a\n    execute: 'true'\n");
    common::run_pipeline(&config);
    let state_dir = dir.path().join(".apollo");
    append(
        &state_dir,
        Event::ReproductionCompared(ReproductionCompared {
            reproduced: false,
            recorded_status: Some(AttemptStatus::Succeeded),
            status: AttemptStatus::Succeeded,
            outputs_differ: vec!["out/x.csv".into()],
        }),
    );
    let served = common::Served::start(&state_dir);
    let page = served.ok("/runs/latest");
    assert!(
        page.contains("<dt>Reproduction</dt><dd class=\"reproduction\">not reproduced · outputs differ (out/x.csv)</dd>"),
        "{page}"
    );
    let api = served.get("/api/runs/latest");
    let document: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    assert_eq!(document["reproduction"]["reproduced"], false, "{document}");
    assert_eq!(
        document["reproduction"]["outputs_differ"],
        serde_json::json!(["out/x.csv"])
    );
}
