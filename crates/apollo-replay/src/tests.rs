//! Snapshot tests of every rendering, on the synthetic runs of [`crate::testkit`].

use apollo_core::Phase;
use apollo_core::event::{RunStatus, Verdict};

use crate::testkit::{RunBuilder, at, showcase_run};
use crate::*;

fn render_text(run: &RunBuilder, options: &TextOptions) -> String {
    let mut out = Vec::new();
    write_text(run.reads(), &mut out, options).unwrap();
    String::from_utf8(out).unwrap()
}

fn timeline(run: &RunBuilder) -> Timeline {
    Timeline::from_records(run.reads()).unwrap()
}

#[test]
fn text_timeline_of_the_showcase_run() {
    insta::assert_snapshot!(render_text(&showcase_run(), &TextOptions::default()));
}

#[test]
fn text_timeline_filtered_by_unit_keeps_run_lines() {
    let options = TextOptions::default()
        .filter(Filter::all().unit("flaky"))
        .phases(false);
    insta::assert_snapshot!(render_text(&showcase_run(), &options));
}

#[test]
fn text_timeline_filtered_by_time_window() {
    // One end absolute, the other an offset from the run's start, as `--until +00:03.400`.
    let until: TimeBound = "+00:03.400".parse().unwrap();
    let filter = Filter::all().since(at(1_500)).until(until);
    let text = render_text(
        &showcase_run(),
        &TextOptions::default().filter(filter).phases(false),
    );
    insta::assert_snapshot!(text);
}

#[test]
fn text_timeline_in_colour_paints_statuses() {
    let text = render_text(&showcase_run(), &TextOptions::default().color(true));
    assert!(text.contains("\x1b[1;31mtimed_out"), "{text}");
    assert!(text.contains("\x1b[32msucceeded"), "{text}");
    // Colour never changes the visible text.
    let plain = render_text(&showcase_run(), &TextOptions::default());
    let mut stripped = String::new();
    let mut in_escape = false;
    for character in text.chars() {
        match character {
            '\x1b' => in_escape = true,
            'm' if in_escape => in_escape = false,
            c if !in_escape => stripped.push(c),
            _ => {}
        }
    }
    assert_eq!(stripped.trim_end(), plain.trim_end());
}

#[test]
fn text_timeline_reports_attempts_still_open_at_the_end() {
    let mut run = RunBuilder::new("r", &["a", "b"]);
    run.start(5, "a", 1).start(6, "b", 1).succeed(100, "b", 1);
    insta::assert_snapshot!(render_text(&run, &TextOptions::default().phases(false)));
}

#[test]
fn offsets_past_an_hour_stay_aligned() {
    let mut run = RunBuilder::new("r", &["a"]);
    run.start(5, "a", 1).succeed(3_723_456, "a", 1);
    let text = render_text(&run, &TextOptions::default().phases(false));
    let unit_columns: Vec<_> = text.lines().skip(2).map(|line| line.find(" a ")).collect();
    assert_eq!(unit_columns, [Some(12), Some(12)], "{text}");
    assert!(text.contains("+1:02:03.456 a"), "{text}");
}

#[test]
fn terminal_escapes_in_errors_are_shown_not_interpreted() {
    let mut run = RunBuilder::new("r", &["a"]);
    run.start(5, "a", 1).fail(10, "a", 1, 2, "bad\x1b[2Jthing");
    let text = render_text(&run, &TextOptions::default());
    assert!(!text.contains('\x1b'), "{text}");
    assert!(text.contains("bad\\u{1b}[2Jthing"), "{text}");
}

#[test]
fn a_read_error_stops_rendering_and_is_returned() {
    let records = showcase_run().records();
    let reads = records
        .into_iter()
        .take(3)
        .map(Ok)
        .chain([Err(std::io::Error::other("checksum mismatch at byte 120"))]);
    let mut out = Vec::new();
    let error = write_text(reads, &mut out, &TextOptions::default()).unwrap_err();
    assert!(matches!(error, ReplayError::Read(_)), "{error:?}");
    assert!(!error.is_broken_pipe());
}

