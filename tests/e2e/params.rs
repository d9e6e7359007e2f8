//! Params, interpolation and fan-out end to end (issue 14): values checked before anything
//! runs, recorded with the run, kept (or refused) by a resume; a changed value reruns exactly
//! the units that use it; fan-out instances are ordinary units in the journal, the log
//! folders and the CLI.

use crate::support::Apollo;

/// `extract` and `load` use `${params.day}`; `other` uses nothing; `report` fails until the
/// marker `markers/go` exists.
const PIPELINE: &str = r#"params:
  day: {type: date, default: "2026-11-30"}
units:
  - name: extract
    execute: bin/count extract && echo ${params.day} > extract.out
  - name: other
    execute: bin/count other
  - name: load
    deps: [extract]
    execute: bin/count load ${params.day}
  - name: report
    deps: [load, other]
    execute: bin/count report && test -e markers/go
"#;

fn counts(apollo: &Apollo) -> [usize; 4] {
    ["extract", "other", "load", "report"].map(|unit| apollo.count(unit))
}

#[test]
fn unknown_params_and_wrong_types_are_refused_before_anything_runs() {
    let mut apollo = Apollo::new();
    apollo.config(PIPELINE);
    let refused = apollo.args(&["run", "-p", "dya=2026-11-29"]).run();
    refused.code(2);
    assert!(
        refused.stderr.contains("unknown param `dya`")
            && refused.stderr.contains("did you mean `day`?"),
        "{}",
        refused.stderr
    );
    apollo.file("params.yaml", "day: last tuesday\n");
    let refused = apollo.args(&["run", "--params-file", "params.yaml"]).run();
    refused.code(2);
    assert!(
        refused.stderr.contains("param `day` must be a date"),
        "{}",
        refused.stderr
    );
    apollo.args(&["run", "-p", "day"]).run().code(2);
    assert_eq!(counts(&apollo), [0, 0, 0, 0]);
    assert!(apollo.run_ids().is_empty(), "no run was created");
}

#[test]
fn a_resume_keeps_the_recorded_params_and_refuses_others() {
    let mut apollo = Apollo::new();
    apollo.config(PIPELINE);
    apollo.args(&["run", "-p", "day=2026-11-29"]).run().code(1);
    assert_eq!(counts(&apollo), [1, 1, 1, 1]);

    let refused = apollo.args(&["run", "-p", "day=2026-11-30"]).run();
    refused.code(2);
    assert!(
        refused
            .stderr
            .contains(r#"`day` was "2026-11-29", now "2026-11-30""#)
            && refused.stderr.contains("--fresh"),
        "{}",
        refused.stderr
    );
    assert_eq!(counts(&apollo), [1, 1, 1, 1], "nothing ran");

    // The same value, or none (the recorded one is kept), resumes the run.
    apollo.file("markers/go", "");
    let resumed = apollo.args(&["run"]).run();
    resumed.code(0);
    assert!(
        resumed.stdout.contains("resuming run"),
        "{}",
        resumed.stdout
    );
    assert_eq!(counts(&apollo), [1, 1, 1, 2]);
    assert_eq!(
        std::fs::read_to_string(apollo.path("extract.out")).unwrap(),
        "2026-11-29\n"
    );
    assert_eq!(apollo.run_ids().len(), 1);

    let runs = apollo.args(&["runs"]).run();
    runs.code(0);
    assert!(runs.stdout.contains("day=2026-11-29"), "{}", runs.stdout);
    let json = apollo.args(&["runs", "--format", "json"]).run();
    let runs: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(runs["runs"][0]["params"]["day"], "2026-11-29");
}

#[test]
fn a_resume_with_the_same_params_given_again_resumes() {
    let mut apollo = Apollo::new();
    apollo.config(PIPELINE);
    apollo.args(&["run", "-p", "day=2026-11-29"]).run().code(1);
    apollo.file("markers/go", "");
    apollo.args(&["run", "-p", "day=2026-11-29"]).run().code(0);
    assert_eq!(counts(&apollo), [1, 1, 1, 2]);
}

#[test]
fn a_changed_param_changes_the_input_of_exactly_the_units_using_it() {
    let mut apollo = Apollo::new();
    apollo.config(PIPELINE);
    apollo.file("markers/go", "");
    apollo.args(&["run", "-p", "day=2026-11-29"]).run().code(0);
    apollo.args(&["run", "-p", "day=2026-11-30"]).run().code(0);
    let ids = apollo.run_ids();
    assert_eq!(ids.len(), 2);
    let diff = apollo
        .args(&["diff", &ids[0], &ids[1], "--format", "json"])
        .run();
    let diff: serde_json::Value = serde_json::from_str(&diff.stdout).unwrap();
    let mut command_changed: Vec<&str> = diff["units"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|unit| {
            unit["input_changes"]
                .as_array()
                .is_some_and(|changes| changes.iter().any(|change| change["kind"] == "command"))
        })
        .map(|unit| unit["unit"].as_str().unwrap())
        .collect();
    command_changed.sort_unstable();
    assert_eq!(command_changed, ["extract", "load"]);
}

#[test]
fn a_changed_env_value_reruns_exactly_the_units_using_it_on_resume() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: extract
    execute: bin/count extract ${env.REGION}
  - name: other
    execute: bin/count other
  - name: load
    deps: [other]
    execute: bin/count load
  - name: report
    deps: [load, other]
    execute: bin/count report && test -e markers/go
",
    );
    apollo.envs(&[("REGION", "eu")]);
    apollo.args(&["run"]).run().code(1);
    assert_eq!(counts(&apollo), [1, 1, 1, 1]);
    apollo.file("markers/go", "");
    apollo.envs(&[("REGION", "us")]);
    apollo.args(&["run"]).run().code(0);
    // `extract` uses the value and reruns; `report` had failed; nothing else runs again.
    assert_eq!(counts(&apollo), [2, 1, 1, 2]);
    assert_eq!(apollo.run_ids().len(), 1);
}

