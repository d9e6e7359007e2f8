//! `/`: every run, newest first, paginated, filtered by pipeline, status and text.

use std::fmt::Write;
use std::sync::Arc;

use apollo_runner::read::{RunEntry, RunLine};
use apollo_store::RunId;
use axum::extract::{Query, State};
use axum::response::Html;
use serde::Deserialize;

use super::{counts_badges, params_html, status_badge};
use crate::app::{App, blocking};
use crate::error::AppError;
use crate::html::{self, encode, escape};

/// Runs on one page.
pub(crate) const PAGE_SIZE: usize = 50;

/// The runs page's filter.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RunsQuery {
    /// Only runs of this pipeline.
    pipeline: Option<String>,
    /// Only runs with this status.
    status: Option<String>,
    /// Only runs whose id, pipeline or params contain this text.
    q: Option<String>,
    /// The page, from 1.
    pub(crate) page: Option<usize>,
    /// Runs on a page of `/api/runs` (the runs page shows [`PAGE_SIZE`]).
    pub(crate) limit: Option<usize>,
}

impl RunsQuery {
    /// The filter's non-empty fields, by name (for links to other pages of it).
    pub(crate) fn filter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("pipeline", &self.pipeline),
            ("status", &self.status),
            ("q", &self.q),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value.as_deref().filter(|v| !v.is_empty())?)))
    }
}

/// Every run, oldest first, as the server's [`RunsCache`] keeps them (compact entries;
/// `serve` never writes the runs index), given to `read` while the cache is held.
///
/// [`RunsCache`]: apollo_runner::read::RunsCache
pub(crate) fn with_runs<T>(
    app: &App,
    read: impl FnOnce(&[RunEntry]) -> Result<T, AppError>,
) -> Result<T, AppError> {
    let mut cache = match app.runs.lock() {
        Ok(cache) => cache,
        // A listing that panicked mid-way left nothing wrong behind: start afresh.
        Err(poisoned) => {
            let mut cache = poisoned.into_inner();
            *cache = apollo_runner::read::RunsCache::default();
            cache
        }
    };
    read(cache.refresh(&app.state)?)
}

/// The pid of the apollo writing a run now, if one is (shown on a running run's line).
pub(crate) fn holder_pid(app: &App) -> Option<u32> {
    apollo_runner::read::writer_pid(&app.state)
}

/// The newest ordinary run of `pipeline` older than `run` that succeeded: "the last good
/// run" a failed unit's page compares with.
pub(crate) fn last_good(app: &App, pipeline: &str, run: &RunId) -> Result<Option<RunId>, AppError> {
    with_runs(app, |entries| {
        let older = entries
            .iter()
            .position(|entry| entry.id() == run)
            .map_or(entries, |at| &entries[..at]);
        Ok(older
            .iter()
            .rev()
            .find(|entry| {
                entry.pipeline() == Some(pipeline)
                    && entry.kind().is_run()
                    && entry.state() == apollo_store::RunState::Succeeded
            })
            .map(|entry| entry.id().clone()))
    })
}

/// `GET /`.
pub(crate) async fn page(
    State(app): State<Arc<App>>,
    Query(query): Query<RunsQuery>,
) -> Result<Html<String>, AppError> {
    blocking(&app, move |app| {
        let pid = holder_pid(app);
        with_runs(app, |entries| Ok(Html(render(entries, pid, &query))))
    })
    .await
}

/// Whether `entry` passes the filter of `query`.
pub(crate) fn matches(entry: &RunEntry, query: &RunsQuery) -> bool {
    let nonempty = |value: &Option<String>| value.clone().filter(|text| !text.is_empty());
    if let Some(pipeline) = nonempty(&query.pipeline)
        && entry.pipeline() != Some(pipeline.as_str())
    {
        return false;
    }
    if let Some(status) = nonempty(&query.status)
        && entry.state().as_str() != status
    {
        return false;
    }
    if let Some(text) = nonempty(&query.q) {
        let text = text.to_lowercase();
        let in_params = entry.params().iter().any(|(name, value)| {
            name.to_lowercase().contains(&text) || value.to_string().to_lowercase().contains(&text)
        });
        return entry.id().as_str().to_lowercase().contains(&text)
            || entry
                .pipeline()
                .is_some_and(|p| p.to_lowercase().contains(&text))
            || in_params;
    }
    true
}

