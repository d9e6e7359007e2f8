//! `apollo replay --format html`: one self-contained page with an SVG Gantt chart.
//!
//! The chart has **one row per unit**, in config order, rather than one per lane: a unit's
//! retries then sit side by side on its own row (attempt numbers on the bars), a skipped unit
//! still has a row saying why, and the row label is the name users search for. Parallelism
//! stays visible as bars overlapping vertically; the Chrome trace gives the per-lane view.
//!
//! Everything taken from the journal (unit names, errors, hosts, notes) is escaped: it is user
//! data. The page loads nothing: CSS and a small script are inline, and the chart works
//! without the script (hover details are SVG `<title>`s).

use std::fmt::Write as _;
use std::io::{self, Write};

use chrono::SecondsFormat;

use crate::display::{
    format_duration, format_offset, html_escape as esc, offset_ms, short_hash, skip_reason_text,
};
use crate::text::describe_exit;
use crate::{Attempt, AttemptState, Timeline, UnitState, UnitTimeline};

mod details;
mod extras;
pub use extras::HtmlExtras;

const LABEL_WIDTH: f64 = 220.0;
const CHART_WIDTH: f64 = 960.0;
const ROW_HEIGHT: f64 = 26.0;
const BAR_HEIGHT: f64 = 18.0;
const AXIS_HEIGHT: f64 = 28.0;
const MIN_BAR_WIDTH: f64 = 2.0;

/// Writes the timeline as a self-contained HTML report: a header (run id, pipeline, status,
/// duration, host, peak parallelism), an SVG Gantt chart with a row per unit and a bar per
/// attempt (coloured by status, retries numbered, phases as stripes, skips and marks as
/// markers, resumes as dashed lines), and a table of units.
///
/// Each attempt bar is `<rect class="bar …" data-unit data-attempt data-status data-lane>`.
pub fn write_html<W: Write>(timeline: &Timeline, out: W) -> io::Result<()> {
    write_html_with(timeline, out, &HtmlExtras::default())
}

/// [`write_html`], with what `extras` adds: failed units' stderr, timeout markers, the
/// critical path.
pub fn write_html_with<W: Write>(
    timeline: &Timeline,
    mut out: W,
    extras: &HtmlExtras<'_>,
) -> io::Result<()> {
    let mut page = String::new();
    write_page(&mut page, timeline, extras);
    out.write_all(page.as_bytes())?;
    out.flush()
}

/// The critical path: from the unit whose last attempt ended last, back through the
/// dependency that ended last before it, to a unit with none.
fn critical_path(
    timeline: &Timeline,
    deps: &std::collections::HashMap<String, Vec<String>>,
) -> Vec<String> {
    if deps.is_empty() {
        return Vec::new();
    }
    let end_of = |name: &str| {
        timeline
            .unit(name)
            .and_then(|unit| unit.last_attempt())
            .map(|attempt| attempt.end)
    };
    let mut current = timeline
        .units
        .iter()
        .filter_map(|unit| Some((unit.last_attempt()?.end, unit.name.clone())))
        .max()
        .map(|(_, name)| name);
    let mut path = Vec::new();
    while let Some(name) = current.take() {
        if path.contains(&name) {
            break;
        }
        current = deps
            .get(&name)
            .into_iter()
            .flatten()
            .filter_map(|dep| Some((end_of(dep)?, dep.clone())))
            .max()
            .map(|(_, dep)| dep);
        path.push(name);
    }
    path
}

fn write_page(page: &mut String, timeline: &Timeline, extras: &HtmlExtras<'_>) {
    let run_id = timeline.run_id.as_deref().unwrap_or("unknown run");
    let pipeline = timeline.pipeline.as_deref().unwrap_or("?");
    let status = timeline.status_str();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>apollo run {} ({})</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        esc(run_id),
        esc(pipeline)
    );
    let duration_ms = extras.now.map_or_else(
        || timeline.duration_ms(),
        |now| timeline.duration_ms_at(now),
    );
    write_header(page, timeline, (run_id, pipeline, status), duration_ms);
    write_legend(page);
    let critical = critical_path(timeline, &extras.deps);
    write_chart(page, timeline, extras, &critical);
    write_table(page, timeline, extras.excerpts, &critical);
    let _ = write!(page, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
}

