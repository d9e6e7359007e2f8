//! Compatibility: a state directory written by the first released journal format (1.0, wave 1)
//! stays readable by this build (DESIGN §17). The fixture under `tests/fixtures/format-1.0/` is
//! the real state directory of a two-unit run made by that apollo: `transform` failed, and the
//! run was resumed and succeeded. It is never regenerated: it is what users have on disk.

use std::path::{Path, PathBuf};

use apollo_core::Event;
use apollo_store::{ReadOptions, RunId, RunState, StateDir, verify};

use crate::support::{copy_dir, read_all};

const RUN: &str = "20261201T063045Z-2075";

/// A private copy of the fixture, so that nothing a reader might write touches the original.
fn fixture_state_dir(into: &Path) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format-1.0");
    let state = into.join(".apollo");
    copy_dir(&fixture.join("runs"), &state.join("runs"));
    copy_dir(&fixture.join("blobs"), &state.join("blobs"));
    state
}

#[test]
fn a_format_1_0_journal_reads_record_by_record() {
    let dir = tempfile::tempdir().unwrap();
    let state = fixture_state_dir(dir.path());
    let (records, warnings) = read_all(&state.join("runs").join(RUN), ReadOptions::default());
    let records = records.unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let kinds: Vec<&str> = records
        .iter()
        .map(|record| match &record.event {
            Event::RunStarted(_) => "run_started",
            Event::RunResumed(_) => "run_resumed",
            Event::UnitStarted(_) => "unit_started",
            Event::UnitFinished(_) => "unit_finished",
            Event::RunFinished(_) => "run_finished",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "unit_started",
            "unit_finished",
            "unit_started",
            "unit_finished",
            "run_finished",
            "run_resumed",
            "unit_started",
            "unit_finished",
            "run_finished",
        ]
    );
    let seqs: Vec<u64> = records.iter().map(|record| record.seq).collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<u64>>());
    // `params` (format 1.3) is absent from a 1.0 `run_started`: the run had none.
    let Event::RunStarted(started) = &records[0].event else {
        panic!("the first record is run_started");
    };
    assert!(started.params.is_empty(), "{:?}", started.params);
}

#[test]
fn a_format_1_0_state_directory_verifies_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let state = fixture_state_dir(dir.path());
    let report = verify(&state.join("runs").join(RUN)).unwrap();
    assert!(report.corruptions.is_empty(), "{:?}", report.corruptions);
    assert!(report.torn_tail.is_none(), "{:?}", report.torn_tail);
    assert_eq!((report.n_segments, report.n_records), (1, 10));

    let state = StateDir::open_existing(&state).unwrap();
    let runs = state.list_runs().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    assert_eq!(run.id, RUN.parse::<RunId>().unwrap());
    assert_eq!(run.pipeline.as_deref(), Some("wave1"));
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert_eq!((run.n_units, run.succeeded, run.failed), (2, 2, 0));
}

/// Format 1.3 added capture: a definition snapshot written before it (no `capture` in its
/// units) still reads, each unit with the default policy (capture all, 64 MiB cap), so
/// `apollo reproduce` and `show --definition` work on old runs; and a 1.3 `unit_files`
/// record reads back as written, while a record without `not_captured` is a captured file.
#[test]
fn a_format_1_0_definition_snapshot_reads_with_the_default_capture_and_unit_files_round_trip() {
    use apollo_core::capture::{CapturePolicy, FileEntry};
    use apollo_core::event::{FileSide, UnitFiles};
    let dir = tempfile::tempdir().unwrap();
    let state = fixture_state_dir(dir.path());
    let state = StateDir::open_existing(&state).unwrap();
    let runs = state.list_runs().unwrap();
    let hash = runs[0]
        .definition_hash
        .clone()
        .expect("a definition snapshot");
    let pipeline: apollo_core::Pipeline =
        serde_json::from_slice(&state.read_blob(&hash).unwrap()).unwrap();
    assert!(!pipeline.units.is_empty());
    for unit in &pipeline.units {
        assert_eq!(unit.capture, CapturePolicy::default());
    }

    let json = r#"{"kind":"unit_files","unit":"a","attempt":1,"side":"outputs","files":[{"path":"out/x","sha256":"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03","size":6,"mode":420},{"path":"big","sha256":"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03","size":6,"mode":420,"not_captured":"3.1 GiB > 64 MiB"}]}"#;
    let event: Event = serde_json::from_str(json).unwrap();
    let Event::UnitFiles(UnitFiles {
        side,
        files,
        manifest,
        ..
    }) = &event
    else {
        panic!("{event:?}");
    };
    assert_eq!((*side, manifest), (FileSide::Outputs, &None));
    assert!(files[0].captured() && !files[1].captured());
    assert_eq!(
        files[1],
        FileEntry {
            path: "big".into(),
            sha256: files[0].sha256.clone(),
            size: 6,
            mode: 0o644,
            not_captured: Some("3.1 GiB > 64 MiB".into()),
        }
    );
    assert_eq!(serde_json::to_string(&event).unwrap(), json);
}

