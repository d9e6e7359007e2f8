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
//!
//! [`decode`] walks the same layout with the same code and builds the event as it goes: a
//! record in the writer's form is read without serde (whose decoding of these two kinds was
//! most of a resume's fold). The tests hold it to "the event the general decoder decodes".

use std::ops::Range;

use apollo_core::Phase;
use apollo_core::event::{
    AttemptStatus, Event, ExitStatus, InputComponent, InputKind, InputManifestRef, PhaseRecord,
    UnitFinished, UnitStarted,
};
use chrono::{DateTime, NaiveDate, Utc};

use crate::Record;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Whether some byte of `word` is zero (exact: no false negatives, no false positives).
fn has_zero_byte(word: u64) -> bool {
    word.wrapping_sub(ONES) & !word & HIGH_BITS != 0
}

/// Whether some byte of `word` (eight bytes of a string) may end it or need checking: a
/// quote, a backslash, a control character, or a non-ASCII byte. Never a false negative.
fn needs_a_look(word: u64) -> bool {
    let non_ascii = word & HIGH_BITS != 0;
    // Some byte below 0x20 (exact for bytes below 0x80, which is all that is left).
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH_BITS != 0;
    non_ascii
        || control
        || has_zero_byte(word ^ (ONES * u64::from(b'"')))
        || has_zero_byte(word ^ (ONES * u64::from(b'\\')))
}

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
/// `unit_finished` event (see the module docs); `None` otherwise. Allocates nothing.
pub(crate) fn recognize(payload: &[u8]) -> Option<Verbatim> {
    walk::<false>(payload).map(|(parts, _)| parts)
}

/// The record in a payload [`recognize`] accepts, built straight from it; `None` for any
/// other payload (the general decoder's to read).
pub(crate) fn decode(payload: &[u8]) -> Option<Record> {
    let (parts, event) = walk::<true>(payload)?;
    Some(Record {
        seq: parts.seq,
        ts: parts.ts,
        event,
    })
}

