//! Record payloads: `{"seq":N,"ts":"…","kind":"…",…event fields…}`.

use apollo_core::Event;
use apollo_core::codec::JsonValue;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;

use crate::Record;
use crate::error::StoreError;
use crate::frame::MAX_PAYLOAD_LEN;

/// An event serialized once, by the appending thread, before the writer gives it a seq and ts.
#[derive(Debug, Clone)]
pub(crate) struct EncodedEvent {
    /// The event's JSON object (`{"kind":…}`).
    json: Vec<u8>,
}

/// Room left in a payload for `{"seq":…,"ts":"…",`.
const RECORD_PREFIX_ROOM: usize = 64;

impl EncodedEvent {
    pub(crate) fn new(event: &Event) -> Result<Self, StoreError> {
        let mut json = Vec::new();
        encode_checked(event, &mut json)?;
        Ok(Self { json })
    }

    /// The record payload ([`payload`]) of this event.
    #[cfg(test)]
    pub(crate) fn payload(&self, seq: u64, ts: DateTime<Utc>, out: &mut Vec<u8>) {
        payload(&self.json, seq, ts, out);
    }
}

impl AsRef<[u8]> for EncodedEvent {
    fn as_ref(&self) -> &[u8] {
        &self.json
    }
}

/// Appends `event`'s JSON object to `json`, checked to be one that a record can hold; on an
/// error, `json` is as it was.
pub(crate) fn encode_checked(event: &Event, json: &mut Vec<u8>) -> Result<(), StoreError> {
    let start = json.len();
    encode_event_into(event, json);
    let len = json.len() - start;
    let problem = if json.get(start) != Some(&b'{') || len < 2 {
        Some(format!(
            "a {} event does not serialize to a JSON object",
            event.kind()
        ))
    } else if len + RECORD_PREFIX_ROOM > MAX_PAYLOAD_LEN {
        Some(format!(
            "a {} event is {len} bytes, more than a journal record may hold ({MAX_PAYLOAD_LEN})",
            event.kind(),
        ))
    } else {
        None
    };
    match problem {
        Some(problem) => {
            json.truncate(start);
            Err(StoreError::invalid(problem))
        }
        None => Ok(()),
    }
}

/// The record payload of an event whose JSON object ([`encode_checked`]) is `json`: the
/// object with `seq` and `ts` spliced in first, so `grep '"seq":42,'` and `jq .seq` both work.
pub(crate) fn payload(json: &[u8], seq: u64, ts: DateTime<Utc>, out: &mut Vec<u8>) {
    out.clear();
    out.reserve(RECORD_PREFIX_ROOM + json.len());
    out.extend_from_slice(b"{\"seq\":");
    out.extend_from_slice(itoa::Buffer::new().format(seq).as_bytes());
    out.extend_from_slice(b",\"ts\":\"");
    push_timestamp(ts, out);
    out.extend_from_slice(b"\",");
    out.extend_from_slice(&json[1..]);
}

/// `ts` as `ts.to_rfc3339_opts(SecondsFormat::Micros, true)` writes it
/// (`2026-11-30T02:15:07.123456Z`), by hand for the years 0000–9999 (the writer dates every
/// record; see the journal benchmark's write figure); other years, and a leap second, through
/// chrono.
fn push_timestamp(ts: DateTime<Utc>, out: &mut Vec<u8>) {
    use chrono::{Datelike, Timelike};
    let nanos = ts.nanosecond();
    let Some(year) = u32::try_from(ts.year())
        .ok()
        .filter(|&year| year <= 9999 && nanos < 1_000_000_000)
    else {
        out.extend_from_slice(ts.to_rfc3339_opts(SecondsFormat::Micros, true).as_bytes());
        return;
    };
    // Each field and the separator before it (`T`, `:`, `.`; none before the year).
    let fields = [
        (None, year, 4),
        (Some(b'-'), ts.month(), 2),
        (Some(b'-'), ts.day(), 2),
        (Some(b'T'), ts.hour(), 2),
        (Some(b':'), ts.minute(), 2),
        (Some(b':'), ts.second(), 2),
        (Some(b'.'), nanos / 1000, 6),
    ];
    for (separator, value, width) in fields {
        out.extend(separator);
        for place in (0..width).rev() {
            out.push(b'0' + (value / 10u32.pow(place) % 10) as u8);
        }
    }
    out.push(b'Z');
}

