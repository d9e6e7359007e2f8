//! `apollo replay --format json`: one JSON object per event, one per line.

use std::io::Write;

use apollo_core::Event;
use apollo_core::Record;
use chrono::SecondsFormat;
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
pub fn write_json<I, E, W>(records: I, mut out: W, filter: &Filter) -> Result<(), ReplayError<E>>
where
    I: IntoIterator<Item = Result<Record, E>>,
    W: Write,
{
    let mut origin = None;
    for record in records {
        let record = record.map_err(ReplayError::Read)?;
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
        serde_json::to_writer(&mut out, &line).map_err(|error| ReplayError::Write(error.into()))?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}
