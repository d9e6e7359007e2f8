//! Journal events with every field of every kind set: the fast codec's fixture.

/// Events of every kind with **every field set** — every `Option` `Some`, every list and map
/// non-empty, every number non-zero — and, between them, every variant of every enum a record
/// holds; then each kind once more with every optional field at its default (which serde
/// leaves out or writes as `null`). The fixture of the test that every field of every record
/// kind takes the journal's fast path (apollo-store's `verbatim` tests) and that the fast
/// encoder writes serde's bytes ([`codec`](crate::codec)).
///
/// The structs are written out field by field, without `..`: a field added to a record does
/// not compile here until it is given a value, so the tests see it.
#[expect(
    clippy::too_many_lines,
    reason = "a fixture: every record kind written out field by field, so a new field does not compile until it is given a value"
)]
pub fn every_field_of_every_kind() -> Vec<crate::Event> {
    use crate::Phase;
    use crate::capture::FileEntry;
    use crate::codec::JsonUnitEnum;
    use crate::event::{
        AttemptStatus, Event, ExitStatus, FileSide, HookFinished, InputComponent, InputKind,
        InputManifestRef, PhaseRecord, RunFinished, RunKind, RunReproduces, RunResumed, RunStarted,
        RunStatus, SkipReason, UnitFiles, UnitFinished, UnitMarked, UnitReused, UnitSkipped,
        UnitStarted, UnitSubmitted, Verdict,
    };

    /// Variant `index` of a field-less enum, round the list.
    fn nth<T: JsonUnitEnum>(index: usize) -> T {
        T::VARIANTS[index % T::VARIANTS.len()].1
    }
    let inputs = |index: usize| -> Vec<InputComponent> {
        (0..InputKind::VARIANTS.len())
            .map(|kind| InputComponent {
                kind: nth(kind + index),
                name: format!("in{kind}/é"),
                hash: format!("{index}{kind:062}"),
            })
            .collect()
    };
    let manifest = |count| InputManifestRef {
        sha256: "b6bf788ceabafc27cf50088d6925f02de39efb6b1624e7df4f9437bccf71dfec".into(),
        count,
    };
    let exits = [
        ExitStatus::Code(3),
        ExitStatus::Signal(9),
        ExitStatus::Code(-1),
    ];
    let most_variants = [
        AttemptStatus::VARIANTS.len(),
        Phase::VARIANTS.len(),
        Verdict::VARIANTS.len(),
        RunStatus::VARIANTS.len(),
        RunKind::VARIANTS.len(),
        crate::journal::Durability::VARIANTS.len(),
        FileSide::VARIANTS.len(),
        exits.len(),
        3, // SkipReason
    ]
    .into_iter()
    .max()
    .unwrap_or(1);
    let mut events = Vec::new();
    for index in 0..most_variants {
        let n = index as u64 + 1;
        let small = index as u32 + 1;
        let exit = exits[index % exits.len()];
        events.extend([
            Event::RunStarted(RunStarted {
                run_id: "20261203T190000Z-3f9a".into(),
                pipeline: "nightly".into(),
                config_path: "apollo.yaml".into(),
                config_hash: "c".repeat(64),
                definition_hash: "d".repeat(64),
                apollo_version: "0.1.0".into(),
                host: "node-7".into(),
                pid: 4242 + small,
                units: vec!["fetch".into(), "load[eu,a]".into(), "日本".into()],
                identity: Some("nightly@apollo.yaml".into()),
                params: [
                    ("day", serde_json::json!("2026-12-03")),
                    ("n", serde_json::json!(n)),
                    ("ratio", serde_json::json!(1.5)),
                    ("dry", serde_json::json!(true)),
                    ("regions", serde_json::json!(["eu", "us"])),
                ]
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
                run_kind: nth(index),
                durability: nth(index),
                deadlines: (index % 3 > 0).then(|| {
                    Box::new(crate::event::RunDeadlines {
                        run: (index % 2 == 0).then(|| "2026-12-04T05:00:00.000000Z".into()),
                        units: (0..index % 3)
                            .map(|at| crate::event::UnitDeadline {
                                unit: format!("load[eu,{at}]"),
                                at: "2026-12-04T06:00:00.000000Z".into(),
                            })
                            .collect(),
                    })
                }),
            }),
            Event::RunResumed(RunResumed {
                config_hash: "c".repeat(64),
                definition_hash: "d".repeat(64),
                apollo_version: "0.1.0".into(),
                host: "node-8".into(),
                pid: 77 + small,
                units: vec!["fetch".into()],
            }),
            Event::RunReproduces(RunReproduces {
                run: "20261203T180000Z-0001".into(),
                unit: "fetch".into(),
                attempt: small,
                scratch: "/tmp/apollo-reproduce-1".into(),
            }),
            Event::UnitStarted(UnitStarted {
                unit: format!("u{index:05}"),
                attempt: small,
                input_hash: "e".repeat(64),
                inputs: inputs(index),
                inputs_manifest: Some(manifest(100_000 + n)),
            }),
            Event::UnitFiles(UnitFiles {
                unit: "fetch".into(),
                attempt: small,
                side: nth(index),
                files: vec![
                    FileEntry {
                        path: "data/in.csv".into(),
                        sha256: "f".repeat(64),
                        size: 3_000_000_000 + n,
                        mode: 0o644,
                        not_captured: Some("2.8 GiB > 64 MiB".into()),
                    },
                    FileEntry {
                        path: "data/small.csv".into(),
                        sha256: "a".repeat(64),
                        size: n,
                        mode: 0o600,
                        not_captured: Some("capture: outputs".into()),
                    },
                ],
                manifest: Some(manifest(7 + n)),
            }),
            Event::UnitSubmitted(UnitSubmitted {
                unit: "align".into(),
                attempt: small + 1,
                executor: "slurm".into(),
                job_id: format!("{}", 4_000_000 + n),
                reattached_from: Some(small),
                partition: Some(format!("gpu-{n}")),
                nodes: Some(small),
                mem_mib: Some(4_096 + n),
            }),
            Event::UnitFinished(UnitFinished {
                unit: format!("u{index:05}"),
                attempt: small,
                status: nth(index),
                exit: Some(exit),
                failed_phase: Some(nth(index)),
                timed_out: true,
                duration_ms: 1000 + n,
                queued_ms: 10 + n,
                output_hash: Some("0".repeat(64)),
                stdout_bytes: u64::MAX,
                stderr_bytes: 2 * n,
                user_cpu_ms: 3 * n,
                sys_cpu_ms: 4 * n,
                max_rss_kib: 5444 + n,
                leftovers_killed: u32::MAX,
                phases: (0..Phase::VARIANTS.len())
                    .map(|phase| PhaseRecord {
                        phase: nth(phase + index),
                        offset_ms: 1 + phase as u64,
                        duration_ms: n,
                        exit: Some(exits[(phase + index) % exits.len()]),
                        timed_out: true,
                    })
                    .collect(),
                error: Some("timed out after 1 s".into()),
            }),
            Event::UnitSkipped(UnitSkipped {
                unit: "report".into(),
                reason: match index % 3 {
                    0 => SkipReason::UpstreamFailed {
                        upstream: "fetch".into(),
                    },
                    1 => SkipReason::Interrupted,
                    _ => SkipReason::When {
                        condition: "${params.region} == eu".into(),
                    },
                },
            }),
            Event::UnitMarked(UnitMarked {
                unit: "fetch".into(),
                attempt: small,
                verdict: nth(index),
                by: "ada".into(),
                note: Some("checked by hand".into()),
            }),
            Event::UnitReused(UnitReused {
                unit: format!("u{index:05}"),
                from_run: "20261203T180000Z-0001".into(),
                from_attempt: small,
                input_hash: "e".repeat(64),
                inputs: inputs(index),
                output_hash: "0".repeat(64),
                restored: vec!["out/a.csv".into(), format!("out/u{index:05}.csv")],
            }),
            Event::RunFinished(RunFinished {
                status: nth(index),
                succeeded: 10 + small,
                failed: small,
                skipped: 2 * small,
                reused: 3 * small,
            }),
            Event::HookFinished(HookFinished {
                hook: "on_failure".into(),
                run_status: "failed".into(),
                status: nth(index),
                exit: Some(exit),
                duration_ms: n,
                error: Some("exit 3".into()),
            }),
            Event::RunLate(crate::event::RunLate {
                deadline: "2026-12-04T05:00:00.000000Z".into(),
                predicted_finish: "2026-12-04T05:10:00.000000Z".into(),
                predicted_finish_p95: "2026-12-04T05:20:00.000000Z".into(),
                critical_path: vec![format!("u{index:05}"), "join".into()],
                no_history: vec!["new".into()],
            }),
            Event::ReproductionCompared(crate::event::ReproductionCompared {
                reproduced: index % 2 == 0,
                recorded_status: Some(nth(index + 1)),
                status: nth(index),
                outputs_differ: vec![format!("out/u{index:05}.csv")],
            }),
        ]);
    }
    // Each kind with every optional field at its default.
    events.extend([
        Event::RunStarted(RunStarted {
            run_id: "r".into(),
            pipeline: String::new(),
            config_path: String::new(),
            config_hash: String::new(),
            definition_hash: String::new(),
            apollo_version: String::new(),
            host: String::new(),
            pid: 0,
            units: Vec::new(),
            identity: None,
            params: Default::default(),
            run_kind: RunKind::Run,
            durability: crate::journal::Durability::Fsync,
            deadlines: None,
        }),
        Event::RunResumed(RunResumed {
            config_hash: String::new(),
            definition_hash: String::new(),
            apollo_version: String::new(),
            host: String::new(),
            pid: 0,
            units: Vec::new(),
        }),
        Event::UnitStarted(UnitStarted {
            unit: "a".into(),
            attempt: 1,
            input_hash: String::new(),
            inputs: Vec::new(),
            inputs_manifest: None,
        }),
        Event::UnitFiles(UnitFiles {
            unit: "a".into(),
            attempt: 1,
            side: FileSide::Inputs,
            files: vec![FileEntry {
                path: "x".into(),
                sha256: String::new(),
                size: 0,
                mode: 0,
                not_captured: None,
            }],
            manifest: None,
        }),
        Event::UnitSubmitted(UnitSubmitted {
            unit: "a".into(),
            attempt: 1,
            executor: "slurm".into(),
            job_id: "1".into(),
            reattached_from: None,
            partition: None,
            nodes: None,
            mem_mib: None,
        }),
        Event::UnitFinished(UnitFinished {
            unit: "a".into(),
            attempt: 1,
            status: AttemptStatus::Succeeded,
            exit: None,
            failed_phase: None,
            timed_out: false,
            duration_ms: 0,
            queued_ms: 0,
            output_hash: None,
            stdout_bytes: 0,
            stderr_bytes: 0,
            user_cpu_ms: 0,
            sys_cpu_ms: 0,
            max_rss_kib: 0,
            leftovers_killed: 0,
            phases: vec![PhaseRecord {
                phase: Phase::Execute,
                offset_ms: 0,
                duration_ms: 0,
                exit: None,
                timed_out: false,
            }],
            error: None,
        }),
        Event::UnitMarked(UnitMarked {
            unit: "a".into(),
            attempt: 1,
            verdict: Verdict::Rerun,
            by: String::new(),
            note: None,
        }),
        Event::UnitReused(UnitReused {
            unit: "a".into(),
            from_run: "r".into(),
            from_attempt: 1,
            input_hash: String::new(),
            inputs: Vec::new(),
            output_hash: String::new(),
            restored: Vec::new(),
        }),
        Event::RunFinished(RunFinished {
            status: RunStatus::Succeeded,
            succeeded: 0,
            failed: 0,
            skipped: 0,
            reused: 0,
        }),
        Event::HookFinished(HookFinished {
            hook: "on_finish".into(),
            run_status: "succeeded".into(),
            status: AttemptStatus::Succeeded,
            exit: None,
            duration_ms: 0,
            error: None,
        }),
        Event::RunLate(crate::event::RunLate::default()),
        Event::ReproductionCompared(crate::event::ReproductionCompared {
            reproduced: false,
            recorded_status: None,
            status: AttemptStatus::Failed,
            outputs_differ: Vec::new(),
        }),
    ]);
    events
}
