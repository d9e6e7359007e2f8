//! The keys of issue 35 item 5 through the CLI: `retry_on_exit` decides which failures are
//! retried, and `cleanup_timeout` stops a cleanup that runs too long, naming the key.

use crate::support::Apollo;

#[test]
fn retry_on_exit_retries_a_listed_code_and_not_another() {
    let mut apollo = Apollo::new();
    // `busy` exits 75 on its first attempt, then succeeds; `broken` exits 3 every time.
    apollo.config(
        "defaults: {retries: 3, retry_delay: 0, retry_on_exit: [75]}\nunits:\n  - name: busy\n    execute: bin/count busy; test \"$APOLLO_ATTEMPT\" -ge 2 || exit 75\n  - name: broken\n    execute: bin/count broken; exit 3\n",
    );
    apollo.args(&["check"]).run().code(0);
    let run = apollo.args(&["run", "--keep-going"]).run();
    run.code(1);
    assert_eq!(apollo.count("busy"), 2, "{}", run.stdout);
    assert_eq!(apollo.count("broken"), 1, "{}", run.stdout);
}

#[test]
fn a_cleanup_over_its_cleanup_timeout_is_stopped_and_named() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: server\n    execute: \"true\"\n    cleanup: exec sleep 600\n    cleanup_timeout: 300ms\n    kill_grace: 100ms\n",
    );
    let run = apollo.args(&["run"]).run();
    run.code(1);
    let shown = apollo.args(&["show", "latest", "server"]).run();
    let text = format!("{}{}{}", run.stdout, run.stderr, shown.stdout);
    assert!(
        text.contains("cleanup timed out after 300ms (the unit's `cleanup_timeout`)"),
        "{text}"
    );
    apollo.assert_no_processes_left();
}
