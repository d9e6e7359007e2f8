//! Crash and resume: apollo SIGKILLed during a unit, between units, during a retry backoff;
//! input changes; non-idempotent units needing a human verdict.

use crate::support::Apollo;

#[test]
fn killed_during_a_unit_resumes_without_redoing_recorded_work() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: a
    execute: bin/count a
  - name: b
    deps: [a]
    execute: bin/count b && bin/block b
  - name: c
    deps: [b]
    execute: bin/count c
",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("b.started");
    running.kill9();
    // The guard process killed the unit's whole group when its supervisor died.
    apollo.assert_no_processes_left();

    apollo.release("b.release");
    let resumed = apollo.args(&["run"]).run();
    resumed.code(0);
    assert!(
        resumed.stdout.contains("resuming run"),
        "{}",
        resumed.stdout
    );
    assert!(
        resumed.stdout.contains("1 of 3 units already done"),
        "{}",
        resumed.stdout
    );
    // Counted, not listed: a resume of 10,000 done units says so in one line, not 10,000
    // (`--explain` or `-v` lists them).
    assert!(
        !resumed.stdout.contains("succeeded earlier"),
        "{}",
        resumed.stdout
    );
    assert!(
        resumed.stdout.contains("(1 already done)"),
        "{}",
        resumed.stdout
    );
    assert_eq!(
        (apollo.count("a"), apollo.count("b"), apollo.count("c")),
        (1, 2, 1)
    );
    assert_eq!(apollo.run_ids().len(), 1, "the same run was resumed");
    apollo.args(&["verify"]).run().code(0);
}

#[test]
fn killed_between_units_resumes_with_the_next_one() {
    // One slot: `a` finishes, `blocker` holds the slot, `b` (after a) has not started.
    let mut apollo = Apollo::new();
    apollo.config(
        "max_parallel: 1
units:
  - name: a
    execute: bin/count a
  - name: blocker
    execute: bin/count blocker && bin/block blocker
  - name: b
    deps: [a]
    execute: bin/count b
",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("blocker.started");
    running.kill9();
    apollo.assert_no_processes_left();
    assert_eq!(apollo.count("b"), 0);

    apollo.release("blocker.release");
    apollo.args(&["run"]).run().code(0);
    assert_eq!(
        (
            apollo.count("a"),
            apollo.count("blocker"),
            apollo.count("b")
        ),
        (1, 2, 1)
    );
}

#[test]
fn killed_during_a_retry_backoff_resumes_with_a_new_attempt() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: flaky
    retries: 3
    retry_delay: 1h
    execute: bin/count flaky && test \"$APOLLO_ATTEMPT\" -ge 2
  - name: after
    deps: [flaky]
    execute: bin/count after
",
    );
    let running = apollo.args(&["run"]).spawn();
    // Attempt 1 failed and is recorded: apollo now waits an hour before attempt 2.
    apollo.wait_for_journal(r#""kind":"unit_finished","unit":"flaky","attempt":1"#);
    running.kill9();

    let resumed = apollo.args(&["run"]).run();
    resumed.code(0);
    let lines = std::fs::read_to_string(apollo.path("counts/flaky")).unwrap();
    assert_eq!(lines, "attempt=1 phase=execute\nattempt=2 phase=execute\n");
    assert_eq!(apollo.count("after"), 1);
}

