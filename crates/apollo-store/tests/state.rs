//! The state directory: lock, run listing, latest run, prune, backup.

use std::fs;

use apollo_core::event::RunStatus;
use apollo_store::{
    ErrorKind, JournalWriter, PruneOptions, RunId, RunState, StateDir, StoreError, backup, prune,
};
use chrono::{Duration, TimeZone, Utc};

use crate::support::*;

pub(crate) fn make_run(state: &StateDir, id: &str, name: &str, end: Option<RunStatus>) -> RunId {
    let id: RunId = id.parse().unwrap();
    let run = state.create_run(&id).unwrap();
    // Records are stamped at the run id's time, as a real run's would be.
    let clock = ManualClock::new();
    clock.set(id.started_at());
    let options = fast().clock(clock.clock());
    let mut writer = JournalWriter::create(run.path(), id.as_str(), options).unwrap();
    writer
        .append_batch(&[run_started(id.as_str(), name)])
        .unwrap();
    writer.append_batch(&[event(1)]).unwrap();
    if let Some(status) = end {
        writer.append_batch(&[run_finished(status)]).unwrap();
    }
    let logs = state.attempt_dir(&id, "a", 1).unwrap().into_path();
    fs::create_dir_all(&logs).unwrap();
    fs::write(logs.join("stdout"), "hello\n").unwrap();
    id
}

#[test]
fn a_second_writer_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let _held = state.lock(false).unwrap();
    let other = StateDir::open_or_create(dir.path()).unwrap();
    let error = other.lock(false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Locked);
    match error {
        StoreError::Locked { pid, host, .. } => {
            assert_eq!(pid, Some(std::process::id()));
            assert!(host.is_some());
        }
        other => panic!("{other}"),
    }
}

#[test]
fn runs_are_listed_with_their_state_from_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let ok = make_run(
        &state,
        "20261128T010000Z-0001",
        "etl",
        Some(RunStatus::Succeeded),
    );
    let failed = make_run(
        &state,
        "20261129T010000Z-0001",
        "etl",
        Some(RunStatus::Failed),
    );
    let open = make_run(&state, "20261130T010000Z-0001", "etl", None);
    let other = make_run(
        &state,
        "20261130T020000Z-0001",
        "deploy",
        Some(RunStatus::Interrupted),
    );
    let runs = state.list_runs().unwrap();
    let states: Vec<_> = runs.iter().map(|r| (r.id.clone(), r.state)).collect();
    assert_eq!(
        states,
        [
            (ok.clone(), RunState::Succeeded),
            (failed, RunState::Failed),
            (open.clone(), RunState::Incomplete),
            (other.clone(), RunState::Interrupted),
        ]
    );
    assert_eq!(runs[0].pipeline.as_deref(), Some("etl"));
    assert_eq!(runs[0].n_units, 2);
    assert_eq!(runs[0].succeeded, 2);
    assert!(runs[0].finished.is_some() && runs[2].finished.is_none());
    assert_eq!(
        runs[2].skipped, 1,
        "unfinished runs count their units from the journal"
    );
    assert_eq!(state.latest_run("etl").unwrap(), Some(open));
    assert_eq!(state.latest_run("deploy").unwrap(), Some(other));
    assert_eq!(state.latest_run("nope").unwrap(), None);
}

#[test]
fn listing_reads_the_tail_of_a_big_journal() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let id: RunId = "20261130T010000Z-0001".parse().unwrap();
    let run = state.create_run(&id).unwrap();
    let mut writer = JournalWriter::create(run.path(), id.as_str(), fast()).unwrap();
    writer
        .append_batch(&[run_started(id.as_str(), "etl")])
        .unwrap();
    let events: Vec<_> = (0..3000).map(event).collect();
    writer.append_batch(&events).unwrap();
    writer
        .append_batch(&[run_finished(RunStatus::Succeeded)])
        .unwrap();
    drop(writer);
    // Damage a record in the middle: a full read would fail; the listing reads only the ends.
    let path = segment(run.path(), 1);
    let mut bytes = fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x02;
    fs::write(&path, bytes).unwrap();
    let summary = state.run_summary(&id).unwrap();
    assert_eq!(summary.state, RunState::Succeeded);
}

