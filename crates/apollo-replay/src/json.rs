//! `apollo replay --format json`: one JSON object per event, one per line.

use std::io::Write;

use apollo_core::Event;
use apollo_core::Record;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use crate::display::offset_ms;
use crate::{Filter, ReplayError};

/// One output line: the record's envelope, then the event's own fields (`kind` first).
#[derive(Serialize)]
struct JsonLine<'a> {
    seq: u64,
    ts: String,
    offset_ms: u64,
    #[serde(flatten)]
    event: &'a Event,
}

/// Writes each record the filter keeps as one JSON object per line (JSON Lines):
/// `{"seq":…,"ts":"…","offset_ms":…,"kind":"unit_finished",…the event's fields}`.
///
/// `ts` is RFC 3339 UTC with microseconds; `offset_ms` counts from the run's start. The event
/// fields are exactly those of the journal format (see apollo-core's `event` module). Streams:
/// memory does not grow with the number of records.
pub fn write_json<I, E, W>(records: I, out: W, filter: &Filter) -> Result<(), ReplayError<E>>
where
    I: IntoIterator<Item = Result<Record, E>>,
    W: Write,
{
    write_json_records(
        &mut Decoded {
            records: records.into_iter(),
        },
        out,
        filter,
    )
}

/// A record for [`write_json_records`]: decoded, or an event still in its encoded form.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one at a time: boxing allocates per record"
)]
pub enum JsonRecord<'a> {
    /// A decoded record.
    Decoded(Record),
    /// A record whose event is at hand as the bytes serde_json writes for it.
    Encoded(EncodedRecord<'a>),
}

/// A record whose event is at hand encoded (as a journal stores it): written out by copying
/// its bytes, not by serializing an [`Event`].
///
/// The caller vouches for the fields' agreement, which is what makes the output identical to
/// that of the decoded record: `ts_text` is `ts.to_rfc3339_opts(SecondsFormat::Micros, true)`
/// and `event_fields` is `serde_json::to_vec(&event)` without its leading `{`.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct EncodedRecord<'a> {
    /// The record's seq.
    pub seq: u64,
    /// The record's time.
    pub ts: DateTime<Utc>,
    /// `ts` in RFC 3339 UTC with microseconds and `Z`.
    pub ts_text: &'a str,
    /// The event's unit, for a unit's event (the unit filter applies to it).
    pub unit: Option<&'a str>,
    /// The event's JSON object without its leading `{` (`"kind":"…",…}`).
    pub event_fields: &'a [u8],
}

impl<'a> EncodedRecord<'a> {
    /// A record from its parts; see the type's docs for what they must agree on. An event of
    /// kind `run_started` must not be passed encoded (it sets the run's origin).
    pub fn new(
        seq: u64,
        ts: DateTime<Utc>,
        ts_text: &'a str,
        unit: Option<&'a str>,
        event_fields: &'a [u8],
    ) -> Self {
        Self {
            seq,
            ts,
            ts_text,
            unit,
            event_fields,
        }
    }
}

/// Where [`write_json_records`] takes its records from: an iterator whose items may borrow
/// from the source (a journal reader's buffer), so it cannot be an [`Iterator`].
pub trait JsonRecords {
    /// What a failed read is.
    type Error;

    /// The next record; `None` at the end.
    fn next_record(&mut self) -> Option<Result<JsonRecord<'_>, Self::Error>>;
}

/// Decoded records from an iterator.
struct Decoded<I> {
    records: I,
}

impl<I, E> JsonRecords for Decoded<I>
where
    I: Iterator<Item = Result<Record, E>>,
{
    type Error = E;

    fn next_record(&mut self) -> Option<Result<JsonRecord<'_>, E>> {
        Some(self.records.next()?.map(JsonRecord::Decoded))
    }
}

