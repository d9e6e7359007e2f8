//! `apollo bisect GOOD BAD UNIT` (issue 40, item 4): the changed inputs of a unit between two
//! runs, tried in halves in scratch trees restored from captured blobs, until the change that
//! flipped its output is named.

use crate::support::Apollo;

/// A chain `prep → report`: `report` reads prep's output, two data files, a param and an env
/// variable; its output shows all of them.
const PIPELINE: &str = "params:
  scale: {type: string, default: '1'}
units:
  - name: prep
    inputs: [data/a.txt]
    outputs: [out/prep.txt]
    execute: mkdir -p out && cat data/a.txt > out/prep.txt
  - name: report
    deps: [prep]
    inputs: [out/prep.txt, data/b.txt, data/c.txt]
    outputs: [out/report.txt]
    env: {MODE: MODE_VALUE}
    execute: 'echo \"$MODE $APOLLO_PARAM_SCALE\" > out/report.txt && cat out/prep.txt data/b.txt >> out/report.txt'
";

/// Two runs of the pipeline: GOOD with everything at its first value, BAD after `change`.
fn two_runs(change: impl FnOnce(&Apollo) -> Vec<&'static str>) -> Apollo {
    let mut apollo = Apollo::new();
    apollo.config(&PIPELINE.replace("MODE_VALUE", "fast"));
    apollo.file("data/a.txt", "a1\n");
    apollo.file("data/b.txt", "b1\n");
    apollo.file("data/c.txt", "c1\n");
    apollo.args(&["run"]).run().code(0);
    let mut args = vec!["run"];
    args.extend(change(&apollo));
    apollo.args(&args).run().code(0);
    apollo
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|error| panic!("{error}: {stdout}"))
}

#[test]
fn the_one_file_change_that_flips_the_output_is_named_among_four_changes() {
    let mut apollo = two_runs(|apollo| {
        apollo.file("data/b.txt", "b2\n");
        apollo.file("data/c.txt", "c2\n");
        vec!["-p", "scale=1"]
    });
    // c.txt changed too, but the output does not show it: only b.txt flips it.
    apollo.args(&["bisect", "latest~1", "latest", "report"]);
    let output = apollo.run();
    output.code(0);
    let stdout = &output.stdout;
    assert!(stdout.contains("2 changes:"), "{stdout}");
    assert!(
        stdout.contains("step 1: good with none (GOOD's inputs)"),
        "{stdout}"
    );
    assert!(stdout.contains("step 2: bad with all changes"), "{stdout}");
    assert!(
        stdout.contains("found: file data/b.txt ("),
        "the answer names the file: {stdout}"
    );
    // Never in the project: its files are as BAD's run left them, no scratch folder remains.
    assert_eq!(
        std::fs::read_to_string(apollo.path("data/b.txt")).unwrap(),
        "b2\n"
    );
    let tmp = std::fs::read_dir(apollo.path(".apollo/tmp"))
        .unwrap()
        .count();
    assert_eq!(tmp, 0, "the scratch trees are removed");
    let mode = std::fs::metadata(apollo.path(".apollo/tmp")).unwrap();
    let mode = std::os::unix::fs::PermissionsExt::mode(&mode.permissions());
    assert_eq!(mode & 0o077, 0, "private, as the state directory: {mode:o}");

    // Each step is a run of kind `bisect`: `runs` marks it, `latest` never names it, and
    // `stats` leaves it out unless asked.
    let runs = apollo.args(&["runs"]).run();
    assert!(runs.stdout.contains("bisect:"), "{}", runs.stdout);
    let latest = apollo.args(&["show", "latest"]).run();
    assert!(!latest.stdout.contains("bisect"), "{}", latest.stdout);
    let mut counted = |kind: &str| {
        let stats = apollo
            .args(&["stats", "--kind", kind, "--format", "json"])
            .run();
        json(&stats.stdout)["runs"].as_array().unwrap().len()
    };
    assert_eq!(counted("run"), 2);
    let steps = output.stdout.matches("\nstep ").count();
    assert!(steps >= 3, "{stdout}");
    assert_eq!(counted("bisect"), steps);
}