/// [`recognize`] and [`decode`] in one: with `BUILD`, the event's strings and lists are
/// filled in; without, they stay empty (no allocation) and the event is thrown away.
fn walk<const BUILD: bool>(payload: &[u8]) -> Option<(Verbatim, Event)> {
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
    let name = cursor.text::<BUILD>(unit.clone())?;
    cursor.literal(b",\"attempt\":")?;
    let attempt = cursor.unsigned_u32()?;
    let event = match kind {
        HotKind::UnitStarted => cursor.unit_started_rest::<BUILD>(name, attempt)?,
        HotKind::UnitFinished => cursor.unit_finished_rest::<BUILD>(name, attempt)?,
    };
    cursor.literal(b"}")?;
    (cursor.pos == payload.len()).then_some((
        Verbatim {
            seq,
            ts,
            kind,
            ts_text,
            unit,
            fields_start,
        },
        event,
    ))
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

const INPUT_KINDS: [(&[u8], InputKind); 4] = [
    (b"command", InputKind::Command),
    (b"env", InputKind::Env),
    (b"file", InputKind::File),
    (b"upstream", InputKind::Upstream),
];
const ATTEMPT_STATUSES: [(&[u8], AttemptStatus); 5] = [
    (b"succeeded", AttemptStatus::Succeeded),
    (b"failed", AttemptStatus::Failed),
    (b"timed_out", AttemptStatus::TimedOut),
    (b"interrupted", AttemptStatus::Interrupted),
    (b"skipped", AttemptStatus::Skipped),
];
const PHASES: [(&[u8], Phase); 3] = [
    (b"prepare", Phase::Prepare),
    (b"execute", Phase::Execute),
    (b"cleanup", Phase::Cleanup),
];

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
        let bytes = self.bytes;
        let mut ascii = true;
        let mut at = start;
        loop {
            // Eight bytes at a time while none of them is a quote, a backslash, a control
            // character or non-ASCII (most strings here are hex hashes and unit names).
            if let Some(chunk) = bytes.get(at..at + 8) {
                let mut word = [0u8; 8];
                word.copy_from_slice(chunk);
                if !needs_a_look(u64::from_le_bytes(word)) {
                    at += 8;
                    continue;
                }
            }
            // Then byte by byte through the eight that need a look (or the last few).
            let end = (at + 8).min(bytes.len());
            if at == end {
                return None;
            }
            for (index, &byte) in bytes[at..end].iter().enumerate() {
                match byte {
                    b'"' => {
                        let close = at + index;
                        if !ascii {
                            std::str::from_utf8(&bytes[start..close]).ok()?;
                        }
                        self.pos = close + 1;
                        return Some(start..close);
                    }
                    b'\\' | 0..0x20 => return None,
                    0x80.. => ascii = false,
                    _ => {}
                }
            }
            at = end;
        }
    }

    /// With `BUILD`, the content of a string [`Cursor::string`] accepted, owned; without,
    /// an empty string (nothing allocated).
    fn text<const BUILD: bool>(&self, content: Range<usize>) -> Option<String> {
        if BUILD {
            // `string` accepted only UTF-8 here; checked again rather than assumed.
            std::str::from_utf8(&self.bytes[content])
                .ok()
                .map(str::to_owned)
        } else {
            Some(String::new())
        }
    }

    /// A string, owned with `BUILD` (see [`Cursor::text`]).
    fn owned_string<const BUILD: bool>(&mut self) -> Option<String> {
        let content = self.string()?;
        self.text::<BUILD>(content)
    }

    /// A unit enum variant: one of `names`, as a string; its value.
    fn one_of<T: Copy>(&mut self, names: &[(&[u8], T)]) -> Option<T> {
        let content = self.string()?;
        let name = &self.bytes[content];
        names
            .iter()
            .find(|(candidate, _)| *candidate == name)
            .map(|&(_, value)| value)
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

    fn exit_status(&mut self) -> Option<ExitStatus> {
        let signal = !self.try_literal(b"{\"code\":");
        if signal {
            self.literal(b"{\"signal\":")?;
        }
        let value = self.signed_i32()?;
        self.literal(b"}")?;
        Some(if signal {
            ExitStatus::Signal(value)
        } else {
            ExitStatus::Code(value)
        })
    }

    fn optional_exit_status(&mut self) -> Option<Option<ExitStatus>> {
        if self.null() {
            Some(None)
        } else {
            self.exit_status().map(Some)
        }
    }

    /// A JSON array of `item`s, serde_json's compact form.
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
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
    fn unit_started_rest<const BUILD: bool>(
        &mut self,
        unit: String,
        attempt: u32,
    ) -> Option<Event> {
        self.literal(b",\"input_hash\":")?;
        let input_hash = self.owned_string::<BUILD>()?;
        self.literal(b",\"inputs\":")?;
        let mut inputs = Vec::new();
        self.array(|cursor| {
            cursor.literal(b"{\"kind\":")?;
            let kind = cursor.one_of(&INPUT_KINDS)?;
            cursor.literal(b",\"name\":")?;
            let name = cursor.owned_string::<BUILD>()?;
            cursor.literal(b",\"hash\":")?;
            let hash = cursor.owned_string::<BUILD>()?;
            if BUILD {
                inputs.push(InputComponent { kind, name, hash });
            }
            cursor.literal(b"}")
        })?;
        // `inputs_manifest` is skipped when `None`.
        let inputs_manifest = if self.try_literal(b",\"inputs_manifest\":{\"sha256\":") {
            let sha256 = self.owned_string::<BUILD>()?;
            self.literal(b",\"count\":")?;
            let count = self.unsigned()?;
            self.literal(b"}")?;
            Some(InputManifestRef { sha256, count })
        } else {
            None
        };
        Some(Event::UnitStarted(UnitStarted {
            unit,
            attempt,
            input_hash,
            inputs,
            inputs_manifest,
        }))
    }

    /// `UnitFinished` after `unit` and `attempt`.
    fn unit_finished_rest<const BUILD: bool>(
        &mut self,
        unit: String,
        attempt: u32,
    ) -> Option<Event> {
        self.literal(b",\"status\":")?;
        let status = self.one_of(&ATTEMPT_STATUSES)?;
        self.literal(b",\"exit\":")?;
        let exit = self.optional_exit_status()?;
        self.literal(b",\"failed_phase\":")?;
        let failed_phase = if self.null() {
            None
        } else {
            Some(self.one_of(&PHASES)?)
        };
        self.literal(b",\"timed_out\":")?;
        let timed_out = self.boolean()?;
        self.literal(b",\"duration_ms\":")?;
        let duration_ms = self.unsigned()?;
        // `queued_ms` is skipped when zero: a written zero would not serialize back.
        let queued_ms = if self.try_literal(b",\"queued_ms\":") {
            match self.unsigned()? {
                0 => return None,
                queued_ms => queued_ms,
            }
        } else {
            0
        };
        self.literal(b",\"output_hash\":")?;
        let output_hash = if self.null() {
            None
        } else {
            Some(self.owned_string::<BUILD>()?)
        };
        let mut counts = [0u64; 5];
        for (field, count) in [
            &b",\"stdout_bytes\":"[..],
            b",\"stderr_bytes\":",
            b",\"user_cpu_ms\":",
            b",\"sys_cpu_ms\":",
            b",\"max_rss_kib\":",
        ]
        .into_iter()
        .zip(&mut counts)
        {
            self.literal(field)?;
            *count = self.unsigned()?;
        }
        let [
            stdout_bytes,
            stderr_bytes,
            user_cpu_ms,
            sys_cpu_ms,
            max_rss_kib,
        ] = counts;
        self.literal(b",\"leftovers_killed\":")?;
        let leftovers_killed = self.unsigned_u32()?;
        self.literal(b",\"phases\":")?;
        let mut phases = Vec::new();
        self.array(|cursor| {
            cursor.literal(b"{\"phase\":")?;
            let phase = cursor.one_of(&PHASES)?;
            cursor.literal(b",\"offset_ms\":")?;
            let offset_ms = cursor.unsigned()?;
            cursor.literal(b",\"duration_ms\":")?;
            let duration_ms = cursor.unsigned()?;
            cursor.literal(b",\"exit\":")?;
            let exit = cursor.optional_exit_status()?;
            cursor.literal(b",\"timed_out\":")?;
            let timed_out = cursor.boolean()?;
            if BUILD {
                phases.push(PhaseRecord {
                    phase,
                    offset_ms,
                    duration_ms,
                    exit,
                    timed_out,
                });
            }
            cursor.literal(b"}")
        })?;
        self.literal(b",\"error\":")?;
        let error = if self.null() {
            None
        } else {
            Some(self.owned_string::<BUILD>()?)
        };
        Some(Event::UnitFinished(UnitFinished {
            unit,
            attempt,
            status,
            exit,
            failed_phase,
            timed_out,
            duration_ms,
            queued_ms,
            output_hash,
            stdout_bytes,
            stderr_bytes,
            user_cpu_ms,
            sys_cpu_ms,
            max_rss_kib,
            leftovers_killed,
            phases,
            error,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{EncodedEvent, decode_record};
    use apollo_core::Event;
    use apollo_core::Phase;
    use apollo_core::event::{
        AttemptStatus, ExitStatus, InputComponent, InputKind, InputManifestRef, PhaseRecord,
        UnitFinished, UnitStarted,
    };
    use chrono::SecondsFormat;
    use proptest::prelude::*;

    /// The payload the writer writes for `event` at `seq` and `ts`.
    fn written(seq: u64, ts: DateTime<Utc>, event: &Event) -> Vec<u8> {
        let mut payload = Vec::new();
        EncodedEvent::new(event)
            .unwrap()
            .payload(seq, ts, &mut payload);
        payload
    }

    /// What `recognize` promises for a payload it accepts: the payload decodes (the reader's
    /// general decoder), is what the writer writes for the decoded record, and the parts
    /// point at that record's seq, time, kind, unit and encoded event.
    fn assert_exact(payload: &[u8], parts: &Verbatim) {
        let text = String::from_utf8_lossy(payload);
        let record = decode_record(payload)
            .unwrap_or_else(|error| panic!("accepted but does not decode: {error:?}: {text}"));
        assert_eq!(
            written(record.seq, record.ts, &record.event),
            payload,
            "accepted but does not serialize back to itself: {text}"
        );
        assert_eq!((parts.seq, parts.ts), (record.seq, record.ts), "{text}");
        assert_eq!(parts.kind.as_str(), record.event.kind(), "{text}");
        assert_eq!(
            &payload[parts.ts_text.clone()],
            record
                .ts
                .to_rfc3339_opts(SecondsFormat::Micros, true)
                .as_bytes()
        );
        assert_eq!(
            std::str::from_utf8(&payload[parts.unit.clone()]).ok(),
            record.event.unit(),
            "{text}"
        );
        let event_json = serde_json::to_vec(&record.event).unwrap();
        assert_eq!(&payload[parts.fields_start..], &event_json[1..], "{text}");
        assert_eq!(
            decode(payload).as_ref(),
            Some(&record),
            "accepted, but built differently from the general decoder: {text}"
        );
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("u00001".to_owned()),
            Just("load[eu,a]".to_owned()),
            proptest::collection::vec(any::<char>(), 0..8).prop_map(String::from_iter),
        ]
    }

    fn exit() -> impl Strategy<Value = Option<ExitStatus>> {
        prop_oneof![
            Just(None),
            any::<i32>().prop_map(|code| Some(ExitStatus::Code(code))),
            any::<i32>().prop_map(|signal| Some(ExitStatus::Signal(signal))),
            Just(Some(ExitStatus::Code(0))),
        ]
    }

    fn number() -> impl Strategy<Value = u64> {
        prop_oneof![Just(0), Just(1), Just(u64::MAX), any::<u64>(), 0..1000u64]
    }

    fn phase() -> impl Strategy<Value = Phase> {
        (0..3usize).prop_map(|index| [Phase::Prepare, Phase::Execute, Phase::Cleanup][index])
    }

    fn unit_started() -> impl Strategy<Value = Event> {
        let component = (0..4usize, text(), text()).prop_map(|(kind, name, hash)| InputComponent {
            kind: [
                InputKind::Command,
                InputKind::Env,
                InputKind::File,
                InputKind::Upstream,
            ][kind],
            name,
            hash,
        });
        (
            text(),
            any::<u32>(),
            text(),
            proptest::collection::vec(component, 0..4),
            proptest::option::of((text(), number())),
        )
            .prop_map(|(unit, attempt, input_hash, inputs, manifest)| {
                Event::UnitStarted(UnitStarted {
                    unit,
                    attempt,
                    input_hash,
                    inputs,
                    inputs_manifest: manifest
                        .map(|(sha256, count)| InputManifestRef { sha256, count }),
                })
            })
    }

    fn unit_finished() -> impl Strategy<Value = Event> {
        let phase_record = (phase(), number(), number(), exit(), any::<bool>()).prop_map(
            |(phase, offset_ms, duration_ms, exit, timed_out)| PhaseRecord {
                phase,
                offset_ms,
                duration_ms,
                exit,
                timed_out,
            },
        );
        (
            (
                text(),
                any::<u32>(),
                0..5usize,
                exit(),
                proptest::option::of(phase()),
            ),
            (
                any::<bool>(),
                number(),
                number(),
                proptest::option::of(text()),
            ),
            (number(), number(), number(), any::<u32>()),
            (
                proptest::collection::vec(phase_record, 0..4),
                proptest::option::of(text()),
            ),
        )
            .prop_map(
                |(
                    (unit, attempt, status, exit, failed_phase),
                    (timed_out, duration_ms, queued_ms, output_hash),
                    (bytes, cpu_ms, rss, leftovers_killed),
                    (phases, error),
                )| {
                    Event::UnitFinished(UnitFinished {
                        unit,
                        attempt,
                        status: [
                            AttemptStatus::Succeeded,
                            AttemptStatus::Failed,
                            AttemptStatus::TimedOut,
                            AttemptStatus::Interrupted,
                            AttemptStatus::Skipped,
                        ][status],
                        exit,
                        failed_phase,
                        timed_out,
                        duration_ms,
                        queued_ms,
                        output_hash,
                        stdout_bytes: bytes,
                        stderr_bytes: bytes / 3,
                        user_cpu_ms: cpu_ms,
                        sys_cpu_ms: cpu_ms / 7,
                        max_rss_kib: rss,
                        leftovers_killed,
                        phases,
                        error,
                    })
                },
            )
    }

    fn timestamp() -> impl Strategy<Value = DateTime<Utc>> {
        prop_oneof![
            // 0000-01-01 to 9999-12-31, to the microsecond.
            (-62_167_219_200_000_000i64..253_402_300_799_999_999)
                .prop_map(|us| DateTime::from_timestamp_micros(us).unwrap()),
            Just(DateTime::from_timestamp(1_764_547_200, 0).unwrap()),
        ]
    }

    /// Bytes a mutation puts in: what changes a token's meaning or form.
    const MUTANTS: &[u8] = b"0 19-\"\\{}[],:.enul\x1f\x7f\xc3\xff";

    fn assert_mutants_exact_or_refused(payload: &[u8]) {
        let mut mutant = Vec::with_capacity(payload.len() + 1);
        for at in 0..payload.len() {
            let edits = MUTANTS
                .iter()
                .map(|&byte| (Some(byte), true))
                .chain(MUTANTS.iter().map(|&byte| (Some(byte), false)))
                .chain([(None, true)]);
            for (byte, replace) in edits {
                mutant.clear();
                mutant.extend_from_slice(&payload[..at]);
                mutant.extend(byte);
                let rest = if replace { at + 1 } else { at };
                mutant.extend_from_slice(&payload[rest..]);
                match recognize(&mutant) {
                    Some(parts) => assert_exact(&mutant, &parts),
                    None => assert_eq!(decode(&mutant), None),
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn every_payload_the_writer_writes_for_a_hot_kind_is_recognised_exactly(
            seq in number(),
            ts in timestamp(),
            event in prop_oneof![unit_started(), unit_finished()],
        ) {
            let payload = written(seq, ts, &event);
            let has_escape = serde_json::to_string(&event).unwrap().contains('\\');
            match recognize(&payload) {
                Some(parts) => assert_exact(&payload, &parts),
                // Only a string with an escape is left to the decoder.
                None => prop_assert!(has_escape, "{}", String::from_utf8_lossy(&payload)),
            }
        }

        #[test]
        fn a_payload_changed_anywhere_is_either_recognised_exactly_or_refused(
            seq in number(),
            ts in timestamp(),
            event in prop_oneof![unit_started(), unit_finished()],
        ) {
            assert_mutants_exact_or_refused(&written(seq, ts, &event));
        }
    }

    /// Real records (from a run of the bench's layered pipeline) and edge cases.
    const REAL: [&str; 3] = [
        r#"{"seq":127370,"ts":"2026-12-01T10:30:12.502774Z","kind":"unit_started","unit":"u01689","attempt":31001,"input_hash":"89f504f49f2e191175ea3584d7ddb88022ac2d079b912ce93c8aaefb711b0c54","inputs":[{"kind":"command","name":"execute","hash":"b6bf788ceabafc27cf50088d6925f02de39efb6b1624e7df4f9437bccf71dfec"},{"kind":"upstream","name":"u01648","hash":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}]}"#,
        r#"{"seq":127371,"ts":"2026-12-01T10:30:12.502774Z","kind":"unit_finished","unit":"u01664","attempt":31001,"status":"succeeded","exit":{"code":0},"failed_phase":null,"timed_out":false,"duration_ms":0,"queued_ms":10,"output_hash":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","stdout_bytes":0,"stderr_bytes":0,"user_cpu_ms":0,"sys_cpu_ms":0,"max_rss_kib":12040,"leftovers_killed":0,"phases":[{"phase":"execute","offset_ms":0,"duration_ms":0,"exit":{"code":0},"timed_out":false}],"error":null}"#,
        r#"{"seq":9,"ts":"2026-12-01T10:30:12.502774Z","kind":"unit_finished","unit":"b","attempt":2,"status":"failed","exit":{"signal":-9},"failed_phase":"cleanup","timed_out":true,"duration_ms":5,"output_hash":null,"stdout_bytes":1,"stderr_bytes":2,"user_cpu_ms":3,"sys_cpu_ms":4,"max_rss_kib":5,"leftovers_killed":4294967295,"phases":[],"error":"été"}"#,
    ];

    #[test]
    fn real_records_are_recognised_and_every_one_byte_change_is_exact_or_refused() {
        for text in REAL {
            let parts = recognize(text.as_bytes()).unwrap_or_else(|| panic!("{text}"));
            assert_exact(text.as_bytes(), &parts);
            assert_mutants_exact_or_refused(text.as_bytes());
        }
    }

    #[test]
    fn a_word_with_any_byte_that_ends_or_spoils_a_string_needs_a_look() {
        for byte in 0..=u8::MAX {
            let special = byte == b'"' || byte == b'\\' || !(0x20..0x80).contains(&byte);
            for position in 0..8 {
                let mut word = *b"0123abcd";
                word[position] = byte;
                let flagged = needs_a_look(u64::from_le_bytes(word));
                assert!(flagged || !special, "{byte:#04x} at {position}");
                if !special {
                    assert!(!flagged, "{byte:#04x} at {position}: a needless look");
                }
            }
        }
    }

    #[test]
    fn what_decodes_but_would_not_serialize_back_is_left_to_the_decoder() {
        let [started, finished, _] = REAL;
        let cases = [
            // Serialized differently: a zero queued_ms is skipped, -0 is 0, a leap second.
            finished.replace("\"queued_ms\":10", "\"queued_ms\":0"),
            finished.replace("{\"code\":0},\"failed", "{\"code\":-0},\"failed"),
            finished.replace("12.502774Z", "60.502774Z"),
            // An escape, an older layout (no input components' kind first), whitespace.
            started.replace("u01689", "u\\u0030"),
            started.replace("\"inputs\":[", "\"inputs\": ["),
            started
                .replace(",\"kind\":\"unit_started\"", "")
                .replace("{\"seq\"", "{\"kind\":\"unit_started\",\"seq\""),
            // A field this list does not know.
            finished.replace("\"error\":null}", "\"error\":null,\"extra\":1}"),
        ];
        for case in &cases {
            assert!(recognize(case.as_bytes()).is_none(), "{case}");
            assert!(decode(case.as_bytes()).is_none(), "{case}");
        }
        // And what the decoder itself refuses, the recognizer refuses too.
        for case in [
            started.replace("31001", "4294967296"),
            started.replace("\"u01689\"", "\"u\u{1}\""),
            started.replace("2026-12-01", "2026-02-30"),
        ] {
            assert!(recognize(case.as_bytes()).is_none(), "{case}");
            assert!(decode_record(case.as_bytes()).is_err(), "{case}");
        }
    }
}
