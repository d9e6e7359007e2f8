//! Durability modes (DESIGN §18): `batched` from the config or the command line, recorded in
//! `run_started` and shown by `runs` and `show`; a crash of apollo in this mode loses nothing.

use crate::support::Apollo;

const PIPELINE: &str = "units:\n  - name: a\n    execute: 'true'\n  - name: b\n    deps: [a]\n    execute: 'true'\n    idempotent: false\n";

#[test]
fn a_batched_run_records_its_mode_and_runs_and_show_say_so() {
    let mut apollo = Apollo::new();
    apollo.config(PIPELINE);
    apollo
        .args(&["run", "--durability", "batched"])
        .run()
        .code(0);
    let journal = apollo.journal_text();
    assert!(journal.contains(r#""durability":"batched""#), "{journal}");

    let runs = apollo.args(&["runs", "--format", "json"]).run();
    runs.code(0);
    let runs: serde_json::Value = serde_json::from_str(&runs.stdout).unwrap();
    assert_eq!(runs["runs"][0]["durability"], "batched");
    let text = apollo.args(&["runs"]).run();
    assert!(
        text.stdout.contains("(durability batched)"),
        "{}",
        text.stdout
    );

    let show = apollo.args(&["show", "latest", "--format", "json"]).run();
    show.code(0);
    let show: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(show["durability"], "batched");
    let text = apollo.args(&["show", "latest"]).run();
    assert!(
        text.stdout.contains("durability batched"),
        "{}",
        text.stdout
    );
}

#[test]
fn the_config_asks_for_batched_the_flag_wins_and_fsync_is_the_default_left_unsaid() {
    let mut apollo = Apollo::new();
    apollo.config(&format!(
        "durability: batched\nsync_interval: 5ms\n{PIPELINE}"
    ));
    apollo.args(&["run"]).run().code(0);
    apollo
        .args(&["run", "--fresh", "--durability", "fsync"])
        .run()
        .code(0);
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    runs.code(0);
    let runs: serde_json::Value = serde_json::from_str(&runs.stdout).unwrap();
    let modes: Vec<&str> = (runs["runs"].as_array().unwrap().iter())
        .map(|run| run["durability"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["batched", "fsync"]);
    let text = apollo.args(&["runs"]).run();
    assert_eq!(
        text.stdout.matches("durability").count(),
        1,
        "{}",
        text.stdout
    );
}

#[test]
fn a_config_asking_for_durability_none_is_refused() {
    let mut apollo = Apollo::new();
    apollo.config(&format!("durability: none\n{PIPELINE}"));
    let check = apollo.args(&["check"]).run();
    check.code(2);
    assert!(
        check.stderr.contains("--durability none"),
        "{}",
        check.stderr
    );
}

/// A sync that fails in batched mode — `run_started`'s, or a later one, made on the engine
/// thread or on the sync thread as timing has it — stops the run with exit 6 like a failed fsync in the default mode (DESIGN §6: never
/// retried), and the next run resumes it to the end.
#[test]
fn a_failed_sync_in_batched_mode_stops_the_run_with_exit_6_and_the_next_run_completes() {
    // Syncs 1 and 2 make the first segment; the third is `run_started`'s (its run was never
    // acknowledged: the next `apollo run` starts a run of its own, as in the default mode),
    // then the rest (the run is resumed).
    for (nth, n_runs) in [("3", 2), ("4", 1), ("5", 1)] {
        let mut apollo = Apollo::new();
        apollo.config(PIPELINE);
        let fault = format!("fsync:{nth}:EIO");
        apollo.envs(&[("APOLLO_FAULTS", fault.as_str())]);
        let failed = apollo.args(&["run", "--durability", "batched"]).run();
        failed.code(6);
        apollo.envs(&[]);
        let next = apollo.args(&["run", "--durability", "batched"]).run();
        // When timing made the failed sync the one of `b`'s end (its start was durable, so it
        // ran), `b` is cut off as far as the journal knows: the next run asks for a verdict
        // (exit 5) before anything runs, as for any non-idempotent unit cut off. It did finish.
        if next.code == Some(5) {
            assert!(next.stderr.contains("unit `b`"), "{fault}: {}", next.stderr);
            apollo
                .args(&["mark", "latest", "b", "--succeeded"])
                .run()
                .code(0);
            apollo
                .args(&["run", "--durability", "batched"])
                .run()
                .code(0);
        } else {
            next.code(0);
        }
        apollo.args(&["verify"]).run().code(0);
        assert_eq!(apollo.run_ids().len(), n_runs, "{fault}");
    }
}
