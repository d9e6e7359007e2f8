//! A unit that receives secrets: the values are in its environment, never on its command
//! line, and every value is masked in its log files, even when written a byte at a time.

use apollo_core::event::AttemptStatus;
use apollo_core::model::SecretSource;
use apollo_exec::{ProcessExecutor, SecretValues};

use crate::{Fixture, assert_no_survivors};

const VALUE: &str = "s3cr3t-value-0123";

fn fixture_with_secret(execute: &str) -> (Fixture, ProcessExecutor) {
    let mut fixture = Fixture::new(execute);
    fixture.unit.secrets.insert(
        "API_TOKEN".to_owned(),
        SecretSource::Env("WHATEVER".to_owned()),
    );
    let mut values = SecretValues::new();
    values.insert("API_TOKEN", VALUE);
    let executor = ProcessExecutor::new(fixture.options.clone()).with_secrets(values);
    (fixture, executor)
}

#[test]
fn a_secret_reaches_the_unit_in_its_environment_and_is_masked_in_both_logs() {
    // Written whole, split across two writes, and one byte at a time; to both streams; and by
    // cleanup too.
    let (mut fixture, executor) = fixture_with_secret(
        "test \"$API_TOKEN\" = s3cr3t-value-0123 && echo \"whole $API_TOKEN end\" && \
         printf 's3cr3t-va' && printf 'lue-0123\\n' && \
         printf '%s\\n' \"$API_TOKEN\" | fold -w1 | tr -d '\\n' && echo && \
         echo \"err $API_TOKEN\" >&2",
    );
    fixture.unit.cleanup = Some(apollo_core::Command::Shell(
        "echo \"cleanup $API_TOKEN\"".to_owned(),
    ));
    let outcome = fixture.run_on(&executor, fixture.dir.path());
    assert_no_survivors(&fixture.run_id);
    assert_eq!(outcome.status, AttemptStatus::Succeeded, "{outcome:?}");
    let stdout = fixture.read("stdout");
    let stderr = fixture.read("stderr");
    assert_eq!(stdout, "whole *** end\n***\n***\ncleanup ***\n");
    assert_eq!(stderr, "err ***\n");
    // The stdout hash and byte counts are of what reached the file.
    assert_eq!(outcome.stdout_bytes, stdout.len() as u64);
}

#[test]
fn a_unit_whose_secret_was_not_read_fails_without_starting() {
    let mut fixture = Fixture::new("touch started");
    fixture.unit.secrets.insert(
        "API_TOKEN".to_owned(),
        SecretSource::Env("WHATEVER".to_owned()),
    );
    let outcome = fixture.run();
    assert_eq!(outcome.status, AttemptStatus::Failed);
    assert!(
        outcome
            .error
            .as_deref()
            .unwrap_or("")
            .contains("`API_TOKEN`"),
        "{outcome:?}"
    );
    assert!(!fixture.path("started").exists());
}

#[test]
fn a_unit_without_secrets_keeps_writing_its_logs_directly() {
    let (mut fixture, executor) = fixture_with_secret("echo s3cr3t-value-0123");
    fixture.unit.secrets.clear();
    let outcome = fixture.run_on(&executor, fixture.dir.path());
    assert_eq!(outcome.status, AttemptStatus::Succeeded);
    // Only a unit that receives a secret is masked: this one printed a value it was not given.
    assert_eq!(fixture.read("stdout"), "s3cr3t-value-0123\n");
}
