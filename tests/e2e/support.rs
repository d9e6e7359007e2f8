//! The fluent helper every end-to-end test drives the real `apollo` binary through:
//! `Apollo::new().config(..).args(..).run()`.
//!
//! Each test gets its own temporary project folder (config, unit scripts, state dir), so
//! tests never share state. Waiting is always on marker files that units create, with a
//! generous timeout as a safety net only.
#![allow(clippy::disallowed_methods)] // The tests spawn the binary under test.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `apollo` binary under test: the one cargo built for this test target, which belongs to
/// apollo-cli, the package that owns the binary (never stale, never built twice).
pub(crate) fn apollo_bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_apollo"))
}

/// How long any wait may take before the test fails: generous, for a loaded 2-core machine.
pub(crate) const SAFETY_TIMEOUT: Duration = Duration::from_secs(60);

/// A temporary project folder and the `apollo` invocations in it.
pub(crate) struct Apollo {
    dir: tempfile::TempDir,
    args: Vec<String>,
    envs: Vec<(String, String)>,
}

/// What a finished `apollo` invocation did.
#[derive(Debug)]
pub(crate) struct Output {
    /// The exit code (`None` when a signal ended it).
    pub(crate) code: Option<i32>,
    /// Everything it printed on stdout.
    pub(crate) stdout: String,
    /// Everything it printed on stderr.
    pub(crate) stderr: String,
}

impl Output {
    /// Assert the exit code, showing the output when it differs.
    #[track_caller]
    pub(crate) fn code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(expected),
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

impl Apollo {
    /// A new empty project folder, with the helper scripts units use.
    pub(crate) fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("apollo-e2e-")
            .tempdir()
            .expect("temp dir");
        let apollo = Self {
            dir,
            args: Vec::new(),
            envs: Vec::new(),
        };
        apollo.file("bin/count", COUNT_SCRIPT);
        apollo.make_executable("bin/count");
        apollo.file("bin/block", BLOCK_SCRIPT);
        apollo.make_executable("bin/block");
        std::fs::create_dir_all(apollo.path("counts")).expect("counts dir");
        std::fs::create_dir_all(apollo.path("markers")).expect("markers dir");
        apollo
    }

    /// The project folder.
    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A path inside the project folder.
    pub(crate) fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// Write a file (creating folders).
    pub(crate) fn file(&self, relative: &str, contents: &str) -> &Self {
        let path = self.path(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent dir");
        }
        std::fs::write(&path, contents).expect("write file");
        self
    }

