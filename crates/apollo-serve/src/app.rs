//! The application: the state directory it reads, the routes, and running a read off the
//! async thread.

use std::sync::{Arc, Mutex};

use apollo_store::{RunId, StateDir};
use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::error::AppError;
use crate::token::Token;
use crate::{api, auth, html, live, views};

/// What every request shares.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) state: StateDir,
    pub(crate) token: Token,
    /// The cookie that carries the token (named after the port: two servers on one host keep
    /// their own).
    pub(crate) cookie: String,
    /// The runs index and counts remembered between listings (`serve` never writes the
    /// index, so it keeps what it learns in memory).
    pub(crate) runs: Mutex<apollo_runner::read::RunsCache>,
    /// Set when the server stops: open event streams end.
    stopping: tokio::sync::watch::Sender<bool>,
}

impl App {
    pub(crate) fn new(state: StateDir, token: Token, port: u16) -> Self {
        App {
            state,
            token,
            cookie: format!("apollo_token_{port}"),
            runs: Mutex::new(apollo_runner::read::RunsCache::default()),
            stopping: tokio::sync::watch::channel(false).0,
        }
    }

    /// Ends the event streams.
    pub(crate) fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// A receiver that changes when the server stops.
    pub(crate) fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// The run a URL names, through apollo-runner's selector (an id, a unique prefix or
    /// suffix, `latest`, `latest~N`, `last-success`): no other path from a URL reaches the
    /// state directory.
    pub(crate) fn resolve(&self, spec: &str) -> Result<RunId, AppError> {
        // A full id the runs list holds (every link the pages make) needs no listing of the
        // state directory; anything else goes through the selector.
        if let Ok(id) = spec.parse::<RunId>()
            && let Ok(cache) = self.runs.lock()
            && cache.contains(&id)
        {
            return Ok(id);
        }
        let selector: apollo_runner::RunSelector =
            spec.parse().map_err(|error: apollo_runner::BadSelector| {
                AppError::bad_request(error.to_string())
            })?;
        Ok(selector.resolve(&self.state)?)
    }
}

/// Runs `read` on a blocking thread: journals are read with blocking I/O, which must not hold
/// up the one thread that serves every connection.
pub(crate) async fn blocking<T: Send + 'static>(
    app: &Arc<App>,
    read: impl FnOnce(&App) -> Result<T, AppError> + Send + 'static,
) -> Result<T, AppError> {
    let app = app.clone();
    tokio::task::spawn_blocking(move || read(&app))
        .await
        .map_err(|error| {
            AppError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("reading the state directory failed: {error}"),
            )
        })?
}

/// Every route; all behind the token.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(views::runs::page))
        .route("/runs/{run}", get(views::run::page))
        .route("/runs/{run}/report", get(views::run::report))
        .route("/runs/{run}/units/{unit}", get(views::attempt::page))
        .route("/runs/{run}/events", get(live::events))
        .route("/events", get(live::runs_events))
        .route("/diff", get(views::diff::page))
        .route("/history", get(views::history::page))
        .route("/api/runs", get(api::runs))
        .route("/api/runs/{run}", get(api::run))
        .route("/api/runs/{run}/units/{unit}", get(api::unit))
        .route("/api/runs/{run}/units/{unit}/log", get(api::log))
        .route("/api/diff", get(api::diff))
        .route("/assets/app.css", get(css))
        .route("/assets/app.js", get(js))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            auth::require_token,
        ))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(app)
}

async fn not_found(uri: axum::http::Uri) -> AppError {
    let error = AppError::not_found(format!("nothing at {}", uri.path()));
    if uri.path().starts_with("/api/") {
        error.json()
    } else {
        error
    }
}

async fn css() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        html::STYLE,
    )
}

async fn js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        html::SCRIPT,
    )
}

/// The content policy of the pages: scripts, styles and everything else from this server only.
const PAGE_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'self'; form-action 'self'; base-uri 'none'";

/// The replay report's: its script and style are inline (it is also a standalone file).
pub(crate) const REPORT_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'; base-uri 'none'";

/// Headers on every answer: no caching of pages holding private data, no framing by other
/// sites, no sniffing, and a content policy allowing only this server's own scripts.
async fn security_headers(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    // The pages run only this server's own script; the replay report (`/runs/{run}/report`)
    // sets its own policy, for its inline one.
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(PAGE_POLICY));
    response
}
