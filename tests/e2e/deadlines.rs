//! Deadlines (issue 40 item 3): `deadline:` on a run and on a unit is resolved when the run
//! starts (stored in UTC in `run_started`), never stops anything, and the views say by how
//! much the run and each unit ended after theirs. No test waits for a deadline to pass: the
//! journal's resolved instants are moved into the past (every checksum right) instead.

use chrono::{DateTime, Duration, Timelike, Utc};

use crate::support::Apollo;

const PIPELINE: &str = "deadline: 2h
units:
  - name: extract
    execute: 'true'
    deadline: 90m
  - name: load
    deps: [extract]
    execute: 'true'
    deadline: '23:59'
";

fn json(apollo: &mut Apollo, args: &[&str]) -> serde_json::Value {
    let output = apollo.args(args).run();
    output.code(0);
    serde_json::from_str(&output.stdout).unwrap()
}

fn instant(value: &serde_json::Value) -> DateTime<Utc> {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("a time, found {value}"));
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

/// `run_started` of the run's journal.
fn started(apollo: &Apollo, run: &str) -> (DateTime<Utc>, apollo_core::event::RunStarted) {
    use apollo_store::{JournalReader, ReadOptions};
    let run_dir = apollo.path(&format!(".apollo/runs/{run}"));
    let record = (JournalReader::open(&run_dir, ReadOptions::default()).unwrap())
        .next()
        .unwrap()
        .unwrap();
    match record.event {
        apollo_core::Event::RunStarted(started) => (record.ts, started),
        other => panic!("{other:?}"),
    }
}

#[test]
fn deadlines_are_resolved_at_the_start_and_lateness_is_shown_by_show_and_runs() {
    let mut apollo = Apollo::new();
    apollo.config(PIPELINE);
    apollo.envs(&[("TZ", "UTC")]);
    apollo.args(&["run"]).run().code(0);
    let run = apollo.run_ids().remove(0);

    // Resolved at the start: durations from the start, a clock time the first one after it.
    let (start, recorded) = started(&apollo, &run);
    let close = |at: &str, expected: DateTime<Utc>| {
        let at = instant(&serde_json::json!(at));
        assert!(
            (at - expected).abs() < Duration::minutes(1),
            "{at} vs {expected}"
        );
        at
    };
    close(
        recorded.deadlines.as_ref().unwrap().run.as_deref().unwrap(),
        start + Duration::hours(2),
    );
    let units: Vec<(&str, &str)> = (recorded.deadlines.as_ref().unwrap().units.iter())
        .map(|unit| (unit.unit.as_str(), unit.at.as_str()))
        .collect();
    assert_eq!(units.len(), 2, "{units:?}");
    close(units[0].1, start + Duration::minutes(90));
    let load = instant(&serde_json::json!(units[1].1));
    assert_eq!((load.hour(), load.minute(), load.second()), (23, 59, 0));
    assert!(load > start && load <= start + Duration::days(1), "{load}");

    // On time: nothing is late.
    let document = json(&mut apollo, &["show", &run, "--format", "json"]);
    assert_eq!(document["deadline"]["late_by_ms"], serde_json::Value::Null);
    let output = apollo.args(&["show", &run]).run();
    assert!(output.stdout.contains(": met"), "{}", output.stdout);

    // Deadlines an hour before the start (the run's) and at the start (extract's): late.
    let hour_before = apollo_core::deadline::to_journal(start - Duration::hours(1));
    let at_start = apollo_core::deadline::to_journal(start);
    apollo.rewrite_journal(&run, |event| {
        if let apollo_core::Event::RunStarted(started) = event {
            let deadlines = started.deadlines.as_mut().unwrap();
            deadlines.run = Some(hour_before.clone());
            deadlines.units[0].at.clone_from(&at_start);
        }
    });
    let document = json(&mut apollo, &["show", &run, "--format", "json"]);
    let late_ms = document["deadline"]["late_by_ms"].as_u64().unwrap();
    assert!(late_ms >= 3_600_000, "{document}");
    assert!(
        document["units"][0]["deadline"]["late_by_ms"]
            .as_u64()
            .is_some()
    );
    assert_eq!(
        document["units"][1]["deadline"]["late_by_ms"],
        serde_json::Value::Null
    );
    let unit = json(&mut apollo, &["show", &run, "extract", "--format", "json"]);
    assert!(unit["deadline"]["late_by_ms"].as_u64().is_some(), "{unit}");

    let output = apollo.args(&["show", &run]).run();
    output.code(0);
    assert!(output.stdout.contains(": late by 1h"), "{}", output.stdout);
    let extract = (output.stdout.lines())
        .find(|line| line.trim_start().starts_with("extract"))
        .unwrap();
    assert!(extract.contains("LATE by"), "{extract}");

    let output = apollo.args(&["runs"]).run();
    output.code(0);
    assert!(output.stdout.contains("LATE by 1h"), "{}", output.stdout);
    let runs = json(&mut apollo, &["runs", "--format", "json"]);
    let line = &runs["runs"][0];
    assert_eq!(instant(&line["deadline"]), start - Duration::hours(1));
    assert_eq!(line["late_by_ms"].as_u64(), Some(late_ms));
}

#[test]
fn a_bad_deadline_is_refused_before_anything_runs() {
    let mut apollo = Apollo::new();
    apollo.config("deadline: '25:00'\nunits: [{name: a, execute: 'true'}]\n");
    let output = apollo.args(&["run"]).run();
    output.code(2);
    assert!(
        output.stderr.contains("not a clock time"),
        "{}",
        output.stderr
    );
    assert!(apollo.run_ids().is_empty());
}
