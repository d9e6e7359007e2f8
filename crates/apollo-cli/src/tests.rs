//! In-process tests of whole command lines: arguments in, stdout/stderr/exit code out.

use std::ffi::OsString;
use std::path::Path;

use super::run;
use crate::exit::Exit;

/// Runs `apollo <args>` in-process; returns (exit, stdout, stderr) with `dir` redacted.
fn apollo(dir: &Path, args: &[&str]) -> (Exit, String, String) {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let argv = std::iter::once("apollo")
        .chain(args.iter().copied())
        .map(OsString::from);
    let exit = run(argv, &mut stdout, &mut stderr);
    let redact = |bytes: Vec<u8>| {
        String::from_utf8(bytes)
            .expect("utf-8 output")
            .replace(&dir.display().to_string(), "[DIR]")
    };
    (exit, redact(stdout), redact(stderr))
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}

const VALID: &str = "name: etl\nmax_parallel: 2\nunits:\n  - name: fetch\n    execute: ./fetch.sh\n  - name: clean\n    deps: [fetch]\n    execute: ./clean.sh\n    retries: 1\n    idempotent: false\n  - name: report\n    deps: [fetch]\n    execute: ./report.sh\n  - name: save\n    deps: [clean, report]\n    execute: ./save.sh\n";

const INVALID: &str = "units:\n  - name: fetch\n    execute: ./fetch.sh\n    retires: 2\n  - name: clean\n    deps: [fetch, clen]\n    execute: ./clean.sh\n";

#[test]
fn check_valid_config_exits_0_with_warnings_on_stderr_and_plan_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "etl.yaml", VALID);
    let (exit, stdout, stderr) = apollo(dir.path(), &["check", &config, "--plan"]);
    assert_eq!(exit, Exit::Success);
    insta::assert_snapshot!("check_valid_stdout", stdout);
    insta::assert_snapshot!("check_valid_stderr", stderr);
}

#[test]
fn check_invalid_config_exits_2_with_every_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "bad.yaml", INVALID);
    let (exit, stdout, stderr) = apollo(dir.path(), &["check", &config]);
    assert_eq!(exit, Exit::Usage);
    assert_eq!(stdout, "");
    insta::assert_snapshot!("check_invalid_stderr", stderr);
}

#[test]
fn check_json_is_one_document_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "bad.yaml", INVALID);
    let (exit, stdout, stderr) = apollo(dir.path(), &["check", &config, "--format", "json"]);
    assert_eq!(exit, Exit::Usage);
    assert_eq!(stderr, "");
    let document: serde_json::Value = serde_json::from_str(&stdout).expect("valid JSON");
    assert_eq!(document["valid"], false);
    assert_eq!(document["errors"], 2);
    insta::assert_snapshot!("check_invalid_json", stdout);

    let config = write(dir.path(), "etl.yaml", VALID);
    let (exit, stdout, _) = apollo(dir.path(), &["check", &config, "--format=json", "--plan"]);
    assert_eq!(exit, Exit::Success);
    let document: serde_json::Value = serde_json::from_str(&stdout).expect("valid JSON");
    assert_eq!(document["valid"], true);
    assert_eq!(
        document["plan"],
        serde_json::json!([["fetch"], ["clean", "report"], ["save"]])
    );
}

#[test]
fn check_of_a_missing_file_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.yaml").display().to_string();
    let (exit, _, stderr) = apollo(dir.path(), &["check", &missing]);
    assert_eq!(exit, Exit::Usage);
    assert!(
        stderr.starts_with("error: cannot read config file `[DIR]/nope.yaml`\n  caused by: "),
        "{stderr}"
    );
}

#[test]
fn graph_prints_dot_and_mermaid_and_refuses_invalid_configs() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "etl.yaml", VALID);
    let (exit, stdout, _) = apollo(dir.path(), &["graph", &config]);
    assert_eq!(exit, Exit::Success);
    assert!(stdout.starts_with("digraph \"etl\" {"), "{stdout}");
    assert!(stdout.contains("  \"clean\" -> \"save\";\n"), "{stdout}");
    let (exit, stdout, _) = apollo(dir.path(), &["graph", &config, "--format", "mermaid"]);
    assert_eq!(exit, Exit::Success);
    assert!(stdout.contains("  n1 --> n3\n"), "{stdout}");

    let config = write(dir.path(), "bad.yaml", INVALID);
    let (exit, stdout, stderr) = apollo(dir.path(), &["graph", &config]);
    assert_eq!(exit, Exit::Usage);
    assert_eq!(stdout, "");
    assert!(stderr.contains("did you mean `retries`?"), "{stderr}");
    assert!(
        stderr.ends_with("error: could not load `[DIR]/bad.yaml` (2 errors)\n"),
        "{stderr}"
    );
}

#[test]
fn completions_are_generated_for_each_shell() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (exit, stdout, _) = apollo(dir.path(), &["completions", shell]);
        assert_eq!(exit, Exit::Success);
        assert!(stdout.contains("check"), "{shell}");
    }
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let (exit, stdout, stderr) = apollo(dir.path(), &["check", "--format", "xml"]);
    assert_eq!(exit, Exit::Usage);
    assert_eq!(stdout, "");
    assert!(stderr.contains("invalid value 'xml'"), "{stderr}");
    let (exit, stdout, _) = apollo(dir.path(), &["--help"]);
    assert_eq!(exit, Exit::Success);
    assert!(stdout.contains("130  interrupted"), "{stdout}");
    let (exit, _, stderr) = apollo(dir.path(), &[]);
    assert_eq!(exit, Exit::Usage);
    assert!(stderr.contains("Usage: apollo"), "{stderr}");
}

/// A writer whose reader has gone away, like stdout piped into `head` after it exits.
struct ClosedPipe;

impl std::io::Write for ClosedPipe {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::ErrorKind::BrokenPipe.into())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Err(std::io::ErrorKind::BrokenPipe.into())
    }
}

#[test]
fn closed_stdout_is_exit_0_and_silent() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "etl.yaml", VALID);
    for args in [
        vec!["apollo", "graph", config.as_str()],
        vec!["apollo", "check", config.as_str(), "--plan"],
        vec!["apollo", "completions", "bash"],
    ] {
        let mut stderr = Vec::new();
        let exit = run(
            args.into_iter().map(OsString::from),
            &mut ClosedPipe,
            &mut stderr,
        );
        assert_eq!(exit, Exit::Success);
        let stderr = String::from_utf8(stderr).unwrap();
        assert!(!stderr.contains("error"), "{stderr}");
    }
}

#[test]
fn only_is_repeatable_and_never_swallows_the_config_argument() {
    use clap::Parser;
    let cli = crate::cli::Cli::try_parse_from([
        "apollo",
        "run",
        "--only",
        "a",
        "--only",
        "b,c",
        "p/etl.yaml",
    ])
    .unwrap();
    let crate::cli::Command::Run(args) = cli.command else {
        panic!("a run command");
    };
    assert_eq!(args.execution.only, ["a", "b", "c"]);
    assert_eq!(
        args.config.config.as_deref(),
        Some(std::path::Path::new("p/etl.yaml"))
    );
}

#[test]
fn error_messages_escape_control_characters_from_user_input() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("state/runs")).unwrap();
    let state = dir.path().join("state").display().to_string();
    let (exit, _, stderr) = apollo(
        dir.path(),
        &["--state-dir", &state, "show", "\u{1b}[2Jrun", "unit"],
    );
    assert_eq!(exit, Exit::Usage);
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(stderr.contains("\\u{1b}[2Jrun"), "{stderr}");
}
