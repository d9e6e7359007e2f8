//! The JSON endpoints: the same documents as the CLI's `--format json` (built by
//! apollo-runner's read side for both), and an attempt's captured output.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::app::{App, blocking};
use crate::error::AppError;

/// The schema of `GET /api/runs`: a page of runs, each as `apollo runs --format json` gives
/// it (`apollo.runs/2`'s items), newest first.
pub(crate) const RUNS_PAGE_SCHEMA: &str = "apollo.runs_page/1";

/// Runs on a page of `/api/runs` unless `?limit=` says otherwise, and at most.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1_000;

/// `GET /api/runs[?page=N&limit=M&pipeline=P&status=S&q=TEXT]`: the runs, newest first, a page
/// at a time (schema [`RUNS_PAGE_SCHEMA`]): `runs` (each item as in `apollo runs --format
/// json`), `page`, `limit`, `total` (runs matching the filter) and `next` (the next page's
/// path, or null). A page is built from the server's compact runs list, so its size — not the
/// number of runs — bounds what an answer holds.
pub(crate) async fn runs(
    State(app): State<Arc<App>>,
    Query(query): Query<crate::views::runs::RunsQuery>,
) -> Result<Json<serde_json::Value>, AppError> {
    blocking(&app, move |app| {
        let limit = query.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let page = query.page.unwrap_or(1).max(1);
        let pid = crate::views::runs::holder_pid(app);
        let now = chrono::Utc::now();
        crate::views::runs::with_runs(app, |entries| {
            let mut total = 0;
            let mut lines = Vec::new();
            for entry in entries.iter().rev() {
                if !crate::views::runs::matches(entry, &query) {
                    continue;
                }
                if total >= (page - 1).saturating_mul(limit) && lines.len() < limit {
                    lines.push(entry.line(pid, now));
                }
                total += 1;
            }
            let next = (page.saturating_mul(limit) < total).then(|| {
                let mut next = format!("/api/runs?page={}&limit={limit}", page + 1);
                for (name, value) in query.filter() {
                    next.push_str(&format!("&{name}={}", crate::html::encode(value)));
                }
                next
            });
            Ok(Json(serde_json::json!({
                "schema": RUNS_PAGE_SCHEMA,
                "runs": lines,
                "page": page,
                "limit": limit,
                "total": total,
                "next": next,
            })))
        })
    })
    .await
    .map_err(AppError::json)
}

/// `GET /api/runs/{run}`: `apollo show RUN --format json` (`apollo.show_run/3`).
pub(crate) async fn run(
    State(app): State<Arc<App>>,
    Path(run): Path<String>,
) -> Result<Json<serde_json::Value>, AppError> {
    blocking(&app, move |app| {
        let run = app.resolve(&run)?;
        let summary = app.state.run_summary(&run)?;
        let model = apollo_runner::read::run_model(&app.state, &run)?;
        let reads = apollo_runner::read::CostReads::new();
        let cost = apollo_runner::read::run_cost(&app.state, &model.timeline, &reads);
        Ok(Json(apollo_runner::read::show_run_document(
            &run,
            &summary,
            &model.timeline,
            cost.as_ref(),
        )))
    })
    .await
    .map_err(AppError::json)
}

/// `GET /api/runs/{run}/units/{unit}`: `apollo show RUN UNIT --format json`
/// (`apollo.show_unit/3`).
pub(crate) async fn unit(
    State(app): State<Arc<App>>,
    Path((run, unit)): Path<(String, String)>,
) -> Result<Json<serde_json::Value>, AppError> {
    blocking(&app, move |app| {
        let run = app.resolve(&run)?;
        let model = apollo_runner::read::run_model(&app.state, &run)?;
        let timeline = &model.timeline;
        let found = timeline
            .unit(&unit)
            .ok_or_else(|| unknown_unit(&run, &unit))?;
        let live = apollo_runner::read::live_holder_pid(&app.state, &run);
        let reads = apollo_runner::read::CostReads::new();
        let cost = apollo_runner::read::run_cost(&app.state, timeline, &reads);
        Ok(Json(apollo_runner::read::show_unit_document(
            &app.state,
            &run,
            (found, timeline.state_of(found)),
            live,
            cost.as_ref(),
            timeline.unit_deadline(found).as_ref(),
        )))
    })
    .await
    .map_err(AppError::json)
}

