use super::*;
use chrono::TimeZone;

/// `first_frame_is_whole` answers from the frame's length alone when the frame is whole
/// (the listing's fallback scan would hide a wrong `false`).
#[test]
fn a_whole_first_frame_is_told_from_its_length_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let payload = vec![b'x'; 10_000];
    let mut bytes = b"APOLLO-JOURNAL header\n".to_vec();
    crate::frame::encode_frame(&payload, &mut bytes);
    let mut buffer = vec![0u8; 4096];
    let whole = |bytes: &[u8], buffer: &mut [u8]| {
        std::fs::write(&path, bytes).unwrap();
        crate::segment::first_frame_is_whole(&std::fs::File::open(&path).unwrap(), buffer)
    };
    assert!(whole(&bytes, &mut buffer));
    // One byte short of its newline, or its newline another byte: not whole.
    assert!(!whole(&bytes[..bytes.len() - 1], &mut buffer));
    let mut last = bytes.clone();
    *last.last_mut().unwrap() = b'x';
    assert!(!whole(&last, &mut buffer));
    // A length field that is not a number, or a header with no end: not whole.
    let mut garbled = bytes.clone();
    let at = bytes.iter().position(|&byte| byte == b'\n').unwrap() + 10;
    garbled[at] = b'z';
    assert!(!whole(&garbled, &mut buffer));
    assert!(!whole(&[b'h'; 5000], &mut buffer));
}

#[test]
fn the_layout_is_created_and_the_lock_file_kept() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join(".apollo")).unwrap();
    assert!(state.runs_dir().is_dir());
    assert!(state.path().join("blobs/sha256").is_dir());
    assert!(state.lock_path().is_file());
    drop(state.lock(false).unwrap());
    assert!(state.lock_path().is_file());
}

#[test]
fn a_run_whose_creation_was_cut_short_is_not_listed() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    // Killed after the run folder was created, before its first segment.
    let id = state.new_run_id();
    state.create_run(&id).unwrap();
    assert!(state.run_ids().unwrap().is_empty());
    // Killed while the folder was still being built under its temporary name.
    let staging = state
        .runs_dir()
        .join(format!(".new-{}", state.new_run_id()));
    std::fs::create_dir_all(staging.join("journal")).unwrap();
    assert!(state.run_ids().unwrap().is_empty());
    assert!(state.list_runs().unwrap().is_empty());
    // Failed (or killed) before `run_started` was acknowledged: a header, no record.
    let run = state.create_run(&state.new_run_id()).unwrap();
    let options = crate::WriterOptions {
        durability: crate::Durability::None,
        ..crate::WriterOptions::default()
    };
    let mut writer = crate::JournalWriter::create(run.path(), run.id().as_str(), options).unwrap();
    assert!(state.run_ids().unwrap().is_empty());
    let event = apollo_core::Event::UnitMarked(apollo_core::event::UnitMarked {
        unit: "a".into(),
        attempt: 1,
        verdict: apollo_core::event::Verdict::Failed,
        by: "test".into(),
        note: None,
    });
    writer.append_batch(&[event]).unwrap();
    assert_eq!(state.run_ids().unwrap(), vec![run.id().clone()]);
}

#[test]
fn run_ids_made_in_the_same_second_are_unique_and_ordered() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 2, 15, 7).unwrap();
    let mut ids = Vec::new();
    for _ in 0..50 {
        let id = state.new_run_id_at(now);
        state.create_run(&id).unwrap();
        ids.push(id);
    }
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, ids, "ids must be unique and increasing");
    assert!(ids.iter().all(|id| id.started_at() == now));
    assert!(state.create_run(&ids[0]).is_err());
}

