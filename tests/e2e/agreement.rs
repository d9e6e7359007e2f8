//! Every view tells the same run (issue 35, DESIGN §18's closed set of unit states): random
//! pipelines — failures, exit 77, `when:` false (an expression, or a command true or false),
//! upstream failures, fail-fast stops, apollo SIGKILLed mid-unit, resumes, reuse and
//! `apollo reproduce` — each invocation read back through the run's JSON summary, the hook
//! summary, `show`, JUnit, `runs`, the text replay, the HTML report, the Chrome trace, `diff`
//! and `stats` (`agreement_views.rs`), and every unit's state and every count compared.
//!
//! The seeds are fixed: a failing seed replays exactly (`AGREEMENT_SEED=N` runs one).

use std::collections::BTreeMap;

use crate::agreement_views::{Model, check_run};
use crate::support::Apollo;

/// A small xorshift generator: the test needs no statistics, only a replayable stream.
pub(crate) struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random pipeline (see [`pipeline`]).
pub(crate) struct Pipeline {
    pub(crate) yaml: String,
    pub(crate) units: Vec<String>,
    /// The units whose `when:` is a command: `test -e flags/<unit>`.
    pub(crate) when_commands: Vec<String>,
    /// The unit that blocks (`bin/block`) until released, where the test kills apollo.
    pub(crate) blocking: Option<String>,
}

/// A pipeline of 3–6 units over random earlier dependencies; each unit exits with the code in
/// `codes/<unit>` (its input), some are `when:` false, some `when: {command}`, some reusable;
/// with `block`, one unit that surely starts first waits for `markers/<unit>.release` (in its
/// command or its `when: {command}`).
fn pipeline(rng: &mut Rng, block: bool) -> Pipeline {
    let n = 3 + rng.below(4);
    let mut specs = Vec::new();
    for i in 0..n {
        let deps: Vec<String> = (0..i)
            .filter(|_| rng.below(3) == 0)
            .map(|dep| format!("u{dep}"))
            .collect();
        let when = match rng.below(8) {
            0 => Some("\"false\"".to_owned()),
            1 | 2 => Some(format!("{{command: test -e flags/u{i}}}")),
            _ => None,
        };
        specs.push((format!("u{i}"), deps, when, rng.below(3) == 0));
    }
    // A unit that surely starts (no `when:` false) can block: in its command, or in its
    // `when: {command}` (apollo is then killed while the condition runs).
    let may_block: Vec<String> = (specs.iter())
        .filter(|(_, _, when, _)| when.as_ref().is_none_or(|when| when.contains("command")))
        .map(|(name, ..)| name.clone())
        .collect();
    let blocking = (block && !may_block.is_empty())
        .then(|| may_block[rng.below(may_block.len() as u64) as usize].clone());
    let mut yaml = String::from("on_finish: cp \"$APOLLO_SUMMARY_JSON\" summary.json\nunits:\n");
    for (name, deps, when, reuse) in &mut specs {
        let mut wait = String::new();
        if blocking.as_ref() == Some(name) {
            match when {
                Some(when) => {
                    *when = when.replace("command: ", &format!("command: bin/block {name}; "))
                }
                None => wait = format!("bin/block {name}; "),
            }
        }
        yaml += &format!(
            "  - name: {name}\n    inputs: [codes/{name}]\n    outputs: [out/{name}]\n    execute: {wait}mkdir -p out; echo {name} > out/{name}; exit \"$(cat codes/{name})\"\n"
        );
        if !deps.is_empty() {
            yaml += &format!("    deps: [{}]\n", deps.join(", "));
        }
        if let Some(when) = when {
            yaml += &format!("    when: {when}\n");
        }
        if *reuse {
            yaml += "    reuse: true\n";
        }
    }
    let when_commands = (specs.iter())
        .filter(|(_, _, when, _)| when.as_ref().is_some_and(|when| when.contains("command")))
        .map(|(name, ..)| name.clone())
        .collect();
    let units = specs.into_iter().map(|(name, ..)| name).collect();
    Pipeline {
        yaml,
        units,
        when_commands,
        blocking,
    }
}