#[test]
fn fanout_instances_are_ordinary_units_everywhere() {
    let mut apollo = Apollo::new();
    apollo.config(
        r#"params:
  regions: {type: list, default: [eu, us]}
units:
  - name: load
    foreach: ${params.regions}
    execute: bin/count '${unit.name}' && echo loaded ${item} && test ${item} = eu -o -e markers/go
  - name: report
    deps: [load]
    execute: bin/count report
"#,
    );
    let failed = apollo.args(&["run"]).run();
    failed.code(1);
    assert!(failed.stdout.contains("load[us]"), "{}", failed.stdout);
    assert_eq!(
        (
            apollo.count("load[eu]"),
            apollo.count("load[us]"),
            apollo.count("report")
        ),
        (1, 1, 0)
    );
    let run = &apollo.run_ids()[0];
    // Log folders spell the instance without brackets.
    assert!(
        apollo
            .path(&format!(".apollo/runs/{run}/units/load__us/1/stdout"))
            .is_file()
    );
    let logs = apollo.args(&["logs", "latest", "load[us]"]).run();
    logs.code(0);
    assert!(logs.stdout.contains("loaded us"), "{}", logs.stdout);
    apollo.args(&["show", "latest", "load[eu]"]).run().code(0);

    apollo.file("markers/go", "");
    apollo.args(&["run", "--only", "load[us]"]).run().code(0);
    assert_eq!(
        (
            apollo.count("load[eu]"),
            apollo.count("load[us]"),
            apollo.count("report")
        ),
        (1, 2, 0)
    );
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("report"), 1);
    let replay = apollo.args(&["replay", "latest"]).run();
    replay.code(0);
    assert!(replay.stdout.contains("load[us]"), "{}", replay.stdout);
    apollo.args(&["verify"]).run().code(0);
}

