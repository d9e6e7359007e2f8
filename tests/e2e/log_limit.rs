//! `log_limit:` end to end (issue 36 item 18): a unit printing far more than its limit runs
//! to its own end, its stored log is its head, a marker line and its last part, the failure
//! tail shows its last lines, and `apollo logs` says the log was capped.

use crate::support::Apollo;

#[test]
fn a_log_over_its_limit_is_capped_the_tail_still_shows_and_logs_says_so() {
    let mut apollo = Apollo::new();
    apollo.config(
        "defaults: {log_limit: 64KiB}\nunits:\n  - name: chatty\n    \
         execute: seq 1 200000; echo 'the last words'; exit 4\n",
    );
    let run = apollo.args(&["run"]).run();
    run.code(1);
    // The failure tail: the last lines of what the unit printed.
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("the last words"), "{said}");
    let logs = apollo.args(&["logs", "chatty"]).run();
    logs.code(0);
    assert!(logs.stdout.starts_with("1\n2\n3\n"));
    assert!(logs.stdout.ends_with("200000\nthe last words\n"));
    assert!(logs.stdout.len() < 64 * 1024 + 100, "{}", logs.stdout.len());
    assert!(
        logs.stdout.contains(" bytes cut: log_limit 64 KiB]\n"),
        "no marker"
    );
    assert!(
        logs.stderr.contains("capped") && logs.stderr.contains("log_limit 64 KiB"),
        "{}",
        logs.stderr
    );
    // A stream within its limit says nothing of a cap.
    let stderr = apollo.args(&["logs", "chatty", "--stderr"]).run();
    stderr.code(0);
    assert!(!stderr.stderr.contains("capped"), "{}", stderr.stderr);
}
