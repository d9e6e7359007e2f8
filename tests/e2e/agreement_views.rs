//! The views `agreement.rs` compares with the run model, one run at a time: JUnit, `runs`, the
//! text replay, the HTML report and the Chrome trace; and across runs, `diff` and `stats`.
//!
//! The model is what `show RUN --format json` prints (the run model rendered as it is). Each
//! other view is parsed for the unit states, attempts and counts it shows — its JSON where it
//! has one; the text, HTML and trace by the few fields each states — and every fact compared.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::agreement::{json, junit_states, states};
use crate::support::Apollo;

/// Every state of the closed set a run's counts hold (DESIGN §18).
pub(crate) const STATES: [&str; 11] = [
    "succeeded",
    "reused",
    "already_done",
    "failed",
    "skipped",
    "skipped_when",
    "upstream_failed",
    "running",
    "cut_off",
    "needs_verdict",
    "not_started",
];

/// One run as the model tells it.
pub(crate) struct Model {
    /// The run's id.
    pub(crate) run: String,
    /// `show RUN --format json`.
    pub(crate) show: Value,
    /// unit → state.
    pub(crate) states: BTreeMap<String, String>,
    /// unit → the states of its attempts, in order (the HTML report's bars, which render the
    /// model's attempts; their number is checked against `show`'s).
    pub(crate) attempts: BTreeMap<String, Vec<String>>,
}

/// Reads the model of `run` and checks every single-run view against it.
pub(crate) fn check_run(apollo: &mut Apollo, context: &str, run: &str) -> Model {
    let show = apollo.args(&["show", run, "--format", "json"]).run();
    show.code(0);
    let show = json(&show.stdout, "show");
    let run = show["run"].as_str().unwrap_or_default().to_owned();
    let context = format!("{context}, run {run}");
    let mut model = Model {
        states: states(&show["units"], "unit", "status"),
        run,
        show,
        attempts: BTreeMap::new(),
    };
    let junit = apollo
        .args(&["replay", &model.run, "--format", "junit"])
        .run();
    junit.code(0);
    assert_eq!(
        junit_states(&junit.stdout),
        model.states,
        "{context}: JUnit and show\n{}",
        junit.stdout
    );
    check_counts(apollo, &context, &model);
    model.attempts = check_html(apollo, &context, &model);
    check_text(apollo, &context, &model);
    check_chrome(apollo, &context, &model);
    model
}

/// `show`'s and `runs`' counts are the tally of the units' states.
fn check_counts(apollo: &mut Apollo, context: &str, model: &Model) {
    let count = |state: &str| model.states.values().filter(|s| *s == state).count() as u64;
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    runs.code(0);
    let runs = json(&runs.stdout, "runs");
    let listed = (runs["runs"].as_array().into_iter().flatten())
        .find(|listed| listed["id"] == model.run.as_str())
        .unwrap_or_else(|| panic!("{context}: runs does not list the run: {runs}"));
    let show = &model.show;
    assert_eq!(
        listed["kind"], show["kind"],
        "{context}: runs' kind\n{listed}"
    );
    assert_eq!(listed["status"], show["status"], "{context}: runs' status");
    for state in STATES {
        assert_eq!(
            listed["counts"][state].as_u64(),
            Some(count(state)),
            "{context}: `runs` counts {state}\nruns: {listed}\nshow: {show:#}"
        );
        assert_eq!(
            show["counts"][state].as_u64(),
            Some(count(state)),
            "{context}: show's counts {state}\n{show:#}"
        );
    }
}

