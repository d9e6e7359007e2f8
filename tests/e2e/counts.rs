//! One set of counts and states for a run, whichever view shows it (issue 35): a unit that
//! skipped itself earlier in a resumed run stays skipped; a reused unit is a passing test and
//! `reused` in the hook summary, never "not started"; a fan-out instance's output is found by
//! every view that shows it (JUnit, HTML), and `stats` gives it its `foreach` unit's timeout.

use crate::support::Apollo;

/// `runs --format json` of the latest run.
fn latest_counts(apollo: &mut Apollo) -> serde_json::Value {
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    runs.code(0);
    let runs: serde_json::Value = serde_json::from_str(&runs.stdout).unwrap();
    runs["runs"].as_array().unwrap().last().unwrap().clone()
}

#[test]
fn a_unit_that_skipped_itself_before_a_resume_stays_skipped_in_every_count() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: optional\n    execute: exit 77\n  - name: needs_go\n    execute: test -e markers/go\n",
    );
    apollo.args(&["run"]).run().code(1);
    apollo.release("go");
    let resumed = apollo.args(&["run"]).run();
    resumed.code(0);
    assert!(
        resumed.stdout.contains("1 of 2 units already done"),
        "{}",
        resumed.stdout
    );
    assert!(
        resumed.stdout.contains("1 succeeded, 0 failed, 1 skipped"),
        "the summary: {}",
        resumed.stdout
    );
    let run = latest_counts(&mut apollo);
    assert_eq!(
        (
            run["counts"]["succeeded"].as_u64(),
            run["counts"]["skipped"].as_u64()
        ),
        (Some(1), Some(1)),
        "runs: {run}"
    );
    let junit = apollo.args(&["replay", "--format", "junit"]).run();
    junit.code(0);
    assert!(
        junit.stdout.contains(r#"tests="2" skipped="1""#),
        "{}",
        junit.stdout
    );
    // The final `run end` prints the run model's counts, as the summary above does; the
    // first (before the resume) keeps the tally of its own record.
    let replay = apollo.args(&["replay"]).run();
    let run_ends: Vec<&str> = (replay.stdout.lines())
        .filter(|line| line.contains("run end"))
        .collect();
    assert_eq!(run_ends.len(), 2, "{}", replay.stdout);
    assert!(
        run_ends[0].ends_with("0 succeeded, 1 failed, 1 skipped"),
        "{}",
        replay.stdout
    );
    assert!(
        run_ends[1].ends_with("1 succeeded, 0 failed, 1 skipped"),
        "{}",
        replay.stdout
    );
}

