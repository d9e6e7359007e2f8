//! apollo-exec against real, misbehaving programs (small `/bin/sh` scripts).
//!
//! Every test gives its attempt a unique run id and, at the end, asserts that no live process
//! carries that id in its environment: whatever the unit started, in its group or not, is gone.
//! Tests synchronise on marker files the units create, never on sleeps; the time limits below
//! are either the behaviour under test or generous safety nets.
#![deny(unsafe_code)] // Allowed only where a libc call has no safe form here.

mod host;
mod log_limit;
mod misbehaving;
mod phases;
mod secrets;
mod strays;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use apollo_core::{
    AttemptContext, AttemptOutcome, AttemptRequest, CancelToken, Command, Executor, Unit,
};
use apollo_exec::{ExecOptions, ProcessExecutor};

/// A unit to run in a fresh temporary directory (which is also its workdir and log dir).
pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) unit: Unit,
    pub(crate) run_id: String,
    pub(crate) options: ExecOptions,
}

impl Fixture {
    /// A unit whose `execute` is the shell script `execute`.
    pub(crate) fn new(execute: &str) -> Fixture {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = tempfile::tempdir().expect("tempdir");
        // Executors create an attempt's log folder and its parent, never more (`logs/<unit>/1`).
        std::fs::create_dir(dir.path().join("logs")).expect("logs dir");
        let run_id = format!(
            "exec-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let unit = Unit {
            skip_when: None,
            when_command: None,
            log_limit: None,
            queue_timeout: None,
            deadline: None,
            name: "unit_under_test".to_owned(),
            deps: vec![],
            timeout: Some(Duration::from_secs(120)),
            retries: 0,
            retry_delay: Duration::from_secs(1),
            retry_on_exit: Vec::new(),
            retry_max_delay: None,
            kill_grace: Duration::from_secs(30),
            prepare: None,
            execute: Command::Shell(execute.to_owned()),
            cleanup: None,
            cleanup_timeout: apollo_core::model::DEFAULT_CLEANUP_TIMEOUT,
            inputs: vec![],
            outputs: vec![],
            env: Default::default(),
            workdir: dir.path().to_owned(),
            idempotent: true,
            capture: Default::default(),
            reuse: false,
            executor: apollo_core::model::ExecutorKind::Local,
            resources: apollo_core::model::Resources::default(),
            secrets: Default::default(),
        };
        Fixture {
            dir,
            unit,
            run_id,
            options: ExecOptions::default(),
        }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub(crate) fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_default()
    }

    /// Run one attempt with `cancel`, then check nothing of it survived.
    pub(crate) fn run_with(&self, cancel: &CancelToken) -> AttemptOutcome {
        let outcome = self.run_unchecked(cancel);
        assert_no_survivors(&self.run_id);
        outcome
    }

    /// Run one attempt without checking for survivors (the caller does).
    pub(crate) fn run_unchecked(&self, cancel: &CancelToken) -> AttemptOutcome {
        let request = AttemptRequest::new(&self.run_id, &self.unit, 1, self.dir.path());
        ProcessExecutor::new(self.options.clone())
            .run_attempt(&request, &AttemptContext::new(cancel))
    }

    pub(crate) fn run(&self) -> AttemptOutcome {
        self.run_with(&CancelToken::new())
    }

    /// Run one attempt with its output going to `log_dir`, then check nothing survived.
    pub(crate) fn run_in(&self, log_dir: &std::path::Path) -> AttemptOutcome {
        let outcome = self.run_on(&ProcessExecutor::new(self.options.clone()), log_dir);
        assert_no_survivors(&self.run_id);
        outcome
    }

    /// Run one attempt on `executor` with its output going to `log_dir` (no survivor check).
    pub(crate) fn run_on(
        &self,
        executor: &ProcessExecutor,
        log_dir: &std::path::Path,
    ) -> AttemptOutcome {
        let request = AttemptRequest::new(&self.run_id, &self.unit, 1, log_dir);
        executor.run_attempt(&request, &AttemptContext::new(&CancelToken::new()))
    }
}

/// Live (non-zombie) processes whose environment has `APOLLO_RUN_ID=<run_id>`. Every process a
/// unit starts inherits it, so this finds leftovers in the unit's groups and outside them.
pub(crate) fn processes_of_run(run_id: &str) -> Vec<u32> {
    let needle = format!("APOLLO_RUN_ID={run_id}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        if matches!(state, Some('Z' | 'X') | None) {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|&byte| byte == 0)
            .any(|var| var == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// Fail the test if anything of the run is alive, after killing it so that a failing test
/// does not leave processes behind either.
#[allow(unsafe_code)] // kill(2) of what a test left.
pub(crate) fn assert_no_survivors(run_id: &str) {
    let survivors = processes_of_run(run_id);
    for &pid in &survivors {
        // SAFETY: plain syscall on a pid that was just seen carrying this test's run id.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    assert!(
        survivors.is_empty(),
        "processes of run {run_id} outlived the attempt: {survivors:?}"
    );
}

/// Wait until `path` exists (a marker a unit creates), with a generous safety net.
pub(crate) fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The one policy for a test that needs something a machine may lack (`O_TMPFILE`, write
/// leases): when `available`, go on (`true`); otherwise print a visible `SKIPPED: needs …` and
/// pass (`false`) — except under `CI=true`, where a skip would hide a broken setup, so the test
/// fails instead.
pub(crate) fn needs(what: &str, available: bool) -> bool {
    if available {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "this test needs {what}, which this machine lacks (under CI=true that is a failure, \
         not a skip)"
    );
    // Straight to stderr: the test harness captures `eprintln!` of passing tests.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("SKIPPED: needs {what}\n").as_bytes(),
    );
    false
}

/// The process's peak resident set (`VmHWM`), in KiB.
pub(crate) fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

/// Whether process `pid` is gone or a zombie.
pub(crate) fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => matches!(
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next()),
            Some('Z' | 'X')
        ),
    }
}
