//! A run's dependency graph, coloured by state. Units stand in columns by depth (a unit one
//! column right of its deepest dependency). Up to [`MAX_DRAWN`] units it is drawn as an SVG
//! (embedded in the page, no script): each unit a link to its page, each dependency an
//! arrow. A larger run gets the graph by depth instead: per depth, how many units are in each
//! state, and links to the units that did not succeed (the ones to look at).

use std::collections::HashMap;
use std::fmt::Write;

use apollo_core::UnitState;
use apollo_runner::read::{Timeline, UnitTimeline};

use crate::html::{self, encode, escape};

/// The largest run whose graph is drawn with its edges.
pub(crate) const MAX_DRAWN: usize = 200;

/// Units a depth of the large view names (those not succeeded), at most.
const NAMED_PER_DEPTH: usize = 20;

/// Node size and spacing in the drawing, in pixels.
const NODE_WIDTH: usize = 160;
const NODE_HEIGHT: usize = 26;
const COLUMN_GAP: usize = 64;
const ROW_GAP: usize = 10;
/// Characters of a unit's name shown in its box (the whole name is its tooltip).
const NAME_CHARS: usize = 20;

/// Each unit's depth: 0 for a unit without deps, else one more than its deepest dep. Deps
/// naming no unit of the run are left out; a cycle (a damaged snapshot: a validated one has
/// none) is cut where it closes. Linear in units and deps.
fn depths<'a>(
    names: &[&'a str],
    deps: &'a HashMap<String, Vec<String>>,
) -> HashMap<&'a str, usize> {
    let known: HashMap<&str, ()> = names.iter().map(|name| (*name, ())).collect();
    let mut depth: HashMap<&'a str, usize> = HashMap::new();
    let mut on_path: HashMap<&'a str, ()> = HashMap::new();
    for &start in names {
        // An explicit stack: a chain of 10,000 units must not overflow the thread's.
        let mut stack: Vec<(&'a str, usize)> = vec![(start, 0)];
        while let Some((name, next_dep)) = stack.pop() {
            if depth.contains_key(name) {
                continue;
            }
            let unit_deps: Vec<&'a str> = (deps.get(name).into_iter().flatten())
                .map(String::as_str)
                .filter(|dep| known.contains_key(dep))
                .collect();
            on_path.insert(name, ());
            if let Some(dep) = unit_deps.get(next_dep) {
                stack.push((name, next_dep + 1));
                if !depth.contains_key(dep) && !on_path.contains_key(dep) {
                    stack.push((dep, 0));
                }
                continue;
            }
            let deepest = (unit_deps.iter())
                .filter_map(|dep| depth.get(dep).map(|d| d + 1))
                .max()
                .unwrap_or(0);
            on_path.remove(name);
            depth.insert(name, deepest);
        }
    }
    depth
}

/// The graph of `timeline`'s units with `deps` (unit → its deps, from the definition).
pub(crate) fn render(
    run: &str,
    timeline: &Timeline,
    deps: &HashMap<String, Vec<String>>,
) -> String {
    let names: Vec<&str> = timeline
        .units
        .iter()
        .map(|unit| unit.name.as_str())
        .collect();
    let depth = depths(&names, deps);
    let n_columns = depth.values().max().map_or(0, |deepest| deepest + 1);
    let mut columns: Vec<Vec<&UnitTimeline>> = vec![Vec::new(); n_columns];
    for unit in &timeline.units {
        if let Some(&column) = depth.get(unit.name.as_str()) {
            columns[column].push(unit);
        }
    }
    if timeline.units.len() <= MAX_DRAWN {
        drawn(run, timeline, deps, &columns)
    } else {
        by_depth(run, timeline, &columns)
    }
}