/// [`encode_event_into`] into a buffer of its own.
#[cfg(test)]
fn encode_event(event: &Event) -> Vec<u8> {
    let mut json = Vec::new();
    encode_event_into(event, &mut json);
    json
}

/// The event's JSON object, `{"kind":"…",…fields…}`, exactly as serde writes [`Event`] (an
/// internally tagged enum), by the codec declared with the events ([`apollo_core::codec`]:
/// one definition of each record, and the tests hold every field of every kind to serde's
/// bytes) — without serde's tagging layer, which a no-op run of many reused units spent a
/// visible part of its time in. Appended to `json`, which may hold other events
/// before it (the writer encodes a batch into one buffer it keeps).
fn encode_event_into(event: &Event, json: &mut Vec<u8>) {
    event.encode_json(json);
}

#[derive(Deserialize)]
struct RecordWire {
    seq: u64,
    ts: String,
    #[serde(flatten)]
    event: Event,
}

/// Why a record payload did not decode.
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// Its `kind` is one this build does not know: a newer apollo wrote it (its checksum held,
    /// so it is not damage). Never skipped: DESIGN §17, a reader refuses what it cannot read.
    UnknownKind(String),
    /// Anything else: the text says what is wrong.
    Malformed(String),
}

/// Decodes a record payload.
pub(crate) fn decode_record(payload: &[u8]) -> Result<Record, DecodeError> {
    // A record of any kind in the writer's exact form: built without serde, by the walk each
    // record's declaration derives (`apollo_core::codec`).
    if let Some(record) = crate::reader::decode_exact(payload) {
        return Ok(record);
    }
    if let Some(record) = decode_hot_record(payload) {
        return Ok(record);
    }
    let wire: RecordWire =
        serde_json::from_slice(payload).map_err(|error| match unknown_kind(payload) {
            Some(kind) => DecodeError::UnknownKind(kind),
            None => DecodeError::Malformed(format!("the record does not decode: {error}")),
        })?;
    let ts = DateTime::parse_from_rfc3339(&wire.ts)
        .map_err(|error| {
            DecodeError::Malformed(format!(
                "the record's ts {:?} is not RFC 3339: {error}",
                wire.ts
            ))
        })?
        .with_timezone(&Utc);
    Ok(Record {
        seq: wire.seq,
        ts,
        event: wire.event,
    })
}

/// The fast path for the records a journal is mostly made of (`unit_started`,
/// `unit_finished`; `unit_reused` in a run that reused its units; `unit_files`) and for the
/// large ones that open a run (`run_started`, `run_resumed`), as the writer lays them out (`{"seq":N,"ts":"…","kind":"…",…}`): the
/// envelope is read by hand and the event's struct decoded straight from the rest, instead of
/// serde's internally tagged enum under a flattened envelope, which buffers every record twice
/// (it was about half of `apollo replay`'s time over a 1,000,000-record journal). Anything
/// else, or anything unexpected here, is `None`: [`decode_record`]'s general path decodes it
/// (and words its errors).
fn decode_hot_record(payload: &[u8]) -> Option<Record> {
    let rest = payload.strip_prefix(b"{\"seq\":")?;
    let digits = rest.iter().take_while(|byte| byte.is_ascii_digit()).count();
    let seq: u64 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let rest = rest[digits..].strip_prefix(b",\"ts\":\"")?;
    let ts_len = rest.iter().position(|&byte| byte == b'"')?;
    let ts = std::str::from_utf8(&rest[..ts_len]).ok()?;
    let rest = rest[ts_len..].strip_prefix(b"\",\"kind\":\"")?;
    let kind_len = rest.iter().position(|&byte| byte == b'"')?;
    let kind = &rest[..kind_len];
    // The event's other fields, as an object of their own: `{` and what follows the comma.
    let fields = rest[kind_len + 1..].strip_prefix(b",")?;
    let mut object = Vec::with_capacity(fields.len() + 1);
    object.push(b'{');
    object.extend_from_slice(fields);
    let event = match kind {
        b"unit_started" => Event::UnitStarted(serde_json::from_slice(&object).ok()?),
        b"unit_finished" => Event::UnitFinished(serde_json::from_slice(&object).ok()?),
        // A run that reused its units writes one of these per unit instead.
        b"unit_reused" => Event::UnitReused(serde_json::from_slice(&object).ok()?),
        b"unit_files" => Event::UnitFiles(serde_json::from_slice(&object).ok()?),
        // Not many, but each names every unit of the pipeline (90 KB for 10,000 units), and
        // deciding a run reads the first record of the latest runs.
        b"run_started" => Event::RunStarted(serde_json::from_slice(&object).ok()?),
        b"run_resumed" => Event::RunResumed(serde_json::from_slice(&object).ok()?),
        _ => return None,
    };
    let ts = DateTime::parse_from_rfc3339(ts).ok()?.with_timezone(&Utc);
    Some(Record { seq, ts, event })
}

