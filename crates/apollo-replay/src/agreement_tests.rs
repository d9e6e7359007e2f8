//! Facts the streaming renderers (text, Chrome trace) must show as the run model does, each
//! found wrong by the end-to-end property test `tests/e2e/agreement.rs` (issue 35).

use apollo_core::event::{Event, RunStatus, SkipReason, UnitSkipped};

use crate::testkit::RunBuilder;
use crate::*;

/// A `when:` false is the state `skipped_when` on the text replay's `skip` line, as in every
/// other view — never `skipped`, which is a unit's own exit 77; and an attempt's output hash
/// and its exit are two words.
#[test]
fn the_text_replay_names_a_when_skip_skipped_when_and_exit_77_skipped_with_its_hash_apart() {
    let mut run = RunBuilder::new("20261130T021507Z-5e1b", &["holiday", "optional"]);
    run.push(
        5,
        Event::UnitSkipped(UnitSkipped {
            unit: "holiday".into(),
            reason: SkipReason::When {
                condition: "test -e flags/holiday".into(),
            },
        }),
    );
    run.start(10, "optional", 1).skip_self(20, "optional", 1);
    run.end(30, RunStatus::Succeeded, 0, 0, 2);
    // The exit-77 attempt with an output hash: `out ` and the short hash fill their column.
    let records = run.reads().map(|record| {
        record.map(|mut record| {
            if let Event::UnitFinished(finished) = &mut record.event {
                finished.output_hash = Some("3b5ca438".repeat(8));
            }
            record
        })
    });
    let mut out = Vec::new();
    write_text(records, &mut out, &TextOptions::default()).unwrap();
    let text = String::from_utf8(out).unwrap();
    let finish = (text.lines())
        .find(|line| line.contains("optional") && line.contains("finish"))
        .unwrap_or_default();
    assert!(
        finish.contains(" out 3b5ca438 ") && finish.ends_with(" exit 77"),
        "the hash runs into the detail: {finish}"
    );
    let status_of = |unit: &str, event: &str| {
        (text.lines())
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .find(|words| words.get(1) == Some(&unit) && words.contains(&event))
            .and_then(|words| {
                let at = words.iter().position(|word| *word == event)?;
                // `finish` has a duration before its status.
                let skip = usize::from(event == "finish");
                words.get(at + 1 + skip).map(|word| (*word).to_owned())
            })
    };
    assert_eq!(
        status_of("holiday", "skip").as_deref(),
        Some("skipped_when"),
        "{text}"
    );
    assert_eq!(
        status_of("optional", "finish").as_deref(),
        Some("skipped"),
        "{text}"
    );
}

/// A reused unit is an instant of its own in the Chrome trace, as a skip is: without it the
/// trace shows a reused unit as one never started (issue 35).
#[test]
fn the_chrome_trace_shows_each_reused_unit() {
    let run = {
        let mut run = RunBuilder::new("20261130T021507Z-5e1b", &["fetch", "keep", "report"]);
        run.reused(5, "fetch", "20261129T021507Z-3f9a", &["out/a.csv"]);
        run.reused(6, "keep", "20261129T021507Z-3f9a", &[]);
        run.start(10, "report", 1).succeed(500, "report", 1);
        run.end(510, RunStatus::Succeeded, 1, 0, 0);
        run
    };
    let mut out = Vec::new();
    write_chrome_trace(run.reads(), &mut out, &Filter::all()).unwrap();
    let document: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let reuses: Vec<_> = (document["traceEvents"].as_array().unwrap().iter())
        .filter(|event| event["cat"] == "reuse")
        .map(|event| {
            let args = &event["args"];
            (
                args["unit"].clone(),
                args["from_run"].clone(),
                event["ph"].clone(),
            )
        })
        .collect();
    assert_eq!(
        reuses,
        [
            ("fetch".into(), "20261129T021507Z-3f9a".into(), "i".into()),
            ("keep".into(), "20261129T021507Z-3f9a".into(), "i".into()),
        ]
    );
}