#[test]
fn a_run_being_written_by_another_apollo_is_running_and_never_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let old_open = make_run(&state, "20261101T010000Z-0001", "etl", None);
    let _newer = make_run(
        &state,
        "20261130T010000Z-0001",
        "etl",
        Some(RunStatus::Succeeded),
    );
    let mut lock = state.lock(false).unwrap();
    lock.set_run(&old_open).unwrap();
    // Pretend the holder is another process (flock conflicts between open file descriptions
    // within one process, so only the pid in the file needs to differ).
    fs::write(
        state.lock_path(),
        format!("pid=1\nhost=elsewhere\nrun={old_open}\n"),
    )
    .unwrap();
    let runs = state.list_runs().unwrap();
    assert_eq!(runs[0].state, RunState::Running);
    let now = Utc.with_ymd_and_hms(2026, 12, 30, 0, 0, 0).unwrap();
    let report = prune(
        &state,
        PruneOptions::default().keep_days(1).keep_runs(0),
        now,
    )
    .unwrap();
    assert_eq!(report.kept_running, vec![old_open.clone()]);
    assert!(report.deleted.is_empty());
    assert!(state.runs_dir().join(old_open.as_str()).exists());
}

#[test]
fn prune_deletes_by_age_and_count_but_keeps_the_latest_of_each_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let a1 = make_run(
        &state,
        "20261101T010000Z-0001",
        "etl",
        Some(RunStatus::Succeeded),
    );
    let a2 = make_run(&state, "20261120T010000Z-0001", "etl", None);
    let a3 = make_run(
        &state,
        "20261128T010000Z-0001",
        "etl",
        Some(RunStatus::Failed),
    );
    let a4 = make_run(
        &state,
        "20261129T010000Z-0001",
        "etl",
        Some(RunStatus::Succeeded),
    );
    let b1 = make_run(
        &state,
        "20261001T010000Z-0001",
        "deploy",
        Some(RunStatus::Succeeded),
    );
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap();
    let report = prune(&state, PruneOptions::default().keep_days(7), now).unwrap();
    assert_eq!(report.deleted, [a1.clone(), a2.clone()]);
    assert_eq!(report.kept_latest, vec![b1.clone()]);
    assert!(report.freed_bytes > 0);
    assert!(!state.runs_dir().join(a1.as_str()).exists());
    let report = prune(&state, PruneOptions::default().keep_runs(1), now).unwrap();
    assert_eq!(report.deleted, [a3]);
    // Listed in creation order (a4 was made before b1), not by the time in their ids.
    let left: Vec<_> = state.run_ids().unwrap();
    assert_eq!(left, [a4, b1]);
    assert!(
        fs::read_dir(state.runs_dir()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with('.'))
    );
}

#[test]
fn backup_copies_finished_runs_once_and_prunes_the_destination() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join("state")).unwrap();
    let blob = state.put_blob(b"definition").unwrap();
    // Made first: the oldest run of `etl` (runs are ordered by creation).
    let old = make_run(
        &state,
        "20261001T010000Z-0001",
        "etl",
        Some(RunStatus::Succeeded),
    );
    let id: RunId = "20261129T010000Z-0001".parse().unwrap();
    let run = state.create_run(&id).unwrap();
    let clock = ManualClock::new();
    clock.set(id.started_at());
    let options = fast().clock(clock.clock());
    let mut writer = JournalWriter::create(run.path(), id.as_str(), options).unwrap();
    let mut started = run_started(id.as_str(), "etl");
    if let apollo_core::Event::RunStarted(s) = &mut started {
        s.definition_hash = blob.clone();
    }
    writer
        .append_batch(&[started, run_finished(RunStatus::Succeeded)])
        .unwrap();
    drop(writer);
    let open = make_run(&state, "20261130T010000Z-0001", "etl", None);
    let dest_path = dir.path().join("backup");
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let report = backup(&state, &dest_path, Some(30), now).unwrap();
    assert_eq!(report.copied, vec![id.clone()]);
    assert_eq!(report.unfinished, [open]);
    assert_eq!(
        report.too_old,
        vec![old.clone()],
        "older than 30 days: the destination keeps none"
    );
    let dest = StateDir::open_existing(&dest_path).unwrap();
    assert_eq!(dest.read_blob(&blob).unwrap(), b"definition");
    let copied = dest.run_summary(&id).unwrap();
    assert_eq!(copied.state, RunState::Succeeded);
    assert!(!dest_path.join("runs").join(old.as_str()).exists());
    assert!(
        apollo_store::verify(&dest_path.join("runs").join(id.as_str()))
            .unwrap()
            .is_clean()
    );
    let again = backup(&state, &dest_path, Some(30), now + Duration::hours(1)).unwrap();
    assert!(again.copied.is_empty());
    assert_eq!(again.already_there, [id]);
    // Old runs already at the destination are pruned there like in a state dir.
    let old_copy = dest_path.join("runs").join("20260901T010000Z-0001");
    copy_dir(&state.runs_dir().join(old.as_str()), &old_copy);
    let third = backup(&state, &dest_path, Some(30), now).unwrap();
    assert_eq!(
        third.pruned.deleted,
        ["20260901T010000Z-0001".parse::<RunId>().unwrap()]
    );
    assert!(!old_copy.exists());
}

