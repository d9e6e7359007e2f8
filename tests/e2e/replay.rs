//! Reading runs back: runs, replay in every format, diff, show, logs, verify, prune, backup.

use crate::support::Apollo;

const PIPELINE: &str = "max_parallel: 2
units:
  - name: fetch
    inputs: [in/data.txt]
    outputs: [out/fetched]
    execute: mkdir -p out && cp in/data.txt out/fetched && echo fetched
  - name: flaky
    retries: 1
    retry_delay: 10ms
    execute: echo try $APOLLO_ATTEMPT; test $APOLLO_ATTEMPT -ge 2
  - name: report
    deps: [fetch, flaky]
    execute: wc -c < out/fetched
";

fn project() -> Apollo {
    let apollo = Apollo::new();
    apollo.file("in/data.txt", "v1\n").config(PIPELINE);
    apollo
}

#[test]
fn a_real_run_replays_in_every_format() {
    let mut apollo = project();
    apollo.args(&["run"]).run().code(0);

    let text = apollo.args(&["replay"]).run();
    text.code(0);
    for needle in ["fetch", "flaky", "#2", "report", "run end"] {
        assert!(text.stdout.contains(needle), "{needle} in\n{}", text.stdout);
    }
    let json = apollo.args(&["replay", "--format", "json"]).run();
    json.code(0);
    for line in json.stdout.lines() {
        let value: serde_json::Value =
            serde_json::from_str(line).expect("one JSON object per line");
        assert!(value.get("kind").is_some(), "{line}");
    }
    let trace = apollo.args(&["replay", "--format", "chrome-trace"]).run();
    trace.code(0);
    let trace: serde_json::Value = serde_json::from_str(&trace.stdout).expect("a JSON document");
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    assert!(
        events
            .iter()
            .any(|event| event["ph"] == "X" && event["args"]["unit"] == "flaky")
    );
    let html = apollo.args(&["replay", "--format", "html"]).run();
    html.code(0);
    assert!(html.stdout.contains("<svg") && html.stdout.contains("flaky"));
    for external in ["src=\"http", "href=\"http", "<link", "url(http", "@import"] {
        assert!(
            !html.stdout.contains(external),
            "the page loads nothing from outside: {external}"
        );
    }

    let only = apollo.args(&["replay", "--unit", "report"]).run();
    only.code(0);
    assert!(!only.stdout.contains("flaky "), "{}", only.stdout);

    let runs = apollo.args(&["runs"]).run();
    runs.code(0);
    assert!(
        runs.stdout.contains("succeeded") && runs.stdout.contains("3/3 ok"),
        "{}",
        runs.stdout
    );
    let show = apollo.args(&["show", "latest", "flaky"]).run();
    show.code(0);
    assert!(
        show.stdout.contains("attempt 1: failed") && show.stdout.contains("attempt 2: succeeded"),
        "{}",
        show.stdout
    );
    let logs = apollo
        .args(&["logs", "latest", "flaky", "--attempt", "1"])
        .run();
    logs.code(0);
    assert_eq!(logs.stdout, "try 1\n");
}

#[test]
fn diff_says_which_input_changed_and_exits_1_only_when_runs_differ() {
    let mut apollo = project();
    apollo.args(&["run"]).run().code(0);
    apollo.args(&["run"]).run().code(0);
    let same = apollo.args(&["diff", "latest~1", "latest"]).run();
    same.code(0);

    apollo.file("in/data.txt", "v2, longer\n");
    apollo.args(&["run"]).run().code(0);
    let changed = apollo.args(&["diff", "latest~1", "latest"]).run();
    changed.code(1);
    assert!(
        changed.stdout.contains("input file in/data.txt changed"),
        "{}",
        changed.stdout
    );
    assert!(
        changed.stdout.contains("upstream fetch output changed"),
        "{}",
        changed.stdout
    );
    let json = apollo
        .args(&["diff", "latest~1", "latest", "--format", "json"])
        .run();
    json.code(1);
    serde_json::from_str::<serde_json::Value>(&json.stdout).expect("a JSON document");
}

