//! Turning an attempt's outcome into its `unit_finished` record.

use std::time::Duration;

use crate::event::{AttemptStatus, PhaseRecord, UnitFinished};
use crate::executor::AttemptOutcome;
use crate::hash::{self, HashError};
use crate::model::Unit;

/// What an attempt's outcome means for the run, once its declared outputs are checked.
pub(super) struct Settled {
    pub(super) status: AttemptStatus,
    pub(super) error: Option<String>,
    /// The hash its dependents see, when it satisfies them.
    pub(super) output_hash: Option<String>,
}

/// Settle `outcome`, given the declared outputs' hash computed on the worker (`None`: not
/// computed; `Ok(None)`: none declared). A success whose declared output is missing or not a
/// regular file fails: exit 0 alone is not proof of work; one whose outputs could not be
/// hashed within the unit's timeout timed out; one whose hashing the run's cancellation
/// stopped was interrupted. Without declared outputs, execute's stdout stands for them.
pub(super) fn settle(
    outcome: &AttemptOutcome,
    outputs: Option<Result<Option<String>, HashError>>,
) -> Settled {
    let mut status = outcome.status;
    let mut error = outcome.error.clone();
    let mut output_hash = None;
    if status.satisfies_dependents() {
        let stdout_hash = || {
            outcome
                .stdout_sha256
                .clone()
                .unwrap_or_else(|| hash::sha256_hex(b""))
        };
        match outputs {
            Some(Ok(Some(hash))) => output_hash = Some(hash),
            Some(Ok(None)) | None => output_hash = Some(stdout_hash()),
            // A unit that skipped itself need not have produced its outputs.
            Some(Err(_)) if status == AttemptStatus::Skipped => output_hash = Some(stdout_hash()),
            Some(Err(hash_error)) => {
                status = if hash_error.timed_out() {
                    AttemptStatus::TimedOut
                } else if hash_error.cancelled() {
                    AttemptStatus::Interrupted
                } else {
                    AttemptStatus::Failed
                };
                error = Some(if hash_error.not_found() {
                    format!(
                        "execute exited 0 but a declared output is missing: `{}`",
                        hash_error.path.display()
                    )
                } else {
                    format!("execute exited 0 but its {hash_error}")
                });
            }
        }
    }
    Settled {
        status,
        error,
        output_hash,
    }
}

/// The `unit_finished` record of `unit`'s attempt `attempt`, which waited `queued` for a
/// worker after its `unit_started` was committed.
pub(super) fn unit_finished(
    unit: &Unit,
    attempt: u32,
    settled: &Settled,
    outcome: &AttemptOutcome,
    queued: Duration,
) -> UnitFinished {
    UnitFinished {
        unit: unit.name.clone(),
        attempt,
        status: settled.status,
        exit: outcome.exit,
        failed_phase: outcome.failed_phase,
        timed_out: outcome.timed_out || settled.status == AttemptStatus::TimedOut,
        duration_ms: millis(outcome.wall_time),
        queued_ms: millis(queued),
        output_hash: settled.output_hash.clone(),
        stdout_bytes: outcome.stdout_bytes,
        stderr_bytes: outcome.stderr_bytes,
        user_cpu_ms: millis(outcome.user_cpu),
        sys_cpu_ms: millis(outcome.sys_cpu),
        max_rss_kib: outcome.max_rss_kib,
        leftovers_killed: outcome
            .phases
            .iter()
            .map(|phase| phase.leftovers_killed)
            .sum(),
        phases: outcome
            .phases
            .iter()
            .map(|phase| PhaseRecord {
                phase: phase.phase,
                offset_ms: millis(phase.offset),
                duration_ms: millis(phase.wall_time),
                exit: phase.exit,
                timed_out: phase.timed_out,
            })
            .collect(),
        error: settled.error.as_deref().map(bounded_error),
    }
}

/// The most of an attempt's error text a record keeps: with the unit name (at most 255
/// bytes) and three phases, a `unit_finished` stays far below
/// [`MAX_RECORD_BYTES`](crate::journal::MAX_RECORD_BYTES) whatever an executor reports.
const MAX_ERROR_BYTES: usize = 16 * 1024;