/// The value of attribute `name` in the element text `element`.
fn attribute<'a>(element: &'a str, name: &str) -> &'a str {
    element
        .split(&format!(" {name}=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
}

/// Each element of `html` that opens with `opening` (up to its `>`).
fn elements<'a>(html: &'a str, opening: &'a str) -> impl Iterator<Item = &'a str> {
    (html.split(opening).skip(1)).map(|rest| rest.split('>').next().unwrap_or_default())
}

/// The HTML report: the unit table's and the chart's states, one bar per attempt, the run's
/// status and its number of units. Returns each unit's attempt states (the bars').
fn check_html(apollo: &mut Apollo, context: &str, model: &Model) -> BTreeMap<String, Vec<String>> {
    let html = apollo
        .args(&["replay", &model.run, "--format", "html"])
        .run();
    html.code(0);
    let html = html.stdout;
    let table: BTreeMap<String, String> = elements(&html, "<tr data-unit=\"")
        .map(|tr| {
            let tr = format!(" data-unit=\"{tr}");
            let unit = attribute(&tr, "data-unit").to_owned();
            (unit, attribute(&tr, "data-status").to_owned())
        })
        .collect();
    assert_eq!(
        table, model.states,
        "{context}: the HTML unit table and show"
    );
    let chart: BTreeMap<String, String> = elements(&html, "<g class=\"row")
        .map(|row| {
            let unit = attribute(row, "data-unit").to_owned();
            (unit, attribute(row, "data-status").to_owned())
        })
        .collect();
    assert_eq!(
        chart, model.states,
        "{context}: the HTML chart's rows and show"
    );
    let mut attempts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for bar in elements(&html, "<rect class=\"bar ") {
        let unit = attribute(bar, "data-unit").to_owned();
        attempts
            .entry(unit)
            .or_default()
            .push(attribute(bar, "data-status").to_owned());
    }
    for unit in model.show["units"].as_array().into_iter().flatten() {
        let name = unit["unit"].as_str().unwrap_or_default();
        assert_eq!(
            attempts.get(name).map_or(0, Vec::len) as u64,
            unit["attempts"].as_u64().unwrap_or_default(),
            "{context}: the HTML report's bars of {name} and show's attempts"
        );
    }
    let status = model.show["status"].as_str().unwrap_or_default();
    assert!(
        html.contains(&format!(
            "id=\"run-status\" class=\"badge s-{status}\">{status}<"
        )),
        "{context}: the HTML report's run status is not {status}"
    );
    let n_units = format!("<dt>units</dt><dd>{}</dd>", model.states.len());
    assert!(
        html.contains(&n_units),
        "{context}: the HTML report's units"
    );
    attempts
}

/// The text replay: the state each unit's last line says, and the counts and status of the
/// final `run end` line.
fn check_text(apollo: &mut Apollo, context: &str, model: &Model) {
    let text = apollo.args(&["replay", &model.run]).run();
    text.code(0);
    let text = text.stdout;
    for line in text.lines() {
        // A hash is a word of its own: the detail after it never runs into it.
        let hash = column(line, &text, "HASH");
        let glued = hash.starts_with("out ") && hash.as_bytes().get(12).is_some_and(|b| *b != b' ');
        assert!(!glued, "{context}: the hash runs into the detail: {line}");
    }
    let said = text_states(&text, model.states.keys());
    assert_eq!(
        said, model.states,
        "{context}: the text replay and show\n{text}"
    );
    let end = text
        .lines()
        .rfind(|line| column(line, &text, "EVENT").starts_with("run end"));
    let end = match end {
        Some(end) => end,
        // apollo died before it ended the run: nothing tallies it.
        None if model.show["status"] == "incomplete" => return,
        None => panic!("{context}: no `run end` line\n{text}"),
    };
    let status = column(end, &text, "STATUS").split_whitespace().next();
    assert_eq!(status, model.show["status"].as_str(), "{context}: {end}");
    // The status, then (no hash on this line) the counts.
    let detail = (column(end, &text, "STATUS").trim_start())
        .split_once(char::is_whitespace)
        .map_or("", |(_, detail)| detail.trim());
    let counts = &model.show["counts"];
    let n = |state: &str| counts[state].as_u64().unwrap_or_default();
    for (label, expected) in [
        ("succeeded", n("succeeded") + n("already_done")),
        ("already done", n("already_done")),
        ("reused", n("reused")),
        ("failed", n("failed")),
        (
            "skipped",
            n("skipped") + n("skipped_when") + n("upstream_failed"),
        ),
        ("by when:", n("skipped_when")),
        ("upstream failed", n("upstream_failed")),
        ("cut off", n("cut_off")),
        ("not started", n("not_started")),
    ] {
        assert_eq!(
            number_before(detail, label),
            expected,
            "{context}: the text replay's `run end` counts {label}: {end}"
        );
    }
}

/// The text of `line` from the column headed `heading` in the replay's header line.
fn column<'a>(line: &'a str, text: &str, heading: &str) -> &'a str {
    let header = text.lines().next().unwrap_or_default();
    let at = header.find(heading).unwrap_or_default();
    line.get(at..).unwrap_or_default()
}

/// The number written just before `label` in a counts text ("2 succeeded (1 already done),
/// 0 failed, 3 skipped (2 by when:)"); 0 when the label is absent.
fn number_before(detail: &str, label: &str) -> u64 {
    let words: Vec<&str> = detail
        .split([' ', ',', '(', ')'])
        .filter(|word| !word.is_empty())
        .collect();
    let label: Vec<&str> = label.split(' ').collect();
    (1..words.len())
        .filter(|&at| words[at..].starts_with(&label))
        .find_map(|at| words[at - 1].parse().ok())
        .unwrap_or(0)
}