/// A run with one `run_started` of `pipeline` (identity `identity`), durable enough for
/// listing.
fn started_run(state: &StateDir, id: &RunId, pipeline: &str, finished: bool) {
    let run = state.create_run(id).unwrap();
    let options = crate::WriterOptions {
        durability: crate::Durability::None,
        ..crate::WriterOptions::default()
    };
    let mut writer = crate::JournalWriter::create(run.path(), id.as_str(), options).unwrap();
    let mut events = vec![apollo_core::Event::RunStarted(
        apollo_core::event::RunStarted {
            run_id: id.to_string(),
            pipeline: pipeline.to_owned(),
            config_path: "/p/pipeline.yaml".to_owned(),
            config_hash: "0".repeat(64),
            definition_hash: "0".repeat(64),
            apollo_version: "0".to_owned(),
            host: "h".to_owned(),
            pid: 1,
            units: Vec::new(),
            identity: Some(format!("{pipeline}@../pipeline.yaml")),
            params: Default::default(),
            run_kind: apollo_core::event::RunKind::Run,
            deadlines: None,
            durability: apollo_core::Durability::Fsync,
        },
    )];
    if finished {
        events.push(apollo_core::Event::RunFinished(
            apollo_core::event::RunFinished {
                status: apollo_core::event::RunStatus::Succeeded,
                succeeded: 0,
                failed: 0,
                skipped: 0,
                reused: 0,
            },
        ));
    }
    writer.append_batch(&events).unwrap();
}

#[test]
fn runs_are_ordered_by_creation_even_when_the_clock_steps_back() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let noon = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    // The clock steps back an hour between the first and the second run, then a day.
    let first = state.new_run_id_at(noon);
    started_run(&state, &first, "etl", true);
    let second = state.new_run_id_at(noon - chrono::Duration::hours(1));
    started_run(&state, &second, "etl", false);
    let third = state.new_run_id_at(noon - chrono::Duration::days(1));
    started_run(&state, &third, "deploy", true);
    assert!(third < second && second < first, "ids follow the clock");
    assert_eq!(
        state.run_ids().unwrap(),
        [first.clone(), second.clone(), third.clone()]
    );
    assert_eq!(state.run_sequence(&first).unwrap(), Some(1));
    assert_eq!(state.run_sequence(&third).unwrap(), Some(3));
    let listed: Vec<RunId> = state
        .list_runs()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, [first.clone(), second.clone(), third]);
    assert_eq!(state.latest_run("etl").unwrap(), Some(second.clone()));
    // Pruning keeps the latest of a pipeline by that order: `second`, not `first`.
    let report = crate::prune(
        &state,
        crate::PruneOptions {
            keep_days: None,
            keep_runs: Some(1),
        },
        noon,
    )
    .unwrap();
    assert_eq!(report.deleted, [first]);
    assert!(state.run_dir(&second).is_ok());
}

