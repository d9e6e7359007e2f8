//! Record framing: `<crc32c-masked hex8> <len> <payload>\n` (see the crate docs).
//!
//! The checksum covers the length field, the space and the payload, so a flipped bit anywhere in
//! a frame (the checksum itself included) makes the frame fail, and the explicit length finds
//! the end of a payload without trusting the newline. [`FrameReader::classify_bad_tail`] tells
//! a torn write from a damaged record at the end of a journal.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};

/// The largest payload a frame may carry. Larger lengths are treated as damage, so a flipped
/// bit in a length field cannot make a reader allocate gigabytes.
pub(crate) const MAX_PAYLOAD_LEN: usize = 16 * 1024 * 1024;

/// The LevelDB mask: a CRC stored next to data that itself contains CRCs is rotated and offset,
/// so a checksum computed over an embedded checksum does not trivially match.
pub(crate) fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Appends one frame holding `payload` to `out`.
///
/// Without `format!` or `to_string` (the writer frames every record: two allocations and the
/// formatting machinery per record, see the journal benchmark's write figure).
pub(crate) fn encode_frame(payload: &[u8], out: &mut Vec<u8>) {
    let mut digits = itoa::Buffer::new();
    let len_text = digits.format(payload.len()).as_bytes();
    let mut crc = crc32c::crc32c(len_text);
    crc = crc32c::crc32c_append(crc, b" ");
    crc = crc32c::crc32c_append(crc, payload);
    out.reserve(8 + 1 + len_text.len() + 1 + payload.len() + 1);
    let masked = mask_crc(crc);
    for shift in (0..8).rev() {
        out.push(b"0123456789abcdef"[((masked >> (shift * 4)) & 0xf) as usize]);
    }
    out.push(b' ');
    out.extend_from_slice(len_text);
    out.push(b' ');
    out.extend_from_slice(payload);
    out.push(b'\n');
}

/// Why a frame could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadFrame {
    /// Where the frame starts.
    pub(crate) offset: u64,
    /// The file ended inside the frame (as a torn write leaves it).
    pub(crate) incomplete: bool,
    /// What is wrong, for messages.
    pub(crate) what: String,
    /// Where the next frame would start if this frame's length field is right (known once the
    /// payload was read): a damaged newline or checksum leaves the next frame there.
    pub(crate) declared_end: Option<u64>,
}

/// Reads frames one by one from a segment file, tracking byte offsets, in constant memory.
pub(crate) struct FrameReader {
    input: BufReader<File>,
    offset: u64,
    file_len: u64,
    /// The length of the frame `next_buffered_frame` read last.
    last_frame_len: u64,
    /// Payload bytes looked at (checksummed or scanned), for the tests that bound the work a
    /// damaged or hostile segment can cause.
    #[cfg(test)]
    examined: u64,
}

/// A payload longer than this is scanned for a newline before it is checksummed: a frame
/// holds exactly one newline, its last byte, so a line that claims a longer payload than it
/// has is refused after reading to its own end, not after checksumming what its length claims
/// (a hostile segment of many such lines would otherwise cost their lengths' sum).
const SCAN_FOR_NEWLINE_ABOVE: usize = 1024;

enum Step {
    Byte(u8),
    Eof,
}

impl FrameReader {
    pub(crate) fn new(file: File, file_len: u64) -> Self {
        Self {
            input: BufReader::with_capacity(64 * 1024, file),
            offset: 0,
            file_len,
            last_frame_len: 0,
            #[cfg(test)]
            examined: 0,
        }
    }

    /// Byte offset of the next frame.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The file's length when it was opened.
    pub(crate) fn file_len(&self) -> u64 {
        self.file_len
    }

    fn byte(&mut self) -> io::Result<Step> {
        // The file is read as it was when opened: bytes a live writer appends later are not
        // mistaken for a torn record.
        if self.offset >= self.file_len {
            return Ok(Step::Eof);
        }
        let buf = self.input.fill_buf()?;
        match buf.first() {
            Some(&byte) => {
                self.input.consume(1);
                self.offset += 1;
                Ok(Step::Byte(byte))
            }
            None => Ok(Step::Eof),
        }
    }

