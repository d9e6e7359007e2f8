//! `/runs/{run}`: one run — its status and counts (and its cost, when it ran with a price
//! table), the unit table coloured by state (paginated), its hooks, and the Gantt of its
//! attempts (apollo-replay's HTML report, `/runs/{run}/report`).

use std::fmt::Write;
use std::sync::Arc;

use apollo_runner::read::{RunCost, RunModel, Timeline, UnitTimeline};
use apollo_store::{RunId, RunSummary};
use axum::extract::{Path, Query, State};
use axum::response::Html;
use serde::Deserialize;

use super::{counts_badges, params_html, status_badge};
use crate::app::{App, blocking};
use crate::error::AppError;
use crate::html::{self, badge, encode, escape};

mod deadline;
use deadline::{deadline_facts, late_badge};

/// Units on one page of the unit table.
pub(crate) const UNITS_PER_PAGE: usize = 500;

/// The unit table's filter and page.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RunQuery {
    /// Only units in this state (`failed`, `running`...).
    state: Option<String>,
    /// Only units whose name contains this text.
    q: Option<String>,
    /// The page, from 1.
    page: Option<usize>,
}

/// `GET /runs/{run}`.
pub(crate) async fn page(
    State(app): State<Arc<App>>,
    Path(run): Path<String>,
    Query(query): Query<RunQuery>,
) -> Result<Html<String>, AppError> {
    blocking(&app, move |app| {
        let run = app.resolve(&run)?;
        let summary = app.state.run_summary(&run)?;
        let model = match apollo_runner::read::run_model(&app.state, &run) {
            Ok(model) => model,
            Err(error) => return Ok(Html(damaged(&run, &summary, &error))),
        };
        // The graph: drawn for a run small enough, by depth for a larger one (the deps come
        // from the definition snapshot).
        let deps = apollo_runner::read::definition(&app.state, &run).map(|definition| {
            (definition.units.into_iter())
                .map(|unit| (unit.name, unit.deps))
                .collect()
        });
        let good = match summary.pipeline.as_deref() {
            Some(pipeline) => super::runs::last_good(app, pipeline, &run)?,
            None => None,
        };
        let reads = apollo_runner::read::CostReads::new();
        let cost = apollo_runner::read::run_cost(&app.state, &model.timeline, &reads);
        let mut page = render(
            &run,
            (&summary, good.as_ref()),
            (&model, cost.as_ref()),
            &query,
        );
        if let Some(deps) = deps {
            let graph = super::dag::render(run.as_str(), &model.timeline, &deps);
            page = page.replacen("<h2 id=\"units\">", &format!("{graph}<h2 id=\"units\">"), 1);
        }
        Ok(Html(page))
    })
    .await
}

/// A run whose journal cannot be folded: what the store says, and where.
fn damaged(run: &RunId, summary: &RunSummary, error: &apollo_store::StoreError) -> String {
    let body = format!(
        "<h1>Run <code>{id}</code> {status}</h1><p class=\"error\" role=\"alert\">This run's journal is damaged: {error}</p><p>{problem}</p><p>Check it with <code>apollo verify</code>; <code>apollo replay {id} --salvage</code> reads what is left.</p>",
        id = escape(run.as_str()),
        status = status_badge(summary.state.as_str()),
        error = escape(&error.to_string()),
        problem = escape(summary.problem.as_deref().unwrap_or("")),
    );
    html::page(
        &html::Frame {
            title: run.as_str(),
            crumbs: &[(run.as_str(), html::run_href(run.as_str()))],
            live: None,
        },
        &body,
    )
}

