//! Declared input and output files that never end (a device, a socket) or take too long to
//! hash: refused or timed out as a unit failure, off the engine thread, while other units go
//! on; and a cancellation stops the hashing at once.

use super::*;

/// A sparse file of 1 TiB: hashing it takes minutes, reading it costs no disk.
fn huge_file(dir: &Path) -> PathBuf {
    let path = dir.join("huge.bin");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(1 << 40).unwrap();
    path
}

/// What [`run_guarded`] saw: the report, the journal's events, the attempts the executor ran.
type Ran = (RunReport, Vec<Event>, Vec<(String, u32)>);

/// Run `pipeline` with `behaviour` on a thread of its own, and fail (not hang) if the engine
/// has not returned within a generous safety net: an engine that blocks on a file must make
/// this test fail, not wedge the suite.
fn run_guarded(
    pipeline: Pipeline,
    keep_going: bool,
    behaviour: impl Fn(&str, u32, &CancelToken) -> (AttemptStatus, Option<ExitStatus>)
    + Send
    + Sync
    + 'static,
) -> Ran {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let engine = std::thread::spawn(move || {
        let mut journal = SharedJournal::default();
        let executor = FakeExecutor::new(&journal, behaviour);
        let mut options = EngineOptions::new("r", &pipeline);
        options.keep_going = keep_going;
        let report = run_with(
            &pipeline,
            &PriorState::empty(),
            &options,
            &mut journal,
            &executor,
            &CancelToken::new(),
        )
        .unwrap();
        let events = journal.events.lock().unwrap().clone();
        let _ = tx.send((report, events, executor.ran()));
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(ran) => ran,
        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(engine.join().unwrap_err())
        }
        Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
            panic!("the engine did not return within 120 s: it blocks on a file")
        }
    }
}

pub(super) fn kinds_of(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|event| {
            format!("{} {}", event.kind(), event.unit().unwrap_or(""))
                .trim()
                .to_owned()
        })
        .collect()
}

fn with_inputs(name: &str, inputs: &[&str]) -> Unit {
    Unit {
        inputs: inputs.iter().map(|input| (*input).to_owned()).collect(),
        ..unit(name, &[])
    }
}

pub(super) fn finished<'a>(events: &'a [Event], unit: &str) -> &'a crate::event::UnitFinished {
    events
        .iter()
        .find_map(|event| match event {
            Event::UnitFinished(finished) if finished.unit == unit => Some(finished),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no unit_finished for {unit}"))
}

#[test]
fn a_device_or_socket_as_input_or_output_fails_its_unit_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let mut pipeline = pipeline(
        vec![
            with_inputs("zero", &["/dev/zero"]),
            with_inputs("socket", &["sock"]),
            Unit {
                outputs: vec!["/dev/zero".into()],
                ..unit("writes_zero", &[])
            },
            unit("other", &[]),
        ],
        2,
    );
    pipeline.base_dir = dir.path().to_owned();
    let (report, events, ran) = run_guarded(pipeline, true, |_, _, _| ok());
    assert_eq!(report.status, Some(RunStatus::Failed));
    let error = |unit| finished(&events, unit).error.clone().unwrap_or_default();
    assert_eq!(finished(&events, "zero").status, AttemptStatus::Failed);
    assert_eq!(
        error("zero"),
        "input file `/dev/zero`: it is a character device, not a regular file"
    );
    assert!(
        error("socket").contains("sock`: it is a socket"),
        "{}",
        error("socket")
    );
    assert_eq!(
        finished(&events, "writes_zero").status,
        AttemptStatus::Failed
    );
    assert!(
        error("writes_zero").contains("output file `/dev/zero`: it is a character device"),
        "{}",
        error("writes_zero")
    );
    assert_eq!(finished(&events, "other").status, AttemptStatus::Succeeded);
    // Refused inputs never get a process.
    let mut ran: Vec<String> = ran.into_iter().map(|(unit, _)| unit).collect();
    ran.sort();
    assert_eq!(ran, vec!["other", "writes_zero"]);
}