fn write_header(
    page: &mut String,
    timeline: &Timeline,
    (run_id, pipeline, status): (&str, &str, &str),
    duration_ms: u64,
) {
    let started = timeline
        .started
        .map(|ts| ts.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_else(|| "-".into());
    let n_attempts = timeline.attempts().count();
    let _ = write!(
        page,
        "<header>\n<h1>apollo run <code>{}</code></h1>\n<dl class=\"facts\">\
         <div><dt>pipeline</dt><dd id=\"pipeline\">{}</dd></div>\
         <div><dt>status</dt><dd><span id=\"run-status\" class=\"badge s-{status}\">{status}</span></dd></div>\
         <div><dt>started</dt><dd>{}</dd></div>\
         <div><dt>duration</dt><dd>{}</dd></div>\
         <div><dt>host</dt><dd>{}</dd></div>\
         <div><dt>units</dt><dd>{}</dd></div>\
         <div><dt>attempts</dt><dd>{n_attempts}</dd></div>\
         <div><dt>peak parallelism</dt><dd>{}</dd></div>\
         <div><dt>resumes</dt><dd>{}</dd></div>{}\
         </dl>\n</header>\n",
        esc(run_id),
        esc(pipeline),
        started,
        format_duration(duration_ms),
        esc(timeline.host.as_deref().unwrap_or("-")),
        timeline.units.len(),
        timeline.n_lanes,
        timeline.resumes.len(),
        details::reproduction_fact(timeline),
    );
}

fn write_legend(page: &mut String) {
    page.push_str("<p class=\"legend\">");
    for status in [
        "succeeded",
        "failed",
        "timed_out",
        "interrupted",
        "skipped",
        "unfinished",
    ] {
        let _ = write!(
            page,
            "<span><i class=\"swatch s-{status}\"></i>{status}</span>"
        );
    }
    page.push_str(
        "<span><i class=\"swatch skip-mark\"></i>skipped (upstream failed)</span>\
         <span><i class=\"swatch mark-mark\"></i>human verdict</span>\
         <span><i class=\"swatch resume-mark\"></i>resumed</span>\
         <span><i class=\"swatch critical-swatch\"></i>◆ critical path</span>\
         <span><i class=\"swatch timeout-swatch\"></i>timeout limit</span></p>\n",
    );
}

/// Maps milliseconds from the run's start to chart x coordinates.
struct Scale {
    total_ms: f64,
}

impl Scale {
    fn x(&self, ms: u64) -> f64 {
        LABEL_WIDTH + (ms as f64 / self.total_ms) * CHART_WIDTH
    }
}

fn write_chart(
    page: &mut String,
    timeline: &Timeline,
    extras: &HtmlExtras<'_>,
    critical: &[String],
) {
    let origin = timeline.origin();
    let latest_end = timeline
        .attempts()
        .map(|(_, attempt)| offset_ms(origin, attempt.end))
        .max()
        .unwrap_or(0);
    let total_ms = timeline.duration_ms().max(latest_end).max(1);
    let scale = Scale {
        total_ms: total_ms as f64,
    };
    let n_rows = timeline.units.len();
    let height = AXIS_HEIGHT + n_rows as f64 * ROW_HEIGHT + 8.0;
    let width = LABEL_WIDTH + CHART_WIDTH + 40.0;
    let _ = write!(
        page,
        "<section class=\"chart\">\n<svg id=\"gantt\" xmlns=\"http://www.w3.org/2000/svg\" \
         width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         aria-label=\"Gantt chart of the run's attempts\">\n\
         <defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" \
         patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" fill=\"#0003\"/></pattern></defs>\n"
    );

    // Time axis: about eight ticks at a round step.
    let step = tick_step(total_ms);
    page.push_str("<g class=\"axis\">");
    let mut tick = 0;
    while tick <= total_ms {
        let x = scale.x(tick);
        let _ = write!(
            page,
            "<line x1=\"{x:.1}\" y1=\"{AXIS_HEIGHT}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\">{}</text>",
            height - 8.0,
            AXIS_HEIGHT - 10.0,
            format_offset(tick)
        );
        tick += step;
    }
    page.push_str("</g>\n");

    for (row, unit) in timeline.units.iter().enumerate() {
        let on_critical_path = critical.contains(&unit.name);
        let timeout_ms = extras.timeouts_ms.get(&unit.name).copied();
        write_row(
            page,
            timeline,
            &scale,
            row,
            unit,
            (on_critical_path, timeout_ms),
        );
    }

    for resume in timeline.resumes.iter().filter(|resume| resume.after_crash) {
        // Shaded: the time between the crash (the last record of the apollo that died) and
        // the resume, when nothing ran.
        let from = scale.x(offset_ms(origin, resume.previous_last_ts));
        let to = scale.x(offset_ms(origin, resume.ts));
        let _ = writeln!(
            page,
            "<rect class=\"gap\" x=\"{from:.1}\" y=\"{AXIS_HEIGHT}\" width=\"{:.1}\" \
             height=\"{:.1}\" fill=\"url(#hatch)\"><title>apollo was not running: it stopped \
             without finishing after {} and the run was resumed at {}</title></rect>",
            (to - from).max(0.0),
            height - 8.0 - AXIS_HEIGHT,
            format_offset(offset_ms(origin, resume.previous_last_ts)),
            format_offset(offset_ms(origin, resume.ts)),
        );
    }
    for resume in &timeline.resumes {
        let x = scale.x(offset_ms(origin, resume.ts));
        let _ = writeln!(
            page,
            "<g class=\"resume\" data-seq=\"{}\"><line x1=\"{x:.1}\" y1=\"{AXIS_HEIGHT}\" \
             x2=\"{x:.1}\" y2=\"{:.1}\"/><text x=\"{:.1}\" y=\"{:.1}\">resumed</text>\
             <title>resumed at {} by pid {} on {} ({} attempt(s) abandoned)</title></g>",
            resume.seq,
            height - 8.0,
            x + 3.0,
            AXIS_HEIGHT + 10.0,
            format_offset(offset_ms(origin, resume.ts)),
            resume.pid,
            esc(&resume.host),
            resume.n_abandoned
        );
    }
    page.push_str("</svg>\n</section>\n");
}

fn write_row(
    page: &mut String,
    timeline: &Timeline,
    scale: &Scale,
    row: usize,
    unit: &UnitTimeline,
    (on_critical_path, timeout_ms): (bool, Option<u64>),
) {
    let origin = timeline.origin();
    let state = timeline.state_of(unit);
    let top = AXIS_HEIGHT + row as f64 * ROW_HEIGHT;
    let bar_y = top + (ROW_HEIGHT - BAR_HEIGHT) / 2.0;
    let name = esc(&unit.name);
    let label = if unit.name.chars().count() > 30 {
        let short: String = unit.name.chars().take(29).collect();
        format!("{}…", esc(&short))
    } else {
        name.clone()
    };
    let _ = writeln!(
        page,
        "<g class=\"row{}\" data-unit=\"{name}\" data-status=\"{}\">\
         <rect class=\"row-bg\" x=\"0\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{ROW_HEIGHT}\"/>\
         <text class=\"label\" x=\"8\" y=\"{:.1}\">{label}<title>{name}: {}</title></text>",
        if on_critical_path { " critical" } else { "" },
        state,
        LABEL_WIDTH + CHART_WIDTH + 40.0,
        top + ROW_HEIGHT / 2.0 + 4.0,
        state.label(),
    );
    let retried = unit.attempts.len() > 1;
    for attempt in &unit.attempts {
        write_bar(page, timeline, scale, unit, attempt, bar_y, retried);
    }
    // Where the last attempt would have been cut off by its timeout, when that is on the chart.
    if let (Some(timeout), Some(last)) = (timeout_ms, unit.last_attempt()) {
        let limit_ms = offset_ms(origin, last.start).saturating_add(timeout);
        if limit_ms <= scale.total_ms as u64 {
            let x = scale.x(limit_ms);
            let _ = writeln!(
                page,
                "<line class=\"timeout-mark\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\">\
                 <title>{name}: timeout {} (an attempt is cut off here)</title></line>",
                bar_y - 2.0,
                bar_y + BAR_HEIGHT + 2.0,
                format_duration(timeout)
            );
        }
    }
    for skip in &unit.skips {
        let x = scale.x(offset_ms(origin, skip.ts));
        let reason = esc(&skip_reason_text(&skip.reason));
        // Near the right edge the label goes left of the marker, so it is not cut off.
        let (text_x, anchor) = if x > LABEL_WIDTH + CHART_WIDTH * 0.7 {
            (x - 4.0, "end")
        } else {
            (x + BAR_HEIGHT + 4.0, "start")
        };
        let _ = writeln!(
            page,
            "<g class=\"skip\" data-unit=\"{name}\"><rect class=\"skip-mark\" x=\"{x:.1}\" \
             y=\"{bar_y:.1}\" width=\"{BAR_HEIGHT}\" height=\"{BAR_HEIGHT}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">skipped: {reason}</text>\
             <title>{name} skipped at {}: {reason}</title></g>",
            text_x,
            bar_y + BAR_HEIGHT - 5.0,
            format_offset(offset_ms(origin, skip.ts)),
        );
    }
    for mark in &unit.marks {
        let x = scale.x(offset_ms(origin, mark.ts));
        let verdict = mark.verdict.as_str();
        let cy = bar_y + BAR_HEIGHT / 2.0;
        let _ = writeln!(
            page,
            "<g class=\"mark\" data-unit=\"{name}\" data-verdict=\"{verdict}\">\
             <path class=\"mark-mark\" d=\"M{x:.1} {:.1} l7 9 l-7 9 l-7 -9 z\"/>\
             <title>attempt #{} of {name} marked {verdict} by {}{}</title></g>",
            cy - 9.0,
            mark.attempt,
            esc(&mark.by),
            mark.note
                .as_deref()
                .map(|note| format!(": {}", esc(note)))
                .unwrap_or_default(),
        );
    }
    page.push_str("</g>\n");
}

fn write_bar(
    page: &mut String,
    timeline: &Timeline,
    scale: &Scale,
    unit: &UnitTimeline,
    attempt: &Attempt,
    bar_y: f64,
    retried: bool,
) {
    let origin = timeline.origin();
    let start_ms = offset_ms(origin, attempt.start);
    let end_ms = offset_ms(origin, attempt.end).max(start_ms);
    let x = scale.x(start_ms);
    let width = (scale.x(end_ms) - x).max(MIN_BAR_WIDTH);
    let status = attempt.state.as_str();
    let name = esc(&unit.name);
    let mut title = format!(
        "{name} #{}: {status}\nstart {} · duration {}",
        attempt.number,
        format_offset(start_ms),
        format_duration(attempt.duration_ms())
    );
    if let AttemptState::Finished(_) = attempt.state {
        let _ = write!(title, " · {}", describe_exit(attempt.exit()));
    }
    if attempt.timed_out() {
        title.push_str(" · timed out");
    }
    if let Some(outcome) = &attempt.outcome {
        let _ = write!(
            title,
            "\ncpu {} user + {} sys · max rss {} KiB",
            format_duration(outcome.user_cpu_ms),
            format_duration(outcome.sys_cpu_ms),
            outcome.max_rss_kib
        );
        for phase in &outcome.phases {
            let _ = write!(
                title,
                "\n{}: {} ({})",
                phase.phase,
                format_duration(phase.duration_ms),
                describe_exit(phase.exit)
            );
        }
    }
    if let Some(hash) = &attempt.input_hash {
        let _ = write!(title, "\ninput {}", short_hash(hash));
    }
    if let Some(hash) = attempt.output_hash() {
        let _ = write!(title, " · output {}", short_hash(hash));
    }
    if let Some(error) = attempt.error_line() {
        let _ = write!(title, "\nerror: {}", esc(error));
    }
    let _ = write!(
        page,
        "<g class=\"attempt\"><rect class=\"bar s-{status}\" x=\"{x:.1}\" y=\"{bar_y:.1}\" \
         width=\"{width:.1}\" height=\"{BAR_HEIGHT}\" rx=\"3\" data-unit=\"{name}\" \
         data-attempt=\"{}\" data-status=\"{status}\" data-lane=\"{}\"><title>{title}</title></rect>",
        attempt.number,
        attempt.lane + 1,
    );
    // Phases as thin stripes along the bar's bottom edge.
    for phase in attempt.phases() {
        let phase_start_ms = start_ms.saturating_add(phase.offset_ms);
        let phase_x = scale.x(phase_start_ms).min(x + width);
        let phase_end_ms = phase_start_ms.saturating_add(phase.duration_ms);
        let phase_width = (scale.x(phase_end_ms) - phase_x)
            .min(x + width - phase_x)
            .max(0.0);
        let _ = write!(
            page,
            "<rect class=\"phase p-{}\" x=\"{phase_x:.1}\" y=\"{:.1}\" width=\"{phase_width:.1}\" \
             height=\"4\"/>",
            phase.phase,
            bar_y + BAR_HEIGHT - 4.0
        );
    }
    // The attempt number is written on retried attempts' bars when it fits.
    if retried && width >= 20.0 {
        let _ = write!(
            page,
            "<text class=\"attempt-no\" x=\"{:.1}\" y=\"{:.1}\">#{}</text>",
            x + 3.0,
            bar_y + BAR_HEIGHT - 6.0,
            attempt.number
        );
    }
    page.push_str("</g>\n");
}

/// A round tick step (1, 2 or 5 times a power of ten milliseconds) giving about eight ticks.
fn tick_step(total_ms: u64) -> u64 {
    let rough = (total_ms / 8).max(1);
    let mut magnitude = 1;
    while magnitude * 10 <= rough {
        magnitude *= 10;
    }
    [1, 2, 5, 10]
        .into_iter()
        .map(|factor| factor * magnitude)
        .find(|step| *step >= rough)
        .unwrap_or(10 * magnitude)
}

/// A sign beside a status, so failed, timed out and the rest differ without colour.
fn status_glyph(status: &str) -> &'static str {
    match status {
        "succeeded" | "reused" | "already_done" => "✓ ",
        "failed" => "✕ ",
        "timed_out" => "⏱ ",
        "skipped" | "skipped_when" | "upstream_failed" | "not_started" => "– ",
        _ => "! ",
    }
}

