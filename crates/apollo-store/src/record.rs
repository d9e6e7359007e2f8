//! Record payloads: `{"seq":N,"ts":"…","kind":"…",…event fields…}`.

use apollo_core::Event;
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
        let json = serde_json::to_vec(event).map_err(|error| {
            StoreError::invalid(format!(
                "cannot serialize a {} event: {error}",
                event.kind()
            ))
        })?;
        if json.first() != Some(&b'{') || json.len() < 2 {
            return Err(StoreError::invalid(format!(
                "a {} event does not serialize to a JSON object",
                event.kind()
            )));
        }
        if json.len() + RECORD_PREFIX_ROOM > MAX_PAYLOAD_LEN {
            return Err(StoreError::invalid(format!(
                "a {} event is {} bytes, more than a journal record may hold ({MAX_PAYLOAD_LEN})",
                event.kind(),
                json.len()
            )));
        }
        Ok(Self { json })
    }

    /// The record payload: the event's object with `seq` and `ts` spliced in first, so
    /// `grep '"seq":42,'` and `jq .seq` both work.
    pub(crate) fn payload(&self, seq: u64, ts: DateTime<Utc>, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(b"{\"seq\":");
        out.extend_from_slice(seq.to_string().as_bytes());
        out.extend_from_slice(b",\"ts\":\"");
        out.extend_from_slice(ts.to_rfc3339_opts(SecondsFormat::Micros, true).as_bytes());
        out.extend_from_slice(b"\",");
        out.extend_from_slice(&self.json[1..]);
    }
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
    use apollo_core::event::{RunFinished, RunStatus};
    use chrono::TimeZone;

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
