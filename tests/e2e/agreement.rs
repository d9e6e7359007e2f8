//! Every view tells the same run (issue 35, DESIGN §18's closed set of unit states): random
//! pipelines — failures, exit 77, `when:` false, upstream failures, fail-fast stops, resumes
//! and reuse — each invocation read back through the run's JSON summary, the hook summary,
//! `show`, JUnit and `runs`, and every unit's state and every count compared.
//!
//! The seeds are fixed: a failing seed replays exactly (`AGREEMENT_SEED=N` runs one).

use std::collections::BTreeMap;

use crate::support::Apollo;

/// A small xorshift generator: the test needs no statistics, only a replayable stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A pipeline of 3–6 units over random earlier dependencies; each unit exits with the code in
/// `codes/<unit>`, some are `when:` false, some reusable. Returns the config and the units.
fn pipeline(rng: &mut Rng) -> (String, Vec<String>) {
    let n = 3 + rng.below(4);
    let mut yaml = String::from("on_finish: cp \"$APOLLO_SUMMARY_JSON\" summary.json\nunits:\n");
    let mut units = Vec::new();
    for i in 0..n {
        let name = format!("u{i}");
        yaml += &format!(
            "  - name: {name}\n    outputs: [out/{name}]\n    execute: mkdir -p out; echo {name} > out/{name}; exit \"$(cat codes/{name})\"\n"
        );
        let deps: Vec<String> = (0..i)
            .filter(|_| rng.below(3) == 0)
            .map(|dep| format!("u{dep}"))
            .collect();
        if !deps.is_empty() {
            yaml += &format!("    deps: [{}]\n", deps.join(", "));
        }
        if rng.below(8) == 0 {
            yaml += "    when: \"false\"\n";
        }
        if rng.below(3) == 0 {
            yaml += "    reuse: true\n";
        }
        units.push(name);
    }
    (yaml, units)
}

fn set_codes(apollo: &Apollo, units: &[String], rng: &mut Rng, failures: bool) {
    for unit in units {
        let code = match rng.below(10) {
            0..=1 if failures => 1,
            2 => 77,
            _ => 0,
        };
        apollo.file(&format!("codes/{unit}"), &code.to_string());
    }
}

pub(crate) fn json(text: &str, what: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("{what}: {error}: {text}"))
}