fn write_table(
    page: &mut String,
    timeline: &Timeline,
    excerpts: Option<crate::ExcerptSource<'_>>,
    critical: &[String],
) {
    page.push_str(
        "<section>\n<h2>Units</h2>\n<p class=\"filter\"><label>status \
         <select id=\"status-filter\"><option value=\"\">all</option>\
         <option value=\"problem\">not succeeded</option><option>succeeded</option>\
         <option>reused</option><option>failed</option><option>skipped</option>\
         <option>skipped_when</option><option>upstream_failed</option><option>cut_off</option><option>needs_verdict</option>\
         <option>running</option><option>not_started</option></select></label> \
         <label>sort <select id=\"sort\"><option value=\"\">config order</option>\
         <option value=\"duration\">longest first</option><option value=\"status\">by status</option>\
         </select></label></p>\n<table id=\"units\">\n<thead><tr><th>unit</th><th>status</th>\
         <th>attempts</th><th>last duration</th><th>phases</th><th>cpu</th><th>max rss</th>\
         <th>exit</th><th>input</th><th>output</th><th>error</th></tr></thead>\n<tbody>\n",
    );
    for unit in &timeline.units {
        let state = timeline.state_of(unit);
        let last = unit.last_attempt();
        let cell = |value: Option<String>| value.unwrap_or_else(|| "-".into());
        let skip_reason = unit.skips.last().map(|skip| skip_reason_text(&skip.reason));
        let outcome = last.and_then(|attempt| attempt.outcome.as_ref());
        // Phases, CPU and memory in the table, visible without hovering over a bar.
        let phases = outcome.map(|outcome| {
            outcome
                .phases
                .iter()
                .map(|phase| format!("{} {}", phase.phase, format_duration(phase.duration_ms)))
                .collect::<Vec<_>>()
                .join(" · ")
        });
        let cpu = outcome
            .map(|outcome| format_duration(outcome.user_cpu_ms.saturating_add(outcome.sys_cpu_ms)));
        let rss = outcome.map(|outcome| format!("{} MiB", outcome.max_rss_kib.div_ceil(1024)));
        let _ = writeln!(
            page,
            "<tr data-unit=\"{name}\" data-status=\"{status}\" data-duration=\"{}\"{}><td>{name}{}</td>\
             <td><span class=\"badge s-{status}\">{}</span></td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td></tr>",
            last.map_or(0, Attempt::duration_ms),
            if critical.contains(&unit.name) {
                " class=\"critical\""
            } else {
                ""
            },
            if critical.contains(&unit.name) {
                " <span class=\"critical-mark\" title=\"on the critical path\">◆</span>"
            } else {
                ""
            },
            // A timeout is a failure; the sign and the words say which kind.
            if last.is_some_and(Attempt::timed_out) && state == UnitState::Failed {
                "⏱ failed (timed out)".to_owned()
            } else {
                format!("{}{state}", status_glyph(state.as_str()))
            },
            unit.attempts.len(),
            cell(last.map(|attempt| format_duration(attempt.duration_ms()))),
            cell(phases),
            cell(cpu),
            cell(rss),
            cell(
                last.and_then(|attempt| attempt.outcome.as_ref())
                    .map(|o| describe_exit(o.exit))
            ),
            cell(
                last.and_then(|a| a.input_hash.as_deref())
                    .map(|h| short_hash(h).to_owned())
            ),
            cell(
                last.and_then(Attempt::output_hash)
                    .map(|h| short_hash(h).to_owned())
            ),
            esc(last
                .and_then(Attempt::error_line)
                .map(str::to_owned)
                .or(skip_reason)
                .as_deref()
                .unwrap_or("")),
            name = esc(&unit.name),
            status = state,
        );
        details::write_details(page, unit, state, excerpts);
    }
    page.push_str("</tbody>\n</table>\n</section>\n");
}