pub(crate) fn render(entries: &[RunEntry], pid: Option<u32>, query: &RunsQuery) -> String {
    let now = chrono::Utc::now();
    let shown: Vec<&RunEntry> = entries
        .iter()
        .rev()
        .filter(|entry| matches(entry, query))
        .collect();
    let n_pages = shown.len().div_ceil(PAGE_SIZE).max(1);
    let page = query.page.unwrap_or(1).clamp(1, n_pages);
    let mut body = String::from("<h1>Runs</h1>");
    body.push_str(&filter_form(entries, query));
    let history = (query.pipeline.as_deref())
        .filter(|name| !name.is_empty())
        .map_or_else(String::new, |name| {
            format!(
                " · <a href=\"/history?pipeline={}\">history of {}</a>",
                escape(&encode(name)),
                escape(name)
            )
        });
    let _ = write!(
        body,
        "<p class=\"muted\">{} of {} runs, newest first · <a href=\"/diff\">compare two runs</a>{history}</p>",
        shown.len(),
        entries.len()
    );
    body.push_str(
        "<table class=\"runs\"><thead><tr><th scope=\"col\">Run</th><th scope=\"col\">Pipeline</th><th scope=\"col\">Started (UTC)</th><th scope=\"col\">Duration</th><th scope=\"col\">Status</th><th scope=\"col\">Units</th><th scope=\"col\">Params</th></tr></thead><tbody>",
    );
    for entry in shown.iter().skip((page - 1) * PAGE_SIZE).take(PAGE_SIZE) {
        row(&mut body, &entry.line(pid, now));
    }
    body.push_str("</tbody></table>");
    if shown.is_empty() {
        body.push_str(if entries.is_empty() {
            "<p>No runs yet: start one with <code>apollo run</code>.</p>"
        } else {
            "<p>No run matches the filter.</p>"
        });
    }
    body.push_str(&pager(page, n_pages, query));
    html::page(
        &html::Frame {
            title: "Runs",
            crumbs: &[],
            // The list follows runs as they start, move on and end (`/events`).
            live: Some("/events".to_owned()),
        },
        &body,
    )
}

fn row(body: &mut String, line: &RunLine) {
    let duration = line.duration_ms.map_or_else(
        || "-".to_owned(),
        |ms| html::duration(ms.max(0).unsigned_abs()),
    );
    let kind = if line.kind == "run" {
        String::new()
    } else {
        format!(" <span class=\"kind\">{}</span>", escape(line.kind))
    };
    let problem = line.problem.as_deref().map_or_else(String::new, |problem| {
        format!("<div class=\"error\">{}</div>", escape(problem))
    });
    let _ = write!(
        body,
        "<tr class=\"r-{status}\"><td><a href=\"{href}\"><code>{id}</code></a>{kind}</td><td>{pipeline}</td><td>{started}</td><td class=\"num\">{duration}</td><td>{badge}</td><td>{units} <span class=\"muted\">of {n}</span>{problem}</td><td>{params}</td></tr>",
        status = escape(line.status),
        href = escape(&html::run_href(&line.id)),
        id = escape(&line.id),
        pipeline = escape(line.pipeline.as_deref().unwrap_or("?")),
        started = line.started.map_or_else(
            || "-".to_owned(),
            |ts| ts.format("%Y-%m-%d %H:%M:%S").to_string()
        ),
        badge = status_badge(line.status),
        units = counts_badges(&line.counts),
        n = line.units,
        params = params_html(&line.params),
    );
}

fn filter_form(entries: &[RunEntry], query: &RunsQuery) -> String {
    // Only the distinct names are held (a few), not one per run.
    let pipelines: std::collections::BTreeSet<&str> =
        entries.iter().filter_map(RunEntry::pipeline).collect();
    let selected = |value: &str, current: &Option<String>| {
        if current.as_deref() == Some(value) {
            " selected"
        } else {
            ""
        }
    };
    let mut form = String::from(
        "<form class=\"filter\" method=\"get\" action=\"/\" role=\"search\"><label>Pipeline <select name=\"pipeline\"><option value=\"\">all</option>",
    );
    for pipeline in pipelines {
        let _ = write!(
            form,
            "<option value=\"{0}\"{1}>{0}</option>",
            escape(pipeline),
            selected(pipeline, &query.pipeline)
        );
    }
    form.push_str(
        "</select></label> <label>Status <select name=\"status\"><option value=\"\">all</option>",
    );
    for status in [
        "running",
        "succeeded",
        "failed",
        "interrupted",
        "incomplete",
        "corrupt",
        "unknown",
    ] {
        let _ = write!(
            form,
            "<option{}>{status}</option>",
            selected(status, &query.status)
        );
    }
    let _ = write!(
        form,
        "</select></label> <label>Text <input type=\"search\" name=\"q\" value=\"{}\" placeholder=\"id, pipeline, param\"></label> <button type=\"submit\">Filter</button></form>",
        escape(query.q.as_deref().unwrap_or(""))
    );
    form
}

fn pager(page: usize, n_pages: usize, query: &RunsQuery) -> String {
    if n_pages <= 1 {
        return String::new();
    }
    let link = |to: usize| {
        let mut href = format!("/?page={to}");
        for (name, value) in [
            ("pipeline", &query.pipeline),
            ("status", &query.status),
            ("q", &query.q),
        ] {
            if let Some(value) = value {
                let _ = write!(href, "&{name}={}", encode(value));
            }
        }
        escape(&href)
    };
    let mut out = String::from("<nav class=\"pager\" aria-label=\"pages\">");
    if page > 1 {
        let _ = write!(
            out,
            "<a href=\"{}\" rel=\"prev\">← newer</a> ",
            link(page - 1)
        );
    }
    let _ = write!(out, "page {page} of {n_pages}");
    if page < n_pages {
        let _ = write!(
            out,
            " <a href=\"{}\" rel=\"next\">older →</a>",
            link(page + 1)
        );
    }
    out.push_str("</nav>");
    out
}