/// Each unit's exit code for the next invocation (failures only with `failures`), and each
/// `when: {command}` true or false.
fn set_codes(apollo: &Apollo, pipeline: &Pipeline, rng: &mut Rng, failures: bool) {
    for unit in &pipeline.units {
        let code = match rng.below(10) {
            0..=1 if failures => 1,
            2 => 77,
            _ => 0,
        };
        apollo.file(&format!("codes/{unit}"), &code.to_string());
    }
    for unit in &pipeline.when_commands {
        let flag = apollo.path(&format!("flags/{unit}"));
        if rng.below(2) == 0 {
            apollo.file(&format!("flags/{unit}"), "");
        } else if flag.exists() {
            std::fs::remove_file(flag).unwrap();
        }
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

/// After one invocation: its summary event and the hook's summary agree with the model of the
/// latest run, which every view of it must show (see [`check_run`]). Returns the model.
fn check_views(apollo: &mut Apollo, seed: u64, step: &str, run: &crate::support::Output) -> Model {
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

    let model = check_run(apollo, &context, "latest");
    for (unit, said) in &invocation {
        let whole_run = &model.states[unit];
        let agrees = if said == "already_done" {
            // Done by an earlier invocation of this run: the run's own state stands.
            ["succeeded", "skipped", "skipped_when", "reused"].contains(&whole_run.as_str())
        } else {
            said == whole_run
        };
        assert!(
            agrees,
            "{context}: unit {unit} is {said} in the run's summary but {whole_run} in show\n{:#}\n{summary_line}",
            model.show
        );
    }
    model
}

/// Keeps the latest model of each of the pipeline's runs (a resume continues the run before).
fn keep(runs: &mut Vec<Model>, model: Model) {
    runs.retain(|kept| kept.run != model.run);
    runs.push(model);
}

fn one_seed(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut apollo = Apollo::new();
    // Every third seed kills apollo mid-unit first; every other one reproduces a unit at the end.
    let pipeline = pipeline(&mut rng, seed.is_multiple_of(3));
    apollo.config(&pipeline.yaml);
    if let Some(blocking) = &pipeline.blocking {
        // No failures: the blocking unit surely starts (no fail-fast stop, no upstream failed).
        set_codes(&apollo, &pipeline, &mut rng, false);
        crate::agreement_more::kill_mid_unit(&mut apollo, seed, blocking);
    }
    let mut runs = Vec::new();
    // After a kill, the resume has failures too: a fail-fast stop may leave a unit that
    // succeeded before the kill, its inputs changed since, not started again — done earlier in
    // the run, in the summary as in the run model (`units::done_earlier`).
    set_codes(&apollo, &pipeline, &mut rng, true);
    let first = apollo.args(&["run", "--format", "json"]).run();
    let model = check_views(
        &mut apollo,
        seed,
        "first run (or resume after a kill)",
        &first,
    );
    keep(&mut runs, model);

    // The failures mended: the run resumes (or, if it had none, a new one starts).
    set_codes(&apollo, &pipeline, &mut rng, false);
    let resumed = apollo.args(&["run", "--format", "json"]).run();
    keep(
        &mut runs,
        check_views(&mut apollo, seed, "resume", &resumed),
    );

    // A fresh run: reusable units whose inputs are unchanged are reused. Where a unit is
    // reproduced next, every `when: {command}` is true first on some seeds (the flags are not
    // inputs), so that one of them may be the unit reproduced.
    if seed % 4 == 2 {
        for unit in &pipeline.when_commands {
            apollo.file(&format!("flags/{unit}"), "");
        }
    }
    let fresh = apollo.args(&["run", "--fresh", "--format", "json"]).run();
    keep(
        &mut runs,
        check_views(&mut apollo, seed, "fresh run", &fresh),
    );
    let context = format!("seed {seed}, the last two runs");
    let [.., before, latest] = &runs[..] else {
        panic!("{context}: fewer than two runs");
    };
    crate::agreement_views::check_diff(&mut apollo, &context, before, latest);

    if seed.is_multiple_of(2) {
        crate::agreement_more::reproduce(&mut apollo, seed, &pipeline, &runs);
    }
    crate::agreement_views::check_stats(&mut apollo, &format!("seed {seed}, stats"), &runs);
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
