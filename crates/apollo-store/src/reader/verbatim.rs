//! Recognising a record payload that is *exactly* what this build's writer writes for its event,
//! without decoding it: the fast path of [`JournalReader::next_stored`](super::JournalReader::next_stored).
//!
//! The writer lays a record out as `{"seq":N,"ts":"<RFC 3339, µs, Z>",` followed by
//! `serde_json::to_vec(&event)` without its `{`. For the kinds a large journal is made of
//! (`unit_started`, `unit_finished`), [`recognize`] checks a payload against that layout field
//! by field — every key in serde's order, every value in the one form serde_json writes it
//! (no whitespace, no escapes, integers without leading zeros and in range, enum names this
//! build knows, optional fields present or absent exactly as `skip_serializing_if` has them) —
//! and allocates nothing. What it accepts therefore decodes (the general decoder accepts it)
//! and serializes back to the same bytes; anything else (an escape in a string, an older
//! layout, a field this list does not know) is `None`, and the caller decodes it the general
//! way. So the check may be stricter than the decoder, never looser: the tests hold every
//! accepted payload, mutated byte by byte, to "decodes, and re-serializes to itself".

use std::ops::Range;

use chrono::{DateTime, NaiveDate, Utc};

/// The kinds [`recognize`] knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HotKind {
    UnitStarted,
    UnitFinished,
}

impl HotKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HotKind::UnitStarted => "unit_started",
            HotKind::UnitFinished => "unit_finished",
        }
    }
}

/// Where the parts of a recognised payload are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verbatim {
    pub(crate) seq: u64,
    pub(crate) ts: DateTime<Utc>,
    pub(crate) kind: HotKind,
    /// The `ts` string's bytes (without quotes).
    pub(crate) ts_text: Range<usize>,
    /// The unit's name (the string's bytes, without quotes; no escapes in it).
    pub(crate) unit: Range<usize>,
    /// Where `"kind":…` starts: the payload from here is `serde_json::to_vec(&event)` without
    /// its leading `{`.
    pub(crate) fields_start: usize,
}

