//! The state directory is apollo's and checked: symbolic links, FIFOs and devices where apollo
//! keeps its files, files deleted or replaced while a run is active, a deleted last segment.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use apollo_core::event::RunStatus;
use apollo_store::{
    ErrorKind, JournalReader, JournalWriter, ReadOptions, RunId, RunState, StateDir, StoreError,
    verify,
};

use crate::support::*;

/// Runs `work` on its own thread and waits for it at most a (generous) deadline, so a
/// regression that blocks on a FIFO fails the test instead of hanging the suite.
fn within_deadline<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(work());
    });
    done_rx
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("{what} blocked (no answer within 120 s)"))
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

/// A run of pipeline `p` with three segments (small segments), finished when `finish`.
fn three_segment_run(state: &StateDir, finish: bool) -> RunId {
    let id = state.new_run_id();
    let run = state.create_run(&id).unwrap();
    let options = fast().segment_max_bytes(400);
    let mut writer = JournalWriter::create(run.path(), id.as_str(), options).unwrap();
    writer
        .append_batch(&[run_started(id.as_str(), "p")])
        .unwrap();
    let mut n = 0;
    while !writer.segment_path().ends_with("000003.log") {
        writer.append_batch(&[event(n)]).unwrap();
        n += 1;
    }
    if finish {
        writer
            .append_batch(&[run_finished(RunStatus::Succeeded)])
            .unwrap();
    }
    assert!(
        segment(run.path(), 3).is_file() && !segment(run.path(), 4).exists(),
        "the test needs exactly three segments"
    );
    id
}

fn assert_corruption_naming(error: &StoreError, file: &Path) {
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    assert!(
        error.to_string().contains(&file.display().to_string()),
        "{error} should name {}",
        file.display()
    );
}

#[test]
fn a_lock_file_that_is_a_symlink_is_refused_and_its_target_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(".apollo");
    StateDir::open_or_create(&root).unwrap();
    let precious = dir.path().join("precious");
    fs::write(&precious, "keep me\n").unwrap();
    fs::remove_file(root.join("lock")).unwrap();
    symlink(&precious, root.join("lock")).unwrap();

    let error = StateDir::open_or_create(&root).unwrap_err();
    assert!(
        matches!(error, StoreError::UnexpectedFileType { .. }),
        "{error}"
    );
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.to_string().contains("symbolic link"), "{error}");
    // Commands that open the state directory without creating it refuse too.
    let state = StateDir::open_existing(&root).unwrap();
    assert!(state.lock(false).is_err());
    assert!(state.lock_holder().is_err());
    assert_eq!(fs::read_to_string(&precious).unwrap(), "keep me\n");

    // A dangling link: its target is never created.
    let absent = dir.path().join("absent");
    fs::remove_file(root.join("lock")).unwrap();
    symlink(&absent, root.join("lock")).unwrap();
    assert!(StateDir::open_or_create(&root).is_err());
    assert!(state.lock(false).is_err());
    assert!(
        !absent.exists(),
        "a lock must never be created through a link"
    );
}

#[test]
fn a_lock_file_that_is_a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(".apollo");
    let state = StateDir::open_or_create(&root).unwrap();
    fs::remove_file(root.join("lock")).unwrap();
    mkfifo(&root.join("lock"));
    let error = within_deadline("locking a FIFO", move || state.lock(false).map(|_| ()));
    let error = error.unwrap_err();
    assert!(error.to_string().contains("FIFO"), "{error}");
}

