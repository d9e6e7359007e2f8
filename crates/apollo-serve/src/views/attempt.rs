//! `/runs/{run}/units/{unit}?attempt=N`: one unit of a run and one of its attempts — the
//! command as recorded, its env (a secret by name and source, never a value), inputs and
//! outputs with hashes and whether their blobs are kept, phases, the end of its stdout and
//! stderr (followed live while it runs), and the `apollo reproduce` command to paste.

use std::fmt::Write;
use std::sync::Arc;

use apollo_core::capture::FileEntry;
use apollo_core::event::{FileSide, InputKind, SkipReason};
use apollo_runner::read::{Attempt, AttemptState, LogStream, RecordedFiles, UnitTimeline};
use apollo_store::{RunId, StateDir};
use axum::extract::{Path, Query, State};
use axum::response::Html;
use serde::Deserialize;

use crate::api::{attempt_of, unknown_unit};
use crate::app::{App, blocking};
use crate::error::AppError;
use crate::html::{self, badge, escape};

/// How much of each captured stream the page shows.
const TAIL_BYTES: u64 = 64 * 1024;

/// Which attempt.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct AttemptQuery {
    attempt: Option<u32>,
}

/// `GET /runs/{run}/units/{unit}`.
pub(crate) async fn page(
    State(app): State<Arc<App>>,
    Path((run, unit)): Path<(String, String)>,
    Query(query): Query<AttemptQuery>,
) -> Result<Html<String>, AppError> {
    blocking(&app, move |app| {
        let run = app.resolve(&run)?;
        let model = apollo_runner::read::run_model(&app.state, &run)?;
        let timeline = &model.timeline;
        let found = timeline.unit(&unit).ok_or_else(|| unknown_unit(&run, &unit))?;
        let number = match query.attempt {
            None if found.attempts.is_empty() => None,
            asked => Some(attempt_of(found, asked, &run)?),
        };
        let recorded = apollo_runner::read::recorded_files(&app.state, &run, &found.name)?;
        let state = timeline.state_of(found);
        let mut body = String::new();
        let _ = write!(
            body,
            "<h1>Unit <span class=\"unit\">{}</span> {}</h1><p>of run <a href=\"{}\"><code>{}</code></a></p>",
            escape(&found.name),
            badge(state.as_str(), state.label()),
            escape(&html::run_href(run.as_str())),
            escape(run.as_str())
        );
        if matches!(
            state,
            apollo_core::UnitState::Failed
                | apollo_core::UnitState::CutOff
                | apollo_core::UnitState::NeedsVerdict
        ) {
            let good = match timeline.pipeline.as_deref() {
                Some(pipeline) => crate::views::runs::last_good(app, pipeline, &run)?,
                None => None,
            };
            body.push_str(&failed_links(run.as_str(), &found.name, number, good.as_ref()));
        }
        definition_block(&mut body, &recorded, &found.name);
        notes_block(&mut body, found);
        if let Some(number) = number {
            attempts_nav(&mut body, run.as_str(), found, number);
            if let Some(attempt) = found.attempts.iter().find(|a| a.number == number) {
                attempt_block(&mut body, app, &run, found, attempt, &recorded);
            }
        }
        let live = timeline.live.then(|| {
            format!(
                "{}/events?unit={}&attempt={}",
                html::run_href(run.as_str()),
                html::encode(&found.name),
                number.unwrap_or(0)
            )
        });
        let href = html::unit_href(run.as_str(), &found.name, None);
        Ok(Html(html::page(
            &html::Frame {
                title: &format!("{} · {}", found.name, run.as_str()),
                crumbs: &[
                    (run.as_str(), html::run_href(run.as_str())),
                    (found.name.as_str(), href),
                ],
                live,
            },
            &body,
        )))
    })
    .await
}

/// What a failed unit's page offers first: its stderr, and the diff with the last good run of
/// the same pipeline (or why there is none).
fn failed_links(run: &str, unit: &str, attempt: Option<u32>, good: Option<&RunId>) -> String {
    let stderr = attempt.map_or_else(String::new, |number| {
        format!(
            "<a href=\"#stderr\">its stderr</a> (attempt {number}, <a href=\"{}\">all of it</a>) · ",
            escape(&format!(
                "/api/runs/{}/units/{}/log?stream=stderr&attempt={number}&bytes=4194304",
                html::encode(run),
                html::encode(unit)
            ))
        )
    });
    let compare = good.map_or_else(
        || "<span class=\"muted\">no earlier successful run of this pipeline to compare with</span>".to_owned(),
        |good| {
            format!(
                "<a class=\"compare-good\" href=\"/diff?a={}&amp;b={}\">compare with the last good run</a> <code>{}</code>",
                escape(&html::encode(good.as_str())),
                escape(&html::encode(run)),
                escape(good.as_str())
            )
        },
    );
    format!("<p class=\"failed-links\">See {stderr}{compare}</p>")
}

