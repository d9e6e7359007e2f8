//! Segment files: naming, listing, and the header record each one starts with.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// The `magic` field of every segment header.
pub const MAGIC: &str = "apollo-journal";
/// The format major version this build writes and reads. A reader refuses a newer major.
pub const FORMAT_MAJOR: u32 = 1;
/// The format minor version this build writes. Newer minors are read (they only add optional
/// fields, record kinds and variants). 1.1 added the `unit_submitted` record; 1.2 the pipeline
/// `identity` of `run_started`, the `inputs_manifest` of `unit_started` (an input list too
/// large for a record) and the `rerun` verdict of `unit_marked`; 1.3 the `unit_files` record
/// (an attempt's manifest of declared input files or outputs, whose bytes the blob store
/// keeps), the `run_reproduces` record (`apollo reproduce`'s runs), the `hook_finished`
/// record (a pipeline hook ran after the run ended), the `unit_reused` record (a unit reused
/// from an earlier run), the `reused` count of `run_finished`, the run's `params` in
/// `run_started` and the `reattached_from` of `unit_submitted` (an attempt that took over the
/// Slurm job an attempt left in flight when apollo died); 1.4 zero-filled space after a
/// segment's last record (allocated ahead by the writer, trimmed when it closes the segment;
/// a reader reads to the last non-zero byte, and an older one calls the zeros a torn tail);
/// 1.5 the `kind` of `run_started` (`reproduction` for `apollo reproduce`'s runs, absent for
/// an ordinary run) and the `when` reason of `unit_skipped` (a `when:` false at load); 1.6
/// the `durability` of `run_started` (`batched` or `none`; absent for `fsync`, the default); 1.7
/// the `partition`, `nodes` and `mem_mib` of `unit_submitted` (what a cluster job asked for, the
/// cost is priced by); 1.8 the run kind `bisect` (`apollo bisect`'s runs); 1.9 the
/// `deadlines` of `run_started` (the run's and its units' `deadline:`, resolved when the run
/// started, in UTC); 1.10 the `run_late` record (the run's predicted finish passed its
/// deadline, or the deadline came with units not done: written once, before the `on_late`
/// hook); 1.11 the `restored` files of `unit_reused` (outputs put back from the blob store)
/// and the `reproduction_compared` record (a reproduction's verdict, after its
/// `run_finished`); 1.12 the phase `when` (a unit's `when: {command}`, run as a phase of its
/// own) and a `unit_skipped` with reason `when` just after the `unit_finished` of an attempt
/// whose condition was false.
pub const FORMAT_MINOR: u32 = 12;

/// The name of segment `number`: six digits, zero-padded, `.log`.
pub(crate) fn segment_file_name(number: u64) -> String {
    format!("{number:06}.log")
}

/// The number of a segment file name, if it is one (`000012.log` → 12).
pub(crate) fn parse_segment_file_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".log")?;
    if stem.len() < 6 || !stem.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// A segment file found in a journal folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegmentFile {
    pub(crate) number: u64,
    pub(crate) path: PathBuf,
}

/// The segment files of a journal folder, sorted by number (not checked for gaps).
pub(crate) fn list_segment_files(journal_dir: &Path) -> Result<Vec<SegmentFile>, StoreError> {
    let entries = match fs::read_dir(journal_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::NotFound {
                what: format!("journal folder {}", journal_dir.display()),
            });
        }
        Err(source) => return Err(StoreError::io("list", journal_dir, source)),
    };
    let mut segments = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| StoreError::io("list", journal_dir, source))?;
        let name = entry.file_name();
        if let Some(number) = name.to_str().and_then(parse_segment_file_name) {
            segments.push(SegmentFile {
                number,
                path: entry.path(),
            });
        }
    }
    segments.sort_by_key(|segment| segment.number);
    Ok(segments)
}

/// Opens a segment for reading, with its length: only a regular file is read. A segment that
/// is a symbolic link, a FIFO, a device or a folder is a corruption naming the file, found
/// without blocking (the file is opened through `apollo_core::safe_file`, with `O_NOFOLLOW |
/// O_NONBLOCK`, and checked with `fstat` before any read): a FIFO or `/dev/zero` would
/// otherwise block or never end.
pub(crate) fn open_segment_for_read(path: &Path) -> Result<(File, u64), StoreError> {
    use apollo_core::safe_file::{SafeOpen, SafeOpenError};
    let not_regular = |found: &str| {
        StoreError::corruption(
            path,
            0,
            None,
            format!("the segment is {found}, not a regular file"),
        )
    };
    match apollo_core::safe_file::open(path, SafeOpen::NO_FOLLOW) {
        Ok((file, metadata)) => Ok((file, metadata.len())),
        Err(error) if error.is_not_found() => Err(StoreError::NotFound {
            what: format!("segment {}", path.display()),
        }),
        Err(SafeOpenError::SymbolicLink) => Err(not_regular("a symbolic link")),
        Err(SafeOpenError::NotRegular(file_type)) => {
            Err(not_regular(apollo_core::safe_file::describe(file_type)))
        }
        Err(SafeOpenError::Stat(error)) => Err(StoreError::io("stat", path, error)),
        Err(SafeOpenError::Open(error)) => Err(StoreError::io("open", path, error)),
        Err(other) => Err(StoreError::io("open", path, std::io::Error::other(other))),
    }
}