/// The payload's parts when it is exactly what the writer writes for a `unit_started` or
/// `unit_finished` event (see the module docs); `None` otherwise.
pub(crate) fn recognize(payload: &[u8]) -> Option<Verbatim> {
    let mut cursor = Cursor {
        bytes: payload,
        pos: 0,
    };
    cursor.literal(b"{\"seq\":")?;
    let seq = cursor.unsigned()?;
    cursor.literal(b",\"ts\":\"")?;
    let ts_start = cursor.pos;
    let ts = cursor.timestamp()?;
    let ts_text = ts_start..cursor.pos;
    cursor.literal(b"\",")?;
    let fields_start = cursor.pos;
    cursor.literal(b"\"kind\":\"unit_")?;
    let kind = if cursor.try_literal(b"started\",\"unit\":") {
        HotKind::UnitStarted
    } else if cursor.try_literal(b"finished\",\"unit\":") {
        HotKind::UnitFinished
    } else {
        return None;
    };
    let unit = cursor.string()?;
    cursor.literal(b",\"attempt\":")?;
    cursor.unsigned_u32()?;
    match kind {
        HotKind::UnitStarted => cursor.unit_started_rest()?,
        HotKind::UnitFinished => cursor.unit_finished_rest()?,
    }
    cursor.literal(b"}")?;
    (cursor.pos == payload.len()).then_some(Verbatim {
        seq,
        ts,
        kind,
        ts_text,
        unit,
        fields_start,
    })
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

const INPUT_KINDS: [&[u8]; 4] = [b"command", b"env", b"file", b"upstream"];
const ATTEMPT_STATUSES: [&[u8]; 5] = [
    b"succeeded",
    b"failed",
    b"timed_out",
    b"interrupted",
    b"skipped",
];
const PHASES: [&[u8]; 3] = [b"prepare", b"execute", b"cleanup"];

impl Cursor<'_> {
    fn try_literal(&mut self, literal: &[u8]) -> bool {
        if self.bytes[self.pos..].starts_with(literal) {
            self.pos += literal.len();
            true
        } else {
            false
        }
    }

    fn literal(&mut self, literal: &[u8]) -> Option<()> {
        self.try_literal(literal).then_some(())
    }

    /// A u64 as serde_json writes it: `0`, or digits without a leading zero, in range.
    fn unsigned(&mut self) -> Option<u64> {
        let digits = &self.bytes[self.pos..];
        let n_digits = digits
            .iter()
            .take_while(|byte| byte.is_ascii_digit())
            .count();
        if n_digits == 0 || (n_digits > 1 && digits[0] == b'0') {
            return None;
        }
        let mut value: u64 = 0;
        for &digit in &digits[..n_digits] {
            value = value
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
        }
        self.pos += n_digits;
        Some(value)
    }

    fn unsigned_u32(&mut self) -> Option<u32> {
        u32::try_from(self.unsigned()?).ok()
    }

    /// An i32 as serde_json writes it (`-0` is not how it writes zero).
    fn signed_i32(&mut self) -> Option<i32> {
        let negative = self.try_literal(b"-");
        let magnitude = i64::from(self.unsigned_u32()?);
        if negative && magnitude == 0 {
            return None;
        }
        i32::try_from(if negative { -magnitude } else { magnitude }).ok()
    }

    fn boolean(&mut self) -> Option<bool> {
        if self.try_literal(b"true") {
            Some(true)
        } else if self.try_literal(b"false") {
            Some(false)
        } else {
            None
        }
    }

    fn null(&mut self) -> bool {
        self.try_literal(b"null")
    }

    /// A string serde_json wrote without escapes: no `\`, no control character, valid UTF-8
    /// (anything with an escape is left to the general decoder). The range of its content.
    fn string(&mut self) -> Option<Range<usize>> {
        self.literal(b"\"")?;
        let start = self.pos;
        let rest = &self.bytes[start..];
        let len = rest.iter().position(|&byte| byte == b'"')?;
        let content = &rest[..len];
        if content.iter().any(|&byte| byte == b'\\' || byte < 0x20) {
            return None;
        }
        if !content.is_ascii() {
            std::str::from_utf8(content).ok()?;
        }
        self.pos = start + len + 1;
        Some(start..start + len)
    }

    /// A unit enum variant: one of `names`, as a string.
    fn one_of(&mut self, names: &[&[u8]]) -> Option<()> {
        let content = self.string()?;
        names.contains(&&self.bytes[content]).then_some(())
    }

    /// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, the writer's form (chrono's RFC 3339 with microseconds),
    /// with a real date and time (no leap second: chrono writes that as `:60`, left to the
    /// general decoder).
    fn timestamp(&mut self) -> Option<DateTime<Utc>> {
        let text = self.bytes.get(self.pos..self.pos + 27)?;
        let number = |range: Range<usize>| -> Option<u32> {
            let digits = &text[range];
            digits.iter().try_fold(0u32, |acc, &digit| {
                digit
                    .is_ascii_digit()
                    .then(|| acc * 10 + u32::from(digit - b'0'))
            })
        };
        let separators = [
            (4, b'-'),
            (7, b'-'),
            (10, b'T'),
            (13, b':'),
            (16, b':'),
            (19, b'.'),
        ];
        if separators.iter().any(|&(at, byte)| text[at] != byte) || text[26] != b'Z' {
            return None;
        }
        let year = i32::try_from(number(0..4)?).ok()?;
        let date = NaiveDate::from_ymd_opt(year, number(5..7)?, number(8..10)?)?;
        let time = date.and_hms_micro_opt(
            number(11..13)?,
            number(14..16)?,
            number(17..19)?,
            number(20..26)?,
        )?;
        self.pos += 27;
        Some(time.and_utc())
    }

    fn exit_status(&mut self) -> Option<()> {
        if !self.try_literal(b"{\"code\":") {
            self.literal(b"{\"signal\":")?;
        }
        self.signed_i32()?;
        self.literal(b"}")
    }

    fn optional_exit_status(&mut self) -> Option<()> {
        if self.null() {
            Some(())
        } else {
            self.exit_status()
        }
    }

    /// A JSON array of `item`s, serde_json's compact form.
    fn array(&mut self, item: impl Fn(&mut Self) -> Option<()>) -> Option<()> {
        self.literal(b"[")?;
        if self.try_literal(b"]") {
            return Some(());
        }
        loop {
            item(self)?;
            if self.try_literal(b"]") {
                return Some(());
            }
            self.literal(b",")?;
        }
    }

    /// `UnitStarted` after `unit` and `attempt`.
    fn unit_started_rest(&mut self) -> Option<()> {
        self.literal(b",\"input_hash\":")?;
        self.string()?;
        self.literal(b",\"inputs\":")?;
        self.array(|cursor| {
            cursor.literal(b"{\"kind\":")?;
            cursor.one_of(&INPUT_KINDS)?;
            cursor.literal(b",\"name\":")?;
            cursor.string()?;
            cursor.literal(b",\"hash\":")?;
            cursor.string()?;
            cursor.literal(b"}")
        })?;
        // `inputs_manifest` is skipped when `None`.
        if self.try_literal(b",\"inputs_manifest\":{\"sha256\":") {
            self.string()?;
            self.literal(b",\"count\":")?;
            self.unsigned()?;
            self.literal(b"}")?;
        }
        Some(())
    }

    /// `UnitFinished` after `unit` and `attempt`.
    fn unit_finished_rest(&mut self) -> Option<()> {
        self.literal(b",\"status\":")?;
        self.one_of(&ATTEMPT_STATUSES)?;
        self.literal(b",\"exit\":")?;
        self.optional_exit_status()?;
        self.literal(b",\"failed_phase\":")?;
        if !self.null() {
            self.one_of(&PHASES)?;
        }
        self.literal(b",\"timed_out\":")?;
        self.boolean()?;
        self.literal(b",\"duration_ms\":")?;
        self.unsigned()?;
        // `queued_ms` is skipped when zero: a written zero would not serialize back.
        if self.try_literal(b",\"queued_ms\":") && self.unsigned()? == 0 {
            return None;
        }
        self.literal(b",\"output_hash\":")?;
        if !self.null() {
            self.string()?;
        }
        for field in [
            &b",\"stdout_bytes\":"[..],
            b",\"stderr_bytes\":",
            b",\"user_cpu_ms\":",
            b",\"sys_cpu_ms\":",
            b",\"max_rss_kib\":",
        ] {
            self.literal(field)?;
            self.unsigned()?;
        }
        self.literal(b",\"leftovers_killed\":")?;
        self.unsigned_u32()?;
        self.literal(b",\"phases\":")?;
        self.array(|cursor| {
            cursor.literal(b"{\"phase\":")?;
            cursor.one_of(&PHASES)?;
            cursor.literal(b",\"offset_ms\":")?;
            cursor.unsigned()?;
            cursor.literal(b",\"duration_ms\":")?;
            cursor.unsigned()?;
            cursor.literal(b",\"exit\":")?;
            cursor.optional_exit_status()?;
            cursor.literal(b",\"timed_out\":")?;
            cursor.boolean()?;
            cursor.literal(b"}")
        })?;
        self.literal(b",\"error\":")?;
        if !self.null() {
            self.string()?;
        }
        Some(())
    }
}