    fn make_executable(&self, relative: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(self.path(relative), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }

    /// Write the pipeline config `apollo.yaml`.
    pub(crate) fn config(&self, yaml: &str) -> &Self {
        self.file("apollo.yaml", yaml)
    }

    /// Set the environment variables of the next invocations (replacing earlier ones).
    pub(crate) fn envs(&mut self, envs: &[(&str, &str)]) -> &mut Self {
        self.envs = envs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        self
    }

    /// Set the arguments of the next invocation.
    pub(crate) fn args(&mut self, args: &[&str]) -> &mut Self {
        self.args = args.iter().map(|arg| (*arg).to_owned()).collect();
        self
    }

    fn command(&self) -> Command {
        self.command_under(&[])
    }

    /// The invocation, started through `prefix` (a program and its arguments that then run
    /// apollo, like `unshare --pid --fork`); an empty prefix starts apollo itself.
    fn command_under(&self, prefix: &[&str]) -> Command {
        let mut command = match prefix.split_first() {
            Some((program, arguments)) => {
                let mut command = Command::new(program);
                command.args(arguments).arg(apollo_bin());
                command
            }
            None => Command::new(apollo_bin()),
        };
        command
            .args(&self.args)
            .current_dir(self.dir.path())
            .env("CI", "true")
            .env("NO_COLOR", "1")
            .env_remove("APOLLO_STATE_DIR")
            .stdin(Stdio::null());
        for (key, value) in &self.envs {
            command.env(key, value);
        }
        command
    }

    /// Run to completion and capture the output.
    pub(crate) fn run(&self) -> Output {
        let mut child = self
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn apollo");
        wait_output(&mut child)
    }

    /// Run to completion through `prefix` (see [`Self::command_under`]) and capture the output.
    pub(crate) fn run_under(&self, prefix: &[&str]) -> Output {
        let mut child = self
            .command_under(prefix)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn apollo");
        wait_output(&mut child)
    }

    /// Start in the background (stdout/stderr captured); see [`Running`].
    pub(crate) fn spawn(&self) -> Running {
        let child = self
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn apollo");
        Running { child: Some(child) }
    }

    /// How many times `unit` executed (units run `bin/count UNIT`).
    pub(crate) fn count(&self, unit: &str) -> usize {
        std::fs::read_to_string(self.path(&format!("counts/{unit}")))
            .map_or(0, |text| text.lines().count())
    }

    /// Wait until the marker `markers/NAME` exists.
    #[track_caller]
    pub(crate) fn wait_for_marker(&self, name: &str) {
        let path = self.path(&format!("markers/{name}"));
        let deadline = Instant::now() + SAFETY_TIMEOUT;
        while !path.exists() {
            assert!(Instant::now() < deadline, "marker {name} never appeared");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Create the marker `markers/NAME` (releases a `bin/block NAME` unit).
    pub(crate) fn release(&self, name: &str) {
        std::fs::write(self.path(&format!("markers/{name}")), b"").expect("write marker");
    }

    /// The state directory's runs, newest last.
    pub(crate) fn run_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(self.path(".apollo/runs"))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    }
}

/// An `apollo` running in the background. Dropping it kills it.
pub(crate) struct Running {
    child: Option<Child>,
}

impl Running {
    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Whether apollo has not exited yet (an exited one is reaped; `wait` still reports it).
    pub(crate) fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Send `signal` to apollo (not its units).
    #[allow(unsafe_code)] // kill(2) of the apollo under test.
    pub(crate) fn signal(&self, signal: i32) {
        // SAFETY: kill(2) with a pid we spawned and have not reaped.
        let result = unsafe { libc::kill(self.pid() as libc::pid_t, signal) };
        assert_eq!(result, 0, "kill failed");
    }

    /// SIGKILL apollo and wait for it.
    pub(crate) fn kill9(mut self) -> Output {
        self.signal(libc::SIGKILL);
        let mut child = self.child.take().expect("child");
        wait_output(&mut child)
    }

    /// Wait for it to exit.
    pub(crate) fn wait(mut self) -> Output {
        let mut child = self.child.take().expect("child");
        wait_output(&mut child)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn wait_output(child: &mut Child) -> Output {
    let captured = apollo_tests::wait_captured(child, SAFETY_TIMEOUT);
    Output {
        code: captured.code,
        stdout: captured.stdout,
        stderr: captured.stderr,
    }
}

/// `bin/count UNIT`: record one execution of UNIT (with its attempt) in `counts/UNIT`.
const COUNT_SCRIPT: &str = r#"#!/bin/sh
set -e
dir=$(dirname "$0")/..
echo "attempt=${APOLLO_ATTEMPT:-?} phase=${APOLLO_PHASE:-?}" >> "$dir/counts/$1"
"#;

/// `bin/block NAME`: create `markers/NAME.started`, then wait until `markers/NAME.release`
/// exists. A unit that blocks is where a test kills or interrupts apollo.
/// Makes a FIFO at `path` (what a hostile or damaged directory may hold where a file is
/// expected).
#[allow(unsafe_code)] // mkfifo(3).
pub(crate) fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let text = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo(3) with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(text.as_ptr(), 0o600) }, 0, "mkfifo");
}

const BLOCK_SCRIPT: &str = r#"#!/bin/sh
dir=$(dirname "$0")/..
: > "$dir/markers/$1.started"
while [ ! -e "$dir/markers/$1.release" ]; do sleep 0.01; done
"#;

impl Apollo {
    /// Rewrites the journal of `run` with `edit` applied to every event: what a damaged or
    /// hostile state directory can hold, with every checksum right.
    pub(crate) fn rewrite_journal(&self, run: &str, edit: impl Fn(&mut apollo_core::Event)) {
        use apollo_store::{Durability, JournalReader, JournalWriter, ReadOptions, WriterOptions};
        let run_dir = self.path(&format!(".apollo/runs/{run}"));
        let mut events: Vec<apollo_core::Event> =
            (JournalReader::open(&run_dir, ReadOptions::default()).unwrap())
                .map(|record| record.unwrap().event)
                .collect();
        events.iter_mut().for_each(edit);
        for segment in std::fs::read_dir(run_dir.join("journal")).unwrap() {
            std::fs::remove_file(segment.unwrap().path()).unwrap();
        }
        let options = WriterOptions::default().durability(Durability::None);
        let mut writer = JournalWriter::create(&run_dir, run, options).unwrap();
        writer.append_batch(&events).unwrap();
    }

