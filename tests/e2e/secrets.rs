//! Secrets (issue 36 item 11, DESIGN §18): a `secrets:` block read when the run starts, handed
//! to the units that list them through their environment, masked in their logs, and never
//! written down anywhere in the state directory or printed by a view.

use std::path::Path;

use crate::support::Apollo;

const FROM_ENV: &str = "env-secret-4f1d9a";
const FROM_FILE: &str = "file-secret-8c2e7b";
const FROM_COMMAND: &str = "command-secret-1a3b5c";
/// The command that prints [`FROM_COMMAND`] without holding it (the config is kept in the
/// state directory, as the definition snapshot).
const COMMAND: &str = "printf command-; printf secret-1a3b5c";

/// `deploy` receives three secrets (one of each source), writes them where the test reads them
/// (outside the state directory, in no declared file), echoes two (to be masked) and writes a
/// declared output that holds no value; `plain` receives none. (The values are not written in
/// the config: it is kept in the state directory.)
const PIPELINE: &str = "secrets:
  FROM_ENV: {env: APOLLO_E2E_TOKEN}
  FROM_FILE: {file: keys/token.txt}
  FROM_COMMAND: {command: \"printf command-; printf secret-1a3b5c\"}
defaults:
  capture: all
units:
  - name: deploy
    secrets: [FROM_ENV, FROM_FILE, FROM_COMMAND]
    inputs: [keys/readme.txt]
    outputs: [out/deployed.txt]
    reuse: true
    execute: >-
      bin/count deploy &&
      printf '%s|%s|%s' \"$FROM_ENV\" \"$FROM_FILE\" \"$FROM_COMMAND\" > markers/seen &&
      echo \"token is $FROM_ENV\" && echo \"file is $FROM_FILE\" >&2 &&
      mkdir -p out && echo deployed > out/deployed.txt
  - name: plain
    deps: [deploy]
    execute: test -z \"$FROM_ENV\"
on_finish: \"true\"
";

fn project() -> Apollo {
    let mut apollo = Apollo::new();
    apollo.file("keys/token.txt", &format!("{FROM_FILE}\n"));
    apollo.file("keys/readme.txt", "the keys folder\n");
    apollo.config(PIPELINE);
    apollo.envs(&[("APOLLO_E2E_TOKEN", FROM_ENV)]);
    apollo
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            let file_type = entry.file_type().unwrap();
            if file_type.is_dir() {
                stack.push(path);
            } else if file_type.is_file() {
                let bytes = std::fs::read(&path).unwrap();
                if bytes.windows(needle.len()).any(|window| window == needle) {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

fn state_dir(apollo: &Apollo) -> std::path::PathBuf {
    apollo.path(".apollo")
}

#[test]
fn secrets_from_env_file_and_command_reach_the_unit_and_are_never_written_down() {
    let mut apollo = project();
    let run = apollo.args(&["run"]).run();
    run.code(0);
    assert_eq!(apollo.count("deploy"), 1);
    assert_eq!(
        std::fs::read_to_string(apollo.path("markers/seen")).unwrap(),
        format!("{FROM_ENV}|{FROM_FILE}|{FROM_COMMAND}")
    );
    // A unit that receives secrets has them masked in its logs.
    let logs = files_containing(&state_dir(&apollo), b"token is ***");
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(
        files_containing(&state_dir(&apollo), b"file is ***").len(),
        1
    );
    // Not a byte of any value anywhere in the state directory: journal, blobs (the definition
    // snapshot), the index, the parse cache, logs, the hooks' summary.
    for value in [FROM_ENV, FROM_FILE, FROM_COMMAND] {
        assert_eq!(
            files_containing(&state_dir(&apollo), value.as_bytes()),
            Vec::<String>::new(),
            "{value}"
        );
        assert!(!run.stdout.contains(value) && !run.stderr.contains(value));
    }
    // Nor in the views.
    let views = [
        vec!["show", "latest", "deploy"],
        vec!["show", "latest", "--definition"],
        vec!["replay", "--format", "json"],
        vec!["replay", "--format", "junit"],
        vec!["replay", "--format", "html"],
    ];
    for view in views {
        let output = apollo.args(&view).run();
        output.code(0);
        for value in [FROM_ENV, FROM_FILE, FROM_COMMAND] {
            assert!(
                !output.stdout.contains(value) && !output.stderr.contains(value),
                "{view:?} shows {value}:\n{}",
                output.stdout
            );
        }
    }
    // The definition names each secret and its source.
    let definition = apollo.args(&["show", "latest", "--definition"]).run();
    assert!(
        definition.stdout.contains("APOLLO_E2E_TOKEN"),
        "{}",
        definition.stdout
    );
}

#[test]
fn rotating_a_secret_value_does_not_rerun_a_reused_unit() {
    let mut apollo = project();
    apollo.args(&["run"]).run().code(0);
    apollo.envs(&[("APOLLO_E2E_TOKEN", "a-rotated-value-77")]);
    apollo.file("keys/token.txt", "another-file-value-99\n");
    apollo.args(&["run", "--fresh"]).run().code(0);
    assert_eq!(apollo.count("deploy"), 1, "reused, not run again");
}

#[test]
fn a_secret_that_cannot_be_read_stops_the_run_before_it_starts_naming_it_and_its_source() {
    // An unset variable.
    let mut apollo = project();
    apollo.envs(&[]);
    let output = apollo.args(&["run"]).run();
    output.code(2);
    assert!(
        output.stderr.contains("FROM_ENV") && output.stderr.contains("env APOLLO_E2E_TOKEN"),
        "{}",
        output.stderr
    );
    assert_eq!(apollo.count("deploy"), 0);
    assert!(apollo.run_ids().is_empty(), "no run was recorded");

    // A missing file.
    let mut apollo = project();
    std::fs::remove_file(apollo.path("keys/token.txt")).unwrap();
    let output = apollo.args(&["run"]).run();
    output.code(2);
    assert!(
        output.stderr.contains("FROM_FILE") && output.stderr.contains("token.txt"),
        "{}",
        output.stderr
    );

    // A failing command.
    let mut apollo = project();
    apollo.config(&PIPELINE.replace(COMMAND, "echo vault is sealed >&2; exit 4"));
    let output = apollo.args(&["run"]).run();
    output.code(2);
    assert!(
        output.stderr.contains("FROM_COMMAND") && output.stderr.contains("vault is sealed"),
        "{}",
        output.stderr
    );
}

#[test]
fn check_and_a_dry_run_never_run_a_secret_command() {
    let mut apollo = project();
    apollo.config(&PIPELINE.replace(COMMAND, "touch markers/secret-command-ran; printf x"));
    apollo.args(&["check"]).run().code(0);
    apollo.args(&["run", "--dry-run"]).run().code(0);
    assert!(!apollo.path("markers/secret-command-ran").exists());
}

#[test]
fn secret_true_is_refused_with_a_hint_to_the_secrets_block() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: deploy
    execute: ./deploy.sh
    env:
      API_TOKEN: {value: abc, secret: true}
",
    );
    let output = apollo.args(&["check"]).run();
    output.code(2);
    assert!(output.stderr.contains("secrets:"), "{}", output.stderr);
}

#[test]
fn check_warns_about_a_secret_looking_env_variable_pasted_into_a_command() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: deploy
    execute: curl -u \"me:${env.APOLLO_E2E_PASSWORD}\" https://example.invalid
",
    );
    apollo.envs(&[("APOLLO_E2E_PASSWORD", "hunter2-plain")]);
    let output = apollo.args(&["check"]).run();
    output.code(0);
    assert!(
        output.stderr.contains("secret-in-command")
            || output.stdout.contains("secret-in-command")
            || output.stderr.contains("looks like a secret")
            || output.stdout.contains("looks like a secret"),
        "{}\n{}",
        output.stdout,
        output.stderr
    );
}