/// Where a segment's data ends: after its last non-zero byte. The writer allocates space
/// ahead of its records by writing zeros (so that a sync need not commit a change of the
/// file's size or blocks), and never writes a zero byte itself: a run of zeros at the end of
/// a segment is space not yet written, and a reader reads only up to this offset. `len` is
/// the file's length; the file's read position is left alone.
pub(crate) fn data_end(file: &File, len: u64) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    // The last byte of a frame is a newline: one small read finds the end of a segment that
    // was trimmed when its writer closed it; an unfinished one is searched back block by block
    // (at most a chunk of allocated space, see `writer.rs`).
    let mut block = vec![0u8; 4096];
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let want = &mut block[..usize::try_from(end - start).unwrap_or(0)];
        // A writer may trim the file meanwhile: a short read is its new end.
        let mut n_read = 0;
        while n_read < want.len() {
            match file.read_at(&mut want[n_read..], start + n_read as u64) {
                Ok(0) => break,
                Ok(n) => n_read += n,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        if let Some(last) = want[..n_read].iter().rposition(|&byte| byte != 0) {
            return Ok(start + last as u64 + 1);
        }
        end = start;
        if block.len() < 64 * 1024 {
            block.resize(block.len() * 4, 0);
        }
    }
    Ok(0)
}

/// Whether the segment at `path` ends at its last record: it holds no space allocated ahead,
/// as its writer leaves it when it closes it. Records written to it later change its size.
pub(crate) fn is_trimmed(path: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let Ok((file, len)) = open_segment_for_read(path) else {
        return false;
    };
    let mut last = [0u8; 1];
    len == 0
        || file
            .read_at(&mut last, len - 1)
            .is_ok_and(|n| n == 1 && last[0] != 0)
}

/// The file in a journal folder that records the highest segment number the writer started
/// (written at each rotation, once the new segment's header is durable; absent while the
/// journal has one segment). A journal whose segments stop below it lost its last segments.
pub(crate) const LAST_SEGMENT_FILE: &str = "last_segment";

/// A corruption naming the first missing segment when the journal recorded more segments
/// (`journal/last_segment`) than are present: a deleted last segment is not mistaken for a
/// journal that simply ends there.
pub(crate) fn check_last_segment(
    journal_dir: &Path,
    segments: &[SegmentFile],
) -> Result<(), StoreError> {
    use crate::safe_dir::{Access, Dir};
    use std::io::Read;
    let path = journal_dir.join(LAST_SEGMENT_FILE);
    let opened =
        Dir::open(journal_dir).and_then(|dir| dir.open_file(LAST_SEGMENT_FILE, Access::Read));
    let mut file = match opened {
        Ok(file) => file,
        Err(StoreError::NotFound { .. }) => return Ok(()),
        Err(StoreError::UnexpectedFileType { found, .. }) => {
            return Err(StoreError::corruption(
                &path,
                0,
                None,
                format!("the record of the journal's last segment is {found}, not a regular file"),
            ));
        }
        Err(error) => return Err(error),
    };
    let mut text = String::new();
    (&mut file)
        .take(64)
        .read_to_string(&mut text)
        .map_err(|source| StoreError::io("read", &path, source))?;
    let Ok(recorded) = text.trim().parse::<u64>() else {
        return Err(StoreError::corruption(
            &path,
            0,
            None,
            format!("the record of the journal's last segment ({text:?}) is not a number"),
        ));
    };
    let highest = segments.last().map_or(0, |segment| segment.number);
    if recorded > highest {
        let missing = highest + 1;
        return Err(StoreError::corruption(
            journal_dir.join(segment_file_name(missing)),
            0,
            None,
            format!(
                "segment {} is missing: the journal was written up to segment {} but ends with {}; the records after it are lost, so the run is not finished and cannot be resumed",
                segment_file_name(missing),
                segment_file_name(recorded),
                if highest == 0 {
                    "no segment".to_owned()
                } else {
                    segment_file_name(highest)
                },
            ),
        ));
    }
    Ok(())
}

