//! A fluent builder of synthetic runs for tests: fixed timestamps, so every rendering is
//! deterministic without redactions.

use std::collections::HashMap;
use std::convert::Infallible;

use apollo_core::Phase;
use apollo_core::Record;
use apollo_core::event::*;
use chrono::{DateTime, Utc};

/// 2026-11-30T02:15:07Z: the runs' start.
pub(crate) const BASE_MS: i64 = 1_796_004_907_000;

pub(crate) fn at(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(BASE_MS + ms).expect("a valid test timestamp")
}

/// A stable fake SHA-256: FNV-1a 64 of the seed, repeated to 64 hex digits.
pub(crate) fn fake_hash(seed: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in seed.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}").repeat(4)
}

/// Builds a run's records one event at a time, each at an explicit millisecond offset.
pub(crate) struct RunBuilder {
    records: Vec<Record>,
    /// Per unit: declared input components (other than upstream outputs).
    inputs: HashMap<String, Vec<InputComponent>>,
    /// Per unit: its dependencies, whose output hashes join its inputs.
    deps: HashMap<String, Vec<String>>,
    /// Per unit: the seed of the output hash its successes produce.
    outputs: HashMap<String, String>,
    /// Open attempts: (unit, attempt) → start offset.
    open: HashMap<(String, u32), i64>,
}

impl RunBuilder {
    /// A run whose `run_started` is at offset 0.
    pub(crate) fn new(run_id: &str, units: &[&str]) -> Self {
        let mut builder = Self {
            records: Vec::new(),
            inputs: HashMap::new(),
            deps: HashMap::new(),
            outputs: HashMap::new(),
            open: HashMap::new(),
        };
        for unit in units {
            builder.command(unit, Phase::Execute, &format!("./units/{unit}.sh"));
        }
        builder.push(
            0,
            Event::RunStarted(RunStarted {
                run_id: run_id.into(),
                pipeline: "daily-etl".into(),
                config_path: "pipeline.yaml".into(),
                config_hash: fake_hash("config"),
                definition_hash: fake_hash("definition"),
                apollo_version: "0.1.0".into(),
                host: "build-01".into(),
                pid: 4242,
                units: units.iter().map(|unit| (*unit).to_owned()).collect(),
                identity: None,
                params: Default::default(),
                run_kind: apollo_core::event::RunKind::Run,
                durability: apollo_core::Durability::Fsync,
                deadlines: None,
            }),
        );
        builder
    }

    pub(crate) fn push(&mut self, ms: i64, event: Event) {
        let seq = self.records.len() as u64 + 1;
        self.records.push(Record {
            seq,
            ts: at(ms),
            event,
        });
    }

    fn set_input(&mut self, unit: &str, kind: InputKind, name: &str, content: &str) {
        let components = self.inputs.entry(unit.to_owned()).or_default();
        components.retain(|component| !(component.kind == kind && component.name == name));
        components.push(InputComponent {
            kind,
            name: name.to_owned(),
            hash: fake_hash(&format!("{kind:?}:{name}:{content}")),
        });
    }

    /// Records the attempt's cluster job (`unit_submitted`), reattached to an earlier
    /// attempt's job after apollo died when `reattached_from` is set.
    pub(crate) fn submit(
        &mut self,
        ms: i64,
        unit: &str,
        attempt: u32,
        reattached_from: Option<u32>,
    ) -> &mut Self {
        self.push(
            ms,
            Event::UnitSubmitted(apollo_core::event::UnitSubmitted {
                unit: unit.into(),
                attempt,
                executor: "slurm".into(),
                job_id: "4242".into(),
                reattached_from,
                partition: None,
                nodes: None,
                mem_mib: None,
            }),
        );
        self
    }

    /// Sets a unit's command for a phase (every unit starts with `./units/<unit>.sh`).
    pub(crate) fn command(&mut self, unit: &str, phase: Phase, command: &str) -> &mut Self {
        self.set_input(unit, InputKind::Command, phase.as_str(), command);
        self
    }

