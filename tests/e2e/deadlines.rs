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

/// `markers/late.log` gets a line each time `on_late` fires: the deadline and the predicted
/// finish it was given; `late.json` is the summary it read.
const LATE_PIPELINE: &str = "units:
  - name: quick
    execute: 'true'
  - name: slow
    deps: [quick]
    execute: bin/block slow && test -e markers/pass
on_late: echo \"$APOLLO_RUN_STATUS $APOLLO_DEADLINE $APOLLO_PREDICTED_FINISH\" >> markers/late.log && cp \"$APOLLO_SUMMARY_JSON\" late.json
";

/// How many `run_late` records the journal of `run` holds.
fn run_late_records(apollo: &Apollo, run: &str) -> usize {
    use apollo_store::{JournalReader, ReadOptions};
    let run_dir = apollo.path(&format!(".apollo/runs/{run}"));
    (JournalReader::open(&run_dir, ReadOptions::default()).unwrap())
        .filter(|record| {
            matches!(
                record.as_ref().unwrap().event,
                apollo_core::Event::RunLate(_)
            )
        })
        .count()
}

#[test]
fn on_late_fires_once_when_the_predicted_finish_passes_the_deadline_and_not_again_on_resume() {
    let mut apollo = Apollo::new();
    apollo.config(LATE_PIPELINE);
    // A first run without a deadline builds the history (`on_late` needs one: it stays
    // quiet). `slow` took an hour in it: its journal says so (every checksum right), so no
    // test waits for time to pass.
    apollo.release("slow.release");
    apollo.release("pass");
    apollo.args(&["run"]).run().code(0);
    let first = apollo.run_ids().remove(0);
    apollo.rewrite_journal(&first, |event| {
        if let apollo_core::Event::UnitFinished(finished) = event
            && finished.unit == "slow"
        {
            finished.duration_ms = 3_600_000;
        }
    });
    assert!(!apollo.path("markers/late.log").exists());

    // The second run is due in 30 minutes: `slow` alone is predicted to take an hour, so the
    // run is late from its start, long before the deadline comes. `slow` waits until the hook
    // has fired, then fails: the run is left to resume.
    for marker in ["slow.release", "pass", "slow.started"] {
        std::fs::remove_file(apollo.path(&format!("markers/{marker}"))).unwrap();
    }
    apollo.config(&format!("deadline: 30m\n{LATE_PIPELINE}"));
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("late.log");
    apollo.release("slow.release");
    let output = running.wait();
    output.code(1);
    let second = apollo.run_ids().pop().unwrap();
    assert_ne!(second, first);
    let said = format!("{}{}", output.stdout, output.stderr);
    assert!(said.contains("hook on_late ran"), "{said}");

    let line = std::fs::read_to_string(apollo.path("markers/late.log")).unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields.len(), 3, "{line}");
    assert_eq!(fields[0], "running");
    let (deadline, predicted) = (instant(&fields[1].into()), instant(&fields[2].into()));
    let (start, _) = started(&apollo, &second);
    assert!(
        (deadline - (start + Duration::minutes(30))).abs() < Duration::seconds(1),
        "{deadline} vs {start}"
    );
    assert!(predicted >= start + Duration::hours(1), "{predicted}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(apollo.path("late.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "running");
    assert_eq!(instant(&summary["late"]["predicted_finish"]), predicted);
    assert!(instant(&summary["late"]["predicted_finish_p95"]) >= predicted);
    let path = summary["late"]["critical_path"].as_array().unwrap();
    assert_eq!(path.last().unwrap(), "slow", "{summary}");
    assert_eq!(summary["late"]["no_history"], serde_json::json!([]));
    assert_eq!(run_late_records(&apollo, &second), 1);

    // The resume is just as late (and its deadline has not come): the journal's `run_late`
    // says the hook fired, so it does not fire again.
    apollo.release("pass");
    let output = apollo.args(&["run"]).run();
    output.code(0);
    let said = format!("{}{}", output.stdout, output.stderr);
    assert!(said.contains("resuming run"), "{said}");
    assert!(!said.contains("on_late"), "{said}");
    assert_eq!(apollo.run_ids().pop().unwrap(), second);
    let lines = std::fs::read_to_string(apollo.path("markers/late.log")).unwrap();
    assert_eq!(lines.lines().count(), 1, "{lines}");
    assert_eq!(run_late_records(&apollo, &second), 1);
}

#[test]
fn check_warns_of_an_on_late_that_can_never_fire() {
    let mut apollo = Apollo::new();
    let units = "units: [{name: a, execute: 'true'}]\n";
    apollo.config(&format!("on_late: 'true'\n{units}"));
    let output = apollo.args(&["check"]).run();
    output.code(0);
    let said = format!("{}{}", output.stdout, output.stderr);
    assert!(
        said.contains("`on_late` is set but the pipeline has no `deadline:`"),
        "{said}"
    );
    apollo.config(&format!("deadline: 2h\non_late: 'true'\n{units}"));
    let output = apollo.args(&["check"]).run();
    output.code(0);
    let said = format!("{}{}", output.stdout, output.stderr);
    assert!(!said.contains("on_late"), "{said}");
}
