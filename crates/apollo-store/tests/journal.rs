//! Writing and reading: round trips, rotation, since/until, group commit, recovery basics.

use std::sync::Arc;

use apollo_core::Journal;
use apollo_store::{
    Durability, JournalReader, JournalWriter, ReadOptions, WarningKind, WriterOptions, verify,
};
use chrono::Duration;

use crate::support::*;

#[test]
fn records_round_trip_with_seq_from_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = JournalWriter::create(dir.path(), "r", fast()).unwrap();
    assert_eq!(writer.append_batch(&[event(1), event(2)]).unwrap(), 2);
    assert_eq!(writer.append_batch(&[event(3)]).unwrap(), 3);
    Journal::append(&mut writer, &[event(4)]).unwrap();
    drop(writer);
    let (records, warnings) = read_all(dir.path(), ReadOptions::default());
    let records = records.unwrap();
    assert!(warnings.is_empty());
    assert_eq!(records.len(), 4);
    for (index, record) in records.iter().enumerate() {
        assert_eq!(record.seq, index as u64 + 1);
        assert_eq!(record.event, event(index as u64 + 1));
    }
}

#[test]
fn segment_lines_are_inspectable_json_after_two_fields() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = JournalWriter::create(dir.path(), "r", fast()).unwrap();
    writer.append_batch(&[event(7)]).unwrap();
    drop(writer);
    let text = std::fs::read_to_string(segment(dir.path(), 1)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    let json: Vec<serde_json::Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line.splitn(3, ' ').nth(2).unwrap()).unwrap())
        .collect();
    assert_eq!(json[0]["magic"], "apollo-journal");
    assert_eq!(
        json[0]["format"],
        format!("1.{}", apollo_store::FORMAT_MINOR)
    );
    assert_eq!(json[0]["segment"], 1);
    assert_eq!(json[0]["prev_seq"], 0);
    assert_eq!(json[1]["seq"], 1);
    assert_eq!(json[1]["kind"], "unit_skipped");
    // The test's independent framing matches the writer's bytes.
    let payload = lines[1].splitn(3, ' ').nth(2).unwrap();
    assert_eq!(frame(payload), format!("{}\n", lines[1]).into_bytes());
}

#[test]
fn segments_rotate_at_the_size_limit_and_seq_continues() {
    let dir = tempfile::tempdir().unwrap();
    let options = fast().segment_max_bytes(600);
    let mut writer = JournalWriter::create(dir.path(), "r", options.clone()).unwrap();
    for n in 1..=40 {
        writer.append_batch(&[event(n)]).unwrap();
    }
    drop(writer);
    let n_segments = std::fs::read_dir(dir.path().join("journal"))
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count();
    assert!(n_segments >= 5, "{n_segments} segments");
    for number in 1..n_segments as u64 {
        let len = std::fs::metadata(segment(dir.path(), number))
            .unwrap()
            .len();
        assert!((600..800).contains(&len), "segment {number}: {len} bytes");
    }
    // Reopen and keep writing into the last segment.
    let (mut writer, report) = JournalWriter::open_for_append(dir.path(), options).unwrap();
    assert_eq!(report.last_seq, 40);
    assert!(report.torn.is_empty());
    assert_eq!(writer.append_batch(&[event(41)]).unwrap(), 41);
    drop(writer);
    let records = read_all(dir.path(), ReadOptions::default()).0.unwrap();
    assert_eq!(records.len(), 41);
    assert!(
        records
            .iter()
            .enumerate()
            .all(|(i, r)| r.seq == i as u64 + 1)
    );
    let report = verify(dir.path()).unwrap();
    assert!(report.is_clean() && report.torn_tail.is_none());
    assert_eq!(report.n_records, 41);
}

