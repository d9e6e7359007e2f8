//! Torn write or damaged record: what a crash can leave at the end of the last segment (a
//! prefix of the last batch, zeros where delayed allocation left blocks unwritten) is cut off;
//! a last record that was written whole and damaged since is corruption (README, recovery).
//! Zeros after the last record are space the writer allocated ahead: the end, not a tear.

use std::fs;
use std::path::Path;

use apollo_core::event::{Event, SkipReason, UnitSkipped};
use apollo_store::{ErrorKind, JournalReader, JournalWriter, ReadOptions, WarningKind, verify};

use crate::support::*;

const RUN_ID: &str = "20261130T021507Z-3f9a";

/// A run whose acknowledged records are `acked` (one batch each); then `unacked` is written as
/// one more batch. Returns the segment's bytes and where the unacknowledged batch starts.
fn run_with_batch(dir: &Path, acked: &[Event], unacked: &[Event]) -> (Vec<u8>, usize) {
    let mut writer = JournalWriter::create(dir, RUN_ID, fast()).unwrap();
    for event in acked {
        writer.append_batch(std::slice::from_ref(event)).unwrap();
    }
    let batch_start = data_len(&fs::read(segment(dir, 1)).unwrap());
    if !unacked.is_empty() {
        writer.append_batch(unacked).unwrap();
    }
    drop(writer);
    (fs::read(segment(dir, 1)).unwrap(), batch_start)
}

/// A record that spans several 512-byte blocks.
fn big_event(n: u64) -> Event {
    Event::UnitSkipped(UnitSkipped {
        unit: format!("unit_{n}"),
        reason: SkipReason::UpstreamFailed {
            upstream: "u".repeat(1500),
        },
    })
}

/// The tail from `offset` is a torn write: the reader warns, recovery cuts exactly it (kept in
/// `.torn`), keeps `kept` records and appends after them; `verify` is clean.
fn assert_torn_at(dir: &Path, bytes: &[u8], offset: usize, kept: u64) {
    fs::write(segment(dir, 1), bytes).unwrap();
    let (records, warnings) = read_all(dir, ReadOptions::default());
    assert_eq!(records.unwrap().len() as u64, kept);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].kind, WarningKind::TornTail);
    assert_eq!(warnings[0].offset, offset as u64);
    let report = verify(dir).unwrap();
    assert!(
        report.is_clean() && report.torn_tail.is_some(),
        "{report:?}"
    );
    // Recovery on its own, and taking over a reader that read the journal to its end (a
    // resume's fold), whose warnings its caller may have taken: the same cut, the same next
    // seq.
    for (after_read, warnings_taken) in [(false, false), (true, false), (true, true)] {
        fs::write(segment(dir, 1), bytes).unwrap();
        remove_torn_files(dir);
        let (mut writer, report) = if after_read {
            let mut reader = JournalReader::open(dir, ReadOptions::default()).unwrap();
            assert_eq!(reader.by_ref().count() as u64, kept);
            if warnings_taken {
                assert_eq!(reader.take_warnings().len(), 1);
            }
            JournalWriter::open_for_append_after(reader, dir, fast()).unwrap()
        } else {
            JournalWriter::open_for_append(dir, fast()).unwrap()
        };
        assert_eq!(report.last_seq, kept);
        assert_eq!(report.torn.len(), 1);
        assert_eq!(report.torn[0].offset, offset as u64);
        let n_warnings = usize::from(!warnings_taken);
        assert_eq!(report.warnings.len(), n_warnings, "{:?}", report.warnings);
        assert!(
            report
                .warnings
                .iter()
                .all(|warning| warning.kind == WarningKind::TornTail)
        );
        // What was torn is kept, without the zeros allocated after it.
        assert_eq!(
            fs::read(&report.torn[0].saved_to).unwrap(),
            &bytes[offset..data_len(bytes)]
        );
        assert_eq!(fs::read(segment(dir, 1)).unwrap(), &bytes[..offset]);
        assert_eq!(writer.append_batch(&[event(99)]).unwrap(), kept + 1);
        drop(writer);
        assert!(verify(dir).unwrap().is_clean());
    }
}

/// Removes what recovery moved aside (`*.torn`).
fn remove_torn_files(dir: &Path) {
    for entry in fs::read_dir(dir.join("journal")).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().contains(".torn") {
            fs::remove_file(path).unwrap();
        }
    }
}

