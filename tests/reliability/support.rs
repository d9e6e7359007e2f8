//! A project folder with counting units, the `apollo` binary, and journal reading.
#![allow(clippy::disallowed_methods)] // The tests spawn the binary under test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use apollo_core::event::{AttemptStatus, Event, Verdict};
use apollo_store::{JournalReader, ReadOptions};

/// The `apollo` binary under test: the one cargo built for this test target, which belongs to
/// apollo-cli, the package that owns the binary (never stale, never built twice).
pub(crate) fn apollo_bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_apollo"))
}

/// How long one apollo invocation may take before the test fails: a safety net only.
const SAFETY_TIMEOUT: Duration = Duration::from_secs(60);

/// `bin/count UNIT`: record one execution of UNIT, with its attempt, in `counts/UNIT`.
const COUNT_SCRIPT: &str = r#"#!/bin/sh
dir=$(dirname "$0")/..
echo "${APOLLO_ATTEMPT:-0}" >> "$dir/counts/$1"
"#;

/// A temporary project folder whose units run `bin/count`.
pub(crate) struct Project {
    dir: tempfile::TempDir,
    /// `--state-dir`, when not the default `.apollo/`.
    state_dir: Option<PathBuf>,
}

/// What one apollo invocation did.
#[derive(Debug)]
pub(crate) struct Output {
    /// The exit code (`None`: a signal).
    pub(crate) code: Option<i32>,
    /// stdout.
    pub(crate) stdout: String,
    /// stderr.
    pub(crate) stderr: String,
}

impl Project {
    /// A project with `apollo.yaml` = `yaml`.
    pub(crate) fn new(yaml: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("apollo-reliability-")
            .tempdir()
            .expect("temp dir");
        let project = Self {
            dir,
            state_dir: None,
        };
        std::fs::create_dir_all(project.path("bin")).expect("bin dir");
        std::fs::create_dir_all(project.path("counts")).expect("counts dir");
        project.script("bin/count", COUNT_SCRIPT);
        std::fs::write(project.path("apollo.yaml"), yaml).expect("write config");
        project
    }

    /// Keep the state in `dir` (`--state-dir`).
    pub(crate) fn with_state_dir(mut self, dir: PathBuf) -> Self {
        self.state_dir = Some(dir);
        self
    }

    /// A path in the project folder.
    pub(crate) fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// Write an executable script.
    pub(crate) fn script(&self, relative: &str, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        let path = self.path(relative);
        std::fs::write(&path, text).expect("write script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// The state directory.
    pub(crate) fn state(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| self.path(".apollo"))
    }

    /// Run `apollo ARGS` to completion, with `faults` in `APOLLO_FAULTS` if given.
    pub(crate) fn apollo(&self, args: &[&str], faults: Option<&str>) -> Output {
        let mut command = Command::new(apollo_bin());
        command
            .args(args)
            .current_dir(self.dir.path())
            .env("CI", "true")
            .env("NO_COLOR", "1")
            .env_remove("APOLLO_STATE_DIR")
            .env_remove("APOLLO_FAULTS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(state) = &self.state_dir {
            command.arg("--state-dir").arg(state);
        }
        if let Some(faults) = faults {
            command.env("APOLLO_FAULTS", faults);
        }
        let mut child = command.spawn().expect("spawn apollo");
        let captured = apollo_tests::wait_captured(&mut child, SAFETY_TIMEOUT);
        Output {
            code: captured.code,
            stdout: captured.stdout,
            stderr: captured.stderr,
        }
    }

    /// The attempts `unit` executed, in order.
    pub(crate) fn executions(&self, unit: &str) -> Vec<u32> {
        std::fs::read_to_string(self.path(&format!("counts/{unit}")))
            .map(|text| text.lines().filter_map(|line| line.parse().ok()).collect())
            .unwrap_or_default()
    }

    /// The run folders, oldest first.
    pub(crate) fn runs(&self) -> Vec<PathBuf> {
        let mut runs: Vec<PathBuf> = std::fs::read_dir(self.state().join("runs"))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|entry| entry.path())
                    .collect()
            })
            .unwrap_or_default();
        runs.sort();
        runs
    }

    /// What the journals say now, read without modifying them (a torn tail is left alone).
    pub(crate) fn journal(&self) -> Journal {
        let mut journal = Journal::default();
        for run in self.runs() {
            let reader = JournalReader::open(&run, ReadOptions::default())
                .unwrap_or_else(|error| panic!("read {}: {error}", run.display()));
            for record in reader {
                let record =
                    record.unwrap_or_else(|error| panic!("read {}: {error}", run.display()));
                match record.event {
                    Event::UnitStarted(event) => {
                        journal
                            .started
                            .entry(event.unit)
                            .or_default()
                            .insert(event.attempt);
                    }
                    Event::UnitFinished(event) if event.status == AttemptStatus::Succeeded => {
                        journal.succeeded.insert(event.unit, event.attempt);
                    }
                    Event::UnitMarked(event) if event.verdict == Verdict::Succeeded => {
                        journal.succeeded.insert(event.unit, event.attempt);
                    }
                    Event::RunFinished(_) => journal.runs_finished += 1,
                    _ => {}
                }
            }
        }
        journal
    }
}