    /// Moves to `offset` in the file.
    pub(crate) fn seek(&mut self, offset: u64) -> io::Result<()> {
        self.input.seek(SeekFrom::Start(offset))?;
        self.offset = offset;
        Ok(())
    }

    /// Reads the next frame's payload into `payload`. `Ok(Ok(Some(offset)))` is a good frame
    /// starting at `offset`, `Ok(Ok(None))` the clean end of the file, `Ok(Err(bad))` a damaged
    /// or incomplete frame; the outer error is an I/O failure.
    pub(crate) fn next_frame(
        &mut self,
        payload: &mut Vec<u8>,
    ) -> io::Result<Result<Option<u64>, BadFrame>> {
        if self.next_buffered_frame(payload) {
            return Ok(Ok(Some(self.offset - self.last_frame_len)));
        }
        self.next_frame_bytewise(payload)
    }

    /// The common case of [`next_frame`](Self::next_frame): a good frame wholly in the read
    /// buffer, checked and copied out in place. Anything else — a frame that straddles the
    /// buffer's end, any irregularity — is `false`, with nothing consumed, and the byte-wise
    /// reader takes it (and words its errors).
    fn next_buffered_frame(&mut self, payload: &mut Vec<u8>) -> bool {
        let buffered = self.input.buffer();
        // Never past the length the file had when opened (see `byte`).
        let limit = buffered
            .len()
            .min(usize::try_from(self.file_len.saturating_sub(self.offset)).unwrap_or(usize::MAX));
        let frame = &buffered[..limit];
        let Some(checksum) = frame.get(..8) else {
            return false;
        };
        let mut stored_crc: u32 = 0;
        for &byte in checksum {
            match hex_value(byte) {
                Some(value) => stored_crc = (stored_crc << 4) | value,
                None => return false,
            }
        }
        if frame.get(8) != Some(&b' ') {
            return false;
        }
        let n_digits = frame[9..]
            .iter()
            .take(9)
            .take_while(|byte| byte.is_ascii_digit())
            .count();
        if !(1..=8).contains(&n_digits)
            || (n_digits > 1 && frame[9] == b'0')
            || frame.get(9 + n_digits) != Some(&b' ')
        {
            return false;
        }
        let len_text = &frame[9..9 + n_digits];
        let len = len_text
            .iter()
            .fold(0usize, |acc, digit| acc * 10 + usize::from(digit - b'0'));
        let payload_start = 9 + n_digits + 1;
        let end = payload_start + len;
        if len > MAX_PAYLOAD_LEN || frame.get(end) != Some(&b'\n') {
            return false;
        }
        let body = &frame[payload_start..end];
        if body.len() > SCAN_FOR_NEWLINE_ABOVE && body.contains(&b'\n') {
            return false;
        }
        #[cfg(test)]
        {
            self.examined += body.len() as u64;
        }
        let mut crc = crc32c::crc32c(len_text);
        crc = crc32c::crc32c_append(crc, b" ");
        crc = crc32c::crc32c_append(crc, body);
        if mask_crc(crc) != stored_crc {
            return false;
        }
        payload.clear();
        payload.extend_from_slice(body);
        self.input.consume(end + 1);
        self.last_frame_len = end as u64 + 1;
        self.offset += self.last_frame_len;
        true
    }

    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    fn next_frame_bytewise(
        &mut self,
        payload: &mut Vec<u8>,
    ) -> io::Result<Result<Option<u64>, BadFrame>> {
        let start = self.offset;
        let bad = |incomplete: bool, what: &str| {
            Ok(Err(BadFrame {
                offset: start,
                incomplete,
                what: what.to_owned(),
                declared_end: None,
            }))
        };
        let bad_after_payload = |what: &str, declared_end: u64| {
            Ok(Err(BadFrame {
                offset: start,
                incomplete: false,
                what: what.to_owned(),
                declared_end: Some(declared_end),
            }))
        };
        // The checksum: exactly 8 lowercase hex digits.
        let mut stored_crc: u32 = 0;
        for index in 0..8 {
            match self.byte()? {
                Step::Eof if index == 0 => return Ok(Ok(None)),
                Step::Eof => return bad(true, "the file ends inside a record's checksum"),
                Step::Byte(byte) => match hex_value(byte) {
                    Some(value) => stored_crc = (stored_crc << 4) | value,
                    None => return bad(false, "the checksum field is not 8 hex digits"),
                },
            }
        }
        match self.byte()? {
            Step::Eof => return bad(true, "the file ends after a record's checksum"),
            Step::Byte(b' ') => {}
            Step::Byte(_) => return bad(false, "no space after the checksum"),
        }
        // The length: 1 to 8 decimal digits, no leading zero, then a space.
        let mut len_text = [0u8; 8];
        let mut n_digits = 0;
        loop {
            match self.byte()? {
                Step::Eof => return bad(true, "the file ends inside a record's length"),
                Step::Byte(b' ') if n_digits > 0 => break,
                Step::Byte(byte @ b'0'..=b'9') if n_digits < len_text.len() => {
                    if n_digits == 1 && len_text[0] == b'0' {
                        return bad(false, "the length field has a leading zero");
                    }
                    len_text[n_digits] = byte;
                    n_digits += 1;
                }
                Step::Byte(_) => return bad(false, "the length field is not a decimal number"),
            }
        }
        let len = len_text[..n_digits]
            .iter()
            .fold(0usize, |acc, digit| acc * 10 + usize::from(digit - b'0'));
        if len > MAX_PAYLOAD_LEN {
            return bad(
                false,
                &format!("the length {len} is larger than any record ({MAX_PAYLOAD_LEN})"),
            );
        }
        let payload_start = self.offset;
        if payload_start + len as u64 + 1 > self.file_len {
            // Do not even allocate: the rest of the file is too short for the payload.
            return bad(true, "the file ends inside a record's payload");
        }
        let declared_end = payload_start + len as u64 + 1;
        // Read piece by piece: a newline before the declared end means the length is wrong
        // (a frame's only newline is its last byte), and no more is read.
        payload.clear();
        while payload.len() < len {
            let buf = self.input.fill_buf()?;
            if buf.is_empty() {
                return bad(true, "the file ends inside a record's payload");
            }
            let piece = &buf[..buf.len().min(len - payload.len())];
            if let Some(newline) = piece.iter().position(|&byte| byte == b'\n') {
                #[cfg(test)]
                {
                    self.examined += newline as u64 + 1;
                }
                self.input.consume(newline + 1);
                self.offset += newline as u64 + 1;
                return bad_after_payload(
                    "a newline inside the record: its length is wrong",
                    declared_end,
                );
            }
            let n = piece.len();
            payload.extend_from_slice(piece);
            #[cfg(test)]
            {
                self.examined += n as u64;
            }
            self.input.consume(n);
        }
        self.offset += len as u64;
        match self.byte()? {
            Step::Eof => return bad(true, "the file ends before a record's newline"),
            Step::Byte(b'\n') => {}
            Step::Byte(_) => {
                return bad_after_payload("the record does not end with a newline", declared_end);
            }
        }
        let mut crc = crc32c::crc32c(&len_text[..n_digits]);
        crc = crc32c::crc32c_append(crc, b" ");
        crc = crc32c::crc32c_append(crc, payload);
        if mask_crc(crc) != stored_crc {
            return bad_after_payload("checksum mismatch", declared_end);
        }
        Ok(Ok(Some(start)))
    }