/// The first gap in the numbering 1..=n of `segments`, as a corruption error.
pub(crate) fn check_numbering(
    journal_dir: &Path,
    segments: &[SegmentFile],
) -> Result<(), StoreError> {
    for (index, segment) in segments.iter().enumerate() {
        let expected = index as u64 + 1;
        if segment.number != expected {
            return Err(StoreError::corruption(
                journal_dir.join(segment_file_name(expected)),
                0,
                None,
                format!(
                    "segment {} is missing (the next one present is {})",
                    segment_file_name(expected),
                    segment_file_name(segment.number)
                ),
            ));
        }
    }
    Ok(())
}

/// The first record of every segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SegmentHeader {
    pub(crate) magic: String,
    /// `major.minor`.
    pub(crate) format: String,
    pub(crate) run_id: String,
    /// This segment's number, equal to the number in its file name.
    pub(crate) segment: u64,
    /// The seq of the last record before this segment (0 for the first segment).
    pub(crate) prev_seq: u64,
    /// When the segment was started; no record in it is older (on a clock that does not step
    /// back), and no record of an earlier segment is newer.
    pub(crate) created: String,
}

impl SegmentHeader {
    pub(crate) fn new(run_id: &str, segment: u64, prev_seq: u64, created: DateTime<Utc>) -> Self {
        Self {
            magic: MAGIC.to_owned(),
            format: format!("{FORMAT_MAJOR}.{FORMAT_MINOR}"),
            run_id: run_id.to_owned(),
            segment,
            prev_seq,
            created: created.to_rfc3339_opts(SecondsFormat::Micros, true),
        }
    }

    pub(crate) fn to_payload(&self) -> Vec<u8> {
        // Serializing a struct of strings and integers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub(crate) fn created_at(&self) -> Option<DateTime<Utc>> {
        DateTime::parse_from_rfc3339(&self.created)
            .ok()
            .map(|ts| ts.with_timezone(&Utc))
    }

    /// Decodes and checks a header payload read from `path` (whose number is `number`).
    pub(crate) fn decode(payload: &[u8], path: &Path, number: u64) -> Result<Self, StoreError> {
        #[derive(Deserialize)]
        struct Probe {
            magic: Option<String>,
            format: Option<String>,
        }
        let bad = |what: String| StoreError::corruption(path, 0, None, what);
        let probe: Probe = serde_json::from_slice(payload)
            .map_err(|error| bad(format!("the segment header is not a JSON object: {error}")))?;
        if probe.magic.as_deref() != Some(MAGIC) {
            return Err(bad(format!(
                "the first record is not a segment header (magic {:?}, expected {MAGIC:?})",
                probe.magic.unwrap_or_default()
            )));
        }
        let format = probe.format.unwrap_or_default();
        let major = format
            .split_once('.')
            .and_then(|(major, minor)| minor.parse::<u32>().ok().and(major.parse::<u32>().ok()))
            .ok_or_else(|| {
                bad(format!(
                    "the header's format version {format:?} is malformed"
                ))
            })?;
        if major > FORMAT_MAJOR {
            return Err(StoreError::NewerVersion {
                path: path.to_path_buf(),
                found: format,
                supported: format!("{FORMAT_MAJOR}.{FORMAT_MINOR}"),
            });
        }
        if major < FORMAT_MAJOR {
            return Err(bad(format!(
                "format version {format} is older than any this apollo reads"
            )));
        }
        let header: SegmentHeader = serde_json::from_slice(payload)
            .map_err(|error| bad(format!("the segment header is malformed: {error}")))?;
        if header.segment != number {
            return Err(bad(format!(
                "the header says segment {} but the file is segment {number} (segments out of order or renamed)",
                header.segment
            )));
        }
        if header.created_at().is_none() {
            return Err(bad(format!(
                "the header's creation time {:?} is not RFC 3339",
                header.created
            )));
        }
        Ok(header)
    }
}