fn definition_block(body: &mut String, recorded: &RecordedFiles, unit: &str) {
    let Some(defined) = (recorded.definition.iter())
        .flat_map(|definition| &definition.units)
        .find(|defined| defined.name == unit)
    else {
        body.push_str("<p class=\"muted\">The run's definition snapshot is not kept: its commands cannot be shown.</p>");
        return;
    };
    body.push_str("<h2>As recorded</h2><dl class=\"facts\">");
    let commands = [
        ("when", defined.when_command.as_ref()),
        ("prepare", defined.prepare.as_ref()),
        ("execute", Some(&defined.execute)),
        ("cleanup", defined.cleanup.as_ref()),
    ];
    for (phase, command) in commands {
        if let Some(command) = command {
            let _ = write!(
                body,
                "<dt>{phase}</dt><dd><pre class=\"command\">{}</pre></dd>",
                escape(&command.display())
            );
        }
    }
    let _ = write!(
        body,
        "<dt>workdir</dt><dd><code>{}</code></dd>",
        escape(&defined.workdir.display().to_string())
    );
    for (name, value) in &defined.env {
        let _ = write!(
            body,
            "<dt>env</dt><dd><code>{}={}</code></dd>",
            escape(name),
            escape(value)
        );
    }
    // A secret is written down by name and source only: its value never reaches the journal,
    // the snapshot or this page.
    for (name, source) in &defined.secrets {
        let _ = write!(
            body,
            "<dt>secret</dt><dd><code>{}</code> from {} <span class=\"muted\">(value never recorded)</span></dd>",
            escape(name),
            escape(&source.describe())
        );
    }
    body.push_str("</dl>");
}

fn notes_block(body: &mut String, unit: &UnitTimeline) {
    for skip in &unit.skips {
        let why = match &skip.reason {
            SkipReason::UpstreamFailed { upstream } => format!("upstream `{upstream}` failed"),
            SkipReason::Interrupted => "the run was interrupted before it started".to_owned(),
            SkipReason::When { condition } => {
                format!("when: {condition} is false (apollo skipped it; nothing ran)")
            }
        };
        let _ = write!(
            body,
            "<p>Skipped at {}: {}</p>",
            skip.ts.format("%Y-%m-%d %H:%M:%S UTC"),
            escape(&why)
        );
    }
    if let Some(reused) = &unit.reused {
        // The outputs put back from the blob store to reuse it.
        let restored = if reused.restored.is_empty() {
            String::new()
        } else {
            let paths = reused.restored.join(", ");
            format!(
                " <span class=\"restored\">Restored {}</span> from the blob store.",
                escape(&paths)
            )
        };
        let _ = write!(
            body,
            "<p>Reused at {}: inputs identical to <a href=\"{}\">run {} attempt {}</a> (input <code>{}</code>, output <code>{}</code>).{restored}</p>",
            reused.ts.format("%Y-%m-%d %H:%M:%S UTC"),
            escape(&html::unit_href(
                &reused.from_run,
                &unit.name,
                Some(reused.from_attempt)
            )),
            escape(&reused.from_run),
            reused.from_attempt,
            escape(&reused.input_hash),
            escape(&reused.output_hash)
        );
    }
    for mark in &unit.marks {
        let _ = write!(
            body,
            "<p>Attempt {} marked <strong>{}</strong> by {} at {}{}</p>",
            mark.attempt,
            escape(mark.verdict.as_str()),
            escape(&mark.by),
            mark.ts.format("%Y-%m-%d %H:%M:%S UTC"),
            mark.note
                .as_deref()
                .map(|note| format!(": {}", escape(note)))
                .unwrap_or_default()
        );
    }
}

fn attempts_nav(body: &mut String, run: &str, unit: &UnitTimeline, shown: u32) {
    body.push_str("<nav class=\"attempts\" aria-label=\"attempts\">Attempts: ");
    for attempt in &unit.attempts {
        if attempt.number == shown {
            let _ = write!(
                body,
                "<strong aria-current=\"page\">#{}</strong> ",
                attempt.number
            );
        } else {
            let _ = write!(
                body,
                "<a href=\"{}\">#{}</a> ",
                escape(&html::unit_href(run, &unit.name, Some(attempt.number))),
                attempt.number
            );
        }
    }
    body.push_str("</nav>");
}

