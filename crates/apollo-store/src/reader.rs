//! Streaming a run's records across its segments, in order, in constant memory.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

mod verbatim;

pub(crate) use verbatim::decode as decode_exact;

use crate::Record;
use crate::error::{StoreError, Warning, WarningKind};
use crate::frame::{FrameReader, TailVerdict};
use crate::record::{DecodeError, decode_record};
use crate::safe_dir::{ContentStamp, content_stamp};
use crate::segment::{
    FORMAT_MAJOR, FORMAT_MINOR, SegmentFile, SegmentHeader, check_last_segment, check_numbering,
    data_end, list_segment_files, open_segment_for_read,
};

/// How to read a journal.
///
/// Start from [`ReadOptions::default`] (strict: stop at the first corruption; every record)
/// and change what you need with the chainable setters; new options may be added in any
/// release, so the struct cannot be built with a literal outside this crate:
///
/// ```
/// use apollo_store::ReadOptions;
///
/// let options = ReadOptions::default().salvage(true);
/// assert!(options.salvage);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Read past bad records, bad headers, sequence gaps and missing segments, with a
    /// [`Warning`] for each, instead of stopping with a [`StoreError::Corruption`].
    /// A newer format version is refused even in salvage mode.
    pub salvage: bool,
    /// Only records with `ts >= since`; segments that end before it are not opened.
    pub since: Option<DateTime<Utc>>,
    /// Only records with `ts <= until`; segments that start after it are not opened.
    pub until: Option<DateTime<Utc>>,
}

impl ReadOptions {
    /// With salvage mode on or off: on, damage is read past with a [`Warning`] for each
    /// instead of ending the read with an error.
    pub fn salvage(mut self, salvage: bool) -> Self {
        self.salvage = salvage;
        self
    }

    /// Only records written at or after `since`.
    pub fn since(mut self, since: DateTime<Utc>) -> Self {
        self.since = Some(since);
        self
    }

    /// Only records written at or before `until`.
    pub fn until(mut self, until: DateTime<Utc>) -> Self {
        self.until = Some(until);
        self
    }
}

/// What the reader found at the start of a segment.
#[derive(Debug, Clone)]
pub(crate) enum HeaderState {
    /// A good header.
    Good(SegmentHeader),
    /// The header of the last segment is incomplete or damaged and nothing good follows it: a
    /// rotation torn by a crash. The segment holds no records.
    Torn,
    /// A damaged header in salvage mode; the segment's records are read anyway, from the
    /// first good frame after it (`None`: there is none).
    Salvaged(Option<u64>),
}

#[derive(Debug)]
pub(crate) struct SegmentEntry {
    pub(crate) file: SegmentFile,
    pub(crate) header: HeaderState,
}

struct Current {
    frames: FrameReader,
    index: usize,
}

/// Reads the records of one run, segment by segment, in order; an iterator of
/// `Result<Record, StoreError>`.
///
/// Memory does not grow with the journal: one segment is open at a time and one record is
/// decoded at a time. A torn tail (a bad last record of the last segment whose bytes are what
/// an unfinished write leaves: a prefix of a frame, or zeros in whole blocks) ends the
/// iteration with a [`Warning`], not an error; anything else that is wrong — a damaged last
/// record that was written whole included — ends it with a [`StoreError::Corruption`] unless
/// [`ReadOptions::salvage`] is set.
/// Readers never modify files: only [`JournalWriter::open_for_append`](crate::JournalWriter::open_for_append)
/// cuts a torn tail off.
pub struct JournalReader {
    journal_dir: PathBuf,
    segments: Vec<SegmentEntry>,
    next_segment: usize,
    end_segment: usize,
    current: Option<Current>,
    expected_seq: Option<u64>,
    last_seq: Option<u64>,
    n_records: u64,
    options: ReadOptions,
    warnings: Vec<Warning>,
    finished: bool,
    payload: Vec<u8>,
    run_id: Option<String>,
    skip_through: Option<u64>,
    /// The last segment as this reader opened it, when its header was good.
    last_segment_read: Option<ContentStamp>,
    /// Where the torn tail of the last segment starts, if the reading ended on one.
    torn_at: Option<u64>,
    /// The iteration reached the journal's end (or its torn tail) without an error.
    read_to_end: bool,
}

/// What the reader's loop produced: a decoded record, or a payload [`verbatim::recognize`]
/// accepted (its parts in `JournalReader::payload`). Returned by value once per record:
/// boxing the record would cost an allocation per record for nothing.
#[allow(clippy::large_enum_variant)]
enum Next {
    Decoded(Record),
    Verbatim(verbatim::Verbatim),
}

