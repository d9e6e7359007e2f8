//! Local units and Slurm jobs have limits of their own: `max_parallel` local units and
//! `max_jobs` Slurm jobs at once, side by side.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::*;
use crate::model::ExecutorKind;

/// How many attempts of each kind run at once, and the most ever.
#[derive(Default)]
struct Concurrency {
    running: Mutex<[usize; 2]>,
    changed: Condvar,
    peak: [AtomicUsize; 2],
}

#[test]
fn slurm_jobs_run_up_to_max_jobs_beside_max_parallel_local_units() {
    let mut units: Vec<Unit> = (0..6)
        .map(|i| {
            let mut unit = unit(&format!("s{i}"), &[]);
            unit.executor = ExecutorKind::Slurm;
            unit
        })
        .collect();
    units.extend((0..3).map(|i| unit(&format!("l{i}"), &[])));
    let mut pipeline = pipeline(units, 1);
    pipeline.max_jobs = Some(3);
    let concurrency = Arc::new(Concurrency::default());
    let seen = Arc::clone(&concurrency);
    let events = first_run(&pipeline, move |name, _, _| {
        let kind = usize::from(name.starts_with('s'));
        let mut running = seen.running.lock().unwrap();
        running[kind] += 1;
        seen.peak[kind].fetch_max(running[kind], Ordering::SeqCst);
        seen.changed.notify_all();
        // Each Slurm job waits until three ran at once (a safety net ends the wait), so the
        // test sees whether `max_parallel: 1` held them back.
        if kind == 1 {
            let _ = seen
                .changed
                .wait_timeout_while(running, Duration::from_secs(30), |_| {
                    seen.peak[1].load(Ordering::SeqCst) < 3
                })
                .unwrap();
            seen.running.lock().unwrap()[kind] -= 1;
        } else {
            running[kind] -= 1;
        }
        ok()
    });
    let finished = events
        .iter()
        .filter(|event| matches!(event, Event::UnitFinished(_)))
        .count();
    assert_eq!(finished, 9);
    assert_eq!(
        concurrency.peak[1].load(Ordering::SeqCst),
        3,
        "Slurm jobs at once"
    );
    assert_eq!(
        concurrency.peak[0].load(Ordering::SeqCst),
        1,
        "local units at once"
    );
}