fn attempt_state(attempt: &Attempt, live: bool) -> &'static str {
    match attempt.state {
        AttemptState::Unfinished if live => "running",
        AttemptState::Unfinished => "cut_off",
        _ => attempt.state.as_str(),
    }
}

fn attempt_block(
    body: &mut String,
    app: &App,
    run: &RunId,
    unit: &UnitTimeline,
    attempt: &Attempt,
    recorded: &RecordedFiles,
) {
    let live = apollo_runner::read::live_holder_pid(&app.state, run).is_some();
    let state = attempt_state(attempt, live);
    let exit = match attempt.exit() {
        Some(apollo_core::event::ExitStatus::Code(code)) => format!("exit {code}"),
        Some(apollo_core::event::ExitStatus::Signal(signal)) => format!("signal {signal}"),
        None => "-".to_owned(),
    };
    let _ = write!(
        body,
        "<h2>Attempt {} {}</h2><dl class=\"facts\"><dt>Started</dt><dd>{}</dd><dt>Duration</dt><dd>{}</dd><dt>Exit</dt><dd>{}</dd>",
        attempt.number,
        badge(state, state),
        attempt.start.format("%Y-%m-%d %H:%M:%S%.3f UTC"),
        html::duration(attempt.duration_ms()),
        escape(&exit)
    );
    if let Some(job) = &attempt.job {
        let _ = write!(
            body,
            "<dt>Job</dt><dd>{} {}</dd>",
            escape(&job.executor),
            escape(&job.job_id)
        );
    }
    if let Some(outcome) = &attempt.outcome {
        let _ = write!(
            body,
            "<dt>Resources</dt><dd>cpu {} user + {} sys, max RSS {} KiB, stdout {} B, stderr {} B</dd>",
            html::duration(outcome.user_cpu_ms),
            html::duration(outcome.sys_cpu_ms),
            outcome.max_rss_kib,
            outcome.stdout_bytes,
            outcome.stderr_bytes
        );
        if let Some(error) = &outcome.error {
            let _ = write!(
                body,
                "<dt>Error</dt><dd class=\"error\">{}</dd>",
                escape(error)
            );
        }
    }
    body.push_str("</dl>");
    // The output first: what someone coming from a failed unit looks for.
    for stream in [LogStream::Stderr, LogStream::Stdout] {
        log_block(body, &app.state, run, (unit, attempt.number), stream);
    }
    phases_block(body, attempt);
    inputs_block(body, &app.state, run, attempt);
    for (side, title) in [
        (FileSide::Inputs, "Input files"),
        (FileSide::Outputs, "Output files"),
    ] {
        if let Some(files) = recorded.files.get(&(attempt.number, side)) {
            files_block(body, &app.state, title, files);
        }
    }
    if let Some(output_hash) = attempt.output_hash() {
        let _ = write!(
            body,
            "<p>Output hash <code>{}</code></p>",
            escape(output_hash)
        );
    }
    let quote = |text: &str| format!("'{}'", text.replace('\'', "'\\''"));
    let _ = write!(
        body,
        "<h2>Reproduce</h2><p>Runs this attempt again from its recorded inputs, in a scratch folder:</p><pre class=\"command\" id=\"reproduce\">apollo reproduce --state-dir {} {} {} --attempt {}</pre>",
        escape(&quote(&app.state.path().display().to_string())),
        escape(run.as_str()),
        escape(&quote(&unit.name)),
        attempt.number
    );
}

fn phases_block(body: &mut String, attempt: &Attempt) {
    if attempt.phases().is_empty() {
        return;
    }
    body.push_str("<h3>Phases</h3><table><thead><tr><th scope=\"col\">Phase</th><th scope=\"col\">Start</th><th scope=\"col\">Duration</th><th scope=\"col\">Exit</th></tr></thead><tbody>");
    for phase in attempt.phases() {
        let exit = match phase.exit {
            Some(apollo_core::event::ExitStatus::Code(code)) => format!("exit {code}"),
            Some(apollo_core::event::ExitStatus::Signal(signal)) => format!("signal {signal}"),
            None => "-".to_owned(),
        };
        let _ = write!(
            body,
            "<tr><td>{}</td><td class=\"num\">+{}</td><td class=\"num\">{}</td><td>{}{}</td></tr>",
            phase.phase.as_str(),
            html::duration(phase.offset_ms),
            html::duration(phase.duration_ms),
            escape(&exit),
            if phase.timed_out { " (timed out)" } else { "" }
        );
    }
    body.push_str("</tbody></table>");
}