    /// Declares an input file of a unit with the given content.
    pub(crate) fn file(&mut self, unit: &str, path: &str, content: &str) -> &mut Self {
        self.set_input(unit, InputKind::File, path, content);
        self
    }

    /// Declares an env variable of a unit.
    pub(crate) fn env(&mut self, unit: &str, name: &str, value: &str) -> &mut Self {
        self.set_input(unit, InputKind::Env, name, value);
        self
    }

    /// Declares that `unit` depends on `upstream`.
    pub(crate) fn dep(&mut self, unit: &str, upstream: &str) -> &mut Self {
        self.deps
            .entry(unit.to_owned())
            .or_default()
            .push(upstream.to_owned());
        self
    }

    /// Sets what a unit's successful attempts output.
    pub(crate) fn output(&mut self, unit: &str, content: &str) -> &mut Self {
        self.outputs.insert(unit.to_owned(), content.to_owned());
        self
    }

    fn output_hash(&self, unit: &str) -> String {
        let content = self.outputs.get(unit).map_or("v1", String::as_str);
        fake_hash(&format!("output:{unit}:{content}"))
    }

    /// `unit_started` of an attempt.
    pub(crate) fn start(&mut self, ms: i64, unit: &str, attempt: u32) -> &mut Self {
        let mut inputs = self.inputs.get(unit).cloned().unwrap_or_default();
        for upstream in self.deps.get(unit).cloned().unwrap_or_default() {
            inputs.push(InputComponent {
                kind: InputKind::Upstream,
                name: upstream.clone(),
                hash: self.output_hash(&upstream),
            });
        }
        inputs.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
        let seed: String = inputs
            .iter()
            .map(|component| component.hash.as_str())
            .collect();
        self.open.insert((unit.to_owned(), attempt), ms);
        self.push(
            ms,
            Event::UnitStarted(UnitStarted {
                unit: unit.into(),
                attempt,
                input_hash: fake_hash(&seed),
                inputs,
                inputs_manifest: None,
            }),
        );
        self
    }

    fn finish(
        &mut self,
        ms: i64,
        unit: &str,
        attempt: u32,
        status: AttemptStatus,
        exit: ExitStatus,
        error: Option<&str>,
    ) -> &mut Self {
        let start = self.open.remove(&(unit.to_owned(), attempt)).unwrap_or(ms);
        let duration_ms = u64::try_from(ms - start).expect("a finish after its start");
        let timed_out = status == AttemptStatus::TimedOut;
        let execute_ms = duration_ms.saturating_sub(4);
        let phases = vec![
            PhaseRecord {
                phase: Phase::Execute,
                offset_ms: 1,
                duration_ms: execute_ms.saturating_sub(1),
                exit: Some(exit),
                timed_out,
            },
            PhaseRecord {
                phase: Phase::Cleanup,
                offset_ms: execute_ms,
                duration_ms: 3,
                exit: Some(ExitStatus::Code(0)),
                timed_out: false,
            },
        ];
        let succeeded = status == AttemptStatus::Succeeded;
        self.push(
            ms,
            Event::UnitFinished(UnitFinished {
                unit: unit.into(),
                attempt,
                status,
                exit: Some(exit),
                failed_phase: (!status.satisfies_dependents()).then_some(Phase::Execute),
                timed_out,
                duration_ms,
                queued_ms: 0,
                output_hash: succeeded.then(|| self.output_hash(unit)),
                stdout_bytes: 1200,
                stderr_bytes: if succeeded { 0 } else { 87 },
                user_cpu_ms: duration_ms / 4,
                sys_cpu_ms: duration_ms / 20,
                max_rss_kib: 10_240,
                leftovers_killed: 0,
                phases,
                error: error.map(str::to_owned),
            }),
        );
        self
    }

    /// A successful `unit_finished`.
    pub(crate) fn succeed(&mut self, ms: i64, unit: &str, attempt: u32) -> &mut Self {
        self.finish(
            ms,
            unit,
            attempt,
            AttemptStatus::Succeeded,
            ExitStatus::Code(0),
            None,
        )
    }

