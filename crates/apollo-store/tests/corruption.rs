//! The recovery rules, attacked: torn tails at every offset, every bit flipped, gaps, missing
//! and swapped segments, bad headers, newer versions, random bytes.

use std::fs;
use std::path::Path;

use apollo_store::{ErrorKind, JournalWriter, ReadOptions, StoreError, WarningKind, verify};
use proptest::prelude::*;

use crate::support::*;

/// A run with `n` records in one segment; returns the segment's bytes.
fn one_segment_run(dir: &Path, n: u64) -> Vec<u8> {
    let mut writer = JournalWriter::create(dir, "20261130T021507Z-3f9a", fast()).unwrap();
    for i in 1..=n {
        writer.append_batch(&[event(i)]).unwrap();
    }
    drop(writer);
    fs::read(segment(dir, 1)).unwrap()
}

/// A run with several sealed segments; returns the number of segments.
fn multi_segment_run(dir: &Path, n: u64) -> u64 {
    let options = fast().segment_max_bytes(500);
    let mut writer = JournalWriter::create(dir, "20261130T021507Z-3f9a", options).unwrap();
    for i in 1..=n {
        writer.append_batch(&[event(i)]).unwrap();
    }
    drop(writer);
    n_segment_files(dir)
}

/// The segment files (`*.log`) of a journal.
fn n_segment_files(dir: &Path) -> u64 {
    fs::read_dir(dir.join("journal"))
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count() as u64
}

fn expect_corruption(result: Result<impl std::fmt::Debug, StoreError>, needle: &str) -> StoreError {
    let error = result.expect_err("expected a corruption error");
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    assert!(
        error.to_string().contains(needle),
        "`{error}` should mention `{needle}`"
    );
    error
}

#[test]
fn truncating_the_last_record_at_every_byte_offset_is_a_recovered_torn_tail() {
    let base = tempfile::tempdir().unwrap();
    let full = one_segment_run(base.path(), 5);
    let lines = line_ranges(&full);
    let last = lines.last().unwrap().clone();
    for cut in last.start + 1..last.end {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(base.path(), dir.path());
        let path = segment(dir.path(), 1);
        fs::write(&path, &full[..cut]).unwrap();

        // A reader sees 4 records and a torn-tail warning.
        let (records, warnings) = read_all(dir.path(), ReadOptions::default());
        let records = records.unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(records.len(), 4, "cut at {cut}");
        assert_eq!(warnings.len(), 1, "cut at {cut}");
        assert_eq!(warnings[0].kind, WarningKind::TornTail);
        assert_eq!(warnings[0].offset, last.start as u64);

        // The writer cuts it off, keeps the bytes, and continues from seq 5.
        let (mut writer, report) = JournalWriter::open_for_append(dir.path(), fast())
            .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(report.last_seq, 4, "cut at {cut}");
        assert_eq!(report.torn.len(), 1);
        let torn = &report.torn[0];
        assert_eq!(
            (torn.offset, torn.n_bytes),
            (last.start as u64, (cut - last.start) as u64)
        );
        assert_eq!(fs::read(&torn.saved_to).unwrap(), &full[last.start..cut]);
        assert!(torn.saved_to.to_string_lossy().ends_with("000001.log.torn"));
        assert!(torn.to_string().contains("after seq 4"), "{torn}");
        assert_eq!(fs::read(&path).unwrap(), &full[..last.start]);
        assert_eq!(writer.append_batch(&[event(50)]).unwrap(), 5);
        drop(writer);
        let records = read_all(dir.path(), ReadOptions::default()).0.unwrap();
        assert_eq!(records.len(), 5);
        assert_eq!(
            records[..4].iter().map(|r| &r.event).collect::<Vec<_>>(),
            (1..=4)
                .map(event)
                .collect::<Vec<_>>()
                .iter()
                .collect::<Vec<_>>()
        );
        assert_eq!(records[4].event, event(50));
        assert!(verify(dir.path()).unwrap().is_clean());
    }
}

