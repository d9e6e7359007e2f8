//! Each legal path through the ledger, and each illegal move refused without a change.

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

fn counts(running: usize, at_workers: usize) -> Counts {
    Counts {
        running,
        at_workers,
        ..Counts::default()
    }
}

#[test]
fn an_attempt_is_committed_handed_to_a_worker_and_ends() {
    let mut ledger = Ledger::new(3);
    ledger.commit(1, LOCAL).unwrap();
    assert_eq!(ledger.counts(), counts(1, 0));
    ledger.handed_to_worker(1).unwrap();
    assert_eq!(ledger.counts(), counts(1, 1));
    let entry = ledger.ended_at_worker(1).unwrap();
    assert_eq!(entry.place, Place::AtWorker);
    assert_eq!(ledger.counts(), Counts::default());
    assert_eq!(ledger.entry(1), None);
}

#[test]
fn a_committed_attempt_may_end_without_a_worker_or_be_taken_back() {
    let mut ledger = Ledger::new(2);
    ledger.commit(0, LOCAL).unwrap();
    ledger.commit(1, SLURM).unwrap();
    assert_eq!(ledger.counts().running, 2);
    assert_eq!(ledger.counts().running_slurm, 1);
    assert_eq!(ledger.counts().running_local(), 1);
    ledger.ended_without_worker(0).unwrap();
    ledger.taken_back(1).unwrap();
    assert_eq!(ledger.counts(), Counts::default());
}

#[test]
fn a_unit_hashed_inline_or_on_the_hashing_threads_holds_a_place_among_the_running() {
    let mut ledger = Ledger::new(2);
    ledger.begin_hashing(0, CAREFUL).unwrap();
    assert_eq!(
        ledger.counts(),
        Counts {
            running: 1,
            hashing_non_idempotent: 1,
            ..Counts::default()
        }
    );
    ledger.sent_to_hashers(0).unwrap();
    assert_eq!(ledger.counts().at_hashers, 1);
    ledger.hashed(0).unwrap();
    // Then decided: committed, at a worker, non-idempotent.
    ledger.commit(0, CAREFUL).unwrap();
    ledger.handed_to_worker(0).unwrap();
    assert_eq!(
        ledger.counts(),
        Counts {
            running: 1,
            at_workers: 1,
            non_idempotent_at_workers: 1,
            ..Counts::default()
        }
    );
    ledger.ended_at_worker(0).unwrap();
    // Hashed inline: never at the hashing threads.
    ledger.begin_hashing(1, LOCAL).unwrap();
    assert_eq!(ledger.counts().at_hashers, 0);
    ledger.hashed(1).unwrap();
    assert_eq!(ledger.counts(), Counts::default());
}

#[test]
fn a_reuse_check_holds_no_place_among_the_running() {
    let mut ledger = Ledger::new(1);
    ledger.begin_reuse_check(0, LOCAL).unwrap();
    ledger.sent_to_hashers(0).unwrap();
    assert_eq!(
        ledger.counts(),
        Counts {
            at_hashers: 1,
            checking_reuse: 1,
            ..Counts::default()
        }
    );
    assert_eq!(ledger.hashed(0).unwrap().place, Place::CheckingReuse);
    assert_eq!(ledger.counts(), Counts::default());
}

/// `mv` is refused, names the move and where the unit was, and changes nothing.
fn refused(ledger: &mut Ledger, mv: impl FnOnce(&mut Ledger) -> Result<(), IllegalMove>) {
    let before = (ledger.counts(), ledger.entries.clone());
    let error = mv(ledger).unwrap_err();
    assert!(
        error.to_string().contains("illegal scheduler move"),
        "{error}"
    );
    assert_eq!((ledger.counts(), ledger.entries.clone()), before);
}

#[test]
fn every_illegal_move_is_refused_and_changes_nothing() {
    let mut ledger = Ledger::new(2);
    // Out of the ledger: nothing but entering is legal.
    refused(&mut ledger, |l| l.sent_to_hashers(0));
    refused(&mut ledger, |l| l.hashed(0).map(drop));
    refused(&mut ledger, |l| l.handed_to_worker(0));
    refused(&mut ledger, |l| l.ended_at_worker(0).map(drop));
    refused(&mut ledger, |l| l.ended_without_worker(0).map(drop));
    refused(&mut ledger, |l| l.taken_back(0).map(drop));
    // An index out of range.
    refused(&mut ledger, |l| l.commit(7, LOCAL));
    refused(&mut ledger, |l| l.begin_hashing(7, LOCAL));
    // A non-idempotent unit is never checked for reuse (it holds no place among the running).
    refused(&mut ledger, |l| l.begin_reuse_check(0, CAREFUL));
    // Hashing: not twice in flight, not committed or at a worker before it was decided.
    ledger.begin_hashing(0, LOCAL).unwrap();
    refused(&mut ledger, |l| l.begin_hashing(0, LOCAL));
    refused(&mut ledger, |l| l.begin_reuse_check(0, LOCAL));
    refused(&mut ledger, |l| l.commit(0, LOCAL));
    refused(&mut ledger, |l| l.handed_to_worker(0));
    refused(&mut ledger, |l| l.ended_at_worker(0).map(drop));
    refused(&mut ledger, |l| l.ended_without_worker(0).map(drop));
    refused(&mut ledger, |l| l.taken_back(0).map(drop));
    ledger.sent_to_hashers(0).unwrap();
    refused(&mut ledger, |l| l.sent_to_hashers(0));
    ledger.hashed(0).unwrap();
    // Committed: not hashed, not sent, not committed twice, not ended at a worker.
    ledger.commit(0, LOCAL).unwrap();
    refused(&mut ledger, |l| l.commit(0, LOCAL));
    refused(&mut ledger, |l| l.hashed(0).map(drop));
    refused(&mut ledger, |l| l.sent_to_hashers(0));
    refused(&mut ledger, |l| l.ended_at_worker(0).map(drop));
    // At a worker: not handed twice, not taken back (its record is written), not ended
    // without the worker.
    ledger.handed_to_worker(0).unwrap();
    refused(&mut ledger, |l| l.handed_to_worker(0));
    refused(&mut ledger, |l| l.taken_back(0).map(drop));
    refused(&mut ledger, |l| l.ended_without_worker(0).map(drop));
    refused(&mut ledger, |l| l.commit(0, LOCAL));
    refused(&mut ledger, |l| l.begin_hashing(0, LOCAL));
    ledger.ended_at_worker(0).unwrap();
    assert_eq!(ledger.counts(), Counts::default());
}