    /// A failed `unit_finished` with an exit code and an error text.
    pub(crate) fn fail(
        &mut self,
        ms: i64,
        unit: &str,
        attempt: u32,
        code: i32,
        error: &str,
    ) -> &mut Self {
        let exit = ExitStatus::Code(code);
        self.finish(ms, unit, attempt, AttemptStatus::Failed, exit, Some(error))
    }

    /// A `unit_finished` ended by apollo's timeout (SIGTERM).
    pub(crate) fn time_out(&mut self, ms: i64, unit: &str, attempt: u32) -> &mut Self {
        let error = "timed out after 30s; killed the process group with SIGTERM";
        let exit = ExitStatus::Signal(15);
        self.finish(
            ms,
            unit,
            attempt,
            AttemptStatus::TimedOut,
            exit,
            Some(error),
        )
    }

    /// A unit that skipped itself (exit 77).
    pub(crate) fn skip_self(&mut self, ms: i64, unit: &str, attempt: u32) -> &mut Self {
        let exit = ExitStatus::Code(77);
        self.finish(ms, unit, attempt, AttemptStatus::Skipped, exit, None)
    }

    /// `unit_skipped` because `upstream` failed.
    pub(crate) fn skip_upstream(&mut self, ms: i64, unit: &str, upstream: &str) -> &mut Self {
        let reason = SkipReason::UpstreamFailed {
            upstream: upstream.into(),
        };
        let unit = unit.into();
        self.push(ms, Event::UnitSkipped(UnitSkipped { unit, reason }));
        self
    }

    /// `unit_marked` with a human's verdict.
    pub(crate) fn mark(
        &mut self,
        ms: i64,
        unit: &str,
        attempt: u32,
        verdict: Verdict,
        note: &str,
    ) -> &mut Self {
        let event = Event::UnitMarked(UnitMarked {
            unit: unit.into(),
            attempt,
            verdict,
            by: "alice".into(),
            note: Some(note.into()),
        });
        self.push(ms, event);
        self
    }

    /// `run_resumed` by a new apollo process.
    pub(crate) fn resume(&mut self, ms: i64, units: &[&str]) -> &mut Self {
        self.open.clear();
        let event = Event::RunResumed(RunResumed {
            config_hash: fake_hash("config"),
            definition_hash: fake_hash("definition"),
            apollo_version: "0.1.0".into(),
            host: "build-01".into(),
            pid: 4343,
            units: units.iter().map(|unit| (*unit).to_owned()).collect(),
        });
        self.push(ms, event);
        self
    }

    /// `unit_files` of an attempt: its declared input or output files (path, content).
    pub(crate) fn files(
        &mut self,
        ms: i64,
        unit: &str,
        attempt: u32,
        side: FileSide,
        files: &[(&str, &str)],
    ) -> &mut Self {
        let files = (files.iter())
            .map(|(path, content)| apollo_core::capture::FileEntry {
                path: (*path).to_owned(),
                sha256: fake_hash(&format!("file:{path}:{content}")),
                size: content.len() as u64,
                mode: 0o644,
                not_captured: None,
            })
            .collect();
        let unit = unit.into();
        let manifest = None;
        let event = UnitFiles {
            unit,
            attempt,
            side,
            files,
            manifest,
        };
        self.push(ms, Event::UnitFiles(event));
        self
    }

    /// `run_reproduces` (just after `run_started`).
    pub(crate) fn reproduces(&mut self, run: &str, unit: &str, attempt: u32) -> &mut Self {
        let event = Event::RunReproduces(RunReproduces {
            run: run.into(),
            unit: unit.into(),
            attempt,
            scratch: "/tmp/apollo-reproduce-1".into(),
        });
        self.push(0, event);
        self
    }

