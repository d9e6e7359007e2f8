//! Testing aids shared by every Apollo crate's tests (and usable by a consumer's).
//!
//! One policy for a test that needs something a machine may lack — Chromium, root, a
//! filesystem with `O_TMPFILE`, a Slurm cluster: [`require`] checks it once, at the top of
//! the test.
//!
//! * **Available**: the test runs.
//! * **Missing on a developer's machine**: the test prints a visible line such as
//!   `SKIPPED: needs chromium (apt-get install chromium)` and passes, so `cargo test` on a
//!   fresh machine is green and says what it did not check.
//! * **Missing under `CI=true`**: the test fails. CI provisions everything the suite needs,
//!   so a missing tool there is a broken CI machine, not a reason to check less.
//!
//! The line is written straight to the process's standard error, past the test harness's
//! output capture, so it shows in an ordinary `cargo test` run.
//!
//! # Example
//!
//! ```
//! fn chromium_on_path() -> bool {
//!     std::env::var_os("PATH").is_some_and(|path| {
//!         std::env::split_paths(&path).any(|dir| dir.join("chromium").is_file())
//!     })
//! }
//!
//! # if std::env::var("CI").is_ok_and(|ci| ci == "true") { return; }
//! if !apollo_core::testing::require(chromium_on_path(), "chromium", "apt-get install chromium") {
//!     return; // skipped, and said so
//! }
//! // ... drive the browser ...
//! ```

use std::io::Write;

/// Whether the test may go on: `true` when `available`; otherwise prints `SKIPPED: needs
/// WHAT (HOW_TO_GET_IT)` and returns `false`, or panics when the environment variable `CI` is
/// `true` (see the [module docs](self)).
///
/// `what` names the missing thing (`chromium`, `root`, `O_TMPFILE on /tmp`); `how_to_get_it`
/// says how to provide it (`apt-get install chromium`, `run as root`).
#[must_use = "a test that does not return when `require` says no runs without what it needs"]
#[track_caller]
pub fn require(available: bool, what: &str, how_to_get_it: &str) -> bool {
    match verdict(available, on_ci()) {
        Verdict::Run => true,
        Verdict::Fail => panic!(
            "{}, and CI=true: a CI machine must provide it",
            missing(what, how_to_get_it)
        ),
        Verdict::Skip => {
            let test = std::thread::current()
                .name()
                .map(|name| format!(" in {name}"))
                .unwrap_or_default();
            // Straight to the stream, not through `eprintln!`: the test harness captures the
            // macros' output of passing tests, and a skip must be seen.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: {}{test}",
                missing(what, how_to_get_it)
            );
            false
        }
    }
}

/// Whether the tests run under CI (`CI=true`), where nothing may be skipped.
pub fn on_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true" || value == "1")
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Run,
    Skip,
    Fail,
}

fn verdict(available: bool, on_ci: bool) -> Verdict {
    match (available, on_ci) {
        (true, _) => Verdict::Run,
        (false, false) => Verdict::Skip,
        (false, true) => Verdict::Fail,
    }
}

fn missing(what: &str, how_to_get_it: &str) -> String {
    format!("needs {what} ({how_to_get_it})")
}