#[test]
fn a_closed_pipe_is_reported_as_a_broken_pipe() {
    struct ClosedPipe;
    impl std::io::Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    for format in Format::ALL {
        let error = replay(
            showcase_run().reads(),
            ClosedPipe,
            &ReplayOptions::new(format),
        )
        .unwrap_err();
        assert!(error.is_broken_pipe(), "{format:?}: {error:?}");
    }
}

#[test]
fn json_lines_of_the_showcase_run() {
    let mut out = Vec::new();
    write_json(showcase_run().reads(), &mut out, &Filter::all()).unwrap();
    let text = String::from_utf8(out).unwrap();
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(value["seq"].is_u64() && value["kind"].is_string(), "{line}");
    }
    insta::assert_snapshot!(text);
}

#[test]
fn chrome_trace_of_the_showcase_run() {
    let mut out = Vec::new();
    write_chrome_trace(showcase_run().reads(), &mut out, &Filter::all()).unwrap();
    let text = String::from_utf8(out).unwrap();
    let document: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = document["traceEvents"].as_array().unwrap();
    let attempts = events.iter().filter(|e| e["cat"] == "attempt").count();
    assert_eq!(attempts, 8);
    // Complete events on one track never overlap unless nested (a phase in its attempt).
    for event in events.iter().filter(|e| e["cat"] == "attempt") {
        let (tid, ts, dur) = (&event["tid"], event["ts"].as_u64(), event["dur"].as_u64());
        let (ts, dur) = (ts.unwrap(), dur.unwrap());
        for other in events
            .iter()
            .filter(|o| o["cat"] == "attempt" && *o != event)
        {
            if &other["tid"] == tid {
                let other_ts = other["ts"].as_u64().unwrap();
                let other_end = other_ts + other["dur"].as_u64().unwrap();
                assert!(
                    other_end <= ts || other_ts >= ts + dur,
                    "{event} overlaps {other}"
                );
            }
        }
    }
    // The streaming trace puts each attempt on the lane the Timeline gives it.
    let timeline = timeline(&showcase_run());
    for event in events.iter().filter(|e| e["cat"] == "attempt") {
        let unit = timeline
            .unit(event["args"]["unit"].as_str().unwrap())
            .unwrap();
        let number = event["args"]["attempt"].as_u64().unwrap() as u32;
        let attempt = unit.attempts.iter().find(|a| a.number == number).unwrap();
        assert_eq!(event["tid"], attempt.lane + 1, "{event}");
        assert_eq!(event["args"]["status"], attempt.state.as_str(), "{event}");
    }
    let lanes = events.iter().filter(|e| e["name"] == "thread_name").count();
    assert_eq!(lanes, timeline.n_lanes + 1);
    insta::assert_snapshot!(text);
}

