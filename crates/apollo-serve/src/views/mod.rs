//! The pages: server-rendered HTML, every journal text escaped ([`crate::html::escape`]).

pub(crate) mod attempt;
pub(crate) mod dag;
pub(crate) mod diff;
pub(crate) mod history;
pub(crate) mod run;
pub(crate) mod runs;

use std::fmt::Write;

use apollo_core::UnitCounts;

use crate::html::{badge, escape};

/// A run's counts as badges, non-zero states only, in the order views list them.
pub(crate) fn counts_badges(counts: &UnitCounts) -> String {
    let mut out = String::new();
    for state in apollo_core::UnitState::ALL {
        let n = counts.get(state);
        if n > 0 {
            let _ = write!(
                out,
                "<span class=\"badge s-{}\" title=\"{}\">{n} {}</span> ",
                state.as_str(),
                escape(state.label()),
                escape(state.label())
            );
        }
    }
    out
}

/// A run status (`running`, `failed`...) as a badge.
pub(crate) fn status_badge(status: &str) -> String {
    badge(status, status)
}

/// A run's params as `name=value` chips.
pub(crate) fn params_html(
    params: &std::collections::BTreeMap<String, serde_json::Value>,
) -> String {
    let mut out = String::new();
    for (name, value) in params {
        let value = match value {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let _ = write!(
            out,
            "<code class=\"param\">{}={}</code> ",
            escape(name),
            escape(&value)
        );
    }
    out
}