pub(crate) fn render(
    run: &RunId,
    (summary, good): (&RunSummary, Option<&RunId>),
    (model, cost): (&RunModel, Option<&RunCost>),
    query: &RunQuery,
) -> String {
    let timeline = &model.timeline;
    let id = run.as_str();
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>Run <code>{}</code> of <span class=\"pipeline\">{}</span> {}{}</h1>",
        escape(id),
        escape(summary.pipeline.as_deref().unwrap_or("?")),
        status_badge(summary.state.as_str()),
        if summary.kind.is_run() {
            String::new()
        } else {
            format!(
                " <span class=\"kind\">{}</span>",
                escape(summary.kind.as_str())
            )
        }
    );
    summary_block(&mut body, summary, timeline, (good, cost));
    for warning in &model.warnings {
        let _ = write!(
            body,
            "<p class=\"error\" role=\"alert\">journal damaged: {}</p>",
            escape(&warning.to_string())
        );
    }
    if let Some(problem) = &summary.problem {
        let _ = write!(
            body,
            "<p class=\"error\" role=\"alert\">{}</p>",
            escape(problem)
        );
    }
    hooks_block(&mut body, &model.hooks);
    units_block(&mut body, id, (timeline, cost), query);
    let _ = write!(
        body,
        "<h2 id=\"gantt\">Attempts over time</h2><p class=\"muted\">Queue wait, retries, cut-offs and resume gaps, as <code>apollo replay {0} --format html</code> draws them (<a href=\"{1}/report\">open alone</a>).</p><iframe class=\"report\" title=\"Gantt of the run's attempts\" loading=\"lazy\" src=\"{1}/report\"></iframe>",
        escape(id),
        escape(&html::run_href(id))
    );
    html::page(
        &html::Frame {
            title: id,
            crumbs: &[(id, html::run_href(id))],
            live: timeline
                .live
                .then(|| format!("{}/events", html::run_href(id))),
        },
        &body,
    )
}

fn summary_block(
    body: &mut String,
    summary: &RunSummary,
    timeline: &Timeline,
    (good, cost): (Option<&RunId>, Option<&RunCost>),
) {
    let duration_ms = timeline.duration_ms_at(chrono::Utc::now());
    let _ = write!(
        body,
        "<dl class=\"facts\"><dt>Units</dt><dd>{counts} <span class=\"muted\">of {n}</span></dd><dt>Started</dt><dd>{started}</dd><dt>Duration</dt><dd>{duration}{live}</dd><dt>Host</dt><dd>{host}</dd><dt>Durability</dt><dd>{durability}</dd>",
        counts = counts_badges(&timeline.counts()),
        n = summary.n_units,
        started = timeline.started.map_or_else(
            || "-".to_owned(),
            |ts| ts.format("%Y-%m-%d %H:%M:%S UTC").to_string()
        ),
        duration = html::duration(duration_ms),
        live = if timeline.live {
            " so far (running)"
        } else {
            ""
        },
        host = escape(timeline.host.as_deref().unwrap_or("?")),
        durability = escape(summary.durability.as_str()),
    );
    if !summary.params.is_empty() {
        let _ = write!(
            body,
            "<dt>Params</dt><dd>{}</dd>",
            params_html(&summary.params)
        );
    }
    if let Some(cost) = cost {
        let _ = write!(
            body,
            "<dt>Cost</dt><dd class=\"cost\">{} <span class=\"muted\">· wasted {} (failed and cut-off attempts) · saved {} (reused units){}</span></dd>",
            escape(&cost.show(cost.total)),
            escape(&cost.show(cost.wasted)),
            escape(&cost.show(cost.saved)),
            if cost.saved_unknown > 0 {
                format!(", {} reused not priced", cost.saved_unknown)
            } else {
                String::new()
            }
        );
    }
    deadline_facts(body, timeline);
    // A reproduction's verdict, from the run model (its `reproduction_compared`).
    if let Some(compared) = &timeline.facts.compared {
        let _ = write!(
            body,
            "<dt>Reproduction</dt><dd class=\"reproduction\">{}</dd>",
            escape(&apollo_replay::verdict_text(compared))
        );
    }
    for resume in &timeline.resumes {
        let _ = write!(
            body,
            "<dt>Resumed</dt><dd>{} on {} (pid {}), {} attempts abandoned</dd>",
            resume.ts.format("%Y-%m-%d %H:%M:%S UTC"),
            escape(&resume.host),
            resume.pid,
            resume.n_abandoned
        );
    }
    let id = escape(&encode(summary.id.as_str()));
    let compare = good.map_or_else(String::new, |good| {
        format!(
            "<a class=\"compare-good\" href=\"/diff?a={}&amp;b={id}\">compare with the last good run of the pipeline</a> · ",
            escape(&encode(good.as_str()))
        )
    });
    let history = summary
        .pipeline
        .as_deref()
        .map_or_else(String::new, |name| {
            format!(
                " · <a href=\"/history?pipeline={}\">history of the pipeline</a>",
                escape(&encode(name))
            )
        });
    let _ = write!(
        body,
        "</dl><p>{compare}<a href=\"/diff?b={id}\">compare with…</a>{history} · <a href=\"/api/runs/{id}\">JSON</a></p>"
    );
}

