//! The fluent helper every end-to-end test drives the real `apollo` binary through:
//! `Apollo::new().config(..).args(..).run()`.
//!
//! Each test gets its own temporary project folder (config, unit scripts, state dir), so
//! tests never share state. Waiting is always on marker files that units create, with a
//! generous timeout as a safety net only.
#![allow(clippy::disallowed_methods)] // The tests spawn the binary under test.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `apollo` binary, built once per test process so it is never stale.
pub fn apollo_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        // target/<profile>/deps/e2e-<hash> → target/<profile>/apollo
        let profile_dir = exe.parent().and_then(Path::parent).expect("target profile dir").to_path_buf();
        let bin = profile_dir.join("apollo");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let profile = profile_dir.file_name().and_then(|name| name.to_str()).unwrap_or("debug");
        let mut build = Command::new(cargo);
        build.args(["build", "--quiet", "-p", "apollo-cli", "--bin", "apollo"]);
        if profile == "release" {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo build for the apollo binary");
        assert!(status.success(), "building the apollo binary failed");
        assert!(bin.exists(), "no apollo binary at {}", bin.display());
        bin
    })
}

/// How long any wait may take before the test fails: generous, for a loaded 2-core machine.
pub const SAFETY_TIMEOUT: Duration = Duration::from_secs(60);

/// A temporary project folder and the `apollo` invocations in it.
pub struct Apollo {
    dir: tempfile::TempDir,
    args: Vec<String>,
    envs: Vec<(String, String)>,
}

/// What a finished `apollo` invocation did.
#[derive(Debug)]
pub struct Output {
    /// The exit code (`None` when a signal ended it).
    pub code: Option<i32>,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
}

impl Output {
    /// Assert the exit code, showing the output when it differs.
    #[track_caller]
    pub fn code(&self, expected: i32) -> &Self {
        assert_eq!(self.code, Some(expected), "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr);
        self
    }

    /// Both streams together, for "says X somewhere" assertions.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

impl Apollo {
    /// A new empty project folder, with the helper scripts units use.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new().prefix("apollo-e2e-").tempdir().expect("temp dir");
        let apollo = Self { dir, args: Vec::new(), envs: Vec::new() };
        apollo.file("bin/count", COUNT_SCRIPT);
        apollo.make_executable("bin/count");
        apollo.file("bin/block", BLOCK_SCRIPT);
        apollo.make_executable("bin/block");
        std::fs::create_dir_all(apollo.path("counts")).expect("counts dir");
        std::fs::create_dir_all(apollo.path("markers")).expect("markers dir");
        apollo
    }

    /// The project folder.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A path inside the project folder.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// Write a file (creating folders).
    pub fn file(&self, relative: &str, contents: &str) -> &Self {
        let path = self.path(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent dir");
        }
        std::fs::write(&path, contents).expect("write file");
        self
    }

    fn make_executable(&self, relative: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(self.path(relative), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// Write the pipeline config `apollo.yaml`.
    pub fn config(&self, yaml: &str) -> &Self {
        self.file("apollo.yaml", yaml)
    }

    /// Set the arguments of the next invocation.
    pub fn args(&mut self, args: &[&str]) -> &mut Self {
        self.args = args.iter().map(|arg| (*arg).to_owned()).collect();
        self
    }

    /// Set an environment variable for the next invocations.
    pub fn env(&mut self, key: &str, value: &str) -> &mut Self {
        self.envs.push((key.to_owned(), value.to_owned()));
        self
    }

    fn command(&self) -> Command {
        let mut command = Command::new(apollo_bin());
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
    pub fn run(&self) -> Output {
        let mut child = self.command().stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn apollo");
        wait_output(&mut child)
    }

    /// Start in the background (stdout/stderr captured); see [`Running`].
    pub fn spawn(&self) -> Running {
        let child = self.command().stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn apollo");
        Running { child: Some(child) }
    }

    /// How many times `unit` executed (units run `bin/count UNIT`).
    pub fn count(&self, unit: &str) -> usize {
        std::fs::read_to_string(self.path(&format!("counts/{unit}"))).map_or(0, |text| text.lines().count())
    }

    /// Wait until the marker `markers/NAME` exists.
    #[track_caller]
    pub fn wait_for_marker(&self, name: &str) {
        let path = self.path(&format!("markers/{name}"));
        let deadline = Instant::now() + SAFETY_TIMEOUT;
        while !path.exists() {
            assert!(Instant::now() < deadline, "marker {name} never appeared");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Create the marker `markers/NAME` (releases a `bin/block NAME` unit).
    pub fn release(&self, name: &str) {
        std::fs::write(self.path(&format!("markers/{name}")), b"").expect("write marker");
    }

    /// The state directory's runs, newest last.
    pub fn run_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(self.path(".apollo/runs"))
            .map(|entries| entries.filter_map(Result::ok).map(|entry| entry.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        ids.sort();
        ids
    }
}

/// An `apollo` running in the background. Dropping it kills it.
pub struct Running {
    child: Option<Child>,
}

impl Running {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Send `signal` to apollo (not its units).
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) with a pid we spawned and have not reaped.
        let result = unsafe { libc::kill(self.pid() as libc::pid_t, signal) };
        assert_eq!(result, 0, "kill failed");
    }

    /// SIGKILL apollo and wait for it.
    pub fn kill9(mut self) -> Output {
        self.signal(libc::SIGKILL);
        let mut child = self.child.take().expect("child");
        wait_output(&mut child)
    }

    /// Wait for it to exit.
    pub fn wait(mut self) -> Output {
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
    // Read both pipes on threads so neither can fill and block the child.
    let mut stdout = child.stdout.take().expect("stdout piped");
    let mut stderr = child.stderr.take().expect("stderr piped");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + SAFETY_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for apollo") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("apollo did not finish within {SAFETY_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output { code: status.code(), stdout: out.join().unwrap_or_default(), stderr: err.join().unwrap_or_default() }
}

/// `bin/count UNIT`: record one execution of UNIT (with its attempt) in `counts/UNIT`.
const COUNT_SCRIPT: &str = r#"#!/bin/sh
set -e
dir=$(dirname "$0")/..
echo "attempt=${APOLLO_ATTEMPT:-?} phase=${APOLLO_PHASE:-?}" >> "$dir/counts/$1"
"#;

/// `bin/block NAME`: create `markers/NAME.started`, then wait until `markers/NAME.release`
/// exists. A unit that blocks is where a test kills or interrupts apollo.
const BLOCK_SCRIPT: &str = r#"#!/bin/sh
dir=$(dirname "$0")/..
: > "$dir/markers/$1.started"
while [ ! -e "$dir/markers/$1.release" ]; do sleep 0.01; done
"#;