#[test]
fn backup_refreshes_the_copy_of_a_run_resumed_since() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path().join("state")).unwrap();
    let id = make_run(
        &state,
        "20261129T010000Z-0001",
        "etl",
        Some(RunStatus::Failed),
    );
    let dest_path = dir.path().join("backup");
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let first = backup(&state, &dest_path, None, now).unwrap();
    assert_eq!(first.copied, std::slice::from_ref(&id));
    let dest = StateDir::open_existing(&dest_path).unwrap();
    assert_eq!(dest.run_summary(&id).unwrap().state, RunState::Failed);

    // The run is resumed and succeeds; a rotation gives it a second segment too.
    let run_dir = state.run_dir(&id).unwrap();
    let options = fast().segment_max_bytes(1);
    let (mut writer, _) = JournalWriter::open_for_append(run_dir.path(), options).unwrap();
    writer.append_batch(&[event(2)]).unwrap();
    writer
        .append_batch(&[run_finished(RunStatus::Succeeded)])
        .unwrap();
    drop(writer);

    let second = backup(&state, &dest_path, None, now).unwrap();
    assert_eq!(second.copied, std::slice::from_ref(&id));
    assert_eq!(second.refreshed, std::slice::from_ref(&id));
    assert!(second.already_there.is_empty());
    assert_eq!(dest.run_summary(&id).unwrap().state, RunState::Succeeded);
    let copy = dest_path.join("runs").join(id.as_str());
    assert!(apollo_store::verify(&copy).unwrap().is_clean());
    assert!(
        fs::read_dir(dest.runs_dir()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with('.')),
        "no temporary or old copy is left behind"
    );
    // Unchanged since: nothing to do.
    let third = backup(&state, &dest_path, None, now).unwrap();
    assert!(third.copied.is_empty());
    assert_eq!(third.already_there, [id]);
}

#[test]
fn a_run_of_format_1_1_without_identity_or_sequence_still_reads_and_comes_first() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    // Written as an apollo of format 1.1 wrote it: no identity, no sequence file.
    let old = make_run(&state, "20261130T010000Z-0001", "etl", None);
    let run_dir = state.runs_dir().join(old.as_str());
    fs::remove_file(run_dir.join("sequence")).unwrap();
    let segment = run_dir.join("journal/000001.log");
    let text = fs::read_to_string(&segment).unwrap();
    assert!(!text.contains("identity"), "{text}");
    let (header, rest) = text.split_once('\n').unwrap();
    let payload = header.splitn(3, ' ').nth(2).unwrap().replace(
        &format!(r#""format":"1.{}""#, apollo_store::FORMAT_MINOR),
        r#""format":"1.1""#,
    );
    let mut bytes = frame(&payload);
    bytes.extend_from_slice(rest.as_bytes());
    fs::write(&segment, bytes).unwrap();
    // A newer run made earlier by the clock.
    let new = make_run(&state, "20261129T010000Z-0001", "etl", None);

    assert_eq!(state.run_ids().unwrap(), [old.clone(), new.clone()]);
    let summary = state.run_summary(&old).unwrap();
    assert_eq!(summary.state, RunState::Incomplete, "{:?}", summary.problem);
    assert_eq!(summary.pipeline.as_deref(), Some("etl"));
    assert_eq!(summary.identity, None);
    assert!(apollo_store::verify(&run_dir).unwrap().is_clean());
}