#[test]
fn runs_without_a_sequence_come_first_and_a_damaged_one_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let noon = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let new = state.new_run_id_at(noon - chrono::Duration::hours(2));
    started_run(&state, &new, "etl", false);
    // Two runs made by an older apollo: no sequence file.
    let mut legacy = Vec::new();
    for hours in [1, 3] {
        let id = state.new_run_id_at(noon - chrono::Duration::hours(hours));
        started_run(&state, &id, "etl", true);
        fs::remove_file(state.runs_dir().join(id.as_str()).join(SEQUENCE_FILE)).unwrap();
        assert_eq!(state.run_sequence(&id).unwrap(), None);
        legacy.push(id);
    }
    assert_eq!(
        state.run_ids().unwrap(),
        [legacy[1].clone(), legacy[0].clone(), new.clone()]
    );
    // The next run still gets a number above every run's.
    let next = state.new_run_id_at(noon - chrono::Duration::hours(5));
    started_run(&state, &next, "etl", false);
    assert_eq!(state.run_sequence(&next).unwrap(), Some(2));
    assert_eq!(state.run_ids().unwrap().last(), Some(&next));
    // A sequence file that does not hold a number is damage, never guessed around.
    for bad in ["", "x\n", "0\n", "12"] {
        fs::write(state.runs_dir().join(new.as_str()).join(SEQUENCE_FILE), bad).unwrap();
        assert!(
            matches!(state.run_ids(), Err(StoreError::Corruption { .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn blobs_are_content_addressed_idempotent_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let hash = state.put_blob(b"definition").unwrap();
    assert_eq!(state.put_blob(b"definition").unwrap(), hash);
    assert_eq!(state.read_blob(&hash).unwrap(), b"definition");
    let path = state.blob_file(&hash).unwrap().unwrap();
    assert!(path.ends_with(format!("{}/{}", &hash[..2], &hash[2..])));
    fs::write(&path, b"tampered").unwrap();
    assert!(matches!(
        state.read_blob(&hash),
        Err(StoreError::Corruption { .. })
    ));
    assert!(matches!(
        state.read_blob(&"0".repeat(64)),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        state.read_blob("../etc"),
        Err(StoreError::InvalidInput { .. })
    ));
    // A sparse file of a terabyte planted under a blob's name is refused before it is
    // read, not read until memory runs out.
    fs::remove_file(&path).unwrap();
    fs::File::create(&path).unwrap().set_len(1 << 40).unwrap();
    let error = state.read_blob(&hash).unwrap_err();
    assert!(error.to_string().contains("more than the"), "{error}");
}

/// The names of the files under `dir`, recursively (sorted).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// A new state directory, and its lock.
fn locked_state_dir() -> (tempfile::TempDir, StateDir, StateLock) {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let lock = state.lock(false).unwrap();
    (dir, state, lock)
}

#[test]
fn a_streamed_blob_is_the_blob_of_its_bytes_whatever_hash_the_caller_knew() {
    let (_dir, state, lock) = locked_state_dir();
    let content = b"{\n  \"units\": []\n}".repeat(50_000);
    let writes = |out: &mut dyn Write| {
        // Small pieces, as a serialiser writes them.
        content.chunks(7).try_for_each(|piece| out.write_all(piece))
    };
    let hash = state.put_blob_streamed(&lock, None, writes).unwrap();
    assert_eq!(hash, apollo_core::hash::sha256_hex(&content));
    assert_eq!(state.read_blob(&hash).unwrap(), content);
    // Stored already: found, not written again; the same name as `put_blob` gives.
    assert_eq!(
        state.put_blob_streamed(&lock, Some(&hash), writes).unwrap(),
        hash
    );
    assert_eq!(state.put_blob(&content).unwrap(), hash);

    // A hash the caller knew wrongly names nothing: the content is stored under its own.
    let other = b"other content".repeat(1000);
    let stored = state
        .put_blob_streamed(&lock, Some(&"0".repeat(64)), |out| out.write_all(&other))
        .unwrap();
    assert_eq!(stored, apollo_core::hash::sha256_hex(&other));
    assert_eq!(state.read_blob(&stored).unwrap(), other);
    assert!(!state.has_blob(&"0".repeat(64)));
    // Nor does something that is no hash at all.
    let third = b"third".repeat(10);
    let stored = state
        .put_blob_streamed(&lock, Some("../not-a-hash"), |out| out.write_all(&third))
        .unwrap();
    assert_eq!(stored, apollo_core::hash::sha256_hex(&third));
}

/// A hash the caller knew wrongly costs nothing more: the content is written once, hashed
/// on the way, and stored under its own hash; nothing else is left in the store.
#[test]
fn a_streamed_blob_under_a_wrong_known_hash_is_written_once_under_its_own() {
    let (dir, state, lock) = locked_state_dir();
    let blobs = dir.path().join("blobs");
    let before = if blobs.exists() {
        files_under(&blobs)
    } else {
        Vec::new()
    };
    let pass = std::cell::Cell::new(0_u8);
    let result = state.put_blob_streamed(&lock, Some(&"0".repeat(64)), |out| {
        pass.set(pass.get() + 1);
        write!(out, "pass {}", pass.get())
    });
    assert_eq!(pass.get(), 1, "written once");
    assert_eq!(
        result.unwrap(),
        apollo_core::hash::sha256_hex(b"pass 1"),
        "stored under the hash of what was written"
    );
    assert!(!state.has_blob(&"0".repeat(64)));
    // That blob, and no temporary file, left behind.
    let mut after = files_under(&blobs);
    after.retain(|path| !before.contains(path));
    assert_eq!(after.len(), 1, "{after:?}");
}

/// Content whose hash nobody knows (a new definition snapshot) is produced once: hashed as
/// it is written to a temporary file, which then becomes the blob, or goes when the store
/// has that blob already. A failed pass leaves nothing behind.
#[test]
fn a_streamed_blob_of_unknown_hash_is_written_in_one_pass() {
    let (dir, state, lock) = locked_state_dir();
    let blobs = dir.path().join("blobs");
    let content = b"{ \"units\": [] }".repeat(20_000);
    let passes = std::cell::Cell::new(0_u32);
    let writes = |out: &mut dyn Write| {
        passes.set(passes.get() + 1);
        content.chunks(7).try_for_each(|piece| out.write_all(piece))
    };
    let hash = state.put_blob_streamed(&lock, None, writes).unwrap();
    assert_eq!(passes.get(), 1);
    assert_eq!(hash, apollo_core::hash::sha256_hex(&content));
    assert_eq!(state.read_blob(&hash).unwrap(), content);
    let stored = files_under(&blobs);
    // Stored already: the second pass's file is dropped, the blob stays as it was.
    assert_eq!(state.put_blob_streamed(&lock, None, writes).unwrap(), hash);
    assert_eq!(passes.get(), 2);
    assert_eq!(files_under(&blobs), stored);
    // A pass that fails stores nothing and leaves no temporary file.
    let failed = state.put_blob_streamed(&lock, None, |out| {
        out.write_all(b"half a snapshot")?;
        Err(io::Error::other("the serialiser gave up"))
    });
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(files_under(&blobs), stored);
    // Nor does one that panics.
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        state.put_blob_streamed(&lock, None, |out| {
            out.write_all(&[b'x'; 300_000])?;
            panic!("a serialiser bug")
        })
    }));
    assert!(panicked.is_err());
    assert_eq!(files_under(&blobs), stored);
}

#[test]
fn attempt_log_dirs_refuse_path_tricks() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let id = state.new_run_id();
    state.create_run(&id).unwrap();
    let logs = state.attempt_dir(&id, "fetch_data", 2).unwrap().into_path();
    assert!(logs.ends_with("units/fetch_data/2"));
    assert!(!logs.exists(), "created only when there is output");
    for bad in ["", "..", "a/b", "x y"] {
        assert!(state.attempt_dir(&id, bad, 1).is_err(), "{bad}");
    }
}