#[test]
fn state_dir_folders_that_are_symlinks_are_refused_and_nothing_is_written_through_them() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let empty = |path: &Path| fs::read_dir(path).unwrap().next().is_none();

    // runs/ is a link: no run is created through it.
    let root = dir.path().join("a");
    let state = StateDir::open_or_create(&root).unwrap();
    fs::remove_dir(root.join("runs")).unwrap();
    symlink(&outside, root.join("runs")).unwrap();
    assert!(StateDir::open_or_create(&root).is_err());
    let error = state.create_run(&state.new_run_id()).unwrap_err();
    assert!(error.to_string().contains("symbolic link"), "{error}");
    assert!(empty(&outside));

    // blobs/sha256 is a link: no blob is stored through it.
    let root = dir.path().join("b");
    let state = StateDir::open_or_create(&root).unwrap();
    fs::remove_dir(root.join("blobs/sha256")).unwrap();
    symlink(&outside, root.join("blobs/sha256")).unwrap();
    assert!(state.put_blob(b"definition").is_err());
    assert!(empty(&outside));

    // A run's journal folder is a link: no segment is created through it.
    let root = dir.path().join("c");
    let state = StateDir::open_or_create(&root).unwrap();
    let id = state.new_run_id();
    let run = state.create_run(&id).unwrap();
    fs::remove_dir(run.journal_dir()).unwrap();
    symlink(&outside, run.journal_dir()).unwrap();
    let error = JournalWriter::create(run.path(), id.as_str(), fast()).unwrap_err();
    assert!(
        matches!(error, StoreError::UnexpectedFileType { .. }),
        "{error}"
    );
    assert!(empty(&outside));

    // A unit's log folder is a link: the attempt's log folder is refused.
    let units = run.path().join("units");
    symlink(&outside, units.join("fetch")).unwrap();
    assert!(run.attempt_dir("fetch", 1).is_err());
    fs::create_dir_all(units.join("load/1")).unwrap();
    symlink(outside.join("x"), units.join("load/1/stdout")).unwrap();
    assert!(run.attempt_dir("load", 1).is_err());
    assert!(run.attempt_dir("load", 2).is_ok());
    assert!(empty(&outside));
}

#[test]
fn a_segment_that_is_a_symlink_is_never_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
    let id = three_segment_run(&state, false);
    let run = state.run_dir(&id).unwrap();
    let last = segment(run.path(), 3);
    let outside = dir.path().join("elsewhere.log");
    fs::rename(&last, &outside).unwrap();
    symlink(&outside, &last).unwrap();
    let before = fs::read(&outside).unwrap();

    let error = JournalWriter::open_for_append(run.path(), fast()).unwrap_err();
    assert_corruption_naming(&error, &last);
    assert_eq!(fs::read(&outside).unwrap(), before);
}

/// Every reading command refuses a segment that is not a regular file, promptly, with a
/// corruption naming it: `runs` (list_runs), `run` (latest run, recovery), `replay` (the
/// reader) and `verify`.
fn assert_refused_promptly(state: StateDir, id: RunId, bad: std::path::PathBuf) {
    let run_dir = state.run_dir(&id).unwrap().path().to_path_buf();
    let summaries = {
        let state = state.clone();
        within_deadline("listing runs", move || state.list_runs().unwrap())
    };
    let summary = summaries.iter().find(|summary| summary.id == id).unwrap();
    assert_eq!(summary.state, RunState::Corrupt, "{summary:?}");
    let problem = summary.problem.clone().unwrap_or_default();
    assert!(problem.contains(&bad.display().to_string()), "{problem}");

    let (records, _) = {
        let run_dir = run_dir.clone();
        within_deadline("reading the journal", move || {
            read_all(&run_dir, ReadOptions::default())
        })
    };
    assert_corruption_naming(&records.unwrap_err(), &bad);

    let report = {
        let run_dir = run_dir.clone();
        within_deadline("verify", move || verify(&run_dir))
    };
    match report {
        Ok(report) => {
            assert!(!report.is_clean(), "{report:?}");
            assert!(
                report
                    .corruptions
                    .iter()
                    .any(|corruption| corruption.to_string().contains("not a regular file")),
                "{report:?}"
            );
        }
        Err(error) => assert_corruption_naming(&error, &bad),
    }

    let recovery = {
        let run_dir = run_dir.clone();
        within_deadline("recovery", move || {
            JournalWriter::open_for_append(&run_dir, fast()).map(|_| ())
        })
    };
    assert_corruption_naming(&recovery.unwrap_err(), &bad);
}

#[test]
fn a_segment_that_is_a_fifo_is_corruption_not_a_hang() {
    for number in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
        let id = three_segment_run(&state, true);
        let bad = segment(state.run_dir(&id).unwrap().path(), number);
        fs::remove_file(&bad).unwrap();
        mkfifo(&bad);
        assert_refused_promptly(state, id, bad);
    }
}

#[test]
fn a_segment_that_links_to_dev_zero_is_corruption_not_an_endless_read() {
    for number in [1, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
        let id = three_segment_run(&state, true);
        let bad = segment(state.run_dir(&id).unwrap().path(), number);
        fs::remove_file(&bad).unwrap();
        symlink("/dev/zero", &bad).unwrap();
        assert_refused_promptly(state, id, bad);
    }
}