#[test]
// `ReadOptions` is being made #[non_exhaustive]: new code sets fields, never a struct literal.
#[allow(clippy::field_reassign_with_default)]
fn a_bit_flip_in_the_last_acknowledged_record_is_corruption_not_a_torn_tail() {
    // Was: cut as a torn tail, so a recorded success silently disappeared. The frame is
    // complete (its length of bytes and its newline are there, no zeros): it was written
    // whole, so it may have been acknowledged.
    let dir = tempfile::tempdir().unwrap();
    let full = one_segment_run(dir.path(), 3);
    let last = line_ranges(&full).last().unwrap().clone();
    let mut bytes = full.clone();
    bytes[last.start + 20] ^= 0x10;
    fs::write(segment(dir.path(), 1), &bytes).unwrap();
    let error = expect_corruption(
        read_all(dir.path(), ReadOptions::default()).0,
        "may have been acknowledged",
    );
    assert!(error.to_string().contains("(seq 3)"), "{error}");
    expect_corruption(
        JournalWriter::open_for_append(dir.path(), fast()).map(|_| ()),
        "not a torn write",
    );
    assert_eq!(fs::read(segment(dir.path(), 1)).unwrap(), bytes);
    assert!(!dir.path().join("journal/000001.log.torn").exists());
    let report = verify(dir.path()).unwrap();
    assert_eq!((report.corruptions.len(), report.n_records), (1, 2));
    assert!(report.torn_tail.is_none(), "{report:?}");
    let mut salvage = ReadOptions::default();
    salvage.salvage = true;
    let (records, warnings) = read_all(dir.path(), salvage);
    assert_eq!(records.unwrap().len(), 2);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].kind, WarningKind::Salvaged);
}

#[test]
fn trailing_zero_bytes_after_a_crash_are_the_end_not_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = one_segment_run(dir.path(), 3);
    bytes.extend_from_slice(&[0u8; 4096]);
    fs::write(segment(dir.path(), 1), &bytes).unwrap();
    let (_, report) = JournalWriter::open_for_append(dir.path(), fast()).unwrap();
    assert_eq!(report.last_seq, 3);
    assert!(report.torn.is_empty(), "{report:?}");
}

#[test]
fn every_single_bit_flip_in_a_sealed_segment_is_detected() {
    let base = tempfile::tempdir().unwrap();
    let n_segments = multi_segment_run(base.path(), 12);
    assert!(n_segments >= 3);
    let sealed = segment(base.path(), 2);
    let original = fs::read(&sealed).unwrap();
    let dir = tempfile::tempdir().unwrap();
    copy_dir(base.path(), dir.path());
    let target = segment(dir.path(), 2);
    let mut n_flips = 0;
    for byte in 0..original.len() {
        for bit in 0..8 {
            let mut bytes = original.clone();
            bytes[byte] ^= 1 << bit;
            fs::write(&target, &bytes).unwrap();
            let (records, _) = read_all(dir.path(), ReadOptions::default());
            assert!(
                records.is_err(),
                "flipping bit {bit} of byte {byte} of a sealed segment went unnoticed"
            );
            let report = verify(dir.path());
            assert!(
                report.is_err() || !report.unwrap().is_clean(),
                "verify missed bit {bit} of byte {byte}"
            );
            n_flips += 1;
        }
    }
    assert_eq!(n_flips, original.len() * 8);
}

#[test]
fn every_single_bit_flip_in_the_last_segment_is_corruption_never_a_torn_tail() {
    // The rule (README, recovery): a bad last frame is torn only if its bytes are what an
    // unfinished write leaves (a prefix without its newline, or zeros in whole blocks). A
    // single flipped bit leaves neither, so every flip, the last record's included, is
    // corruption: the reader and recovery refuse, `verify` reports it, nothing is modified.
    let base = tempfile::tempdir().unwrap();
    let original = one_segment_run(base.path(), 4);
    let dir = tempfile::tempdir().unwrap();
    copy_dir(base.path(), dir.path());
    let target = segment(dir.path(), 1);
    let mut n_flips = 0;
    for byte in 0..original.len() {
        for bit in 0..8 {
            let mut bytes = original.clone();
            bytes[byte] ^= 1 << bit;
            fs::write(&target, &bytes).unwrap();
            let (records, warnings) = read_all(dir.path(), ReadOptions::default());
            match records {
                Err(error) => assert!(
                    matches!(error.kind(), ErrorKind::Corruption),
                    "byte {byte} bit {bit}: {error}"
                ),
                Ok(records) => panic!(
                    "byte {byte} bit {bit}: read {} records with {warnings:?}",
                    records.len()
                ),
            }
            assert!(
                warnings.iter().all(|w| w.kind != WarningKind::TornTail),
                "byte {byte} bit {bit}: {warnings:?}"
            );
            let report = verify(dir.path()).unwrap();
            assert!(
                !report.is_clean() && report.torn_tail.is_none(),
                "byte {byte} bit {bit}: {report:?}"
            );
            let error = JournalWriter::open_for_append(dir.path(), fast())
                .map(|_| ())
                .unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Corruption, "byte {byte} bit {bit}");
            assert_eq!(fs::read(&target).unwrap(), bytes, "byte {byte} bit {bit}");
            n_flips += 1;
        }
    }
    assert_eq!(n_flips, original.len() * 8);
    assert!(!dir.path().join("journal/000001.log.torn").exists());
}