impl std::fmt::Debug for JournalReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalReader")
            .field("journal_dir", &self.journal_dir)
            .field("segments", &self.segments.len())
            .field("next_segment", &self.next_segment)
            .field("expected_seq", &self.expected_seq)
            .finish_non_exhaustive()
    }
}

impl JournalReader {
    /// Opens the journal of the run in `run_dir` (the folder holding `journal/`).
    ///
    /// Reads every segment's header (to check numbering, run id and version and to pick the
    /// segments that cover `since`/`until`); records are read lazily by the iterator.
    pub fn open(run_dir: &Path, options: ReadOptions) -> Result<Self, StoreError> {
        Self::open_from(run_dir, options, false)
    }

    /// Like [`open`](Self::open), but only the last segment's records are read (the writer's
    /// recovery, run listing).
    pub(crate) fn open_last_segment(run_dir: &Path) -> Result<Self, StoreError> {
        Self::open_from(run_dir, ReadOptions::default(), true)
    }

    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    fn open_from(
        run_dir: &Path,
        options: ReadOptions,
        last_only: bool,
    ) -> Result<Self, StoreError> {
        let journal_dir = run_dir.join("journal");
        let files = list_segment_files(&journal_dir)?;
        let mut warnings = Vec::new();
        if let Err(error) = check_numbering(&journal_dir, &files) {
            if !options.salvage {
                return Err(error);
            }
            warnings.push(salvage_warning(error));
        }
        match check_last_segment(&journal_dir, &files) {
            Err(error @ StoreError::Corruption { .. }) if options.salvage => {
                warnings.push(salvage_warning(error));
            }
            Err(error) => return Err(error),
            Ok(()) => {}
        }
        let n_files = files.len();
        let mut segments = Vec::with_capacity(n_files);
        let mut run_id: Option<String> = None;
        for (index, file) in files.into_iter().enumerate() {
            let is_last = index + 1 == n_files;
            let header = match probe_header(&file, is_last)? {
                Ok(header) => {
                    if let Some(first) = &run_id {
                        if *first != header.run_id {
                            let error = StoreError::corruption(
                                &file.path,
                                0,
                                None,
                                format!(
                                    "the segment belongs to run {} but the journal's first segment to run {first}",
                                    header.run_id
                                ),
                            );
                            if !options.salvage {
                                return Err(error);
                            }
                            warnings.push(salvage_warning(error));
                        }
                    } else {
                        run_id = Some(header.run_id.clone());
                    }
                    HeaderState::Good(header)
                }
                Err(None) => {
                    warnings.push(Warning {
                        kind: WarningKind::TornTail,
                        path: file.path.clone(),
                        offset: 0,
                        seq: None,
                        message: "the last segment's header is incomplete or damaged and nothing follows it: a rotation interrupted by a crash; the segment holds no records".to_owned(),
                    });
                    HeaderState::Torn
                }
                Err(Some((error, resume))) => {
                    if !options.salvage {
                        return Err(error);
                    }
                    warnings.push(salvage_warning(error));
                    HeaderState::Salvaged(resume)
                }
            };
            segments.push(SegmentEntry { file, header });
        }
        // Headers alone already tell a segment that starts before its predecessor.
        let mut previous: Option<&SegmentHeader> = None;
        for entry in &segments {
            if let HeaderState::Good(header) = &entry.header {
                if let Some(before) = previous
                    && header.prev_seq < before.prev_seq
                {
                    let error = StoreError::corruption(
                        &entry.file.path,
                        0,
                        None,
                        format!(
                            "the segment starts after seq {} but segment {} started after seq {} (segments out of order)",
                            header.prev_seq, before.segment, before.prev_seq
                        ),
                    );
                    if !options.salvage {
                        return Err(error);
                    }
                    warnings.push(salvage_warning(error));
                }
                previous = Some(header);
            }
        }
        let (mut start, mut end) = (0, segments.len());
        if last_only {
            start = segments.len().saturating_sub(1);
        }
        if let Some(since) = options.since {
            // Segment i holds no record newer than segment i+1's creation time.
            while start + 1 < end {
                match created(&segments[start + 1]) {
                    Some(next_created) if next_created < since => start += 1,
                    _ => break,
                }
            }
        }
        if let Some(until) = options.until {
            while end > start {
                match created(&segments[end - 1]) {
                    Some(this_created) if this_created > until => end -= 1,
                    _ => break,
                }
            }
        }
        Ok(Self {
            journal_dir,
            segments,
            next_segment: start,
            end_segment: end,
            current: None,
            expected_seq: None,
            last_seq: None,
            n_records: 0,
            options,
            warnings,
            finished: false,
            payload: Vec::new(),
            run_id,
            skip_through: None,
            last_segment_read: None,
            torn_at: None,
            read_to_end: false,
        })
    }

