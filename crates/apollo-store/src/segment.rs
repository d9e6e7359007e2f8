//! Segment files: naming, listing, and the header record each one starts with.

use std::fs;
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// The `magic` field of every segment header.
pub const MAGIC: &str = "apollo-journal";
/// The format major version this build writes and reads. A reader refuses a newer major.
pub const FORMAT_MAJOR: u32 = 1;
/// The format minor version this build writes. Newer minors are read (they only add optional
/// fields, record kinds and variants). 1.1 added the `unit_submitted` record; 1.2 the `rerun`
/// verdict of `unit_marked`.
pub const FORMAT_MINOR: u32 = 2;

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
        let minor = br#"{"magic":"apollo-journal","format":"1.7","run_id":"r","segment":1,"prev_seq":0,"created":"2026-11-30T02:15:07.000000Z","extra":1}"#;
        assert!(SegmentHeader::decode(minor, path, 1).is_ok());
    }
}
