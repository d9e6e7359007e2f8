//! The admission rules, one by one, without a thread or a clock.

use super::*;

const LOCAL: Kind = Kind {
    idempotent: true,
    slurm: false,
};
const CAREFUL: Kind = Kind {
    idempotent: false,
    slurm: false,
};
const SLURM: Kind = Kind {
    idempotent: true,
    slurm: true,
};

fn limits(max_jobs: usize) -> Limits {
    Limits {
        max_parallel: 2,
        commit_limit: 10,
        max_jobs,
    }
}

const TURN: Turn = Turn {
    stopped: false,
    reuses_full: false,
    passed_over: 0,
};

fn head(kind: Kind) -> Option<Head> {
    Some(Head {
        kind,
        fresh_reuse_check: false,
    })
}

fn running(local: usize, slurm: usize) -> Counts {
    Counts {
        running: local + slurm,
        running_slurm: slurm,
        ..Counts::default()
    }
}

#[test]
fn idempotent_units_are_committed_ahead_up_to_the_commit_limit_and_non_idempotent_ones_never() {
    let limits = limits(0);
    assert_eq!(
        admit_next(&running(1, 0), &limits, &TURN, head(CAREFUL)),
        Admission::Take
    );
    assert_eq!(
        admit_next(&running(2, 0), &limits, &TURN, head(LOCAL)),
        Admission::Take
    );
    assert_eq!(
        admit_next(&running(2, 0), &limits, &TURN, head(CAREFUL)),
        Admission::Stop
    );
    assert_eq!(
        admit_next(&running(9, 0), &limits, &TURN, head(LOCAL)),
        Admission::Take
    );
    assert_eq!(
        admit_next(&running(10, 0), &limits, &TURN, head(LOCAL)),
        Admission::Stop
    );
}

#[test]
fn nothing_is_committed_ahead_while_a_non_idempotent_unit_is_hashed_or_with_slurm_units() {
    let hashing = Counts {
        hashing_non_idempotent: 1,
        ..running(2, 0)
    };
    assert_eq!(
        admit_next(&hashing, &limits(0), &TURN, head(LOCAL)),
        Admission::Stop
    );
    assert_eq!(limits(1).local_limit(&running(0, 0)), 2);
    assert_eq!(limits(0).local_limit(&running(0, 0)), 10);
}

#[test]
fn local_units_and_slurm_jobs_count_against_their_own_limits() {
    let limits = limits(1);
    // Local full, Slurm not: a local head is passed over, a Slurm one taken.
    assert_eq!(
        admit_next(&running(2, 0), &limits, &TURN, head(LOCAL)),
        Admission::PassOver
    );
    assert_eq!(
        admit_next(&running(2, 0), &limits, &TURN, head(SLURM)),
        Admission::Take
    );
    assert_eq!(
        admit_next(&running(0, 1), &limits, &TURN, head(SLURM)),
        Admission::PassOver
    );
    assert_eq!(
        admit_next(&running(2, 1), &limits, &TURN, head(SLURM)),
        Admission::Stop
    );
    let far = Turn {
        passed_over: MAX_PASSED_OVER,
        ..TURN
    };
    assert_eq!(
        admit_next(&running(2, 0), &limits, &far, head(LOCAL)),
        Admission::Stop
    );
}

#[test]
fn a_stopped_run_a_full_batch_of_reuses_or_an_empty_queue_starts_nothing() {
    let limits = limits(0);
    let stopped = Turn {
        stopped: true,
        ..TURN
    };
    let full = Turn {
        reuses_full: true,
        ..TURN
    };
    assert_eq!(
        admit_next(&running(0, 0), &limits, &stopped, head(LOCAL)),
        Admission::Stop
    );
    assert_eq!(
        admit_next(&running(0, 0), &limits, &full, head(LOCAL)),
        Admission::Stop
    );
    assert_eq!(
        admit_next(&running(0, 0), &limits, &TURN, None),
        Admission::Stop
    );
}

