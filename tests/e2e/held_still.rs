//! Issue 36, item 6: inputs are hashed before an attempt and checked again when it ends. An
//! input edited while the unit ran and then restored (`git checkout`) leaves its hash as it
//! was, but the outputs were built from the edit: such an attempt is never recorded as a
//! reusable success.

use crate::support::Apollo;

/// `build` reads `data/in.txt` into `out/out.txt`. The first time it runs (no `edited`
/// marker yet) it edits its input before reading it and puts the original back afterwards,
/// as a `git checkout` during a build would.
fn pipeline(idempotent: bool, retries: u32) -> String {
    format!(
        "defaults:
  reuse: true
units:
  - name: build
    idempotent: {idempotent}
    retries: {retries}
    inputs: [data/in.txt]
    outputs: [out/out.txt]
    execute: |
      bin/count build
      mkdir -p out
      if [ ! -e edited ]; then
        touch edited
        cp data/in.txt saved
        echo edited > data/in.txt
        cat data/in.txt > out/out.txt
        cp saved data/in.txt
      else
        cat data/in.txt > out/out.txt
      fi
"
    )
}

fn project(idempotent: bool, retries: u32) -> Apollo {
    let apollo = Apollo::new();
    apollo
        .config(&pipeline(idempotent, retries))
        .file("data/in.txt", "original\n");
    apollo
}

#[test]
fn an_input_changed_under_a_running_attempt_fails_it_and_the_retry_builds_from_the_real_content() {
    let mut apollo = project(true, 1);
    let output = apollo.args(&["run"]).run();
    output.code(0);
    assert_eq!(
        apollo.count("build"),
        2,
        "{}\n{}",
        output.stdout,
        output.stderr
    );
    let out = std::fs::read_to_string(apollo.path("out/out.txt")).unwrap();
    assert_eq!(
        out, "original\n",
        "the output of the retry, from the restored input"
    );
    let journal = apollo.journal_text();
    assert!(
        journal.contains("its input files changed while it ran (`data/in.txt`)"),
        "{journal}"
    );
    // Nothing changed since the retry: nothing runs.
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("build"), 2);
}

#[test]
fn without_a_retry_the_run_fails_and_the_next_run_builds_again_instead_of_reusing() {
    let mut apollo = project(true, 0);
    let output = apollo.args(&["run"]).run();
    output.code(1);
    assert!(
        output
            .stdout
            .contains("its input files changed while it ran")
            || output
                .stderr
                .contains("its input files changed while it ran"),
        "{}\n{}",
        output.stdout,
        output.stderr
    );
    // The input's hash is what it was when the attempt started: without the check, the
    // output made from "edited" would now be reused.
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("build"), 2);
    let out = std::fs::read_to_string(apollo.path("out/out.txt")).unwrap();
    assert_eq!(out, "original\n");
}

#[test]
fn a_non_idempotent_unit_stays_done_but_another_run_does_not_reuse_it() {
    let mut apollo = project(false, 0);
    let output = apollo.args(&["run"]).run();
    output.code(0);
    assert_eq!(apollo.count("build"), 1);
    assert!(
        apollo
            .journal_text()
            .contains("kept as done (idempotent: false), never reused by another run"),
        "{}",
        apollo.journal_text()
    );
    // A new run would reuse a success with the same input hash; this one is not reusable.
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert_eq!(apollo.count("build"), 2, "{}", output.stdout);
}