    /// From a bad frame at `bad_offset`, moves to the start of the next line (the byte after
    /// the next newline). Returns false at the end of the file.
    pub(crate) fn resync_after(&mut self, bad_offset: u64) -> io::Result<bool> {
        self.seek(bad_offset + 1)?;
        loop {
            let (found, used) = {
                let buf = self.input.fill_buf()?;
                if buf.is_empty() {
                    return Ok(false);
                }
                match buf.iter().position(|&byte| byte == b'\n') {
                    Some(index) => (true, index + 1),
                    None => (false, buf.len()),
                }
            };
            self.input.consume(used);
            self.offset += used as u64;
            if found {
                return Ok(self.offset < self.file_len);
            }
        }
    }

    /// The start of the next good frame after the bad one: where the bad frame's length says
    /// it ends (a damaged newline or checksum), else the first line start after it where a
    /// good frame begins. Leaves the reader at an unspecified position; `seek` to the result.
    pub(crate) fn next_good_frame(&mut self, bad: &BadFrame) -> io::Result<Option<u64>> {
        let mut scratch = Vec::new();
        if let Some(end) = bad.declared_end.filter(|&end| end < self.file_len) {
            self.seek(end)?;
            if let Ok(Some(offset)) = self.next_frame(&mut scratch)? {
                return Ok(Some(offset));
            }
        }
        let mut from = bad.offset;
        while self.resync_after(from)? {
            let line_start = self.offset;
            match self.next_frame(&mut scratch)? {
                Ok(Some(offset)) => return Ok(Some(offset)),
                Ok(None) => return Ok(None),
                Err(_) => from = line_start,
            }
        }
        Ok(None)
    }
}

