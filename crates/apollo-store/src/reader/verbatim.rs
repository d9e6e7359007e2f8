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
//! [`decode`] walks the same layout with the same code and builds the event as it goes, for
//! **every** kind: a record in the writer's form is read without serde (whose decoding of the
//! hot kinds was most of a resume's fold). The tests hold it to "the event the general decoder
//! decodes".
//!
//! The walk of the event's fields is not written here: it is the one each record's declaration
//! derives ([`apollo_core::codec`]), the same declaration that gives serde its form and the
//! writer its encoder, so a field added to a record cannot fall off this path. This module
//! reads the envelope (`seq`, `ts`) and says where the parts are.

use std::ops::Range;

use apollo_core::codec::Cursor;
use apollo_core::event::Event;
use chrono::{DateTime, Utc};

use crate::Record;

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
    let (envelope, _) = walk::<false>(payload, true)?;
    let (kind_name, kind) = match envelope.event_kind {
        "unit_started" => ("unit_started", HotKind::UnitStarted),
        "unit_finished" => ("unit_finished", HotKind::UnitFinished),
        _ => return None,
    };
    // `"kind":"unit_…","unit":"…"`: the unit is the payload's first field, a string the walk
    // accepted (no escape in it).
    let unit_start =
        envelope.fields_start + "\"kind\":\"".len() + kind_name.len() + "\",\"unit\":\"".len();
    let unit_len = payload[unit_start..]
        .iter()
        .position(|&byte| byte == b'"')?;
    Some(Verbatim {
        seq: envelope.seq,
        ts: envelope.ts,
        kind,
        ts_text: envelope.ts_text,
        unit: unit_start..unit_start + unit_len,
        fields_start: envelope.fields_start,
    })
}

/// The record in a payload in the writer's exact form, of any kind, built straight from it;
/// `None` for any other payload (the general decoder's to read).
pub(crate) fn decode(payload: &[u8]) -> Option<Record> {
    let (envelope, event) = walk::<true>(payload, false)?;
    Some(Record {
        seq: envelope.seq,
        ts: envelope.ts,
        event,
    })
}

/// Whether the payload is, byte for byte, what the writer writes for its record, of any kind
/// (the check [`recognize`] makes, without its restriction to the two hot kinds).
#[cfg(test)]
pub(crate) fn is_exact(payload: &[u8]) -> bool {
    walk::<false>(payload, false).is_some()
}

/// The envelope of a payload the walk accepted.
struct Envelope {
    seq: u64,
    ts: DateTime<Utc>,
    ts_text: Range<usize>,
    fields_start: usize,
    event_kind: &'static str,
}

/// [`recognize`] and [`decode`] in one: with `BUILD`, the event's strings and lists are
/// filled in; without, they stay empty (no allocation) and the event is thrown away. With
/// `hot_only`, any kind but `unit_started` and `unit_finished` is refused before its fields
/// are walked.
fn walk<const BUILD: bool>(payload: &[u8], hot_only: bool) -> Option<(Envelope, Event)> {
    let mut cursor = Cursor::new(payload);
    cursor.literal(b"{\"seq\":")?;
    let seq = cursor.unsigned()?;
    cursor.literal(b",\"ts\":\"")?;
    let ts_start = cursor.pos();
    let ts = cursor.timestamp()?;
    let ts_text = ts_start..cursor.pos();
    cursor.literal(b"\",")?;
    let fields_start = cursor.pos();
    if hot_only {
        let fields = &payload[fields_start..];
        if !(fields.starts_with(b"\"kind\":\"unit_started\",")
            || fields.starts_with(b"\"kind\":\"unit_finished\","))
        {
            return None;
        }
    }
    let event = Event::walk_tagged::<BUILD>(&mut cursor)?;
    cursor.literal(b"}")?;
    cursor.at_end().then_some((
        Envelope {
            seq,
            ts,
            ts_text,
            fields_start,
            event_kind: event.kind(),
        },
        event,
    ))
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
        (0..4usize)
            .prop_map(|index| [Phase::When, Phase::Prepare, Phase::Execute, Phase::Cleanup][index])
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

    /// What [`is_exact`] promises for a payload of any kind it accepts: it decodes (the
    /// general decoder) to what [`decode`] builds, and is what the writer writes for it.
    fn assert_any_kind_exact(payload: &[u8]) {
        let text = String::from_utf8_lossy(payload);
        let record = decode_record(payload)
            .unwrap_or_else(|error| panic!("accepted but does not decode: {error:?}: {text}"));
        assert_eq!(
            written(record.seq, record.ts, &record.event),
            payload,
            "accepted but does not serialize back to itself: {text}"
        );
        assert_eq!(decode(payload).as_ref(), Some(&record), "{text}");
    }

    #[test]
    fn every_field_of_every_kind_takes_the_fast_path() {
        let ts = DateTime::from_timestamp_micros(1_764_788_400_123_456).unwrap();
        for (index, event) in apollo_core::testing::every_field_of_every_kind()
            .into_iter()
            .enumerate()
        {
            let seq = index as u64 + 1;
            let payload = written(seq, ts, &event);
            let text = String::from_utf8_lossy(&payload).into_owned();
            // The writer's encoder writes serde's bytes after the envelope.
            let by_serde = serde_json::to_vec(&event).unwrap();
            let envelope = format!(
                "{{\"seq\":{seq},\"ts\":\"{}\",",
                ts.to_rfc3339_opts(SecondsFormat::Micros, true)
            );
            assert_eq!(
                text,
                format!("{envelope}{}", String::from_utf8_lossy(&by_serde[1..]))
            );
            // The recogniser accepts it whole, and the fast decoder builds the event, with no
            // fallback to serde.
            assert!(is_exact(&payload), "refused: {text}");
            let record = Record { seq, ts, event };
            assert_eq!(decode(&payload).as_ref(), Some(&record), "{text}");
            assert_eq!(decode_record(&payload).unwrap(), record, "{text}");
            // The hot kinds also come verbatim out of `next_stored`.
            if let Some(parts) = recognize(&payload) {
                assert_exact(&payload, &parts);
            } else {
                assert!(
                    !matches!(record.event, Event::UnitStarted(_) | Event::UnitFinished(_)),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn a_record_of_any_kind_changed_anywhere_is_either_exact_or_refused() {
        let ts = DateTime::from_timestamp_micros(1_764_788_400_123_456).unwrap();
        let mut mutant = Vec::new();
        let mut kinds_seen = std::collections::BTreeSet::new();
        for event in apollo_core::testing::every_field_of_every_kind() {
            // One event of each kind is enough here (each byte of each gets every mutation).
            if !kinds_seen.insert(event.kind()) {
                continue;
            }
            let payload = written(7, ts, &event);
            for at in 0..payload.len() {
                // Each byte replaced by, or preceded by, each mutant byte; or deleted.
                let edits = MUTANTS
                    .iter()
                    .flat_map(|&byte| [(Some(byte), true), (Some(byte), false)])
                    .chain([(None, true)]);
                for (byte, replace) in edits {
                    mutant.clear();
                    mutant.extend_from_slice(&payload[..at]);
                    mutant.extend(byte);
                    mutant.extend_from_slice(&payload[at + usize::from(replace)..]);
                    if is_exact(&mutant) {
                        assert_any_kind_exact(&mutant);
                    } else {
                        assert_eq!(decode(&mutant), None);
                    }
                }
            }
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