    /// Warnings so far (torn tail, salvaged damage). Complete once the iterator has ended.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Takes the warnings so far, for a caller that prints them as it streams.
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        std::mem::take(&mut self.warnings)
    }

    /// The number of segment files in the journal.
    pub fn n_segments(&self) -> usize {
        self.segments.len()
    }

    /// The run id the segment headers carry.
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// The seq of the last record read so far (or, before any, of the last record before the
    /// first segment opened).
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// Records yielded so far.
    pub fn n_records(&self) -> u64 {
        self.n_records
    }

    /// Reads (and checks) the records up to and including `seq` without yielding them: the
    /// iteration resumes after it. For a reader opened on a window (`since`) that must not
    /// repeat a record the caller already has.
    pub fn skip_through(&mut self, seq: u64) {
        self.skip_through = Some(seq);
    }

    /// The next record, like [`Iterator::next`], but a `unit_started` or `unit_finished`
    /// record whose payload is exactly what this build's writer writes for it comes back
    /// undecoded, as a [`StoredRecord::Verbatim`] borrowing the reader's buffer: its bytes
    /// can be copied out instead of decoding the event and encoding it again (`apollo replay
    /// --format json`), or only counted (`apollo verify`).
    ///
    /// Every check of the iterator is made all the same: checksums, framing, sequence,
    /// segment headers, the record decoding as a known kind (a payload in the writer's exact
    /// form does; any other is decoded). Anything else comes back as
    /// [`StoredRecord::Decoded`].
    pub fn next_stored(&mut self) -> Option<Result<StoredRecord<'_>, StoreError>> {
        match self.next_inner(true)? {
            Ok(Next::Decoded(record)) => Some(Ok(StoredRecord::Decoded(record))),
            Ok(Next::Verbatim(parts)) => Some(Ok(StoredRecord::Verbatim(VerbatimRecord {
                payload: &self.payload,
                parts,
            }))),
            Err(error) => Some(Err(error)),
        }
    }

    /// Decodes a payload [`verbatim::recognize`] accepted (it decodes, by construction).
    fn decode_verbatim(&self, parts: &verbatim::Verbatim) -> Result<Record, StoreError> {
        decode_record(&self.payload).map_err(|error| {
            let what = match error {
                DecodeError::UnknownKind(kind) => format!("unknown kind {kind}"),
                DecodeError::Malformed(what) => what,
            };
            StoreError::corruption(&self.journal_dir, 0, Some(parts.seq), what)
        })
    }

    /// The last segment as this reader read it — its stamp when opened, and where its torn
    /// tail starts if it has one — if the reader read the whole journal (no `since`/`until`
    /// window, no salvage) to its end or its torn tail without an error, and that segment's
    /// header was good: what
    /// [`JournalWriter::open_for_append_after`](crate::JournalWriter::open_for_append_after)
    /// needs to take over the reading instead of doing it again. (Kept apart from the
    /// warnings, which a caller may take.)
    pub(crate) fn whole_read_of_last_segment(&self) -> Option<(ContentStamp, Option<u64>)> {
        let whole = !self.options.salvage
            && self.options.since.is_none()
            && self.options.until.is_none()
            && self.read_to_end;
        self.last_segment_read
            .filter(|_| whole)
            .map(|stamp| (stamp, self.torn_at))
    }

    pub(crate) fn segment_entries(&self) -> &[SegmentEntry] {
        &self.segments
    }

    pub(crate) fn journal_dir(&self) -> &Path {
        &self.journal_dir
    }

    /// Records a problem: a warning in salvage mode (and the iteration goes on), else the
    /// error that ends the iteration.
    fn problem<T>(&mut self, error: StoreError) -> Option<Result<T, StoreError>> {
        if self.options.salvage && matches!(error, StoreError::Corruption { .. }) {
            self.warnings.push(salvage_warning(error));
            None
        } else {
            self.finish();
            Some(Err(error))
        }
    }

    fn finish(&mut self) {
        self.finished = true;
        self.current = None;
    }

    fn open_next_segment(&mut self) -> Result<bool, StoreError> {
        if self.next_segment >= self.end_segment {
            return Ok(false);
        }
        let index = self.next_segment;
        self.next_segment += 1;
        let entry = &self.segments[index];
        let path = entry.file.path.clone();
        // A segment without records to read is not opened (it may not even be a file).
        if matches!(
            entry.header,
            HeaderState::Torn | HeaderState::Salvaged(None)
        ) {
            if matches!(entry.header, HeaderState::Salvaged(None)) {
                self.expected_seq = None;
            }
            return Ok(true);
        }
        let (file, file_len) = open_segment_for_read(&path)?;
        if index + 1 == self.segments.len() {
            // Only a stamp of the length read stands for what was read.
            self.last_segment_read =
                Some(content_stamp(&file, &path)?).filter(|stamp| stamp.len() == file_len);
        }
        // Zeros after the last record are space the writer allocated ahead, not records.
        let data_len =
            data_end(&file, file_len).map_err(|source| StoreError::io("read", &path, source))?;
        let mut frames = FrameReader::new(file, data_len);
        match &entry.header {
            HeaderState::Torn => return Ok(true),
            HeaderState::Good(header) => {
                let prev_seq = header.prev_seq;
                // Skip the header frame, already decoded at open.
                frames
                    .next_frame(&mut self.payload)
                    .map_err(|source| StoreError::io("read", &path, source))?
                    .ok();
                match self.expected_seq {
                    Some(expected) if expected != prev_seq.saturating_add(1) => {
                        let error = StoreError::corruption(
                            &path,
                            0,
                            Some(expected),
                            format!(
                                "the segment starts after seq {prev_seq} but the previous segment ended at seq {}",
                                expected.saturating_sub(1)
                            ),
                        );
                        if let Some(Err(error)) = self.problem::<()>(error) {
                            return Err(error);
                        }
                    }
                    _ => {}
                }
                self.expected_seq = Some(prev_seq.saturating_add(1));
                if self.last_seq.is_none() {
                    self.last_seq = Some(prev_seq);
                }
            }
            HeaderState::Salvaged(resume) => {
                self.expected_seq = None;
                match resume {
                    Some(offset) => frames
                        .seek(*offset)
                        .map_err(|source| StoreError::io("read", &path, source))?,
                    None => return Ok(true),
                }
            }
        }
        self.current = Some(Current { frames, index });
        Ok(true)
    }

    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    fn next_inner(&mut self, verbatim: bool) -> Option<Result<Next, StoreError>> {
        loop {
            if self.finished {
                return None;
            }
            if self.current.is_none() {
                match self.open_next_segment() {
                    Ok(true) => continue,
                    Ok(false) => {
                        self.finish();
                        self.read_to_end = true;
                        return None;
                    }
                    Err(error) => {
                        self.finish();
                        return Some(Err(error));
                    }
                }
            }
            let Some(current) = self.current.as_mut() else {
                continue;
            };
            let index = current.index;
            let path = self.segments[index].file.path.clone();
            let is_last = index + 1 == self.segments.len();
            let frame = match current.frames.next_frame(&mut self.payload) {
                Ok(frame) => frame,
                Err(source) => {
                    self.finish();
                    return Some(Err(StoreError::io("read", &path, source)));
                }
            };
            match frame {
                Ok(None) => {
                    self.current = None;
                }
                Ok(Some(offset)) => {
                    let recognized = if verbatim {
                        verbatim::recognize(&self.payload)
                    } else {
                        None
                    };
                    let next = match recognized {
                        Some(parts) => Next::Verbatim(parts),
                        None => match decode_record(&self.payload) {
                            Ok(record) => Next::Decoded(record),
                            Err(DecodeError::UnknownKind(kind)) => {
                                // Refused even in salvage mode: skipping it would silently drop
                                // whatever the newer apollo recorded.
                                let found = match &self.segments[index].header {
                                    HeaderState::Good(header) => header.format.clone(),
                                    _ => "unknown".to_owned(),
                                };
                                self.finish();
                                return Some(Err(StoreError::NewerRecordKind {
                                    path,
                                    offset,
                                    kind,
                                    found,
                                    supported: format!("{FORMAT_MAJOR}.{FORMAT_MINOR}"),
                                }));
                            }
                            Err(DecodeError::Malformed(what)) => {
                                let error =
                                    StoreError::corruption(&path, offset, self.expected_seq, what);
                                match self.problem(error) {
                                    Some(result) => return Some(result),
                                    None => continue,
                                }
                            }
                        },
                    };
                    let (seq, ts) = match &next {
                        Next::Decoded(record) => (record.seq, record.ts),
                        Next::Verbatim(parts) => (parts.seq, parts.ts),
                    };
                    if let Some(expected) = self.expected_seq
                        && seq != expected
                    {
                        {
                            let what = if seq > expected {
                                format!(
                                    "seq jumps from {} to {} (records {expected}..{} are missing)",
                                    expected.saturating_sub(1),
                                    seq,
                                    seq - 1
                                )
                            } else {
                                format!(
                                    "seq {} follows seq {} (sequence goes backwards)",
                                    seq,
                                    expected.saturating_sub(1)
                                )
                            };
                            let error = StoreError::corruption(&path, offset, Some(expected), what);
                            if let Some(result) = self.problem(error) {
                                return Some(result);
                            }
                        }
                    }
                    self.expected_seq = Some(seq.saturating_add(1));
                    self.last_seq = Some(seq);
                    if self.options.since.is_some_and(|since| ts < since)
                        || self.options.until.is_some_and(|until| ts > until)
                        || self.skip_through.is_some_and(|through| seq <= through)
                    {
                        continue;
                    }
                    self.n_records += 1;
                    return Some(Ok(next));
                }
                Err(bad) => {
                    let good_after = match current.frames.next_good_frame(&bad) {
                        Ok(good_after) => good_after,
                        Err(source) => {
                            self.finish();
                            return Some(Err(StoreError::io("read", &path, source)));
                        }
                    };
                    let file_len = current.frames.file_len();
                    // The last segment's last frame: torn only if its bytes are what an
                    // unfinished write leaves; a frame written whole and damaged since may
                    // have been acknowledged.
                    let tail = match good_after {
                        None if is_last => match current.frames.classify_bad_tail(&bad) {
                            Ok(verdict) => Some(verdict),
                            Err(source) => {
                                self.finish();
                                return Some(Err(StoreError::io("read", &path, source)));
                            }
                        },
                        // Records after a hole that only an unfinished batch can leave.
                        Some(_) if is_last => match current.frames.classify_hole(&bad) {
                            Ok(torn) => torn.map(TailVerdict::Torn),
                            Err(source) => {
                                self.finish();
                                return Some(Err(StoreError::io("read", &path, source)));
                            }
                        },
                        _ => None,
                    };
                    match tail {
                        Some(TailVerdict::Torn(why)) => {
                            self.warnings.push(Warning {
                                kind: WarningKind::TornTail,
                                path: path.clone(),
                                offset: bad.offset,
                                seq: self.expected_seq,
                                message: format!(
                                    "torn tail: the last {} bytes ({}: {why}) were never acknowledged; the next writer cuts them off",
                                    file_len - bad.offset,
                                    bad.what
                                ),
                            });
                            self.finish();
                            self.read_to_end = true;
                            self.torn_at = Some(bad.offset);
                            return None;
                        }
                        _ => {
                            let what = match (good_after, tail) {
                                (Some(good), _) => format!(
                                    "bad record ({}) followed by a good record at byte {good}",
                                    bad.what
                                ),
                                (None, Some(_)) => format!(
                                    "the last record is damaged ({}) but was written whole (its newline is there, and no zeros a crash leaves), so it may have been acknowledged: corruption, not a torn write",
                                    bad.what
                                ),
                                (None, None) => format!(
                                    "bad record ({}) at the end of a sealed segment",
                                    bad.what
                                ),
                            };
                            let error =
                                StoreError::corruption(&path, bad.offset, self.expected_seq, what);
                            match self.problem(error) {
                                Some(result) => return Some(result),
                                None => {
                                    self.expected_seq = None;
                                    let resumed = match (self.current.as_mut(), good_after) {
                                        (Some(current), Some(offset)) => {
                                            current.frames.seek(offset)
                                        }
                                        _ => {
                                            self.current = None;
                                            Ok(())
                                        }
                                    };
                                    if let Err(source) = resumed {
                                        self.finish();
                                        return Some(Err(StoreError::io("read", &path, source)));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

impl Iterator for JournalReader {
    type Item = Result<Record, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_inner(false)? {
            Ok(Next::Decoded(record)) => Some(Ok(record)),
            // Not asked for: the loop decodes every record.
            Ok(Next::Verbatim(parts)) => Some(self.decode_verbatim(&parts)),
            Err(error) => Some(Err(error)),
        }
    }
}

/// A record as [`JournalReader::next_stored`] yields it.
#[derive(Debug)]
pub enum StoredRecord<'a> {
    /// A record in this build's exact writer form, undecoded.
    Verbatim(VerbatimRecord<'a>),
    /// Any other record, decoded.
    Decoded(Record),
}

impl StoredRecord<'_> {
    /// The record's seq.
    pub fn seq(&self) -> u64 {
        match self {
            StoredRecord::Verbatim(record) => record.seq(),
            StoredRecord::Decoded(record) => record.seq,
        }
    }

    /// The record's time.
    pub fn ts(&self) -> DateTime<Utc> {
        match self {
            StoredRecord::Verbatim(record) => record.ts(),
            StoredRecord::Decoded(record) => record.ts,
        }
    }
}

/// A `unit_started` or `unit_finished` record whose payload is byte for byte what this
/// build's writer writes for its event: `{"seq":N,"ts":"…",` then
/// `serde_json::to_vec(&event)` without its leading `{`. Its checksum, sequence and
/// decodability have been checked like any record's.
pub struct VerbatimRecord<'a> {
    payload: &'a [u8],
    parts: verbatim::Verbatim,
}

impl std::fmt::Debug for VerbatimRecord<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbatimRecord")
            .field("seq", &self.parts.seq)
            .field("kind", &self.kind())
            .field("unit", &self.unit())
            .finish_non_exhaustive()
    }
}

impl<'a> VerbatimRecord<'a> {
    /// The record's seq.
    pub fn seq(&self) -> u64 {
        self.parts.seq
    }

    /// The record's time.
    pub fn ts(&self) -> DateTime<Utc> {
        self.parts.ts
    }

    /// The `ts` as written: RFC 3339 UTC with microseconds and `Z`, exactly
    /// `ts().to_rfc3339_opts(SecondsFormat::Micros, true)`.
    pub fn ts_text(&self) -> &'a str {
        // The recognizer accepted only ASCII digits and separators here.
        std::str::from_utf8(&self.payload[self.parts.ts_text.clone()]).unwrap_or_default()
    }

    /// The event's `kind`: `unit_started` or `unit_finished`.
    pub fn kind(&self) -> &'static str {
        self.parts.kind.as_str()
    }

    /// The event's unit.
    pub fn unit(&self) -> &'a str {
        // The recognizer checked that the name is UTF-8 and has no escape.
        std::str::from_utf8(&self.payload[self.parts.unit.clone()]).unwrap_or_default()
    }

    /// The event's JSON object without its leading `{`: `"kind":"…",…}`, exactly the bytes
    /// `serde_json::to_vec(&event)` writes after it.
    pub fn event_fields(&self) -> &'a [u8] {
        &self.payload[self.parts.fields_start..]
    }

    /// The whole payload.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// A `unit_finished`'s `status` (`succeeded`, `failed`, `timed_out`, …); `None` for a
    /// `unit_started`.
    pub fn status(&self) -> Option<&'a str> {
        if self.kind() != "unit_finished" {
            return None;
        }
        // The writer's form: `"unit":"…","attempt":N,"status":"…"`, and the recognizer
        // accepted no escape in the unit's name, so the first `"status":"` is the field.
        const FIELD: &[u8] = b"\"status\":\"";
        let fields = self.event_fields();
        let start = fields
            .windows(FIELD.len())
            .position(|window| window == FIELD)?
            + FIELD.len();
        let len = fields[start..].iter().position(|&byte| byte == b'"')?;
        std::str::from_utf8(&fields[start..start + len]).ok()
    }
}

