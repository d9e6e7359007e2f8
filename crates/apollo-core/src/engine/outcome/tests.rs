use std::time::Duration;

use super::*;

fn ended(status: AttemptStatus) -> Ended {
    Ended {
        status,
        started: true,
        needs_human: None,
        killed_from_outside: false,
        exit_retried: true,
    }
}

fn standing() -> Standing {
    Standing {
        idempotent: true,
        attempts_here: 1,
        retries: 2,
        backoff: Duration::from_secs(1),
        has_last_failure: false,
        stopping: false,
        cancelled: false,
        failed_any: false,
        keep_going: false,
    }
}

#[test]
fn a_success_is_done_and_recorded() {
    let taken = take(&ended(AttemptStatus::Succeeded), &standing());
    assert_eq!(taken.next, Next::Done { skipped: false });
    assert!(taken.record && !taken.skip_downstream && !taken.fail_fast && taken.ask.is_none());
    let skipped = take(&ended(AttemptStatus::Skipped), &standing());
    assert_eq!(skipped.next, Next::Done { skipped: true });
}

#[test]
fn a_failure_is_retried_with_a_capped_backoff_then_fails_for_good() {
    let delays: Vec<Next> = (1..=2)
        .map(|attempts_here| {
            let standing = Standing {
                attempts_here,
                backoff: crate::engine::retry::backoff_from(
                    Duration::from_secs(2),
                    attempts_here,
                    Duration::from_secs(3),
                ),
                ..standing()
            };
            take(&ended(AttemptStatus::Failed), &standing).next
        })
        .collect();
    assert_eq!(
        delays,
        [
            Next::Retry {
                delay: Duration::from_secs(2)
            },
            Next::Retry {
                delay: Duration::from_secs(3)
            }
        ]
    );
    let last = Standing {
        attempts_here: 3,
        ..standing()
    };
    let taken = take(&ended(AttemptStatus::Failed), &last);
    assert_eq!(taken.next, Next::Failed);
    assert!(taken.skip_downstream && taken.fail_fast);
    let keep_going = Standing {
        keep_going: true,
        ..last
    };
    assert!(!take(&ended(AttemptStatus::Failed), &keep_going).fail_fast);
}

#[test]
fn nothing_is_retried_once_the_run_stops_or_is_cancelled() {
    for standing in [
        Standing {
            stopping: true,
            ..standing()
        },
        Standing {
            cancelled: true,
            ..standing()
        },
    ] {
        assert_eq!(
            take(&ended(AttemptStatus::Failed), &standing).next,
            Next::Failed
        );
    }
}

#[test]
fn a_timed_out_non_idempotent_attempt_is_not_retried() {
    let careful = Standing {
        idempotent: false,
        ..standing()
    };
    assert_eq!(
        take(&ended(AttemptStatus::TimedOut), &careful).next,
        Next::Failed
    );
    assert!(matches!(
        take(&ended(AttemptStatus::TimedOut), &standing()).next,
        Next::Retry { .. }
    ));
}

#[test]
fn a_non_idempotent_attempt_killed_from_outside_asks_for_a_verdict() {
    let careful = Standing {
        idempotent: false,
        ..standing()
    };
    let killed = Ended {
        killed_from_outside: true,
        exit_retried: true,
        ..ended(AttemptStatus::Failed)
    };
    let taken = take(&killed, &careful);
    assert_eq!(taken.next, Next::FailedWaiting);
    assert_eq!(taken.ask, Some(AskHuman::Verdict));
    assert!(taken.record && !taken.skip_downstream && !taken.fail_fast);
    // An idempotent one is retried as any failure.
    assert!(matches!(
        take(&killed, &standing()).next,
        Next::Retry { .. }
    ));
}

#[test]
fn an_attempt_that_needs_a_human_stops_the_run_and_may_stay_in_flight() {
    let left = Ended {
        needs_human: Some(true),
        ..ended(AttemptStatus::Failed)
    };
    let taken = take(&left, &standing());
    assert_eq!(taken.next, Next::LeftInFlight);
    assert_eq!(taken.ask, Some(AskHuman::NeedsHuman));
    assert!(!taken.record);
    let ended_there = Ended {
        needs_human: Some(false),
        ..ended(AttemptStatus::TimedOut)
    };
    // Recorded, and not retried: the run stops for the human.
    let taken = take(&ended_there, &standing());
    assert_eq!(taken.next, Next::Failed);
    assert_eq!(taken.ask, Some(AskHuman::NeedsHuman));
    assert!(taken.record);
}

#[test]
fn an_interrupted_attempt_waits_unless_fail_fast_halted_a_retry() {
    let halted = Ended {
        started: false,
        ..ended(AttemptStatus::Interrupted)
    };
    assert_eq!(take(&halted, &standing()).next, Next::NotRun);
    assert_eq!(
        take(&ended(AttemptStatus::Interrupted), &standing()).next,
        Next::CutOff
    );
    let retry_halted = Standing {
        failed_any: true,
        has_last_failure: true,
        ..standing()
    };
    let taken = take(&halted, &retry_halted);
    assert_eq!(taken.next, Next::LastFailureStands);
    assert!(taken.skip_downstream && !taken.fail_fast);
}

#[test]
fn an_exit_retry_on_exit_does_not_list_fails_for_good_but_a_timeout_follows_retries() {
    let unlisted = Ended {
        exit_retried: false,
        ..ended(AttemptStatus::Failed)
    };
    assert_eq!(take(&unlisted, &standing()).next, Next::Failed);
    let timed_out = Ended {
        exit_retried: false,
        ..ended(AttemptStatus::TimedOut)
    };
    assert_eq!(
        take(&timed_out, &standing()).next,
        Next::Retry {
            delay: Duration::from_secs(1)
        }
    );
}
