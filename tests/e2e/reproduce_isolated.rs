//! `apollo reproduce` runs the unit with the real project read-only (issue 36, item 13): a
//! command that writes into the project by accident — a `cd ..` out of a scratch directory
//! made inside it, an absolute path recorded in its env — fails with "Read-only file system"
//! and changes nothing there; where the kernel allows no user namespace, one loud line says
//! the reproduction was not isolated.

use crate::support::{Apollo, Output};

/// Whether the reproduction said it could not isolate the unit (then the test cannot check
/// the isolation, and says so).
fn isolated(output: &Output) -> bool {
    apollo_core::testing::require(
        !output.stderr.contains("not isolated"),
        "unprivileged user and mount namespaces (apollo reproduce's isolation)",
        "allow them: sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu \
         kernel.apparmor_restrict_unprivileged_userns=0",
    )
}

/// The reproduction's own run id, from its first line.
fn reproduction_run(output: &Output) -> String {
    let line = output.stdout.lines().next().unwrap_or_default();
    line.split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_cd_out_of_a_scratch_directory_inside_the_project_writes_nothing_there() {
    let mut apollo = Apollo::new();
    apollo.file("real.txt", "mine\n");
    // Run from a folder named `repro`, the unit climbs out of it and writes `real.txt`: what a
    // `cd .. && …` does under `apollo reproduce --into repro` (issue 36).
    apollo.config(
        "units:
  - name: stray
    outputs: [out.txt]
    execute: echo out > out.txt && case \"$PWD\" in */repro) cd .. && echo clobbered > real.txt;; esac
",
    );
    apollo.args(&["run"]).run().code(0);
    let into = apollo.path("repro");
    let output = apollo
        .args(&[
            "reproduce",
            "latest",
            "stray",
            "--into",
            into.to_str().unwrap(),
        ])
        .run();
    if !isolated(&output) {
        return;
    }
    output.code(1);
    assert!(
        output
            .stdout
            .contains("outcome differs: recorded succeeded, now failed"),
        "{output:?}"
    );
    assert_eq!(
        std::fs::read_to_string(apollo.path("real.txt")).unwrap(),
        "mine\n",
        "the project's file is as it was"
    );
    // The scratch directory, inside the project, stayed writable: the unit wrote its output.
    assert_eq!(
        std::fs::read_to_string(into.join("out.txt")).unwrap(),
        "out\n"
    );
    let run = reproduction_run(&output);
    let stderr = apollo.args(&["logs", &run, "stray", "--stderr"]).run();
    assert!(
        stderr.stdout.contains("Read-only file system"),
        "the unit's write failed loudly: {stderr:?}"
    );
}

#[test]
fn an_absolute_path_into_the_project_fails_and_the_journal_still_records_the_reproduction() {
    let mut apollo = Apollo::new();
    let log = apollo.path("log.txt");
    apollo.config(&format!(
        "units:
  - name: append
    env: {{LOG: {}}}
    outputs: [out.txt]
    execute: echo out > out.txt && echo again >> \"$LOG\"
",
        log.display()
    ));
    apollo.args(&["run"]).run().code(0);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "again\n");
    let output = apollo.args(&["reproduce", "latest", "append"]).run();
    if !isolated(&output) {
        return;
    }
    output.code(1);
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "again\n",
        "the reproduction did not append to the project's file"
    );
    // The state directory inside the project stayed writable: the reproduction is a run.
    let run = reproduction_run(&output);
    let show = apollo.args(&["show", &run]).run();
    assert!(show.stdout.contains("append"), "{show:?}");
    let json = apollo
        .args(&["reproduce", "latest", "append", "--format", "json"])
        .run();
    let value: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(value["isolated"], true, "{value}");
}