fn created(entry: &SegmentEntry) -> Option<DateTime<Utc>> {
    match &entry.header {
        HeaderState::Good(header) => header.created_at(),
        HeaderState::Torn | HeaderState::Salvaged(_) => None,
    }
}

fn salvage_warning(error: StoreError) -> Warning {
    match error {
        StoreError::Corruption {
            path,
            offset,
            seq,
            what,
        } => Warning {
            kind: WarningKind::Salvaged,
            path,
            offset,
            seq,
            message: format!("salvage: read past {what}"),
        },
        other => Warning {
            kind: WarningKind::Salvaged,
            path: PathBuf::new(),
            offset: 0,
            seq: None,
            message: format!("salvage: read past {other}"),
        },
    }
}

/// A header problem: the error, and where the segment's first good frame after it starts.
type HeaderProblem = (StoreError, Option<u64>);

/// Reads a segment's header. `Ok(Ok(header))`: good. `Ok(Err(None))`: the last segment's header
/// is torn (nothing good follows). `Ok(Err(Some(problem)))`: corruption. `Err`: I/O failure or a
/// newer format version.
fn probe_header(
    segment: &SegmentFile,
    is_last: bool,
) -> Result<Result<SegmentHeader, Option<HeaderProblem>>, StoreError> {
    let path = &segment.path;
    let io_error = |source| StoreError::io("read", path, source);
    let (file, file_len) = match open_segment_for_read(path) {
        Ok(opened) => opened,
        // Not a regular file: a problem of this segment (salvage reads past it), never a read.
        Err(error @ StoreError::Corruption { .. }) => return Ok(Err(Some((error, None)))),
        Err(error) => return Err(error),
    };
    let data_len = data_end(&file, file_len).map_err(io_error)?;
    let mut frames = FrameReader::new(file, data_len);
    let mut payload = Vec::new();
    let bad = match frames.next_frame(&mut payload).map_err(io_error)? {
        Ok(Some(_)) => {
            return match SegmentHeader::decode(&payload, path, segment.number) {
                Ok(header) => Ok(Ok(header)),
                Err(error @ StoreError::NewerVersion { .. }) => Err(error),
                Err(error) => Ok(Err(Some((error, Some(frames.offset()))))),
            };
        }
        Ok(None) => {
            if is_last {
                return Ok(Err(None));
            }
            let error = StoreError::corruption(path, 0, None, "the segment is empty (no header)");
            return Ok(Err(Some((error, None))));
        }
        Err(bad) => bad,
    };
    let good_after = frames.next_good_frame(&bad).map_err(io_error)?;
    let mut what = format!("bad segment header: {}", bad.what);
    if is_last && good_after.is_none() {
        // Torn only if the bytes are what an unfinished rotation leaves (as for records).
        match frames.classify_bad_tail(&bad).map_err(io_error)? {
            TailVerdict::Torn(_) => return Ok(Err(None)),
            TailVerdict::Damaged => what.push_str(
                " (the header was written whole, so the rotation finished: corruption, not a torn write)",
            ),
        }
    }
    let error = StoreError::corruption(path, 0, None, what);
    Ok(Err(Some((error, good_after))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Durability, JournalWriter, WriterOptions};
    use apollo_core::Event;
    use apollo_core::testing::EVERY_KIND_JSONL as EVERY_KIND;
    use chrono::SecondsFormat;

    fn every_kind() -> Vec<Event> {
        EVERY_KIND
            .lines()
            .filter(|line| !line.is_empty())
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}"))
            })
            .collect()
    }

    /// A journal of `events` repeated over several segments.
    fn journal(events: &[Event], repeat: usize) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(
            dir.path(),
            "20261201T000000Z-abcd",
            WriterOptions::default()
                .durability(Durability::None)
                .segment_max_bytes(1_000),
        )
        .unwrap();
        for _ in 0..repeat {
            for event in events {
                writer.append_batch(std::slice::from_ref(event)).unwrap();
            }
        }
        drop(writer);
        dir
    }

    /// What `next_stored` yields, as text: verbatim records with their parts, decoded records,
    /// errors, and the warnings at the end.
    fn stored(run_dir: &Path, options: &ReadOptions) -> (Vec<String>, Vec<Record>) {
        let mut reader = match JournalReader::open(run_dir, options.clone()) {
            Ok(reader) => reader,
            Err(error) => return (vec![format!("open: {error}")], Vec::new()),
        };
        let (mut lines, mut records) = (Vec::new(), Vec::new());
        while let Some(next) = reader.next_stored() {
            match next {
                Ok(StoredRecord::Verbatim(verbatim)) => {
                    let record = decode_record(verbatim.payload()).unwrap();
                    assert_eq!((verbatim.seq(), verbatim.ts()), (record.seq, record.ts));
                    assert_eq!(
                        verbatim.ts_text(),
                        record.ts.to_rfc3339_opts(SecondsFormat::Micros, true)
                    );
                    assert_eq!(Some(verbatim.unit()), record.event.unit());
                    assert_eq!(verbatim.kind(), record.event.kind());
                    let status = match &record.event {
                        Event::UnitFinished(finished) => Some(
                            serde_json::to_value(finished.status)
                                .unwrap()
                                .as_str()
                                .unwrap()
                                .to_owned(),
                        ),
                        _ => None,
                    };
                    assert_eq!(verbatim.status().map(str::to_owned), status);
                    assert_eq!(
                        verbatim.event_fields(),
                        &serde_json::to_vec(&record.event).unwrap()[1..]
                    );
                    lines.push(format!("verbatim {}", record.seq));
                    records.push(record);
                }
                Ok(StoredRecord::Decoded(record)) => {
                    lines.push(format!("decoded {}", record.seq));
                    records.push(record);
                }
                Err(error) => lines.push(format!("error: {error}")),
            }
        }
        lines.extend(reader.warnings().iter().map(|warning| format!("{warning}")));
        lines.push(format!(
            "last {:?} n {}",
            reader.last_seq(),
            reader.n_records()
        ));
        (lines, records)
    }

    /// What the iterator yields, in the same terms.
    fn iterated(run_dir: &Path, options: &ReadOptions) -> (Vec<String>, Vec<Record>) {
        let mut reader = match JournalReader::open(run_dir, options.clone()) {
            Ok(reader) => reader,
            Err(error) => return (vec![format!("open: {error}")], Vec::new()),
        };
        let (mut lines, mut records) = (Vec::new(), Vec::new());
        for next in &mut reader {
            match next {
                Ok(record) => {
                    lines.push(format!("record {}", record.seq));
                    records.push(record);
                }
                Err(error) => lines.push(format!("error: {error}")),
            }
        }
        lines.extend(reader.warnings().iter().map(|warning| format!("{warning}")));
        lines.push(format!(
            "last {:?} n {}",
            reader.last_seq(),
            reader.n_records()
        ));
        (lines, records)
    }

    /// Both ways of reading agree on every record, error and warning.
    fn assert_same_reading(run_dir: &Path, options: &ReadOptions) {
        let (stored_lines, stored_records) = stored(run_dir, options);
        let (iterated_lines, iterated_records) = iterated(run_dir, options);
        let normalized: Vec<String> = stored_lines
            .iter()
            .map(|line| {
                line.replace("verbatim ", "record ")
                    .replace("decoded ", "record ")
            })
            .collect();
        assert_eq!(normalized, iterated_lines);
        assert_eq!(stored_records, iterated_records);
    }

    #[test]
    fn next_stored_reads_every_kind_as_the_iterator_does_and_hot_kinds_verbatim() {
        let events = every_kind();
        let dir = journal(&events, 3);
        let (lines, records) = stored(dir.path(), &ReadOptions::default());
        assert_eq!(records.len(), events.len() * 3);
        // Every unit_started and unit_finished came verbatim but those with an escape in a
        // string (the unit `b"q`, the error with a newline): `a`'s start, `c`'s start and
        // finish, `é`'s finish.
        let n_verbatim = lines
            .iter()
            .filter(|line| line.starts_with("verbatim"))
            .count();
        assert_eq!(n_verbatim, 4 * 3);
        assert_same_reading(dir.path(), &ReadOptions::default());
        // A window, and records skipped through a seq.
        let middle = records[records.len() / 2].ts;
        assert_same_reading(dir.path(), &ReadOptions::default().since(middle));
        let mut skipping = JournalReader::open(dir.path(), ReadOptions::default()).unwrap();
        skipping.skip_through(5);
        assert_eq!(skipping.next_stored().unwrap().unwrap().seq(), 6);
        assert_eq!(skipping.next().unwrap().unwrap().seq, 7);
    }

    #[test]
    fn next_stored_meets_damage_exactly_as_the_iterator_does() {
        let events = every_kind();
        let dir = journal(&events, 1);
        let segments = crate::segment::list_segment_files(&dir.path().join("journal")).unwrap();
        assert!(segments.len() > 2, "several segments");
        let last = &segments.last().unwrap().path;
        let middle = &segments[1].path;
        for path in [last, middle] {
            let original = std::fs::read(path).unwrap();
            // Cut at every byte, and flip one bit of every byte (a spread of bits).
            for at in 0..original.len() {
                std::fs::write(path, &original[..at]).unwrap();
                for salvage in [false, true] {
                    assert_same_reading(dir.path(), &ReadOptions::default().salvage(salvage));
                }
                let mut flipped = original.clone();
                flipped[at] ^= 1 << (at % 8);
                std::fs::write(path, &flipped).unwrap();
                for salvage in [false, true] {
                    assert_same_reading(dir.path(), &ReadOptions::default().salvage(salvage));
                }
            }
            std::fs::write(path, &original).unwrap();
        }
    }
}