fn last_segment(apollo: &Apollo) -> std::path::PathBuf {
    let run = apollo.run_ids().pop().expect("a run");
    apollo.path(&format!(".apollo/runs/{run}/journal/000001.log"))
}

#[test]
fn a_torn_tail_is_a_warning_and_corruption_is_exit_3() {
    let mut apollo = project();
    apollo.args(&["run"]).run().code(0);
    let segment = last_segment(&apollo);
    let mut bytes = std::fs::read(&segment).unwrap();
    // A torn write: half a record at the end.
    bytes.extend_from_slice(b"1a2b3c4d 120 {\"seq\":99,\"ts\"");
    std::fs::write(&segment, &bytes).unwrap();
    let verify = apollo.args(&["verify"]).run();
    verify.code(0);
    assert!(verify.stderr.contains("torn"), "{}", verify.stderr);
    let replay = apollo.args(&["replay"]).run();
    replay.code(0);
    assert!(replay.stdout.contains("report"), "{}", replay.stdout);

    // A flipped byte in the middle of the journal: corruption, never silently accepted.
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&segment, &bytes).unwrap();
    let verify = apollo.args(&["verify"]).run();
    verify.code(3);
    assert!(verify.stdout.contains("CORRUPT"), "{}", verify.stdout);
    apollo.args(&["replay"]).run().code(3);
    // Resuming the corrupt run is refused with exit 3, never done silently.
    let resume = apollo.args(&["resume", "latest"]).run();
    resume.code(3);
}

#[test]
fn prune_keeps_the_latest_run_and_backup_copies_finished_runs() {
    let mut apollo = project();
    for _ in 0..3 {
        apollo.args(&["run"]).run().code(0);
    }
    assert_eq!(apollo.run_ids().len(), 3);
    let backup_dir = apollo.path("backup");
    let backup = apollo.args(&["backup", backup_dir.to_str().unwrap()]).run();
    backup.code(0);
    assert!(
        backup.stdout.contains("backed up 3 runs"),
        "{}",
        backup.stdout
    );
    let prune = apollo.args(&["prune", "--keep-runs", "1"]).run();
    prune.code(0);
    assert_eq!(apollo.run_ids().len(), 1);
    let again = apollo.args(&["backup", backup_dir.to_str().unwrap()]).run();
    again.code(0);
    assert!(
        again.stdout.contains("1 already there") || again.stdout.contains("already there"),
        "{}",
        again.stdout
    );
}

#[test]
fn replay_since_a_moment_shows_only_what_happened_after_it() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: early
    execute: bin/count early
  - name: late
    deps: [early]
    execute: date -u +%Y-%m-%dT%H:%M:%S.%6NZ > since.txt && bin/count late
",
    );
    apollo.args(&["run"]).run().code(0);
    let since = std::fs::read_to_string(apollo.path("since.txt")).unwrap();
    let replay = apollo
        .args(&["replay", "--since", since.trim(), "--format", "json"])
        .run();
    replay.code(0);
    let events: Vec<serde_json::Value> = replay
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON per line"))
        .collect();
    let units: Vec<&str> = events
        .iter()
        .filter_map(|event| event["unit"].as_str())
        .collect();
    assert!(units.contains(&"late"), "{}", replay.stdout);
    assert!(!units.contains(&"early"), "{}", replay.stdout);
    let text = apollo.args(&["replay", "--since", since.trim()]).run();
    text.code(0);
    assert!(text.stdout.contains("late"), "{}", text.stdout);
}

#[test]
fn replay_of_an_unknown_unit_names_the_run_s_units() {
    let mut apollo = project();
    apollo.args(&["run"]).run().code(0);
    let replay = apollo.args(&["replay", "--unit", "nosuch"]).run();
    replay.code(2);
    assert!(
        replay.stderr.contains("its units: fetch, flaky, report"),
        "{}",
        replay.stderr
    );
}