#[test]
fn an_input_change_reruns_the_unit_and_downstream_only_if_its_output_changed() {
    let mut apollo = Apollo::new();
    apollo
        .file("in/copied.txt", "v1\n")
        .file("in/ignored.txt", "v1\n");
    apollo.config(
        "max_parallel: 1
units:
  - name: copy
    inputs: [in/copied.txt]
    outputs: [out/copy]
    execute: mkdir -p out && bin/count copy && cp in/copied.txt out/copy
  - name: after_copy
    deps: [copy]
    execute: bin/count after_copy
  - name: constant
    inputs: [in/ignored.txt]
    outputs: [out/constant]
    execute: mkdir -p out && bin/count constant && echo same > out/constant
  - name: after_constant
    deps: [constant]
    execute: bin/count after_constant
  - name: gate
    execute: bin/count gate && test -e go
",
    );
    apollo.args(&["run", "--keep-going"]).run().code(1);
    apollo
        .file("in/copied.txt", "v2\n")
        .file("in/ignored.txt", "v2\n")
        .file("go", "");

    let explained = apollo.args(&["run", "--explain"]).run();
    explained.code(0);
    assert!(
        explained
            .stdout
            .contains("input file in/copied.txt changed"),
        "{}",
        explained.stdout
    );
    assert!(
        explained.stdout.contains("upstream copy output changed"),
        "{}",
        explained.stdout
    );
    assert!(
        explained
            .stdout
            .lines()
            .any(|line| line.contains("after_constant")
                && line.contains("succeeded earlier in this run (attempt 1), inputs unchanged")),
        "{}",
        explained.stdout
    );
    assert_eq!((apollo.count("copy"), apollo.count("after_copy")), (2, 2));
    // `constant` reran (its input changed) but wrote the same output: its dependent did not.
    assert_eq!(
        (apollo.count("constant"), apollo.count("after_constant")),
        (2, 1)
    );
    assert_eq!(apollo.count("gate"), 2);
}

#[test]
fn on_input_change_fail_stops_before_running_and_says_what_changed() {
    let mut apollo = Apollo::new();
    apollo.file("in/data.txt", "v1\n");
    apollo.config(
        "units:
  - name: load
    inputs: [in/data.txt]
    execute: bin/count load
  - name: gate
    deps: [load]
    execute: bin/count gate && test -e go
",
    );
    apollo.args(&["run"]).run().code(1);
    apollo.file("in/data.txt", "v2\n").file("go", "");
    let output = apollo.args(&["run", "--on-input-change=fail"]).run();
    output.code(5);
    assert!(
        output.stderr.contains("input file in/data.txt changed"),
        "{}",
        output.stderr
    );
    assert_eq!((apollo.count("load"), apollo.count("gate")), (1, 1));
}

#[test]
fn a_non_idempotent_unit_in_flight_is_refused_until_a_human_marks_it() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: deploy
    idempotent: false
    execute: bin/count deploy && bin/block deploy
  - name: notify
    deps: [deploy]
    execute: bin/count notify
",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("deploy.started");
    running.kill9();
    apollo.assert_no_processes_left();
    apollo.release("deploy.release");

    let refused = apollo.args(&["run"]).run();
    refused.code(5);
    assert!(
        refused.stderr.contains("unit `deploy` (attempt 1)"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("apollo mark"), "{}", refused.stderr);
    assert_eq!(apollo.count("deploy"), 1, "nothing ran");

    let run_id = apollo.run_ids().remove(0);
    apollo
        .args(&[
            "mark",
            &run_id,
            "deploy",
            "--succeeded",
            "--note",
            "checked by hand",
        ])
        .run()
        .code(0);
    apollo.args(&["run"]).run().code(0);
    assert_eq!((apollo.count("deploy"), apollo.count("notify")), (1, 1));
    // A recorded outcome is not overridden by accident.
    let refused = apollo.args(&["mark", "latest", "deploy", "--failed"]).run();
    refused.code(2);
    assert!(refused.stderr.contains("--force"), "{}", refused.stderr);
}

#[test]
fn a_unit_marked_failed_runs_again() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: migrate
    idempotent: false
    execute: bin/count migrate && bin/block migrate
",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("migrate.started");
    running.kill9();
    apollo.release("migrate.release");
    apollo.args(&["run"]).run().code(5);
    apollo
        .args(&["mark", "latest", "migrate", "--failed"])
        .run()
        .code(0);
    apollo.args(&["run"]).run().code(0);
    let lines = std::fs::read_to_string(apollo.path("counts/migrate")).unwrap();
    assert_eq!(lines, "attempt=1 phase=execute\nattempt=2 phase=execute\n");
}

#[test]
fn fresh_starts_a_new_run_and_resume_of_a_finished_run_has_nothing_to_do() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: a\n    execute: bin/count a\n");
    apollo.args(&["run"]).run().code(0);
    let output = apollo.args(&["resume", "latest"]).run();
    output.code(0);
    assert!(
        output.stdout.contains("nothing to resume"),
        "{}",
        output.stdout
    );
    apollo.args(&["run", "--fresh"]).run().code(0);
    assert_eq!(apollo.count("a"), 2);
    assert_eq!(apollo.run_ids().len(), 2);
}

