//! Journals are user data: whatever records arrive, in whatever order, with whatever
//! durations, no renderer and no diff panics.

use apollo_core::Phase;
use apollo_core::Record;
use apollo_core::event::*;
use chrono::DateTime;
use proptest::prelude::*;

use crate::testkit::BASE_MS;
use crate::*;

const UNITS: [&str; 4] = ["a", "b", "c", "d\u{1b}[31m<x>"];

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter)
}

fn unit() -> impl Strategy<Value = String> {
    prop_oneof![(0..UNITS.len()).prop_map(|i| UNITS[i].to_owned()), text(),]
}

fn exit() -> impl Strategy<Value = Option<ExitStatus>> {
    prop_oneof![
        Just(None),
        any::<i32>().prop_map(|code| Some(ExitStatus::Code(code))),
        any::<i32>().prop_map(|signal| Some(ExitStatus::Signal(signal))),
    ]
}

fn phase() -> impl Strategy<Value = PhaseRecord> {
    (0..3u8, any::<u64>(), any::<u64>(), exit(), any::<bool>()).prop_map(
        |(phase, offset_ms, duration_ms, exit, timed_out)| PhaseRecord {
            phase: [Phase::Prepare, Phase::Execute, Phase::Cleanup][usize::from(phase)],
            offset_ms,
            duration_ms,
            exit,
            timed_out,
        },
    )
}

fn status() -> impl Strategy<Value = AttemptStatus> {
    prop_oneof![
        Just(AttemptStatus::Succeeded),
        Just(AttemptStatus::Failed),
        Just(AttemptStatus::TimedOut),
        Just(AttemptStatus::Interrupted),
        Just(AttemptStatus::Skipped),
    ]
}

#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
fn event() -> impl Strategy<Value = Event> {
    let hash = prop_oneof![Just("ab".repeat(32)), Just("cd".repeat(32)), text()];
    let inputs = proptest::collection::vec(
        (
            0..4u8,
            0..3u8,
            prop_oneof![Just("x".to_owned()), Just("y".to_owned())],
        )
            .prop_map(|(kind, name, hash)| InputComponent {
                kind: [
                    InputKind::Command,
                    InputKind::Env,
                    InputKind::File,
                    InputKind::Upstream,
                ][usize::from(kind)],
                name: format!("n{name}"),
                hash,
            }),
        0..4,
    );
    prop_oneof![
        (text(), proptest::collection::vec(unit(), 0..5)).prop_map(|(run_id, units)| {
            Event::RunStarted(RunStarted {
                run_id,
                pipeline: "p".into(),
                config_path: "c".into(),
                config_hash: String::new(),
                definition_hash: String::new(),
                apollo_version: "0".into(),
                host: "<h>".into(),
                pid: 1,
                units,
                identity: None,
                params: Default::default(),
                run_kind: apollo_core::event::RunKind::Run,
                durability: apollo_core::Durability::Fsync,
                deadlines: None,
            })
        }),
        proptest::collection::vec(unit(), 0..5).prop_map(|units| {
            Event::RunResumed(RunResumed {
                config_hash: String::new(),
                definition_hash: String::new(),
                apollo_version: "0".into(),
                host: "h".into(),
                pid: 2,
                units,
            })
        }),
        (unit(), 0..4u32, hash.clone(), inputs).prop_map(|(unit, attempt, input_hash, inputs)| {
            Event::UnitStarted(UnitStarted {
                unit,
                attempt,
                input_hash,
                inputs,
                inputs_manifest: None,
            })
        }),
        (
            (
                unit(),
                0..4u32,
                status(),
                exit(),
                any::<bool>(),
                any::<u64>()
            ),
            (proptest::option::of(hash), any::<u64>(), any::<u64>()),
            (
                proptest::collection::vec(phase(), 0..4),
                proptest::option::of(text())
            ),
        )
            .prop_map(
                |(
                    (unit, attempt, status, exit, timed_out, duration_ms),
                    (output_hash, cpu, rss),
                    (phases, error),
                )| {
                    Event::UnitFinished(UnitFinished {
                        unit,
                        attempt,
                        status,
                        exit,
                        failed_phase: None,
                        timed_out,
                        duration_ms,
                        queued_ms: 0,
                        output_hash,
                        stdout_bytes: cpu,
                        stderr_bytes: rss,
                        user_cpu_ms: cpu,
                        sys_cpu_ms: cpu,
                        max_rss_kib: rss,
                        leftovers_killed: 0,
                        phases,
                        error,
                    })
                }
            ),
        (
            unit(),
            prop_oneof![Just(None), unit().prop_map(Some)],
            any::<bool>()
        )
            .prop_map(|(unit, upstream, when)| {
                Event::UnitSkipped(UnitSkipped {
                    unit,
                    reason: match upstream {
                        Some(upstream) => SkipReason::UpstreamFailed { upstream },
                        None if when => SkipReason::When {
                            condition: "false".to_owned(),
                        },
                        None => SkipReason::Interrupted,
                    },
                })
            }),
        (unit(), 0..4u32, any::<bool>(), proptest::option::of(text())).prop_map(
            |(unit, attempt, ok, note)| {
                Event::UnitMarked(UnitMarked {
                    unit,
                    attempt,
                    verdict: if ok {
                        Verdict::Succeeded
                    } else {
                        Verdict::Failed
                    },
                    by: "<b>".into(),
                    note,
                })
            }
        ),
        Just(Event::RunFinished(RunFinished {
            status: RunStatus::Failed,
            succeeded: 0,
            failed: 1,
            skipped: 0,
            reused: 0,
        })),
    ]
}

