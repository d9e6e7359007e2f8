//! The restored outputs of a reused unit and a reproduction's verdict, as JUnit and the HTML
//! report render them from the run model (issue 35).

use apollo_core::event::{AttemptStatus, ReproductionCompared, RunStatus};

use crate::testkit::RunBuilder;
use crate::*;

/// A run whose `fetch` was reused with `out/a.csv` and `out/b.csv` put back, `keep` reused
/// with nothing put back, and `report` run.
fn restoring_run() -> Timeline {
    let mut run = RunBuilder::new("20261130T021507Z-5e1b", &["fetch", "keep", "report"]);
    run.reused(
        5,
        "fetch",
        "20261129T021507Z-3f9a",
        &["out/a.csv", "out/b.csv"],
    );
    run.reused(6, "keep", "20261129T021507Z-3f9a", &[]);
    run.start(10, "report", 1).succeed(500, "report", 1);
    run.end(510, RunStatus::Succeeded, 1, 0, 0);
    Timeline::from_records(run.reads()).unwrap()
}

fn reproduction(compared: Option<ReproductionCompared>) -> Timeline {
    let mut run = RunBuilder::new("20261130T031507Z-9c0d", &["sorted"]);
    run.reproduces("20261130T021507Z-3f9a", "sorted", 1);
    run.start(10, "sorted", 1).succeed(200, "sorted", 1);
    run.end(210, RunStatus::Succeeded, 1, 0, 0);
    if let Some(compared) = compared {
        run.compared(220, compared);
    }
    Timeline::from_records(run.reads()).unwrap()
}

fn differing() -> ReproductionCompared {
    ReproductionCompared {
        reproduced: false,
        recorded_status: Some(AttemptStatus::Succeeded),
        status: AttemptStatus::Succeeded,
        outputs_differ: vec!["out/<x>.csv".into()],
    }
}

fn junit(timeline: &Timeline) -> String {
    let mut out = Vec::new();
    write_junit(timeline, &mut out, &|_: &str, _: u32| None).unwrap();
    String::from_utf8(out).unwrap()
}

fn html(timeline: &Timeline) -> String {
    let mut out = Vec::new();
    write_html(timeline, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn junit_of_a_run_that_restored_outputs() {
    let xml = junit(&restoring_run());
    insta::assert_snapshot!(xml);
    // Passing cases still: a restore is not a failure.
    let read = quick_junit::Report::deserialize_from_str(&xml).expect("well-formed JUnit XML");
    let suite = &read.test_suites[0];
    assert_eq!((suite.tests, suite.failures, suite.errors), (3, 0, 0));
    assert_eq!(xml.matches("apollo.restored").count(), 1, "{xml}");
}

#[test]
fn junit_of_a_reproduction_says_its_verdict_and_an_uncompared_one_none() {
    let xml = junit(&reproduction(Some(differing())));
    insta::assert_snapshot!(xml);
    let xml = junit(&reproduction(None));
    assert!(!xml.contains("apollo.reproduction"), "{xml}");
}

#[test]
fn html_names_the_restored_outputs_in_the_reused_units_row() {
    let page = html(&restoring_run());
    let rows: Vec<&str> = (page.lines())
        .filter(|line| line.starts_with("<tr class=\"reused\""))
        .collect();
    assert_eq!(rows.len(), 2, "{page}");
    assert!(
        rows[0].contains("data-unit=\"fetch\"")
            && rows[0].contains("reused from run 20261129T021507Z-3f9a attempt 1")
            && rows[0].contains("<span class=\"restored\">restored out/a.csv, out/b.csv</span>"),
        "{}",
        rows[0]
    );
    assert!(!rows[1].contains("restored"), "{}", rows[1]);
}

#[test]
fn html_says_a_reproductions_verdict_escaped() {
    let page = html(&reproduction(Some(differing())));
    assert!(
        page.contains(
            "<dt>reproduction</dt><dd id=\"reproduction\">not reproduced · outputs differ (out/&lt;x&gt;.csv)</dd>"
        ),
        "{page}"
    );
    assert!(!html(&reproduction(None)).contains("id=\"reproduction\""));
}