fn hooks_block(body: &mut String, hooks: &[apollo_core::event::HookFinished]) {
    if hooks.is_empty() {
        return;
    }
    body.push_str("<h2>Hooks</h2><table><thead><tr><th scope=\"col\">Hook</th><th scope=\"col\">Told</th><th scope=\"col\">Status</th><th scope=\"col\">Duration</th><th scope=\"col\">Error</th></tr></thead><tbody>");
    for hook in hooks {
        let status = hook.status.as_str();
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            escape(&hook.hook),
            escape(&hook.run_status),
            badge(status, status),
            html::duration(hook.duration_ms),
            escape(hook.error.as_deref().unwrap_or(""))
        );
    }
    body.push_str("</tbody></table>");
}

fn units_block(
    body: &mut String,
    id: &str,
    (timeline, cost): (&Timeline, Option<&RunCost>),
    query: &RunQuery,
) {
    let nonempty = |value: &Option<String>| value.clone().filter(|text| !text.is_empty());
    let (state, text) = (nonempty(&query.state), nonempty(&query.q));
    let shown: Vec<&UnitTimeline> = (timeline.units.iter())
        .filter(|unit| {
            state
                .as_deref()
                .is_none_or(|s| timeline.state_of(unit).as_str() == s)
        })
        .filter(|unit| text.as_deref().is_none_or(|t| unit.name.contains(t)))
        .collect();
    let n_pages = shown.len().div_ceil(UNITS_PER_PAGE).max(1);
    let page = query.page.unwrap_or(1).clamp(1, n_pages);
    let _ = write!(
        body,
        "<h2 id=\"units\">Units</h2><form class=\"filter\" method=\"get\" role=\"search\"><label>State <select name=\"state\"><option value=\"\">all</option>"
    );
    for unit_state in apollo_core::UnitState::ALL {
        let _ = write!(
            body,
            "<option value=\"{0}\"{1}>{2}</option>",
            unit_state.as_str(),
            if state.as_deref() == Some(unit_state.as_str()) {
                " selected"
            } else {
                ""
            },
            escape(unit_state.label())
        );
    }
    let _ = write!(
        body,
        "</select></label> <label>Name <input type=\"search\" name=\"q\" value=\"{}\"></label> <button type=\"submit\">Filter</button></form><p class=\"muted\">{} of {} units</p>",
        escape(text.as_deref().unwrap_or("")),
        shown.len(),
        timeline.units.len()
    );
    body.push_str("<table class=\"units\"><thead><tr><th scope=\"col\">Unit</th><th scope=\"col\">Status</th><th scope=\"col\">Attempts</th><th scope=\"col\">Duration</th><th scope=\"col\">Exit</th><th scope=\"col\">CPU</th><th scope=\"col\">Max RSS</th>");
    if cost.is_some() {
        body.push_str("<th scope=\"col\">Cost</th>");
    }
    body.push_str("<th scope=\"col\">Reused from</th></tr></thead><tbody>");
    for unit in shown
        .iter()
        .skip((page - 1) * UNITS_PER_PAGE)
        .take(UNITS_PER_PAGE)
    {
        unit_row(body, id, (timeline, cost), unit);
    }
    body.push_str("</tbody></table>");
    if n_pages > 1 {
        let link = |to: usize| {
            let mut href = format!("{}?page={to}", html::run_href(id));
            if let Some(state) = &state {
                let _ = write!(href, "&state={}", encode(state));
            }
            if let Some(text) = &text {
                let _ = write!(href, "&q={}", encode(text));
            }
            escape(&href)
        };
        body.push_str("<nav class=\"pager\" aria-label=\"unit pages\">");
        if page > 1 {
            let _ = write!(
                body,
                "<a href=\"{}#units\" rel=\"prev\">← previous</a> ",
                link(page - 1)
            );
        }
        let _ = write!(body, "units page {page} of {n_pages}");
        if page < n_pages {
            let _ = write!(
                body,
                " <a href=\"{}#units\" rel=\"next\">next →</a>",
                link(page + 1)
            );
        }
        body.push_str("</nav>");
    }
}

