//! The run page's deadline (issue 40 item 3): when the run was due, whether it was met or by
//! how much it was missed, and the units late for their own deadline.

use std::fmt::Write as _;

use apollo_replay::{DeadlineStatus, Timeline, UnitTimeline};

use crate::html::{self, escape};

/// The run's deadline in its facts: when, and whether it was met or by how much it was missed
/// (with the units that ended after their own).
pub(super) fn deadline_facts(body: &mut String, timeline: &Timeline) {
    let late_units = timeline.late_units();
    let Some(deadline) = timeline.deadline() else {
        if !late_units.is_empty() {
            let _ = write!(
                body,
                "<dt>Deadlines</dt><dd>{}</dd>",
                late_units_html(&late_units)
            );
        }
        return;
    };
    let standing = match (deadline.ended, deadline.late_by) {
        (_, Some(late)) => format!(
            "<span class=\"badge s-failed\">late</span> by {}",
            html::duration(u64::try_from(late.as_millis()).unwrap_or(u64::MAX))
        ),
        (Some(_), None) => "<span class=\"badge s-succeeded\">met</span>".to_owned(),
        (None, None) => "<span class=\"muted\">not ended</span>".to_owned(),
    };
    let _ = write!(
        body,
        "<dt>Deadline</dt><dd class=\"deadline\">{} {standing}{}</dd>",
        deadline.deadline.format("%Y-%m-%d %H:%M:%S UTC"),
        if late_units.is_empty() {
            String::new()
        } else {
            format!(" · {}", late_units_html(&late_units))
        }
    );
}

fn late_units_html(late: &[(&UnitTimeline, DeadlineStatus)]) -> String {
    let names: Vec<String> = (late.iter())
        .map(|(unit, status)| {
            let ms = status.late_by_ms().unwrap_or(0);
            format!("{} ({})", escape(&unit.name), html::duration(ms))
        })
        .collect();
    format!("units late: {}", names.join(", "))
}

/// ` late by 3s` after a unit's state badge, when it ended after its own deadline.
pub(super) fn late_badge(deadline: Option<DeadlineStatus>) -> String {
    deadline
        .and_then(|deadline| deadline.late_by_ms())
        .map_or_else(String::new, |ms| {
            format!(
                " <span class=\"badge s-failed\">late {}</span>",
                html::duration(ms)
            )
        })
}