/// `error`, cut to [`MAX_ERROR_BYTES`] at a character boundary, saying how much was cut.
fn bounded_error(error: &str) -> String {
    if error.len() <= MAX_ERROR_BYTES {
        return error.to_owned();
    }
    let mut end = MAX_ERROR_BYTES;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} more bytes not recorded)",
        &error[..end],
        error.len() - end
    )
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The first line of an error, for the run's summary.
pub(super) fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::unit;
    use crate::journal::MAX_RECORD_BYTES;

    #[test]
    fn a_success_with_a_missing_declared_output_fails_but_a_self_skip_does_not() {
        let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Succeeded);
        let missing = || {
            Some(Err(HashError {
                what: "output file",
                path: "data/out.csv".into(),
                problem: hash::Problem::Io(std::io::ErrorKind::NotFound.into()),
            }))
        };
        let settled = settle(&outcome, missing());
        assert_eq!(settled.status, AttemptStatus::Failed);
        assert_eq!(settled.output_hash, None);
        assert!(settled.error.unwrap().contains("data/out.csv"));
        outcome.status = AttemptStatus::Skipped;
        let settled = settle(&outcome, missing());
        assert_eq!(settled.status, AttemptStatus::Skipped);
        assert_eq!(settled.output_hash, Some(hash::sha256_hex(b"")));
    }

    #[test]
    fn outputs_not_hashed_in_time_time_out_and_a_fifo_output_fails() {
        let outcome = AttemptOutcome::nothing_ran(AttemptStatus::Succeeded);
        let problem = |problem| {
            Some(Err(HashError {
                what: "output file",
                path: "out".into(),
                problem,
            }))
        };
        let timeout = Duration::from_secs(2);
        let settled = settle(&outcome, problem(hash::Problem::TimedOut(timeout)));
        assert_eq!(settled.status, AttemptStatus::TimedOut);
        let record = unit_finished(&unit("u", &[]), 1, &settled, &outcome, Duration::ZERO);
        assert!(record.timed_out);
        let settled = settle(&outcome, problem(hash::Problem::NotRegular("a FIFO")));
        assert_eq!(settled.status, AttemptStatus::Failed);
        assert_eq!(
            settled.error.as_deref(),
            Some("execute exited 0 but its output file `out`: it is a FIFO, not a regular file")
        );
        let settled = settle(&outcome, problem(hash::Problem::Cancelled));
        assert_eq!(settled.status, AttemptStatus::Interrupted);
    }

    #[test]
    fn a_huge_error_text_is_cut_so_the_record_stays_bounded() {
        let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Failed);
        outcome.error = Some("é".repeat(MAX_RECORD_BYTES));
        let settled = settle(&outcome, None);
        let record = unit_finished(&unit("u", &[]), 1, &settled, &outcome, Duration::ZERO);
        let len = crate::input_manifest::encoded_len(&crate::Event::UnitFinished(record.clone()));
        assert!(len.unwrap() < MAX_ERROR_BYTES + 4096, "{len:?}");
        assert!(record.error.unwrap().ends_with("more bytes not recorded)"));
        assert_eq!(bounded_error("short"), "short");
    }

    #[test]
    fn the_record_carries_the_settled_status_and_the_outcome_s_measurements() {
        let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Succeeded);
        outcome.wall_time = Duration::from_millis(1500);
        outcome.stdout_sha256 = Some("abc".into());
        let settled = settle(&outcome, None);
        let record = unit_finished(
            &unit("u", &[]),
            3,
            &settled,
            &outcome,
            Duration::from_micros(2500),
        );
        assert_eq!(record.attempt, 3);
        assert_eq!(record.status, AttemptStatus::Succeeded);
        assert_eq!(record.output_hash.as_deref(), Some("abc"));
        assert_eq!((record.duration_ms, record.queued_ms), (1500, 2));
    }
}
