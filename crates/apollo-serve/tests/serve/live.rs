//! A running run seen live: its pages carry the event stream, which says `changed` when the
//! unit's output and the journal grow and `ended` when the run is over. Synchronised with the
//! unit through FIFOs: no sleeps.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use crate::common;

use std::io::Write;
use std::path::PathBuf;

use common::{Served, mkfifo, next_event, project, read_head, run_pipeline, send, unblock};

const PIPELINE: &str = "\
name: live
units:
  - name: wait
    execute: echo started > started.fifo; echo first-line; read line < go.fifo; echo \"after $line\"
";

/// Lets the unit go on when the test ends early (a failed assertion): no process outlives it.
struct Release(PathBuf);

impl Drop for Release {
    fn drop(&mut self) {
        unblock(&self.0, "released\n");
    }
}

#[test]
fn a_running_run_updates_live_and_ends() {
    let (dir, config) = project(PIPELINE);
    let (started, go) = (dir.path().join("started.fifo"), dir.path().join("go.fifo"));
    mkfifo(&started);
    mkfifo(&go);
    let release = Release(go.clone());
    let runner = {
        let (config, started) = (config.clone(), started.clone());
        std::thread::spawn(move || {
            let finished = run_pipeline(&config);
            // Should the unit never have reached its FIFO, the test's read must not wait
            // forever.
            unblock(&started, "run over\n");
            finished
        })
    };
    // The unit is running once it wrote into the FIFO.
    let said = std::fs::read_to_string(&started).expect("read started.fifo");
    assert_eq!(said.trim(), "started");

    let served = Served::start(&dir.path().join(".apollo"));
    let run = served.ok("/runs/latest");
    assert!(
        run.contains("data-live=\"/runs/"),
        "a live run's page follows its events"
    );
    assert!(run.contains("running"), "{run}");
    let unit = served.ok("/runs/latest/units/wait");
    assert!(
        unit.contains("data-live=") && unit.contains("first-line"),
        "{unit}"
    );
    let api = served.ok("/api/runs/latest/units/wait");
    assert!(
        api.contains("\"state\": \"running\"") || api.contains("\"state\":\"running\""),
        "{api}"
    );

    let bearer = format!("Bearer {}", served.token);
    let mut events = send(
        served.addr,
        "/runs/latest/events?unit=wait&attempt=1",
        &[("Authorization", &bearer)],
    );
    let (status, headers) = read_head(&mut events);
    assert_eq!(status, 200);
    assert!(
        headers
            .iter()
            .any(|(name, value)| name.eq_ignore_ascii_case("content-type")
                && value.starts_with("text/event-stream"))
    );
    assert_eq!(next_event(&mut events).0, "hello");

    // Let the unit finish: the stream says the run moved on, then that it ended.
    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .open(&go)
        .expect("open go.fifo");
    fifo.write_all(b"go\n").expect("write go.fifo");
    drop(fifo);
    let (first, _) = next_event(&mut events);
    assert_eq!(first, "changed");
    let mut names = vec![first];
    while names.last().map(String::as_str) != Some("ended") {
        names.push(next_event(&mut events).0);
    }
    assert!(
        names
            .iter()
            .all(|name| name == "changed" || name == "ended"),
        "{names:?}"
    );

    let finished = runner.join().expect("the run's thread");
    assert_eq!(
        finished.report.status,
        Some(apollo_core::event::RunStatus::Succeeded)
    );
    let unit = served.ok("/runs/latest/units/wait");
    assert!(
        unit.contains("after go") && !unit.contains("data-live="),
        "{unit}"
    );
    drop(release);
}

#[test]
fn the_runs_list_says_when_a_run_starts_and_ends() {
    let (dir, config) = project("name: quick\nunits:\n  - name: one\n    execute: echo one\n");
    run_pipeline(&config);
    let served = Served::start(&dir.path().join(".apollo"));
    let runs = served.ok("/");
    assert!(runs.contains("data-live=\"/events\""), "{runs}");
    let bearer = format!("Bearer {}", served.token);
    let mut events = send(served.addr, "/events", &[("Authorization", &bearer)]);
    let (status, _) = read_head(&mut events);
    assert_eq!(status, 200);
    assert_eq!(next_event(&mut events).0, "hello");
    // A new run (a folder in runs/, the lock taken and released, a journal written): the
    // stream says the list changed.
    run_pipeline(&config);
    assert_eq!(next_event(&mut events).0, "changed");
    let runs = served.ok("/");
    assert_eq!(runs.matches("class=\"r-succeeded\"").count(), 2, "{runs}");
}
