//! Helpers shared by the tests that drive real programs: waiting for a child with captured
//! output, and the crash-injection harness ([`torture`]).
//!
//! The end-to-end and reliability tests that run the `apollo` binary are test targets of
//! apollo-cli (`crates/apollo-cli/Cargo.toml`), the package that owns the binary, so they get
//! it from cargo as `CARGO_BIN_EXE_apollo`, built once and never stale; their sources stay
//! here, beside the helpers and the helper programs (`src/bin/`).
// The torture harness's memfd_create, mkfifo and kill are the only `unsafe`.
#![deny(unsafe_code)]
#![allow(clippy::disallowed_methods, clippy::expect_used)] // Test support: runs programs.

pub mod torture;

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
