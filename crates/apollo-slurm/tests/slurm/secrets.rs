#![allow(
    clippy::unwrap_used,
    reason = "a test: a failed setup step should panic"
)]
//! Secrets on Slurm against the fake cluster (`support`): the values reach the unit's
//! environment through a 0600 file the wrapper reads and deletes, never the job script or
//! `sbatch`'s command line, and are masked in the attempt's logs — for a job of its own and
//! for a job array's tasks.
#![forbid(unsafe_code)]

use crate::support;

use std::path::Path;
use std::time::Duration;

use apollo_core::event::AttemptStatus;
use apollo_core::model::SecretSource;
use apollo_core::{AttemptContext, AttemptRequest, CancelToken, Executor, Unit};
use apollo_exec::SecretValues;
use apollo_slurm::SlurmExecutor;
use support::*;

const VALUE: &str = "tok-5e1f0c9a'x";

fn values() -> SecretValues {
    let mut values = SecretValues::new();
    values.insert("API_TOKEN", VALUE);
    values
}

/// A unit receiving `API_TOKEN`: it writes the value to `seen-<name>` and prints it.
fn deploy(name: &str, root: &Path) -> Unit {
    let mut unit = unit(
        name,
        &format!("printf '%s' \"$API_TOKEN\" > seen-{name}; echo \"token is $API_TOKEN\""),
        root,
    );
    unit.secrets
        .insert("API_TOKEN".into(), SecretSource::Env("DEPLOY".into()));
    unit
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .unwrap_or_default()
                .windows(needle.len())
                .any(|window| window == needle.as_bytes())
            {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

fn check_attempt(root: &Path, name: &str, outcome: &apollo_core::AttemptOutcome) {
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(root.join(format!("seen-{name}"))).unwrap(),
        VALUE
    );
    let dir = attempt_dir(root, name, 1);
    assert_eq!(
        std::fs::read_to_string(dir.join("stdout")).unwrap(),
        "preparing\ntoken is ***\n"
    );
    // The output hash is of what the log holds, as for a local unit.
    assert_eq!(
        outcome.stdout_sha256.as_deref(),
        Some(sha256_hex(b"token is ***\n").as_str())
    );
    assert!(!dir.join("secrets").exists());
}

#[test]
fn a_jobs_secret_reaches_its_environment_through_a_file_the_wrapper_deletes_and_is_masked() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root)).with_secrets(values());
    let unit = deploy("deploy", root);
    let (outcome, _) = run_one(&executor, &unit, &attempt_dir(root, "deploy", 1), 1, None);
    check_attempt(root, "deploy", &outcome);
    // Nowhere in the attempt's files, nor on sbatch's command line.
    assert_eq!(
        files_containing(&root.join("units"), VALUE),
        Vec::<String>::new()
    );
    assert!(!fake_file(root, "sbatch_calls").contains(VALUE));
}

#[test]
fn the_tasks_of_a_job_array_receive_their_secrets_the_same_way() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(
        fake_cluster(root).gather_window(Duration::from_secs(2), Duration::from_secs(60)),
    )
    .with_secrets(values());
    let units = [deploy("d0", root), deploy("d1", root)];
    let cancel = CancelToken::new();
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = units
            .iter()
            .map(|unit| {
                let (executor, cancel) = (&executor, &cancel);
                scope.spawn(move || {
                    let dir = attempt_dir(root, &unit.name, 1);
                    executor.run_attempt(
                        &AttemptRequest::new("r1", unit, 1, &dir),
                        &AttemptContext::new(cancel),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (unit, outcome) in units.iter().zip(&outcomes) {
        check_attempt(root, &unit.name, outcome);
    }
    assert_eq!(executor.client_calls().sbatch, 1, "one array");
    assert_eq!(
        files_containing(root, VALUE).len(),
        2,
        "only the units' own seen files"
    );
}

#[test]
fn a_secret_not_read_fails_the_attempt_without_a_job() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let executor = SlurmExecutor::new(fake_cluster(root));
    let unit = deploy("deploy", root);
    let (outcome, _) = run_one(&executor, &unit, &attempt_dir(root, "deploy", 1), 1, None);
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert!(
        outcome.error.as_deref().unwrap_or("").contains("API_TOKEN"),
        "{outcome:?}"
    );
    assert_eq!(executor.client_calls().sbatch, 0);
}
