//! `apollo reproduce` runs the unit with the real project read-only (issue 36, item 13): a
//! command that writes into the project by accident — a `cd ..` out of a scratch directory
//! made inside it, an absolute path recorded in its env — fails with "Read-only file system"
//! and changes nothing there; where the kernel allows no user namespace, one loud line says
//! the reproduction was not isolated (forced here by running apollo in a user namespace that
//! may make none).

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

/// The program and arguments that run apollo where the kernel refuses it a user namespace:
/// `unshare` makes a user namespace whose own limit of nested user namespaces is 0 (root in
/// it may set that, `user_namespaces(7)`), so `PrivateMounts::enter` fails as it does under a
/// sysctl or a container's policy, while the machine's limit is left as it is. Where this
/// process may not make a user namespace either, apollo's isolation fails there already and
/// it runs as it is (empty). `None`: `unshare` is missing here.
#[allow(clippy::disallowed_methods)] // Probes whether unshare may make a user namespace.
pub(crate) fn without_user_namespaces() -> Option<Vec<&'static str>> {
    let probe = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "true"])
        .stderr(std::process::Stdio::null())
        .status();
    match probe {
        Err(_) => None,
        Ok(status) if !status.success() => Some(Vec::new()),
        Ok(_) => Some(vec![
            "unshare",
            "--user",
            "--map-root-user",
            "sh",
            "-c",
            "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"",
            "sh",
        ]),
    }
}

#[test]
fn a_reproduction_that_cannot_be_isolated_says_so_in_one_loud_line_and_in_its_json() {
    let prefix = without_user_namespaces();
    if !apollo_core::testing::require(
        prefix.is_some(),
        "util-linux's unshare (to refuse apollo a user namespace)",
        "install util-linux",
    ) {
        return;
    }
    let prefix = prefix.unwrap_or_default();
    let mut apollo = Apollo::new();
    apollo.file("real.txt", "mine\n");
    apollo.config(
        "units:
  - name: stray
    outputs: [out.txt]
    execute: echo out > out.txt && case \"$PWD\" in */repro) cd .. && echo clobbered > real.txt;; esac
",
    );
    apollo.args(&["run"]).run().code(0);
    let into = apollo.path("repro");
    let into = into.to_str().unwrap();
    let output = apollo
        .args(&["reproduce", "latest", "stray", "--into", into])
        .run_under(&prefix);
    output.code(0);
    let warnings: Vec<&str> = (output.stderr.lines())
        .filter(|line| line.contains("not isolated"))
        .collect();
    assert_eq!(warnings.len(), 1, "{output:?}");
    assert!(
        warnings[0].starts_with(
            "warning: not isolated: the unit ran with your project writable (the kernel \
             refused a user and mount namespace: "
        ) && warnings[0].ends_with("what it wrote outside its scratch directory is in your files"),
        "{}",
        warnings[0]
    );
    // What the line warns of happened: the unit's stray write reached the project.
    assert_eq!(
        std::fs::read_to_string(apollo.path("real.txt")).unwrap(),
        "clobbered\n"
    );
    // Again in a fresh scratch directory, in JSON.
    let into = apollo.path("second/repro");
    let into = into.to_str().unwrap();
    let json = apollo
        .args(&[
            "reproduce",
            "latest",
            "stray",
            "--into",
            into,
            "--format",
            "json",
        ])
        .run_under(&prefix);
    let value: serde_json::Value = serde_json::from_str(json.stdout.trim())
        .unwrap_or_else(|error| panic!("{error}: {json:?}"));
    assert_eq!(value["isolated"], false, "{value}");
    assert!(
        value["not_isolated"]
            .as_str()
            .is_some_and(|why| why.starts_with("the kernel refused a user and mount namespace")),
        "{value}"
    );
}