fn inputs_block(body: &mut String, state: &StateDir, run: &RunId, attempt: &Attempt) {
    let Some(input_hash) = &attempt.input_hash else {
        return;
    };
    let _ = write!(
        body,
        "<h3>Inputs</h3><p>Input hash <code>{}</code></p>",
        escape(input_hash)
    );
    let from_manifest;
    let mut inputs = attempt.inputs.as_slice();
    if let Some(reference) = &attempt.inputs_manifest {
        match state
            .run_dir(run)
            .and_then(|run| run.read_input_manifest(reference))
        {
            Ok(components) => {
                from_manifest = components;
                inputs = &from_manifest;
            }
            Err(error) => {
                let _ = write!(
                    body,
                    "<p class=\"error\">{} components in input manifest {}, which cannot be read: {}</p>",
                    reference.count,
                    escape(&reference.sha256),
                    escape(&error.to_string())
                );
            }
        }
    }
    body.push_str("<table><thead><tr><th scope=\"col\">Kind</th><th scope=\"col\">Name</th><th scope=\"col\">Hash</th></tr></thead><tbody>");
    for component in inputs.iter().take(2000) {
        let kind = match component.kind {
            InputKind::Command => "command",
            InputKind::Env => "env",
            InputKind::File => "file",
            InputKind::Upstream => "upstream",
        };
        let _ = write!(
            body,
            "<tr><td>{kind}</td><td><code>{}</code></td><td><code>{}</code></td></tr>",
            escape(&component.name),
            escape(&component.hash)
        );
    }
    body.push_str("</tbody></table>");
    if inputs.len() > 2000 {
        let _ = write!(
            body,
            "<p class=\"muted\">and {} more components</p>",
            inputs.len() - 2000
        );
    }
}

fn files_block(body: &mut String, state: &StateDir, title: &str, files: &[FileEntry]) {
    let _ = write!(
        body,
        "<h3>{title}</h3><table><thead><tr><th scope=\"col\">Path</th><th scope=\"col\">SHA-256</th><th scope=\"col\">Size</th><th scope=\"col\">Blob</th></tr></thead><tbody>"
    );
    for file in files.iter().take(2000) {
        let blob = match &file.not_captured {
            Some(reason) => format!("not captured: {}", escape(reason)),
            None if state.has_blob(&file.sha256) => "kept".to_owned(),
            None => "evicted".to_owned(),
        };
        let _ = write!(
            body,
            "<tr><td><code>{}</code></td><td><code>{}</code></td><td class=\"num\">{}</td><td>{blob}</td></tr>",
            escape(&file.path),
            escape(&file.sha256),
            escape(&apollo_core::capture::human_size(file.size))
        );
    }
    body.push_str("</tbody></table>");
}

fn log_block(
    body: &mut String,
    state: &StateDir,
    run: &RunId,
    (unit, attempt): (&UnitTimeline, u32),
    stream: LogStream,
) {
    let name = stream.as_str();
    let href = format!(
        "/api/runs/{}/units/{}/log?attempt={attempt}&stream={name}",
        html::encode(run.as_str()),
        html::encode(&unit.name)
    );
    let _ = write!(body, "<h3 id=\"{name}\">{name}</h3>");
    match apollo_runner::read::tail(state, run, (&unit.name, attempt), stream, TAIL_BYTES) {
        Ok(None) => {
            let _ = write!(body, "<p class=\"muted\">nothing written to {name}</p>");
        }
        Ok(Some(tail)) => {
            if tail.len > tail.bytes.len() as u64 {
                let _ = write!(
                    body,
                    "<p class=\"muted\">the last {} of {} (<a href=\"{}&amp;bytes=4194304\">more</a>)</p>",
                    escape(&apollo_core::capture::human_size(tail.bytes.len() as u64)),
                    escape(&apollo_core::capture::human_size(tail.len)),
                    escape(&href)
                );
            }
            let _ = write!(
                body,
                "<pre class=\"log\" tabindex=\"0\" aria-label=\"{name}\">{}</pre>",
                escape(&String::from_utf8_lossy(&tail.bytes))
            );
        }
        Err(error) => {
            let _ = write!(
                body,
                "<p class=\"error\">{}</p>",
                escape(&error.to_string())
            );
        }
    }
}
