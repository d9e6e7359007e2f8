//! Run identity (issue 12, deliverable 1): runs of two config files sharing a state directory
//! under one name are never resumed for each other, and a run still being run by a live
//! apollo whose lock file was deleted is not taken over.

use crate::support::Apollo;

const PIPELINE: &str = "units:
  - name: a
    execute: ../bin/count a && false
";

#[test]
fn two_config_files_of_one_name_in_one_state_dir_do_not_resume_each_other() {
    let mut apollo = Apollo::new();
    // Both are named `pipeline` (the file stem); `a` fails, so each run stays unfinished.
    apollo.file("one/pipeline.yaml", PIPELINE);
    apollo.file("two/pipeline.yaml", &PIPELINE.replace("count a", "count b"));
    apollo
        .args(&["run", "--state-dir", ".apollo", "one/pipeline.yaml"])
        .run()
        .code(1);
    let runs = apollo.run_ids();
    assert_eq!(runs.len(), 1);

    // The second config has no run: the first's unfinished run is named, not resumed.
    let output = apollo
        .args(&["run", "--state-dir", ".apollo", "two/pipeline.yaml"])
        .run();
    output.code(2);
    for part in [
        runs[0].as_str(),
        "one/pipeline.yaml",
        "two/pipeline.yaml",
        "apollo resume",
        "--fresh",
    ] {
        assert!(output.stderr.contains(part), "{part}: {}", output.stderr);
    }
    assert_eq!((apollo.count("a"), apollo.count("b")), (1, 0));

    // `--fresh` starts its own run, which it resumes from then on; the first keeps its own.
    apollo
        .args(&[
            "run",
            "--state-dir",
            ".apollo",
            "--fresh",
            "two/pipeline.yaml",
        ])
        .run()
        .code(1);
    apollo
        .args(&["run", "--state-dir", ".apollo", "two/pipeline.yaml"])
        .run()
        .code(1);
    apollo
        .args(&["run", "--state-dir", ".apollo", "one/pipeline.yaml"])
        .run()
        .code(1);
    assert_eq!(apollo.run_ids().len(), 2, "each resumed its own run");
    assert_eq!((apollo.count("a"), apollo.count("b")), (2, 2));
}

#[test]
fn a_run_whose_apollo_lives_on_after_its_lock_file_was_deleted_is_not_taken_over() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: a
    execute: (test -e markers/second || bin/block a) && bin/count a
",
    );
    let first = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("a.started");
    std::fs::remove_file(apollo.path(".apollo/lock")).unwrap();

    // A second apollo that took the run over would run `a` again at once (no blocking).
    apollo.release("second");
    let output = apollo.args(&["run"]).run();
    output.code(4);
    let expected = format!("still being run by apollo pid {}", first.pid());
    assert!(output.stderr.contains(&expected), "{}", output.stderr);
    assert_eq!(apollo.run_ids().len(), 1, "no run started or resumed");

    apollo.release("a.release");
    // The first apollo finds its lock file gone at its next commit and stops (exit 6).
    first.wait().code(6);
    assert_eq!(apollo.count("a"), 1, "`a` ran once");
    apollo.assert_no_processes_left();
}
