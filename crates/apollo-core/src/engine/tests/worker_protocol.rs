//! The worker protocol on its own: halt and acknowledgement.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::*;
use crate::engine::workers::{Done, FromWorker, Job, WorkerShared, worker};

/// Fails `bad`, succeeds everything else, and remembers what it ran.
#[derive(Default)]
struct FailsBad {
    ran: Mutex<Vec<String>>,
}

impl Executor for FailsBad {
    fn run_attempt(
        &self,
        request: &AttemptRequest<'_>,
        _context: &AttemptContext<'_>,
    ) -> AttemptOutcome {
        self.ran.lock().unwrap().push(request.unit.name.clone());
        let (status, exit) = if request.unit.name == "bad" {
            fail()
        } else {
            ok()
        };
        let mut outcome = failed_to_start(String::new());
        outcome.status = status;
        outcome.exit = exit;
        outcome
    }
}

/// The next attempt that ended, from a worker's messages.
fn next_done(messages: &crossbeam_channel::Receiver<FromWorker>) -> Done {
    match messages.recv().unwrap() {
        FromWorker::Done(done) => done,
        FromWorker::Report { .. } => panic!("this executor reports nothing"),
        FromWorker::Hashed(_) => panic!("a worker hashes no inputs"),
    }
}

/// Runs `worker` on two jobs (`bad`, then `next`), each with `halt_on_failure`, and returns
/// whether `halt` was up when `bad`'s outcome arrived, the second outcome's status, and what
/// ran.
fn worker_after_a_failure(halt_on_failure: bool) -> (bool, AttemptStatus, Vec<String>) {
    let pipeline = pipeline(vec![unit("bad", &[]), unit("next", &[])], 2);
    let executor = FailsBad::default();
    let cancel = CancelToken::new();
    let halt = AtomicBool::new(false);
    let (job_tx, job_rx) = crossbeam_channel::unbounded();
    let (done_tx, done_rx) = crossbeam_channel::unbounded();
    let (ack_tx, ack_rx) = crossbeam_channel::bounded(1);
    for unit_idx in 0..2 {
        job_tx
            .send(Job {
                unit_idx,
                attempt: 1,
                committed_at: Instant::now(),
                halt_on_failure,
                spent: Duration::ZERO,
                in_flight: None,
                input_stamps: Vec::new(),
            })
            .unwrap();
    }
    drop(job_tx);
    let (halted, second) = std::thread::scope(|scope| {
        scope.spawn(|| {
            let shared = WorkerShared {
                pipeline: &pipeline,
                run_id: "r",
                executor: &executor,
                logs: &TempLogs,
                cancel: &cancel,
                halt: &halt,
                capture: None,
                resources: &crate::engine::resources::ResourcePool::new(1, None),
            };
            worker(0, shared, &job_rx, &done_tx, &ack_rx);
        });
        let first = next_done(&done_rx);
        assert_eq!(first.outcome.status, AttemptStatus::Failed);
        // `halt` is raised before the outcome is sent, or not at all.
        let halted = halt.load(Ordering::SeqCst);
        ack_tx.send(()).unwrap();
        let second = next_done(&done_rx);
        if second.awaits_ack {
            ack_tx.send(()).unwrap();
        }
        (halted, second.outcome.status)
    });
    let ran = executor.ran.lock().unwrap().clone();
    (halted, second, ran)
}

#[test]
fn a_worker_whose_attempt_fails_for_good_halts_attempts_committed_ahead_itself() {
    // Fail-fast, no retry left: no other attempt starts, even before the engine has read
    // the failure (it may be in an fsync).
    let (halted, second, ran) = worker_after_a_failure(true);
    assert!(halted);
    assert_eq!(second, AttemptStatus::Interrupted);
    assert_eq!(ran, ["bad"]);
    // A retry left, or --keep-going: the failure does not stop the run by itself.
    let (halted, second, ran) = worker_after_a_failure(false);
    assert!(!halted);
    assert_eq!(second, AttemptStatus::Succeeded);
    assert_eq!(ran, ["bad", "next"]);
}
