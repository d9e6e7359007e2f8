//! The operator's view (issue 16): why a unit failed shown where people look, state found
//! from a subfolder and read without write access, and a live run seen from another shell.
#![allow(clippy::disallowed_methods)] // Probes whether a private mount namespace can be made.

use crate::support::Apollo;

const FAILING: &str = "units:
  - name: fetch
    execute: echo fetched
  - name: report
    deps: [fetch]
    execute: |
      echo loading; echo Traceback; echo 'ValueError: bad row 7' >&2; exit 1
";

#[test]
fn a_failed_unit_shows_the_end_of_its_stderr_under_failed_and_in_the_summary() {
    let mut apollo = Apollo::new();
    apollo.config(FAILING);
    let run = apollo.args(&["run"]).run();
    run.code(1);
    let run_id = apollo.run_ids().pop().unwrap();
    let paste = format!("apollo logs {run_id} report --stderr");
    // Once under the FAILED line, once in the summary.
    assert_eq!(
        run.stdout.matches("│ ValueError: bad row 7").count(),
        2,
        "{}",
        run.stdout
    );
    assert_eq!(run.stdout.matches(&paste).count(), 2, "{}", run.stdout);

    // The pasted command prints the whole stream.
    let logs = apollo.args(&["logs", &run_id, "report", "--stderr"]).run();
    logs.code(0);
    assert_eq!(logs.stdout, "ValueError: bad row 7\n");

    // And in the HTML report, under the unit's row.
    let html = apollo.args(&["replay", "--format", "html"]).run();
    html.code(0);
    assert!(
        html.stdout.contains("<pre>ValueError: bad row 7\n</pre>"),
        "{}",
        html.stdout
    );
}

#[test]
fn logs_of_a_run_prints_every_units_output_prefixed_with_its_name() {
    let mut apollo = Apollo::new();
    apollo.config(FAILING);
    apollo.args(&["run"]).run().code(1);
    let logs = apollo.args(&["logs", "latest"]).run();
    logs.code(0);
    assert_eq!(
        logs.stdout, "fetch  | fetched\nreport | loading\nreport | Traceback\n",
        "{}",
        logs.stderr
    );
}

#[test]
fn read_commands_find_the_state_from_a_subfolder_and_with_config() {
    let mut apollo = Apollo::new();
    apollo.file(
        "p/etl.yaml",
        "units:\n  - name: only\n    execute: echo hi\n",
    );
    apollo.file("p/deep/er/keep", "");
    apollo.args(&["run", "p/etl.yaml"]).run().code(0);

    // From the project folder, `.apollo` is in a subfolder: named, with what to type.
    let runs = apollo.args(&["runs"]).run();
    runs.code(2);
    let checked = apollo.root().join(".apollo");
    assert!(
        runs.stderr.contains(&format!("`{}`", checked.display())),
        "the absolute path checked: {}",
        runs.stderr
    );
    assert!(runs.stderr.contains("p/.apollo"), "{}", runs.stderr);

    // With -c, or from below the folder holding `.apollo`, it is found.
    for args in [
        vec!["runs", "-c", "p/etl.yaml"],
        vec!["replay", "-c", "p/etl.yaml"],
        vec!["show", "latest", "only", "--config", "p/etl.yaml"],
        vec!["verify", "-c", "p/etl.yaml"],
    ] {
        apollo.args(&args).run().code(0);
    }
    let sub = apollo.path("p/deep/er");
    let out = std::process::Command::new(crate::support::apollo_bin())
        .args(["logs", "latest", "only"])
        .current_dir(&sub)
        .env_remove("APOLLO_STATE_DIR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
}

/// Runs `apollo ARGS` in the project folder with its `.apollo` mounted read-only in a private
/// mount namespace (root ignores permission bits, so a read-only mount is the honest test).
fn run_with_read_only_state(apollo: &mut Apollo, args: &[&str]) -> Option<crate::support::Output> {
    let available = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "true"])
        .status()
        .is_ok_and(|status| status.success());
    if !apollo_core::testing::require(
        available,
        "a private mount namespace to mount the state read-only",
        "run as root, or with CAP_SYS_ADMIN, with `unshare` from util-linux",
    ) {
        return None;
    }
    let state = apollo.path(".apollo").display().to_string();
    apollo.args(args);
    Some(apollo.run_under(&[
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mount --bind \"$0\" \"$0\" && mount -o remount,ro,bind \"$0\" && exec \"$@\"",
        &state,
    ]))
}

