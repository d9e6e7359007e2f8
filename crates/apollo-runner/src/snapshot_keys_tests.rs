//! Keys added after a pipeline was written change nothing of its definition snapshot: a
//! pipeline that does not use `log_limit:` or `queue_timeout:` (issue 36) keeps the snapshot,
//! byte for byte, and so the hash its runs recorded before the keys existed.

use std::path::Path;

use apollo_core::config;

/// A pipeline with Slurm resources (the struct `queue_timeout` joined) on every unit.
const GOLDEN: &str = "\
name: golden
max_parallel: 2
defaults:
  retries: 1
  resources: {cpus: 1, slurm: {partition: short, on_stop: detach}}
units:
  - name: a
    execute: \"true\"
  - name: b
    deps: [a]
    execute: [\"true\"]
    resources: {memory: 64M, slurm: {extra_args: [--exclusive]}}
";

/// The hash `run_started` recorded for [`GOLDEN`] at `/tmp/k36-golden/pipeline.yaml` by the
/// apollo built from main before these keys (0beb0ee).
const HASH_BEFORE_THE_KEYS: &str =
    "c98731754b59d981110370372e8b494e232a553a5c56ba10e81fab4e830cc576";

#[test]
fn a_pipeline_without_the_new_keys_keeps_its_snapshot_hash() {
    let path = Path::new("/tmp/k36-golden/pipeline.yaml");
    let pipeline = config::load_str(GOLDEN, path).unwrap().pipeline;
    let snapshot = crate::session::definition_snapshot(&pipeline).unwrap();
    let text = String::from_utf8(snapshot).unwrap();
    assert!(
        !text.contains("log_limit") && !text.contains("queue_timeout"),
        "{text}"
    );
    assert_eq!(
        crate::session::definition_snapshot_hash(&pipeline).unwrap(),
        HASH_BEFORE_THE_KEYS
    );
}

#[test]
fn the_new_keys_are_in_the_snapshot_when_used_and_read_back() {
    let yaml = GOLDEN.replace(
        "  retries: 1\n",
        "  retries: 1\n  log_limit: 1MiB\n  resources: {slurm: {queue_timeout: 2h}}\n",
    );
    // `resources` twice in `defaults` is a duplicate: keep the one with the new key only.
    let yaml = yaml.replace(
        "  resources: {cpus: 1, slurm: {partition: short, on_stop: detach}}\n",
        "",
    );
    let path = Path::new("/tmp/k36-golden/pipeline.yaml");
    let pipeline = config::load_str(&yaml, path).unwrap().pipeline;
    let unit = &pipeline.units[0];
    assert_eq!(unit.log_limit, Some(1 << 20));
    assert_eq!(
        unit.queue_timeout,
        Some(std::time::Duration::from_secs(7200))
    );
    let snapshot = crate::session::definition_snapshot(&pipeline).unwrap();
    let text = String::from_utf8(snapshot.clone()).unwrap();
    assert!(text.contains("\"log_limit\": 1048576"), "{text}");
    assert!(text.contains("\"queue_timeout\": 7200000"), "{text}");
    let read: apollo_core::Pipeline = serde_json::from_slice(&snapshot).unwrap();
    assert_eq!(read, pipeline);
}

#[test]
fn on_late_is_a_hook_in_the_snapshot_when_used_and_read_back() {
    use apollo_core::model::HookWhen;
    let yaml = format!(
        "{GOLDEN}deadline: 2h\non_late: {{execute: ./page.sh, timeout: 30s}}\non_failure: ./mail.sh\n"
    );
    let path = Path::new("/tmp/k36-golden/pipeline.yaml");
    let pipeline = config::load_str(&yaml, path).unwrap().pipeline;
    let late = (pipeline.hooks.iter())
        .find(|hook| hook.when == HookWhen::OnLate)
        .unwrap();
    assert_eq!(late.timeout, std::time::Duration::from_secs(30));
    let snapshot = crate::session::definition_snapshot(&pipeline).unwrap();
    assert!(String::from_utf8_lossy(&snapshot).contains("\"on_late\""));
    let read: apollo_core::Pipeline = serde_json::from_slice(&snapshot).unwrap();
    assert_eq!(read.hooks, pipeline.hooks);
}