/// The tail from `offset` is corruption everywhere, and nothing is modified.
fn assert_corrupt_at(dir: &Path, bytes: &[u8], offset: usize, needle: &str) {
    fs::write(segment(dir, 1), bytes).unwrap();
    let error = read_all(dir, ReadOptions::default()).0.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    assert!(error.to_string().contains(needle), "{error}");
    assert!(
        error.to_string().contains(&format!("at byte {offset}")),
        "{error}"
    );
    let error = JournalWriter::open_for_append(dir, fast())
        .map(|_| ())
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    assert_eq!(fs::read(segment(dir, 1)).unwrap(), bytes);
    let report = verify(dir).unwrap();
    assert!(
        report.corruptions.len() == 1 && report.torn_tail.is_none(),
        "{report:?}"
    );
}

/// `bytes` end after `kept` whole records and zeros: read to its end without a warning,
/// `verify` clean, recovery cuts nothing and appends right after the records (over the zeros),
/// and the closed segment ends at its last record.
fn assert_clean_end_at(dir: &Path, bytes: &[u8], end: usize, kept: u64) {
    fs::write(segment(dir, 1), bytes).unwrap();
    let (records, warnings) = read_all(dir, ReadOptions::default());
    assert_eq!(records.unwrap().len() as u64, kept);
    assert!(warnings.is_empty(), "{warnings:?}");
    let report = verify(dir).unwrap();
    assert!(
        report.is_clean() && report.torn_tail.is_none(),
        "{report:?}"
    );
    for after_read in [false, true] {
        fs::write(segment(dir, 1), bytes).unwrap();
        let (mut writer, report) = if after_read {
            let mut reader = JournalReader::open(dir, ReadOptions::default()).unwrap();
            assert_eq!(reader.by_ref().count() as u64, kept);
            JournalWriter::open_for_append_after(reader, dir, fast()).unwrap()
        } else {
            JournalWriter::open_for_append(dir, fast()).unwrap()
        };
        assert_eq!(report.last_seq, kept);
        assert!(
            report.torn.is_empty() && report.warnings.is_empty(),
            "{report:?}"
        );
        // The zeros a crash left are given back at once: this writer's records change the
        // file's size.
        assert_eq!(fs::metadata(segment(dir, 1)).unwrap().len() as usize, end);
        assert_eq!(writer.append_batch(&[event(99)]).unwrap(), kept + 1);
        drop(writer);
        let after = fs::read(segment(dir, 1)).unwrap();
        assert_eq!(&after[..end], &bytes[..end]);
        assert_eq!(line_ranges(&after).last().unwrap().end, after.len());
        let (records, warnings) = read_all(dir, ReadOptions::default());
        assert_eq!(records.unwrap().len() as u64, kept + 1);
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}

#[test]
fn zeros_after_the_last_record_are_the_end_whatever_their_length() {
    // Space the writer allocated ahead, or, with delayed allocation, a batch whose blocks
    // never reached the disk before a crash: either way no record, and nothing torn.
    for n_zeros in [1, 7, 100, 511, 512, 513, 4096, 4096 + 7, 1 << 20] {
        let dir = tempfile::tempdir().unwrap();
        let (mut bytes, end) = run_with_batch(dir.path(), &[event(1), event(2)], &[]);
        bytes.resize(end + n_zeros, 0);
        assert_clean_end_at(dir.path(), &bytes, end, 2);
    }
}

#[test]
fn a_segment_being_written_has_zeros_allocated_after_its_records_and_is_trimmed_when_closed() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = JournalWriter::create(dir.path(), RUN_ID, fast()).unwrap();
    writer.append_batch(&[event(1)]).unwrap();
    let open = fs::read(segment(dir.path(), 1)).unwrap();
    let end = line_ranges(&open).last().unwrap().end;
    assert!(open.len() >= 64 * 1024, "{}", open.len());
    assert!(open[end..].iter().all(|&byte| byte == 0));
    // Read while open: the records, no warning.
    let (records, warnings) = read_all(dir.path(), ReadOptions::default());
    assert_eq!(records.unwrap().len(), 1);
    assert!(warnings.is_empty(), "{warnings:?}");
    // Past the first chunk: more space allocated, records still contiguous.
    let big: Vec<_> = (2..=80).map(big_event).collect();
    writer.append_batch(&big).unwrap();
    let open = fs::read(segment(dir.path(), 1)).unwrap();
    let end = line_ranges(&open).last().unwrap().end;
    assert!(end > 64 * 1024 && open.len() > end, "{end} {}", open.len());
    drop(writer);
    let closed = fs::read(segment(dir.path(), 1)).unwrap();
    assert_eq!(closed, &open[..end]);
    let (records, _) = read_all(dir.path(), ReadOptions::default());
    assert_eq!(records.unwrap().len(), 80);
}