/// Unwritten data comes back from a crash in whole disk sectors or filesystem blocks, all
/// multiples of this: a run of zero bytes that a crash left ends on such a boundary (or at the
/// end of the file) and starts on one (or where the unfinished write started).
pub(crate) const UNWRITTEN_ALIGN: u64 = 512;

/// What a bad last frame of the last segment, with no good frame after it, is (see the
/// recovery rules in the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TailVerdict {
    /// What a write that never completed leaves: a prefix of a frame (the file ends inside it
    /// and no newline follows), or a frame holding data that never reached the disk, read back
    /// as zeros. Never acknowledged: it is cut off.
    Torn(&'static str),
    /// A frame that was written whole (its newline is there, no zeros a crash could leave) and
    /// is damaged since: it may have been acknowledged, so this is corruption.
    Damaged,
}

impl FrameReader {
    /// Classifies the bad frame `bad`, which has no good frame after it, by the bytes from its
    /// start to its line's end (its first newline, or the end of the file). Reads them in
    /// constant memory; leaves the reader at an unspecified position.
    ///
    /// The writer never writes a zero byte, and each frame holds exactly one newline, its last
    /// byte. A torn write leaves either a prefix of the batch (the last frame then has no
    /// newline and the file ends inside it: [`BadFrame::incomplete`]) or, after a power loss
    /// with delayed allocation, runs of zeros where blocks were never written; a run of zeros
    /// a crash left starts at a block boundary or where the write started (this frame, the
    /// first bad one) and ends at a block boundary or at the end of the file. A single flipped
    /// bit makes neither: the line keeps its newline, and a flip to zero is one zero byte
    /// between non-zero ones, never such a run.
    pub(crate) fn classify_bad_tail(&mut self, bad: &BadFrame) -> io::Result<TailVerdict> {
        self.classify_tail_from(bad, true)
    }

    /// [`classify_bad_tail`](Self::classify_bad_tail), where `write_start` says whether an
    /// unfinished write may have started at `bad` (else a run of zeros must start on a block
    /// boundary: the block holding `bad`'s start also holds the good frame before it).
    fn classify_tail_from(&mut self, bad: &BadFrame, write_start: bool) -> io::Result<TailVerdict> {
        let line = self.scan_line(bad, write_start)?;
        if bad.incomplete && !line.newline {
            return Ok(TailVerdict::Torn("a write cut short"));
        }
        if line.n_runs > 0 && line.n_runs == line.n_unwritten_runs {
            return Ok(TailVerdict::Torn(
                "zeros where a crash left the write's blocks unwritten",
            ));
        }
        Ok(TailVerdict::Damaged)
    }

