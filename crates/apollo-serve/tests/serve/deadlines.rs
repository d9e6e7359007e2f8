//! Deadlines in `serve` (issue 40 item 3, "done when": lateness shows in serve): the run page
//! gives the run's deadline and whether it was met or by how much it was missed, the units
//! that ended after their own, and the API the same document as `apollo show`. The deadline
//! is moved into the past in the journal (every checksum right) instead of waiting for it.

use apollo_core::Event;
use apollo_store::{Durability, JournalReader, JournalWriter, ReadOptions, WriterOptions};

use crate::common;

/// Rewrites the journal of the only run in `state_dir` with `edit` applied to every event.
fn rewrite_journal(state_dir: &std::path::Path, edit: impl Fn(&mut Event)) {
    let runs = state_dir.join("runs");
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap();
    let run_dir = run.path();
    let run_id = run.file_name().into_string().unwrap();
    let mut events: Vec<Event> = (JournalReader::open(&run_dir, ReadOptions::default()).unwrap())
        .map(|record| record.unwrap().event)
        .collect();
    events.iter_mut().for_each(edit);
    for segment in std::fs::read_dir(run_dir.join("journal")).unwrap() {
        std::fs::remove_file(segment.unwrap().path()).unwrap();
    }
    let options = WriterOptions::default().durability(Durability::None);
    let mut writer = JournalWriter::create(&run_dir, &run_id, options).unwrap();
    writer.append_batch(&events).unwrap();
}

#[test]
fn the_run_page_shows_the_deadline_and_by_how_much_the_run_and_its_units_were_late() {
    let (dir, config) = common::project(
        "name: timed\ndeadline: 2h\nunits:\n  - name: slow\n    execute: 'true'\n    deadline: 1h\n  - name: quick\n    execute: 'true'\n",
    );
    common::run_pipeline(&config);
    let state_dir = dir.path().join(".apollo");
    {
        let served = common::Served::start(&state_dir);
        let page = served.get("/runs/latest");
        assert_eq!(page.status, 200);
        assert!(page.body.contains("<dt>Deadline</dt>"), "{}", page.body);
        assert!(page.body.contains(">met</span>"), "{}", page.body);
    }
    let past = apollo_core::deadline::to_journal(
        chrono::DateTime::parse_from_rfc3339("2026-01-01T06:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc),
    );
    rewrite_journal(&state_dir, |event| {
        if let Event::RunStarted(started) = event {
            let deadlines = started.deadlines.as_mut().unwrap();
            deadlines.run = Some(past.clone());
            deadlines.units[0].at.clone_from(&past);
        }
    });
    let served = common::Served::start(&state_dir);
    let page = served.get("/runs/latest");
    assert!(
        page.body.contains("2026-01-01 06:00:00 UTC"),
        "{}",
        page.body
    );
    assert!(page.body.contains(">late</span> by "), "{}", page.body);
    assert!(page.body.contains("units late: slow ("), "{}", page.body);
    let api = served.get("/api/runs/latest");
    let document: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    assert!(document["deadline"]["late_by_ms"].as_u64().unwrap() > 0);
    assert!(
        document["units"][0]["deadline"]["late_by_ms"]
            .as_u64()
            .is_some()
    );
    assert!(document["units"][1].get("deadline").is_none());
}