#[test]
fn segments_rotate_at_the_utc_day_change() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(); // 23:00 UTC
    let options = fast().clock(clock.clock());
    let mut writer = JournalWriter::create(dir.path(), "r", options).unwrap();
    writer.append_batch(&[event(1)]).unwrap();
    clock.set(clock.now() + Duration::minutes(59));
    writer.append_batch(&[event(2)]).unwrap();
    assert!(writer.segment_path().ends_with("000001.log"));
    clock.set(clock.now() + Duration::minutes(2)); // 00:01 the next day
    writer.append_batch(&[event(3)]).unwrap();
    assert!(writer.segment_path().ends_with("000002.log"));
    drop(writer);
    let records = read_all(dir.path(), ReadOptions::default()).0.unwrap();
    assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
    let header = std::fs::read_to_string(segment(dir.path(), 2)).unwrap();
    assert!(header.contains(r#""prev_seq":2"#), "{header}");
}

#[test]
fn since_and_until_open_only_the_segments_that_cover_the_interval() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let start = clock.now();
    let options = fast().clock(clock.clock());
    let mut writer = JournalWriter::create(dir.path(), "r", options).unwrap();
    // Three days, 4 records each (one hour apart): three segments.
    for day in 0..3 {
        for hour in 0..4 {
            clock.set(start + Duration::days(day) + Duration::hours(hour) + Duration::minutes(1));
            writer
                .append_batch(&[event((day * 4 + hour + 1) as u64)])
                .unwrap();
        }
    }
    drop(writer);
    // Day 1 = 2026-11-30 23:01 (1 record), then Dec 1 00:01.. (3 records) rotate: check layout.
    let n_segments = std::fs::read_dir(dir.path().join("journal"))
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count();
    assert_eq!(n_segments, 4);
    // Damage the body of segment 1: any reader that opens it fails.
    let first = segment(dir.path(), 1);
    let mut bytes = std::fs::read(&first).unwrap();
    let last = bytes.len() - 5;
    bytes[last] ^= 0x01;
    std::fs::write(&first, bytes).unwrap();
    assert!(read_all(dir.path(), ReadOptions::default()).0.is_err());

    let since = start + Duration::days(1) + Duration::hours(1);
    let until = start + Duration::days(1) + Duration::hours(2) + Duration::minutes(1);
    let (records, _) = read_all(dir.path(), ReadOptions::default().since(since).until(until));
    let records = records.unwrap();
    assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [6, 7]);
    assert!(records.iter().all(|r| r.ts >= since && r.ts <= until));
}

#[test]
fn group_commit_serves_many_threads_with_unique_ordered_seqs() {
    let dir = tempfile::tempdir().unwrap();
    let writer = JournalWriter::create(
        dir.path(),
        "r",
        WriterOptions::default()
            .durability(Durability::Fsync)
            .segment_max_bytes(4096),
    )
    .unwrap();
    let shared = Arc::new(writer.into_shared());
    let n_threads = 8;
    let per_thread = 25;
    let handles: Vec<_> = (0..n_threads)
        .map(|thread| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                (0..per_thread)
                    .map(|i| {
                        let n = thread * 1000 + i;
                        (n, shared.append(&event(n)).unwrap())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut acked: Vec<(u64, u64)> = handles
        .into_iter()
        .flat_map(|handle| handle.join().unwrap())
        .collect();
    acked.sort_by_key(|&(_, seq)| seq);
    let total = (n_threads * per_thread) as usize;
    assert_eq!(acked.len(), total);
    let records = read_all(dir.path(), ReadOptions::default()).0.unwrap();
    assert_eq!(records.len(), total);
    for ((n, seq), record) in acked.iter().zip(&records) {
        assert_eq!(record.seq, *seq);
        assert_eq!(record.event, event(*n));
    }
    // Each thread's records are in its own order.
    for thread in 0..n_threads {
        let seqs: Vec<u64> = acked
            .iter()
            .filter(|(n, _)| n / 1000 == thread)
            .map(|&(_, seq)| seq)
            .collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    }
}

#[test]
fn a_reader_reports_a_torn_tail_as_a_warning_and_modifies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = JournalWriter::create(dir.path(), "r", fast()).unwrap();
    writer.append_batch(&[event(1), event(2)]).unwrap();
    drop(writer);
    let path = segment(dir.path(), 1);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(bytes.len() - 3);
    std::fs::write(&path, &bytes).unwrap();
    let (records, warnings) = read_all(dir.path(), ReadOptions::default());
    assert_eq!(records.unwrap().len(), 1);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].kind, WarningKind::TornTail);
    assert_eq!(warnings[0].seq, Some(2));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "a reader must not modify the file"
    );
    let report = verify(dir.path()).unwrap();
    assert!(report.is_clean());
    assert!(report.torn_tail.is_some());
}

#[test]
fn creating_over_an_existing_journal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(JournalWriter::create(dir.path(), "r", fast()).unwrap());
    let error = JournalWriter::create(dir.path(), "r", fast()).unwrap_err();
    assert!(
        error.to_string().contains("already holds a journal"),
        "{error}"
    );
}