#[test]
fn a_bad_record_followed_by_good_ones_is_corruption_not_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = one_segment_run(dir.path(), 5);
    let lines = line_ranges(&bytes);
    bytes[lines[2].start + 30] ^= 0x04; // record 2
    fs::write(segment(dir.path(), 1), &bytes).unwrap();
    let error = expect_corruption(
        JournalWriter::open_for_append(dir.path(), fast()).map(|_| ()),
        "followed by a good record",
    );
    assert!(error.to_string().contains("000001.log"), "{error}");
    assert!(
        error
            .to_string()
            .contains(&format!("at byte {}", lines[2].start)),
        "{error}"
    );
    assert!(error.to_string().contains("(seq 2)"), "{error}");
    assert_eq!(
        fs::read(segment(dir.path(), 1)).unwrap(),
        bytes,
        "nothing may be modified"
    );

    // Salvage reads past it with a warning.
    let (records, warnings) = read_all(dir.path(), ReadOptions::default().salvage(true));
    let seqs: Vec<u64> = records.unwrap().iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 3, 4, 5]);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].kind, WarningKind::Salvaged);
    let report = verify(dir.path()).unwrap();
    assert_eq!(report.corruptions.len(), 1);
    assert_eq!(report.n_records, 4);
}

#[test]
fn a_seq_gap_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = one_segment_run(dir.path(), 5);
    let lines = line_ranges(&bytes);
    let mut without_seq_3 = bytes[..lines[3].start].to_vec();
    without_seq_3.extend_from_slice(&bytes[lines[3].end..]);
    fs::write(segment(dir.path(), 1), &without_seq_3).unwrap();
    expect_corruption(
        read_all(dir.path(), ReadOptions::default()).0,
        "seq jumps from 2 to 4",
    );
    expect_corruption(
        JournalWriter::open_for_append(dir.path(), fast()).map(|_| ()),
        "seq jumps from 2 to 4",
    );
}

#[test]
fn a_repeated_record_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = one_segment_run(dir.path(), 3);
    let lines = line_ranges(&bytes);
    let mut doubled = bytes.clone();
    doubled.extend_from_slice(&bytes[lines[2].clone()]);
    fs::write(segment(dir.path(), 1), &doubled).unwrap();
    expect_corruption(
        read_all(dir.path(), ReadOptions::default()).0,
        "goes backwards",
    );
}

#[test]
fn a_missing_segment_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    assert!(multi_segment_run(dir.path(), 12) >= 3);
    fs::remove_file(segment(dir.path(), 2)).unwrap();
    expect_corruption(
        read_all(dir.path(), ReadOptions::default()).0,
        "000002.log is missing",
    );
    expect_corruption(
        JournalWriter::open_for_append(dir.path(), fast()).map(|_| ()),
        "000002.log is missing",
    );
    let report = verify(dir.path()).unwrap();
    assert!(
        report
            .corruptions
            .iter()
            .any(|c| c.message.contains("missing"))
    );
}

#[test]
fn a_missing_last_segment_is_corruption_not_a_shorter_journal() {
    // The journal records how many segments it started (`journal/last_segment`), so a deleted
    // *last* segment is told from a journal that ends there.
    let dir = tempfile::tempdir().unwrap();
    let n = multi_segment_run(dir.path(), 12);
    fs::remove_file(segment(dir.path(), n)).unwrap();
    let missing = format!("{n:06}.log is missing");
    expect_corruption(read_all(dir.path(), ReadOptions::default()).0, &missing);
    expect_corruption(
        JournalWriter::open_for_append(dir.path(), fast()).map(|_| ()),
        &missing,
    );
    let report = verify(dir.path()).unwrap();
    assert!(
        report
            .corruptions
            .iter()
            .any(|c| c.message.contains(&missing) && c.message.contains("cannot be resumed")),
        "{report:?}"
    );
    // Salvage still reads what is left, a consistent prefix.
    let salvage = ReadOptions::default().salvage(true);
    let records = read_all(dir.path(), salvage).0.unwrap();
    assert!(records.windows(2).all(|w| w[1].seq == w[0].seq + 1));
}