#[test]
fn a_check_judges_the_steps_and_changes_needed_together_are_named_as_a_set() {
    let mut apollo = two_runs(|apollo| {
        apollo.config(&PIPELINE.replace("MODE_VALUE", "slow"));
        apollo.file("data/b.txt", "b2\n");
        vec!["-p", "scale=2"]
    });
    // Bad only when both the env and the param changed.
    apollo.args(&[
        "bisect",
        "latest~1",
        "latest",
        "report",
        "--check",
        "! grep -q 'slow 2' out/report.txt",
        "--format",
        "json",
    ]);
    let output = apollo.run();
    output.code(0);
    let value = json(&output.stdout);
    assert_eq!(value["schema"], "apollo.bisect/1");
    assert_eq!(value["outcome"], "found");
    let found: Vec<&str> = (value["found"].as_array().unwrap().iter())
        .map(|index| {
            value["changes"][index.as_u64().unwrap() as usize]["kind"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(found, ["param", "env"], "{value}");
    let steps = value["steps"].as_array().unwrap();
    assert!(
        steps
            .iter()
            .all(|step| step["why"].as_str().unwrap().starts_with("check: exit"))
    );
}

#[test]
fn upstream_rebuilds_the_unit_whose_input_flipped_the_output() {
    let mut apollo = two_runs(|apollo| {
        apollo.file("data/a.txt", "a2\n");
        vec![]
    });
    // Without --upstream: the changed input is prep's output.
    let output = apollo
        .args(&["bisect", "latest~1", "latest", "report"])
        .run();
    output.code(0);
    assert!(
        output.stdout.contains("found: file out/prep.txt"),
        "{}",
        output.stdout
    );
    // With it: prep is rebuilt in each step, and the change is its input.
    let into = apollo.path("kept");
    let output = apollo
        .args(&[
            "bisect",
            "latest~1",
            "latest",
            "report",
            "--upstream",
            "--into",
            into.to_str().unwrap(),
        ])
        .run();
    output.code(0);
    let stdout = &output.stdout;
    assert!(stdout.contains("rebuilt in each step: prep"), "{stdout}");
    assert!(stdout.contains("found: file data/a.txt"), "{stdout}");
    assert!(stdout.contains("of prep flips report's output"), "{stdout}");
    // --into keeps the trees: the last step (all changes) has BAD's prep output.
    let rebuilt = std::fs::read_to_string(into.join("step-2/out/prep.txt")).unwrap();
    assert_eq!(rebuilt, "a2\n");
}

#[test]
fn the_ends_and_refusals_have_their_exit_codes() {
    let mut apollo = two_runs(|apollo| {
        apollo.file("data/c.txt", "c2\n");
        vec![]
    });
    // The same run: nothing changed (exit 1).
    let output = apollo.args(&["bisect", "latest", "latest", "report"]).run();
    output.code(1);
    assert!(output.stdout.contains("not found:"), "{}", output.stdout);
    // c.txt changed but does not flip the output: inconclusive (exit 1).
    let output = apollo
        .args(&["bisect", "latest~1", "latest", "report"])
        .run();
    output.code(1);
    assert!(
        output
            .stdout
            .contains("inconclusive: with all of BAD's changes"),
        "{}",
        output.stdout
    );
    // A unit the runs do not have: usage (exit 2).
    let output = apollo
        .args(&["bisect", "latest~1", "latest", "nosuch"])
        .run();
    output.code(2);
    // An input whose blob is gone is named, and nothing runs (exit 2).
    let blob = apollo.find_blob(b"c2\n").expect("c2 captured");
    std::fs::remove_file(blob).unwrap();
    let before = apollo.run_ids().len();
    let output = apollo
        .args(&["bisect", "latest~1", "latest", "report"])
        .run();
    output.code(2);
    assert!(
        output
            .stderr
            .contains("the blob of input data/c.txt of run"),
        "{}",
        output.stderr
    );
    assert_eq!(apollo.run_ids().len(), before, "no step ran");
}

#[test]
fn a_unit_that_must_not_run_twice_is_refused_unless_allowed() {
    let mut apollo = Apollo::new();
    apollo.file("in.txt", "1\n");
    apollo.config(
        "units:
  - name: charge
    idempotent: false
    inputs: [in.txt]
    outputs: [out.txt]
    execute: cp in.txt out.txt
",
    );
    apollo.args(&["run"]).run().code(0);
    apollo.file("in.txt", "2\n");
    apollo.args(&["run"]).run().code(0);
    let output = apollo
        .args(&["bisect", "latest~1", "latest", "charge"])
        .run();
    output.code(2);
    assert!(
        output.stderr.contains("`idempotent: false`"),
        "{}",
        output.stderr
    );
    let output = apollo
        .args(&[
            "bisect",
            "latest~1",
            "latest",
            "charge",
            "--allow-side-effects",
        ])
        .run();
    output.code(0);
    assert!(
        output.stdout.contains("found: file in.txt"),
        "{}",
        output.stdout
    );
}

/// Where apollo may not make a user namespace (see `reproduce_isolated`), bisect's steps run
/// with the project writable and one loud line says so, as does its JSON.
#[test]
fn a_bisection_that_cannot_be_isolated_says_so_in_one_loud_line_and_in_its_json() {
    let prefix = crate::reproduce_isolated::without_user_namespaces();
    if !apollo_core::testing::require(
        prefix.is_some(),
        "util-linux's unshare (to refuse apollo a user namespace)",
        "install util-linux",
    ) {
        return;
    }
    let prefix = prefix.unwrap_or_default();
    let mut apollo = two_runs(|apollo| {
        apollo.file("data/b.txt", "b2\n");
        Vec::new()
    });
    let output = apollo
        .args(&["bisect", "latest~1", "latest", "report"])
        .run_under(&prefix);
    output.code(0);
    assert!(
        output.stdout.contains("found: file data/b.txt ("),
        "{output:?}"
    );
    let warnings: Vec<&str> = (output.stderr.lines())
        .filter(|line| line.contains("not isolated"))
        .collect();
    assert_eq!(warnings.len(), 1, "{output:?}");
    assert!(
        warnings[0].starts_with(
            "warning: not isolated: the units ran with your project writable (the kernel \
             refused a user and mount namespace: "
        ),
        "{}",
        warnings[0]
    );
    let output = apollo
        .args(&["bisect", "latest~1", "latest", "report", "--format", "json"])
        .run_under(&prefix);
    let value = json(&output.stdout);
    assert_eq!(value["isolated"], false, "{value}");
    assert!(
        value["not_isolated"]
            .as_str()
            .is_some_and(|why| why.starts_with("the kernel refused a user and mount namespace")),
        "{value}"
    );
}