#[test]
fn a_failed_fsync_of_run_finished_is_resumed_not_redone() {
    // Fail the N-th fsync for N = 1, 2, ... until a run gets through: the last N that failed
    // the run hit the fsync of `run_finished`, after the unit's success was acknowledged.
    let mut last_failed = None;
    for nth in 1..=20 {
        let mut apollo = Apollo::new();
        apollo.config("units:\n  - name: a\n    execute: bin/count a\n");
        let fault = format!("fsync:{nth}:EIO");
        let output = apollo
            .envs(&[("APOLLO_FAULTS", fault.as_str())])
            .args(&["run"])
            .run();
        if output.code == Some(0) {
            break;
        }
        output.code(6);
        assert!(output.stderr.contains("journal"), "{}", output.stderr);
        last_failed = Some(apollo);
    }
    let mut apollo = last_failed.expect("some fsync failed the run");
    let resumed = apollo.envs(&[]).args(&["run"]).run();
    resumed.code(0);
    assert!(
        resumed.stdout.contains("resuming run"),
        "the unacknowledged run_finished was cut: {}",
        resumed.stdout
    );
    assert_eq!(
        apollo.count("a"),
        1,
        "the unit whose success was acknowledged did not run again"
    );
    assert_eq!(apollo.run_ids().len(), 1);
}

/// A unit cut off when apollo was killed, which the resume stops before starting again (a
/// fail-fast stop), is still cut off in the resume's summary, its hook summary and its counts,
/// as in `show`: it did start in this run, so it is not "not started" (issue 35; found by
/// tests/e2e/agreement.rs).
#[test]
fn a_unit_cut_off_by_a_kill_and_not_restarted_is_cut_off_in_the_resumes_summary() {
    let mut apollo = Apollo::new();
    apollo.file("codes/a", "0").file("codes/c", "1");
    apollo.config(
        r#"on_finish: cp "$APOLLO_SUMMARY_JSON" summary.json
units:
  - name: a
    inputs: [codes/a]
    execute: bin/block "a$(cat codes/a)"; exit "$(cat codes/a)"
  - name: c
    inputs: [codes/c]
    execute: bin/block "c$(cat codes/c)"
  - name: b
    deps: [c]
    execute: bin/block b
"#,
    );
    apollo.release("a0.release");
    apollo.release("c1.release");
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("b.started");
    running.kill9();
    apollo.assert_no_processes_left();

    // The resume: `a` and `c` (both changed) run; `a` fails while `c` holds `b` back, and `c`
    // ends only once that failure is recorded: the fail-fast stop comes before `b`'s turn.
    apollo.file("codes/a", "1").file("codes/c", "2");
    apollo.release("b.release");
    let resuming = apollo.args(&["run", "--format", "json"]).spawn();
    apollo.wait_for_marker("a1.started");
    apollo.wait_for_marker("c2.started");
    apollo.release("a1.release");
    apollo.wait_for_journal(r#""unit":"a","attempt":2,"status":"failed""#);
    apollo.release("c2.release");
    let resumed = resuming.wait();
    resumed.code(1);
    let summary = resumed.stdout.lines().last().unwrap_or_default();
    let summary: serde_json::Value = serde_json::from_str(summary).unwrap();
    let b = |units: &serde_json::Value, name_key: &str| {
        (units.as_array().unwrap().iter())
            .find(|unit| unit[name_key] == "b")
            .map(|unit| unit["status"].clone())
    };
    assert_eq!(
        b(&summary["units"], "unit"),
        Some("cut_off".into()),
        "{summary}"
    );
    let hook = std::fs::read_to_string(apollo.path("summary.json")).unwrap();
    let hook: serde_json::Value = serde_json::from_str(&hook).unwrap();
    assert_eq!(b(&hook["units"], "name"), Some("cut_off".into()), "{hook}");
    let show = apollo.args(&["show", "latest", "--format", "json"]).run();
    let show: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(b(&show["units"], "unit"), Some("cut_off".into()), "{show}");
    assert_eq!(summary["counts"], show["counts"], "{summary}\n{show}");
    let states = crate::agreement::states;
    assert_eq!(
        states(&summary["units"], "unit", "status"),
        states(&show["units"], "unit", "status"),
        "{summary}\n{show}"
    );
}