#[test]
fn a_batch_written_as_zeros_or_as_a_prefix_then_zeros_is_a_torn_tail() {
    let unacked = [event(3), big_event(4), event(5)];
    let base = tempfile::tempdir().unwrap();
    let (full, start) = run_with_batch(base.path(), &[event(1), event(2)], &unacked);
    let zeroed = |from: usize, to: usize| {
        let mut bytes = full.clone();
        bytes[from..to].fill(0);
        bytes
    };
    let lines = line_ranges(&full);
    let batch_end = full.len();
    let blocks = |offset: usize| offset.next_multiple_of(512);
    // The frame holding `offset`: where the cut starts, and the records kept before it.
    let cut_at = |offset: usize| {
        let index = lines.iter().position(|line| offset < line.end).unwrap();
        (lines[index].start, index as u64 - 1)
    };
    let first_boundary = blocks(start + 1);
    // No block of the batch reached the disk: the segment ends after the acknowledged records.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(base.path(), dir.path());
    assert_clean_end_at(dir.path(), &zeroed(start, batch_end), start, 2);
    let cases = [
        // Up to the first block boundary written, the rest zeros.
        (
            zeroed(first_boundary, batch_end),
            cut_at(first_boundary).0,
            cut_at(first_boundary).1,
        ),
        // A prefix of the batch, then zeros up to a block boundary past the old end.
        (
            {
                let mut bytes = full[..lines[3].end + 40].to_vec();
                bytes.resize(blocks(bytes.len()), 0);
                bytes
            },
            lines[3].end,
            3,
        ),
        // The batch's last block written, an earlier one of the big record never: the big
        // record's newline is there but a whole block of it is zeros, and nothing good
        // follows once the last record is cut.
        (
            {
                let mut bytes = full[..lines[4].end].to_vec();
                let block = blocks(lines[4].start + 30);
                assert!(block + 512 < lines[4].end - 1);
                bytes[block..block + 512].fill(0);
                bytes
            },
            lines[4].start,
            3,
        ),
    ];
    for (index, (bytes, offset, kept)) in cases.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(base.path(), dir.path());
        eprintln!("case {index}");
        assert_torn_at(dir.path(), &bytes, offset, kept);
    }
}

#[test]
fn a_batch_whose_blocks_reached_the_disk_out_of_order_is_a_torn_tail() {
    // Records are written over zeros allocated ahead: after a power loss, any of the last
    // batch's blocks may be on disk and others not, so good records of that batch can follow
    // a hole. None of them was acknowledged (the batch's sync would have written the hole).
    let unacked = [event(3), big_event(4), event(5), big_event(6), event(7)];
    let base = tempfile::tempdir().unwrap();
    let (full, start) = run_with_batch(base.path(), &[event(1), event(2)], &unacked);
    let lines = line_ranges(&full);
    let block_in = |line: usize| {
        let block = (lines[line].start + 40).next_multiple_of(512);
        assert!(block + 512 < lines[line].end - 1, "{:?}", lines[line]);
        block..block + 512
    };
    let with_holes = |holes: &[std::ops::Range<usize>], cut: usize| {
        let mut bytes = full.clone();
        for hole in holes {
            bytes[hole.clone()].fill(0);
        }
        bytes.truncate(cut);
        bytes.resize(cut + 2048, 0);
        bytes
    };
    let end = full.len();
    // The batch's first block never written: zeros from where the write started.
    let first_block = start..(lines[3].end + 1).next_multiple_of(512);
    assert!(!start.is_multiple_of(512) && first_block.end < lines[4].end - 1);
    let across = {
        let block = (lines[4].end - 1) / 512 * 512;
        assert!(block > lines[4].start && block + 512 > lines[4].end);
        assert!(block + 512 < lines[6].end - 1);
        block..block + 512
    };
    let cases = [
        // A block inside a record of the batch.
        (vec![block_in(4)], end, lines[4].start, 3),
        (vec![first_block], end, start, 2),
        // A block holding one record's end and the next one's start.
        (vec![across], end, lines[4].start, 3),
        // Two holes, and the last record cut short.
        (vec![block_in(4), block_in(6)], end, lines[4].start, 3),
        (vec![block_in(4)], lines[7].end - 5, lines[4].start, 3),
    ];
    for (index, (holes, cut, offset, kept)) in cases.into_iter().enumerate() {
        eprintln!("case {index}");
        let dir = tempfile::tempdir().unwrap();
        copy_dir(base.path(), dir.path());
        assert_torn_at(dir.path(), &with_holes(&holes, cut), offset, kept);
    }
    // Zeros that are not whole blocks are damage, not a crash.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(base.path(), dir.path());
    let mut bytes = full.clone();
    let hole = block_in(4);
    bytes[hole.start + 7..hole.end].fill(0);
    assert_corrupt_at(
        dir.path(),
        &bytes,
        lines[4].start,
        "followed by a good record",
    );
}