#[test]
fn runs_and_dry_run_work_on_a_read_only_state_dir_and_a_run_there_is_a_usage_error() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: only\n    execute: echo hi\n  - name: next\n    deps: [only]\n    execute: 'false'\n");
    apollo.args(&["run"]).run().code(1);

    let Some(runs) = run_with_read_only_state(&mut apollo, &["runs"]) else {
        return;
    };
    runs.code(0);
    assert!(runs.stdout.contains("failed"), "{}", runs.stdout);
    let dry = run_with_read_only_state(&mut apollo, &["run", "--dry-run"]).unwrap();
    dry.code(0);
    assert!(dry.stdout.contains("would resume run"), "{}", dry.stdout);
    for read in [
        vec!["replay"],
        vec!["show", "latest", "next"],
        vec!["logs", "latest"],
    ] {
        run_with_read_only_state(&mut apollo, &read)
            .unwrap()
            .code(0);
    }

    let run = run_with_read_only_state(&mut apollo, &["run"]).unwrap();
    run.code(2);
    assert!(
        run.stderr.contains("cannot be created or written") && run.stderr.contains("--state-dir"),
        "{}",
        run.stderr
    );
}

#[test]
fn run_stream_prefixes_each_units_output_before_its_outcome_line() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: fetch\n    execute: |\n      echo one; echo two; echo oops >&2; printf 'no newline'\n  - name: load\n    deps: [fetch]\n    execute: echo loaded\n",
    );
    let run = apollo.args(&["run", "--stream"]).run();
    run.code(0);
    let position = |needle: &str| {
        run.stdout
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} in\n{}", run.stdout))
    };
    assert!(position("fetch | one") < position("fetch | two"));
    assert!(position("fetch | two") < position("ok       fetch"));
    assert!(position("fetch ! oops") < position("ok       fetch"));
    assert!(position("fetch | no newline") < position("ok       fetch"));
    assert!(position("load  | loaded") < position("ok       load"));
}

#[test]
fn a_live_run_reads_as_running_from_a_second_process_and_logs_follow_it() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: slow\n    execute: |\n      echo before; bin/block slow; echo after\n",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("slow.started");
    let pid = format!("apollo pid {}", running.pid());

    let replay = apollo.args(&["replay"]).run();
    replay.code(0);
    assert!(
        replay.stdout.contains("still running") && replay.stdout.contains(&pid),
        "{}",
        replay.stdout
    );
    assert!(!replay.stdout.contains("stopped"), "{}", replay.stdout);
    let show = apollo.args(&["show", "latest", "slow"]).run();
    show.code(0);
    assert!(
        show.stdout.contains("slow of run") && show.stdout.contains(&pid),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains("attempt 1: running"),
        "{}",
        show.stdout
    );
    let runs = apollo.args(&["runs"]).run();
    runs.code(0);
    assert!(
        runs.stdout.contains("running") && runs.stdout.contains(&pid),
        "{}",
        runs.stdout
    );

    // `logs -f` prints what the running attempt wrote so far, follows it until it ends, then
    // exits by itself. Its output goes to a file the test watches: "before" must arrive while
    // the unit still blocks.
    let followed_path = apollo.path("followed.txt");
    let mut follow = std::process::Command::new(crate::support::apollo_bin())
        .args(["logs", "-f", "latest", "slow"])
        .current_dir(apollo.root())
        .env_remove("APOLLO_STATE_DIR")
        .stdout(std::fs::File::create(&followed_path).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + crate::support::SAFETY_TIMEOUT;
    while std::fs::read_to_string(&followed_path).unwrap_or_default() != "before\n" {
        assert!(
            std::time::Instant::now() < deadline,
            "logs -f printed nothing"
        );
        assert!(
            follow.try_wait().unwrap().is_none(),
            "logs -f ended while the unit ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    apollo.release("slow.release");
    running.wait().code(0);
    let status = follow.wait().unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::read_to_string(&followed_path).unwrap(),
        "before\nafter\n"
    );
}

#[test]
fn lanes_never_outnumber_the_workers_on_a_2000_unit_run() {
    let mut apollo = Apollo::new();
    let mut config = String::from("max_parallel: 2\nunits:\n");
    for unit_idx in 0..2000 {
        config.push_str(&format!("  - name: u{unit_idx}\n    execute: 'true'\n"));
    }
    apollo.config(&config);
    apollo.args(&["run", "--durability", "none"]).run().code(0);

    let trace = apollo.args(&["replay", "--format", "chrome-trace"]).run();
    trace.code(0);
    let trace: serde_json::Value = serde_json::from_str(&trace.stdout).unwrap();
    let lanes: std::collections::BTreeSet<u64> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["cat"] == "attempt")
        .map(|event| event["tid"].as_u64().unwrap())
        .collect();
    assert!(
        !lanes.is_empty() && lanes.len() <= 2,
        "lanes {lanes:?} for 2 workers"
    );
    let html = apollo.args(&["replay", "--format", "html"]).run();
    html.code(0);
    let peak = html
        .stdout
        .split("<dt>peak parallelism</dt><dd>")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .and_then(|number| number.trim().parse::<usize>().ok())
        .expect("the HTML report states its peak parallelism");
    assert!((1..=2).contains(&peak), "peak parallelism {peak}");
}

