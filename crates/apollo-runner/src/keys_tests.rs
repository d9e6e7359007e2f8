//! The config keys of issue 35 item 5 as the runner sees them: a pipeline that does not use
//! them keeps the definition snapshot (and hash) it had before they existed, and
//! `journal_segment_size` reaches the journal's writers (a run's, a mark's, a reproduction's).

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use std::time::Duration;

use apollo_core::engine::NoObserver;
use apollo_core::event::{AttemptStatus, ExitStatus};
use apollo_core::{AttemptOutcome, AttemptRequest, CancelToken, Executor, config};
use apollo_store::{Durability, JournalReader, ReadOptions};

use crate::{NoSessionObserver, NoStraySweep, Opened, RunSession};

/// Every attempt succeeds at once.
struct Succeeds;

impl Executor for Succeeds {
    fn run_attempt(
        &self,
        _request: &AttemptRequest<'_>,
        _context: &apollo_core::AttemptContext<'_>,
    ) -> AttemptOutcome {
        let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Succeeded);
        outcome.exit = Some(ExitStatus::Code(0));
        outcome
    }
}

fn load(dir: &std::path::Path, yaml: &str) -> apollo_core::Loaded {
    let path = dir.join("pipe.yaml");
    std::fs::write(&path, yaml).unwrap();
    config::load(&path).unwrap()
}

/// The fields a plain unit's and a plain pipeline's snapshot held before these keys: the
/// snapshot is the same bytes, so its hash (the blob's name) is the same.
#[test]
fn a_pipeline_without_the_new_keys_keeps_its_definition_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = load(
        dir.path(),
        "units:\n  - name: plain\n    execute: \"true\"\n    cleanup: \"true\"\n    retries: 2\n",
    );
    let snapshot = crate::session::definition_snapshot(&loaded.pipeline).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&snapshot).unwrap();
    let keys = |object: &serde_json::Value| -> Vec<String> {
        object.as_object().unwrap().keys().cloned().collect()
    };
    let mut top = keys(&value);
    top.sort();
    assert_eq!(
        top,
        [
            "base_dir",
            "capacity",
            "config_path",
            "max_jobs",
            "max_parallel",
            "name",
            "units"
        ]
        .map(str::to_owned)
    );
    let mut unit = keys(&value["units"][0]);
    unit.sort();
    assert_eq!(
        unit,
        [
            "cleanup",
            "deps",
            "env",
            "execute",
            "idempotent",
            "inputs",
            "kill_grace",
            "name",
            "outputs",
            "prepare",
            "retries",
            "retry_delay",
            "timeout",
            "workdir"
        ]
        .map(str::to_owned)
    );
    // Written out at their defaults (an older snapshot never is, but a hand-made one could
    // be), they read back as the same pipeline.
    let mut explicit = value.clone();
    explicit["units"][0]["cleanup_timeout"] = 60_000.into();
    explicit["units"][0]["retry_on_exit"] = serde_json::json!([]);
    let read: apollo_core::Pipeline = serde_json::from_value(explicit).unwrap();
    assert_eq!(read, loaded.pipeline);
}

#[test]
fn the_new_keys_are_in_the_snapshot_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = load(
        dir.path(),
        "journal_segment_size: 16MiB\ndefaults: {retry_on_exit: [75], retry_max_delay: 30s}\nunits:\n  - name: a\n    execute: \"true\"\n    cleanup: \"true\"\n    cleanup_timeout: 5m\n",
    );
    let pipeline = &loaded.pipeline;
    assert_eq!(pipeline.journal_segment_size, Some(16 * 1024 * 1024));
    let unit = &pipeline.units[0];
    assert_eq!(unit.retry_on_exit, vec![75]);
    assert_eq!(unit.retry_max_delay, Some(Duration::from_secs(30)));
    assert_eq!(unit.cleanup_timeout, Duration::from_secs(300));
    let snapshot = crate::session::definition_snapshot(pipeline).unwrap();
    let read: apollo_core::Pipeline = serde_json::from_slice(&snapshot).unwrap();
    assert_eq!(&read, pipeline);
    assert_eq!(
        crate::pipeline_writer_options(pipeline).segment_max_bytes,
        16 * 1024 * 1024
    );
    // Without the key: the store's default.
    let plain = load(dir.path(), "units:\n  - name: a\n    execute: \"true\"\n");
    assert_eq!(
        crate::pipeline_writer_options(&plain.pipeline).segment_max_bytes,
        apollo_core::journal::DEFAULT_SEGMENT_SIZE
    );
}

