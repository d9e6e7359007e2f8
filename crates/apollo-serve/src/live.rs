//! `/runs/{run}/events`: server-sent events that tell a page its run moved on; `/events`, the
//! runs list's: a run started, moved on or ended. The server
//! looks at the journal's length (and, for an attempt's page, its captured output's) every
//! 250 ms — a `stat`, not a read — and sends `changed` when it grew; `ended` once no apollo
//! writes the run any more. The page then fetches itself again (`assets/app.js`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use apollo_runner::read::LogStream;
use apollo_store::RunId;
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;

use crate::app::{App, blocking};
use crate::error::AppError;

/// How often the journal's length is looked at.
pub(crate) const POLL: Duration = Duration::from_millis(250);

/// How many polls between two looks at whether the run's apollo is still alive.
const LIVE_EVERY: u32 = 4;

/// An attempt whose output to follow too.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct EventsQuery {
    unit: Option<String>,
    attempt: Option<u32>,
}

/// What is followed, and how far it was.
struct Follow {
    app: Arc<App>,
    run: RunId,
    attempt: Option<(String, u32)>,
    last: Vec<u64>,
    polls: u32,
    ended: bool,
    stopping: tokio::sync::watch::Receiver<bool>,
}

impl Follow {
    /// The journal's length, then the attempt's stdout and stderr lengths.
    fn measure(&self) -> Vec<u64> {
        let state = &self.app.state;
        let mut lens = vec![apollo_runner::read::journal_len(state, &self.run).unwrap_or(0)];
        if let Some((unit, attempt)) = &self.attempt {
            for stream in [LogStream::Stdout, LogStream::Stderr] {
                let len = apollo_runner::read::tail(state, &self.run, (unit, *attempt), stream, 0)
                    .ok()
                    .flatten()
                    .map_or(0, |tail| tail.len);
                lens.push(len);
            }
        }
        lens
    }

    fn live(&self) -> bool {
        apollo_runner::read::live_holder_pid(&self.app.state, &self.run).is_some()
    }

    /// The next event: `changed` when something grew, `ended` when the run's apollo is gone
    /// and nothing grew since; `None` when done or the server stops.
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Follow)> {
        if self.ended {
            return None;
        }
        loop {
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                _ = self.stopping.changed() => return None,
            }
            self.polls += 1;
            let now = self.measure();
            if now != self.last {
                self.last = now;
                return Some((Ok(changed(&self.last)), self));
            }
            if self.polls.is_multiple_of(LIVE_EVERY) && !self.live() {
                // Its last records may have landed between the measure and the look at the
                // lock: measure once more before saying it ended.
                let now = self.measure();
                if now != self.last {
                    self.last = now;
                    return Some((Ok(changed(&self.last)), self));
                }
                self.ended = true;
                return Some((Ok(Event::default().event("ended").data("ended")), self));
            }
        }
    }
}

fn changed(lens: &[u64]) -> Event {
    let data: Vec<String> = lens.iter().map(u64::to_string).collect();
    Event::default().event("changed").data(data.join(" "))
}

/// `GET /runs/{run}/events[?unit=U&attempt=N]`.
pub(crate) async fn events(
    State(app): State<Arc<App>>,
    Path(run): Path<String>,
    Query(query): Query<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, AppError> {
    let (run, attempt) = blocking(&app, move |app| {
        let run = app.resolve(&run)?;
        let attempt = match (query.unit, query.attempt) {
            (Some(unit), Some(attempt)) if attempt > 0 => {
                // The unit is looked up in the run model: a URL names no path.
                let model = apollo_runner::read::run_model(&app.state, &run)?;
                let found = (model.timeline.unit(&unit))
                    .ok_or_else(|| crate::api::unknown_unit(&run, &unit))?;
                Some((found.name.clone(), attempt))
            }
            _ => None,
        };
        Ok((run, attempt))
    })
    .await?;
    let mut follow = Follow {
        stopping: app.stopping(),
        app,
        run,
        attempt,
        last: Vec::new(),
        polls: 0,
        ended: false,
    };
    follow.last = follow.measure();
    let hello = Event::default().event("hello").data(
        follow
            .last
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" "),
    );
    let first = futures_util::stream::once(async move { Ok(hello) });
    let rest = futures_util::stream::unfold(follow, Follow::next);
    Ok(Sse::new(futures_util::StreamExt::chain(first, rest)).keep_alive(KeepAlive::default()))
}

/// `GET /events`: the runs page's event stream: `changed` when a run started, moved on or
/// ended ([`apollo_runner::read::runs_fingerprint`]: a `stat`, the lock probe that takes no
/// lock, a journal's length; looked at every [`POLL`]). It never says `ended`: new runs may
/// start at any time.
pub(crate) async fn runs_events(
    State(app): State<Arc<App>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stopping = app.stopping();
    let first = apollo_runner::read::runs_fingerprint(&app.state);
    let hello =
        futures_util::stream::once(async { Ok(Event::default().event("hello").data("runs")) });
    let rest = futures_util::stream::unfold(
        (app, first, stopping),
        |(app, mut last, mut stopping)| async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(POLL) => {}
                    _ = stopping.changed() => return None,
                }
                let now = apollo_runner::read::runs_fingerprint(&app.state);
                if now != last {
                    last = now;
                    let event = Event::default().event("changed").data(now.to_string());
                    return Some((Ok(event), (app, last, stopping)));
                }
            }
        },
    );
    Sse::new(futures_util::StreamExt::chain(hello, rest)).keep_alive(KeepAlive::default())
}
