//! The config keys of issue 35 item 5 as the runner sees them: a pipeline that does not use
//! them keeps the definition snapshot (and hash) it had before they existed, and
//! `journal_segment_size` reaches the journal's writer.

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

/// A run's journal rolls its segments at the pipeline's size (set below the config's minimum
/// here, as the store's own rolling tests do, so a few records fill a segment), and reads
/// back whole.
#[test]
fn the_journal_rolls_its_segments_at_the_pipelines_size() {
    let dir = tempfile::tempdir().unwrap();
    let units: String = (0..20)
        .map(|n| format!("  - name: u{n}\n    execute: \"true\"\n"))
        .collect();
    let mut loaded = load(dir.path(), &format!("units:\n{units}"));
    loaded.pipeline.journal_segment_size = Some(1_000);
    let config_path = dir.path().join("pipe.yaml");
    let state_dir = dir.path().join(".apollo");
    let session = RunSession::new(&state_dir, &config_path, &loaded, &NoStraySweep)
        .durability(Durability::None);
    let Opened::Ready(run) = session.open(&mut NoSessionObserver).unwrap() else {
        panic!("expected a new run");
    };
    let run_id = run.run_id().clone();
    run.run(
        &Succeeds,
        &mut NoObserver,
        &CancelToken::new(),
        &mut NoSessionObserver,
    )
    .unwrap();
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