fn drawn(
    run: &str,
    timeline: &Timeline,
    deps: &HashMap<String, Vec<String>>,
    columns: &[Vec<&UnitTimeline>],
) -> String {
    let mut at: HashMap<&str, (usize, usize)> = HashMap::new();
    for (column, units) in columns.iter().enumerate() {
        for (row, unit) in units.iter().enumerate() {
            at.insert(
                &unit.name,
                (
                    column * (NODE_WIDTH + COLUMN_GAP),
                    row * (NODE_HEIGHT + ROW_GAP),
                ),
            );
        }
    }
    let width = (columns.len() * (NODE_WIDTH + COLUMN_GAP)).saturating_sub(COLUMN_GAP) + 2;
    let height = (columns.iter().map(Vec::len).max().unwrap_or(0) * (NODE_HEIGHT + ROW_GAP))
        .saturating_sub(ROW_GAP)
        + 2;
    let mut out = format!(
        "<h2 id=\"graph\">Graph</h2><div class=\"dag-scroll\"><svg class=\"dag-svg\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"-1 -1 {width} {height}\" role=\"group\" aria-label=\"the run's units and their dependencies, by depth\"><defs><marker id=\"arrow\" viewBox=\"0 0 8 8\" refX=\"8\" refY=\"4\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 z\" class=\"dag-arrow\"/></marker></defs><g class=\"dag-edges\">"
    );
    for unit in &timeline.units {
        let Some(&(x2, y2)) = at.get(unit.name.as_str()) else {
            continue;
        };
        for dep in deps.get(&unit.name).into_iter().flatten() {
            let Some(&(x1, y1)) = at.get(dep.as_str()) else {
                continue;
            };
            let (x1, y1, y2) = (x1 + NODE_WIDTH, y1 + NODE_HEIGHT / 2, y2 + NODE_HEIGHT / 2);
            let bend = COLUMN_GAP / 2;
            let _ = write!(
                out,
                "<path d=\"M{x1},{y1} C{},{y1} {},{y2} {x2},{y2}\" marker-end=\"url(#arrow)\"/>",
                x1 + bend,
                x2.saturating_sub(bend)
            );
        }
    }
    out.push_str("</g>");
    for unit in &timeline.units {
        let Some(&(x, y)) = at.get(unit.name.as_str()) else {
            continue;
        };
        let state = timeline.state_of(unit);
        let after = deps
            .get(&unit.name)
            .filter(|deps| !deps.is_empty())
            .map_or_else(String::new, |deps| format!(", after {}", deps.join(", ")));
        let shown: String = if unit.name.chars().count() > NAME_CHARS {
            let mut cut: String = unit.name.chars().take(NAME_CHARS - 1).collect();
            cut.push('…');
            cut
        } else {
            unit.name.clone()
        };
        let _ = write!(
            out,
            "<a class=\"node s-{state}\" href=\"{href}\"><title>{title}</title><rect x=\"{x}\" y=\"{y}\" width=\"{NODE_WIDTH}\" height=\"{NODE_HEIGHT}\" rx=\"4\"/><text x=\"{tx}\" y=\"{ty}\">{name}</text></a>",
            state = state.as_str(),
            href = escape(&html::unit_href(run, &unit.name, None)),
            title = escape(&format!("{}: {}{after}", unit.name, state.label())),
            tx = x + 8,
            ty = y + NODE_HEIGHT / 2 + 5,
            name = escape(&shown),
        );
    }
    out.push_str("</svg></div>");
    out
}

/// The graph of a run too large to draw: a table of its depths, each with its units' counts
/// by state and links to those not succeeded.
fn by_depth(run: &str, timeline: &Timeline, columns: &[Vec<&UnitTimeline>]) -> String {
    let mut out = format!(
        "<h2 id=\"graph\">Graph by depth</h2><p class=\"muted\">{} units: too many to draw (the graph is drawn up to {MAX_DRAWN}). Each depth is one step further from the units without deps; the units not succeeded are named.</p><table class=\"dag-depths\"><thead><tr><th scope=\"col\">Depth</th><th scope=\"col\">Units</th><th scope=\"col\">States</th><th scope=\"col\">To look at</th></tr></thead><tbody>",
        timeline.units.len()
    );
    for (column, units) in columns.iter().enumerate() {
        let counts: apollo_core::UnitCounts =
            units.iter().map(|unit| timeline.state_of(unit)).collect();
        let _ = write!(
            out,
            "<tr><th scope=\"row\">{column}</th><td class=\"num\">{}</td><td>{}</td><td>",
            units.len(),
            super::counts_badges(&counts)
        );
        let mut named = 0;
        for unit in units {
            let state = timeline.state_of(unit);
            if matches!(
                state,
                UnitState::Succeeded | UnitState::Reused | UnitState::AlreadyDone
            ) {
                continue;
            }
            if named == NAMED_PER_DEPTH {
                let _ = write!(
                    out,
                    " <a href=\"{}?state={}#units\">more…</a>",
                    escape(&html::run_href(run)),
                    encode(state.as_str())
                );
                break;
            }
            named += 1;
            let _ = write!(
                out,
                "<a class=\"node s-{}\" href=\"{}\" title=\"{}\">{}</a> ",
                state.as_str(),
                escape(&html::unit_href(run, &unit.name, None)),
                escape(state.label()),
                escape(&unit.name)
            );
        }
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deps(pairs: &[(&str, &[&str])]) -> HashMap<String, Vec<String>> {
        (pairs.iter())
            .map(|(unit, deps)| {
                (
                    (*unit).to_owned(),
                    deps.iter().map(|d| (*d).to_owned()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn depths_follow_the_deepest_dep_and_survive_a_cycle() {
        let graph = deps(&[
            ("c", &["b", "a"]),
            ("b", &["a"]),
            ("a", &[]),
            ("x", &["x", "gone"]),
        ]);
        let depth = depths(&["c", "b", "a", "x"], &graph);
        assert_eq!(
            (depth["a"], depth["b"], depth["c"], depth["x"]),
            (0, 1, 2, 0)
        );
        // A chain far longer than a thread's stack would take recursively.
        let n = 20_000;
        let names: Vec<String> = (0..n).map(|i| format!("u{i}")).collect();
        let chain: HashMap<String, Vec<String>> = (1..n)
            .map(|i| (names[i].clone(), vec![names[i - 1].clone()]))
            .collect();
        let refs: Vec<&str> = names.iter().rev().map(String::as_str).collect();
        assert_eq!(depths(&refs, &chain)["u19999"], n - 1);
    }
}