#[test]
fn an_attempt_cut_off_by_a_crash_says_how_long_it_ran_at_least() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: slow\n    execute: bin/block slow\n");
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("slow.started");
    running.kill9();
    apollo.release("slow.release");
    let show = apollo.args(&["show", "latest", "slow"]).run();
    show.code(0);
    assert!(
        show.stdout.contains("attempt 1: cut off after ≥ "),
        "{}",
        show.stdout
    );
    let replay = apollo.args(&["replay"]).run();
    replay.code(0);
    assert!(
        replay.stdout.contains("cut off after ≥ "),
        "{}",
        replay.stdout
    );
    assert!(
        !replay.stdout.contains("still running"),
        "{}",
        replay.stdout
    );
}

#[test]
fn hooks_run_once_at_the_end_with_the_runs_status_and_never_change_it() {
    let mut apollo = Apollo::new();
    apollo.config(
        "on_failure: env | grep '^APOLLO_' | sort > hook-env; cp \"$APOLLO_SUMMARY_JSON\" hook-summary.json\non_finish:\n  execute: echo finishing >&2; exit 3\n  timeout: 10s\nunits:\n  - name: good\n    execute: 'true'\n  - name: bad\n    execute: exit 1\n",
    );
    let failed = apollo.args(&["run"]).run();
    failed.code(1);
    let run_id = apollo.run_ids().pop().unwrap();
    let env = std::fs::read_to_string(apollo.path("hook-env")).unwrap();
    let state = apollo.path(".apollo").display().to_string();
    let env = env.replace(&run_id, "[RUN]").replace(&state, "[STATE]");
    // The run key is a digest of the state directory (a temporary folder) and the run.
    let key = env
        .lines()
        .find_map(|line| line.strip_prefix("APOLLO_RUN_KEY="))
        .expect("APOLLO_RUN_KEY is set")
        .to_owned();
    assert!(
        key.len() == 32 && key.bytes().all(|byte| byte.is_ascii_hexdigit()),
        "{key}"
    );
    let env = env.replace(&key, "[KEY]");
    assert!(
        env.contains("APOLLO_SUMMARY_JSON=[STATE]/"),
        "an absolute path: {env}"
    );
    insta::assert_snapshot!(env);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(apollo.path("hook-summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["status"], "failed");
    assert_eq!(summary["failed_units"], serde_json::json!(["bad"]));
    assert!(
        failed
            .stderr
            .contains("warning: hook on_finish failed: exit 3")
            && failed.stderr.contains("│ finishing"),
        "{}",
        failed.stderr
    );
    let journal = apollo.journal_text();
    assert_eq!(journal.matches(r#""kind":"hook_finished""#).count(), 2);

    // A failing hook never turns success into failure.
    apollo.config("on_finish: exit 3\nunits:\n  - name: good\n    execute: 'true'\n");
    let succeeded = apollo.args(&["run", "--fresh"]).run();
    succeeded.code(0);
    assert!(
        succeeded
            .stderr
            .contains("the run's status stays succeeded"),
        "{}",
        succeeded.stderr
    );
    let replay = apollo.args(&["replay"]).run();
    assert!(
        replay.stdout.contains("on_finish · run succeeded"),
        "{}",
        replay.stdout
    );
}

#[test]
fn apollo_stop_stops_the_running_apollo_gracefully_from_another_shell() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: slow\n    execute: bin/block slow\n    cleanup: touch markers/cleaned\n",
    );
    let nothing = apollo.args(&["stop"]).run();
    nothing.code(2);
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("slow.started");
    let wrong_run = apollo.args(&["stop", "20200101T000000Z-0000"]).run();
    wrong_run.code(2);
    let stop = apollo.args(&["stop"]).run();
    stop.code(0);
    assert!(stop.stdout.contains("apollo: stopped"), "{}", stop.stdout);
    let out = running.wait();
    out.code(130);
    assert!(apollo.path("markers/cleaned").exists(), "cleanup ran");
    let runs = apollo.args(&["runs"]).run();
    assert!(runs.stdout.contains("interrupted"), "{}", runs.stdout);
}

#[test]
fn run_junit_writes_one_testcase_per_unit_with_failures_and_flaky_retries() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: flaky\n    retries: 1\n    retry_delay: 10ms\n    execute: test $APOLLO_ATTEMPT -ge 2\n  - name: broken\n    execute: |\n      echo 'KeyError: total' >&2; exit 1\n  - name: after\n    deps: [broken]\n    execute: 'true'\n",
    );
    apollo
        .args(&["run", "-k", "--junit", "report.xml"])
        .run()
        .code(1);
    let xml = std::fs::read_to_string(apollo.path("report.xml")).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
    assert!(xml.contains("<flakyFailure"), "{xml}");
    assert!(xml.contains("KeyError: total"), "{xml}");
    assert!(xml.contains("upstream `broken` failed"), "{xml}");
    let replayed = apollo.args(&["replay", "--format", "junit"]).run();
    replayed.code(0);
    assert_eq!(replayed.stdout, xml);
}

