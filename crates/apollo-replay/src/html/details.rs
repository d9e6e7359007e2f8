//! The rows under a unit's row in the report's table, and the header's reproduction verdict:
//! what the run model says beyond the unit's columns — why it failed (the end of its stderr),
//! where a reused unit's success is from and which outputs were put back from the blob store.

use std::fmt::Write as _;

use crate::display::{html_escape as esc, verdict_text};
use crate::{Timeline, UnitState, UnitTimeline};

/// `<div><dt>reproduction</dt><dd id="reproduction">…</dd></div>` for a reproduction that
/// compared (its `reproduction_compared`), nothing for other runs.
pub(super) fn reproduction_fact(timeline: &Timeline) -> String {
    timeline
        .facts
        .compared
        .as_ref()
        .map_or_else(String::new, |compared| {
            format!(
                "<div><dt>reproduction</dt><dd id=\"reproduction\">{}</dd></div>",
                esc(&verdict_text(compared))
            )
        })
}

/// The detail rows of `unit` (in `state`): its failed attempt's stderr excerpt, or where its
/// reuse is from and the files restored for it. Each row carries the unit's `data-` attributes
/// so the table's filter and sort move it with the unit's row.
pub(super) fn write_details(
    page: &mut String,
    unit: &UnitTimeline,
    state: UnitState,
    excerpts: Option<crate::ExcerptSource<'_>>,
) {
    let last = unit.last_attempt();
    let duration = last.map_or(0, crate::Attempt::duration_ms);
    let row = |page: &mut String, class: &str, cell: String| {
        let _ = writeln!(
            page,
            "<tr class=\"{class}\" data-unit=\"{name}\" data-status=\"{state}\" \
             data-duration=\"{duration}\"><td></td><td colspan=\"10\">{cell}</td></tr>",
            name = esc(&unit.name),
        );
    };
    // Why it failed, in the page: the end of the failed attempt's stderr.
    if state == UnitState::Failed
        && let Some(last) = last
        && let Some(excerpt) = excerpts.and_then(|excerpts| excerpts(&unit.name, last.number))
    {
        row(page, "excerpt", format!("<pre>{}</pre>", esc(&excerpt)));
    }
    if let (UnitState::Reused, Some(reused)) = (state, &unit.reused) {
        let mut cell = format!(
            "reused from run {} attempt {}",
            esc(&reused.from_run),
            reused.from_attempt
        );
        if !reused.restored.is_empty() {
            let _ = write!(
                cell,
                " · <span class=\"restored\">restored {}</span> from the blob store",
                esc(&reused.restored.join(", "))
            );
        }
        row(page, "reused", cell);
    }
}