/// One journal event of every kind, one JSON object per line: the kinds a journal is mostly
/// made of in several shapes (an escaped unit name, a non-ASCII one, an input manifest, a
/// failure, a skip by exit 77), each other kind once. A fixture for code that reads, copies
/// or renders journals: decode each line as an [`Event`](crate::Event).
pub const EVERY_KIND_JSONL: &str = r#"
{"kind":"run_started","run_id":"r","pipeline":"p","config_path":"c.yaml","config_hash":"h","definition_hash":"d","apollo_version":"0.1.0","host":"h","pid":1,"units":["a","b\"q","c","d","e","é"],"identity":"p@c.yaml","params":{"day":"2026-11-30","n":1.5}}
{"kind":"run_reproduces","run":"r0","unit":"a","attempt":1,"scratch":"/tmp/s"}
{"kind":"unit_started","unit":"a","attempt":1,"input_hash":"ih","inputs":[{"kind":"command","name":"execute","hash":"x"},{"kind":"file","name":"in.csv","hash":"y"}]}
{"kind":"unit_files","unit":"a","attempt":1,"side":"inputs","files":[{"path":"in.csv","sha256":"s","size":3,"mode":420}]}
{"kind":"unit_submitted","unit":"a","attempt":1,"executor":"slurm","job_id":"42","reattached_from":1}
{"kind":"unit_finished","unit":"a","attempt":1,"status":"failed","exit":{"signal":9},"failed_phase":"execute","timed_out":true,"duration_ms":1000,"queued_ms":3,"output_hash":null,"stdout_bytes":1,"stderr_bytes":2,"user_cpu_ms":3,"sys_cpu_ms":4,"max_rss_kib":5,"leftovers_killed":1,"phases":[{"phase":"execute","offset_ms":0,"duration_ms":1000,"exit":null,"timed_out":true}],"error":"timed out\nafter 1s"}
{"kind":"unit_started","unit":"b\"q","attempt":2,"input_hash":"ih","inputs":[],"inputs_manifest":{"sha256":"m","count":100000}}
{"kind":"unit_files","unit":"b\"q","attempt":2,"side":"outputs","files":[],"manifest":{"sha256":"m","count":7}}
{"kind":"unit_finished","unit":"b\"q","attempt":2,"status":"succeeded","exit":{"code":0},"failed_phase":null,"timed_out":false,"duration_ms":5,"output_hash":"oh","stdout_bytes":0,"stderr_bytes":0,"user_cpu_ms":0,"sys_cpu_ms":0,"max_rss_kib":0,"leftovers_killed":0,"phases":[],"error":null}
{"kind":"unit_started","unit":"c","attempt":1,"input_hash":"ih","inputs":[{"kind":"upstream","name":"a","hash":"oh"}]}
{"kind":"unit_finished","unit":"c","attempt":1,"status":"skipped","exit":{"code":77},"failed_phase":null,"timed_out":false,"duration_ms":5,"output_hash":null,"stdout_bytes":0,"stderr_bytes":0,"user_cpu_ms":0,"sys_cpu_ms":0,"max_rss_kib":0,"leftovers_killed":0,"phases":[{"phase":"prepare","offset_ms":0,"duration_ms":1,"exit":{"code":0},"timed_out":false},{"phase":"execute","offset_ms":1,"duration_ms":4,"exit":{"code":77},"timed_out":false}],"error":null}
{"kind":"unit_finished","unit":"é","attempt":3,"status":"skipped","exit":{"code":77},"failed_phase":null,"timed_out":false,"duration_ms":5,"output_hash":null,"stdout_bytes":0,"stderr_bytes":0,"user_cpu_ms":0,"sys_cpu_ms":0,"max_rss_kib":0,"leftovers_killed":0,"phases":[],"error":null}
{"kind":"unit_skipped","unit":"c","reason":"upstream_failed","upstream":"a"}
{"kind":"unit_skipped","unit":"d","reason":"interrupted"}
{"kind":"unit_reused","unit":"e","from_run":"r0","from_attempt":1,"input_hash":"ih","output_hash":"oh"}
{"kind":"unit_marked","unit":"a","attempt":1,"verdict":"succeeded","by":"me","note":null}
{"kind":"run_finished","status":"failed","succeeded":1,"failed":1,"skipped":2,"reused":1}
{"kind":"hook_finished","hook":"on_failure","run_status":"failed","status":"succeeded","exit":{"code":0},"duration_ms":1,"error":null}
{"kind":"run_resumed","config_hash":"h","definition_hash":"d","apollo_version":"0.1.0","host":"h","pid":2,"units":["a"]}
"#;

/// Events of every kind with **every field set** — every `Option` `Some`, every list and map
/// non-empty, every number non-zero — and, between them, every variant of every enum a record
/// holds; then each kind once more with every optional field at its default (which serde
/// leaves out or writes as `null`). The fixture of the test that every field of every record
/// kind takes the journal's fast path (apollo-store's `verbatim` tests) and that the fast
/// encoder writes serde's bytes ([`codec`](crate::codec)).
///
/// The structs are written out field by field, without `..`: a field added to a record does
/// not compile here until it is given a value, so the tests see it.
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
                kind: nth(index),
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
            kind: RunKind::Run,
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
    ]);
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_runs_missing_skips_locally_and_fails_under_ci() {
        assert_eq!(verdict(true, false), Verdict::Run);
        assert_eq!(verdict(true, true), Verdict::Run);
        assert_eq!(verdict(false, false), Verdict::Skip);
        assert_eq!(verdict(false, true), Verdict::Fail);
        assert!(require(true, "nothing", "nothing to do"));
    }

    #[test]
    fn the_message_names_what_is_missing_and_how_to_get_it() {
        assert_eq!(
            missing("chromium", "apt-get install chromium"),
            "needs chromium (apt-get install chromium)"
        );
    }
}
