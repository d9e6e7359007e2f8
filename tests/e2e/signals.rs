//! SIGINT/SIGTERM: stop starting units, terminate running ones, run cleanups, exit 130.

use crate::support::Apollo;

#[test]
fn sigint_interrupts_runs_cleanup_and_the_next_run_resumes() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: long
    kill_grace: 5s
    execute: bin/count long && bin/block long
    cleanup: bin/count long
  - name: after
    deps: [long]
    execute: bin/count after
",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("long.started");
    running.signal(libc::SIGINT);
    let output = running.wait();
    output.code(130);
    assert!(apollo.journal_text().contains(r#""status":"interrupted""#));
    let lines = std::fs::read_to_string(apollo.path("counts/long")).unwrap();
    assert_eq!(
        lines, "attempt=1 phase=execute\nattempt=1 phase=cleanup\n",
        "cleanup ran"
    );
    assert_eq!(apollo.count("after"), 0);
    apollo.assert_no_processes_left();

    apollo.release("long.release");
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("after"), 1);
}

#[test]
fn sigterm_is_handled_like_sigint() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: long\n    execute: bin/block long\n");
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("long.started");
    running.signal(libc::SIGTERM);
    running.wait().code(130);
    apollo.assert_no_processes_left();
}

#[test]
fn a_second_sigint_kills_at_once_without_waiting_for_the_grace() {
    let mut apollo = Apollo::new();
    // The unit ignores SIGTERM (and says so); its grace is far longer than the test's
    // safety timeout, so only the second Ctrl-C can end it in time.
    apollo.config(
        "units:
  - name: stubborn
    kill_grace: 1h
    execute: |
      trap ': > markers/got-term' TERM
      bin/count stubborn
      : > markers/stubborn.started
      while true; do sleep 0.01; done
",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("stubborn.started");
    running.signal(libc::SIGINT);
    apollo.wait_for_marker("got-term");
    running.signal(libc::SIGINT);
    let output = running.wait();
    output.code(130);
    assert!(
        output.stderr.contains("killing running units now"),
        "{}",
        output.stderr
    );
    apollo.assert_no_processes_left();
}
