//! End-to-end tests of the real `apollo` binary: what only a separate process can show
//! (exit statuses, a reader closing the pipe, the default config lookup from the cwd).
#![forbid(unsafe_code)]
#![allow(
    clippy::disallowed_methods,
    reason = "these tests run the apollo binary"
)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

fn apollo(cwd: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_apollo"))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .output()
        .expect("apollo runs")
}

#[test]
fn check_finds_the_default_config_and_validates_the_bundled_example() {
    let repo_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = apollo(&repo_root, &["check"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with(
            "config/pipeline.yaml: pipeline `daily-sales` is valid (7 units, 0 warnings)"
        ),
        "{stdout}"
    );
    assert!(output.stderr.is_empty(), "{output:?}");
}

#[test]
fn no_config_in_the_current_folder_exits_2_naming_the_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let output = apollo(dir.path(), &["check"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("looked for `apollo.yaml`, `pipeline.yaml`, `config/pipeline.yaml`"),
        "{stderr}"
    );
}

#[test]
fn a_reader_closing_the_pipe_early_is_exit_0_not_a_panic() {
    // A graph far larger than a pipe buffer, so apollo is still writing when the reader leaves.
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = String::from("units:\n");
    for unit_idx in 0..5_000 {
        yaml.push_str(&format!(
            "  - name: unit_with_a_long_name_{unit_idx}\n    execute: 'true'\n"
        ));
        if unit_idx > 0 {
            yaml.push_str(&format!(
                "    deps: [unit_with_a_long_name_{}]\n",
                unit_idx - 1
            ));
        }
    }
    std::fs::write(dir.path().join("apollo.yaml"), yaml).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_apollo"))
        .arg("graph")
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("apollo starts");
    // Read a little, like `head -c 100`, then close the pipe.
    let mut first_bytes = [0u8; 100];
    child
        .stdout
        .take()
        .expect("piped stdout")
        .read_exact(&mut first_bytes)
        .expect("some output");
    let output = child.wait_with_output().expect("apollo exits");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
