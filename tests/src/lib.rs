//! Helpers shared by the test binaries of this crate (`e2e`, `exec`, `reliability`).
#![allow(clippy::disallowed_methods, clippy::expect_used)] // Test support: builds and runs the binary under test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `apollo` binary of the calling test's profile, built once per test process so it is
/// never stale (`cargo test -p apollo-tests` alone does not build other packages' binaries).
pub fn apollo_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        // target/<profile>/deps/<test>-<hash> → target/<profile>/apollo
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target profile dir")
            .to_path_buf();
        let bin = profile_dir.join("apollo");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let profile = profile_dir
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("debug");
        let mut build = Command::new(cargo);
        build.args(["build", "--quiet", "-p", "apollo-cli", "--bin", "apollo"]);
        if profile == "release" {
            build.arg("--release");
        }
        let status = build
            .status()
            .expect("run cargo build for the apollo binary");
        assert!(status.success(), "building the apollo binary failed");
        assert!(bin.exists(), "no apollo binary at {}", bin.display());
        bin
    })
}

/// What a finished child printed, and how it ended.
#[derive(Debug)]
pub struct Captured {
    /// The exit code (`None` when a signal ended it).
    pub code: Option<i32>,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
}

/// Wait for `child` (stdout and stderr piped), draining both pipes on threads so neither can
/// fill and block it. Kills it and panics after `timeout`: a safety net, not a synchroniser.
pub fn wait_captured(child: &mut std::process::Child, timeout: std::time::Duration) -> Captured {
    use std::io::Read;
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
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child did not finish within {timeout:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    Captured {
        code: status.code(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}