#[test]
fn chrome_trace_filtered_by_unit_keeps_only_its_attempts() {
    let mut out = Vec::new();
    let filter = Filter::all().unit("slow");
    write_chrome_trace(showcase_run().reads(), &mut out, &filter).unwrap();
    let document: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let names: Vec<_> = document["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "attempt" || e["cat"] == "mark" || e["cat"] == "skip")
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    // In journal order: the abandoned first attempt is written when the resume gives up on it.
    assert_eq!(names, ["marked slow failed", "slow #1", "slow #2"]);
}

#[test]
fn lanes_partition_parallel_attempts() {
    let timeline = timeline(&showcase_run());
    assert_eq!(timeline.n_lanes, 2);
    let lane_of = |unit: &str, attempt: usize| timeline.unit(unit).unwrap().attempts[attempt].lane;
    assert_eq!(lane_of("fetch_a", 0), 0);
    assert_eq!(lane_of("fetch_b", 0), 1);
    // fetch_a finished at +1.010, so flaky (started +1.020) reuses lane 0.
    assert_eq!(lane_of("flaky", 0), 0);
    assert_eq!(lane_of("transform", 0), 1);
    let slow = timeline.unit("slow").unwrap();
    assert_eq!(slow.attempts[0].state, AttemptState::Unfinished);
    // The abandoned attempt ends at the last record its process wrote: not the mark at +59s,
    // which `apollo mark` wrote after that process died.
    assert_eq!(slow.attempts[0].end, at(4_000));
    assert_eq!(slow.status, UnitStatus::TimedOut);
    assert_eq!(timeline.resumes[0].n_abandoned, 1);
    assert_eq!(timeline.status_str(), "failed");
    assert_eq!(
        timeline.unit("optional").unwrap().status,
        UnitStatus::Skipped
    );
    assert_eq!(
        timeline.unit("report").unwrap().status,
        UnitStatus::UpstreamFailed
    );
}

#[test]
fn a_run_that_died_is_incomplete_with_its_running_attempts_unfinished() {
    let mut run = RunBuilder::new("r", &["a", "b", "c"]);
    run.start(5, "a", 1).start(6, "b", 1).succeed(100, "b", 1);
    let timeline = timeline(&run);
    assert_eq!(timeline.status_str(), "incomplete");
    let a = timeline.unit("a").unwrap();
    assert_eq!(a.status, UnitStatus::Unfinished);
    assert_eq!(a.attempts[0].end, at(100));
    assert_eq!(timeline.unit("c").unwrap().status, UnitStatus::NotRun);
}

#[test]
fn a_mark_after_the_last_attempt_decides_the_status() {
    let mut run = RunBuilder::new("r", &["a"]);
    run.start(5, "a", 1)
        .mark(10, "a", 1, Verdict::Succeeded, "it did finish");
    assert_eq!(
        timeline(&run).unit("a").unwrap().status,
        UnitStatus::MarkedSucceeded
    );
}

#[test]
fn filtered_timeline_keeps_the_overlapping_attempts() {
    let filter = Filter::all().since(at(1_600)).until(at(2_000));
    let filtered = timeline(&showcase_run()).filtered(&filter);
    let names: Vec<_> = filtered
        .units
        .iter()
        .map(|unit| unit.name.as_str())
        .collect();
    assert_eq!(names, ["flaky", "transform"]);
    let by_unit = timeline(&showcase_run()).filtered(&Filter::all().unit("slow"));
    assert_eq!(by_unit.units.len(), 1);
    assert_eq!(by_unit.units[0].attempts.len(), 2);
}

#[test]
fn format_names_round_trip() {
    for format in Format::ALL {
        assert_eq!(format.as_str().parse::<Format>(), Ok(format));
    }
    let error = "yaml".parse::<Format>().unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown replay format `yaml` (expected text, json, chrome-trace or html)"
    );
}

// ---- diffs ----

const ETL_UNITS: [&str; 3] = ["fetch_data", "transform", "report"];

/// A small successful run; `tweak` changes the pipeline before it runs, `speed` scales the
/// durations (which must never make runs differ).
fn etl_run(run_id: &str, speed: i64, tweak: impl FnOnce(&mut RunBuilder)) -> RunBuilder {
    let mut run = RunBuilder::new(run_id, &ETL_UNITS);
    run.file("fetch_data", "data/raw.csv", "rows v1")
        .env("fetch_data", "SOURCE", "local")
        .dep("transform", "fetch_data")
        .dep("report", "transform");
    tweak(&mut run);
    run.start(10, "fetch_data", 1)
        .succeed(10 + 1_000 * speed, "fetch_data", 1)
        .start(20 + 1_000 * speed, "transform", 1)
        .succeed(20 + 3_000 * speed, "transform", 1)
        .start(30 + 3_000 * speed, "report", 1)
        .succeed(30 + 3_500 * speed, "report", 1)
        .end(40 + 3_500 * speed, RunStatus::Succeeded, 3, 0, 0);
    run
}

fn diff(a: &RunBuilder, b: &RunBuilder) -> RunDiff {
    diff_records(a.reads(), b.reads()).unwrap()
}

fn diff_text(diff: &RunDiff) -> String {
    let mut out = Vec::new();
    write_diff_text(diff, &mut out, false).unwrap();
    String::from_utf8(out).unwrap()
}

const RUN_A: &str = "20261129T021507Z-aaaa";
const RUN_B: &str = "20261130T021507Z-bbbb";