/// The record's `kind`, when it is a string that names no [`Event`] this build knows.
fn unknown_kind(payload: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Probe {
        kind: String,
    }
    // An internally tagged enum reports an unknown tag as "unknown variant" whatever the other
    // fields are; a known tag with bad fields reports something else. Decoding only the tag
    // against the real enum keeps the list of kinds in one place (the enum).
    let probe: Probe = serde_json::from_slice(payload).ok()?;
    let tag_only = serde_json::json!({ "kind": probe.kind });
    match serde_json::from_value::<Event>(tag_only) {
        Err(error) if error.to_string().starts_with("unknown variant") => Some(probe.kind),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo_core::event::{InputComponent, InputKind, RunFinished, RunStatus, UnitReused};
    use chrono::TimeZone;

    /// Format 1.5 wrote a reproduction's run kind as a second `kind` key beside the record's
    /// tag; 1.6 writes `run_kind` (one `kind` per record, as JSON tools expect). Both read as
    /// a reproduction, with or without an escaped string (which takes the general path).
    #[test]
    fn a_reproduction_s_run_started_has_one_kind_key_and_the_old_form_still_reads() {
        use apollo_core::event::{RunKind, RunStarted};
        let ts = Utc.with_ymd_and_hms(2026, 12, 3, 20, 0, 0).unwrap();
        for pipeline in ["nightly", "say \"hi\""] {
            let started = Event::RunStarted(RunStarted {
                run_id: "20261203T200000Z-0001".into(),
                pipeline: pipeline.into(),
                config_path: "apollo.yaml".into(),
                config_hash: "c".repeat(64),
                definition_hash: "d".repeat(64),
                apollo_version: "0.1.0".into(),
                host: "h".into(),
                pid: 1,
                units: vec!["u".into()],
                identity: Some("nightly@apollo.yaml".into()),
                run_kind: RunKind::Reproduction,
                ..RunStarted::default()
            });
            let mut json = Vec::new();
            encode_checked(&started, &mut json).unwrap();
            let mut record = Vec::new();
            payload(&json, 1, ts, &mut record);
            let text = String::from_utf8(record.clone()).unwrap();
            assert_eq!(text.matches("\"kind\":").count(), 1, "{text}");
            assert!(text.contains("\"run_kind\":\"reproduction\""), "{text}");
            let old = text.replace("\"run_kind\":", "\"kind\":");
            for bytes in [record, old.into_bytes()] {
                let decoded = decode_record(&bytes).unwrap_or_else(|_| panic!("{text}"));
                let Event::RunStarted(decoded) = decoded.event else {
                    panic!("{text}");
                };
                assert_eq!(decoded.run_kind(), RunKind::Reproduction, "{text}");
                assert_eq!(decoded.pipeline, pipeline);
            }
        }
    }

    fn reused(unit: &str, name: &str, inputs: usize) -> Event {
        let kinds = [
            InputKind::Command,
            InputKind::Env,
            InputKind::File,
            InputKind::Upstream,
        ];
        Event::UnitReused(UnitReused {
            unit: unit.to_owned(),
            from_run: format!("20261201T130916Z-1d0b{name}"),
            from_attempt: u32::try_from(inputs).unwrap() * 70_000,
            input_hash: "6590cc98aba1f56893900704471ba8e12e4099bd5ddf2829aff56e1cb7c82350".into(),
            inputs: (0..inputs)
                .map(|index| InputComponent {
                    kind: kinds[index % kinds.len()],
                    name: format!("{name}{index}"),
                    hash: format!("{index}{name}"),
                })
                .collect(),
            output_hash: name.to_owned(),
            restored: vec![format!("out/{name}.csv")],
        })
    }

    #[test]
    fn unit_reused_is_encoded_by_hand_exactly_as_serde_encodes_it() {
        let mut texts: Vec<String> = (0u8..=0x7f)
            .map(|byte| char::from(byte).to_string())
            .collect();
        texts.extend(
            [
                "",
                "u00001",
                "a \"quoted\" \\ name",
                "tab\tnew\nline\r\u{8}\u{c}\u{0}\u{1f}\u{7f}",
                "é, ü, 日本, 🚀, \u{2028}\u{2029}",
                "\\u0041 is not an escape here",
            ]
            .map(String::from),
        );
        for text in &texts {
            for inputs in [0, 1, 5] {
                let event = reused(text, text, inputs);
                let by_hand = encode_event(&event);
                assert_eq!(
                    String::from_utf8_lossy(&by_hand),
                    String::from_utf8_lossy(&serde_json::to_vec(&event).unwrap()),
                    "{text:?}, {inputs} inputs"
                );
                let Record { event: decoded, .. } =
                    decode_general(&frame_payload(&EncodedEvent::new(&event).unwrap()));
                assert_eq!(decoded, event);
            }
        }
    }

    /// A record payload around `encoded`.
    fn frame_payload(encoded: &EncodedEvent) -> Vec<u8> {
        let mut payload = Vec::new();
        let ts = Utc.with_ymd_and_hms(2026, 12, 1, 23, 30, 0).unwrap();
        encoded.payload(7, ts, &mut payload);
        payload
    }

    /// What the general path (serde's tagged enum under the flattened envelope) decodes.
    fn decode_general(payload: &[u8]) -> Record {
        let wire: RecordWire = serde_json::from_slice(payload).unwrap();
        Record {
            seq: wire.seq,
            ts: DateTime::parse_from_rfc3339(&wire.ts)
                .unwrap()
                .with_timezone(&Utc),
            event: wire.event,
        }
    }

    /// Records as apollo writes them (from a real run), the hot kinds and a few others.
    const RECORDS: [&str; 9] = [
        r#"{"seq":2,"ts":"2026-12-01T08:14:51.346793Z","kind":"unit_started","unit":"u00000","attempt":1,"input_hash":"195ef9d0eb823abc6b0d90836a95d0c42113a58a22bf82c6e6616f939951f3c0","inputs":[{"kind":"command","name":"execute","hash":"b6bf788ceabafc27cf50088d6925f02de39efb6b1624e7df4f9437bccf71dfec"}]}"#,
        r#"{"seq":3,"ts":"2026-12-01T08:14:51.346793Z","kind":"unit_started","unit":"big","attempt":2,"input_hash":"195ef9d0eb823abc6b0d90836a95d0c42113a58a22bf82c6e6616f939951f3c0","inputs":[],"inputs_manifest":{"sha256":"b6bf788ceabafc27cf50088d6925f02de39efb6b1624e7df4f9437bccf71dfec","count":100000}}"#,
        r#"{"seq":12,"ts":"2026-12-01T08:14:51.346807Z","kind":"unit_finished","unit":"u00001","attempt":1,"status":"succeeded","exit":{"code":0},"failed_phase":null,"timed_out":false,"duration_ms":1,"queued_ms":1,"output_hash":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","stdout_bytes":0,"stderr_bytes":0,"user_cpu_ms":0,"sys_cpu_ms":0,"max_rss_kib":5444,"leftovers_killed":0,"phases":[{"phase":"execute","offset_ms":0,"duration_ms":0,"exit":{"code":0},"timed_out":false}],"error":null}"#,
        r#"{"seq":13,"ts":"2026-12-01T08:14:51.5Z","kind":"unit_finished","unit":"u\"2","attempt":3,"status":"failed","exit":{"signal":9},"failed_phase":"execute","timed_out":true,"duration_ms":1000,"queued_ms":1,"output_hash":null,"stdout_bytes":10,"stderr_bytes":20,"user_cpu_ms":0,"sys_cpu_ms":0,"max_rss_kib":5444,"leftovers_killed":2,"phases":[],"error":"timed out"}"#,
        r#"{"seq":14,"ts":"2026-12-01T08:14:52Z","kind":"run_finished","status":"succeeded","succeeded":3,"failed":0,"skipped":1}"#,
        r#"{"seq":15,"ts":"2026-12-01T08:14:52Z","kind":"unit_started","unit":"bad","attempt":"one"}"#,
        r#"{"seq":16,"ts":"2026-12-01T10:32:24.394217Z","kind":"unit_reused","unit":"u00000","from_run":"20261201T103143Z-00d7","from_attempt":1,"input_hash":"6590cc98aba1f56893900704471ba8e12e4099bd5ddf2829aff56e1cb7c82350","inputs":[{"kind":"command","name":"execute","hash":"526f4da7ae6f7fc7ac05a32b0f822f1529980b7a473d96ceee0dd9d68eca73fb"}],"output_hash":"ac26725d9f36d8977c22e3c92fcb8347c8d353559b25376941808190c52dbd27"}"#,
        r#"{"seq":17,"ts":"2026-12-01T10:32:24.5Z","kind":"unit_files","unit":"u00001","attempt":1,"side":"outputs","files":[{"path":"stamps/u00001","sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":0,"mode":420},{"path":"big.bin","sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":3000000000,"mode":420,"not_captured":"2.8 GiB > 64 MiB"}]}"#,
        r#"{"seq":18,"ts":"2026-12-01T10:32:24.5Z","kind":"unit_files","unit":"u00002","attempt":1,"side":"inputs","files":[],"manifest":{"sha256":"b6bf788ceabafc27cf50088d6925f02de39efb6b1624e7df4f9437bccf71dfec","count":100000}}"#,
    ];

    #[test]
    fn the_fast_path_decodes_hot_records_exactly_as_the_general_path() {
        let mut n_fast = 0;
        for text in RECORDS {
            let payload = text.as_bytes();
            let Ok(_) = serde_json::from_slice::<RecordWire>(payload) else {
                // Malformed: neither path accepts it, and the error is the general path's.
                assert!(decode_hot_record(payload).is_none(), "{text}");
                assert!(matches!(
                    decode_record(payload),
                    Err(DecodeError::Malformed(_))
                ));
                continue;
            };
            let general = decode_general(payload);
            if let Some(fast) = decode_hot_record(payload) {
                n_fast += 1;
                assert_eq!(fast, general, "{text}");
            }
            assert_eq!(decode_record(payload).unwrap(), general, "{text}");
            // And as the writer lays it out today.
            let mut rewritten = Vec::new();
            EncodedEvent::new(&general.event).unwrap().payload(
                general.seq,
                general.ts,
                &mut rewritten,
            );
            assert_eq!(
                decode_hot_record(&rewritten).is_some(),
                matches!(
                    general.event,
                    Event::UnitStarted(_)
                        | Event::UnitFinished(_)
                        | Event::UnitReused(_)
                        | Event::UnitFiles(_)
                        | Event::RunStarted(_)
                        | Event::RunResumed(_)
                )
            );
            assert_eq!(decode_record(&rewritten).unwrap(), general);
        }
        // Every kind as the writer lays it out: the fast path, where it applies, builds the
        // event the general path builds.
        let mut n_runs_opened = 0;
        for line in apollo_core::testing::EVERY_KIND_JSONL.lines() {
            let Ok(event) = serde_json::from_str::<Event>(line) else {
                continue;
            };
            let mut rewritten = Vec::new();
            let ts = Utc.with_ymd_and_hms(2026, 12, 1, 23, 45, 0).unwrap();
            EncodedEvent::new(&event)
                .unwrap()
                .payload(41, ts, &mut rewritten);
            let general = decode_general(&rewritten);
            assert_eq!(general.event, event);
            if let Some(fast) = decode_hot_record(&rewritten) {
                n_runs_opened += usize::from(matches!(
                    fast.event,
                    Event::RunStarted(_) | Event::RunResumed(_)
                ));
                assert_eq!(fast, general, "{line}");
            }
        }
        assert!(
            n_runs_opened >= 2,
            "run_started and run_resumed took the fast path"
        );
        assert_eq!(
            n_fast, 7,
            "every unit_started, unit_finished, unit_reused and unit_files took the fast path"
        );
        // Not the writer's layout: the general path decodes it.
        let reordered = br#"{"kind":"unit_skipped","seq":3,"ts":"2026-11-30T02:15:07Z","unit":"a","reason":"upstream_failed","upstream":"b"}"#;
        assert!(decode_hot_record(reordered).is_none());
    }

    #[test]
    fn hot_records_are_encoded_as_serde_encodes_the_tagged_event() {
        let mut kinds = std::collections::BTreeSet::new();
        let mut events: Vec<Event> = apollo_core::testing::EVERY_KIND_JSONL
            .lines()
            .chain(RECORDS.iter().copied())
            .filter_map(|line| serde_json::from_str::<RecordWire>(line).ok())
            .map(|wire| wire.event)
            .collect();
        // Strings JSON must escape, in every field that takes text.
        let awkward = "a\"b\\c\n\t\u{1}é/€";
        for event in &mut events {
            match event {
                Event::UnitStarted(payload) => {
                    payload.unit = awkward.into();
                    for input in &mut payload.inputs {
                        input.name = awkward.into();
                    }
                }
                Event::UnitReused(payload) => payload.from_run = awkward.into(),
                Event::UnitFinished(payload) => payload.error = Some(awkward.into()),
                _ => {}
            }
        }
        for event in &events {
            kinds.insert(event.kind());
            assert_eq!(
                String::from_utf8(encode_event(event)).unwrap(),
                serde_json::to_string(event).unwrap()
            );
        }
        for hot in ["unit_started", "unit_finished", "unit_reused", "unit_files"] {
            assert!(kinds.contains(hot), "the fixtures have a {hot}");
        }
    }

    #[test]
    fn timestamps_are_written_as_chrono_writes_them() {
        let micros = [
            0,
            1_764_547_200_123_456,
            -62_167_219_200_000_000, // 0000-01-01
            253_402_300_799_999_999, // 9999-12-31T23:59:59.999999
            253_402_300_800_000_000, // 10000-01-01: chrono's `+10000`
            -62_167_219_200_000_001, // -0001-12-31
            951_782_400_000_001,     // 2000-02-29
        ];
        let mut cases: Vec<DateTime<Utc>> = micros
            .into_iter()
            .map(|us| DateTime::from_timestamp_micros(us).unwrap())
            .collect();
        // A leap second (chrono keeps it as a nanosecond past 999,999,999), and nanoseconds
        // below a microsecond, which the format drops.
        cases.push(
            chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
                .unwrap()
                .and_hms_nano_opt(23, 59, 59, 1_500_000_000)
                .unwrap()
                .and_utc(),
        );
        cases.push(DateTime::from_timestamp(1_764_547_200, 123_456_789).unwrap());
        for ts in cases {
            let mut written = Vec::new();
            push_timestamp(ts, &mut written);
            assert_eq!(
                String::from_utf8(written).unwrap(),
                ts.to_rfc3339_opts(SecondsFormat::Micros, true)
            );
        }
    }

    #[test]
    fn payload_puts_seq_ts_kind_first_and_decodes_back() {
        let event = Event::RunFinished(RunFinished {
            status: RunStatus::Succeeded,
            succeeded: 3,
            failed: 0,
            skipped: 1,
            reused: 0,
        });
        let ts = Utc.with_ymd_and_hms(2026, 11, 30, 2, 15, 7).unwrap()
            + chrono::Duration::microseconds(123_456);
        let mut payload = Vec::new();
        EncodedEvent::new(&event)
            .unwrap()
            .payload(42, ts, &mut payload);
        assert_eq!(
            String::from_utf8(payload.clone()).unwrap(),
            r#"{"seq":42,"ts":"2026-11-30T02:15:07.123456Z","kind":"run_finished","status":"succeeded","succeeded":3,"failed":0,"skipped":1}"#
        );
        let record = decode_record(&payload).unwrap();
        assert_eq!((record.seq, record.ts, record.event), (42, ts, event));
    }

    #[test]
    fn a_kind_this_build_does_not_know_is_told_apart_from_a_malformed_record() {
        let newer =
            br#"{"seq":3,"ts":"2026-11-30T02:15:07.123456Z","kind":"unit_teleported","unit":"a"}"#;
        assert!(matches!(
            decode_record(newer),
            Err(DecodeError::UnknownKind(kind)) if kind == "unit_teleported"
        ));
        // A known kind with a missing field is damage (or a bug), not a newer apollo.
        let broken = br#"{"seq":3,"ts":"2026-11-30T02:15:07.123456Z","kind":"run_finished"}"#;
        assert!(matches!(
            decode_record(broken),
            Err(DecodeError::Malformed(_))
        ));
        let no_kind = br#"{"seq":3,"ts":"2026-11-30T02:15:07.123456Z"}"#;
        assert!(matches!(
            decode_record(no_kind),
            Err(DecodeError::Malformed(_))
        ));
    }
}