#[test]
fn show_verify_and_dry_run_speak_json() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: a\n    execute: echo hi\n  - name: b\n    deps: [a]\n    execute: exit 2\n");
    apollo.args(&["run"]).run().code(1);
    let json = |out: &crate::support::Output| -> serde_json::Value {
        serde_json::from_str(&out.stdout).unwrap_or_else(|error| panic!("{error}: {}", out.stdout))
    };
    let show = apollo
        .args(&["show", "latest", "b", "--format", "json"])
        .run();
    show.code(0);
    let show = json(&show);
    assert_eq!(show["status"], "failed");
    assert_eq!(show["attempts"][0]["outcome"]["exit"]["code"], 2);
    let verify = apollo.args(&["verify", "--format", "json"]).run();
    verify.code(0);
    assert_eq!(json(&verify)["runs"][0]["ok"], true);
    let plan = apollo.args(&["run", "--dry-run", "--format", "json"]).run();
    plan.code(0);
    let plan = json(&plan);
    assert_eq!(plan["units"][0]["action"], "skip");
    assert_eq!(plan["units"][1]["action"], "run");
    assert!(plan["resumes"].is_string(), "{plan}");
}

#[test]
fn colour_follows_color_no_color_and_clicolor_force_and_quiet_says_less() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: a\n    execute: 'true'\n  - name: b\n    execute: exit 1\n");
    let plain = apollo.args(&["run"]).run();
    plain.code(1);
    assert!(!plain.stdout.contains('\u{1b}'), "{}", plain.stdout);
    let always = apollo.args(&["run", "--fresh", "--color", "always"]).run();
    always.code(1);
    assert!(always.stdout.contains("\u{1b}["), "{}", always.stdout);
    let forced = apollo
        .envs(&[("NO_COLOR", ""), ("CLICOLOR_FORCE", "1")])
        .args(&["runs"])
        .run();
    assert!(forced.stdout.contains("\u{1b}["), "{}", forced.stdout);
    let no_color = apollo
        .envs(&[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")])
        .args(&["runs"])
        .run();
    assert!(!no_color.stdout.contains('\u{1b}'), "{}", no_color.stdout);
    let quiet = apollo.envs(&[]).args(&["-q", "run", "--fresh"]).run();
    quiet.code(1);
    assert!(!quiet.stdout.contains("  ok "), "{}", quiet.stdout);
    assert!(quiet.stdout.contains("FAILED"), "{}", quiet.stdout);
    let verbose = apollo.args(&["run", "--fresh", "-v"]).run();
    assert!(
        verbose.stdout.contains("  start    a"),
        "{}",
        verbose.stdout
    );
}

#[test]
fn prune_dry_run_says_what_would_go_and_deletes_nothing() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: a\n    execute: 'true'\n");
    for _ in 0..3 {
        apollo.args(&["run", "--fresh"]).run().code(0);
    }
    let dry = apollo
        .args(&["prune", "--keep-runs", "1", "--dry-run"])
        .run();
    dry.code(0);
    assert_eq!(
        dry.stdout.matches("would delete ").count(),
        2,
        "{}",
        dry.stdout
    );
    assert!(dry.stdout.contains("nothing was deleted"), "{}", dry.stdout);
    assert_eq!(apollo.run_ids().len(), 3);
    apollo.args(&["prune", "--keep-runs", "1"]).run().code(0);
    assert_eq!(apollo.run_ids().len(), 1);
}