#[test]
fn diff_of_identical_runs_is_same_even_when_durations_differ() {
    let diff = diff(&etl_run(RUN_A, 1, |_| {}), &etl_run(RUN_B, 2, |_| {}));
    assert!(diff.is_same());
    insta::assert_snapshot!(diff_text(&diff));
}

#[test]
fn diff_names_the_changed_input_file_and_its_downstream_effect() {
    let b = etl_run(RUN_B, 1, |run| {
        run.file("fetch_data", "data/raw.csv", "rows v2")
            .output("fetch_data", "v2")
            .output("transform", "v2");
    });
    let diff = diff(&etl_run(RUN_A, 1, |_| {}), &b);
    assert!(!diff.is_same());
    let fetch = &diff.units[0];
    assert_eq!(
        fetch.reasons(),
        ["input file data/raw.csv changed", "output changed"]
    );
    let report = &diff.units[2];
    assert_eq!(report.reasons(), ["upstream transform output changed"]);
    insta::assert_snapshot!(diff_text(&diff));
}

#[test]
fn diff_names_a_changed_command() {
    let b = etl_run(RUN_B, 1, |run| {
        run.command("transform", Phase::Execute, "./units/transform.sh --strict");
    });
    let diff = diff(&etl_run(RUN_A, 1, |_| {}), &b);
    assert_eq!(diff.units[1].reasons(), ["command execute changed"]);
    insta::assert_snapshot!(diff_text(&diff));
}

#[test]
fn diff_of_a_unit_failing_only_in_b() {
    let mut b = RunBuilder::new(RUN_B, &ETL_UNITS);
    b.file("fetch_data", "data/raw.csv", "rows v1")
        .env("fetch_data", "SOURCE", "local")
        .dep("transform", "fetch_data")
        .dep("report", "transform");
    b.start(10, "fetch_data", 1)
        .succeed(1_010, "fetch_data", 1)
        .start(1_020, "transform", 1)
        .fail(
            1_500,
            "transform",
            1,
            3,
            "KeyError: 'amount'\nTraceback (most recent call last):",
        )
        .skip_upstream(1_510, "report", "transform")
        .end(1_520, RunStatus::Failed, 1, 1, 1);
    let diff = diff(&etl_run(RUN_A, 1, |_| {}), &b);
    assert!(!diff.is_same());
    let mut json = Vec::new();
    write_diff_json(&diff, &mut json).unwrap();
    let json = String::from_utf8(json).unwrap();
    insta::assert_snapshot!("diff_of_a_unit_failing_only_in_b_text", diff_text(&diff));
    insta::assert_snapshot!("diff_of_a_unit_failing_only_in_b_json", json);
}

#[test]
fn diff_of_a_unit_added_in_b() {
    let b_units = ["fetch_data", "transform", "validate", "report"];
    let mut b = RunBuilder::new(RUN_B, &b_units);
    b.file("fetch_data", "data/raw.csv", "rows v1")
        .env("fetch_data", "SOURCE", "local")
        .dep("transform", "fetch_data")
        .dep("validate", "transform")
        .dep("report", "transform");
    b.start(10, "fetch_data", 1)
        .succeed(1_010, "fetch_data", 1)
        .start(1_020, "transform", 1)
        .succeed(3_020, "transform", 1)
        .start(3_030, "validate", 1)
        .start(3_031, "report", 1)
        .succeed(3_200, "validate", 1)
        .succeed(3_531, "report", 1)
        .end(3_540, RunStatus::Succeeded, 4, 0, 0);
    let diff = diff(&etl_run(RUN_A, 1, |_| {}), &b);
    assert!(!diff.is_same());
    assert_eq!(diff.changed_units().count(), 1);
    assert_eq!(diff.units[2].presence, Presence::OnlyB);
    insta::assert_snapshot!(diff_text(&diff));
}

