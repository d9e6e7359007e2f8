//! A bounded run of the crash-injection harness (`cargo xtask torture` is the long one).
#![allow(clippy::disallowed_methods)] // Runs the harness binary.

use std::process::Command;

use crate::support::apollo_bin;

#[test]
fn killed_at_random_moments_and_resumed() {
    let workdir = tempfile::Builder::new()
        .prefix("apollo-torture-")
        .tempdir()
        .expect("temp dir");
    let output = Command::new(env!("CARGO_BIN_EXE_torture"))
        .arg("--apollo")
        .arg(apollo_bin())
        .args(["--iterations", "24", "--seed", "7"])
        .arg("--workdir")
        .arg(workdir.path())
        .output()
        .expect("run the torture harness");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "torture found violations\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(
        stdout.contains("iterations 24,") && stdout.contains("violations 0 "),
        "unexpected summary: {stdout}"
    );
    let kills: u64 = stdout
        .split_once("kills ")
        .and_then(|(_, rest)| rest.split(',').next())
        .and_then(|kills| kills.parse().ok())
        .unwrap_or(0);
    assert!(kills > 0, "the harness never killed apollo: {stdout}");
}