/// Whether `journal_dir` holds at least one record after its first segment's header. A run
/// without one recorded nothing — apollo was killed (or failed) while creating it, before its
/// `run_started` was acknowledged — so it is not a run, and not a corrupt one either.
///
/// A journal that cannot be read (`EACCES`, `EIO`, a FIFO or a link loop where the folder
/// belongs) counts as having records: the run is listed, and the reader says what is wrong
/// with it (a listing shows it corrupt; `prune` and eviction, which must know every blob it
/// references, refuse). Hidden, it would lose its blobs to their sweeps. Only what is
/// missing (`ENOENT`: no journal folder, no segment) counts as nothing recorded.
pub(crate) fn has_records(journal_dir: &Path) -> bool {
    use std::io::Read;
    let unreadable = |error: &std::io::Error| error.kind() != std::io::ErrorKind::NotFound;
    let entries = match fs::read_dir(journal_dir) {
        Ok(entries) => entries,
        Err(error) => return unreadable(&error),
    };
    let mut segments: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let path = match entry {
            Ok(entry) => entry.path(),
            Err(error) if unreadable(&error) => return true,
            Err(_) => continue,
        };
        if path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.ends_with(".log") && !name.starts_with('.'))
        {
            segments.push(path);
        }
    }
    // A journal rotates only after records were acknowledged, and `last_segment` is written
    // only at a rotation: a second segment or that file means the run recorded something,
    // whatever its first segment holds now (a damaged start is reported, never skipped).
    let last_segment_seen =
        match fs::symlink_metadata(journal_dir.join(crate::segment::LAST_SEGMENT_FILE)) {
            Ok(_) => true,
            Err(error) => unreadable(&error),
        };
    if segments.len() > 1 || last_segment_seen {
        return true;
    }
    let Some(first_segment) = segments.into_iter().min() else {
        return false;
    };
    let mut file = match crate::segment::open_segment_for_read(&first_segment) {
        Ok((file, _)) => file,
        // Something that is not a regular file where the first segment belongs: not an empty
        // run creation but damage, which the reader reports (never hidden, never read).
        Err(StoreError::Corruption { .. }) => return true,
        // Removed meanwhile (the run was pruned): nothing to list.
        Err(StoreError::NotFound { .. }) => return false,
        // EACCES, EIO: the reader reports it (see above).
        Err(_) => return true,
    };
    // A record ends with a newline: the run recorded something when a second newline follows
    // the header's. The first record is `run_started`, which names every unit (90 KB at
    // 10,000 units), and every listing of the runs asks this of each run: the byte where the
    // first frame's length field says it ends is looked at first, and the segment is read
    // to its second newline only when that byte is not one.
    let mut buffer = vec![0u8; 4096];
    if first_frame_is_whole(&file, &mut buffer) {
        return true;
    }
    let mut newlines = 0;
    loop {
        match file.read(&mut buffer) {
            Ok(0) => return false,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            // EIO and the like: the reader reports it (see above).
            Err(_) => return true,
            Ok(n_read) => {
                newlines += buffer[..n_read]
                    .iter()
                    .filter(|&&byte| byte == b'\n')
                    .count();
                if newlines >= 2 {
                    return true;
                }
            }
        }
    }
}

/// Whether the byte where the first frame of `segment` says it ends (after the header line,
/// in `<crc hex8> <len> <payload>\n`) is a newline: then the segment has a second newline,
/// whatever else is true of the frame. `false` says nothing (a short or damaged start).
pub(crate) fn first_frame_is_whole(segment: &std::fs::File, buffer: &mut [u8]) -> bool {
    use std::os::unix::fs::FileExt;
    let Ok(n_read) = segment.read_at(buffer, 0) else {
        return false;
    };
    let start = &buffer[..n_read];
    let Some(header_end) = start.iter().position(|&byte| byte == b'\n') else {
        return false;
    };
    // The frame's length field: after the checksum's 8 digits and a space, up to a space.
    let Some(frame) = start.get(header_end + 1 + 9..) else {
        return false;
    };
    let Some(len_end) = frame.iter().take(12).position(|&byte| byte == b' ') else {
        return false;
    };
    let Some(len) = std::str::from_utf8(&frame[..len_end])
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    else {
        return false;
    };
    let newline_at = (header_end + 1 + 9 + len_end + 1) as u64 + len;
    let mut byte = [0u8];
    matches!(segment.read_at(&mut byte, newline_at), Ok(1)) && byte[0] == b'\n'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_round_trip() {
        assert_eq!(segment_file_name(1), "000001.log");
        assert_eq!(parse_segment_file_name("000001.log"), Some(1));
        assert_eq!(parse_segment_file_name("1234567.log"), Some(1_234_567));
        assert_eq!(parse_segment_file_name("000001.log.torn"), None);
        assert_eq!(parse_segment_file_name("01.log"), None);
    }

    #[test]
    fn a_newer_major_is_refused_and_a_newer_minor_read() {
        let path = Path::new("/j/000001.log");
        let newer = br#"{"magic":"apollo-journal","format":"2.0","something":"else"}"#;
        let error = SegmentHeader::decode(newer, path, 1).unwrap_err();
        assert!(matches!(error, StoreError::NewerVersion { .. }), "{error}");
        assert!(error.to_string().contains("upgrade apollo"), "{error}");
        let minor = br#"{"magic":"apollo-journal","format":"1.9","run_id":"r","segment":1,"prev_seq":0,"created":"2026-11-30T02:15:07.000000Z","extra":1}"#;
        assert!(SegmentHeader::decode(minor, path, 1).is_ok());
    }
}
