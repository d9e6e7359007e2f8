//! A reproduction's verdict (issue 35): `apollo reproduce` records how the attempt compared
//! (`reproduction_compared`, after the reproduction's `run_finished`), so `apollo runs` says
//! whether it came out identical, not only that it ran; and what it compares against is
//! never waited on (a FIFO planted as the recorded blob).

use crate::capture::reproducible;
use crate::support::mkfifo;

#[test]
fn an_identical_reproduction_says_so_in_runs_text_and_json() {
    let mut apollo = reproducible("b\na\n");
    apollo
        .args(&["reproduce", "latest", "sorted"])
        .run()
        .code(0);
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    runs.code(0);
    let runs: serde_json::Value = serde_json::from_str(&runs.stdout).unwrap();
    assert_eq!(
        runs["runs"][1]["reproduction"],
        serde_json::json!({"reproduced": true, "recorded_status": "succeeded",
            "status": "succeeded"}),
        "{runs}"
    );
    assert!(runs["runs"][0].get("reproduction").is_none(), "{runs}");
    let text = apollo.args(&["runs"]).run().stdout;
    assert!(text.contains("reproduction: reproduced; 1/1 ok"), "{text}");
    // The verdict survives the runs index (a second listing reads it from there).
    let again = apollo.args(&["runs"]).run().stdout;
    assert_eq!(again, text);
    // The reproduction's replay ends with its verdict; its summary says it.
    let id = runs["runs"][1]["id"].as_str().unwrap();
    let show = apollo.args(&["show", id]).run();
    assert!(
        show.stdout.contains("\n  reproduction: reproduced\n"),
        "{show:?}"
    );
    let replay = apollo.args(&["replay", id]).run();
    replay.code(0);
    let last = replay.stdout.lines().last().unwrap_or_default();
    assert!(
        last.contains("compared") && last.contains("reproduced"),
        "{}",
        replay.stdout
    );
}

#[test]
fn reproduce_shows_no_diff_from_a_fifo_planted_as_the_recorded_blob_and_does_not_wait() {
    let mut apollo = reproducible("a\n");
    let recorded = std::fs::read(apollo.path("stamp.txt")).unwrap();
    let blob = apollo.find_blob(&recorded).expect("stamp.txt was captured");
    std::fs::remove_file(&blob).unwrap();
    mkfifo(&blob);
    // The helper's safety timeout kills a reproduction that waited on the FIFO (apollo
    // itself, not a wrapper: nothing outlives the test).
    let output = apollo.args(&["reproduce", "latest", "stamp"]).run();
    output.code(1);
    assert!(
        output
            .stdout
            .contains("outputs differ: stamp.txt (recorded "),
        "{output:?}"
    );
    assert!(!output.stdout.contains("--- recorded/"), "{output:?}");
}

/// The HTML report and JUnit of a reproduction say its verdict, from the run model.
#[test]
fn a_reproductions_verdict_is_in_its_html_report_and_junit() {
    let mut apollo = reproducible("b\na\n");
    apollo
        .args(&["reproduce", "latest", "sorted"])
        .run()
        .code(0);
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    let runs: serde_json::Value = serde_json::from_str(&runs.stdout).unwrap();
    let id = runs["runs"][1]["id"].as_str().unwrap().to_owned();
    let html = apollo.args(&["replay", &id, "--format", "html"]).run();
    html.code(0);
    assert!(
        html.stdout
            .contains("<dt>reproduction</dt><dd id=\"reproduction\">reproduced</dd>"),
        "{}",
        html.stdout
    );
    let junit = apollo.args(&["replay", &id, "--format", "junit"]).run();
    junit.code(0);
    assert!(
        junit
            .stdout
            .contains(r#"<property name="apollo.reproduction" value="reproduced"/>"#),
        "{}",
        junit.stdout
    );
    // An ordinary run has no verdict to say.
    let html = apollo
        .args(&[
            "replay",
            runs["runs"][0]["id"].as_str().unwrap(),
            "--format",
            "html",
        ])
        .run();
    assert!(
        !html.stdout.contains("id=\"reproduction\""),
        "{}",
        html.stdout
    );
}

/// A unit whose `when: {command}` is false in the scratch tree (its flag is not an input) is
/// skipped there: the verdict says `now skipped`, as the reproduction's attempt is in every
/// view, never `interrupted` (issue 35; tests/e2e/agreement.rs seed 6).
#[test]
fn a_reproduction_its_when_command_skipped_says_skipped_not_interrupted() {
    let mut apollo = crate::support::Apollo::new();
    apollo.file("flag", "");
    apollo.config(
        "units:\n  - name: gated\n    when: {command: test -e flag}\n    outputs: [out.txt]\n    execute: echo hi > out.txt\n",
    );
    apollo.args(&["run"]).run().code(0);
    apollo.args(&["reproduce", "latest", "gated"]).run().code(1);
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    let runs: serde_json::Value = serde_json::from_str(&runs.stdout).unwrap();
    let verdict = &runs["runs"][1]["reproduction"];
    assert_eq!(verdict["reproduced"], false, "{runs}");
    assert_eq!(verdict["recorded_status"], "succeeded", "{runs}");
    assert_eq!(verdict["status"], "skipped", "{runs}");
    assert_eq!(runs["runs"][1]["counts"]["skipped_when"], 1, "{runs}");
}