/// The page's style sheet (embedded: the page is one self-contained file).
const STYLE: &str = include_str!("html/style.css");

/// Highlights a unit's row in the chart and in the table together on hover. Reads only the
/// DOM; the page needs no network.
const SCRIPT: &str = r#"
(function () {
  var rows = document.querySelectorAll('#gantt .row');
  var lines = document.querySelectorAll('#units tr[data-unit]');
  function set(unit, on) {
    rows.forEach(function (r) { if (r.getAttribute('data-unit') === unit) r.classList.toggle('hl', on); });
    lines.forEach(function (l) { if (l.getAttribute('data-unit') === unit) l.classList.toggle('hl', on); });
  }
  [rows, lines].forEach(function (list) {
    list.forEach(function (el) {
      var unit = el.getAttribute('data-unit');
      el.addEventListener('mouseenter', function () { set(unit, true); });
      el.addEventListener('mouseleave', function () { set(unit, false); });
    });
  });
  // Filter and sort the units table (and the chart's rows) by status, for big runs.
  var filter = document.getElementById('status-filter');
  var sort = document.getElementById('sort');
  var body = document.querySelector('#units tbody');
  var original = Array.prototype.slice.call(lines);
  function apply() {
    var want = filter.value;
    var shown = function (status) {
      return want === '' || (want === 'problem' ? status !== 'succeeded' : status === want);
    };
    lines.forEach(function (l) { l.hidden = !shown(l.getAttribute('data-status')); });
    rows.forEach(function (r) { r.style.opacity = shown(r.getAttribute('data-status')) ? '' : '0.15'; });
    var ordered = original.slice();
    if (sort.value === 'duration') {
      ordered.sort(function (a, b) { return b.getAttribute('data-duration') - a.getAttribute('data-duration'); });
    } else if (sort.value === 'status') {
      ordered.sort(function (a, b) { return a.getAttribute('data-status').localeCompare(b.getAttribute('data-status')); });
    }
    ordered.forEach(function (l) { body.appendChild(l); });
  }
  if (filter && sort && body) { filter.addEventListener('change', apply); sort.addEventListener('change', apply); }
  document.body.setAttribute('data-bars', String(document.querySelectorAll('#gantt rect.bar').length));
})();
"#;
