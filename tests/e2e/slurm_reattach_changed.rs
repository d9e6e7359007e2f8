//! A reattached job's success is recorded under what it ran with (issue 36, item 5), on a real
//! Slurm cluster: what `crates/apollo-core/src/resume/tests.rs`
//! (`a_reattached_success_is_done_under_the_inputs_its_job_started_with`) proves on journal
//! records. apollo is SIGKILLed while the unit's job runs; its input (or its command) is edited
//! while apollo is dead; the job ends; the resume reattaches to it and records its success. The
//! job's output was made from the old input, so the next run must run the unit again, never
//! reuse that output as if made from the new one. Without a cluster: SKIPPED (fails under
//! `CI=true`).

use crate::slurm_cluster::{cluster, guard};
use crate::support::{Apollo, Output, SAFETY_TIMEOUT};

/// `build` reads `in.txt` when its job starts, then blocks until released.
fn config(transform: &str) -> String {
    format!(
        "units:\n  - name: build\n    executor: slurm\n    reuse: true\n    inputs: [in.txt]\n    \
         outputs: [out.txt]\n    \
         execute: '{transform} < in.txt > out.txt; echo \"ran $SLURM_JOB_ID\" >> ledger; \
         bin/block build'\n"
    )
}

/// [`config`] and a local unit after `build` that fails until `markers/after.ok` exists: the
/// run stays incomplete after the resume that reattached, and the next `apollo run` resumes it.
fn config_with_a_failing_unit_after() -> String {
    config("cat") + "  - name: after\n    deps: [build]\n    execute: test -e markers/after.ok\n"
}

/// The `N sbatch,` count of `run --explain`'s client calls line.
fn sbatch_count(output: &Output) -> usize {
    output
        .stderr
        .split(" sbatch,")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no client calls line: {}", output.stderr))
}

/// How many jobs ran `build` (its ledger's lines).
fn jobs_that_ran(apollo: &Apollo) -> usize {
    std::fs::read_to_string(apollo.path("ledger"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// Runs `yaml` (its `build` reading `in.txt` = "one"), SIGKILLs apollo while `build`'s job
/// runs, applies `edit` while apollo is dead, lets the job end, and resumes: the resume
/// reattaches to the job and submits nothing. Returns the resume's output.
fn kill_edit_finish_and_resume(
    apollo: &mut Apollo,
    yaml: &str,
    edit: impl FnOnce(&Apollo),
) -> Output {
    apollo.file("in.txt", "one\n");
    apollo.config(yaml);
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("build.started");
    apollo.wait_for_journal(r#""kind":"unit_submitted""#);
    running.kill9();
    edit(apollo);
    // The job ends while apollo is dead: its wrapper writes the attempt's result.
    apollo.release("build.release");
    let run = apollo.run_ids().pop().unwrap();
    let result = apollo.path(&format!(".apollo/runs/{run}/units/build/1/result"));
    let deadline = std::time::Instant::now() + SAFETY_TIMEOUT;
    while !result.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the job never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let resumed = apollo.args(&["run", "--explain"]).run();
    assert_eq!(sbatch_count(&resumed), 0, "{}", resumed.stderr);
    let journal = apollo.journal_text();
    assert!(journal.contains(r#""reattached_from":1"#), "{journal}");
    assert_eq!(jobs_that_ran(apollo), 1);
    // What the job made, from the input it read when it started.
    assert_eq!(
        std::fs::read_to_string(apollo.path("out.txt")).unwrap(),
        "one\n"
    );
    resumed
}

/// The run after the resume: `build` runs again (one new job) and makes `expected`.
fn the_next_run_builds_again(apollo: &mut Apollo, expected: &str) {
    let next = apollo.args(&["run", "--explain"]).run();
    next.code(0);
    assert_eq!(
        sbatch_count(&next),
        1,
        "the old job's output was reused as if made from what changed:\n{}{}",
        next.stdout,
        next.stderr
    );
    assert_eq!(jobs_that_ran(apollo), 2);
    assert_eq!(
        std::fs::read_to_string(apollo.path("out.txt")).unwrap(),
        expected
    );
    // From then on the new output is reused.
    let again = apollo.args(&["run", "--explain"]).run();
    again.code(0);
    assert_eq!(sbatch_count(&again), 0, "{}{}", again.stdout, again.stderr);
    assert_eq!(jobs_that_ran(apollo), 2);
}

#[test]
fn an_input_edited_while_apollo_was_dead_is_not_credited_to_the_reattached_job() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    kill_edit_finish_and_resume(&mut apollo, &config("cat"), |apollo| {
        apollo.file("in.txt", "two\n");
    })
    .code(0);
    the_next_run_builds_again(&mut apollo, "two\n");
}

#[test]
fn a_command_edited_while_apollo_was_dead_is_not_credited_to_the_reattached_job() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    kill_edit_finish_and_resume(&mut apollo, &config("cat"), |apollo| {
        apollo.config(&config("tr a-z A-Z"));
    })
    .code(0);
    the_next_run_builds_again(&mut apollo, "ONE\n");
}

/// The same run resumed again (`apollo_core::resume::PriorState`, not the reuse index): the
/// reattached success is done under the old input, so the resume builds again.
#[test]
fn an_input_edited_while_apollo_was_dead_is_built_again_when_the_same_run_resumes() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    let run = {
        let yaml = config_with_a_failing_unit_after();
        kill_edit_finish_and_resume(&mut apollo, &yaml, |apollo| {
            apollo.file("in.txt", "two\n");
        })
        .code(1);
        apollo.run_ids().pop().unwrap()
    };
    apollo.release("after.ok");
    let resumed = apollo.args(&["run", "--explain"]).run();
    resumed.code(0);
    assert!(
        resumed.stdout.contains(&format!("resuming run {run}")),
        "{}",
        resumed.stdout
    );
    assert_eq!(
        sbatch_count(&resumed),
        1,
        "the old job's output was kept as if made from the new input:\n{}{}",
        resumed.stdout,
        resumed.stderr
    );
    assert_eq!(jobs_that_ran(&apollo), 2);
    assert_eq!(
        std::fs::read_to_string(apollo.path("out.txt")).unwrap(),
        "two\n"
    );
}
