//! "Non-idempotent means a human decides" (DESIGN §7, §17): a non-idempotent unit cut off for
//! any reason, or done but with changed inputs or outputs, stops the next run with exit 5 —
//! swept first — until a human decides; a done unit whose declared output went missing runs
//! again, and `--explain` says why.

use crate::support::Apollo;

#[test]
fn a_non_idempotent_unit_interrupted_by_sigint_needs_a_verdict_and_rerun_allows_it() {
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
    running.signal(libc::SIGINT);
    running.wait().code(130);
    apollo.release("deploy.release");

    let refused = apollo.args(&["run"]).run();
    refused.code(5);
    for part in [
        "unit `deploy` (attempt 1)",
        "interrupted",
        "apollo mark",
        "--succeeded",
        "--failed",
    ] {
        assert!(refused.stderr.contains(part), "{part}: {}", refused.stderr);
    }
    assert_eq!(apollo.count("deploy"), 1, "nothing ran");
    // An interrupted attempt has a recorded outcome, yet it is what a verdict is for: no
    // --force needed.
    apollo
        .args(&["mark", "latest", "deploy", "--rerun"])
        .run()
        .code(0);
    apollo.args(&["run"]).run().code(0);
    assert_eq!((apollo.count("deploy"), apollo.count("notify")), (2, 1));
}

#[test]
fn a_non_idempotent_unit_cut_off_by_its_timeout_is_not_retried_and_needs_a_verdict() {
    let mut apollo = Apollo::new();
    // The timeout is what is tested: it fires while `bin/block` waits for a marker that
    // never comes.
    apollo.config(
        "units:
  - name: migrate
    idempotent: false
    retries: 2
    timeout: 1s
    kill_grace: 1s
    execute: bin/count migrate && bin/block migrate
",
    );
    apollo.args(&["run"]).run().code(1);
    assert_eq!(
        apollo.count("migrate"),
        1,
        "a timed-out non-idempotent unit is not retried"
    );
    apollo.assert_no_processes_left();

    let refused = apollo.args(&["run"]).run();
    refused.code(5);
    assert!(
        refused.stderr.contains("unit `migrate` (attempt 1)") && refused.stderr.contains("timeout"),
        "{}",
        refused.stderr
    );
    apollo
        .args(&["mark", "latest", "migrate", "--succeeded"])
        .run()
        .code(0);
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("migrate"), 1);
}

#[test]
fn a_done_non_idempotent_unit_is_not_rerun_for_a_changed_env_or_upstream_output() {
    let mut apollo = Apollo::new();
    apollo.file("in/data.txt", "v1\n");
    let config = |env: &str| {
        format!(
            "env: {{ {env} }}
units:
  - name: extract
    inputs: [in/data.txt]
    outputs: [out/extract]
    execute: mkdir -p out && bin/count extract && cp in/data.txt out/extract
  - name: send
    idempotent: false
    deps: [extract]
    execute: bin/count send
  - name: gate
    deps: [send]
    execute: bin/count gate && test -e go
"
        )
    };
    apollo.config(&config("TZ: UTC"));
    apollo.args(&["run"]).run().code(1);
    apollo.file("go", "");

    // An unrelated pipeline env var: `send` would be re-executed by a plain rerun.
    apollo.config(&config("TZ: UTC, UNRELATED: '1'"));
    let refused = apollo.args(&["run"]).run();
    refused.code(5);
    for part in ["unit `send`", "env UNRELATED added", "--rerun"] {
        assert!(refused.stderr.contains(part), "{part}: {}", refused.stderr);
    }
    let dry_run = apollo.args(&["run", "--dry-run"]).run();
    dry_run.code(0);
    assert!(
        dry_run.stdout.contains("stops for a human"),
        "{}",
        dry_run.stdout
    );
    assert_eq!(
        (
            apollo.count("extract"),
            apollo.count("send"),
            apollo.count("gate")
        ),
        (1, 1, 1)
    );

    // An upstream output: `extract` reruns (idempotent) with new data, then the run stops
    // before `send`.
    apollo.config(&config("TZ: UTC"));
    apollo.file("in/data.txt", "v2\n");
    let refused = apollo.args(&["run"]).run();
    refused.code(5);
    assert!(
        refused.stderr.contains("upstream extract output changed"),
        "{}",
        refused.stderr
    );
    assert_eq!((apollo.count("extract"), apollo.count("send")), (2, 1));

    // The human allows exactly `send` to run again.
    let run_id = apollo.run_ids().remove(0);
    apollo
        .args(&[
            "mark",
            &run_id,
            "send",
            "--rerun",
            "--note",
            "resend is fine",
        ])
        .run()
        .code(0);
    apollo.args(&["run"]).run().code(0);
    assert_eq!(
        (
            apollo.count("extract"),
            apollo.count("send"),
            apollo.count("gate")
        ),
        (2, 2, 2)
    );
}

