//! The N-th journal write or fsync fails (`APOLLO_FAULTS`), for every N a real run reaches,
//! with ENOSPC and EIO: apollo stops with exit 6 and a message that says what failed and what
//! to do, loses no acknowledged record, leaves a journal `apollo verify` accepts (at most a
//! torn tail), and the next `apollo run` resumes and completes.

use crate::support::{Project, assert_nothing_acknowledged_lost, counting_pipeline};

/// More than any run of the test pipeline reaches; the sweep stops at the first N that does
/// not fail the run.
const MAX_N: u64 = 500;

/// What a sweep did.
struct Swept {
    /// How many N failed the run (N = 1..=n).
    n: u64,
    /// Of those, how many hit after `run_finished` was written (finding 2 in RELIABILITY.md).
    after_run_end: u64,
}

/// Sweep `op:N:errno` over N = 1, 2, … until the run no longer reaches the N-th operation.
fn sweep(op: &str, errno: &str, errno_text: &str) -> Swept {
    let (yaml, names) = counting_pipeline(6);
    let mut after_run_end = 0;
    for n in 1..=MAX_N {
        let plan = format!("{op}:{n}:{errno}");
        let project = Project::new(&yaml);
        let failed = project.apollo(&["run"], Some(&plan));
        if failed.code == Some(0) {
            assert!(n > 1, "{plan}: the very first {op} was not attempted");
            // The run never reached the N-th operation: the sweep is complete.
            let swept = Swept {
                n: n - 1,
                after_run_end,
            };
            println!(
                "{op}:N:{errno}: swept N = 1..={}, every one exit 6; {} after run_finished was \
                 written",
                swept.n, swept.after_run_end
            );
            return swept;
        }
        let context = format!("APOLLO_FAULTS={plan}");
        assert_eq!(
            failed.code,
            Some(6),
            "{context}: expected exit 6\n--- stdout\n{}\n--- stderr\n{}",
            failed.stdout,
            failed.stderr
        );
        // What failed (the operation's errno, on which file) and what to do.
        for needle in [errno_text, ".apollo", "`apollo run` resumes"] {
            assert!(
                failed.stderr.contains(needle),
                "{context}: the message does not mention {needle:?}:\n{}",
                failed.stderr
            );
        }
        let after_failure = project.journal();

        let verify = project.apollo(&["verify"], None);
        assert_eq!(
            verify.code,
            Some(0),
            "{context}: apollo verify after the failure\n--- stdout\n{}\n--- stderr\n{}",
            verify.stdout,
            verify.stderr
        );
        let warned = format!("{}{}", verify.stdout, verify.stderr);
        assert!(
            !warned.contains("warning") || warned.contains("torn tail"),
            "{context}: apollo verify warns about more than a torn tail:\n{warned}"
        );

        let resumed = project.apollo(&["run"], None);
        assert_eq!(
            resumed.code,
            Some(0),
            "{context}: the run after the failure\n--- stdout\n{}\n--- stderr\n{}",
            resumed.stdout,
            resumed.stderr
        );
        if after_failure.runs_finished > 0 {
            // The fault hit the fsync of `run_finished` itself: the record is in the file,
            // so the next `apollo run` sees a finished run and starts a new one, executing
            // every unit again although exit 6 said "`apollo run` resumes". Reported in
            // RELIABILITY.md (finding 2); until it is settled, check only that the new run
            // is complete and the journal clean.
            assert_eq!(
                project.runs().len(),
                2,
                "{context}: expected a new run after a finished one"
            );
            let verify = project.apollo(&["verify"], None);
            assert_eq!(verify.code, Some(0), "{context}: {}", verify.stderr);
            after_run_end += 1;
            continue;
        }
        assert_nothing_acknowledged_lost(&project, &names, &after_failure, &context);
        // The failed run was resumed, not abandoned: one run holds every unit's success
        // (two only when the failure came before the run's first record was written).
        let runs = project.runs();
        let last = project.journal();
        assert_eq!(last.runs_finished, 1, "{context}: one run_finished");
        if !after_failure.started.is_empty() {
            assert_eq!(runs.len(), 1, "{context}: the failed run was not resumed");
        }
        let verify = project.apollo(&["verify"], None);
        assert_eq!(
            verify.code,
            Some(0),
            "{context}: verify after the resume: {}",
            verify.stderr
        );
    }
    panic!("{op} faults: the run still failed at N = {MAX_N}");
}

#[test]
fn every_journal_write_failing_with_enospc() {
    let swept = sweep("write", "ENOSPC", "No space left on device");
    assert!(swept.n >= 5, "only {} writes swept", swept.n);
}

#[test]
fn every_journal_write_failing_with_eio() {
    let swept = sweep("write", "EIO", "Input/output error");
    assert!(swept.n >= 5, "only {} writes swept", swept.n);
}

#[test]
fn every_journal_fsync_failing_with_enospc() {
    let swept = sweep("fsync", "ENOSPC", "No space left on device");
    assert!(swept.n >= 5, "only {} fsyncs swept", swept.n);
}

#[test]
fn every_journal_fsync_failing_with_eio() {
    let swept = sweep("fsync", "EIO", "Input/output error");
    assert!(swept.n >= 5, "only {} fsyncs swept", swept.n);
}
