//! A bounded run of the crash-injection harness (`cargo xtask torture` is the long one).

use apollo_tests::torture::{self, Options};

use crate::support::apollo_bin;

#[test]
fn killed_at_random_moments_and_resumed() {
    let workdir = tempfile::Builder::new()
        .prefix("apollo-torture-")
        .tempdir()
        .expect("temp dir");
    let options = Options {
        apollo: apollo_bin().to_path_buf(),
        iterations: 24,
        seed: 7,
        first: 0,
        workdir: Some(workdir.path().to_path_buf()),
        durability: None,
        slurm: false,
    };
    let summary = torture::run(&options).expect("the harness runs");
    println!("{summary}");
    assert!(
        summary.violations.is_empty(),
        "torture found violations:\n{}",
        summary.violations.join("\n")
    );
    assert_eq!(summary.iterations, 24, "{summary}");
    // Half the iterations run their `reuse: true` pipeline a second time (check 10).
    assert!(
        summary.reuse_phases > 0 && summary.units_reused > 0,
        "no reuse phase ran: {summary}"
    );
    assert!(
        summary.kills > 0,
        "the harness never killed apollo: {summary}"
    );
}

/// The same attack with every pipeline asking for `durability: batched` (DESIGN §18): a
/// SIGKILL of apollo loses nothing it wrote (the page cache keeps it), so every invariant holds
/// as with fsync.
#[test]
fn killed_at_random_moments_and_resumed_in_batched_mode() {
    let workdir = tempfile::Builder::new()
        .prefix("apollo-torture-")
        .tempdir()
        .expect("temp dir");
    let options = Options {
        apollo: apollo_bin().to_path_buf(),
        iterations: 12,
        seed: 77,
        first: 0,
        workdir: Some(workdir.path().to_path_buf()),
        durability: Some(apollo_core::Durability::Batched),
        slurm: false,
    };
    let summary = torture::run(&options).expect("the harness runs");
    println!("{summary}");
    assert!(
        summary.violations.is_empty(),
        "torture found violations:\n{}",
        summary.violations.join("\n")
    );
    assert_eq!(summary.iterations, 12, "{summary}");
    assert!(
        summary.kills > 0,
        "the harness never killed apollo: {summary}"
    );
}

/// Found by the torture harness's clock steps (2026-12-01): a journal that rotated (here at
/// the UTC days a stepping clock crosses) and whose first segment then lost its records was
/// taken for a run whose creation was cut short: `runs` said "no runs yet", `verify` passed,
/// and `apollo run` started a new run that executed every unit again.
#[test]
fn a_rotated_run_whose_first_segment_lost_its_records_is_reported_not_skipped() {
    use std::process::{Command, Stdio};

    let project = crate::support::Project::new(
        "units:\n  - name: a\n    execute: bin/count a\n  - name: b\n    deps: [a]\n    execute: bin/count b\n",
    );
    // Every reading of the journal's clock is half a day earlier: the journal rotates.
    #[allow(
        clippy::disallowed_methods,
        reason = "the test spawns the binary under test"
    )]
    let status = Command::new(apollo_bin())
        .arg("run")
        .current_dir(project.path(""))
        .env("CI", "true")
        .env_remove("APOLLO_STATE_DIR")
        .env_remove("APOLLO_FAULTS")
        .env("APOLLO_CLOCK_OFFSET", "0,-43200")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run apollo");
    assert!(status.success(), "{status}");
    let run = project.runs().pop().expect("a run");
    let journal = run.join("journal");
    assert!(
        journal.join("000002.log").exists(),
        "the journal did not rotate"
    );
    // The first segment keeps its header line only.
    let first = std::fs::read_to_string(journal.join("000001.log")).expect("segment");
    let header_end = first.find('\n').expect("a header line") + 1;
    std::fs::write(journal.join("000001.log"), &first[..header_end]).expect("truncate");

    let verify = project.apollo(&["verify"], None);
    assert_eq!(verify.code, Some(3), "{verify:?}");
    let runs = project.apollo(&["runs"], None);
    assert!(runs.stdout.contains("corrupt"), "{runs:?}");
    let again = project.apollo(&["run"], None);
    assert_eq!(again.code, Some(3), "{again:?}");
    assert_eq!(project.executions("a"), vec![1], "a ran again");
    assert_eq!(project.executions("b"), vec![1], "b ran again");
}

/// The same attack with about a third of the units on the local Slurm cluster (issue 36: the
/// torture mix with Slurm units): a job apollo died with is reattached, never run twice, and
/// no job is left once the run completed. Needs a cluster (`bash ci/slurm-up.sh`).
#[test]
fn killed_at_random_moments_and_resumed_with_units_on_slurm() {
    if !apollo_core::testing::require(
        torture::slurm::available(),
        "a Slurm cluster (sinfo)",
        "sudo bash ci/slurm-up.sh",
    ) {
        return;
    }
    let workdir = tempfile::Builder::new()
        .prefix("apollo-torture-")
        .tempdir()
        .expect("temp dir");
    let options = Options {
        apollo: apollo_bin().to_path_buf(),
        iterations: 4,
        seed: 9,
        first: 0,
        workdir: Some(workdir.path().to_path_buf()),
        durability: None,
        slurm: true,
    };
    let summary = torture::run(&options).expect("the harness runs");
    println!("{summary}");
    assert!(
        summary.violations.is_empty(),
        "torture found violations:\n{}",
        summary.violations.join("\n")
    );
    assert!(
        summary.slurm_jobs.0 > 0,
        "no unit ran on the cluster: {summary}"
    );
    // Seed 9 draws reuse iterations (check 10): their second run reuses on the cluster too.
    assert!(
        summary.reuse_phases > 0 && summary.units_reused > 0,
        "no reuse phase ran: {summary}"
    );
    assert!(
        summary.kills > 0,
        "the harness never killed apollo: {summary}"
    );
}
