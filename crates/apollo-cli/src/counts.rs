//! A run's counts as text: the run model's unit states (`apollo_core::UnitCounts`), one way
//! for every text view.

/// A run's counts as every text view prints them (`1 succeeded (1 already done), 1 failed,
/// 2 skipped (1 by when:, 1 upstream failed), 1 not started`): succeeded with those done
/// earlier in the run and the `flaky` ones (passed only after a retry) in brackets; reused;
/// failed; skipped with why; then cut off, running and not started when there are any.
pub(crate) fn text(counts: &apollo_core::UnitCounts, flaky: usize) -> String {
    use apollo_core::UnitState;
    let mut succeeded_detail = Vec::new();
    if flaky > 0 {
        succeeded_detail.push(format!("{flaky} FLAKY"));
    }
    let already_done = counts.get(UnitState::AlreadyDone);
    if already_done > 0 {
        succeeded_detail.push(format!("{already_done} already done"));
    }
    let bracket = |detail: &[String]| {
        if detail.is_empty() {
            String::new()
        } else {
            format!(" ({})", detail.join(", "))
        }
    };
    let mut parts = vec![format!(
        "{} succeeded{}",
        counts.get(UnitState::Succeeded) + already_done,
        bracket(&succeeded_detail)
    )];
    // Units reused from earlier runs are counted apart, when there are any (DESIGN §17).
    let reused = counts.get(UnitState::Reused);
    if reused > 0 {
        parts.push(format!("{reused} reused"));
    }
    parts.push(format!("{} failed", counts.get(UnitState::Failed)));
    let mut skipped_detail = Vec::new();
    let when = counts.get(UnitState::SkippedWhen);
    if when > 0 {
        skipped_detail.push(format!("{when} by when:"));
    }
    let upstream = counts.get(UnitState::UpstreamFailed);
    if upstream > 0 {
        skipped_detail.push(format!("{upstream} upstream failed"));
    }
    parts.push(format!(
        "{} skipped{}",
        counts.skipped_all(),
        bracket(&skipped_detail)
    ));
    for state in [UnitState::CutOff, UnitState::Running, UnitState::NotStarted] {
        let n = counts.get(state);
        if n > 0 {
            parts.push(format!("{n} {}", state.label()));
        }
    }
    parts.join(", ")
}
