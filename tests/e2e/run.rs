//! Running: order, failures, retries, keep-going, self-skip, dry run, explain, locking.

use crate::support::Apollo;

#[test]
fn units_run_once_each_in_dependency_order() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: c
    deps: [b]
    execute: bin/count c && cat out/b > out/c
  - name: a
    execute: mkdir -p out && bin/count a && echo a > out/a
  - name: b
    deps: [a]
    execute: bin/count b && cat out/a > out/b
",
    );
    apollo.args(&["run"]).run().code(0);
    assert_eq!(
        (apollo.count("a"), apollo.count("b"), apollo.count("c")),
        (1, 1, 1)
    );
    assert_eq!(
        std::fs::read_to_string(apollo.path("out/c")).unwrap(),
        "a\n"
    );
    apollo.assert_no_processes_left();
}

#[test]
fn a_failure_skips_downstream_and_keep_going_runs_the_rest() {
    let config = "max_parallel: 1
units:
  - name: bad
    execute: bin/count bad && exit 3
  - name: after_bad
    deps: [bad]
    execute: bin/count after_bad
  - name: other
    execute: bin/count other
";
    let mut apollo = Apollo::new();
    apollo.config(config);
    let output = apollo.args(&["run"]).run();
    output.code(1);
    assert!(
        output.stdout.contains("failed: bad (attempt 1)"),
        "{}",
        output.stdout
    );
    assert!(
        output.stdout.contains("logs: "),
        "the summary says where the logs are: {}",
        output.stdout
    );
    assert_eq!(
        (
            apollo.count("bad"),
            apollo.count("after_bad"),
            apollo.count("other")
        ),
        (1, 0, 0)
    );

    let mut apollo = Apollo::new();
    apollo.config(config);
    apollo.args(&["run", "--keep-going"]).run().code(1);
    assert_eq!(
        (
            apollo.count("bad"),
            apollo.count("after_bad"),
            apollo.count("other")
        ),
        (1, 0, 1)
    );
}

#[test]
fn retries_run_prepare_execute_and_cleanup_in_every_attempt() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: flaky
    retries: 2
    retry_delay: 10ms
    prepare: bin/count flaky
    execute: bin/count flaky && test \"$APOLLO_ATTEMPT\" -ge 2
    cleanup: bin/count flaky
",
    );
    apollo.args(&["run"]).run().code(0);
    let lines = std::fs::read_to_string(apollo.path("counts/flaky")).unwrap();
    assert_eq!(
        lines,
        "attempt=1 phase=prepare\nattempt=1 phase=execute\nattempt=1 phase=cleanup\n\
         attempt=2 phase=prepare\nattempt=2 phase=execute\nattempt=2 phase=cleanup\n"
    );
}

#[test]
fn exit_77_skips_the_unit_and_satisfies_its_dependents() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: maybe
    execute: bin/count maybe && exit 77
  - name: after
    deps: [maybe]
    execute: bin/count after
",
    );
    let output = apollo.args(&["run"]).run();
    output.code(0);
    assert!(
        output.stdout.contains("skipped itself"),
        "{}",
        output.stdout
    );
    assert_eq!(apollo.count("after"), 1);
    assert!(apollo.journal_text().contains(r#""status":"skipped""#));
}

#[test]
fn a_declared_output_that_is_missing_fails_the_unit() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: lazy
    execute: 'true'
    outputs: [out/never-written]
",
    );
    let output = apollo.args(&["run"]).run();
    output.code(1);
    assert!(
        output.stdout.contains("declared output is missing"),
        "{}",
        output.stdout
    );
}

#[test]
fn an_invalid_config_is_refused_before_anything_runs() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: a\n    execute: bin/count a\n    deps: [nope]\n");
    let output = apollo.args(&["run"]).run();
    output.code(2);
    assert!(output.stderr.contains("nope"), "{}", output.stderr);
    assert_eq!(apollo.count("a"), 0);
    assert!(apollo.run_ids().is_empty());
}

#[test]
fn a_second_apollo_on_the_same_state_dir_is_refused_at_once_naming_the_holder() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: slow\n    execute: bin/block slow\n");
    let first = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("slow.started");
    let second = apollo.args(&["run"]).run();
    second.code(4);
    assert!(
        second.stderr.contains(&first.pid().to_string()),
        "names the holder's pid: {}",
        second.stderr
    );
    apollo.release("slow.release");
    first.wait().code(0);
    apollo.assert_no_processes_left();
}

#[test]
fn dry_run_and_explain_say_why_each_unit_runs_or_not() {
    let mut apollo = Apollo::new();
    apollo.config(
        "max_parallel: 1
units:
  - name: a
    execute: bin/count a
  - name: b
    deps: [a]
    execute: bin/count b && test -e go
",
    );
    apollo.args(&["run"]).run().code(1);
    let plan = apollo.args(&["run", "--dry-run"]).run();
    plan.code(0);
    assert!(plan.stdout.contains("would resume run"), "{}", plan.stdout);
    assert!(plan.stdout.contains("skip  a"), "{}", plan.stdout);
    assert!(plan.stdout.contains("inputs unchanged"), "{}", plan.stdout);
    assert!(plan.stdout.contains("run   b"), "{}", plan.stdout);
    assert_eq!(
        (apollo.count("a"), apollo.count("b")),
        (1, 1),
        "a dry run runs nothing"
    );

    apollo.file("go", "");
    let explained = apollo.args(&["run", "--explain"]).run();
    explained.code(0);
    assert!(
        explained.stdout.contains("attempt 1 did not succeed"),
        "{}",
        explained.stdout
    );
    assert_eq!((apollo.count("a"), apollo.count("b")), (1, 2));
}