#[test]
fn stats_over_the_last_runs_flag_a_loose_timeout() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: quick\n    timeout: 1h\n    execute: 'true'\n");
    for _ in 0..3 {
        apollo.args(&["run", "--fresh"]).run().code(0);
    }
    let stats = apollo.args(&["stats"]).run();
    stats.code(0);
    assert!(
        stats.stdout.contains("last 3 runs") && stats.stdout.contains("⚠ loose"),
        "{}",
        stats.stdout
    );
    let json = apollo.args(&["stats", "quick", "--format", "json"]).run();
    json.code(0);
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(json["units"][0]["runs"], 3);
    assert_eq!(json["units"][0]["timeout_flag"], "too_loose");
    apollo.args(&["stats", "quik"]).run().code(2);
}

#[test]
fn run_format_json_is_a_json_lines_event_stream() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: a\n    execute: 'true'\n  - name: b\n    deps: [a]\n    execute: |\n      echo nope >&2; exit 1\n");
    let run = apollo.args(&["run", "--format", "json"]).run();
    run.code(1);
    let events: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|event| event["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"run"));
    assert_eq!(kinds.last(), Some(&"summary"));
    assert!(
        kinds.contains(&"started") && kinds.contains(&"finished"),
        "{kinds:?}"
    );
    let summary = events.last().unwrap();
    assert_eq!(summary["status"], "failed");
    assert_eq!(summary["units"][1]["status"], "failed");
    assert_eq!(summary["units"][1]["excerpt"]["lines"][0], "nope");
}

/// A resume refused because a human's verdict is needed stops before the run starts; the
/// pipeline's `on_failure` hook must still tell someone (the nightly run did not run).
#[test]
fn a_resume_that_stops_for_a_human_verdict_still_runs_on_failure() {
    let mut apollo = Apollo::new();
    apollo.config(
        "on_failure: echo \"$APOLLO_RUN_STATUS $APOLLO_FAILED_UNITS\" >> hook-calls
units:
  - name: pay
    idempotent: false
    execute: bin/block pay
",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("pay.started");
    running.kill9();
    apollo.assert_no_processes_left();
    let refused = apollo.args(&["run"]).run();
    refused.code(5);
    let calls = std::fs::read_to_string(apollo.path("hook-calls")).unwrap_or_default();
    assert_eq!(calls, "needs_human pay\n", "{}", refused.stderr);
    assert!(
        apollo.journal_text().contains(r#""kind":"hook_finished""#),
        "the hook's end is recorded"
    );
    // Deciding lets the next run go on; that run ends succeeded, so on_failure stays quiet.
    apollo
        .args(&["mark", "latest", "pay", "--succeeded"])
        .run()
        .code(0);
    apollo.args(&["run"]).run().code(0);
    assert_eq!(
        std::fs::read_to_string(apollo.path("hook-calls")).unwrap(),
        "needs_human pay\n"
    );
}