/// unit → state, from a JSON array of objects.
pub(crate) fn states(
    units: &serde_json::Value,
    name_key: &str,
    state_key: &str,
) -> BTreeMap<String, String> {
    (units.as_array().into_iter().flatten())
        .map(|unit| {
            (
                unit[name_key].as_str().unwrap_or_default().to_owned(),
                unit[state_key].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// unit → `apollo.state` property of its JUnit testcase.
pub(crate) fn junit_states(xml: &str) -> BTreeMap<String, String> {
    let mut states = BTreeMap::new();
    for case in xml.split("<testcase ").skip(1) {
        let name = case
            .split("name=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_default();
        let state = case
            .split("name=\"apollo.state\" value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_default();
        states.insert(name.to_owned(), state.to_owned());
    }
    states
}

/// Reads every view of the latest run after one invocation and checks that they agree.
fn check_views(apollo: &mut Apollo, seed: u64, step: &str, run: &crate::support::Output) {
    let run_stdout = &run.stdout;
    let context = format!("seed {seed}, {step}");
    let summary_line = run_stdout
        .lines()
        .rfind(|line| line.contains(r#""event":"summary""#))
        .unwrap_or_else(|| {
            panic!(
                "{context}: no summary event in {run_stdout}\n{}",
                run.stderr
            )
        });
    for line in run_stdout.lines() {
        assert_eq!(
            json(line, "a run event")["schema"],
            "apollo.run_events/2",
            "{context}: {line}"
        );
    }
    let summary = json(summary_line, "the run's summary event");
    let invocation = states(&summary["units"], "unit", "status");

    let hook = json(
        &std::fs::read_to_string(apollo.path("summary.json")).unwrap(),
        "the hook summary",
    );
    assert_eq!(
        states(&hook["units"], "name", "status"),
        invocation,
        "{context}: the hook summary and the run's summary"
    );

    let show = apollo.args(&["show", "latest", "--format", "json"]).run();
    show.code(0);
    let show = json(&show.stdout, "show");
    let model = states(&show["units"], "unit", "status");
    for (unit, said) in &invocation {
        let whole_run = &model[unit];
        let agrees = if said == "already_done" {
            // Done by an earlier invocation of this run: the run's own state stands.
            ["succeeded", "skipped", "skipped_when", "reused"].contains(&whole_run.as_str())
        } else {
            said == whole_run
        };
        assert!(
            agrees,
            "{context}: unit {unit} is {said} in the run's summary but {whole_run} in show\n{show:#}\n{summary_line}"
        );
    }

    let junit = apollo.args(&["replay", "--format", "junit"]).run();
    junit.code(0);
    assert_eq!(
        junit_states(&junit.stdout),
        model,
        "{context}: JUnit and show\n{}",
        junit.stdout
    );

    let count = |state: &str| model.values().filter(|s| *s == state).count() as u64;
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    runs.code(0);
    let runs = json(&runs.stdout, "runs");
    let latest = runs["runs"]
        .as_array()
        .and_then(|runs| runs.last())
        .cloned();
    let latest = latest.unwrap_or_else(|| panic!("{context}: runs lists no run: {runs}"));
    for state in [
        "succeeded",
        "reused",
        "failed",
        "skipped",
        "skipped_when",
        "upstream_failed",
        "not_started",
        "cut_off",
        "needs_verdict",
    ] {
        assert_eq!(
            latest["counts"][state].as_u64(),
            Some(count(state)),
            "{context}: `runs` counts {state}\nruns: {latest}\nshow: {show:#}"
        );
        assert_eq!(
            show["counts"][state].as_u64(),
            Some(count(state)),
            "{context}: show's counts {state}\n{show:#}"
        );
    }
}

fn one_seed(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut apollo = Apollo::new();
    let (yaml, units) = pipeline(&mut rng);
    apollo.config(&yaml);
    set_codes(&apollo, &units, &mut rng, true);
    let first = apollo.args(&["run", "--format", "json"]).run();
    check_views(&mut apollo, seed, "first run", &first);

    // The failures mended: the run resumes.
    set_codes(&apollo, &units, &mut rng, false);
    let resumed = apollo.args(&["run", "--format", "json"]).run();
    check_views(&mut apollo, seed, "resume", &resumed);

    // A fresh run: reusable units whose inputs are unchanged are reused.
    let fresh = apollo.args(&["run", "--fresh", "--format", "json"]).run();
    check_views(&mut apollo, seed, "fresh run", &fresh);
}

#[test]
fn every_view_shows_the_same_states_and_counts() {
    match std::env::var("AGREEMENT_SEED") {
        Ok(seed) => one_seed(seed.parse().expect("AGREEMENT_SEED is a number")),
        Err(_) => (1..=12).for_each(one_seed),
    }
}

/// A run SIGKILLed mid-attempt reads the same in every view — the attempt cut off, what came
/// after it not started — and so does its resume (issue 35).
#[test]
fn a_run_killed_mid_attempt_and_its_resume_read_the_same_in_every_view() {
    let mut apollo = Apollo::new();
    apollo.config(
        "on_finish: cp \"$APOLLO_SUMMARY_JSON\" summary.json\nunits:\n  - name: quick\n    execute: 'true'\n  - name: slow\n    deps: [quick]\n    execute: bin/block slow\n  - name: after\n    deps: [slow]\n    execute: 'true'\n",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("slow.started");
    running.kill9();
    apollo.assert_no_processes_left();

    let expected = BTreeMap::from([
        ("after".to_owned(), "not_started".to_owned()),
        ("quick".to_owned(), "succeeded".to_owned()),
        ("slow".to_owned(), "cut_off".to_owned()),
    ]);
    let show = apollo.args(&["show", "latest", "--format", "json"]).run();
    show.code(0);
    let show = json(&show.stdout, "show");
    assert_eq!(states(&show["units"], "unit", "status"), expected, "{show}");
    let junit = apollo.args(&["replay", "--format", "junit"]).run();
    assert_eq!(junit_states(&junit.stdout), expected, "{}", junit.stdout);
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    let runs = json(&runs.stdout, "runs");
    assert_eq!(runs["runs"][0]["status"], "incomplete", "{runs}");
    assert_eq!(runs["runs"][0]["counts"], show["counts"], "{runs}");
    assert_eq!(runs["runs"][0]["counts"]["cut_off"], 1, "{runs}");

    apollo.release("slow.release");
    let resumed = apollo.args(&["run", "--format", "json"]).run();
    resumed.code(0);
    check_views(&mut apollo, 0, "resume after a kill", &resumed);
}

/// The text views of one run, as a user reads them, in snapshots (ids, times, durations,
/// hashes and pids filtered): the summary line, `show`, `runs` and the JUnit report name every
/// unit's state from the one set.
#[test]
fn the_text_views_of_one_run() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: fetch\n    execute: 'true'\n  - name: optional\n    deps: [fetch]\n    execute: exit 77\n  - name: holiday\n    when: \"false\"\n    execute: 'true'\n  - name: broken\n    deps: [optional]\n    execute: echo boom >&2; exit 3\n  - name: report\n    deps: [broken]\n    execute: 'true'\n",
    );
    let run = apollo.args(&["run", "-j", "1"]).run();
    run.code(1);
    let show = apollo.args(&["show"]).run();
    show.code(0);
    let runs = apollo.args(&["runs"]).run();
    runs.code(0);
    let junit = apollo.args(&["replay", "--format", "junit"]).run();
    junit.code(0);
    let text = format!(
        "$ apollo run\n{}\n$ apollo show\n{}\n$ apollo runs\n{}\n$ apollo replay --format junit\n{}",
        run.stdout, show.stdout, runs.stdout, junit.stdout
    );
    insta::with_settings!({filters => vec![
        (r"\d{8}T\d{6}Z-[0-9a-f]{4}", "[RUN]"),
        (r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?(\+00:00|Z)?", "[TIME]"),
        (r"\b\d+(\.\d+)?(ms|s)\b", "[DUR]"),
        (r#"time="[0-9.]+""#, r#"time="[DUR]""#),
        (r"/tmp/[^ \n]*", "[DIR]"),
        (r" +\n", "\n"),
    ]}, {
        insta::assert_snapshot!(text);
    });
}

/// A reproduction (`apollo reproduce`) is a run of its own kind: `runs`, `show` and JUnit give
/// it the same states and counts, and `latest` still names the pipeline's run.
#[test]
fn a_reproduction_reads_the_same_in_every_view() {
    let mut apollo = Apollo::new();
    apollo.file("data/in.txt", "b\na\n");
    apollo.config(
        "units:\n  - name: sorted\n    inputs: [data/in.txt]\n    outputs: [out.txt]\n    execute: sort data/in.txt > out.txt\n",
    );
    apollo.args(&["run"]).run().code(0);
    let original = apollo.run_ids().pop().unwrap();
    apollo
        .args(&["reproduce", "latest", "sorted"])
        .run()
        .code(0);

    let runs = apollo.args(&["runs", "--format", "json"]).run();
    runs.code(0);
    let runs = json(&runs.stdout, "runs");
    let reproduction = (runs["runs"].as_array().unwrap().iter())
        .find(|run| run["kind"] == "reproduction")
        .unwrap_or_else(|| panic!("no reproduction in {runs}"))
        .clone();
    let id = reproduction["id"].as_str().unwrap();
    let show = apollo.args(&["show", id, "--format", "json"]).run();
    show.code(0);
    let show = json(&show.stdout, "show");
    assert_eq!(show["kind"], "reproduction", "{show}");
    assert_eq!(
        show["counts"], reproduction["counts"],
        "{show}\n{reproduction}"
    );
    let model = states(&show["units"], "unit", "status");
    assert_eq!(model["sorted"], "succeeded", "{show}");
    let junit = apollo.args(&["replay", id, "--format", "junit"]).run();
    junit.code(0);
    assert_eq!(junit_states(&junit.stdout), model, "{}", junit.stdout);
    let latest = apollo.args(&["show", "latest", "--format", "json"]).run();
    assert_eq!(
        json(&latest.stdout, "show latest")["run"],
        original.as_str()
    );
}

/// A cut-off attempt of an `idempotent: false` unit needs a human's verdict, and every view says
/// so with the one state `needs_verdict` (DESIGN §18): the run's summary, the hook summary,
/// `show`, JUnit, `runs` and the HTML report; a verdict settles it.
#[test]
fn a_non_idempotent_unit_cut_off_needs_a_verdict_in_every_view() {
    let mut apollo = Apollo::new();
    apollo.config(
        "on_finish: cp \"$APOLLO_SUMMARY_JSON\" summary.json\nunits:\n  - name: quick\n    execute: 'true'\n  - name: charge\n    deps: [quick]\n    idempotent: false\n    execute: 'kill -9 $$'\n  - name: receipt\n    deps: [charge]\n    execute: 'true'\n",
    );
    // The run stops for the verdict (exit 5): its summary event (tests/e2e/verdict_summary.rs)
    // and its hook render the run model.
    let stopped = apollo.args(&["run", "--format", "json"]).run();
    stopped.code(5);
    let summary = json(stopped.stdout.lines().last().unwrap_or_default(), "summary");
    let show = apollo.args(&["show", "latest", "--format", "json"]).run();
    let show = json(&show.stdout, "show");
    let model = states(&show["units"], "unit", "status");
    assert_eq!(model["charge"], "needs_verdict", "{show:#}");
    assert_eq!(
        states(&summary["units"], "unit", "status"),
        model,
        "{summary}"
    );
    assert_eq!(summary["counts"], show["counts"], "{summary}");
    let hook = json(
        &std::fs::read_to_string(apollo.path("summary.json")).unwrap(),
        "the hook summary",
    );
    assert_eq!(
        states(&hook["units"], "name", "status")["charge"],
        "needs_verdict",
        "{hook:#}"
    );
    let junit = apollo.args(&["replay", "--format", "junit"]).run();
    assert_eq!(junit_states(&junit.stdout), model, "{}", junit.stdout);
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    let runs = json(&runs.stdout, "runs");
    assert_eq!(runs["runs"][0]["counts"], show["counts"], "{runs}");
    let text = apollo.args(&["show", "latest"]).run();
    assert!(text.stdout.contains("needs a verdict"), "{}", text.stdout);
    let runs = apollo.args(&["runs"]).run();
    assert!(runs.stdout.contains("1 needs a verdict"), "{}", runs.stdout);
    let html = apollo.args(&["replay", "--format", "html"]).run();
    assert!(html.stdout.contains("s-needs_verdict"), "the HTML report");

    apollo
        .args(&["mark", "latest", "charge", "--failed"])
        .run()
        .code(0);
    let show = apollo.args(&["show", "latest", "--format", "json"]).run();
    let show = json(&show.stdout, "show");
    assert_eq!(
        states(&show["units"], "unit", "status")["charge"],
        "failed",
        "{show:#}"
    );
}

/// apollo killed while an `idempotent: false` unit runs: the attempt has no end, and every view
/// says it needs a verdict (not merely "cut off", which an idempotent unit's rerun settles).
#[test]
fn a_non_idempotent_unit_in_flight_when_apollo_died_needs_a_verdict() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: pay\n    idempotent: false\n    execute: bin/block pay\n  - name: slow\n    execute: bin/block slow\n",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("pay.started");
    apollo.wait_for_marker("slow.started");
    running.kill9();
    apollo.release("pay.release");
    apollo.release("slow.release");
    apollo.assert_no_processes_left();
    let expected = BTreeMap::from([
        ("pay".to_owned(), "needs_verdict".to_owned()),
        ("slow".to_owned(), "cut_off".to_owned()),
    ]);
    let show = apollo.args(&["show", "latest", "--format", "json"]).run();
    let show = json(&show.stdout, "show");
    assert_eq!(states(&show["units"], "unit", "status"), expected, "{show}");
    let junit = apollo.args(&["replay", "--format", "junit"]).run();
    assert_eq!(junit_states(&junit.stdout), expected, "{}", junit.stdout);
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    let runs = json(&runs.stdout, "runs");
    assert_eq!(runs["runs"][0]["counts"], show["counts"], "{runs}");
    assert_eq!(runs["runs"][0]["counts"]["needs_verdict"], 1, "{runs}");
}