#[test]
fn a_hole_in_the_first_record_of_the_last_batch_is_told_by_its_own_time() {
    // The record before the hole is of an earlier batch: the bad record's readable start
    // carries the last batch's time.
    let base = tempfile::tempdir().unwrap();
    let unacked = [big_event(3), event(4), event(5)];
    let (full, _) = run_with_batch(base.path(), &[event(1), event(2)], &unacked);
    let lines = line_ranges(&full);
    let block = (lines[3].start + 100).next_multiple_of(512);
    assert!(block + 512 < lines[3].end - 1);
    let mut bytes = full.clone();
    bytes[block..block + 512].fill(0);
    let dir = tempfile::tempdir().unwrap();
    copy_dir(base.path(), dir.path());
    assert_torn_at(dir.path(), &bytes, lines[3].start, 2);
}

#[test]
fn zeros_off_a_block_boundary_in_a_later_bad_record_are_corruption() {
    // The first hole is a crash's, the second does not start on a block boundary (the block
    // holding its start also holds a good record, which reached the disk).
    let base = tempfile::tempdir().unwrap();
    let unacked = [event(3), big_event(4), event(5), big_event(6), event(7)];
    let (full, _) = run_with_batch(base.path(), &[event(1), event(2)], &unacked);
    let lines = line_ranges(&full);
    let mut bytes = full.clone();
    let first = (lines[4].start + 40).next_multiple_of(512);
    bytes[first..first + 512].fill(0);
    let second = (lines[6].start + 40).next_multiple_of(512);
    assert!(second + 512 < lines[6].end - 1);
    bytes[second + 7..second + 512].fill(0);
    let dir = tempfile::tempdir().unwrap();
    copy_dir(base.path(), dir.path());
    fs::write(segment(dir.path(), 1), &bytes).unwrap();
    let error = read_all(dir.path(), ReadOptions::default()).0.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    assert!(
        error
            .to_string()
            .contains(&format!("at byte {}", lines[4].start)),
        "{error}"
    );
    let error = JournalWriter::open_for_append(dir.path(), fast())
        .map(|_| ())
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    assert_eq!(fs::read(segment(dir.path(), 1)).unwrap(), bytes);
    let report = verify(dir.path()).unwrap();
    assert!(
        report.corruptions.len() == 2 && report.torn_tail.is_none(),
        "{report:?}"
    );
}

#[test]
fn consecutive_batches_never_share_a_time_even_on_a_frozen_clock_or_across_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let options = || fast().clock(clock.clock());
    let mut writer = JournalWriter::create(dir.path(), RUN_ID, options()).unwrap();
    writer.append_batch(&[event(1), event(2)]).unwrap();
    writer.append_batch_unsynced(&[big_event(3)]).unwrap();
    // An empty sync writes no record: it takes no time from the next batch.
    writer.append_batch(&[]).unwrap();
    writer.append_batch(&[event(4)]).unwrap();
    drop(writer);
    let (mut writer, _) = JournalWriter::open_for_append(dir.path(), options()).unwrap();
    writer.append_batch(&[event(5)]).unwrap();
    drop(writer);
    let (records, _) = read_all(dir.path(), ReadOptions::default());
    let times: Vec<_> = records.unwrap().iter().map(|record| record.ts).collect();
    assert_eq!(times[0], times[1], "one batch, one time");
    for (index, pair) in times[1..].windows(2).enumerate() {
        assert_ne!(
            pair[0],
            pair[1],
            "batches {} and {} share a time",
            index + 1,
            index + 2
        );
    }
    // So a block of zeros in an acknowledged batch before the last is still corruption.
    let bytes = fs::read(segment(dir.path(), 1)).unwrap();
    let lines = line_ranges(&bytes);
    let block = (lines[3].start + 100).next_multiple_of(512);
    let mut damaged = bytes.clone();
    damaged[block..block + 512].fill(0);
    assert_corrupt_at(
        dir.path(),
        &damaged,
        lines[3].start,
        "followed by a good record",
    );
}

