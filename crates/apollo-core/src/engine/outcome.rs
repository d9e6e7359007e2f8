//! Taking an attempt's outcome in, the deciding part, pure: from how the attempt ended and
//! where its unit and the run stand, what follows — the unit done, a retry after a backoff,
//! a failure for good (its downstream skipped, fail-fast), a stop for a human, or the unit
//! left waiting. No unit table, no queue, no clock, no I/O: `scheduler/finish.rs` asks and
//! carries the answer out (the record, the unit's next state, the queues); the simulation
//! (`tests/sim/`) asks the same function for the outcomes it draws.

use std::time::Duration;

use super::policy::may_retry;
use crate::event::AttemptStatus;

/// How an attempt ended, as far as deciding what follows goes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ended {
    /// Its status once settled (a success whose outputs are missing is a failure).
    pub(super) status: AttemptStatus,
    /// A phase of it started (a process existed).
    pub(super) started: bool,
    /// It needs a human ([`crate::NeedsHuman`]): `Some(left_in_flight)`, whether its end
    /// stays unrecorded (it may have started work).
    pub(super) needs_human: Option<bool>,
    /// It was killed by a signal apollo did not send ([`crate::event::cut_off_by_signal`]).
    pub(super) killed_from_outside: bool,
    /// Its exit is one the unit's `retry_on_exit` retries (any, when the unit lists none;
    /// `retry::retried_exit`). A timeout ignores the list: `retries` alone decides it.
    pub(super) exit_retried: bool,
}

/// Where its unit and the run stand when the outcome is taken in.
#[derive(Debug, Clone, Copy)]
pub(super) struct Standing {
    pub(super) idempotent: bool,
    /// Attempts of the unit in this apollo (this one included).
    pub(super) attempts_here: u32,
    /// The unit's `retries`.
    pub(super) retries: u32,
    /// The wait before a retry, should one follow: the unit's backoff for this attempt
    /// (`retry::backoff`: its `retry_delay` doubled per attempt, jittered, capped).
    pub(super) backoff: Duration,
    /// Its last real attempt failed and it waits for a retry (a failure is kept).
    pub(super) has_last_failure: bool,
    /// The run stops starting units.
    pub(super) stopping: bool,
    pub(super) cancelled: bool,
    /// A unit failed for good already.
    pub(super) failed_any: bool,
    pub(super) keep_going: bool,
}

/// The unit's next state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Needs a human and may have started work: no end is recorded, the attempt stays in
    /// flight (the next resume asks for a verdict on it), the unit is not run.
    LeftInFlight,
    /// Done (succeeded, or skipped itself): its dependents may become ready.
    Done { skipped: bool },
    /// Halted before any process of it started: never started, it waits.
    NotRun,
    /// Interrupted after its processes started: it waits, cut off.
    CutOff,
    /// A retry halted by a failure elsewhere: the unit's last real attempt's failure stands
    /// (fail-fast is already under way).
    LastFailureStands,
    /// Failed, but may not be retried or failed for good by apollo (needs a human, or a
    /// non-idempotent unit killed from outside): it waits for a verdict.
    FailedWaiting,
    /// Failed with retries left: it runs again after `delay`.
    Retry { delay: Duration },
    /// Failed for good.
    Failed,
}

/// Why the run stops for a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AskHuman {
    /// The attempt said it needs one.
    NeedsHuman,
    /// A non-idempotent attempt killed by a signal apollo did not send.
    Verdict,
}

/// What taking an outcome in does (see [`take`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Taken {
    pub(super) next: Next,
    /// The run stops for a human (it stops starting units first).
    pub(super) ask: Option<AskHuman>,
    /// The attempt's `unit_finished` is appended (not for [`Next::LeftInFlight`]).
    pub(super) record: bool,
    /// Its downstream is skipped (it failed for good).
    pub(super) skip_downstream: bool,
    /// Fail-fast follows: nothing new starts, units waiting for a retry fail.
    pub(super) fail_fast: bool,
}

/// Decide what follows an attempt that `ended` so, its unit and run standing so.
pub(super) fn take(ended: &Ended, standing: &Standing) -> Taken {
    let ask_first = ended.needs_human.map(|_| AskHuman::NeedsHuman);
    if ended.needs_human == Some(true) {
        return Taken {
            next: Next::LeftInFlight,
            ask: ask_first,
            record: false,
            skip_downstream: false,
            fail_fast: false,
        };
    }
    // Asking a human stops the run first: nothing is retried then.
    let stopping = standing.stopping || ask_first.is_some();
    let has_last_failure = standing.has_last_failure && ask_first.is_none();
    let cut_off = !standing.idempotent && ended.needs_human.is_none() && ended.killed_from_outside;
    let mut ask = ask_first;
    let next = match ended.status {
        AttemptStatus::Succeeded => Next::Done { skipped: false },
        AttemptStatus::Skipped => Next::Done { skipped: true },
        AttemptStatus::Interrupted => {
            if standing.failed_any
                && !standing.keep_going
                && !standing.cancelled
                && has_last_failure
            {
                Next::LastFailureStands
            } else if ended.started {
                Next::CutOff
            } else {
                Next::NotRun
            }
        }
        AttemptStatus::Failed if cut_off || ended.needs_human.is_some() => {
            if cut_off {
                ask = ask.or(Some(AskHuman::Verdict));
            }
            Next::FailedWaiting
        }
        AttemptStatus::Failed | AttemptStatus::TimedOut => {
            // A timeout is apollo's limit, not the unit's exit: `retries` alone decides it.
            let retries_left = standing.attempts_here <= standing.retries
                && may_retry(standing.idempotent, ended.status)
                && (ended.status == AttemptStatus::TimedOut || ended.exit_retried);
            if retries_left && !stopping && !standing.cancelled {
                Next::Retry {
                    delay: standing.backoff,
                }
            } else {
                Next::Failed
            }
        }
    };
    let failed = matches!(next, Next::Failed | Next::LastFailureStands);
    Taken {
        next,
        ask,
        record: true,
        skip_downstream: failed,
        fail_fast: next == Next::Failed && !standing.keep_going,
    }
}

#[cfg(test)]
mod tests;