#[test]
fn a_false_when_skips_the_unit_and_its_dependents_run_as_after_exit_77() {
    let mut apollo = Apollo::new();
    apollo.config(
        r#"params:
  region: eu
units:
  - name: only_us
    when: ${params.region} == "us"
    execute: bin/count only_us
  - name: only_eu
    when: ${params.region} == "eu"
    execute: bin/count only_eu
  - name: if_new_data
    when: {command: test -e markers/new}
    execute: bin/count if_new_data
  - name: report
    deps: [only_us, only_eu, if_new_data]
    execute: bin/count report
"#,
    );
    let first = apollo.args(&["run"]).run();
    first.code(0);
    assert_eq!(
        ["only_us", "only_eu", "if_new_data", "report"].map(|unit| apollo.count(unit)),
        [0, 1, 0, 1]
    );
    for unit in ["only_us", "if_new_data"] {
        assert!(
            first
                .stdout
                .lines()
                .any(|line| line.starts_with("  skipped") && line.contains(unit)),
            "{}",
            first.stdout
        );
    }
    // A false expression is apollo's skip, said as such — never an exit 77 of the unit's, and
    // its command stays the user's (issue 35).
    assert!(
        first
            .stdout
            .contains(r#"only_us      when: ${params.region} == "us" (eu == "us") is false"#),
        "{}",
        first.stdout
    );
    let show = apollo.args(&["show", "latest", "only_us"]).run();
    show.code(0);
    assert!(
        show.stdout
            .contains(r#"when: ${params.region} == "us" (eu == "us") is false (apollo skipped it; nothing ran)"#),
        "{}",
        show.stdout
    );
    assert!(!show.stdout.contains("exit 77"), "{}", show.stdout);
    let plan = apollo.args(&["run", "--dry-run", "--fresh"]).run();
    assert!(
        plan.stdout
            .contains(r#"skipped: when: ${params.region} == "us" (eu == "us") is false"#),
        "{}",
        plan.stdout
    );
    let junit = apollo.args(&["replay", "--format", "junit"]).run();
    assert!(
        junit.stdout.contains(
            r#"when: ${params.region} == &quot;us&quot; (eu == &quot;us&quot;) is false"#
        ),
        "{}",
        junit.stdout
    );

    apollo.file("markers/new", "");
    apollo.args(&["run", "-p", "region=us"]).run().code(0);
    assert_eq!(
        ["only_us", "only_eu", "if_new_data", "report"].map(|unit| apollo.count(unit)),
        [1, 1, 1, 2]
    );
}

#[test]
fn check_validates_a_pipeline_with_a_required_param_and_takes_p_to_check_a_value() {
    let mut apollo = Apollo::new();
    apollo.config(
        "params:
  day: {type: date}
  regions: {type: list}
units:
  - name: load
    foreach: ${params.regions}
    execute: echo ${params.day} ${item}
",
    );
    let output = apollo.args(&["check"]).run();
    output.code(0);
    assert!(
        output
            .stderr
            .contains("param `day` has no default: checked with the placeholder"),
        "{}",
        output.stderr
    );
    let output = apollo
        .args(&["check", "-p", "day=2026-11-30", "-p", "regions=eu,us"])
        .run();
    output.code(0);
    assert!(
        output.stdout.contains("(2 units, 0 warnings)"),
        "{}",
        output.stdout
    );
    let output = apollo.args(&["check", "-p", "day=yesterday"]).run();
    output.code(2);
    assert!(output.stderr.contains("day"), "{}", output.stderr);
    // A run still needs the values.
    apollo.args(&["run"]).run().code(2);
}

/// `diff` names a param that changed between two runs (issue 35), in text and JSON.
#[test]
fn diff_names_a_changed_param() {
    let mut apollo = Apollo::new();
    apollo.config(
        "params:\n  threshold: {type: int, default: 60}\nunits:\n  - name: a\n    execute: echo ${params.threshold}\n",
    );
    apollo.args(&["run"]).run().code(0);
    apollo
        .args(&["run", "--fresh", "-p", "threshold=70"])
        .run()
        .code(0);
    let diff = apollo.args(&["diff", "latest~1", "latest"]).run();
    diff.code(1);
    assert!(
        diff.stdout.contains("param threshold: 60 → 70"),
        "{}",
        diff.stdout
    );
    let json = apollo
        .args(&["diff", "latest~1", "latest", "--format", "json"])
        .run();
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(json["run_a"]["params"]["threshold"], 60, "{json}");
    assert_eq!(json["run_b"]["params"]["threshold"], 70, "{json}");
}
