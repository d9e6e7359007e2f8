//! JUnit XML (`apollo run --junit`, `apollo replay --format junit`): the report GitLab, Jenkins
//! and GitHub test reporters read. One `<testcase>` per unit in one `<testsuite>` per run:
//!
//! * succeeded: a passing case; earlier failed attempts are `<flakyFailure>`s (it passed
//!   only after a retry);
//! * reused from an earlier run: a passing case with the property `apollo.reused_from`
//!   (`run RUN attempt N`), never `<skipped>`; the output files put back from the blob store
//!   to reuse it in the property `apollo.restored` (comma-separated), and both in its
//!   `<system-out>`, which test reporters show;
//! * failed or timed out for good: `<failure>` with the error line as message and the end of
//!   the failed attempt's stderr as text; earlier failed attempts are `<rerunFailure>`s;
//! * skipped (exit 77), not run because an upstream failed, not started: `<skipped>` with why;
//! * cut off (apollo stopped mid-attempt) or marked failed by a human: `<error>`.
//!
//! A reproduction's suite has its verdict in the property `apollo.reproduction`.
//!
//! apollo-replay reads no files: the caller passes the stderr excerpts it wants shown.

use std::io::Write;
use std::time::Duration;

use apollo_core::event::AttemptStatus;
use quick_junit::{
    FlakyOrRerun, NonSuccessKind, Report, TestCase, TestCaseStatus, TestRerun, TestSuite,
};

use crate::{Attempt, AttemptState, Timeline, UnitState, UnitStatus, UnitTimeline};

/// The end of an attempt's captured stderr, to show with its failure: `(unit, attempt)` →
/// text, or `None`.
pub type ExcerptSource<'a> = &'a dyn Fn(&str, u32) -> Option<String>;

/// Writes `timeline` as a JUnit XML report to `out`; `excerpts` gives the end of a failed
/// attempt's stderr.
pub fn write_junit(
    timeline: &Timeline,
    out: impl Write,
    excerpts: ExcerptSource<'_>,
) -> std::io::Result<()> {
    report(timeline, excerpts)
        .serialize(out)
        .map_err(std::io::Error::other)
}

fn report(timeline: &Timeline, excerpts: ExcerptSource<'_>) -> Report {
    let pipeline = timeline.pipeline.as_deref().unwrap_or("pipeline");
    let mut suite = TestSuite::new(pipeline);
    if let Some(started) = timeline.started {
        suite.set_timestamp(started);
    }
    suite.set_time(Duration::from_millis(timeline.duration_ms()));
    if let Some(run_id) = &timeline.run_id {
        suite.add_property(("apollo.run_id", run_id.as_str()));
    }
    suite.add_property(("apollo.status", timeline.status_str()));
    if let Some(compared) = &timeline.facts.compared {
        let verdict = crate::display::verdict_text(compared);
        suite.add_property(("apollo.reproduction", verdict.as_str()));
    }
    for unit in &timeline.units {
        suite.add_test_case(test_case(pipeline, unit, timeline.state_of(unit), excerpts));
    }
    let mut report = Report::new(format!(
        "apollo {}",
        timeline.run_id.as_deref().unwrap_or("run")
    ));
    if let Some(started) = timeline.started {
        report.set_timestamp(started);
    }
    report.set_time(Duration::from_millis(timeline.duration_ms()));
    report.add_test_suite(suite);
    report
}

fn failed(attempt: &Attempt) -> bool {
    matches!(
        attempt.state,
        AttemptState::Finished(AttemptStatus::Failed | AttemptStatus::TimedOut)
    )
}

/// `exit 1: execute exited with code 1`, `timed out`, … for an attempt.
fn message(attempt: &Attempt) -> String {
    let error = attempt.error_line().filter(|error| !error.is_empty());
    match (attempt.state, error) {
        (AttemptState::Finished(AttemptStatus::TimedOut), Some(error)) => error.to_owned(),
        (AttemptState::Finished(AttemptStatus::TimedOut), None) => "timed out".to_owned(),
        (AttemptState::Unfinished, _) => "cut off: apollo stopped before it finished".to_owned(),
        (_, Some(error)) => format!("{}: {error}", crate::text::describe_exit(attempt.exit())),
        (_, None) => crate::text::describe_exit(attempt.exit()),
    }
}

