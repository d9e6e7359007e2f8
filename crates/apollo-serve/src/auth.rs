//! The token rule: every request shows the token — in the query (`?token=`, once: the answer
//! sets a cookie), in that cookie (HttpOnly, SameSite=Strict), or as `Authorization: Bearer`.
//! None: 401. A wrong one: 403.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::app::App;
use crate::error::AppError;

/// What a request offered.
enum Offered<'a> {
    Query(String),
    Other(&'a str),
}

pub(crate) async fn require_token(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Response {
    let api = request.uri().path().starts_with("/api/");
    let offered = offered(&app, &request).map(|offered| match offered {
        Offered::Query(token) => (token, true),
        Offered::Other(token) => (token.to_owned(), false),
    });
    let reject = |status: StatusCode, message: &str| {
        let error = AppError::new(status, message);
        let mut response = if api { error.json() } else { error }.into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"apollo serve\""),
        );
        response
    };
    let Some((token, from_query)) = offered else {
        return reject(
            StatusCode::UNAUTHORIZED,
            "this page needs the token: open the URL `apollo serve` printed (it ends in ?token=…)",
        );
    };
    if !app.token.matches(&token) {
        return reject(
            StatusCode::FORBIDDEN,
            "wrong token: open the URL the running `apollo serve` printed",
        );
    }
    let mut response = next.run(request).await;
    if from_query {
        let cookie = format!("{}={token}; Path=/; HttpOnly; SameSite=Strict", app.cookie);
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// The token a request offers: the query's, else the bearer header's, else the cookie's.
fn offered<'r>(app: &App, request: &'r Request) -> Option<Offered<'r>> {
    if let Some(query) = request.uri().query() {
        for pair in query.split('&') {
            if let Some(value) = pair.strip_prefix("token=") {
                return Some(Offered::Query(value.to_owned()));
            }
        }
    }
    let headers = request.headers();
    if let Some(value) = (headers.get(header::AUTHORIZATION)).and_then(|value| value.to_str().ok())
    {
        return Some(Offered::Other(
            value.strip_prefix("Bearer ").unwrap_or(value).trim(),
        ));
    }
    for value in headers.get_all(header::COOKIE) {
        let Ok(text) = value.to_str() else { continue };
        for pair in text.split(';') {
            if let Some((name, value)) = pair.trim().split_once('=')
                && name == app.cookie
            {
                return Some(Offered::Other(value));
            }
        }
    }
    None
}