/// The runs index (`index/runs`) is a cache of finished runs' summaries: a listing from it
/// equals one from the journals, a changed journal is read again, and a missing or damaged
/// index changes nothing but speed.
#[test]
fn the_runs_index_never_changes_what_a_listing_says() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let ok = make_run(
        &state,
        "20261128T010000Z-0001",
        "etl",
        Some(RunStatus::Succeeded),
    );
    let failed = make_run(
        &state,
        "20261129T010000Z-0001",
        "etl",
        Some(RunStatus::Failed),
    );
    make_run(&state, "20261130T010000Z-0001", "etl", None);
    let index = dir.path().join("index/runs");
    assert!(!index.exists());
    let from_journals = state.list_runs().unwrap();
    assert!(index.exists(), "the listing wrote the index");
    let text = fs::read_to_string(&index).unwrap();
    assert!(text.contains(ok.as_str()) && text.contains(failed.as_str()));
    assert!(
        !text.contains("20261130T010000Z-0001"),
        "an unfinished run is never cached: {text}"
    );
    assert_eq!(state.list_runs().unwrap(), from_journals);
    assert_eq!(
        state.run_ids().unwrap(),
        vec![
            ok.clone(),
            failed.clone(),
            "20261130T010000Z-0001".parse().unwrap()
        ]
    );

    // A finished run resumed: its journal grew, so it is read again.
    let run = state.run_dir(&failed).unwrap();
    let (mut writer, _) = JournalWriter::open_for_append(run.path(), fast()).unwrap();
    writer.append_batch(&[event(2)]).unwrap();
    drop(writer);
    let after_resume = state.list_runs().unwrap();
    assert_eq!(after_resume[1].id, failed);
    assert_eq!(
        after_resume[1].state,
        RunState::Incomplete,
        "records after run_finished: no longer the cached `failed`"
    );

    // Deleted or damaged: the same listing, and the index is written again.
    fs::remove_file(&index).unwrap();
    assert_eq!(state.list_runs().unwrap(), after_resume);
    fs::write(&index, b"{not json").unwrap();
    assert_eq!(state.list_runs().unwrap(), after_resume);
    assert!(fs::read_to_string(&index).unwrap().contains(ok.as_str()));
    // A pruned run's entry goes with it.
    fs::remove_dir_all(dir.path().join("runs").join(ok.as_str())).unwrap();
    let listed = state.list_runs().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(!fs::read_to_string(&index).unwrap().contains(ok.as_str()));
}

#[test]
fn a_run_counts_once_its_first_record_is_whole_wherever_its_segment_was_cut() {
    // A `run_started` naming many units (the first record of a large pipeline's run), then
    // one more record: cut at every byte, the run is listed exactly when the segment holds a
    // second newline (the header's, then the first record's), however the listing finds out.
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let id = state.new_run_id();
    let run = state.create_run(&id).unwrap();
    let mut writer = JournalWriter::create(run.path(), id.as_str(), fast()).unwrap();
    let started = apollo_core::event::RunStarted {
        run_id: id.to_string(),
        pipeline: "etl".into(),
        config_path: "pipeline.yaml".into(),
        config_hash: "c".repeat(64),
        definition_hash: "d".repeat(64),
        apollo_version: "0.1.0".into(),
        host: "test".into(),
        pid: 1,
        units: (0..1_000).map(|i| format!("u{i:05}")).collect(),
        identity: Some("etl".into()),
        params: Default::default(),
        ..Default::default()
    };
    writer
        .append_batch(&[apollo_core::Event::RunStarted(started), event(2)])
        .unwrap();
    drop(writer);
    let segment = run.path().join("journal/000001.log");
    let whole = fs::read(&segment).unwrap();
    let header_end = whole.iter().position(|&byte| byte == b'\n').unwrap();
    assert!(
        whole.len() - header_end > 8192,
        "the first record spans pages"
    );
    for cut in header_end + 1..=whole.len() {
        fs::write(&segment, &whole[..cut]).unwrap();
        let newlines = whole[..cut].iter().filter(|&&byte| byte == b'\n').count();
        let listed = state.run_ids().unwrap().contains(&id);
        assert_eq!(
            listed,
            newlines >= 2,
            "cut at byte {cut} of {}",
            whole.len()
        );
    }
    // A damaged length field is not trusted: the segment is read for its newline instead.
    let mut damaged = whole.clone();
    damaged[header_end + 10] = b'9';
    fs::write(&segment, &damaged).unwrap();
    assert!(state.run_ids().unwrap().contains(&id));
    damaged.truncate(header_end + 200);
    fs::write(&segment, &damaged).unwrap();
    assert!(!state.run_ids().unwrap().contains(&id));
}