pub(crate) fn unknown_unit(run: &apollo_store::RunId, unit: &str) -> AppError {
    AppError::not_found(format!("run {run} has no unit `{unit}`"))
}

/// Which output of which attempt.
#[derive(Debug, Deserialize)]
pub(crate) struct LogQuery {
    /// The attempt [default: the last].
    attempt: Option<u32>,
    /// `stdout` [default] or `stderr`.
    stream: Option<String>,
    /// At most this many bytes from the end [default: 64 KiB, at most 4 MiB].
    bytes: Option<u64>,
}

/// How much of an attempt's output the log endpoint gives at most.
const MAX_LOG_BYTES: u64 = 4 * 1024 * 1024;

/// `GET /api/runs/{run}/units/{unit}/log`: the end of an attempt's stdout or stderr, as text
/// (`apollo logs RUN UNIT [--stderr] [--attempt N]`, its last bytes).
pub(crate) async fn log(
    State(app): State<Arc<App>>,
    Path((run, unit)): Path<(String, String)>,
    Query(query): Query<LogQuery>,
) -> Result<Response, AppError> {
    blocking(&app, move |app| {
        let stream = match query.stream.as_deref() {
            None | Some("stdout") => apollo_runner::read::LogStream::Stdout,
            Some("stderr") => apollo_runner::read::LogStream::Stderr,
            Some(other) => {
                return Err(AppError::bad_request(format!(
                    "stream `{other}`: write stdout or stderr"
                )));
            }
        };
        let run = app.resolve(&run)?;
        let model = apollo_runner::read::run_model(&app.state, &run)?;
        let found = model
            .timeline
            .unit(&unit)
            .ok_or_else(|| unknown_unit(&run, &unit))?;
        let attempt = attempt_of(found, query.attempt, &run)?;
        let bytes = query.bytes.unwrap_or(64 * 1024).min(MAX_LOG_BYTES);
        let tail =
            apollo_runner::read::tail(&app.state, &run, (&found.name, attempt), stream, bytes)?;
        let (text, len) = tail.map_or((String::new(), 0), |tail| {
            (String::from_utf8_lossy(&tail.bytes).into_owned(), tail.len)
        });
        Ok((
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
                (
                    header::HeaderName::from_static("x-apollo-log-length"),
                    len.to_string(),
                ),
            ],
            text,
        )
            .into_response())
    })
    .await
    .map_err(AppError::json)
}

/// The attempt `asked` of `unit` (its last when none), or a 404 naming what it has.
pub(crate) fn attempt_of(
    unit: &apollo_runner::read::UnitTimeline,
    asked: Option<u32>,
    run: &apollo_store::RunId,
) -> Result<u32, AppError> {
    match asked {
        Some(number) if unit.attempts.iter().any(|a| a.number == number) => Ok(number),
        Some(number) => Err(AppError::not_found(format!(
            "unit `{}` has no attempt {number} in run {run} (it has {})",
            unit.name,
            unit.attempts.len()
        ))),
        None => unit.last_attempt().map(|a| a.number).ok_or_else(|| {
            AppError::not_found(format!(
                "unit `{}` never started in run {run}: it has no attempts",
                unit.name
            ))
        }),
    }
}

/// Two runs to compare.
#[derive(Debug, Deserialize)]
pub(crate) struct DiffQuery {
    pub(crate) a: Option<String>,
    pub(crate) b: Option<String>,
}

/// `GET /api/diff?a=RUN&b=RUN`: `apollo diff A B --format json`.
pub(crate) async fn diff(
    State(app): State<Arc<App>>,
    Query(query): Query<DiffQuery>,
) -> Result<Response, AppError> {
    blocking(&app, move |app| {
        let (Some(a), Some(b)) = (&query.a, &query.b) else {
            return Err(AppError::bad_request(
                "give the two runs to compare: /api/diff?a=RUN&b=RUN",
            ));
        };
        let (a, b) = (app.resolve(a)?, app.resolve(b)?);
        let (diff, _) = apollo_runner::read::diff(&app.state, &a, &b)?;
        let mut body = Vec::new();
        apollo_replay::write_diff_json(&diff, &mut body).map_err(|error| {
            AppError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                error.to_string(),
            )
        })?;
        Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
    })
    .await
    .map_err(AppError::json)
}