    /// Classifies the bad frame `bad` of the last segment that has good frames after it: a
    /// torn write too when the rest of the segment is what one unfinished batch leaves after a
    /// power loss that kept some of its blocks and not others (records are written over space
    /// allocated ahead, so nothing orders their blocks before the batch's sync returns). That
    /// is: the bad frames' lines hold zeros in whole blocks only (the first may also start
    /// where the write started), the last may be a prefix, every good frame after `bad` is of
    /// one batch (the writer gives the records of a batch one time, and each batch its own),
    /// and the hole is in that batch too: the good frame before `bad`, or `bad`'s own readable
    /// start, has the batch's time, or the zeros start at `bad` off a block boundary (where the
    /// batch started, in a block that also holds synced records). A record after such a hole
    /// cannot have been acknowledged: the batch's sync would have written the hole's blocks.
    /// Anything else — zeros not in whole blocks, good frames of two batches, a hole that may
    /// be in an earlier batch — is corruption. Leaves the reader at an unspecified position.
    pub(crate) fn classify_hole(&mut self, bad: &BadFrame) -> io::Result<Option<&'static str>> {
        const WHY: &str = "blocks of an unfinished batch reached the disk out of order (zeros in whole blocks before records of the same batch)";
        let mut at = bad.clone();
        let mut batch_ts: Option<Vec<u8>> = None;
        let mut payload = Vec::new();
        let mut zeros_from = None;
        let consistent = loop {
            let Some(next) = self.next_good_frame(&at)? else {
                // The last bad frame: as for a bad last frame with nothing good after it.
                break self.classify_tail_from(&at, at.offset == bad.offset)?
                    != TailVerdict::Damaged;
            };
            let line = self.scan_line(&at, at.offset == bad.offset)?;
            if line.n_runs == 0 || line.n_runs != line.n_unwritten_runs {
                return Ok(None);
            }
            if at.offset == bad.offset {
                zeros_from = line.first_zero;
            }
            self.seek(next)?;
            let more = loop {
                match self.next_frame(&mut payload)? {
                    Ok(Some(_)) => {
                        let Some(ts) = record_ts(&payload) else {
                            return Ok(None);
                        };
                        match &batch_ts {
                            Some(batch) if batch.as_slice() != ts => return Ok(None),
                            Some(_) => {}
                            None => batch_ts = Some(ts.to_vec()),
                        }
                    }
                    Ok(None) => break None,
                    Err(bad) => break Some(bad),
                }
            };
            match more {
                Some(bad) => at = bad,
                None => break true,
            }
        };
        let Some(batch_ts) = batch_ts.filter(|_| consistent) else {
            return Ok(None);
        };
        let in_batch = self.previous_frame_ts(bad.offset)?.as_deref() == Some(&batch_ts)
            || self.ts_at(bad.offset)?.as_deref() == Some(&batch_ts)
            || (zeros_from == Some(bad.offset) && !bad.offset.is_multiple_of(UNWRITTEN_ALIGN));
        Ok(in_batch.then_some(WHY))
    }

    /// The time of the record that ends right before `end` (see [`ts_before`]).
    fn previous_frame_ts(&mut self, end: u64) -> io::Result<Option<Vec<u8>>> {
        ts_before(self.input.get_ref(), end)
    }

    /// The time of the frame starting at `offset` (see [`ts_at`]).
    fn ts_at(&mut self, offset: u64) -> io::Result<Option<Vec<u8>>> {
        ts_at(self.input.get_ref(), offset, self.file_len)
    }

    /// Scans the line of the bad frame `bad` (from its start to its first newline, or to the
    /// end of the file): whether it has a newline, how many runs of zeros it holds, and how
    /// many of those a crash can leave (starting on a block boundary, or at `bad` itself when
    /// `write_start`, where an unfinished write began; ending on a block boundary or at the
    /// end of the file).
    fn scan_line(&mut self, bad: &BadFrame, write_start: bool) -> io::Result<Line> {
        self.seek(bad.offset)?;
        let mut newline = false;
        let mut zero_run: Option<u64> = None;
        let mut first_zero = None;
        let (mut n_runs, mut n_unwritten_runs) = (0u32, 0u32);
        let unwritten = |start: u64, end: u64, file_len: u64| {
            ((write_start && start == bad.offset) || start.is_multiple_of(UNWRITTEN_ALIGN))
                && (end == file_len || end.is_multiple_of(UNWRITTEN_ALIGN))
        };
        'scan: while self.offset < self.file_len {
            let used = {
                let buf = self.input.fill_buf()?;
                if buf.is_empty() {
                    break;
                }
                let wanted = usize::try_from(self.file_len - self.offset).unwrap_or(usize::MAX);
                let buf = &buf[..buf.len().min(wanted)];
                let mut used = buf.len();
                for (index, &byte) in buf.iter().enumerate() {
                    let at = self.offset + index as u64;
                    if byte == 0 {
                        zero_run.get_or_insert(at);
                        first_zero.get_or_insert(at);
                        continue;
                    }
                    if let Some(start) = zero_run.take() {
                        n_runs += 1;
                        n_unwritten_runs += u32::from(unwritten(start, at, self.file_len));
                    }
                    if byte == b'\n' {
                        newline = true;
                        used = index + 1;
                        break;
                    }
                }
                used
            };
            self.input.consume(used);
            self.offset += used as u64;
            if newline {
                break 'scan;
            }
        }
        if let Some(start) = zero_run.take() {
            n_runs += 1;
            n_unwritten_runs += u32::from(unwritten(start, self.file_len, self.file_len));
        }
        Ok(Line {
            newline,
            n_runs,
            n_unwritten_runs,
            first_zero,
        })
    }
}