#[test]
fn diff_lists_units_only_in_a_after_b_and_names_env_changes() {
    let mut a = RunBuilder::new(RUN_A, &["fetch_data", "legacy"]);
    a.env("fetch_data", "SOURCE", "local");
    a.start(10, "fetch_data", 1)
        .succeed(20, "fetch_data", 1)
        .start(30, "legacy", 1)
        .succeed(40, "legacy", 1);
    let mut b = RunBuilder::new(RUN_B, &["fetch_data"]);
    b.env("fetch_data", "SOURCE", "s3")
        .env("fetch_data", "REGION", "eu");
    b.start(10, "fetch_data", 1).succeed(20, "fetch_data", 1);
    let diff = diff(&a, &b);
    let names: Vec<_> = diff.units.iter().map(|unit| unit.unit.as_str()).collect();
    assert_eq!(names, ["fetch_data", "legacy"]);
    assert_eq!(
        diff.units[0].reasons(),
        ["env REGION added", "env SOURCE changed"]
    );
    assert_eq!(diff.units[1].presence, Presence::OnlyA);
    assert_eq!(diff.units[1].reasons(), ["only in run A"]);
}

#[test]
fn an_attempt_committed_ahead_starts_when_its_queue_wait_ended() {
    let mut run = RunBuilder::new("r", &["a"]);
    run.start(10, "a", 1).succeed(500, "a", 1);
    let mut records = run.records();
    for record in &mut records {
        if let apollo_core::Event::UnitFinished(finished) = &mut record.event {
            finished.queued_ms = 300;
        }
    }
    let timeline =
        Timeline::from_records(records.into_iter().map(Ok::<_, std::convert::Infallible>)).unwrap();
    let attempt = &timeline.unit("a").unwrap().attempts[0];
    assert_eq!(attempt.start, at(310));
    assert_eq!(attempt.end, at(500));
}

#[test]
fn attempts_committed_ahead_share_the_lanes_of_the_workers_that_ran_them() {
    // Two workers; four attempts committed at once, the last two waiting 500 ms for a worker.
    let units = ["a", "b", "c", "d"];
    let mut run = RunBuilder::new("r", &units);
    for unit in units {
        run.start(10, unit, 1);
    }
    run.succeed(500, "a", 1)
        .succeed(500, "b", 1)
        .succeed(1_000, "c", 1)
        .succeed(1_000, "d", 1);
    let mut records = run.records();
    for record in &mut records {
        if let apollo_core::Event::UnitFinished(finished) = &mut record.event
            && (finished.unit == "c" || finished.unit == "d")
        {
            finished.queued_ms = 490;
        }
    }
    let timeline = Timeline::from_records(
        records
            .clone()
            .into_iter()
            .map(Ok::<_, std::convert::Infallible>),
    )
    .unwrap();
    assert_eq!(
        timeline.n_lanes, 2,
        "lanes follow the workers, not the commits"
    );
    let lane_of = |unit: &str| timeline.unit(unit).unwrap().attempts[0].lane;
    assert_ne!(lane_of("a"), lane_of("b"));
    assert_ne!(lane_of("c"), lane_of("d"));
    // The Chrome trace lays them out alike.
    let mut trace = Vec::new();
    write_chrome_trace(
        records.into_iter().map(Ok::<_, std::convert::Infallible>),
        &mut trace,
        &Filter::all(),
    )
    .unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&trace).unwrap();
    for event in trace["traceEvents"].as_array().unwrap() {
        if event["cat"] == "attempt" {
            let unit = event["args"]["unit"].as_str().unwrap();
            assert_eq!(event["tid"], lane_of(unit) + 1, "{event}");
        }
    }
}

#[test]
fn a_live_run_reads_as_running_with_its_apollo_pid_never_as_stopped() {
    let mut run = RunBuilder::new("r", &["a", "b", "c"]);
    run.start(5, "a", 1).start(6, "b", 1).succeed(100, "b", 1);
    let live = render_text(&run, &TextOptions::default().live(Some(4242)));
    assert!(!live.contains("stopped"), "{live}");
    insta::assert_snapshot!(live);
    let dead = render_text(&run, &TextOptions::default());
    assert!(dead.contains("apollo stopped before it finished"), "{dead}");
}