#[test]
fn a_hook_summary_replaces_a_planted_link_and_refuses_a_linked_folder() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join("state")).unwrap();
    let id = state.new_run_id();
    let run = state.create_run(&id).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let hooks = run.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    std::os::unix::fs::symlink(&victim, hooks.join("summary.json")).unwrap();
    let path = run.write_hook_summary(b"{}").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"{}");
    assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    // `hooks/` itself a link: refused, nothing written behind it.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::remove_dir_all(&hooks).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &hooks).unwrap();
    let error = run.write_hook_summary(b"{}").unwrap_err();
    assert!(
        matches!(error, StoreError::UnexpectedFileType { .. }),
        "{error}"
    );
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
    // …and so are the hooks' log folders below it.
    assert!(matches!(
        run.hook_log_dir("on_finish"),
        Err(StoreError::UnexpectedFileType { .. })
    ));
    std::fs::remove_file(&hooks).unwrap();
    assert!(
        run.hook_log_dir("on_finish")
            .unwrap()
            .ends_with("hooks/on_finish")
    );
    for bad in ["", "..", "a/b"] {
        assert!(run.hook_log_dir(bad).is_err(), "{bad}");
    }
    // An executor's own folder is beside `units/`, and only under a plain name.
    assert_eq!(run.executor_dir("slurm").unwrap(), run.path().join("slurm"));
    for bad in ["", "..", "a/b", "units/x"] {
        assert!(run.executor_dir(bad).is_err(), "{bad}");
    }
}