#[test]
fn a_deleted_last_segment_is_reported_missing_not_a_shorter_journal() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
    let id = three_segment_run(&state, true);
    let run = state.run_dir(&id).unwrap();
    assert!(verify(run.path()).unwrap().is_clean());
    fs::remove_file(segment(run.path(), 3)).unwrap();

    let report = verify(run.path()).unwrap();
    assert!(!report.is_clean(), "{report:?}");
    let text = report.corruptions[0].to_string();
    assert!(text.contains("000003.log is missing"), "{text}");
    assert!(text.contains("cannot be resumed"), "{text}");
    let (records, _) = read_all(run.path(), ReadOptions::default());
    assert_eq!(records.unwrap_err().kind(), ErrorKind::Corruption);
    let error = JournalWriter::open_for_append(run.path(), fast()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    let summary = state.run_summary(&id).unwrap();
    assert_eq!(summary.state, RunState::Corrupt, "{summary:?}");

    // Both last segments gone: still missing, never "the run simply ends in segment 1".
    fs::remove_file(segment(run.path(), 2)).unwrap();
    assert!(!verify(run.path()).unwrap().is_clean());
}

#[test]
fn a_journal_whose_last_segment_was_never_recorded_as_started_is_clean() {
    // A crash after segment 3's header was durable but before the journal recorded it: the
    // record still says 2, and the journal with three segments is clean and resumable.
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
    let id = three_segment_run(&state, false);
    let run = state.run_dir(&id).unwrap();
    fs::write(run.journal_dir().join("last_segment"), "2\n").unwrap();
    assert!(verify(run.path()).unwrap().is_clean());
    let (mut writer, _) = JournalWriter::open_for_append(run.path(), fast()).unwrap();
    writer.append_batch(&[event(99)]).unwrap();
}

/// A writer whose lock is watched, with one record written.
fn watched_writer(state: &StateDir) -> (apollo_store::StateLock, JournalWriter, RunId) {
    let lock = state.lock(false).unwrap();
    let id = state.new_run_id();
    let run = state.create_run(&id).unwrap();
    let mut writer = JournalWriter::create(run.path(), id.as_str(), fast()).unwrap();
    writer.watch_lock(&lock).unwrap();
    writer
        .append_batch(&[run_started(id.as_str(), "p")])
        .unwrap();
    (lock, writer, id)
}

fn assert_state_changed(result: Result<u64, StoreError>, path: &Path) {
    let error = result.unwrap_err();
    assert!(matches!(error, StoreError::StateChanged { .. }), "{error}");
    assert_eq!(error.kind(), ErrorKind::Io, "exit 6 class");
    assert!(
        error.to_string().contains(&path.display().to_string()),
        "{error}"
    );
}

#[test]
fn a_deleted_lock_file_stops_the_writer_before_its_next_commit() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
    let (_lock, mut writer, id) = watched_writer(&state);
    fs::remove_file(state.lock_path()).unwrap();
    // A second apollo now gets a lock of its own on a new lock file...
    let second = StateDir::open_or_create(state.path()).unwrap();
    let _taken_over = second.lock(false).unwrap();
    // ...so the first must stop before it writes anything more.
    let before = fs::read(segment(&state.runs_dir().join(id.as_str()), 1)).unwrap();
    assert_state_changed(writer.append_batch(&[event(1)]), &state.lock_path());
    assert_eq!(
        writer.append_batch(&[event(2)]).unwrap_err().kind(),
        ErrorKind::Io
    );
    assert_eq!(
        fs::read(segment(&state.runs_dir().join(id.as_str()), 1)).unwrap(),
        before,
        "nothing written after the lock file went away"
    );
}

#[test]
fn a_replaced_lock_file_stops_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
    let (lock, mut writer, _) = watched_writer(&state);
    let other = dir.path().join("other");
    fs::write(&other, "").unwrap();
    fs::rename(&other, state.lock_path()).unwrap();
    assert!(lock.check_held().is_err());
    assert_state_changed(writer.append_batch(&[event(1)]), &state.lock_path());
}