#[test]
fn reuse_checks_in_flight_are_bounded_but_hold_no_place_among_the_running() {
    let limits = limits(0);
    let checking = |checking_reuse| Counts {
        checking_reuse,
        ..running(10, 0)
    };
    let reuse = Some(Head {
        kind: LOCAL,
        fresh_reuse_check: true,
    });
    // Among the running the local limit holds whatever the head is.
    assert_eq!(
        admit_next(&checking(0), &limits, &TURN, reuse),
        Admission::Stop
    );
    let idle = |checking_reuse| Counts {
        checking_reuse,
        ..Counts::default()
    };
    assert_eq!(
        admit_next(&idle(255), &limits, &TURN, reuse),
        Admission::Take
    );
    assert_eq!(
        admit_next(&idle(256), &limits, &TURN, reuse),
        Admission::Stop
    );
}

#[test]
fn an_empty_batch_is_never_due_and_an_urgent_one_always() {
    let pacer = Pacer::new();
    let now = Instant::now();
    let batch = |records, urgent| BatchState {
        records,
        only_reuses: false,
        urgent,
    };
    let busy = Counts {
        at_workers: 100,
        ..running(100, 0)
    };
    assert!(!commit_due(&batch(0, true), &busy, true, &pacer, 2, now));
    assert!(commit_due(&batch(1, true), &busy, false, &pacer, 2, now));
    assert!(commit_due(&batch(1, false), &busy, true, &pacer, 2, now));
    // Routine records wait while the workers have plenty queued...
    assert!(!commit_due(&batch(1, false), &busy, false, &pacer, 2, now));
    // ... and not when they run low.
    assert!(commit_due(
        &batch(1, false),
        &running(1, 0),
        false,
        &pacer,
        2,
        now
    ));
}

#[test]
fn the_engine_never_naps_while_a_non_idempotent_attempt_runs_or_results_are_due() {
    let waiting = Waiting {
        stopped: false,
        cancelled: false,
        max_jobs: 0,
        messages_waiting: false,
    };
    let at_workers = Counts {
        at_workers: 8,
        ..running(8, 0)
    };
    assert!(may_nap(&at_workers, &waiting));
    let careful = Counts {
        non_idempotent_at_workers: 1,
        ..at_workers
    };
    assert!(!may_nap(&careful, &waiting));
    let hashing = Counts {
        at_hashers: 1,
        ..at_workers
    };
    assert!(!may_nap(&hashing, &waiting));
    let checking = Counts {
        checking_reuse: 1,
        ..at_workers
    };
    assert!(!may_nap(&checking, &waiting));
    for waiting in [
        Waiting {
            stopped: true,
            ..waiting
        },
        Waiting {
            cancelled: true,
            ..waiting
        },
        Waiting {
            max_jobs: 1,
            ..waiting
        },
        Waiting {
            messages_waiting: true,
            ..waiting
        },
    ] {
        assert!(!may_nap(&at_workers, &waiting));
    }
}

#[test]
fn a_full_batch_of_reuses_goes_unsynced_unless_stopped_or_overdue_and_a_careful_start_is_strict() {
    let committing = Committing {
        full_of_reuses: true,
        stopped: false,
        unsynced_overdue: false,
        strict_attempt: false,
    };
    assert_eq!(append_mode(&committing), Append::Unsynced);
    for not_unsynced in [
        Committing {
            stopped: true,
            ..committing
        },
        Committing {
            unsynced_overdue: true,
            ..committing
        },
        Committing {
            full_of_reuses: false,
            ..committing
        },
    ] {
        assert_eq!(append_mode(&not_unsynced), Append::Durable);
    }
    let careful = Committing {
        full_of_reuses: false,
        strict_attempt: true,
        ..committing
    };
    assert_eq!(append_mode(&careful), Append::Strict);
}