#[test]
fn reading_a_missing_journal_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let error = JournalReader::open(dir.path(), ReadOptions::default()).unwrap_err();
    assert_eq!(error.kind(), apollo_store::ErrorKind::NotFound);
}

#[test]
fn appends_queued_during_a_commit_share_the_next_one() {
    use std::sync::mpsc;
    use std::sync::{Condvar, Mutex};
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    drop(JournalWriter::create(dir.path(), "r", fast()).unwrap());
    // A clock that parks the first leader inside its commit (the clock stamps each record)
    // until the test releases it.
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let (inside_tx, inside_rx) = mpsc::channel::<()>();
    let armed = Mutex::new(Some(inside_tx));
    let clock_gate = Arc::clone(&gate);
    let clock: apollo_store::testing::Clock = Arc::new(move || {
        if let Some(tx) = armed.lock().unwrap().take() {
            tx.send(()).unwrap();
            let (open, cvar) = &*clock_gate;
            let mut open = open.lock().unwrap();
            while !*open {
                open = cvar.wait(open).unwrap();
            }
        }
        chrono::Utc::now()
    });
    let (writer, _) = JournalWriter::open_for_append(dir.path(), fast().clock(clock)).unwrap();
    let shared = Arc::new(writer.into_shared());
    let first = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || shared.append(&event(0)).unwrap())
    };
    inside_rx.recv().unwrap(); // the first append's leader is inside its commit
    let followers: Vec<_> = (1..=7)
        .map(|n| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || shared.append(&event(n)).unwrap())
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while shared.n_queued() < 7 {
        assert!(Instant::now() < deadline, "followers never queued");
        std::thread::yield_now();
    }
    let (open, cvar) = &*gate;
    *open.lock().unwrap() = true;
    cvar.notify_all();
    assert_eq!(first.join().unwrap(), 1);
    let mut seqs: Vec<u64> = followers.into_iter().map(|t| t.join().unwrap()).collect();
    seqs.sort();
    assert_eq!(seqs, (2..=8).collect::<Vec<_>>());
    assert_eq!(
        shared.n_commits(),
        2,
        "the 7 queued appends must share one commit"
    );
}

#[test]
fn a_reader_sees_the_journal_as_it_was_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = JournalWriter::create(dir.path(), "r", fast()).unwrap();
    writer.append_batch(&[event(1)]).unwrap();
    let mut reader = JournalReader::open(dir.path(), ReadOptions::default()).unwrap();
    assert_eq!(reader.next().unwrap().unwrap().seq, 1);
    // Appended while the reader is open: not part of its snapshot, and not a torn tail.
    writer.append_batch(&[event(2)]).unwrap();
    let mut second = JournalReader::open(dir.path(), ReadOptions::default()).unwrap();
    assert!(reader.next().is_none() || second.next().is_some());
    assert!(
        reader
            .warnings()
            .iter()
            .all(|w| w.kind != WarningKind::TornTail)
    );
}

#[test]
fn the_documented_example_segment_is_byte_exact() {
    use apollo_core::event::{RunFinished, RunStatus};
    use chrono::TimeZone;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    clock.set(
        chrono::Utc
            .with_ymd_and_hms(2026, 11, 30, 2, 15, 7)
            .unwrap(),
    );
    let options = fast().clock(clock.clock());
    let mut writer = JournalWriter::create(dir.path(), "20261130T021507Z-3f9a", options).unwrap();
    clock.set(clock.now() + Duration::microseconds(1));
    writer
        .append_batch(&[apollo_core::Event::RunFinished(RunFinished {
            status: RunStatus::Succeeded,
            succeeded: 0,
            failed: 0,
            skipped: 0,
            reused: 0,
        })])
        .unwrap();
    drop(writer);
    let written = std::fs::read_to_string(segment(dir.path(), 1)).unwrap();
    let readme = include_str!("../README.md");
    let start = readme.find("<!-- example-segment -->\n```text\n").unwrap();
    let block = &readme[start..];
    let block = &block[block.find("```text\n").unwrap() + 8..];
    let block = &block[..block.find("```").unwrap()];
    assert_eq!(block, written, "README.md's example segment is out of date");
}