#[test]
fn a_deleted_run_folder_stops_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
    let (_lock, mut writer, id) = watched_writer(&state);
    let run_path = state.runs_dir().join(id.as_str());
    fs::remove_dir_all(&run_path).unwrap();
    assert_state_changed(writer.append_batch(&[event(1)]), &run_path.join("journal"));
}

#[test]
fn a_deleted_state_directory_stops_the_writer() {
    // `git clean -xdf` on an ignored `.apollo` while a run is active.
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
    let (_lock, mut writer, _) = watched_writer(&state);
    fs::remove_dir_all(state.path()).unwrap();
    let error = writer.append_batch(&[event(1)]).unwrap_err();
    assert!(matches!(error, StoreError::StateChanged { .. }), "{error}");
    assert_eq!(error.kind(), ErrorKind::Io);
}

#[test]
fn a_moved_run_folder_stops_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
    let (_lock, mut writer, id) = watched_writer(&state);
    let run_path = state.runs_dir().join(id.as_str());
    fs::rename(&run_path, dir.path().join("moved")).unwrap();
    fs::create_dir_all(run_path.join("journal")).unwrap();
    assert_state_changed(writer.append_batch(&[event(1)]), &run_path.join("journal"));
}

#[test]
fn an_untouched_state_directory_keeps_the_watched_writer_going() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
    let (lock, mut writer, id) = watched_writer(&state);
    for n in 0..20 {
        writer.append_batch(&[event(n)]).unwrap();
    }
    lock.check_held().unwrap();
    drop(writer);
    let (records, _) = read_all(&state.runs_dir().join(id.as_str()), ReadOptions::default());
    assert_eq!(records.unwrap().len(), 21);
    assert!(
        JournalReader::open(&state.runs_dir().join(id.as_str()), ReadOptions::default()).is_ok()
    );
}

#[test]
fn captured_output_that_is_a_fifo_or_a_link_is_refused_not_read_forever() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("units/a/1");
    fs::create_dir_all(&logs).unwrap();
    fs::write(logs.join("stdout"), "hello\n").unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut apollo_store::open_regular_file(&logs.join("stdout"))
            .unwrap()
            .unwrap(),
        &mut text,
    )
    .unwrap();
    assert_eq!(text, "hello\n");
    assert!(
        apollo_store::open_regular_file(&logs.join("missing"))
            .unwrap()
            .is_none()
    );
    mkfifo(&logs.join("stderr"));
    symlink("/dev/zero", logs.join("zero")).unwrap();
    for name in ["stderr", "zero"] {
        let path = logs.join(name);
        let error = within_deadline("opening captured output", move || {
            apollo_store::open_regular_file(&path).map(|_| ())
        })
        .unwrap_err();
        assert!(
            matches!(error, StoreError::UnexpectedFileType { .. }),
            "{error}"
        );
    }
}

/// A finished run of pipeline `p` whose definition snapshot is the blob `definition_hash`.
fn finished_run_with_definition(state: &StateDir, definition_hash: &str) -> RunId {
    let id = state.new_run_id();
    let run = state.create_run(&id).unwrap();
    let mut started = run_started(id.as_str(), "p");
    if let apollo_core::Event::RunStarted(started) = &mut started {
        started.definition_hash = definition_hash.to_owned();
    }
    let mut writer = JournalWriter::create(run.path(), id.as_str(), fast()).unwrap();
    writer.append_batch(&[started]).unwrap();
    writer
        .append_batch(&[run_finished(RunStatus::Succeeded)])
        .unwrap();
    id
}