#[test]
fn out_of_order_segments_are_corruption() {
    let dir = tempfile::tempdir().unwrap();
    assert!(multi_segment_run(dir.path(), 12) >= 3);
    let (one, two) = (segment(dir.path(), 1), segment(dir.path(), 2));
    let temp = dir.path().join("swap");
    fs::rename(&one, &temp).unwrap();
    fs::rename(&two, &one).unwrap();
    fs::rename(&temp, &two).unwrap();
    expect_corruption(
        read_all(dir.path(), ReadOptions::default()).0,
        "out of order",
    );
}

#[test]
fn a_segment_from_another_run_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    assert!(multi_segment_run(dir.path(), 12) >= 3);
    let path = segment(dir.path(), 2);
    let text = fs::read_to_string(&path).unwrap();
    let (header, rest) = text.split_once('\n').unwrap();
    let payload = header
        .splitn(3, ' ')
        .nth(2)
        .unwrap()
        .replace("3f9a", "0000");
    let mut bytes = frame(&payload);
    bytes.extend_from_slice(rest.as_bytes());
    fs::write(&path, bytes).unwrap();
    expect_corruption(
        read_all(dir.path(), ReadOptions::default()).0,
        "belongs to run",
    );
}

#[test]
fn a_bad_header_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = one_segment_run(dir.path(), 2);
    let lines = line_ranges(&bytes);
    // A well-framed first line that is a record, not a header.
    let mut replaced = bytes[lines[1].clone()].to_vec();
    replaced.extend_from_slice(&bytes[lines[1].start..]);
    fs::write(segment(dir.path(), 1), &replaced).unwrap();
    expect_corruption(
        read_all(dir.path(), ReadOptions::default()).0,
        "not a segment header",
    );
    expect_corruption(
        JournalWriter::open_for_append(dir.path(), fast()).map(|_| ()),
        "not a segment header",
    );
}

#[test]
fn a_newer_major_version_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = one_segment_run(dir.path(), 2);
    let text = String::from_utf8(bytes).unwrap();
    let (header, rest) = text.split_once('\n').unwrap();
    let payload = header.splitn(3, ' ').nth(2).unwrap().replace(
        &format!(r#""format":"1.{}""#, apollo_store::FORMAT_MINOR),
        r#""format":"2.3""#,
    );
    let mut newer = frame(&payload);
    newer.extend_from_slice(rest.as_bytes());
    fs::write(segment(dir.path(), 1), &newer).unwrap();
    for error in [
        read_all(dir.path(), ReadOptions::default().salvage(true))
            .0
            .unwrap_err(),
        JournalWriter::open_for_append(dir.path(), fast())
            .map(|_| ())
            .unwrap_err(),
        verify(dir.path()).unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::NewerVersion, "{error}");
        assert!(error.to_string().contains("2.3"), "{error}");
        assert!(error.to_string().contains("upgrade apollo"), "{error}");
    }
}

#[test]
fn a_record_kind_of_a_newer_apollo_is_refused_not_skipped() {
    // DESIGN §17: a newer minor may add record kinds; an apollo that meets one it does not know
    // refuses ("written by a newer apollo"), in salvage mode too, and never drops it silently.
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = one_segment_run(dir.path(), 2);
    bytes.extend_from_slice(&frame(
        r#"{"seq":3,"ts":"2026-11-30T02:15:07.123456Z","kind":"unit_teleported","unit":"a"}"#,
    ));
    fs::write(segment(dir.path(), 1), &bytes).unwrap();
    for error in [
        read_all(dir.path(), ReadOptions::default().salvage(true))
            .0
            .unwrap_err(),
        read_all(dir.path(), ReadOptions::default()).0.unwrap_err(),
        verify(dir.path()).unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::NewerVersion, "{error}");
        let message = error.to_string();
        assert!(message.contains("unit_teleported"), "{message}");
        assert!(message.contains("newer apollo"), "{message}");
    }
}

#[test]
fn a_torn_segment_header_from_an_interrupted_rotation_is_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let n = multi_segment_run(dir.path(), 12);
    let records_before = read_all(dir.path(), ReadOptions::default()).0.unwrap();
    // A new segment whose header write was cut short.
    let next = segment(dir.path(), n + 1);
    let header = frame(r#"{"magic":"apollo-journal","format":"1.0"}"#);
    fs::write(&next, &header[..header.len() / 2]).unwrap();
    let (records, warnings) = read_all(dir.path(), ReadOptions::default());
    assert_eq!(records.unwrap(), records_before);
    assert_eq!(warnings[0].kind, WarningKind::TornTail);
    let (mut writer, report) = JournalWriter::open_for_append(dir.path(), fast()).unwrap();
    assert_eq!(report.last_seq, 12);
    assert!(report.torn[0].saved_to.exists());
    assert!(!next.exists() || fs::metadata(&next).unwrap().len() > 0);
    assert_eq!(writer.append_batch(&[event(13)]).unwrap(), 13);
    drop(writer);
    assert_eq!(
        read_all(dir.path(), ReadOptions::default())
            .0
            .unwrap()
            .len(),
        13
    );
}

