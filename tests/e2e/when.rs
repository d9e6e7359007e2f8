//! `when: {command: …}` end to end (issue 35): the condition is a step of its own, run by
//! `/bin/sh` in the unit's workdir and env at the start of the unit; a false one is recorded
//! as apollo's `unit_skipped` with reason `when` (as a false expression is), never as the
//! unit's own exit 77, and the unit's command stays the user's in every view. The expression
//! form is decided ahead, so `check --plan` says it is skipped.

use crate::slurm_cluster::{cluster, guard};
use crate::support::Apollo;

/// `if_new` runs only once `markers/new` exists; `report` depends on it.
const PIPELINE: &str = r#"units:
  - name: if_new
    when: {command: test -e markers/new}
    execute: bin/count if_new
  - name: report
    deps: [if_new]
    execute: bin/count report
"#;

/// The journal's records of `kind`, as JSON.
fn records(apollo: &Apollo, kind: &str) -> Vec<serde_json::Value> {
    apollo
        .journal_text()
        .lines()
        .filter_map(|line| line.splitn(3, ' ').nth(2))
        .filter_map(|json| serde_json::from_str::<serde_json::Value>(json).ok())
        .filter(|record| record["kind"] == kind)
        .collect()
}

/// What a run with a false command-`when` shows and records: apollo's skip, the condition
/// named, the user's command; its dependents go on.
fn assert_skipped_by_its_condition(apollo: &mut Apollo, run: &crate::support::Output) {
    run.code(0);
    assert_eq!(
        (apollo.count("if_new"), apollo.count("report")),
        (0, 1),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("skipped  if_new  when: test -e markers/new is false"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("exit 77"), "{}", run.stdout);
    let skipped = records(apollo, "unit_skipped");
    assert_eq!(skipped.len(), 1, "{}", apollo.journal_text());
    assert_eq!(skipped[0]["unit"], "if_new");
    assert_eq!(skipped[0]["reason"], "when");
    assert_eq!(skipped[0]["condition"], "test -e markers/new");
    let show = apollo.args(&["show", "latest", "if_new"]).run();
    show.code(0);
    assert!(
        show.stdout.contains("when: test -e markers/new is false"),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("bin/count if_new"), "{}", show.stdout);
    assert!(!show.stdout.contains("exit 77"), "{}", show.stdout);
    assert!(!show.stdout.contains("printf"), "{}", show.stdout);
    let json = apollo.args(&["show", "latest", "--format", "json"]).run();
    json.code(0);
    assert!(json.stdout.contains("skipped_when"), "{}", json.stdout);
}

#[test]
fn a_false_when_command_is_recorded_as_apollos_skip_not_the_units_exit_77() {
    let mut apollo = Apollo::new();
    apollo.config(PIPELINE);
    let run = apollo.args(&["run"]).run();
    assert_skipped_by_its_condition(&mut apollo, &run);

    // True: the unit runs, and so does its dependent again (its upstream's output changed).
    apollo.file("markers/new", "");
    apollo.args(&["run"]).run().code(0);
    assert_eq!((apollo.count("if_new"), apollo.count("report")), (1, 2));
}

#[test]
fn a_resume_decides_a_unit_its_when_command_skipped_again() {
    let mut apollo = Apollo::new();
    apollo.config(
        r#"units:
  - name: if_new
    when: {command: test -e markers/new}
    execute: bin/count if_new
  - name: flaky
    execute: bin/count flaky && test -e markers/go
"#,
    );
    apollo.args(&["run"]).run().code(1);
    assert_eq!((apollo.count("if_new"), apollo.count("flaky")), (0, 1));
    apollo.file("markers/new", "");
    apollo.file("markers/go", "");
    let resumed = apollo.args(&["run"]).run();
    resumed.code(0);
    assert_eq!(apollo.run_ids().len(), 1, "{}", resumed.stdout);
    assert_eq!((apollo.count("if_new"), apollo.count("flaky")), (1, 2));
}

#[test]
fn a_when_command_runs_in_the_units_workdir_with_its_env() {
    let mut apollo = Apollo::new();
    apollo.file("sub/ready", "");
    apollo.config(
        r#"units:
  - name: here
    workdir: sub
    env: {WANTED: ready}
    when: {command: test -e "$WANTED"}
    execute: touch ran
"#,
    );
    apollo.args(&["run"]).run().code(0);
    assert!(apollo.path("sub/ran").exists());
}

/// `stats` counts the runs in which a unit ran: one its `when: {command}` skipped did not (as
/// one whose `when:` expression was false), and deciding it again on a resume is no retry
/// (issue 35; tests/e2e/agreement.rs seed 2).
#[test]
fn stats_counts_no_run_or_retry_of_a_unit_its_when_command_skipped() {
    let mut apollo = Apollo::new();
    apollo.config(
        r#"units:
  - name: if_new
    when: {command: test -e markers/new}
    execute: bin/count if_new
  - name: flaky
    execute: bin/count flaky && test -e markers/go
"#,
    );
    apollo.args(&["run"]).run().code(1);
    apollo.file("markers/go", "");
    apollo.args(&["run"]).run().code(0); // the resume decides `if_new` again: false
    apollo.file("markers/new", "");
    apollo.args(&["run", "--fresh"]).run().code(0);
    assert_eq!(apollo.count("if_new"), 1);
    let stats = apollo.args(&["stats", "--format", "json"]).run();
    stats.code(0);
    let stats: serde_json::Value = serde_json::from_str(&stats.stdout).unwrap();
    let if_new = (stats["units"].as_array().unwrap().iter())
        .find(|unit| unit["unit"] == "if_new")
        .unwrap();
    assert_eq!(
        (&if_new["runs"], &if_new["retry_rate"], &if_new["samples"]),
        (
            &serde_json::json!(1),
            &serde_json::json!(0.0),
            &serde_json::json!(1)
        ),
        "{stats:#}"
    );
}

#[test]
fn a_when_command_that_cannot_start_fails_the_unit_rather_than_skipping_it() {
    let mut apollo = Apollo::new();
    apollo.config(
        r#"units:
  - name: broken
    when: {command: [./no-such-condition]}
    execute: bin/count broken
  - name: after
    deps: [broken]
    execute: bin/count after
"#,
    );
    let run = apollo.args(&["run"]).run();
    run.code(1);
    assert_eq!((apollo.count("broken"), apollo.count("after")), (0, 0));
    let finished = records(&apollo, "unit_finished");
    assert_eq!(finished[0]["status"], "failed", "{}", apollo.journal_text());
    assert_eq!(finished[0]["failed_phase"], "when");
    assert!(
        records(&apollo, "unit_skipped")
            .iter()
            .all(|skipped| skipped["reason"] != "when"),
        "{}",
        apollo.journal_text()
    );
}

#[test]
fn check_plan_marks_a_false_when_expression_skipped_and_a_command_as_decided_at_run() {
    let mut apollo = Apollo::new();
    apollo.config(
        r#"params:
  region: eu
units:
  - name: only_us
    when: ${params.region} == "us"
    execute: bin/count only_us
  - name: if_new
    when: {command: test -e markers/new}
    execute: bin/count if_new
  - name: always
    execute: bin/count always
"#,
    );
    let check = apollo.args(&["check", "--plan"]).run();
    check.code(0);
    assert!(
        check
            .stdout
            .contains(r#"only_us (skipped: when: ${params.region} == "us" (eu == "us") is false)"#),
        "{}",
        check.stdout
    );
    assert!(
        check
            .stdout
            .contains("if_new (runs if `test -e markers/new` succeeds)"),
        "{}",
        check.stdout
    );
    let json = apollo.args(&["check", "--plan", "--format", "json"]).run();
    json.code(0);
    let document: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        document["when"]["only_us"]["skipped"], true,
        "{}",
        json.stdout
    );
    assert_eq!(document["when"]["if_new"]["command"], "test -e markers/new");
    let dry = apollo.args(&["run", "--dry-run"]).run();
    assert!(
        dry.stdout
            .contains("runs if `test -e markers/new` succeeds"),
        "{}",
        dry.stdout
    );
}

#[test]
fn a_false_when_command_on_slurm_is_apollos_skip_too() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(&PIPELINE.replace(
        "    execute: bin/count if_new\n",
        "    executor: slurm\n    execute: bin/count if_new\n",
    ));
    let run = apollo.args(&["run"]).run();
    assert_skipped_by_its_condition(&mut apollo, &run);
    apollo.file("markers/new", "");
    apollo.args(&["run"]).run().code(0);
    assert_eq!((apollo.count("if_new"), apollo.count("report")), (1, 2));
}
