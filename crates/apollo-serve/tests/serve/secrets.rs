//! `apollo serve` never shows a secret's value (issue 36 item 11, DESIGN §18): not in a page,
//! not in the API, not in a log it relays — whatever the unit printed.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use crate::common::{Served, project, run_pipeline};

const FROM_FILE: &str = "file-secret-8c2e7b";
const FROM_COMMAND: &str = "command-secret-1a3b5c";

/// `deploy` receives two secrets (from a file and from a command that prints the value without
/// holding it: the config is kept in the state directory) and prints them on stdout and
/// stderr, in its name's way and in a failure's last line; `plain` receives none.
const PIPELINE: &str = "name: web
secrets:
  FROM_FILE: {file: keys/token.txt}
  FROM_COMMAND: {command: \"printf command-; printf secret-1a3b5c\"}
on_finish: \"true\"
units:
  - name: deploy
    secrets: [FROM_FILE, FROM_COMMAND]
    execute: >-
      echo \"token is $FROM_FILE\" && echo \"command gave $FROM_COMMAND\" >&2 &&
      printf 'last words %s' \"$FROM_COMMAND\" >&2 && exit 3
  - name: plain
    execute: echo nothing secret
";

#[test]
fn no_page_and_no_api_answer_of_serve_holds_a_secret_value() {
    let (dir, config_path) = project(PIPELINE);
    std::fs::create_dir_all(dir.path().join("keys")).unwrap();
    std::fs::write(dir.path().join("keys/token.txt"), format!("{FROM_FILE}\n")).unwrap();
    let first = run_pipeline(&config_path).run_id.to_string();
    let second = run_pipeline(&config_path).run_id.to_string();
    let served = Served::start(&dir.path().join(".apollo"));

    let mut answers = Vec::new();
    for path in [
        "/".to_owned(),
        "/runs/latest".to_owned(),
        format!("/runs/{first}"),
        "/runs/latest/report".to_owned(),
        "/runs/latest/units/deploy".to_owned(),
        "/runs/latest/units/deploy?attempt=1".to_owned(),
        "/runs/latest/units/plain".to_owned(),
        format!("/diff?a={first}&b={second}"),
        "/history?pipeline=web".to_owned(),
        "/api/runs".to_owned(),
        "/api/runs/latest".to_owned(),
        "/api/runs/latest/units/deploy".to_owned(),
        "/api/runs/latest/units/deploy/log".to_owned(),
        "/api/runs/latest/units/deploy/log?stream=stderr".to_owned(),
        format!("/api/diff?a={first}&b={second}"),
    ] {
        let body = served.ok(&path);
        answers.push((path, body));
    }
    // The pages are about the run that used the secrets (a test that looked at nothing could
    // not fail): the unit's failure and its masked output are there.
    let (_, unit) = &answers[11];
    assert!(
        unit.contains(r#""exit":{"code":3}"#),
        "the unit ran with its secrets: {unit}"
    );
    let (_, stdout_log) = &answers[12];
    assert!(stdout_log.contains("token is "), "{stdout_log}");
    let (_, stderr_log) = &answers[13];
    assert!(stderr_log.contains("last words "), "{stderr_log}");
    for (path, body) in &answers {
        for secret in [FROM_FILE, FROM_COMMAND] {
            assert!(!body.contains(secret), "GET {path} holds a secret:\n{body}");
        }
    }
}