#[test]
fn a_hole_in_acknowledged_records_before_the_last_batch_is_corruption() {
    // Each record its own batch, each acknowledged: a block of zeros in one of them (a disk
    // that lost it) followed by later batches is damage, whatever batch follows.
    for n_after in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let mut acked = vec![event(1), big_event(2)];
        acked.extend((3..3 + n_after).map(event));
        let (mut bytes, _) = run_with_batch(dir.path(), &acked, &[]);
        let lines = line_ranges(&bytes);
        let block = (lines[2].start + 40).next_multiple_of(512);
        assert!(block + 512 < lines[2].end - 1);
        bytes[block..block + 512].fill(0);
        bytes.resize(bytes.len() + 4096, 0);
        assert_corrupt_at(
            dir.path(),
            &bytes,
            lines[2].start,
            "followed by a good record",
        );
    }
}

#[test]
fn a_batch_cut_at_every_byte_is_a_torn_tail_from_its_first_incomplete_record() {
    let base = tempfile::tempdir().unwrap();
    let (full, start) = run_with_batch(base.path(), &[event(1)], &[event(2), event(3), event(4)]);
    let lines = line_ranges(&full);
    // Cut as an append leaves it, and with the allocated zeros still behind the cut (a
    // write into space allocated ahead, cut short).
    for zeros in [0, 700] {
        for cut in start + 1..=full.len() {
            let mut bytes = full[..cut].to_vec();
            bytes.resize(cut + zeros, 0);
            let kept = lines.iter().filter(|line| line.end <= cut).count() as u64 - 1;
            let dir = tempfile::tempdir().unwrap();
            copy_dir(base.path(), dir.path());
            match lines.iter().find(|line| line.start < cut && cut < line.end) {
                Some(torn) => assert_torn_at(dir.path(), &bytes, torn.start, kept),
                // A frame boundary: nothing torn.
                None => assert_clean_end_at(dir.path(), &bytes, cut, kept),
            }
        }
    }
}

#[test]
fn every_bit_flip_in_the_last_record_or_the_space_after_it_is_caught_and_loses_nothing() {
    // The last segment of a run that crashed: its last record is acknowledged, zeros follow.
    let base = tempfile::tempdir().unwrap();
    let (full, end) = run_with_batch(base.path(), &[event(1), event(2)], &[]);
    let last = line_ranges(&full).last().unwrap().clone();
    let mut bytes = full.clone();
    bytes.resize(end + 1536, 0);
    let dir = tempfile::tempdir().unwrap();
    copy_dir(base.path(), dir.path());
    for byte in last.start..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.clone();
            flipped[byte] ^= 1 << bit;
            fs::write(segment(dir.path(), 1), &flipped).unwrap();
            let what = format!("bit {bit} of byte {byte}");
            // Never a wrong record; either the damage is reported, or the flip was in the
            // space after the records and both of them are kept.
            match read_all(dir.path(), ReadOptions::default()).0 {
                Err(error) => assert_eq!(error.kind(), ErrorKind::Corruption, "{what}: {error}"),
                Ok(records) => {
                    assert!(byte >= end, "{what}: the damaged record read back");
                    assert_eq!(records.len(), 2, "{what}");
                }
            }
            match JournalWriter::open_for_append(dir.path(), fast()) {
                Err(error) => assert_eq!(error.kind(), ErrorKind::Corruption, "{what}: {error}"),
                Ok((_, report)) => {
                    assert!(byte >= end, "{what}: recovery accepted the damaged record");
                    assert_eq!(report.last_seq, 2, "{what}");
                }
            }
            remove_torn_files(dir.path());
        }
    }
}