/// Records with arbitrary events and timestamps that may jump backwards or far apart.
fn records() -> impl Strategy<Value = Vec<Record>> {
    let ts_ms = prop_oneof![
        0..100_000i64,
        -8_000_000_000_000_000i64..8_000_000_000_000_000i64,
    ];
    proptest::collection::vec((any::<u64>(), ts_ms, event()), 0..24).prop_map(|records| {
        records
            .into_iter()
            .filter_map(|(seq, ts_ms, event)| {
                let ts = DateTime::from_timestamp_millis(BASE_MS.saturating_add(ts_ms))?;
                Some(Record { seq, ts, event })
            })
            .collect()
    })
}

fn reads(records: &[Record]) -> impl Iterator<Item = Result<Record, std::convert::Infallible>> {
    records.iter().cloned().map(Ok)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn the_diff_s_streaming_fold_agrees_with_the_timeline(a in records()) {
        let timeline = Timeline::from_records(reads(&a)).unwrap();
        prop_assert_eq!(
            crate::diff::RunSummary::fold(reads(&a), false).unwrap(),
            crate::diff::RunSummary::of(&timeline)
        );
    }

    #[test]
    fn no_renderer_panics_on_any_journal(a in records(), b in records()) {
        let filter = Filter::all().unit("a").since(TimeBound::FromStart(5)).until(
            TimeBound::FromStart(u64::MAX));
        for format in Format::ALL {
            for options in [ReplayOptions::new(format), ReplayOptions::new(format).filter(filter.clone()).color(true)] {
                let mut out = Vec::new();
                replay(reads(&a), &mut out, &options).unwrap();
                let out = String::from_utf8(out).unwrap();
                if format == Format::Text {
                    // Terminal escapes from the journal are never passed through.
                    prop_assert!(!out.contains("\u{1b}[31m<x>"), "{out}");
                }
                if format == Format::ChromeTrace {
                    serde_json::from_str::<serde_json::Value>(&out).unwrap();
                }
                if format == Format::Html {
                    prop_assert!(!out.contains("<x>"), "unescaped journal text");
                }
            }
        }
        let diff = diff_records(reads(&a), reads(&b)).unwrap();
        let same_as_itself = diff_records(reads(&a), reads(&a)).unwrap();
        prop_assert!(same_as_itself.is_same(), "a run differs from itself");
        let mut out = Vec::new();
        write_diff_text(&diff, &mut out, true).unwrap();
        write_diff_json(&diff, &mut out).unwrap();
    }
}
