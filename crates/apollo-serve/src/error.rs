//! Errors: starting the server ([`ServeError`]), and a request's ([`AppError`], a 4xx or 5xx
//! page or JSON document, never a panic).

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::html;

/// Why `apollo serve` could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// There is no state directory at the path.
    #[error("no state directory at {path} (no runs/ folder)")]
    NoState {
        /// Where it looked.
        path: PathBuf,
    },
    /// The state directory could not be opened.
    #[error(transparent)]
    Store(#[from] apollo_store::StoreError),
    /// The address could not be bound.
    #[error("cannot listen on {address}: {error}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        error: std::io::Error,
    },
    /// The runtime or the listener failed.
    #[error("the web server failed: {0}")]
    Runtime(std::io::Error),
}

/// A request that cannot be answered: its status and what to tell the user.
#[derive(Debug)]
pub(crate) struct AppError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    /// Whether the answer is a JSON document (an `/api/` request) rather than a page.
    pub(crate) json: bool,
}

impl AppError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        AppError {
            status,
            message: message.into(),
            json: false,
        }
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        AppError::new(StatusCode::NOT_FOUND, message)
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        AppError::new(StatusCode::BAD_REQUEST, message)
    }

    /// The same error, answered as JSON.
    pub(crate) fn json(mut self) -> Self {
        self.json = true;
        self
    }
}

impl From<apollo_store::StoreError> for AppError {
    fn from(error: apollo_store::StoreError) -> Self {
        use apollo_store::ErrorKind;
        let status = match error.kind() {
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let message = match error.kind() {
            // Where it is damaged: the store's message names the file, offset and record.
            ErrorKind::Corruption => format!("this run's journal is damaged: {error}"),
            _ => error.to_string(),
        };
        AppError::new(status, message)
    }
}

impl From<apollo_runner::SelectError> for AppError {
    fn from(error: apollo_runner::SelectError) -> Self {
        use apollo_runner::SelectError;
        match error {
            SelectError::Store(error) => error.into(),
            SelectError::Ambiguous { spec, matches } => AppError::bad_request(format!(
                "`{spec}` matches {} runs: give more of the id",
                matches.len()
            )),
            other => AppError::not_found(format!("no such run: {other}")),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if self.json {
            let body = serde_json::json!({
                "schema": "apollo.serve_error/1",
                "status": self.status.as_u16(),
                "error": self.message,
            });
            return (self.status, axum::Json(body)).into_response();
        }
        let title = self.status.canonical_reason().unwrap_or("Error").to_owned();
        let body = format!(
            "<h1>{}</h1><p class=\"error\" role=\"alert\">{}</p><p><a href=\"/\">All runs</a></p>",
            html::escape(&title),
            html::escape(&self.message)
        );
        let page = html::page(
            &html::Frame {
                title: &title,
                crumbs: &[],
                live: None,
            },
            &body,
        );
        (self.status, axum::response::Html(page)).into_response()
    }
}
