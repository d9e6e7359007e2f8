//! `/history?pipeline=NAME`: a pipeline's last runs × its units — each cell the unit's state
//! in that run, its last attempt's duration, and its attempts when it needed more than one —
//! so flaky and slow units stand out.

use std::fmt::Write;
use std::sync::Arc;

use apollo_runner::read::{Timeline, UnitStats};
use axum::extract::{Query, State};
use axum::response::Html;
use serde::Deserialize;

use crate::app::{App, blocking};
use crate::error::AppError;
use crate::html::{self, escape};

/// Runs shown by default, and at most.
const DEFAULT_RUNS: usize = 20;
const MAX_RUNS: usize = 100;

/// Which pipeline, how many runs.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct HistoryQuery {
    pipeline: Option<String>,
    runs: Option<usize>,
}

/// `GET /history`.
pub(crate) async fn page(
    State(app): State<Arc<App>>,
    Query(query): Query<HistoryQuery>,
) -> Result<Html<String>, AppError> {
    blocking(&app, move |app| {
        let Some(pipeline) = query.pipeline.filter(|name| !name.is_empty()) else {
            return Err(AppError::bad_request(
                "name the pipeline: /history?pipeline=NAME (the runs page links to it)",
            ));
        };
        let n_runs = query.runs.unwrap_or(DEFAULT_RUNS).clamp(1, MAX_RUNS);
        // Ordinary runs only, newest first (a reproduction is not the pipeline's history).
        let ids: Vec<apollo_store::RunId> = crate::views::runs::with_runs(app, |entries| {
            Ok((entries.iter().rev())
                .filter(|entry| {
                    entry.pipeline() == Some(pipeline.as_str()) && entry.kind().is_run()
                })
                .take(n_runs)
                .map(|entry| entry.id().clone())
                .collect())
        })?;
        let mut models = Vec::new();
        for id in &ids {
            // A run whose journal cannot be read is a column that says so.
            let model = apollo_runner::read::run_model(&app.state, id).ok();
            models.push((id.as_str().to_owned(), model.map(|model| model.timeline)));
        }
        let newest = ids.first();
        // `apollo stats`'s numbers over the same runs, with the newest run's timeouts.
        let timeouts = (newest.as_ref())
            .map(|newest| apollo_runner::read::timeouts(&app.state, newest))
            .unwrap_or_default();
        let stats = apollo_runner::read::unit_stats(
            models.iter().filter_map(|(_, model)| model.as_ref()),
            &timeouts,
        );
        Ok(Html(render(&pipeline, &models, &stats)))
    })
    .await
}

fn render(pipeline: &str, runs: &[(String, Option<Timeline>)], stats: &[UnitStats]) -> String {
    // Units: the newest run's order, then those only older runs have.
    let mut units: Vec<&str> = Vec::new();
    for (_, timeline) in runs {
        for unit in timeline.iter().flat_map(|timeline| &timeline.units) {
            if !units.contains(&unit.name.as_str()) {
                units.push(&unit.name);
            }
        }
    }
    let mut body = format!(
        "<h1>History of <span class=\"pipeline\">{}</span></h1><p class=\"muted\">The last {} runs, newest first; a cell is the unit's state, its last attempt's duration and, when it needed more than one, its attempts (a retried success is flaky).</p>",
        escape(pipeline),
        runs.len()
    );
    body.push_str(
        "<div class=\"scroll\"><table class=\"history\"><thead><tr><th scope=\"col\">Unit</th>",
    );
    for (id, _) in runs {
        let _ = write!(
            body,
            "<th scope=\"col\"><a href=\"{}\"><code>{}</code></a></th>",
            escape(&html::run_href(id)),
            escape(id.get(..15).unwrap_or(id))
        );
    }
    body.push_str("</tr></thead><tbody>");
    for name in &units {
        let _ = write!(body, "<tr><th scope=\"row\">{}</th>", escape(name));
        for (id, timeline) in runs {
            let Some(timeline) = timeline else {
                body.push_str("<td class=\"error\">unreadable</td>");
                continue;
            };
            let Some(unit) = timeline.unit(name) else {
                body.push_str("<td class=\"muted\">-</td>");
                continue;
            };
            let state = timeline.state_of(unit);
            let duration = unit
                .last_attempt()
                .map_or_else(String::new, |attempt| html::duration(attempt.duration_ms()));
            let retries = if unit.attempts.len() > 1 {
                format!(" ×{}", unit.attempts.len())
            } else {
                String::new()
            };
            let _ = write!(
                body,
                "<td><a class=\"cell s-{}\" href=\"{}\" title=\"{}\">{}{}</a></td>",
                state.as_str(),
                escape(&html::unit_href(id, name, None)),
                escape(state.label()),
                escape(&duration),
                escape(&retries)
            );
        }
        body.push_str("</tr>");
    }
    body.push_str("</tbody></table></div>");
    numbers(&mut body, stats);
    html::page(
        &html::Frame {
            title: &format!("history of {pipeline}"),
            crumbs: &[(
                "history",
                format!("/history?pipeline={}", html::encode(pipeline)),
            )],
            live: None,
        },
        &body,
    )
}

/// `apollo stats`'s table over the same runs: each unit's duration percentiles over its
/// successful attempts, how often it failed or was retried, its timeout and the advice on a
/// timeout far from its p95.
fn numbers(body: &mut String, stats: &[UnitStats]) {
    body.push_str(
        "<h2>Numbers</h2><p class=\"muted\">As <code>apollo stats</code> gives them: durations of successful attempts; a timeout below 1.5 × p95 or above 10 × p95 is flagged with the one that fits.</p><div class=\"scroll\"><table class=\"stats\"><thead><tr><th scope=\"col\">Unit</th><th scope=\"col\">Runs</th><th scope=\"col\">p50</th><th scope=\"col\">p95</th><th scope=\"col\">Max</th><th scope=\"col\">Failed</th><th scope=\"col\">Retried</th><th scope=\"col\">Timeout</th><th scope=\"col\">Advice</th></tr></thead><tbody>",
    );
    let duration = |ms: Option<u64>| ms.map_or_else(|| "-".to_owned(), html::duration);
    let percent = |rate: f64| format!("{:.0}%", rate * 100.0);
    for unit in stats {
        let advice = unit.advice(&html::duration).unwrap_or_default();
        let _ = write!(
            body,
            "<tr><th scope=\"row\">{}</th><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            escape(&unit.unit),
            unit.runs,
            escape(&duration(unit.p50_ms)),
            escape(&duration(unit.p95_ms)),
            escape(&duration(unit.max_ms)),
            percent(unit.failure_rate),
            percent(unit.retry_rate),
            escape(
                &unit
                    .timeout_ms
                    .map_or_else(|| "none".to_owned(), html::duration)
            ),
            escape(&advice)
        );
    }
    body.push_str("</tbody></table></div>");
}
