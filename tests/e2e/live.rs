//! A run an apollo is writing now, read by every view while it runs (issue 35): it is
//! running, and it has lasted until the reader looked, not until its last record.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::agreement::{json, junit_states, states};
use crate::support::Apollo;

/// How old the live run is at least when the views read it: far above the ~50 ms between its
/// first record and the running attempt's `unit_started`, which a duration cut at the last
/// record would show.
const RUN_AGE: Duration = Duration::from_millis(300);

/// A duration as the HTML report prints it under a minute (`812ms`, `1.204s`), in
/// milliseconds.
fn html_duration_ms(text: &str) -> u64 {
    let parsed = match text.strip_suffix("ms") {
        Some(ms) => ms.parse().ok(),
        None => (text.strip_suffix('s').and_then(|s| s.parse::<f64>().ok()))
            .map(|seconds| (seconds * 1000.0).round() as u64),
    };
    parsed.unwrap_or_else(|| panic!("not a duration under a minute: {text:?}"))
}

/// A run an apollo is writing is running in every view — its counts, its units, its duration
/// (until the reader looked, in `runs` and the HTML report, not until the last record), the
/// Chrome trace (the attempt drawn until the reader looked, not cut at the last record), the
/// HTML report and JUnit — never "incomplete" or "unfinished" like a killed run (issue 35).
#[test]
fn a_live_run_is_running_in_every_view() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: quick\n    execute: 'true'\n  - name: slow\n    deps: [quick]\n    execute: bin/block slow\n",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("slow.started");
    // The run began before the marker appeared: it is at least as old as the marker. Waiting
    // on the clock is the point here (the run must age), not a stand-in for a signal.
    let marker_seen = Instant::now();
    while marker_seen.elapsed() < RUN_AGE {
        std::thread::sleep(Duration::from_millis(10));
    }

    let at_least_ms = u64::try_from(marker_seen.elapsed().as_millis()).unwrap();
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    runs.code(0);
    let runs = json(&runs.stdout, "runs");
    assert_eq!(runs["runs"][0]["status"], "running", "{runs}");
    assert_eq!(runs["runs"][0]["counts"]["running"], 1, "{runs}");
    assert_eq!(runs["runs"][0]["counts"]["succeeded"], 1, "{runs}");
    let duration_ms = runs["runs"][0]["duration_ms"].as_u64();
    assert!(
        duration_ms >= Some(at_least_ms),
        "a live run has lasted until now, at least {at_least_ms} ms: {runs}"
    );

    let show = apollo.args(&["show", "latest", "--format", "json"]).run();
    show.code(0);
    let show = json(&show.stdout, "show");
    assert_eq!(
        states(&show["units"], "unit", "status"),
        BTreeMap::from([
            ("quick".to_owned(), "succeeded".to_owned()),
            ("slow".to_owned(), "running".to_owned())
        ]),
        "{show}"
    );

    let trace = apollo.args(&["replay", "--format", "chrome-trace"]).run();
    trace.code(0);
    let trace = json(&trace.stdout, "the Chrome trace");
    let events = trace["traceEvents"].as_array().unwrap();
    let slow = events
        .iter()
        .find(|event| event["name"] == "slow #1")
        .unwrap_or_else(|| panic!("no attempt of slow: {trace}"));
    assert_eq!(slow["args"]["status"], "running", "{slow}");
    let run = events
        .iter()
        .find(|event| event["cat"] == "run")
        .unwrap_or_else(|| panic!("no run event: {trace}"));
    assert_eq!(run["args"]["status"], "running", "{run}");
    assert!(
        run["dur"].as_u64()
            >= slow["ts"]
                .as_u64()
                .map(|ts| ts + slow["dur"].as_u64().unwrap()),
        "the run lasts as long as its running attempt: {run} {slow}"
    );

    let html = apollo.args(&["replay", "--format", "html"]).run();
    html.code(0);
    assert!(
        html.stdout
            .contains("class=\"badge s-running\">running</span>"),
        "the HTML report's status"
    );
    let header_duration = html
        .stdout
        .split("<dt>duration</dt><dd>")
        .nth(1)
        .and_then(|rest| rest.split("</dd>").next())
        .unwrap_or_else(|| panic!("no duration in the HTML header"));
    assert!(
        html_duration_ms(header_duration) >= at_least_ms,
        "the HTML header's duration of a live run runs until now, at least {at_least_ms} ms: \
         {header_duration}"
    );
    let junit = apollo.args(&["replay", "--format", "junit"]).run();
    junit.code(0);
    assert_eq!(junit_states(&junit.stdout)["slow"], "running");

    apollo.release("slow.release");
    running.wait().code(0);
    let show = apollo.args(&["show", "latest", "--format", "json"]).run();
    assert_eq!(json(&show.stdout, "show")["counts"]["succeeded"], 2);
}