#[test]
fn a_damaged_last_record_with_zeros_after_it_is_still_corruption() {
    // A flip in the acknowledged last record, then a crash leaves zeros after it: the zeros
    // are cut as a torn tail only if they start right after a good record; here the damaged
    // record was written whole, so it is corruption.
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, end) = run_with_batch(dir.path(), &[event(1), event(2)], &[]);
    let last = line_ranges(&bytes).last().unwrap().clone();
    bytes[last.start + 30] ^= 0x01;
    bytes.resize(end + 4096, 0);
    assert_corrupt_at(dir.path(), &bytes, last.start, "may have been acknowledged");
}

#[test]
fn a_single_zero_byte_in_the_last_record_is_corruption_not_unwritten_data() {
    // A flipped bit can make a zero byte (a space, 0x20, loses bit 5), but only a lone one:
    // unwritten data is a run of zeros ending on a block boundary or at the end of the file.
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, _) = run_with_batch(dir.path(), &[event(1), big_event(2)], &[]);
    let last = line_ranges(&bytes).last().unwrap().clone();
    let space = last.start + 8; // the space after the checksum
    assert_eq!(bytes[space], b' ');
    bytes[space] = 0;
    assert_corrupt_at(dir.path(), &bytes, last.start, "not a torn write");
    // The same for a zero byte just before a block boundary inside the record.
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, _) = run_with_batch(dir.path(), &[event(1), big_event(2)], &[]);
    let last = line_ranges(&bytes).last().unwrap().clone();
    let before_boundary = (last.start + 100).next_multiple_of(512) - 1;
    bytes[before_boundary] = 0;
    assert_corrupt_at(dir.path(), &bytes, last.start, "not a torn write");
}

#[test]
fn a_flipped_length_that_runs_past_the_end_is_corruption_not_a_cut_write() {
    // The file ends inside the frame by its (damaged) length, but the frame's newline is
    // there: a write cut short never leaves a newline, so this was written whole.
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, _) = run_with_batch(dir.path(), &[event(1), event(2)], &[]);
    let last = line_ranges(&bytes).last().unwrap().clone();
    let length = last.start + 9;
    assert!(bytes[length].is_ascii_digit() && bytes[length] < b'8');
    bytes[length] += 2; // e.g. "118" -> "318": past the end of the file
    assert_corrupt_at(dir.path(), &bytes, last.start, "may have been acknowledged");
}

#[test]
fn a_header_written_whole_and_damaged_is_corruption_not_a_torn_rotation() {
    // A last segment holding only its header (a rotation that finished): a flipped bit in the
    // header used to move the segment aside as torn.
    let dir = tempfile::tempdir().unwrap();
    let mut options = fast();
    options.segment_max_bytes = 300;
    let mut writer = JournalWriter::create(dir.path(), RUN_ID, options).unwrap();
    for n in 1..=6 {
        writer.append_batch(&[event(n)]).unwrap();
    }
    drop(writer);
    let n = fs::read_dir(dir.path().join("journal"))
        .unwrap()
        .filter(|entry| {
            let name = entry.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".log")
        })
        .count() as u64;
    let next = segment(dir.path(), n + 1);
    let mut header = frame(&format!(
        r#"{{"magic":"apollo-journal","format":"1.3","run_id":"{RUN_ID}","segment":{},"prev_seq":6,"created":"2026-11-30T02:15:07.000000Z"}}"#,
        n + 1
    ));
    let intact = header.clone();
    header[40] ^= 0x02;
    fs::write(&next, &header).unwrap();
    let error = read_all(dir.path(), ReadOptions::default()).0.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    assert!(error.to_string().contains("not a torn write"), "{error}");
    let error = JournalWriter::open_for_append(dir.path(), fast())
        .map(|_| ())
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    assert_eq!(fs::read(&next).unwrap(), header, "nothing moved aside");
    assert!(!verify(dir.path()).unwrap().is_clean());

    // The same header cut short, or never written (zeros), is a rotation torn by a crash.
    for torn in [intact[..intact.len() - 1].to_vec(), vec![0; intact.len()]] {
        fs::write(&next, &torn).unwrap();
        let (records, warnings) = read_all(dir.path(), ReadOptions::default());
        assert_eq!(records.unwrap().len(), 6);
        assert_eq!(warnings[0].kind, WarningKind::TornTail);
        let (_, report) = JournalWriter::open_for_append(dir.path(), fast()).unwrap();
        assert_eq!((report.last_seq, report.torn.len()), (6, 1));
        assert!(!next.exists());
        fs::remove_file(&report.torn[0].saved_to).unwrap();
    }
}