/// A failed attempt before the last, as a rerun.
fn rerun(unit: &str, attempt: &Attempt, excerpts: ExcerptSource<'_>) -> TestRerun {
    let mut rerun = TestRerun::new(NonSuccessKind::Failure);
    rerun
        .set_message(format!("attempt {}: {}", attempt.number, message(attempt)))
        .set_time(Duration::from_millis(attempt.duration_ms()))
        .set_timestamp(attempt.start);
    if let Some(excerpt) = excerpts(unit, attempt.number) {
        rerun.set_system_err(excerpt);
    }
    rerun
}

fn test_case(
    pipeline: &str,
    unit: &UnitTimeline,
    state: UnitState,
    excerpts: ExcerptSource<'_>,
) -> TestCase {
    let last = unit.last_attempt();
    let earlier_failures: Vec<TestRerun> = unit
        .attempts
        .iter()
        .filter(|attempt| Some(attempt.number) != last.map(|last| last.number))
        .filter(|attempt| failed(attempt))
        .map(|attempt| rerun(&unit.name, attempt, excerpts))
        .collect();
    let skipped = |why: String| {
        let mut status = TestCaseStatus::skipped();
        status.set_message(why);
        status
    };
    let mut status = match state {
        UnitState::Succeeded => {
            let mut status = TestCaseStatus::success();
            status.add_reruns(earlier_failures);
            status
        }
        // Not run because an earlier success stands for it: a passing test (CI must not
        // report every cache hit as a skipped test), with a property saying where it is from.
        UnitState::Reused | UnitState::AlreadyDone => TestCaseStatus::success(),
        UnitState::Skipped => skipped("skipped itself (exit 77)".to_owned()),
        UnitState::SkippedWhen => skipped(match unit.skips.last().map(|skip| &skip.reason) {
            Some(reason) => crate::display::skip_reason_text(reason),
            None => "skipped: its `when:` was false".to_owned(),
        }),
        UnitState::UpstreamFailed => skipped(match unit.skips.last().map(|skip| &skip.reason) {
            Some(apollo_core::event::SkipReason::UpstreamFailed { upstream }) => {
                format!("not run: upstream `{upstream}` failed")
            }
            _ => "not run: an upstream unit failed".to_owned(),
        }),
        UnitState::Failed if unit.status != UnitStatus::MarkedFailed => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            if let Some(last) = last {
                status.set_message(message(last));
                if let Some(excerpt) = excerpts(&unit.name, last.number) {
                    status.set_description(excerpt);
                }
            }
            status
                .set_type(unit.status.as_str())
                .add_reruns(earlier_failures)
                .set_rerun_kind(FlakyOrRerun::Rerun);
            status
        }
        UnitState::Failed | UnitState::CutOff | UnitState::NeedsVerdict | UnitState::Running => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
            status
                .set_message(match (unit.status, last) {
                    (UnitStatus::MarkedFailed, _) => "marked failed by a human".to_owned(),
                    (_, _) if state == UnitState::Running => "running".to_owned(),
                    (_, Some(last)) => message(last),
                    (_, None) => state.label().to_owned(),
                })
                .set_type(state.as_str())
                .add_reruns(earlier_failures)
                .set_rerun_kind(FlakyOrRerun::Rerun);
            status
        }
        _ => skipped("not started".to_owned()),
    };
    if matches!(status, TestCaseStatus::Skipped { .. }) {
        status.set_type(state.as_str());
    }
    let mut case = TestCase::new(unit.name.as_str(), status);
    case.set_classname(pipeline);
    case.add_property(("apollo.state", state.as_str()));
    if let (UnitStatus::Reused, Some(reused)) = (unit.status, &unit.reused) {
        add_reused(&mut case, reused);
    }
    if let Some(last) = last {
        case.set_time(Duration::from_millis(last.duration_ms()))
            .set_timestamp(last.start);
    }
    case
}

/// Where a reused unit's success is from, and the files put back to reuse it.
fn add_reused(case: &mut TestCase, reused: &crate::Reused) {
    let from = format!("run {} attempt {}", reused.from_run, reused.from_attempt);
    case.add_property(("apollo.reused_from", from.as_str()));
    let mut out = format!("reused: inputs identical to {from}");
    if !reused.restored.is_empty() {
        let restored = reused.restored.join(", ");
        case.add_property(("apollo.restored", restored.as_str()));
        out.push_str(&format!("; restored {restored} from the blob store"));
    }
    out.push('\n');
    case.set_system_out(out);
}