/// `apollo reproduce` of a unit that receives secrets reads them from their recorded sources,
/// as a run does when it starts: the reproduction gets the values (masked in its logs, never
/// written down), and a secret that cannot be read now stops it before anything runs.
#[test]
fn reproduce_reads_a_units_secrets_from_their_sources_and_never_writes_them_down() {
    let mut apollo = Apollo::new();
    apollo.file("keys/token.txt", &format!("{FROM_FILE}\n"));
    apollo.config(
        "secrets:
  FROM_ENV: {env: APOLLO_E2E_TOKEN}
  FROM_FILE: {file: keys/token.txt}
units:
  - name: deploy
    secrets: [FROM_ENV, FROM_FILE]
    outputs: [out.txt]
    execute: >-
      test -n \"$FROM_ENV\" && test -n \"$FROM_FILE\" && echo \"token is $FROM_ENV\" &&
      printf '%s %s' \"${#FROM_ENV}\" \"${#FROM_FILE}\" > out.txt
",
    );
    apollo.envs(&[("APOLLO_E2E_TOKEN", FROM_ENV)]);
    apollo.args(&["run"]).run().code(0);
    let output = apollo.args(&["reproduce", "latest", "deploy"]).run();
    output.code(0);
    assert!(
        output.stdout.contains("reproduced: 1 output identical"),
        "{output:?}"
    );
    // The reproduction's log has the value masked, like the run's.
    assert_eq!(
        files_containing(&state_dir(&apollo), b"token is ***").len(),
        2,
        "the run's log and the reproduction's"
    );
    for value in [FROM_ENV, FROM_FILE] {
        assert_eq!(
            files_containing(&state_dir(&apollo), value.as_bytes()),
            Vec::<String>::new(),
            "{value}"
        );
        assert!(!output.stdout.contains(value) && !output.stderr.contains(value));
    }
    // Without the variable now, the reproduction stops before anything runs, naming it.
    apollo.envs(&[]);
    let refused = apollo.args(&["reproduce", "latest", "deploy"]).run();
    refused.code(2);
    assert!(
        refused.stderr.contains("FROM_ENV") && refused.stderr.contains("APOLLO_E2E_TOKEN"),
        "{}",
        refused.stderr
    );
    let runs = apollo.args(&["runs"]).run();
    assert_eq!(
        runs.stdout.matches("reproduction").count(),
        1,
        "the refused one recorded no run: {}",
        runs.stdout
    );
}
