//! `/diff?a=RUN&b=RUN`: two runs side by side, unit by unit (`apollo diff A B`).

use std::fmt::Write;
use std::sync::Arc;

use apollo_runner::read::RunDiff;
use axum::extract::{Query, State};
use axum::response::Html;

use crate::api::DiffQuery;
use crate::app::{App, blocking};
use crate::error::AppError;
use crate::html::{self, badge, escape};

/// `GET /diff`: the form, and the comparison when both runs are given.
pub(crate) async fn page(
    State(app): State<Arc<App>>,
    Query(query): Query<DiffQuery>,
) -> Result<Html<String>, AppError> {
    blocking(&app, move |app| {
        let nonempty = |value: &Option<String>| value.clone().filter(|text| !text.is_empty());
        let (a, b) = (nonempty(&query.a), nonempty(&query.b));
        let mut body = String::from("<h1>Compare two runs</h1>");
        let _ = write!(
            body,
            "<form class=\"filter\" method=\"get\" action=\"/diff\"><label>Run A <input name=\"a\" value=\"{}\" placeholder=\"last-success\" required></label> <label>Run B <input name=\"b\" value=\"{}\" placeholder=\"latest\" required></label> <button type=\"submit\">Compare</button></form><p class=\"muted\">A run is an id, a unique prefix or suffix of one, <code>latest</code>, <code>latest~N</code> or <code>last-success</code>.</p>",
            escape(a.as_deref().unwrap_or("")),
            escape(b.as_deref().unwrap_or(""))
        );
        if let (Some(a), Some(b)) = (&a, &b) {
            let (run_a, run_b) = (app.resolve(a)?, app.resolve(b)?);
            let (diff, warnings) = apollo_runner::read::diff(&app.state, &run_a, &run_b)?;
            for warning in warnings {
                let _ = write!(
                    body,
                    "<p class=\"error\" role=\"alert\">journal damaged: {}</p>",
                    escape(&warning.to_string())
                );
            }
            render(&mut body, &diff);
        }
        Ok(Html(html::page(
            &html::Frame {
                title: "Compare",
                crumbs: &[("compare", "/diff".to_owned())],
                live: None,
            },
            &body,
        )))
    })
    .await
}

fn render(body: &mut String, diff: &RunDiff) {
    body.push_str("<table class=\"sides\"><tbody>");
    for (label, side) in [("A", &diff.run_a), ("B", &diff.run_b)] {
        let id = side.run_id.as_deref().unwrap_or("?");
        let _ = write!(
            body,
            "<tr><th scope=\"row\">{label}</th><td><a href=\"{}\"><code>{}</code></a></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&html::run_href(id)),
            escape(id),
            escape(side.pipeline.as_deref().unwrap_or("?")),
            badge(side.status, side.status),
            super::params_html(&side.params)
        );
    }
    body.push_str("</tbody></table>");
    let n_different = diff.units.iter().filter(|unit| !unit.is_same()).count();
    let _ = write!(
        body,
        "<p>{}</p>",
        if n_different == 0 {
            "Every unit's status, input and output are the same.".to_owned()
        } else {
            format!("{n_different} of {} units differ.", diff.units.len())
        }
    );
    body.push_str("<table class=\"diff\"><thead><tr><th scope=\"col\">Unit</th><th scope=\"col\">A</th><th scope=\"col\">B</th><th scope=\"col\">Duration A → B</th><th scope=\"col\">What differs</th></tr></thead><tbody>");
    let (id_a, id_b) = (
        diff.run_a.run_id.as_deref().unwrap_or("?"),
        diff.run_b.run_id.as_deref().unwrap_or("?"),
    );
    for unit in &diff.units {
        let status = |status: Option<apollo_core::UnitState>, run: &str| {
            status.map_or_else(
                || "<span class=\"muted\">absent</span>".to_owned(),
                |status| {
                    format!(
                        "<a href=\"{}\">{}</a>",
                        escape(&html::unit_href(run, &unit.unit, None)),
                        badge(status.as_str(), status.as_str())
                    )
                },
            )
        };
        let duration = |ms: Option<u64>| ms.map_or_else(|| "-".to_owned(), html::duration);
        let mut reasons: Vec<String> = unit.reasons();
        if let Some(detail) = &unit.detail_b {
            reasons.push(format!("B: {detail}"));
        }
        let _ = write!(
            body,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{} → {}</td><td>{}</td></tr>",
            if unit.is_same() { "same" } else { "differs" },
            escape(&unit.unit),
            status(unit.state_a, id_a),
            status(unit.state_b, id_b),
            duration(unit.duration_a_ms),
            duration(unit.duration_b_ms),
            reasons
                .iter()
                .map(|reason| escape(reason))
                .collect::<Vec<_>>()
                .join("<br>")
        );
    }
    body.push_str("</tbody></table>");
}