fn unit_row(
    body: &mut String,
    id: &str,
    (timeline, cost): (&Timeline, Option<&RunCost>),
    unit: &UnitTimeline,
) {
    let state = timeline.state_of(unit);
    let last = unit.last_attempt();
    let outcome = last.and_then(|attempt| attempt.outcome.as_ref());
    let exit = match last.and_then(apollo_runner::read::Attempt::exit) {
        Some(apollo_core::event::ExitStatus::Code(code)) => code.to_string(),
        Some(apollo_core::event::ExitStatus::Signal(signal)) => format!("signal {signal}"),
        None => String::new(),
    };
    let reused = unit.reused.as_ref().map_or_else(String::new, |reused| {
        // The outputs put back from the blob store to reuse it.
        let restored = if reused.restored.is_empty() {
            String::new()
        } else {
            format!(
                " · <span class=\"restored\">restored {}</span>",
                escape(&reused.restored.join(", "))
            )
        };
        format!(
            "<a href=\"{}\">{} #{}</a>{restored}",
            escape(&html::unit_href(
                &reused.from_run,
                &unit.name,
                Some(reused.from_attempt)
            )),
            escape(&reused.from_run),
            reused.from_attempt
        )
    });
    let _ = write!(
        body,
        "<tr class=\"s-{state}\"><td><a href=\"{href}\">{name}</a></td><td>{badge}</td><td class=\"num\">{attempts}</td><td class=\"num\">{duration}</td><td class=\"num\">{exit}</td><td class=\"num\">{cpu}</td><td class=\"num\">{rss}</td>{cost}<td>{reused}</td></tr>",
        state = state.as_str(),
        href = escape(&html::unit_href(id, &unit.name, None)),
        name = escape(&unit.name),
        badge = badge(state.as_str(), state.label()) + &late_badge(timeline.unit_deadline(unit)),
        attempts = unit.attempts.len(),
        duration = last.map_or_else(String::new, |a| html::duration(a.duration_ms())),
        cpu = outcome.map_or_else(String::new, |o| html::duration(
            o.user_cpu_ms + o.sys_cpu_ms
        )),
        rss = outcome.map_or_else(String::new, |o| format!("{} MiB", o.max_rss_kib / 1024)),
        cost = cost.map_or_else(String::new, |cost| cost_cell(cost, &unit.name)),
    );
}

/// A unit's cost cell: its attempts' cost (what was wasted beside it), or what a reuse saved.
fn cost_cell(cost: &RunCost, unit: &str) -> String {
    let Some(unit_cost) = cost.unit(unit) else {
        return "<td></td>".to_owned();
    };
    let mut cell = String::new();
    if !unit_cost.attempts.is_empty() {
        cell.push_str(&escape(&cost.show(unit_cost.total)));
    }
    if !unit_cost.wasted.is_zero() {
        let _ = write!(
            cell,
            " <span class=\"muted\">(wasted {})</span>",
            escape(&cost.show(unit_cost.wasted))
        );
    }
    if let Some(saved) = unit_cost.saved {
        let _ = write!(
            cell,
            "<span class=\"muted\">saved {}</span>",
            escape(&cost.show(saved))
        );
    }
    format!("<td class=\"num cost\">{cell}</td>")
}

/// `GET /runs/{run}/report`: apollo-replay's HTML report of the run (the Gantt of its
/// attempts), with the units' deps and timeouts from its definition snapshot.
pub(crate) async fn report(
    State(app): State<Arc<App>>,
    Path(run): Path<String>,
) -> Result<impl axum::response::IntoResponse, AppError> {
    blocking(&app, move |app| {
        let run = app.resolve(&run)?;
        let model = apollo_runner::read::run_model(&app.state, &run)?;
        let definition = apollo_runner::read::definition(&app.state, &run);
        let (mut timeouts, mut deps) = (
            std::collections::HashMap::new(),
            std::collections::HashMap::new(),
        );
        for unit in definition.iter().flat_map(|definition| &definition.units) {
            if let Some(ms) = unit.timeout.and_then(|t| u64::try_from(t.as_millis()).ok()) {
                timeouts.insert(unit.name.clone(), ms);
            }
            deps.insert(unit.name.clone(), unit.deps.clone());
        }
        let extras = apollo_replay::HtmlExtras::new()
            .timeouts_ms(timeouts)
            .deps(deps)
            .now(chrono::Utc::now());
        let mut page = Vec::new();
        apollo_replay::write_html_with(&model.timeline, &mut page, &extras).map_err(|error| {
            AppError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                error.to_string(),
            )
        })?;
        Ok((
            [(
                axum::http::header::CONTENT_SECURITY_POLICY,
                crate::app::REPORT_POLICY,
            )],
            Html(String::from_utf8_lossy(&page).into_owned()),
        ))
    })
    .await
}