#[test]
fn on_input_change_rerun_reruns_a_changed_non_idempotent_unit() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: send
    idempotent: false
    env: { TARGET: a }
    execute: bin/count send
  - name: gate
    deps: [send]
    execute: bin/count gate && test -e go
",
    );
    apollo.args(&["run"]).run().code(1);
    apollo.file("go", "");
    apollo.config(
        "units:
  - name: send
    idempotent: false
    env: { TARGET: b }
    execute: bin/count send
  - name: gate
    deps: [send]
    execute: bin/count gate && test -e go
",
    );
    apollo
        .args(&["run", "--on-input-change=rerun"])
        .run()
        .code(0);
    assert_eq!((apollo.count("send"), apollo.count("gate")), (2, 2));
}

#[test]
fn a_done_unit_whose_declared_output_was_deleted_runs_again_and_explain_says_why() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: make_csv
    outputs: [data/x.csv]
    execute: mkdir -p data && bin/count make_csv && echo a,b > data/x.csv
  - name: use_csv
    deps: [make_csv]
    execute: bin/count use_csv && test -e go && cat data/x.csv
",
    );
    apollo.args(&["run"]).run().code(1);
    std::fs::remove_file(apollo.path("data/x.csv")).unwrap();
    apollo.file("go", "");

    let dry_run = apollo.args(&["run", "--dry-run"]).run();
    dry_run.code(0);
    assert!(
        dry_run.stdout.contains("output data/x.csv is missing"),
        "{}",
        dry_run.stdout
    );
    let explained = apollo.args(&["run", "--explain"]).run();
    explained.code(0);
    assert!(
        explained.stdout.contains("output data/x.csv is missing"),
        "{}",
        explained.stdout
    );
    assert_eq!((apollo.count("make_csv"), apollo.count("use_csv")), (2, 2));
}

#[test]
fn strays_of_a_cut_off_non_idempotent_unit_are_swept_before_exit_5() {
    let mut apollo = Apollo::new();
    // `setsid` takes the background process out of the unit's process group: the guard's
    // group kill cannot reach it when apollo is SIGKILLed.
    apollo.config(
        "units:
  - name: deploy
    idempotent: false
    execute: setsid bin/block escaped & bin/count deploy && bin/block deploy
",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("deploy.started");
    apollo.wait_for_marker("escaped.started");
    running.kill9();

    let refused = apollo.args(&["run"]).run();
    refused.code(5);
    let swept = refused
        .stderr
        .find("left running by the previous apollo")
        .unwrap_or_else(|| panic!("no sweep before exit 5: {}", refused.stderr));
    let verdict = refused.stderr.find("unit `deploy`").unwrap();
    assert!(swept < verdict, "{}", refused.stderr);
    apollo.release("deploy.release");
    apollo.release("escaped.release");
    apollo.assert_no_processes_left();
}

#[test]
fn a_non_idempotent_local_unit_killed_by_a_signal_apollo_did_not_send_is_not_retried_and_needs_a_verdict()
 {
    let mut apollo = Apollo::new();
    // The unit's shell kills itself as the OOM killer or an operator's `kill -9` would.
    apollo.config(
        "units:
  - name: charge
    idempotent: false
    retries: 2
    execute: 'bin/count charge; kill -9 $$'
  - name: receipt
    deps: [charge]
    execute: bin/count receipt
",
    );
    let first = apollo.args(&["run"]).run();
    first.code(5);
    assert!(
        first.stderr.contains("signal apollo did not send"),
        "{}",
        first.stderr
    );
    assert_eq!(apollo.count("charge"), 1, "not retried");
    let again = apollo.args(&["run"]).run();
    again.code(5);
    assert!(again.stderr.contains("apollo mark"), "{}", again.stderr);
    assert_eq!((apollo.count("charge"), apollo.count("receipt")), (1, 0));
    apollo
        .args(&["mark", "latest", "charge", "--succeeded"])
        .run()
        .code(0);
    apollo.args(&["run"]).run().code(0);
    assert_eq!((apollo.count("charge"), apollo.count("receipt")), (1, 1));
}

#[test]
fn an_idempotent_local_unit_killed_by_a_signal_is_retried() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: build
    retries: 1
    retry_delay: 0s
    execute: 'bin/count build; [ \"$APOLLO_ATTEMPT\" -ge 2 ] || kill -9 $$'
",
    );
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("build"), 2);
}