#[test]
fn lanes_absorb_millisecond_rounding_and_never_outnumber_known_workers() {
    use crate::timeline::Lanes;
    // A worker's next attempt appears to start a millisecond before its previous one ended.
    let mut lanes = Lanes::default();
    assert_eq!(lanes.place(at(0), at(10)), 0);
    assert_eq!(lanes.place(at(0), at(12)), 1);
    assert_eq!(lanes.place(at(9), at(20)), 0);
    // Three overlapping attempts need three lanes, unless the run had two workers.
    let mut unknown = Lanes::default();
    let mut two = Lanes::with_max(Some(2));
    for lanes in [&mut unknown, &mut two] {
        lanes.place(at(0), at(100));
        lanes.place(at(0), at(50));
        lanes.place(at(10), at(60));
    }
    assert_eq!(unknown.place(at(200), at(300)), 0);
    assert_eq!(two.place(at(200), at(300)), 0);
    assert_eq!(two.place(at(20), at(30)), 1, "the lane freed first");
}

#[test]
fn junit_report_of_the_showcase_run() {
    let excerpts = |unit: &str, attempt: u32| {
        Some(format!(
            "stderr of {unit} attempt {attempt}\nTraceback <& \"quoted\">\n"
        ))
    };
    let mut out = Vec::new();
    write_junit(&timeline(&showcase_run()), &mut out, &excerpts).unwrap();
    let xml = String::from_utf8(out).unwrap();
    insta::assert_snapshot!(xml);
    // One test case per unit, and what test reporters need: failures, flaky reruns, skips.
    assert_eq!(
        xml.matches("<testcase ").count(),
        timeline(&showcase_run()).units.len()
    );
    assert!(xml.contains("<flakyFailure"), "{xml}");
    assert!(xml.contains("&lt;&amp; &quot;quoted&quot;&gt;"), "{xml}");
    // What a JUnit reader makes of it: the same cases and statuses.
    let read = quick_junit::Report::deserialize_from_str(&xml).expect("well-formed JUnit XML");
    let suite = &read.test_suites[0];
    assert_eq!((suite.tests, suite.failures, suite.errors), (7, 1, 0));
}

#[test]
fn html_table_shows_phases_cpu_memory_and_status_signs_without_hovering() {
    let mut out = Vec::new();
    write_html(&timeline(&showcase_run()), &mut out).unwrap();
    let page = String::from_utf8(out).unwrap();
    for needle in [
        "<th>phases</th>",
        "<th>cpu</th>",
        "<th>max rss</th>",
        "execute 995ms",
        "⏱ failed (timed out)",
        "id=\"status-filter\"",
        "data-duration=",
        // The showcase run was resumed after its apollo died: the gap is shaded.
        "<rect class=\"gap\"",
        "apollo was not running",
    ] {
        assert!(page.contains(needle), "{needle}");
    }
}

#[test]
fn html_marks_the_critical_path_and_the_timeout_limit() {
    let timeline = timeline(&showcase_run());
    let deps = std::collections::HashMap::from([
        (
            "transform".to_owned(),
            vec!["fetch_a".to_owned(), "fetch_b".to_owned()],
        ),
        ("slow".to_owned(), vec!["transform".to_owned()]),
        ("report".to_owned(), vec!["slow".to_owned()]),
    ]);
    let timeouts = std::collections::HashMap::from([("slow".to_owned(), 30_000)]);
    let mut out = Vec::new();
    write_html_with(
        &timeline,
        &mut out,
        &HtmlExtras::new().deps(deps).timeouts_ms(timeouts),
    )
    .unwrap();
    let page = String::from_utf8(out).unwrap();
    assert!(
        page.contains("<g class=\"row critical\" data-unit=\"slow\""),
        "slow ended last"
    );
    assert!(page.contains("<g class=\"row critical\" data-unit=\"transform\""));
    assert!(
        page.contains("<g class=\"row critical\" data-unit=\"fetch_b\""),
        "fetch_b ended after fetch_a"
    );
    assert!(!page.contains("<g class=\"row critical\" data-unit=\"fetch_a\""));
    assert!(page.contains("class=\"timeout-mark\""), "slow's 30 s limit");
}