/// A run of 20 units whose journal segments roll at 1,000 bytes (below the config's minimum,
/// as the store's own rolling tests do, so a few records fill a segment): its state directory
/// and run.
fn run_with_small_segments(dir: &std::path::Path) -> (std::path::PathBuf, apollo_store::RunId) {
    let units: String = (0..20)
        .map(|n| format!("  - name: u{n}\n    execute: \"true\"\n"))
        .collect();
    let mut loaded = load(dir, &format!("units:\n{units}"));
    loaded.pipeline.journal_segment_size = Some(1_000);
    let config_path = dir.join("pipe.yaml");
    let state_dir = dir.join(".apollo");
    let session = RunSession::new(&state_dir, &config_path, &loaded, &NoStraySweep)
        .durability(Durability::None);
    let Opened::Ready(run) = session.open(&mut NoSessionObserver).unwrap() else {
        panic!("expected a new run");
    };
    let run_id = run.run_id().clone();
    run.run(
        &apollo_core::Dispatch::new(&Succeeds),
        &mut NoObserver,
        &CancelToken::new(),
        &mut NoSessionObserver,
    )
    .unwrap();
    (state_dir, run_id)
}

fn n_segments(state_dir: &std::path::Path, run: &apollo_store::RunId) -> usize {
    let run_dir = state_dir.join("runs").join(run.as_str());
    JournalReader::open(&run_dir, ReadOptions::default())
        .unwrap()
        .n_segments()
}

/// `apollo mark` appends to a run's journal with the segment size of the pipeline the run
/// recorded (its definition snapshot), not the store's default.
#[test]
fn marks_roll_the_journal_at_the_runs_segment_size() {
    let dir = tempfile::tempdir().unwrap();
    let (state_dir, run_id) = run_with_small_segments(dir.path());
    let state = apollo_store::StateDir::open_existing(&state_dir).unwrap();
    let before = n_segments(&state_dir, &run_id);
    for n in 0..10 {
        let request = crate::MarkRequest::new(format!("u{n}"), apollo_core::event::Verdict::Rerun);
        crate::mark(&state, &run_id, &request, &mut NoSessionObserver).unwrap();
    }
    let after = n_segments(&state_dir, &run_id);
    assert!(after > before, "{before} segments, then {after}");
}

/// A reproduction's journal rolls at the segment size of the pipeline it reproduces.
#[test]
fn a_reproduction_rolls_its_journal_at_the_runs_segment_size() {
    let dir = tempfile::tempdir().unwrap();
    let (state_dir, run_id) = run_with_small_segments(dir.path());
    let request = crate::ReproduceRequest::new(&state_dir, run_id, "u0")
        .into_dir(Some(dir.path().join("scratch")))
        .durability(Durability::None);
    let reproduction = crate::reproduce(&request, &Succeeds, &CancelToken::new()).unwrap();
    let n = n_segments(&state_dir, &reproduction.run_id);
    assert!(n > 1, "{n} segments");
}

/// A run's journal rolls its segments at the pipeline's size, and reads back whole.
#[test]
fn the_journal_rolls_its_segments_at_the_pipelines_size() {
    let dir = tempfile::tempdir().unwrap();
    let (state_dir, run_id) = run_with_small_segments(dir.path());
    let reader = JournalReader::open(
        &state_dir.join("runs").join(run_id.as_str()),
        ReadOptions::default(),
    )
    .unwrap();
    assert!(reader.n_segments() > 3, "{} segments", reader.n_segments());
    let records: Vec<_> = reader.map(|record| record.unwrap()).collect();
    let records = records.len();
    // run_started, 20 × (started, finished), run_finished at least.
    assert!(records >= 42, "{records} records");
}