#[test]
fn a_reused_unit_is_a_passing_test_and_reused_in_the_hook_summary() {
    let mut apollo = Apollo::new();
    apollo.config(
        "on_finish: cp \"$APOLLO_SUMMARY_JSON\" summary.json\ndefaults:\n  reuse: true\nunits:\n  - name: make\n    outputs: [out.txt]\n    execute: bin/count make; echo made > out.txt\n",
    );
    apollo.args(&["run"]).run().code(0);
    let first = apollo.run_ids().pop().unwrap();
    let second = apollo.args(&["run", "--format", "json"]).run();
    second.code(0);
    assert_eq!(apollo.count("make"), 1, "reused: {}", second.stdout);
    assert!(
        second.stdout.contains(r#""status":"reused""#),
        "the run's JSON events: {}",
        second.stdout
    );

    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(apollo.path("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["schema"], "apollo.hook_summary/3");
    assert_eq!(summary["units"][0]["status"], "reused", "{summary}");
    assert_eq!(summary["units"][0]["from_run"], first.as_str(), "{summary}");

    let junit = apollo.args(&["replay", "--format", "junit"]).run();
    junit.code(0);
    assert!(!junit.stdout.contains("<skipped"), "{}", junit.stdout);
    assert!(
        junit.stdout.contains(&format!(
            r#"name="apollo.reused_from" value="run {first} attempt 1""#
        )),
        "{}",
        junit.stdout
    );
}

#[test]
fn a_fan_out_instance_streams_its_output_and_has_its_stderr_in_junit() {
    let mut apollo = Apollo::new();
    apollo.config(
        "params:\n  regions: {type: list, default: [eu]}\nunits:\n  - name: load\n    foreach: ${params.regions}\n    execute: echo loading ${item}; echo boom-${item} >&2; exit 1\n",
    );
    let run = apollo.args(&["run", "--stream"]).run();
    run.code(1);
    assert!(
        run.stdout.contains("load[eu] | loading eu"),
        "{}",
        run.stdout
    );
    let junit = apollo.args(&["replay", "--format", "junit"]).run();
    junit.code(0);
    assert!(junit.stdout.contains("boom-eu"), "{}", junit.stdout);
    // The HTML report's excerpt row of the instance, read from the folder the store names
    // (`units/load__eu/`), not one spelled from the instance's name.
    let html = apollo.args(&["replay", "--format", "html"]).run();
    html.code(0);
    let excerpt_row = (html
        .stdout
        .split("<tr class=\"excerpt\" data-unit=\"load[eu]\"")
        .nth(1))
    .and_then(|row| row.split("</tr>").next())
    .unwrap_or_else(|| panic!("no stderr excerpt for load[eu] in the HTML report"));
    assert!(excerpt_row.contains("boom-eu"), "{excerpt_row}");
}

/// `apollo stats` gives a fan-out instance the `timeout` of its `foreach` unit, read from the
/// run's resolved definition (which names the instances), not `none` (issue 35).
#[test]
fn stats_shows_the_timeout_of_a_fan_out_instance() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: load\n    foreach: [eu, us]\n    timeout: 1h\n    execute: echo ${item}\n",
    );
    apollo.args(&["run"]).run().code(0);
    let json = apollo.args(&["stats", "--format", "json"]).run();
    json.code(0);
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let instance = (json["units"].as_array().into_iter().flatten())
        .find(|unit| unit["unit"] == "load[eu]")
        .unwrap_or_else(|| panic!("no load[eu] in stats: {json}"));
    assert_eq!(instance["timeout_ms"], 3_600_000, "{json}");
    let text = apollo.args(&["stats"]).run();
    text.code(0);
    let row = (text.stdout.lines())
        .find(|line| line.starts_with("load[eu] "))
        .unwrap_or_else(|| panic!("no load[eu] row: {}", text.stdout));
    assert!(
        row.split_whitespace().any(|column| column == "1h00m") && !row.contains("none"),
        "the TIMEOUT column: {row}"
    );
}

/// `show` and `logs` default to the latest run; `show` without a unit is the run's summary, in
/// the run model's states; `logs` of an attempt that wrote only to stderr says so (issue 35).
#[test]
fn show_and_logs_default_to_the_latest_run_and_show_summarises_it() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: quiet\n    execute: echo only-on-stderr >&2\n  - name: optional\n    execute: exit 77\n",
    );
    apollo.args(&["run"]).run().code(0);
    let run = apollo.run_ids().pop().unwrap();

    let summary = apollo.args(&["show"]).run();
    summary.code(0);
    assert!(
        summary
            .stdout
            .contains(&format!("run {run} of `apollo`: succeeded")),
        "{}",
        summary.stdout
    );
    assert!(summary.stdout.contains("quiet"), "{}", summary.stdout);
    assert!(summary.stdout.contains("skipped"), "{}", summary.stdout);
    let json = apollo.args(&["show", "latest", "--format", "json"]).run();
    json.code(0);
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(json["schema"], "apollo.show_run/3");
    assert_eq!(json["units"][1]["status"], "skipped", "{json}");

    let unit = apollo.args(&["show", "quiet"]).run();
    unit.code(0);
    assert!(
        unit.stdout.contains(&format!("unit quiet of run {run}")),
        "{}",
        unit.stdout
    );

    let logs = apollo.args(&["logs", "quiet"]).run();
    logs.code(0);
    assert!(
        logs.stderr
            .contains("wrote nothing to stdout; its stderr holds")
            && logs.stderr.contains("--stderr"),
        "{}",
        logs.stderr
    );
    let stderr = apollo.args(&["logs", "quiet", "--stderr"]).run();
    stderr.code(0);
    assert_eq!(stderr.stdout, "only-on-stderr\n");

    let neither = apollo.args(&["logs", "nosuch"]).run();
    neither.code(2);
    assert!(
        neither.stderr.contains("neither a run"),
        "{}",
        neither.stderr
    );
}