fn never_panics(bytes: &[u8], with_header: bool) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    fs::create_dir_all(&journal).unwrap();
    let mut contents = Vec::new();
    if with_header {
        contents.extend(frame(
            r#"{"magic":"apollo-journal","format":"1.0","run_id":"r","segment":1,"prev_seq":0,"created":"2026-11-30T02:15:07.000000Z"}"#,
        ));
    }
    contents.extend_from_slice(bytes);
    fs::write(journal.join("000001.log"), &contents).unwrap();
    for salvage in [false, true] {
        let _ = read_all(dir.path(), ReadOptions::default().salvage(salvage));
    }
    let _ = verify(dir.path());
    let _ = JournalWriter::open_for_append(dir.path(), fast());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_the_reader(bytes in proptest::collection::vec(any::<u8>(), 0..600), with_header: bool) {
        never_panics(&bytes, with_header);
    }

    #[test]
    fn random_frame_like_lines_never_panic_the_reader(lines in proptest::collection::vec("[0-9a-f ]{0,12}[{}\":a-z0-9,]{0,40}\n?", 0..12), with_header: bool) {
        never_panics(lines.concat().as_bytes(), with_header);
    }
}

#[test]
fn salvage_reads_past_a_missing_segment_and_a_bad_header() {
    let dir = tempfile::tempdir().unwrap();
    let n = multi_segment_run(dir.path(), 20);
    assert!(n >= 4);
    let all = read_all(dir.path(), ReadOptions::default()).0.unwrap();
    // Segment 2's records: its lines after the header.
    let second = fs::read_to_string(segment(dir.path(), 2)).unwrap();
    let seg2_seqs: Vec<u64> = second
        .lines()
        .skip(1)
        .map(|line| {
            let json: serde_json::Value =
                serde_json::from_str(line.splitn(3, ' ').nth(2).unwrap()).unwrap();
            json["seq"].as_u64().unwrap()
        })
        .collect();
    assert!(!seg2_seqs.is_empty());
    fs::remove_file(segment(dir.path(), 2)).unwrap();
    let third = segment(dir.path(), 3);
    let mut bytes = fs::read(&third).unwrap();
    bytes[12] ^= 0x01; // inside the header's length or payload
    fs::write(&third, &bytes).unwrap();
    expect_corruption(read_all(dir.path(), ReadOptions::default()).0, "missing");
    let (records, warnings) = read_all(dir.path(), ReadOptions::default().salvage(true));
    let records = records.unwrap();
    // Everything but segment 2's records is read, in order (segment 3's despite its header).
    let expected: Vec<_> = all
        .iter()
        .filter(|r| !seg2_seqs.contains(&r.seq))
        .cloned()
        .collect();
    assert_eq!(records, expected);
    assert!(warnings.iter().any(|w| w.message.contains("missing")));
    assert!(warnings.iter().any(|w| w.message.contains("header")));
    let report = verify(dir.path()).unwrap();
    assert!(report.corruptions.len() >= 2);
    assert_eq!(report.n_records, records.len() as u64);
}

#[test]
fn extreme_seq_values_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    fs::create_dir_all(&journal).unwrap();
    let max = u64::MAX;
    let mut bytes = frame(&format!(
        r#"{{"magic":"apollo-journal","format":"1.0","run_id":"r","segment":1,"prev_seq":{max},"created":"2026-11-30T02:15:07.000000Z"}}"#
    ));
    bytes.extend(frame(&format!(
        r#"{{"seq":{max},"ts":"2026-11-30T02:15:07.000001Z","kind":"run_finished","status":"succeeded","succeeded":0,"failed":0,"skipped":0}}"#
    )));
    fs::write(journal.join("000001.log"), &bytes).unwrap();
    // The reader accepts it (seq u64::MAX follows prev_seq u64::MAX, saturated), without
    // overflowing; the writer refuses to go further.
    let (records, _) = read_all(dir.path(), ReadOptions::default());
    assert_eq!(records.unwrap().len(), 1);
    expect_corruption(
        JournalWriter::open_for_append(dir.path(), fast()).map(|_| ()),
        "largest possible value",
    );
}