#[test]
fn inputs_not_hashed_within_the_timeout_time_the_unit_out_while_others_commit() {
    let dir = tempfile::tempdir().unwrap();
    huge_file(dir.path());
    let mut pipeline = pipeline(
        vec![
            Unit {
                timeout: Some(Duration::from_secs(2)),
                ..with_inputs("huge", &["huge.bin"])
            },
            unit("other", &[]),
        ],
        2,
    );
    pipeline.base_dir = dir.path().to_owned();
    let (report, events, ran) = run_guarded(pipeline, false, |_, _, _| ok());
    assert_eq!(report.status, Some(RunStatus::Failed));
    let huge = finished(&events, "huge");
    assert_eq!(huge.status, AttemptStatus::TimedOut);
    assert!(huge.timed_out);
    assert!(
        huge.error
            .as_deref()
            .unwrap()
            .contains("huge.bin`: hashing it did not finish within the unit's timeout of 2s"),
        "{:?}",
        huge.error
    );
    // `other` was started, ran and committed while `huge` was being hashed: the hashing
    // blocked no one. (The unit hashed first in config order is `huge`.)
    assert_eq!(
        kinds_of(&events),
        vec![
            "unit_started other",
            "unit_finished other",
            "unit_started huge",
            "unit_finished huge",
            "run_finished"
        ]
    );
    assert_eq!(ran, vec![("other".into(), 1)]);
}

#[test]
fn a_cancellation_stops_hashing_at_once() {
    let dir = tempfile::tempdir().unwrap();
    huge_file(dir.path());
    let mut pipeline = pipeline(
        vec![with_inputs("huge", &["huge.bin"]), unit("canceller", &[])],
        2,
    );
    pipeline.base_dir = dir.path().to_owned();
    // No timeout: only the cancellation, raised while `huge` is being hashed, ends it.
    let (report, events, _) = run_guarded(pipeline, false, |_, _, cancel| {
        cancel.cancel(CancelLevel::Graceful);
        ok()
    });
    assert_eq!(report.status, Some(RunStatus::Interrupted));
    assert_eq!(report.units[0].1, UnitResult::NotRun);
    // A unit stopped while hashing was never started: no record of it.
    assert_eq!(
        kinds_of(&events),
        vec![
            "unit_started canceller",
            "unit_finished canceller",
            "run_finished"
        ]
    );
}

#[test]
fn an_input_file_hashed_off_the_engine_thread_is_recorded_in_unit_started() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small"), b"data").unwrap();
    let timeout = Some(Duration::from_secs(3600));
    let mut pipeline = pipeline(
        vec![
            Unit {
                timeout,
                ..with_inputs("with", &["small"])
            },
            Unit {
                timeout,
                ..unit("without", &[])
            },
        ],
        1,
    );
    pipeline.base_dir = dir.path().to_owned();
    let events = first_run(&pipeline, |_, _, _| ok());
    let started = |unit| {
        events
            .iter()
            .find_map(|event| match event {
                Event::UnitStarted(started) if started.unit == unit => Some(started),
                _ => None,
            })
            .unwrap()
    };
    // The hashed file is a component of the recorded input hash.
    assert!(
        started("with")
            .inputs
            .iter()
            .any(|component| component.name == "small"
                && component.hash == hash::sha256_hex(b"data"))
    );
    assert_eq!(finished(&events, "with").status, AttemptStatus::Succeeded);
    assert_eq!(
        finished(&events, "without").status,
        AttemptStatus::Succeeded
    );
}

/// Records the timeout each attempt was given.
#[derive(Default)]
struct SeesTimeouts(std::sync::Mutex<Vec<(String, Option<Duration>)>>);

impl Executor for SeesTimeouts {
    fn run_attempt(&self, request: &AttemptRequest<'_>, _: &AttemptContext<'_>) -> AttemptOutcome {
        let seen = (request.unit.name.clone(), request.unit.timeout);
        self.0.lock().unwrap().push(seen);
        AttemptOutcome::nothing_ran(AttemptStatus::Succeeded)
    }
}

#[test]
fn the_time_spent_hashing_inputs_is_taken_off_the_attempt_s_timeout() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small"), b"data").unwrap();
    let hour = Some(Duration::from_secs(3600));
    let mut pipeline = pipeline(
        vec![
            Unit {
                timeout: hour,
                ..with_inputs("with", &["small"])
            },
            Unit {
                timeout: hour,
                ..unit("without", &["with"])
            },
        ],
        1,
    );
    pipeline.base_dir = dir.path().to_owned();
    let executor = SeesTimeouts::default();
    let report = run(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut crate::journal::MemoryJournal::default(),
        &executor,
        &TempLogs,
        &CancelToken::new(),
        &mut NoObserver,
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    let seen = executor.0.into_inner().unwrap();
    assert_eq!(seen[0].0, "with");
    assert!(
        seen[0].1 < hour && seen[0].1 > Some(Duration::from_secs(3000)),
        "{seen:?}"
    );
    assert_eq!(seen[1], ("without".to_owned(), hour));
}