    /// Adds `paths` to the outputs `run` recorded for `unit` (each with the blob of the first
    /// recorded output), rewriting its journal with every checksum right: a record a damaged
    /// or hostile state directory may hold.
    pub(crate) fn record_extra_outputs(&self, run: &str, unit: &str, paths: &[&str]) {
        self.rewrite_journal(run, |event| {
            if let apollo_core::Event::UnitFiles(files) = event
                && files.unit == unit
                && files.side == apollo_core::event::FileSide::Outputs
            {
                let recorded = files.files[0].clone();
                for path in paths {
                    files.files.push(apollo_core::capture::FileEntry {
                        path: (*path).to_owned(),
                        ..recorded.clone()
                    });
                }
            }
        });
    }

    /// Every blob file in the project's state directory, sorted.
    pub(crate) fn blobs(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let root = self.path(".apollo/blobs/sha256");
        for prefix in std::fs::read_dir(root).unwrap() {
            for blob in std::fs::read_dir(prefix.unwrap().path()).unwrap() {
                found.push(blob.unwrap().path());
            }
        }
        found.sort();
        found
    }

    /// The blob file in the state directory that holds `content`.
    pub(crate) fn find_blob(&self, content: &[u8]) -> Option<PathBuf> {
        (self.blobs().into_iter()).find(|path| std::fs::read(path).ok().as_deref() == Some(content))
    }

    /// Every journal line of every run, as text (the framing keeps JSON greppable).
    pub(crate) fn journal_text(&self) -> String {
        let mut text = String::new();
        for run in self.run_ids() {
            let dir = self.path(&format!(".apollo/runs/{run}/journal"));
            let mut segments: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .map(|entry| entry.path())
                        .collect()
                })
                .unwrap_or_default();
            segments.sort();
            for segment in segments
                .iter()
                .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
            {
                text.push_str(&std::fs::read_to_string(segment).unwrap_or_default());
            }
        }
        text
    }

    /// Wait until the journal contains `needle`.
    #[track_caller]
    pub(crate) fn wait_for_journal(&self, needle: &str) {
        let deadline = Instant::now() + SAFETY_TIMEOUT;
        while !self.journal_text().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "the journal never contained {needle}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Assert that no process mentioning this project folder in its command line or
    /// environment is alive (units and anything they forked), waiting a little for processes
    /// that were just killed to be reaped by their parent.
    #[track_caller]
    #[allow(unsafe_code)] // kill(2) of what a test left.
    pub(crate) fn assert_no_processes_left(&self) {
        let needle = self.root().to_string_lossy().into_owned();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let alive = processes_mentioning(&needle);
            if alive.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                for (pid, _) in &alive {
                    // SAFETY: kill(2) on a pid; cleaning up before failing the test.
                    unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
                }
                panic!("processes outlived apollo: {alive:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// (pid, command line) of live, non-zombie processes whose command line mentions `needle`.
pub(crate) fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat.rsplit(')').next()?.split_whitespace().next()?;
            if state == "Z" {
                return None;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(needle).then_some((pid, cmdline))
        })
        .collect()
}