/// The time of the record of `file` that ends right before `end` (its newline at `end - 1`),
/// when its start is found within 64 KiB and it is a record.
pub(crate) fn ts_before(file: &File, end: u64) -> io::Result<Option<Vec<u8>>> {
    use std::os::unix::fs::FileExt;
    let Some(last) = end.checked_sub(1) else {
        return Ok(None);
    };
    let from = last.saturating_sub(64 * 1024);
    let mut bytes = vec![0u8; usize::try_from(last - from).unwrap_or(0)];
    file.read_exact_at(&mut bytes, from)?;
    let start = match bytes.iter().rposition(|&byte| byte == b'\n') {
        Some(newline) => from + newline as u64 + 1,
        None if from == 0 => 0,
        None => return Ok(None),
    };
    ts_at(file, start, end)
}

/// The time of the frame of `file` starting at `offset`, read from its first bytes (before
/// `end`; they may be followed by zeros or damage): `None` unless they hold a whole `ts`
/// field.
fn ts_at(file: &File, offset: u64, end: u64) -> io::Result<Option<Vec<u8>>> {
    use std::os::unix::fs::FileExt;
    let mut bytes = [0u8; 128];
    let want = usize::try_from(end.saturating_sub(offset))
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let n_read = file.read_at(&mut bytes[..want], offset)?;
    let bytes = &bytes[..n_read];
    let bytes = &bytes[..bytes
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(bytes.len())];
    // `<checksum> <length> ` then the payload.
    let Some(payload) = bytes.splitn(3, |&byte| byte == b' ').nth(2) else {
        return Ok(None);
    };
    Ok(record_ts(payload).map(<[u8]>::to_vec))
}

/// What [`FrameReader::scan_line`] found in a bad frame's line.
struct Line {
    /// The line ends with a newline (not with the end of the file).
    newline: bool,
    /// Runs of zero bytes in it.
    n_runs: u32,
    /// Those of them a crash can leave (see [`UNWRITTEN_ALIGN`]).
    n_unwritten_runs: u32,
    /// Where its first zero byte is.
    first_zero: Option<u64>,
}

/// The `ts` of a record's payload as written (`{"seq":N,"ts":"…",…`), without decoding it.
fn record_ts(payload: &[u8]) -> Option<&[u8]> {
    const TS: &[u8] = b",\"ts\":\"";
    let start = payload
        .windows(TS.len())
        .take(40)
        .position(|window| window == TS)?
        + TS.len();
    let len = payload[start..].iter().position(|&byte| byte == b'"')?;
    Some(&payload[start..start + len])
}

