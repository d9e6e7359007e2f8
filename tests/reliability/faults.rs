//! The N-th journal write or fsync fails (`APOLLO_FAULTS`), for every N a real run reaches,
//! with ENOSPC and EIO: apollo stops with exit 6 and a message that says what failed and what
//! to do, loses no acknowledged record, leaves a journal `apollo verify` accepts (at most a
//! torn tail), and the next `apollo run` resumes and completes.
//!
//! Two pipelines: one unit at a time, and parallel units whose records share group commits.
//! In both, how records are batched depends on timing (the engine naps while short attempts
//! keep its workers busy, DESIGN §6), so which record a given N hits, and how many writes a
//! run makes, vary a little from run to run. A fault that fires says so on stderr
//! ([`FAULT_FIRED`]): a run in which it fired must fail (exit 6), whatever N; an N a run did
//! not reach is tried three times before it counts as not reached.

use apollo_store::testing::FAULT_FIRED;

use crate::support::{Project, assert_nothing_acknowledged_lost, counting_pipeline};

/// More than any run of the test pipelines reaches.
const MAX_N: u64 = 500;

/// The sweep stops after this many consecutive N that do not fail the run (with parallel
/// units the number of operations varies by a few from run to run).
const STOP_AFTER_OK: u64 = 3;

/// How many times an N that no run reached is tried (see the module docs).
const TRIES: u32 = 3;

/// What a sweep did.
struct Swept {
    /// How many N failed the run.
    n: u64,
    /// The largest N that failed the run.
    max_n: u64,
    /// Of those, how many hit after `run_finished` was written (finding 2 in docs/reliability-log.md).
    after_run_end: u64,
}

/// Sweep `op:N:errno` over N = 1, 2, … until the run no longer reaches the N-th operation,
/// on a pipeline of `n_units` running `max_parallel` at a time.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
fn sweep(op: &str, errno: &str, errno_text: &str, n_units: usize, max_parallel: usize) -> Swept {
    let (yaml, names) = counting_pipeline(n_units, max_parallel);
    let mut swept = Swept {
        n: 0,
        max_n: 0,
        after_run_end: 0,
    };
    let mut consecutive_ok = 0;
    for n in 1..=MAX_N {
        let plan = format!("{op}:{n}:{errno}");
        let mut project = Project::new(&yaml);
        let mut failed = project.apollo(&["run"], Some(&plan));
        let fired = |run: &crate::support::Output| run.stderr.contains(FAULT_FIRED);
        for _ in 1..TRIES {
            if failed.code != Some(0) || fired(&failed) {
                break;
            }
            project = Project::new(&yaml);
            failed = project.apollo(&["run"], Some(&plan));
        }
        if failed.code == Some(0) {
            assert!(
                !fired(&failed),
                "{plan}: the fault fired and the run still succeeded:\n{}",
                failed.stderr
            );
            assert!(n > 1, "{plan}: the very first {op} was not attempted");
            consecutive_ok += 1;
            if consecutive_ok == STOP_AFTER_OK {
                // The run no longer reaches the N-th operation: the sweep is complete.
                println!(
                    "{op}:N:{errno}, {n_units} units {max_parallel} at a time: N = 1..={}, {} \
                     of them failed the run (exit 6), {} after run_finished was written",
                    swept.max_n, swept.n, swept.after_run_end
                );
                return swept;
            }
            continue;
        }
        consecutive_ok = 0;
        swept.n += 1;
        swept.max_n = n;
        let context = format!("APOLLO_FAULTS={plan}");
        assert_eq!(
            failed.code,
            Some(6),
            "{context}: expected exit 6\n--- stdout\n{}\n--- stderr\n{}",
            failed.stdout,
            failed.stderr
        );
        // What failed (the operation's errno, on which file) and what to do.
        for needle in [
            errno_text,
            ".apollo",
            "`apollo run` carries on from what was recorded",
        ] {
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
        // A failed write or fsync cuts the segment back to what was acknowledged: a
        // `run_finished` that was never acknowledged is not left for the next apollo to read
        // (it would start a new run and execute every unit again). docs/reliability-log.md, finding 2.
        assert_eq!(
            after_failure.runs_finished, 0,
            "{context}: an unacknowledged run_finished was left in the journal"
        );
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
    let swept = sweep("write", "ENOSPC", "No space left on device", 6, 1);
    assert_eq!(
        swept.n, swept.max_n,
        "an N in the middle did not fail the run"
    );
    assert!(swept.n >= 5, "only {} writes swept", swept.n);
}

#[test]
fn every_journal_write_failing_with_eio() {
    let swept = sweep("write", "EIO", "Input/output error", 6, 1);
    assert_eq!(
        swept.n, swept.max_n,
        "an N in the middle did not fail the run"
    );
    assert!(swept.n >= 5, "only {} writes swept", swept.n);
}

#[test]
fn every_journal_fsync_failing_with_enospc() {
    let swept = sweep("fsync", "ENOSPC", "No space left on device", 6, 1);
    assert_eq!(
        swept.n, swept.max_n,
        "an N in the middle did not fail the run"
    );
    assert!(swept.n >= 5, "only {} fsyncs swept", swept.n);
}

#[test]
fn every_journal_fsync_failing_with_eio() {
    let swept = sweep("fsync", "EIO", "Input/output error", 6, 1);
    assert_eq!(
        swept.n, swept.max_n,
        "an N in the middle did not fail the run"
    );
    assert!(swept.n >= 5, "only {} fsyncs swept", swept.n);
}

#[test]
fn group_committed_writes_failing() {
    let swept = sweep("write", "EIO", "Input/output error", 9, 3);
    assert!(swept.n >= 5, "only {} writes swept", swept.n);
}

#[test]
fn group_committed_fsyncs_failing() {
    let swept = sweep("fsync", "ENOSPC", "No space left on device", 9, 3);
    assert!(swept.n >= 5, "only {} fsyncs swept", swept.n);
}