/// [`write_json`] over records that may come encoded: a record given as an
/// [`EncodedRecord`] is written by copying its bytes, and comes out exactly as the same
/// record decoded would.
pub fn write_json_records<S, W>(
    records: &mut S,
    mut out: W,
    filter: &Filter,
) -> Result<(), ReplayError<S::Error>>
where
    S: JsonRecords + ?Sized,
    W: Write,
{
    let mut origin = None;
    let mut digits = itoa::Buffer::new();
    while let Some(record) = records.next_record() {
        match record.map_err(ReplayError::Read)? {
            JsonRecord::Decoded(record) => {
                if matches!(record.event, Event::RunStarted(_)) {
                    origin = Some(record.ts);
                }
                let origin = *origin.get_or_insert(record.ts);
                if !filter.keeps(&record, origin) {
                    continue;
                }
                let line = JsonLine {
                    seq: record.seq,
                    ts: record.ts.to_rfc3339_opts(SecondsFormat::Micros, true),
                    offset_ms: offset_ms(origin, record.ts),
                    event: &record.event,
                };
                serde_json::to_writer(&mut out, &line)
                    .map_err(|error| ReplayError::Write(error.into()))?;
                out.write_all(b"\n")?;
            }
            JsonRecord::Encoded(record) => {
                let origin = *origin.get_or_insert(record.ts);
                if !(filter.keeps_time(record.ts, origin)
                    && record.unit.is_none_or(|unit| filter.keeps_unit(unit)))
                {
                    continue;
                }
                // What JsonLine's serialization writes, the flattened event's fields being
                // serde_json's encoding of the event without its `{`.
                out.write_all(b"{\"seq\":")?;
                out.write_all(digits.format(record.seq).as_bytes())?;
                out.write_all(b",\"ts\":\"")?;
                out.write_all(record.ts_text.as_bytes())?;
                out.write_all(b"\",\"offset_ms\":")?;
                out.write_all(digits.format(offset_ms(origin, record.ts)).as_bytes())?;
                out.write_all(b",")?;
                out.write_all(record.event_fields)?;
                out.write_all(b"\n")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TimeBound;
    use crate::testkit::at;
    use apollo_core::testing::EVERY_KIND_JSONL as EVERY_KIND;

    fn every_kind() -> Vec<Record> {
        EVERY_KIND
            .lines()
            .filter(|line| !line.is_empty())
            .enumerate()
            .map(|(index, line)| Record {
                seq: index as u64 + 1,
                ts: at(index as i64 * 1_234 + 7),
                event: serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")),
            })
            .collect()
    }

    /// The records, encoded as a journal holds them (all but `run_started`, which must come
    /// decoded), or all decoded.
    struct Source {
        records: std::vec::IntoIter<Record>,
        encoded: bool,
        buffer: (String, Vec<u8>, Option<String>),
    }

    impl JsonRecords for Source {
        type Error = std::convert::Infallible;

        fn next_record(&mut self) -> Option<Result<JsonRecord<'_>, Self::Error>> {
            let record = self.records.next()?;
            if !self.encoded || matches!(record.event, Event::RunStarted(_)) {
                return Some(Ok(JsonRecord::Decoded(record)));
            }
            self.buffer = (
                record.ts.to_rfc3339_opts(SecondsFormat::Micros, true),
                serde_json::to_vec(&record.event).unwrap(),
                record.event.unit().map(str::to_owned),
            );
            Some(Ok(JsonRecord::Encoded(EncodedRecord::new(
                record.seq,
                record.ts,
                &self.buffer.0,
                self.buffer.2.as_deref(),
                &self.buffer.1[1..],
            ))))
        }
    }

    fn output(records: Vec<Record>, encoded: bool, filter: &Filter) -> String {
        let mut out = Vec::new();
        let mut source = Source {
            records: records.into_iter(),
            encoded,
            buffer: Default::default(),
        };
        write_json_records(&mut source, &mut out, filter).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn an_encoded_record_is_written_exactly_as_the_same_record_decoded() {
        let records = every_kind();
        let filters = [
            Filter::all(),
            Filter::all().unit("a"),
            Filter::all()
                .unit("b\"q")
                .since(TimeBound::FromStart(3_000)),
            Filter::all().until(TimeBound::FromStart(9_000)),
        ];
        for filter in &filters {
            let general = output(records.clone(), false, filter);
            assert_eq!(output(records.clone(), true, filter), general, "{filter:?}");
            let mut via_write_json = Vec::new();
            write_json(
                records
                    .iter()
                    .cloned()
                    .map(Ok::<_, std::convert::Infallible>),
                &mut via_write_json,
                filter,
            )
            .unwrap();
            assert_eq!(String::from_utf8(via_write_json).unwrap(), general);
        }
        let all = output(records.clone(), true, &Filter::all());
        assert_eq!(all.lines().count(), records.len());
        assert!(all.starts_with(r#"{"seq":1,"ts":"#), "{all}");
        assert!(
            all.contains(r#","offset_ms":2468,"kind":"unit_started","unit":"a","attempt":1,"#),
            "{all}"
        );
        // Without a run_started, the first record's time is the origin, encoded or not.
        let headless: Vec<Record> = records[2..].to_vec();
        assert_eq!(
            output(headless.clone(), true, &Filter::all()),
            output(headless, false, &Filter::all())
        );
    }
}