#[test]
fn a_timeout_kills_the_whole_process_group_and_apollo_does_not_hang() {
    let mut apollo = Apollo::new();
    // The unit forks a grandchild that holds stdout open and would block forever.
    apollo.config(
        "units:
  - name: stuck
    timeout: 500ms
    kill_grace: 100ms
    execute: (bin/block forever &) ; bin/block stuck
",
    );
    let output = apollo.args(&["run"]).run();
    output.code(1);
    assert!(output.stdout.contains("timed out"), "{}", output.stdout);
    apollo.assert_no_processes_left();
}

#[test]
fn a_process_that_left_its_group_does_not_outlive_its_unit() {
    let mut apollo = Apollo::new();
    // `setsid` puts the background process in a session (and group) of its own: the
    // attempt's group kill cannot reach it; the attempt's end does (apollo is its subreaper),
    // so nothing is left for the end-of-run sweep.
    apollo.config(
        "units:
  - name: escape
    execute: setsid bin/block escaped & bin/count escape
",
    );
    let output = apollo.args(&["run"]).run();
    output.code(0);
    assert!(
        !output.stderr.contains("outside their process groups"),
        "{}",
        output.stderr
    );
    apollo.assert_no_processes_left();
}

#[test]
fn output_files_exist_only_for_attempts_that_wrote_ran_a_while_or_are_not_idempotent() {
    let mut apollo = Apollo::new();
    // `waits` finishes only once apollo has named its (still empty) output file, which it
    // does after the attempt has run for 100 ms; 60 s is the safety net.
    apollo.config(
        r#"max_parallel: 1
units:
  - name: quiet
    execute: "true"
  - name: loud
    execute: echo hello; echo oops >&2
  - name: waits
    execute: |
      log=.apollo/runs/$APOLLO_RUN_ID/units/$APOLLO_UNIT/$APOLLO_ATTEMPT/stdout
      i=0
      while [ ! -e "$log" ]; do
        i=$((i+1)); [ $i -gt 6000 ] && exit 1
        sleep 0.01
      done
  - name: careful
    idempotent: false
    execute: "true"
"#,
    );
    apollo.args(&["run"]).run().code(0);
    let run = apollo.run_ids().pop().unwrap();
    let units = apollo.path(&format!(".apollo/runs/{run}/units"));
    // A quick, silent attempt leaves nothing (unless the machine is so loaded that `true`
    // took 100 ms; the exact rule is tested in apollo-exec without a clock).
    let quiet = units.join("quiet/1/stdout");
    assert!(!quiet.exists() || std::fs::read(&quiet).unwrap().is_empty());
    assert_eq!(
        std::fs::read_to_string(units.join("loud/1/stdout")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(units.join("loud/1/stderr")).unwrap(),
        "oops\n"
    );
    assert_eq!(std::fs::read(units.join("waits/1/stdout")).unwrap(), b"");
    assert!(units.join("careful/1/stdout").exists());

    let logs = apollo.args(&["logs", "latest", "quiet"]).run();
    logs.code(0);
    assert_eq!(logs.stdout, "");
    if !quiet.exists() {
        assert!(
            logs.stderr
                .contains("attempt 1 of `quiet` wrote nothing to stdout"),
            "{}",
            logs.stderr
        );
    }
    let logs = apollo.args(&["logs", "latest", "loud", "--stderr"]).run();
    logs.code(0);
    assert_eq!(logs.stdout, "oops\n");
}

#[test]
fn the_summary_of_a_silent_failure_says_it_wrote_nothing() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: bad
    execute: exit 3
",
    );
    let output = apollo.args(&["run"]).run();
    output.code(1);
    assert!(
        output.stdout.contains("logs: none (it wrote nothing)"),
        "{}",
        output.stdout
    );
}

/// In a container, apollo's session leader often lives outside its pid namespace, so
/// `getsid` answers 0 (CI machines run like this). The end-of-attempt sweep for escaped
/// processes once asserted a positive session id and failed every attempt there.
#[test]
fn a_run_in_a_pid_namespace_whose_session_leader_is_outside_it_works() {
    const UNSHARE: [&str; 4] = ["unshare", "--pid", "--fork", "--mount-proc"];
    #[allow(clippy::disallowed_methods)] // Probing for the tool the test needs.
    let unshare_works = std::process::Command::new(UNSHARE[0])
        .args(&UNSHARE[1..])
        .arg("true")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !apollo_core::testing::require(
        unshare_works,
        "`unshare --pid --fork --mount-proc` (util-linux, run as root)",
        "apt-get install util-linux and run the tests as root; CI runs as root",
    ) {
        return;
    }
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: a
    execute: bin/count a && (sleep 0.01 &)
  - name: b
    deps: [a]
    execute: bin/count b
",
    );
    let output = apollo.args(&["run"]).run_under(&UNSHARE);
    output.code(0);
    assert_eq!((apollo.count("a"), apollo.count("b")), (1, 1));
    apollo.assert_no_processes_left();
}

/// A run lets the config's text go once loaded (8 MB held for a whole run of 100,000 units),
/// and still records the hash of the text it ran, from a fresh parse and from the parse cache.
#[test]
fn run_started_records_the_hash_of_the_config_text() {
    let mut apollo = Apollo::new();
    let yaml = "units:\n  - name: a\n    execute: 'true'\n";
    apollo.config(yaml);
    apollo.args(&["run"]).run().code(0);
    apollo.args(&["run"]).run().code(0);
    let expected = format!(
        "\"config_hash\":\"{}\"",
        apollo_core::hash::sha256_hex(yaml.as_bytes())
    );
    let journal = apollo.journal_text();
    assert_eq!(
        journal.matches(&expected).count(),
        2,
        "both runs record {expected}: {journal}"
    );
}