    /// `unit_reused` of `unit` from run `from` attempt 1, with the files it `restored`.
    pub(crate) fn reused(&mut self, ms: i64, unit: &str, from: &str, restored: &[&str]) {
        let event = Event::UnitReused(UnitReused {
            unit: unit.into(),
            from_run: from.into(),
            from_attempt: 1,
            input_hash: fake_hash(unit),
            inputs: Vec::new(),
            output_hash: fake_hash(&format!("{unit} out")),
            restored: restored.iter().map(|path| (*path).to_owned()).collect(),
        });
        self.push(ms, event);
    }

    /// `reproduction_compared` (after `run_finished`).
    pub(crate) fn compared(&mut self, ms: i64, compared: ReproductionCompared) {
        self.push(ms, Event::ReproductionCompared(compared));
    }

    /// `run_finished`.
    pub(crate) fn end(
        &mut self,
        ms: i64,
        status: RunStatus,
        succeeded: u32,
        failed: u32,
        skipped: u32,
    ) -> &mut Self {
        let event = Event::RunFinished(RunFinished {
            status,
            succeeded,
            failed,
            skipped,
            reused: 0,
        });
        self.push(ms, event);
        self
    }

    /// Sets the deadlines `run_started` recorded (offsets in ms from the run's start).
    pub(crate) fn deadlines(&mut self, run: Option<i64>, units: &[(&str, i64)]) -> &mut Self {
        let journal = |ms| apollo_core::deadline::to_journal(at(ms));
        if let Event::RunStarted(started) = &mut self.records[0].event {
            started.deadlines = Some(Box::new(apollo_core::event::RunDeadlines {
                run: run.map(journal),
                units: (units.iter())
                    .map(|(unit, ms)| apollo_core::event::UnitDeadline {
                        unit: (*unit).to_owned(),
                        at: journal(*ms),
                    })
                    .collect(),
            }));
        }
        self
    }

    /// The records so far.
    pub(crate) fn records(&self) -> Vec<Record> {
        self.records.clone()
    }

    /// The records as a reader would hand them out.
    pub(crate) fn reads(&self) -> impl Iterator<Item = Result<Record, Infallible>> + use<> {
        self.records.clone().into_iter().map(Ok)
    }
}

/// The units of [`showcase_run`], in config order.
pub(crate) const SHOWCASE_UNITS: [&str; 7] = [
    "fetch_a",
    "fetch_b",
    "flaky",
    "transform",
    "optional",
    "slow",
    "report",
];

/// A run with everything a replay must show: two units in parallel, a retry, a unit that
/// skips itself, apollo dying mid-unit, a human mark, a resume, a timeout, and a unit skipped
/// because its upstream failed.
pub(crate) fn showcase_run() -> RunBuilder {
    let mut run = RunBuilder::new("20261130T021507Z-3f9a", &SHOWCASE_UNITS);
    run.file("fetch_a", "data/raw_a.csv", "a1")
        .file("fetch_b", "data/raw_b.csv", "b1")
        .env("flaky", "API_URL", "https://example.invalid")
        .dep("transform", "fetch_a")
        .dep("transform", "fetch_b")
        .dep("report", "slow");
    run.start(10, "fetch_a", 1)
        .start(12, "fetch_b", 1)
        .succeed(1_010, "fetch_a", 1)
        .start(1_020, "flaky", 1)
        .succeed(1_512, "fetch_b", 1)
        .start(1_515, "transform", 1)
        .fail(
            1_800,
            "flaky",
            1,
            1,
            "curl: (56) connection reset by peer\nretrying in 1s",
        )
        .start(2_800, "flaky", 2)
        .succeed(3_300, "flaky", 2)
        .succeed(3_400, "transform", 1)
        .start(3_470, "slow", 1)
        .start(3_480, "optional", 1)
        .skip_self(4_000, "optional", 1);
    // apollo dies after +00:04 with `slow` running; a human looks, then it is resumed.
    run.mark(59_000, "slow", 1, Verdict::Failed, "box rebooted, rerun it")
        .resume(60_000, &SHOWCASE_UNITS)
        .start(60_010, "slow", 2)
        .time_out(90_010, "slow", 2)
        .skip_upstream(90_020, "report", "slow")
        .end(90_030, RunStatus::Failed, 4, 1, 2);
    run
}