/// The facts the tests check, gathered from every run's journal.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    /// Per unit, the attempts recorded as started.
    pub(crate) started: BTreeMap<String, BTreeSet<u32>>,
    /// Per unit, the attempt whose success is recorded.
    pub(crate) succeeded: BTreeMap<String, u32>,
    /// How many `run_finished` records there are.
    pub(crate) runs_finished: usize,
}

/// A pipeline of `n` units `u00..` (each counts its executions): a chain with a branch every
/// third unit, `max_parallel` at a time. With 1, every run issues the same journal writes and
/// fsyncs in the same order; with more, parallel units' records share group commits.
pub(crate) fn counting_pipeline(n: usize, max_parallel: usize) -> (String, Vec<String>) {
    let mut yaml = format!("name: reliability\nmax_parallel: {max_parallel}\nunits:\n");
    let names: Vec<String> = (0..n).map(|i| format!("u{i:02}")).collect();
    for (i, name) in names.iter().enumerate() {
        let deps = match i {
            0 => String::new(),
            _ if i % 3 == 2 => names[i - 2].clone(),
            _ => names[i - 1].clone(),
        };
        yaml.push_str(&format!(
            "  - name: {name}\n    deps: [{deps}]\n    execute: ./bin/count {name}\n"
        ));
    }
    (yaml, names)
}

/// The promises after a journal I/O failure and a clean resume, for the units `names`:
/// every unit whose success `after_failure` holds executed exactly once over the whole test,
/// every execution was recorded as started first, and everything succeeded in the end.
#[track_caller]
pub(crate) fn assert_nothing_acknowledged_lost(
    project: &Project,
    names: &[String],
    after_failure: &Journal,
    context: &str,
) {
    let last = project.journal();
    for name in names {
        let executions = project.executions(name);
        if after_failure.succeeded.contains_key(name) {
            assert_eq!(
                executions.len(),
                1,
                "{context}: {name}'s success was in the journal after the failure, yet it \
                 executed {executions:?}"
            );
        }
        let started = last.started.get(name).cloned().unwrap_or_default();
        for attempt in &executions {
            assert!(
                started.contains(attempt),
                "{context}: {name} attempt {attempt} executed without a unit_started record"
            );
        }
        let mut seen = BTreeSet::new();
        for attempt in &executions {
            assert!(
                seen.insert(*attempt),
                "{context}: {name} attempt {attempt} executed twice: {executions:?}"
            );
        }
        assert!(
            last.succeeded.contains_key(name),
            "{context}: {name} never succeeded"
        );
    }
}
