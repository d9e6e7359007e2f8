//! Fan-out on a real Slurm cluster as job arrays (issue 39): the instances of a `foreach` that
//! are ready together are one `sbatch --array`, each still its own unit, and a SIGKILL of
//! apollo mid-array is followed by a resume that reattaches to every task.

use crate::slurm_cluster::{cluster, guard};
use crate::support::Apollo;

/// A fan-out of six blocking instances on Slurm.
const SIX_BLOCKING_INSTANCES: &str = "max_parallel: 1\nmax_jobs: 10\ndefaults: {executor: slurm}\nunits:\n\
  - {name: fan, foreach: [a, b, c, d, e, f], \
     execute: 'echo $APOLLO_UNIT >> ledger; echo hello-$APOLLO_UNIT; bin/block fan-${item}'}\n";

#[test]
fn a_fan_out_is_one_job_array_and_apollo_killed_mid_array_reattaches_to_every_task() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(SIX_BLOCKING_INSTANCES);
    let items = ["a", "b", "c", "d", "e", "f"];
    let running = apollo.args(&["run"]).spawn();
    for item in items {
        apollo.wait_for_marker(&format!("fan-{item}.started"));
    }
    running.kill9();
    // One array of six tasks; each instance's start was journaled before it, and each
    // recorded its task's id `<array id>_<task>`.
    let run = apollo.path(&format!(".apollo/runs/{}", apollo.run_ids()[0]));
    let arrays: Vec<_> = std::fs::read_dir(run.join("slurm"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(arrays.len(), 1, "{arrays:?}");
    let index = std::fs::read_to_string(arrays[0].join("index")).unwrap();
    assert_eq!(index.lines().count(), 6, "{index}");
    let array_id = std::fs::read_to_string(arrays[0].join("job_id")).unwrap();
    let journal = apollo.journal_text();
    assert_eq!(
        journal
            .matches(&format!(r#""job_id":"{}_"#, array_id.trim()))
            .count(),
        6,
        "{journal}"
    );
    // Two finish while apollo is dead; four are still running when it comes back.
    apollo.release("fan-a.release");
    apollo.release("fan-b.release");
    let output = {
        let resumed = apollo.args(&["run", "--explain"]).spawn();
        apollo.wait_for_journal(r#""reattached_from":1"#);
        for item in &items[2..] {
            apollo.release(&format!("fan-{item}.release"));
        }
        resumed.wait()
    };
    output.code(0);
    let mut ledger: Vec<String> = std::fs::read_to_string(apollo.path("ledger"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    ledger.sort();
    assert_eq!(
        ledger,
        items.map(|item| format!("fan[{item}]")),
        "each instance ran once"
    );
    assert!(output.stderr.contains(" 0 sbatch,"), "{}", output.stderr);
    let journal = apollo.journal_text();
    assert_eq!(
        journal.matches(r#""reattached_from":1"#).count(),
        6,
        "{journal}"
    );
    // Each instance is its own unit: its own output, through `apollo logs`.
    let logs = apollo.args(&["logs", "latest", "fan[c]"]).run();
    logs.code(0);
    assert!(logs.stdout.contains("hello-fan[c]"), "{}", logs.stdout);
}

#[test]
fn a_bad_apollo_slurm_arrays_value_is_refused_before_the_run_starts() {
    // No cluster needed: the value is checked before anything is opened or submitted.
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - {name: one, executor: slurm, execute: 'true'}\n");
    apollo.envs(&[("APOLLO_SLURM_ARRAYS", "maybe")]);
    let output = apollo.args(&["run"]).run();
    output.code(2);
    assert!(
        output.stderr.contains("APOLLO_SLURM_ARRAYS is `maybe`")
            && output.stderr.contains("`on`")
            && output.stderr.contains("`off`"),
        "{}",
        output.stderr
    );
    assert!(apollo.run_ids().is_empty(), "nothing was recorded");
}
