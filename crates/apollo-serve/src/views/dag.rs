//! A run's dependency graph, coloured by state: its units in columns by depth (a unit stands
//! one column right of its deepest dependency), each a link to its page, its deps named on
//! hover. Drawn for runs of at most [`MAX_UNITS`] units; a larger run has its table and Gantt.

use std::collections::HashMap;
use std::fmt::Write;

use apollo_runner::read::Timeline;

use crate::html::{self, escape};

/// The largest run whose graph is drawn.
pub(crate) const MAX_UNITS: usize = 300;

/// The graph of `timeline`'s units with `deps` (unit → its deps, from the definition).
pub(crate) fn render(
    run: &str,
    timeline: &Timeline,
    deps: &HashMap<String, Vec<String>>,
) -> String {
    let mut depth: HashMap<&str, usize> = HashMap::new();
    // Deps come from a validated (acyclic) definition; a bound on the passes keeps a damaged
    // snapshot from looping.
    for _ in 0..=timeline.units.len() {
        let mut changed = false;
        for unit in &timeline.units {
            let want = deps
                .get(&unit.name)
                .into_iter()
                .flatten()
                .filter_map(|dep| depth.get(dep.as_str()).map(|d| d + 1))
                .max()
                .unwrap_or(0);
            if depth.get(unit.name.as_str()) != Some(&want) {
                depth.insert(&unit.name, want);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let n_columns = depth.values().max().map_or(0, |deepest| deepest + 1);
    let mut out = String::from(
        "<h2 id=\"graph\">Graph</h2><div class=\"dag\" role=\"list\" aria-label=\"units by depth in the dependency graph\">",
    );
    for column in 0..n_columns {
        out.push_str("<div class=\"dag-col\">");
        for unit in &timeline.units {
            if depth.get(unit.name.as_str()) != Some(&column) {
                continue;
            }
            let state = timeline.state_of(unit);
            let after = deps.get(&unit.name).map_or_else(String::new, |deps| {
                if deps.is_empty() {
                    String::new()
                } else {
                    format!(", after {}", deps.join(", "))
                }
            });
            let _ = write!(
                out,
                "<a role=\"listitem\" class=\"node s-{}\" href=\"{}\" title=\"{}\">{}</a>",
                state.as_str(),
                escape(&html::unit_href(run, &unit.name, None)),
                escape(&format!("{}: {}{after}", unit.name, state.label())),
                escape(&unit.name)
            );
        }
        out.push_str("</div>");
    }
    out.push_str("</div>");
    out
}