#[test]
fn a_format_1_3_hook_record_is_written_and_read_after_the_run_end() {
    use apollo_core::event::{AttemptStatus, ExitStatus, HookFinished, RunStatus};
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let hook = Event::HookFinished(HookFinished {
        hook: "on_failure".to_owned(),
        run_status: "failed".to_owned(),
        status: AttemptStatus::Failed,
        exit: Some(ExitStatus::Code(22)),
        duration_ms: 12,
        error: Some("execute exited with code 22".to_owned()),
    });
    let mut writer =
        apollo_store::JournalWriter::create(&run_dir, RUN, crate::support::fast()).unwrap();
    writer
        .append_batch(&[
            crate::support::run_started(RUN, "hooks"),
            crate::support::run_finished(RunStatus::Failed),
            hook.clone(),
        ])
        .unwrap();
    drop(writer);
    let (records, warnings) = read_all(&run_dir, ReadOptions::default());
    assert!(warnings.is_empty(), "{warnings:?}");
    let records = records.unwrap();
    assert_eq!(records.last().map(|record| &record.event), Some(&hook));
}

/// Format 1.3 adds `unit_reused` and the `reused` count of `run_finished`: both read back as
/// written, and a `run_finished` written before 1.3 (no `reused`) reads as 0 reused.
#[test]
fn a_format_1_3_unit_reused_record_round_trips_and_older_run_finished_reads_as_none_reused() {
    use apollo_core::event::{InputComponent, InputKind, RunFinished, RunStatus, UnitReused};
    use apollo_store::JournalWriter;

    let dir = tempfile::tempdir().unwrap();
    let reused = Event::UnitReused(UnitReused {
        unit: "fetch".into(),
        from_run: "20261130T021507Z-3f9a".into(),
        from_attempt: 2,
        input_hash: "a".repeat(64),
        inputs: vec![InputComponent {
            kind: InputKind::File,
            name: "data/raw.csv".into(),
            hash: "b".repeat(64),
        }],
        output_hash: "c".repeat(64),
        restored: Vec::new(),
    });
    let finished = Event::RunFinished(RunFinished {
        status: RunStatus::Succeeded,
        succeeded: 1,
        failed: 0,
        skipped: 0,
        reused: 1,
    });
    let mut writer =
        JournalWriter::create(dir.path(), "20261201T000000Z-0001", crate::support::fast()).unwrap();
    writer
        .append_batch(&[reused.clone(), finished.clone()])
        .unwrap();
    drop(writer);
    let (records, _) = read_all(dir.path(), ReadOptions::default());
    let events: Vec<Event> = records
        .unwrap()
        .into_iter()
        .map(|record| record.event)
        .collect();
    assert_eq!(events, [reused, finished]);

    let old: RunFinished =
        serde_json::from_str(r#"{"status":"succeeded","succeeded":2,"failed":0,"skipped":0}"#)
            .unwrap();
    assert_eq!(old.reused, 0);
}

/// Format 1.6 adds the `durability` of `run_started`: a run recorded before it (the 1.0
/// fixture) was written with fsync, and says so; a batched run's mode reads back. An apollo of
/// 1.5 meets in a 1.6 `run_started` a field it does not know, as this build meets one of a
/// later minor: it is ignored, the record decodes (the minor rule of the crate docs).
#[test]
fn a_format_1_6_run_started_records_the_durability_and_older_runs_read_as_fsync() {
    use apollo_core::Durability;

    let dir = tempfile::tempdir().unwrap();
    let state = fixture_state_dir(dir.path());
    let runs = StateDir::open_existing(&state)
        .unwrap()
        .list_runs()
        .unwrap();
    assert_eq!(runs[0].durability, Durability::Fsync);

    let mut started = crate::support::run_started("20261201T000000Z-0001", "pipe");
    let Event::RunStarted(payload) = &mut started else {
        panic!("run_started");
    };
    payload.durability = Durability::Batched;
    let json = serde_json::to_value(&started).unwrap();
    assert_eq!(json["durability"], "batched");
    let decoded: Event = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(decoded, started);
    // Absent (fsync, or an older journal) reads as fsync.
    let mut object = json.as_object().unwrap().clone();
    object.remove("durability");
    let Event::RunStarted(older) = serde_json::from_value(object.clone().into()).unwrap() else {
        panic!("run_started");
    };
    assert_eq!(older.durability, Durability::Fsync);
    // A field of a later minor is ignored.
    object.insert("sync_window_of_a_later_apollo".into(), 7.into());
    let Event::RunStarted(later) = serde_json::from_value(object.into()).unwrap() else {
        panic!("run_started");
    };
    assert_eq!(later.run_id, "20261201T000000Z-0001");
}

/// Format 1.7 adds what a cluster job asked for to `unit_submitted` (`partition`, `nodes`,
/// `mem_mib`: the cost's basis): written and read back through the journal (the writer's fast
/// encoder, the reader's fast decoder); a 1.6 record without them reads with none.
#[test]
fn a_format_1_7_unit_submitted_records_the_jobs_request_and_older_ones_read_without() {
    use apollo_core::event::UnitSubmitted;
    use apollo_store::JournalWriter;

    let submitted = Event::UnitSubmitted(UnitSubmitted {
        unit: "align".into(),
        attempt: 1,
        executor: "slurm".into(),
        job_id: "4242".into(),
        reattached_from: None,
        partition: Some("gpu".into()),
        nodes: Some(2),
        mem_mib: Some(4096),
    });
    let json = serde_json::to_value(&submitted).unwrap();
    assert_eq!(
        (&json["partition"], &json["nodes"], &json["mem_mib"]),
        (&"gpu".into(), &2.into(), &4096.into())
    );
    let dir = tempfile::tempdir().unwrap();
    let mut writer =
        JournalWriter::create(dir.path(), "20261204T000000Z-0001", crate::support::fast()).unwrap();
    writer
        .append_batch(std::slice::from_ref(&submitted))
        .unwrap();
    drop(writer);
    let (records, warnings) = read_all(dir.path(), ReadOptions::default());
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(records.unwrap()[0].event, submitted);
    // A 1.6 `unit_submitted` has none of them.
    let older: Event = serde_json::from_str(
        r#"{"kind":"unit_submitted","unit":"align","attempt":1,"executor":"slurm","job_id":"4242"}"#,
    )
    .unwrap();
    let Event::UnitSubmitted(older) = older else {
        panic!("unit_submitted");
    };
    assert_eq!(
        (older.partition, older.nodes, older.mem_mib),
        (None, None, None)
    );
}

/// Format 1.10 adds the `run_late` record (once per run, before the `on_late` hook): written
/// and read back through the journal in the middle of a run, its empty lists left out.
#[test]
fn a_format_1_10_run_late_record_round_trips() {
    use apollo_core::event::{RunLate, RunStatus};
    use apollo_store::JournalWriter;

    let late = Event::RunLate(RunLate {
        deadline: "2026-12-04T06:00:00.000000Z".into(),
        predicted_finish: "2026-12-04T06:30:00.000000Z".into(),
        predicted_finish_p95: "2026-12-04T07:00:00.000000Z".into(),
        critical_path: vec!["extract".into(), "load".into()],
        no_history: Vec::new(),
    });
    let json = serde_json::to_string(&late).unwrap();
    assert_eq!(
        json,
        r#"{"kind":"run_late","deadline":"2026-12-04T06:00:00.000000Z","predicted_finish":"2026-12-04T06:30:00.000000Z","predicted_finish_p95":"2026-12-04T07:00:00.000000Z","critical_path":["extract","load"]}"#
    );
    let dir = tempfile::tempdir().unwrap();
    let mut writer = JournalWriter::create(dir.path(), RUN, crate::support::fast()).unwrap();
    writer
        .append_batch(&[crate::support::run_started(RUN, "late"), late.clone()])
        .unwrap();
    writer
        .append_batch(&[crate::support::run_finished(RunStatus::Succeeded)])
        .unwrap();
    drop(writer);
    let (records, warnings) = read_all(dir.path(), ReadOptions::default());
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(records.unwrap()[1].event, late);
}

/// Format 1.11 adds `unit_reused`'s `restored` files and the `reproduction_compared` record,
/// written after a reproduction's `run_finished`: both read back, a 1.10 `unit_reused` (no
/// `restored`) reads with none, and the run is finished with its verdict in the run's summary
/// (from the journal, then from the runs index).
#[test]
fn a_format_1_11_reuse_names_restored_files_and_a_reproduction_records_its_verdict() {
    use apollo_core::event::{AttemptStatus, ReproductionCompared, RunStatus, UnitReused};
    use apollo_store::JournalWriter;

    let old = r#"{"kind":"unit_reused","unit":"clean","from_run":"r","from_attempt":1,"input_hash":"i","output_hash":"o"}"#;
    let Event::UnitReused(old) = serde_json::from_str::<Event>(old).unwrap() else {
        panic!("a unit_reused");
    };
    assert!(old.restored.is_empty());
    let reused = Event::UnitReused(UnitReused {
        restored: vec!["out/clean.csv".into()],
        ..old
    });
    let verdict = Event::ReproductionCompared(ReproductionCompared {
        reproduced: false,
        recorded_status: Some(AttemptStatus::Succeeded),
        status: AttemptStatus::Succeeded,
        outputs_differ: vec!["out/x.csv".into()],
    });
    assert_eq!(
        serde_json::to_string(&verdict).unwrap(),
        r#"{"kind":"reproduction_compared","reproduced":false,"recorded_status":"succeeded","status":"succeeded","outputs_differ":["out/x.csv"]}"#
    );
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let run: RunId = "20261204T150000Z-0001".parse().unwrap();
    let run_dir = state.create_run(&run).unwrap();
    let options = crate::support::fast();
    let mut writer = JournalWriter::create(run_dir.path(), run.as_str(), options).unwrap();
    let started = crate::support::run_started(run.as_str(), "etl");
    writer.append_batch(&[started, reused.clone()]).unwrap();
    let finished = crate::support::run_finished(RunStatus::Succeeded);
    writer.append_batch(&[finished]).unwrap();
    writer.append_batch(std::slice::from_ref(&verdict)).unwrap();
    drop(writer);
    let (records, warnings) = read_all(run_dir.path(), ReadOptions::default());
    assert!(warnings.is_empty(), "{warnings:?}");
    let records = records.unwrap();
    assert_eq!((&records[1].event, &records[3].event), (&reused, &verdict));
    let Event::ReproductionCompared(verdict) = verdict else {
        unreachable!()
    };
    for _listing in 0..2 {
        let runs = state.list_runs().unwrap();
        assert_eq!(runs[0].state, RunState::Succeeded, "{runs:?}");
        assert_eq!(runs[0].reproduction.as_ref(), Some(&verdict));
    }
}

/// Format 1.12 adds the phase `when` (a unit's `when: {command}`, run first) and, after the
/// `unit_finished` of an attempt whose condition was false, a `unit_skipped` with reason
/// `when`: both read back record by record, the attempt says it was skipped by its condition
/// (not by an exit 77 of execute's), and the run lists as it finished.
#[test]
fn a_format_1_12_false_when_command_reads_as_its_phase_then_apollos_skip() {
    use apollo_core::event::{RunStatus, UnitFinished, UnitStarted};
    use apollo_store::JournalWriter;

    let finished = r#"{"kind":"unit_finished","unit":"if_new","attempt":1,"status":"skipped","exit":{"code":1},"failed_phase":null,"timed_out":false,"duration_ms":3,"output_hash":"h","stdout_bytes":0,"stderr_bytes":0,"user_cpu_ms":0,"sys_cpu_ms":0,"max_rss_kib":0,"leftovers_killed":0,"phases":[{"phase":"when","offset_ms":0,"duration_ms":3,"exit":{"code":1},"timed_out":false}],"error":null}"#;
    let finished: Event = serde_json::from_str(finished).unwrap();
    let Event::UnitFinished(record) = &finished else {
        panic!("a unit_finished");
    };
    assert!(record.when_false());
    // Execute's own exit 77 is the unit skipping itself, not its condition.
    let mut by_execute: UnitFinished = record.clone();
    by_execute.phases[0].phase = apollo_core::Phase::Execute;
    assert!(!by_execute.when_false());
    let skipped: Event = serde_json::from_str(
        r#"{"kind":"unit_skipped","unit":"if_new","reason":"when","condition":"test -e markers/new"}"#,
    )
    .unwrap();
    let started = Event::UnitStarted(UnitStarted {
        unit: "if_new".into(),
        attempt: 1,
        input_hash: "i".into(),
        inputs: Vec::new(),
        inputs_manifest: None,
    });
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let run: RunId = "20261204T170000Z-0001".parse().unwrap();
    let run_dir = state.create_run(&run).unwrap();
    let mut writer =
        JournalWriter::create(run_dir.path(), run.as_str(), crate::support::fast()).unwrap();
    let batch = [
        crate::support::run_started(run.as_str(), "etl"),
        started,
        finished.clone(),
        skipped.clone(),
        crate::support::run_finished(RunStatus::Succeeded),
    ];
    writer.append_batch(&batch).unwrap();
    drop(writer);
    let (records, warnings) = read_all(run_dir.path(), ReadOptions::default());
    assert!(warnings.is_empty(), "{warnings:?}");
    let records = records.unwrap();
    assert_eq!(
        (&records[2].event, &records[3].event),
        (&finished, &skipped)
    );
    let runs = state.list_runs().unwrap();
    assert_eq!(runs[0].state, RunState::Succeeded, "{runs:?}");
}
