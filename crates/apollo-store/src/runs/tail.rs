//! A run's lifecycle from the end of its journal: the last `run_started`, `run_resumed` or
//! `run_finished` decides (what may follow `run_finished` changes nothing).

use apollo_core::event::ReproductionCompared;

use super::*;

/// What the end of a run's journal says of its lifecycle.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    /// The timestamp of the last record.
    pub(crate) last_ts: Option<DateTime<Utc>>,
    /// The run's `run_finished` and its timestamp, when the last record that decides the
    /// lifecycle (`run_started`, `run_resumed`, `run_finished`) is a `run_finished`.
    pub(crate) finished: Option<(DateTime<Utc>, RunFinished)>,
    /// A reproduction's verdict, its last `reproduction_compared` (written after its
    /// `run_finished`; format 1.11).
    pub(crate) compared: Option<ReproductionCompared>,
}

/// Where a run stands after one more record, read in journal order.
#[derive(Debug)]
enum Lifecycle {
    /// Nothing read yet tells (only records that may follow `run_finished`).
    Unknown,
    /// Started or resumed, not finished since.
    Open,
    /// Finished, and not resumed since.
    Finished(DateTime<Utc>, RunFinished),
}

impl Lifecycle {
    /// The lifecycle after `record`. What may be recorded after `run_finished` — a hook's end,
    /// a human's verdict — never changes whether a run finished (issue 35: a pipeline with a
    /// hook was never finished); every other record belongs to a started or resumed run.
    fn after(self, record: Record) -> Self {
        match record.event {
            Event::RunFinished(finished) => Lifecycle::Finished(record.ts, finished),
            Event::HookFinished(_) | Event::UnitMarked(_) | Event::ReproductionCompared(_) => self,
            _ => Lifecycle::Open,
        }
    }
}

/// The lifecycle of a run from the end of its journal, reading only the tail of its last
/// segment when it can.
pub(crate) fn tail(run_dir: &Path) -> Result<Tail, StoreError> {
    const TAIL: u64 = 64 * 1024;
    let segments = list_segment_files(&run_dir.join("journal"))?;
    if let Some(last) = segments.last() {
        let (file, len) = open_segment_for_read(&last.path)?;
        // Zeros after the last record are space the writer allocated ahead.
        let len =
            data_end(&file, len).map_err(|source| StoreError::io("read", &last.path, source))?;
        if len > TAIL {
            let mut frames = FrameReader::new(file, len);
            let io_error = |source| StoreError::io("read", &last.path, source);
            let mut lifecycle = Lifecycle::Unknown;
            let mut last_ts: Option<DateTime<Utc>> = None;
            // Whether the window holds a record of an earlier batch than the last one (the
            // writer dates every record of a batch alike): then the whole last batch is in the
            // window and good, and its last record stands. Else a hole in the last batch
            // before the window (never acknowledged, cut by recovery) cannot be ruled out.
            let mut earlier_batch = false;
            let mut damaged = false;
            let mut compared = None;
            let mut payload = Vec::new();
            if frames.resync_after(len - TAIL - 1).map_err(io_error)? {
                loop {
                    match frames.next_frame(&mut payload).map_err(io_error)? {
                        Ok(Some(_)) => {
                            if let Ok(record) = decode_record(&payload) {
                                earlier_batch |= last_ts.is_some_and(|ts| ts != record.ts);
                                last_ts = Some(record.ts);
                                note_compared(&mut compared, &record);
                                lifecycle = lifecycle.after(record);
                            }
                        }
                        Ok(None) => break,
                        // Damage or a torn tail: the reader below applies the rules (a record
                        // after a torn write's hole was never acknowledged).
                        Err(_) => {
                            damaged = true;
                            break;
                        }
                    }
                }
            }
            if earlier_batch && !damaged {
                match lifecycle {
                    Lifecycle::Unknown => {}
                    Lifecycle::Open => {
                        return Ok(Tail {
                            last_ts,
                            finished: None,
                            compared,
                        });
                    }
                    Lifecycle::Finished(ts, finished) => {
                        return Ok(Tail {
                            last_ts,
                            finished: Some((ts, finished)),
                            compared,
                        });
                    }
                }
            }
        }
    }
    // Small segment, header-only segment, huge records, or a window of hooks and marks only:
    // read the whole last segment, and the whole journal if that holds no record.
    let (mut lifecycle, mut last_ts, mut compared) = (Lifecycle::Unknown, None, None);
    for record in JournalReader::open_last_segment(run_dir)? {
        let record = record?;
        last_ts = Some(record.ts);
        note_compared(&mut compared, &record);
        lifecycle = lifecycle.after(record);
    }
    if matches!(lifecycle, Lifecycle::Unknown) {
        for record in JournalReader::open(run_dir, ReadOptions::default())? {
            let record = record?;
            last_ts = Some(record.ts);
            note_compared(&mut compared, &record);
            lifecycle = lifecycle.after(record);
        }
    }
    Ok(Tail {
        last_ts,
        compared,
        finished: match lifecycle {
            Lifecycle::Finished(ts, finished) => Some((ts, finished)),
            Lifecycle::Unknown | Lifecycle::Open => None,
        },
    })
}

/// Keeps `record` in `compared` when it is a reproduction's verdict (the last one stands).
fn note_compared(compared: &mut Option<ReproductionCompared>, record: &Record) {
    if let Event::ReproductionCompared(verdict) = &record.event {
        *compared = Some(verdict.clone());
    }
}