#[test]
fn a_cache_file_is_checked_by_crc32c_and_one_an_older_apollo_checked_by_sha256_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    StateDir::open_or_create(dir.path()).unwrap();
    let body = b"{\"units\":[]}".to_vec();
    apollo_store::cache_file::write(dir.path(), "parsed-x", &body).unwrap();
    let path = dir.path().join("index/parsed-x");
    let written = fs::read(&path).unwrap();
    let line = format!("{:08x}\n", crc32c::crc32c(&body));
    assert_eq!(written, [line.as_bytes(), &body].concat());
    // Every bit of the body and of the checksum line matters.
    for bit in 0..written.len() * 8 {
        let mut flipped = written.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        fs::write(&path, &flipped).unwrap();
        assert_eq!(
            apollo_store::cache_file::read(dir.path(), "parsed-x"),
            None,
            "bit {bit} flipped"
        );
    }
    // An older apollo's file: the SHA-256 of the body, in hex.
    let sha256 = apollo_core::hash::sha256_hex(&body);
    fs::write(&path, [sha256.as_bytes(), b"\n", &body].concat()).unwrap();
    assert_eq!(
        apollo_store::cache_file::read(dir.path(), "parsed-x").unwrap(),
        body
    );
    fs::write(&path, [sha256.as_bytes(), b"\n", b"{}"].concat()).unwrap();
    assert_eq!(apollo_store::cache_file::read(dir.path(), "parsed-x"), None);
}

#[test]
fn a_cache_file_written_a_piece_at_a_time_reads_back_whole_and_a_failed_one_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    StateDir::open_or_create(dir.path()).unwrap();
    let body: Vec<u8> = (0..200_000u32)
        .flat_map(|n| format!("{n}\n").into_bytes())
        .collect();
    apollo_store::cache_file::write_with(dir.path(), "parsed-x", |out| {
        body.chunks(13).try_for_each(|piece| out.write_all(piece))
    })
    .unwrap();
    // The checksum line written last, over its placeholder, is the body's.
    assert_eq!(
        apollo_store::cache_file::read(dir.path(), "parsed-x").unwrap(),
        body
    );
    // The same as writing the body in one piece.
    let whole = fs::read(dir.path().join("index/parsed-x")).unwrap();
    apollo_store::cache_file::write(dir.path(), "parsed-x", &body).unwrap();
    assert_eq!(fs::read(dir.path().join("index/parsed-x")).unwrap(), whole);

    // A body that fails half-way replaces nothing and leaves no temporary file.
    let failed = apollo_store::cache_file::write_with(dir.path(), "parsed-x", |out| {
        out.write_all(b"half")?;
        Err(std::io::Error::other("the serialiser failed"))
    });
    assert!(failed.is_err());
    assert_eq!(
        apollo_store::cache_file::read(dir.path(), "parsed-x").unwrap(),
        body
    );
    let names: Vec<_> = fs::read_dir(dir.path().join("index"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(names, ["parsed-x"]);
}

#[test]
fn backup_copies_no_run_through_a_run_folder_planted_as_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let other = StateDir::open_or_create(dir.path().join("other")).unwrap();
    let theirs = make_run(
        &other,
        "20261129T010000Z-0001",
        "secret",
        Some(RunStatus::Succeeded),
    );
    let state = StateDir::open_or_create(dir.path().join("state")).unwrap();
    let ours = make_run(
        &state,
        "20261129T020000Z-0001",
        "etl",
        Some(RunStatus::Succeeded),
    );
    // Another project's run, linked in under a run id: a read outside the state directory.
    std::os::unix::fs::symlink(
        other.runs_dir().join(theirs.as_str()),
        state.runs_dir().join(theirs.as_str()),
    )
    .unwrap();
    let dest_path = dir.path().join("backup");
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let report = backup(&state, &dest_path, None, now).unwrap();
    assert_eq!(report.copied, vec![ours]);
    assert!(
        !dest_path.join("runs").join(theirs.as_str()).exists(),
        "the linked run was copied"
    );
    assert!(
        (report.failed.iter()).any(|(id, why)| *id == theirs && why.contains("symbolic link")),
        "{:?}",
        report.failed
    );
}