/// unit → the state its last unit-level line in the text replay says: `finish`, `skip`,
/// `reuse`, `unfinished`/`abandoned` (cut off); a unit without one never started.
fn text_states<'a>(
    text: &str,
    units: impl Iterator<Item = &'a String>,
) -> BTreeMap<String, String> {
    let mut said: BTreeMap<String, String> = units
        .map(|unit| (unit.clone(), "not_started".to_owned()))
        .collect();
    // The attempts with a phase line: an interrupted one of them was cut off; one without
    // was stopped before any process of it started (the model's rule).
    let mut phased = std::collections::BTreeSet::new();
    for line in text.lines().skip(1) {
        let event = column(line, text, "EVENT");
        let unit = column(line, text, "UNIT").split_whitespace().next();
        let attempt = column(line, text, "ATT").split_whitespace().next();
        if event.starts_with(' ') {
            phased.insert((unit, attempt)); // a phase line, indented under its attempt
            continue;
        }
        let status = column(line, text, "STATUS").split_whitespace().next();
        let (Some(unit), Some(status)) = (unit, status) else {
            continue;
        };
        let state = match (event.split_whitespace().next(), status) {
            (Some("finish"), "succeeded") => "succeeded",
            (Some("finish"), "failed" | "timed_out") => "failed",
            (Some("finish"), "skipped") => "skipped",
            (Some("finish"), "interrupted") if phased.contains(&(Some(unit), attempt)) => "cut_off",
            (Some("finish"), "interrupted") => "not_started",
            (Some("skip"), state) => state,
            (Some("reuse"), _) => "reused",
            (Some("unfinished" | "abandoned"), _) => "cut_off",
            _ => continue,
        };
        if let Some(entry) = said.get_mut(unit) {
            *entry = state.to_owned();
        }
    }
    said
}