/// A writer taking over a reader that read a multi-segment journal to its end appends where
/// the journal ends; one whose reader read less reads the last segment again; and one whose
/// journal changed since its reader read all of it (another process writes it: what the
/// reader's caller made of it is stale) refuses, and modifies nothing.
#[test]
fn a_writer_takes_over_a_whole_read_and_refuses_a_journal_changed_since() {
    let options = fast().segment_max_bytes(600);
    let write = |n_records: u64| {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(dir.path(), "r", options.clone()).unwrap();
        for n in 1..=n_records {
            writer.append_batch(&[event(n)]).unwrap();
        }
        dir
    };
    let last_segment = |dir: &std::path::Path| {
        let mut names: Vec<_> = std::fs::read_dir(dir.join("journal"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.to_string_lossy().ends_with(".log"))
            .collect();
        names.sort();
        names.pop().unwrap()
    };
    let read_to_end = |dir: &std::path::Path| {
        let mut reader = JournalReader::open(dir, ReadOptions::default()).unwrap();
        assert_eq!(reader.by_ref().count(), 40);
        reader
    };
    let next_seq_after = |dir: &std::path::Path, reader: JournalReader| {
        let (mut writer, report) =
            JournalWriter::open_for_append_after(reader, dir, options.clone()).unwrap();
        let seq = writer.append_batch(&[event(1000)]).unwrap();
        drop(writer);
        let records = read_all(dir, ReadOptions::default()).0.unwrap();
        assert!(
            records
                .iter()
                .enumerate()
                .all(|(i, r)| r.seq == i as u64 + 1)
        );
        assert!(verify(dir).unwrap().is_clean());
        (report.last_seq, seq)
    };
    let refused_after = |dir: &std::path::Path, reader: JournalReader| {
        let before = read_all(dir, ReadOptions::default()).0.unwrap().len();
        let error = JournalWriter::open_for_append_after(reader, dir, options.clone())
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(error, apollo_store::StoreError::StateChanged { .. }),
            "{error}"
        );
        assert!(
            error.to_string().contains("changed after apollo read it"),
            "{error}"
        );
        assert_eq!(
            read_all(dir, ReadOptions::default()).0.unwrap().len(),
            before
        );
    };

    // Read to its end: taken over as read.
    let dir = write(40);
    let reader = read_to_end(dir.path());
    assert!(reader.n_segments() >= 5);
    assert_eq!(next_seq_after(dir.path(), reader), (40, 41));

    // Read only part of the way: read again.
    let dir = write(40);
    let mut reader = JournalReader::open(dir.path(), ReadOptions::default()).unwrap();
    assert_eq!(reader.by_ref().take(3).count(), 3);
    assert_eq!(next_seq_after(dir.path(), reader), (40, 41));

    // A window of the journal: read again.
    let dir = write(40);
    let all = read_all(dir.path(), ReadOptions::default()).0.unwrap();
    let mut reader =
        JournalReader::open(dir.path(), ReadOptions::default().until(all[0].ts)).unwrap();
    reader.by_ref().for_each(drop);
    assert_eq!(next_seq_after(dir.path(), reader), (40, 41));

    // Records appended after the read, in the last segment or in a new one.
    for n_records in [1, 30] {
        let dir = write(40);
        let reader = read_to_end(dir.path());
        let (mut other, _) = JournalWriter::open_for_append(dir.path(), options.clone()).unwrap();
        for n in 0..n_records {
            other.append_batch(&[event(41 + n)]).unwrap();
        }
        drop(other);
        refused_after(dir.path(), reader);
    }

    // The last segment replaced by a copy (another file, the same bytes).
    let dir = write(40);
    let reader = read_to_end(dir.path());
    let path = last_segment(dir.path());
    let copy = path.with_extension("copy");
    std::fs::copy(&path, &copy).unwrap();
    std::fs::rename(&copy, &path).unwrap();
    refused_after(dir.path(), reader);

    // The last segment cut and written back to the same length (the same bytes, even): its
    // times say so. (Set here to a time unlike the read's: file times have the kernel clock's
    // coarse granularity, a change within one tick of the read keeps them.)
    let dir = write(40);
    let reader = read_to_end(dir.path());
    let path = last_segment(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(0).unwrap();
    std::io::Write::write_all(&mut file, &bytes).unwrap();
    file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(86_400))
        .unwrap();
    drop(file);
    refused_after(dir.path(), reader);
}