fn hex_value(byte: u8) -> Option<u32> {
    match byte {
        b'0'..=b'9' => Some(u32::from(byte - b'0')),
        b'a'..=b'f' => Some(u32::from(byte - b'a' + 10)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn reader_over(bytes: &[u8]) -> (tempfile::TempDir, FrameReader) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
        let file = File::open(&path).unwrap();
        (dir, FrameReader::new(file, bytes.len() as u64))
    }

    #[test]
    fn lines_that_claim_long_payloads_cost_their_own_length_not_the_claimed_one() {
        // A hostile segment: thousands of lines, each claiming a payload that ends at the
        // same far newline, 100 KB on. Checking each by its claim would read 300 MB.
        let tail = 100_000;
        let n_lines = 3000;
        let mut lines = Vec::new();
        let mut at = 0usize;
        for _ in 0..n_lines {
            // The length field's width is fixed (6 digits), so the line's length is known.
            let line_len = "00000000 123456 x\n".len();
            let payload_start = at + "00000000 123456 ".len();
            // Where the last byte, the newline, is.
            let end = n_lines * line_len + tail - 1;
            lines.extend_from_slice(format!("00000000 {:06} x\n", end - payload_start).as_bytes());
            at += line_len;
        }
        lines.extend(std::iter::repeat_n(b'a', tail - 1));
        lines.push(b'\n');
        let (_dir, mut reader) = reader_over(&lines);
        let mut payload = Vec::new();
        let mut n_bad = 0;
        loop {
            match reader.next_frame(&mut payload).unwrap() {
                Ok(Some(_)) => panic!("no line here is a frame"),
                Ok(None) => break,
                Err(bad) => {
                    n_bad += 1;
                    match reader.next_good_frame(&bad).unwrap() {
                        Some(offset) => reader.seek(offset).unwrap(),
                        None => break,
                    }
                }
            }
        }
        assert!(n_bad >= 1);
        assert!(
            reader.examined < 4 * lines.len() as u64,
            "{} payload bytes looked at for a {}-byte file",
            reader.examined,
            lines.len()
        );
    }

    /// Every frame `next_frame` reads (the buffered fast path where it can), and every frame
    /// the byte-wise reader alone reads, with their offsets, payloads and errors.
    fn frames_both_ways(bytes: &[u8]) -> [Vec<String>; 2] {
        let read = |bytewise: bool| {
            let (_dir, mut reader) = reader_over(bytes);
            let mut payload = Vec::new();
            let mut seen = Vec::new();
            loop {
                let next = if bytewise {
                    reader.next_frame_bytewise(&mut payload)
                } else {
                    reader.next_frame(&mut payload)
                };
                match next.unwrap() {
                    Ok(Some(offset)) => seen.push(format!(
                        "{offset} {} next {}",
                        String::from_utf8_lossy(&payload),
                        reader.offset()
                    )),
                    Ok(None) => return seen,
                    Err(bad) => {
                        seen.push(format!("{bad:?}"));
                        return seen;
                    }
                }
            }
        };
        [read(false), read(true)]
    }

    #[test]
    fn the_buffered_fast_path_reads_exactly_what_the_byte_wise_reader_reads() {
        let mut out = Vec::new();
        // Frames that straddle the read buffer's end, and small ones around them.
        for len in [3, 70_000, 10, 65_000, 1, 200_000, 7] {
            let payload: Vec<u8> = (0..len).map(|index| b'a' + (index % 26) as u8).collect();
            encode_frame(&payload, &mut out);
        }
        let [fast, bytewise] = frames_both_ways(&out);
        assert_eq!(fast.len(), 7);
        assert_eq!(fast, bytewise);
        // Damage anywhere in small frames: cut, flipped, or a byte replaced.
        let mut small = Vec::new();
        for payload in [&b"{\"seq\":1}"[..], b"x", b"0123456789"] {
            encode_frame(payload, &mut small);
        }
        for at in 0..small.len() {
            let [fast, bytewise] = frames_both_ways(&small[..at]);
            assert_eq!(fast, bytewise, "cut at {at}");
            for bit in 0..8 {
                let mut flipped = small.clone();
                flipped[at] ^= 1 << bit;
                let [fast, bytewise] = frames_both_ways(&flipped);
                assert_eq!(fast, bytewise, "bit {bit} of byte {at} flipped");
            }
            for byte in [b'0', b' ', b'\n', b'a', b'A'] {
                let mut replaced = small.clone();
                replaced[at] = byte;
                let [fast, bytewise] = frames_both_ways(&replaced);
                assert_eq!(fast, bytewise, "byte {at} replaced by {byte}");
            }
        }
        // A leading zero and a too-long length field.
        for bad in [&b"00000000 07 x\n"[..], b"00000000 123456789 x\n"] {
            let [fast, bytewise] = frames_both_ways(bad);
            assert_eq!(fast, bytewise);
        }
    }

    #[test]
    fn a_frame_is_crc_space_length_space_payload_newline() {
        let mut out = Vec::new();
        encode_frame(br#"{"a":1}"#, &mut out);
        let text = String::from_utf8(out.clone()).unwrap();
        assert_eq!(&text[8..], " 7 {\"a\":1}\n");
        let (_dir, mut reader) = reader_over(&out);
        let mut payload = Vec::new();
        assert_eq!(reader.next_frame(&mut payload).unwrap(), Ok(Some(0)));
        assert_eq!(payload, br#"{"a":1}"#);
        assert_eq!(reader.next_frame(&mut payload).unwrap(), Ok(None));
    }

    #[test]
    fn a_flipped_length_digit_fails_the_checksum() {
        let mut out = Vec::new();
        encode_frame(b"abcdefghijklmnop", &mut out);
        encode_frame(b"xyz", &mut out);
        out[10] = b'1'; // "16" -> "11"
        let (_dir, mut reader) = reader_over(&out);
        let mut payload = Vec::new();
        let bad = reader.next_frame(&mut payload).unwrap().unwrap_err();
        assert_eq!(reader.next_good_frame(&bad).unwrap(), Some(29));
    }

    #[test]
    fn a_damaged_newline_does_not_hide_the_next_frame() {
        let mut out = Vec::new();
        encode_frame(b"first", &mut out);
        let second = out.len() as u64;
        encode_frame(b"second", &mut out);
        out[second as usize - 1] = b'x';
        let (_dir, mut reader) = reader_over(&out);
        let mut payload = Vec::new();
        let bad = reader.next_frame(&mut payload).unwrap().unwrap_err();
        assert_eq!(reader.next_good_frame(&bad).unwrap(), Some(second));
    }

    fn verdict_of_last(bytes: &[u8]) -> TailVerdict {
        let (_dir, mut reader) = reader_over(bytes);
        let mut payload = Vec::new();
        loop {
            match reader.next_frame(&mut payload).unwrap() {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("no bad frame"),
                Err(bad) => return reader.classify_bad_tail(&bad).unwrap(),
            }
        }
    }

    #[test]
    fn a_torn_write_and_a_damaged_frame_are_told_apart() {
        let mut good = Vec::new();
        encode_frame(b"first", &mut good);
        let mut last = Vec::new();
        encode_frame(&[b'x'; 1200], &mut last);
        let torn = |bytes: Vec<u8>| matches!(verdict_of_last(&bytes), TailVerdict::Torn(_));
        let with = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut bytes = good.clone();
            bytes.extend_from_slice(&last);
            edit(&mut bytes);
            bytes
        };
        // A prefix, zeros to the end, a lost aligned block: torn.
        assert!(torn(with(&|b| b.truncate(b.len() - 1))));
        assert!(torn(with(&|b| b.truncate(good.len() + 20))));
        assert!(torn(with(&|b| b[good.len()..].fill(0))));
        assert!(torn(with(&|b| b[512..1024].fill(0))));
        assert!(torn(with(&|b| b[512..].fill(0))));
        assert!(torn(with(&|b| b[good.len()..512].fill(0))));
        // Written whole and damaged: a flipped payload bit, newline, or a lone zero byte
        // (aligned on one side only), or a zero run that is not block-aligned.
        assert!(!torn(with(&|b| b[100] ^= 1)));
        let end = good.len() + last.len() - 1;
        assert!(!torn(with(&|b| b[end] ^= 1)));
        assert!(!torn(with(&|b| b[511] = 0)));
        assert!(!torn(with(&|b| b[512] = 0)));
        assert!(!torn(with(&|b| b[300..700].fill(0))));
        // A length that runs past the end of the file with the newline present.
        assert!(!torn(with(&|b| b[good.len() + 9] = b'9')));
    }
}