/// A `foreach` whose glob matches no file is never silent: `check` and `run` warn, naming the
/// unit and the pattern, and its dependents run without it (issue 35).
#[test]
fn a_foreach_whose_glob_matches_nothing_is_a_warning_in_check_and_run() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: load\n    foreach: {glob: \"data/*.csv\"}\n    execute: echo ${item}\n  - name: report\n    deps: [load]\n    execute: echo report\n",
    );
    let warning = "`foreach` of unit `load` matches no file (`data/*.csv`): it has no instances, and its dependent `report` runs without it";
    let check = apollo.args(&["check"]).run();
    check.code(0);
    assert!(check.stderr.contains(warning), "{}", check.stderr);
    let run = apollo.args(&["run"]).run();
    run.code(0);
    assert!(run.stderr.contains(warning), "{}", run.stderr);
    assert!(run.stdout.contains("1 succeeded"), "{}", run.stdout);

    apollo.file("data/a.csv", "a");
    let run = apollo.args(&["run", "--fresh"]).run();
    run.code(0);
    assert!(!run.stderr.contains(warning), "{}", run.stderr);
    assert!(run.stdout.contains("2 succeeded"), "{}", run.stdout);

    // Where the unit says `allow_empty: false`, an empty match is an error, in `run` too.
    let mut strict = Apollo::new();
    strict.config(
        "units:\n  - name: load\n    foreach: \"data/*.csv\"\n    allow_empty: false\n    execute: echo ${item}\n  - name: report\n    deps: [load]\n    execute: echo report\n",
    );
    let error =
        "`foreach` of unit `load` matches no file (`data/*.csv`), and it says `allow_empty: false`";
    let check = strict.args(&["check"]).run();
    check.code(2);
    assert!(check.stderr.contains(error), "{}", check.stderr);
    let run = strict.args(&["run"]).run();
    run.code(2);
    assert!(run.stderr.contains(error), "{}", run.stderr);
    strict.file("data/a.csv", "a");
    strict.args(&["run"]).run().code(0);
}

/// A run is named by `latest`, `latest~N`, `last-success`, or a unique prefix or suffix of its
/// id (issue 35), through the one selector every command uses.
#[test]
fn runs_are_named_by_last_success_and_by_a_unique_suffix() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: u\n    execute: test ! -e markers/fail\n");
    apollo.args(&["run"]).run().code(0);
    apollo.release("fail");
    apollo.args(&["run", "--fresh"]).run().code(1);
    let ids = apollo.run_ids();
    let show = |apollo: &mut Apollo, run: &str| {
        let out = apollo.args(&["show", run, "--format", "json"]).run();
        out.code(0);
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap()["run"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(show(&mut apollo, "last-success"), ids[0]);
    assert_eq!(show(&mut apollo, "latest"), ids[1]);
    let suffix = &ids[1][ids[1].len() - 4..];
    assert_eq!(show(&mut apollo, suffix), ids[1]);
    let none = apollo.args(&["show", "latest~5", "u"]).run();
    none.code(2);
    assert!(none.stderr.contains("only 2 runs"), "{}", none.stderr);
}

#[test]
fn one_set_of_counts_in_the_summary_and_in_runs() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: work\n    execute: echo done\n  - name: holiday\n    execute: exit 77\n  - name: flaky\n    retries: 1\n    retry_delay: 10ms\n    execute: test $APOLLO_ATTEMPT -ge 2\n",
    );
    let run = apollo.args(&["run"]).run();
    run.code(0);
    assert!(
        run.stdout
            .contains("2 succeeded (1 FLAKY), 0 failed, 1 skipped\n"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("flaky: flaky"), "{}", run.stdout);
    let runs = apollo.args(&["runs"]).run();
    runs.code(0);
    assert!(runs.stdout.contains("2/3 ok, 1 skipped"), "{}", runs.stdout);
}

#[test]
fn the_interrupted_summary_counts_the_unit_that_had_started() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: slow\n    execute: bin/block slow\n  - name: after\n    deps: [slow]\n    execute: echo after\n",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("slow.started");
    running.signal(libc::SIGTERM);
    let out = running.wait();
    out.code(130);
    assert!(
        out.stdout.contains("1 cut off, 1 not started"),
        "{}",
        out.stdout
    );
}