/// The Chrome trace: one complete event per attempt with the attempt's state, each unit's
/// attempts as the model's, and the run's span with the run's status.
fn check_chrome(apollo: &mut Apollo, context: &str, model: &Model) {
    let trace = apollo
        .args(&["replay", &model.run, "--format", "chrome-trace"])
        .run();
    trace.code(0);
    let trace = json(&trace.stdout, "the Chrome trace");
    let events = trace["traceEvents"].as_array().cloned().unwrap_or_default();
    let mut attempts: Vec<(String, u64, String)> = (events.iter())
        .filter(|event| event["cat"] == "attempt")
        .map(|event| {
            let args = &event["args"];
            (
                args["unit"].as_str().unwrap_or_default().to_owned(),
                args["attempt"].as_u64().unwrap_or_default(),
                args["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    attempts.sort();
    let mut traced: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (unit, _, status) in attempts {
        traced.entry(unit).or_default().push(status);
    }
    assert_eq!(
        traced, model.attempts,
        "{context}: the Chrome trace's attempts and the model's (the HTML report's bars)"
    );
    assert_eq!(
        chrome_states(&events, model.states.keys()),
        model.states,
        "{context}: the states the Chrome trace shows and show's"
    );
    let run = (events.iter())
        .find(|event| event["cat"] == "run" && event["ph"] == "X")
        .unwrap_or_else(|| panic!("{context}: no run span in the trace"));
    assert_eq!(
        run["args"]["status"], model.show["status"],
        "{context}: the Chrome trace's run status"
    );
}

/// unit → the state the Chrome trace's last event about the unit shows: its attempt's status,
/// a skip (why) or a reuse; a unit with none never started. The trace writes its events in
/// the order of the records they come from (one unit's also in time order).
fn chrome_states<'a>(
    events: &[Value],
    units: impl Iterator<Item = &'a String>,
) -> BTreeMap<String, String> {
    let mut said: BTreeMap<String, String> = units
        .map(|unit| (unit.clone(), "not_started".to_owned()))
        .collect();
    // The attempts with a phase: an interrupted one of them was cut off (the model's rule).
    let key = |args: &Value| (args["unit"].to_string(), args["attempt"].to_string());
    let phased: std::collections::BTreeSet<(String, String)> = (events.iter())
        .filter(|event| event["cat"] == "phase")
        .map(|event| key(&event["args"]))
        .collect();
    for event in events {
        let args = &event["args"];
        let reason = args["reason"].as_str().unwrap_or_default();
        let ran = phased.contains(&key(args));
        let state = match (event["cat"].as_str(), args["status"].as_str()) {
            (Some("attempt"), Some("interrupted")) if ran => "cut_off",
            (Some("attempt"), Some("interrupted")) => "not_started",
            (Some("attempt"), Some("succeeded")) => "succeeded",
            (Some("attempt"), Some("failed" | "timed_out")) => "failed",
            (Some("attempt"), Some("skipped")) => "skipped",
            (Some("attempt"), Some("unfinished")) => "cut_off",
            (Some("skip"), _) if reason.starts_with("upstream") => "upstream_failed",
            (Some("skip"), _) if reason.starts_with("when:") => "skipped_when",
            (Some("skip"), _) => "not_started",
            (Some("reuse"), _) => "reused",
            _ => continue,
        };
        if let Some(entry) = said.get_mut(args["unit"].as_str().unwrap_or_default()) {
            *entry = state.to_owned();
        }
    }
    said
}

/// `diff A B --format json` says each unit's state in each run as the runs' models do.
pub(crate) fn check_diff(apollo: &mut Apollo, context: &str, a: &Model, b: &Model) {
    let diff = apollo
        .args(&["diff", &a.run, &b.run, "--format", "json"])
        .run();
    let diff = json(&diff.stdout, "diff");
    assert_eq!(diff["run_a"]["status"], a.show["status"], "{context}: diff");
    assert_eq!(diff["run_b"]["status"], b.show["status"], "{context}: diff");
    let side = |key: &str| -> BTreeMap<String, String> {
        (diff["units"].as_array().into_iter().flatten())
            .filter_map(|unit| {
                let state = unit[key].as_str()?;
                Some((unit["unit"].as_str()?.to_owned(), state.to_owned()))
            })
            .collect()
    };
    assert_eq!(
        side("state_a"),
        a.states,
        "{context}: diff's run A\n{diff:#}"
    );
    assert_eq!(
        side("state_b"),
        b.states,
        "{context}: diff's run B\n{diff:#}"
    );
}

/// `stats` over the ordinary runs `models` (oldest first, all of the pipeline's): the runs it
/// looked at, and per unit in how many it ran, failed, needed a retry, and its successes.
pub(crate) fn check_stats(apollo: &mut Apollo, context: &str, models: &[Model]) {
    let stats = apollo.args(&["stats", "--format", "json"]).run();
    stats.code(0);
    let stats = json(&stats.stdout, "stats");
    let ids: Vec<&str> = models.iter().map(|model| model.run.as_str()).collect();
    let listed: Vec<&str> = (stats["runs"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(listed, ids, "{context}: the runs stats looks at");
    let mut expected: BTreeMap<String, (u64, u64, u64, u64)> = BTreeMap::new();
    for model in models {
        for (unit, attempts) in &model.attempts {
            // An attempt that ended on its `when: {command}` false ran nothing of the unit
            // (DESIGN §18: skipped_when): the unit did not run then, nor was it retried.
            let attempts = ran(apollo, model, unit, attempts);
            if attempts.is_empty() {
                continue;
            }
            let entry = expected.entry(unit.clone()).or_default();
            entry.0 += 1;
            entry.1 += u64::from(model.states[unit] == "failed");
            entry.2 += u64::from(attempts.len() > 1);
            entry.3 += attempts
                .iter()
                .filter(|state| *state == "succeeded")
                .count() as u64;
        }
    }
    let said: BTreeMap<String, (u64, u64, u64, u64)> =
        (stats["units"].as_array().into_iter().flatten())
            .map(|unit| {
                let runs = unit["runs"].as_u64().unwrap_or_default();
                let share = |key: &str| {
                    (unit[key].as_f64().unwrap_or_default() * runs as f64).round() as u64
                };
                (
                    unit["unit"].as_str().unwrap_or_default().to_owned(),
                    (
                        runs,
                        share("failure_rate"),
                        share("retry_rate"),
                        unit["samples"].as_u64().unwrap_or_default(),
                    ),
                )
            })
            .collect();
    assert_eq!(
        said, expected,
        "{context}: stats (runs, failed, retried, successes) per unit\n{stats:#}"
    );
}

/// The states of `unit`'s attempts in `model` that ran the unit: without those that ended on
/// its `when: {command}` false (`show RUN UNIT --format json`: skipped, the `when` phase last).
fn ran(apollo: &mut Apollo, model: &Model, unit: &str, attempts: &[String]) -> Vec<String> {
    if !attempts.iter().any(|state| state == "skipped") {
        return attempts.to_vec();
    }
    let show = apollo
        .args(&["show", &model.run, unit, "--format", "json"])
        .run();
    show.code(0);
    let show = json(&show.stdout, "show UNIT");
    let shown = show["attempts"].as_array().cloned().unwrap_or_default();
    assert_eq!(shown.len(), attempts.len(), "{unit}: {show:#}");
    (shown.iter().zip(attempts))
        .filter(|(attempt, _)| {
            let outcome = &attempt["outcome"];
            let last_phase = outcome["phases"]
                .as_array()
                .and_then(|phases| phases.last());
            !(outcome["status"] == "skipped"
                && last_phase.is_some_and(|phase| phase["phase"] == "when"))
        })
        .map(|(_, state)| state.clone())
        .collect()
}