fn assert_refused_link(error: &StoreError, link: &Path) {
    assert!(
        matches!(error, StoreError::UnexpectedFileType { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("symbolic link"), "{message}");
    assert!(
        message.contains(&link.display().to_string()),
        "{message} should name {}",
        link.display()
    );
}

#[test]
fn a_blob_store_linked_to_another_project_s_is_refused_and_its_blobs_stay() {
    let dir = tempfile::tempdir().unwrap();
    let other = StateDir::open_or_create(dir.path().join("other/.apollo")).unwrap();
    let theirs = other.put_blob(b"the other project's capture").unwrap();
    let their_blob = other
        .path()
        .join("blobs/sha256")
        .join(&theirs[..2])
        .join(&theirs[2..]);
    let root = dir.path().join("proj/.apollo");
    // Opened before the link is planted: the blob store's own opens must refuse it too.
    let state = StateDir::open_or_create(&root).unwrap();
    fs::remove_dir_all(root.join("blobs")).unwrap();
    symlink("../../other/.apollo/blobs", root.join("blobs")).unwrap();
    assert!(their_blob.is_file(), "the test reaches the other store");

    assert_refused_link(
        &StateDir::open_existing(&root).unwrap_err(),
        &root.join("blobs"),
    );
    let now = chrono::Utc::now();
    let error = apollo_store::prune(&state, apollo_store::PruneOptions::default(), now);
    assert_refused_link(&error.unwrap_err(), &root.join("blobs"));
    let lock = state.lock(false).unwrap();
    let error = apollo_store::evict_blobs(&state, 0, &state.new_run_id(), &lock);
    assert_refused_link(&error.unwrap_err(), &root.join("blobs"));
    assert!(their_blob.is_file(), "the other project's blob was removed");
}

#[test]
fn a_runs_folder_linked_to_another_project_s_is_refused_and_its_runs_stay() {
    let dir = tempfile::tempdir().unwrap();
    let other = StateDir::open_or_create(dir.path().join("proj2/.apollo")).unwrap();
    let older = three_segment_run(&other, true);
    let newer = three_segment_run(&other, true);
    let leftover = other.runs_dir().join(".deleting-theirs");
    fs::create_dir(&leftover).unwrap();
    let root = dir.path().join("proj/.apollo");
    let state = StateDir::open_or_create(&root).unwrap();
    fs::remove_dir(root.join("runs")).unwrap();
    symlink("../../proj2/.apollo/runs", root.join("runs")).unwrap();

    assert_refused_link(
        &StateDir::open_existing(&root).unwrap_err(),
        &root.join("runs"),
    );
    let now = chrono::Utc::now();
    let error = apollo_store::prune(
        &state,
        apollo_store::PruneOptions::default().keep_runs(1),
        now,
    );
    assert_refused_link(&error.unwrap_err(), &root.join("runs"));
    for kept in [older, newer] {
        assert!(
            other.runs_dir().join(kept.as_str()).is_dir(),
            "{kept} was pruned"
        );
    }
    assert!(
        leftover.is_dir(),
        "the other project's leftover was removed"
    );
}

/// Plants that make a run's `journal/` unreadable, even for root: a symbolic link to itself
/// (ELOOP) and a FIFO where the folder belongs (ENOTDIR).
fn make_journal_unreadable(journal: &Path, plant: &str) {
    fs::rename(journal, journal.with_file_name("journal.real")).unwrap();
    match plant {
        "loop" => symlink("journal", journal).unwrap(),
        _ => mkfifo(journal),
    }
}

#[test]
fn a_run_whose_journal_cannot_be_read_stops_prune_and_eviction_and_keeps_its_blobs() {
    for plant in ["loop", "fifo"] {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_or_create(dir.path()).unwrap();
        let first_definition = state.put_blob(b"run A's definition").unwrap();
        let second_definition = state.put_blob(b"run B's definition").unwrap();
        let hidden = finished_run_with_definition(&state, &first_definition);
        let newest = finished_run_with_definition(&state, &second_definition);
        let blob = |hash: &str| {
            state
                .path()
                .join("blobs/sha256")
                .join(&hash[..2])
                .join(&hash[2..])
        };
        make_journal_unreadable(
            &state.runs_dir().join(hidden.as_str()).join("journal"),
            plant,
        );

        // Listings still list it, as corrupt with the reason (they do not fail).
        let runs = state.list_runs().unwrap();
        let listed = runs.iter().find(|run| run.id == hidden);
        assert!(
            listed.is_some_and(|run| run.state == RunState::Corrupt),
            "{plant}: {runs:?}"
        );

        let now = chrono::Utc::now();
        let error =
            apollo_store::prune(&state, apollo_store::PruneOptions::default(), now).unwrap_err();
        assert!(
            error.to_string().contains(hidden.as_str()),
            "{plant}: {error}"
        );
        let lock = state.lock(false).unwrap();
        let error = apollo_store::evict_blobs(&state, 0, &newest, &lock).unwrap_err();
        assert!(
            error.to_string().contains(hidden.as_str()),
            "{plant}: {error}"
        );
        drop(lock);
        for hash in [&first_definition, &second_definition] {
            assert!(blob(hash).is_file(), "{plant}: blob {hash} was removed");
        }
    }
}
