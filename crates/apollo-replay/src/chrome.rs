//! `apollo replay --format chrome-trace`: a Trace Event Format document for Perfetto and
//! chrome://tracing, written while the records stream by.

use std::collections::HashMap;
use std::io::{self, Write};

use apollo_core::Record;
use apollo_core::event::{Event, ExitStatus, UnitFinished};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;

use crate::display::{before, first_line, offset_us, skip_reason_text};
use crate::timeline::Lanes;
use crate::{Filter, ReplayError};

/// Track (`tid`) of run-level events: the run span, resumes, skips and marks. Lane `n` (from
/// 0) is track `n + 1`, so lanes are numbered from 1 in the viewer.
const RUN_TRACK: usize = 0;

/// Writes a run's records as a [Trace Event Format] JSON document, streaming: memory is
/// bounded by the attempts running at once, not by the journal's length.
///
/// * one process (`pid` 1) named after the run; one thread per parallel lane (`tid` = lane
///   number, from 1; lanes are assigned as in [`Timeline`](crate::Timeline)), named by
///   `thread_name` metadata, plus thread 0 for the run itself;
/// * a complete event (`ph: "X"`) per attempt on its lane, with `args` unit, attempt,
///   status, exit, timed_out, input/output hashes, CPU, RSS, byte counts and first error
///   line; nested inside it, one per phase; attempts that never finished end at the last
///   record their apollo process wrote, with status `unfinished`;
/// * a complete event spanning the whole run on thread 0, and instant events (`ph: "i"`)
///   for resumes, skips, reuses (`cat: "reuse"`, with the run and attempt reused) and marks.
///
/// Timestamps are microseconds from the run's start. The filter keeps the attempts of its
/// units that overlap its time window, and the instants inside it.
///
/// [Trace Event Format]: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
pub fn write_chrome_trace<I, E, W>(
    records: I,
    out: W,
    filter: &Filter,
) -> Result<(), ReplayError<E>>
where
    I: IntoIterator<Item = Result<Record, E>>,
    W: Write,
{
    write_chrome_trace_with_workers(records, out, filter, None)
}

/// [`write_chrome_trace_with_workers`] for a run that may be live: with `live_until` (when
/// the reader looked at a run an apollo is writing), an attempt without its end is drawn
/// until then as `running`, and the run as `running` too — never cut short at the last
/// record like the attempts of a killed run.
pub(crate) fn write_chrome_trace_live<I, E, W>(
    records: I,
    out: W,
    filter: &Filter,
    workers: Option<usize>,
    live_until: Option<DateTime<Utc>>,
) -> Result<(), ReplayError<E>>
where
    I: IntoIterator<Item = Result<Record, E>>,
    W: Write,
{
    let mut trace = TraceWriter::new(out, filter)?;
    trace.lanes = Lanes::with_max(workers);
    trace.live_until = live_until;
    for record in records {
        trace.write_record(&record.map_err(ReplayError::Read)?)?;
    }
    trace.finish()?;
    Ok(())
}

/// [`write_chrome_trace`] for a run known to have run at most `workers` attempts at once:
/// never more lane tracks than that.
pub fn write_chrome_trace_with_workers<I, E, W>(
    records: I,
    out: W,
    filter: &Filter,
    workers: Option<usize>,
) -> Result<(), ReplayError<E>>
where
    I: IntoIterator<Item = Result<Record, E>>,
    W: Write,
{
    let mut trace = TraceWriter::new(out, filter)?;
    trace.lanes = Lanes::with_max(workers);
    for record in records {
        trace.write_record(&record.map_err(ReplayError::Read)?)?;
    }
    trace.finish()?;
    Ok(())
}

/// An attempt whose `unit_finished` has not been read yet.
#[derive(Debug)]
struct OpenAttempt {
    seq: u64,
    start: DateTime<Utc>,
    input_hash: String,
}

struct TraceWriter<'f, W: Write> {
    events: EventWriter<W>,
    filter: &'f Filter,
    origin: Option<DateTime<Utc>>,
    run_name: Option<String>,
    host: Option<String>,
    /// How the run finished, until a resume reopens it.
    finished: Option<(DateTime<Utc>, &'static str)>,
    /// The last record a running apollo wrote (`unit_marked` is written by `apollo mark`).
    last_alive_ts: Option<DateTime<Utc>>,
    open: HashMap<(String, u32), OpenAttempt>,
    lanes: Lanes,
    n_named_lanes: usize,
    /// The run is live: open attempts end here, `running` (see [`write_chrome_trace_live`]).
    live_until: Option<DateTime<Utc>>,
    /// Drawing the attempts a live apollo is running now (not ones a dead one left).
    drawing_live: bool,
}

impl<'f, W: Write> TraceWriter<'f, W> {
    fn new(out: W, filter: &'f Filter) -> io::Result<Self> {
        Ok(Self {
            events: EventWriter::new(out)?,
            filter,
            origin: None,
            run_name: None,
            host: None,
            finished: None,
            last_alive_ts: None,
            open: HashMap::new(),
            lanes: Lanes::default(),
            n_named_lanes: 0,
            live_until: None,
            drawing_live: false,
        })
    }

    fn write_record(&mut self, record: &Record) -> io::Result<()> {
        if matches!(record.event, Event::RunStarted(_)) && self.origin.is_none() {
            self.origin = Some(record.ts);
        }
        let origin = *self.origin.get_or_insert(record.ts);
        let previous_alive_ts = self.last_alive_ts;
        if !matches!(record.event, Event::UnitMarked(_)) {
            self.last_alive_ts = Some(record.ts);
        }
        let at_us = offset_us(origin, record.ts);
        match &record.event {
            Event::RunStarted(started) if self.run_name.is_none() => {
                let name = format!("apollo run {} ({})", started.run_id, started.pipeline);
                self.name_process(&name)?;
                self.run_name = Some(name);
                self.host = Some(started.host.clone());
            }
            Event::RunResumed(resumed) => {
                self.abandon_open_attempts(previous_alive_ts.unwrap_or(record.ts))?;
                self.finished = None;
                if self.filter.keeps_time(record.ts, origin) {
                    self.events.event(&json!({
                        "name": "resumed", "cat": "resume", "ph": "i", "s": "g", "pid": 1,
                        "tid": RUN_TRACK, "ts": at_us,
                        "args": {"seq": record.seq, "host": resumed.host, "pid": resumed.pid},
                    }))?;
                }
            }
            Event::UnitStarted(started) => {
                let key = (started.unit.clone(), started.attempt);
                if let Some(stale) = self.open.remove(&key) {
                    // A second start of an attempt still open: the first never finished.
                    self.write_attempt(&key.0, key.1, &stale, record.ts, None)?;
                }
                self.open.insert(
                    key,
                    OpenAttempt {
                        seq: record.seq,
                        start: record.ts,
                        input_hash: started.input_hash.clone(),
                    },
                );
            }
            Event::UnitFinished(finished) => {
                let key = (finished.unit.clone(), finished.attempt);
                let open = match self.open.remove(&key) {
                    Some(open) => open,
                    None => {
                        // No start on record: place the attempt by its measured duration.
                        let start = before(record.ts, finished.duration_ms, origin);
                        OpenAttempt {
                            seq: record.seq,
                            start,
                            input_hash: String::new(),
                        }
                    }
                };
                let mut open = open;
                // Committed ahead: the processes started `queued_ms` after `unit_started`, and
                // ran for `duration_ms` (the record may have waited for a commit).
                let (start, end) = crate::display::real_span(
                    open.start,
                    record.ts,
                    finished.queued_ms,
                    finished.duration_ms,
                );
                open.start = start;
                self.write_attempt(&key.0, key.1, &open, end, Some(finished))?;
            }
            Event::UnitSkipped(skipped) if self.filter.keeps(record, origin) => {
                self.events.event(&json!({
                    "name": format!("skipped {}", skipped.unit), "cat": "skip",
                    "ph": "i", "s": "t", "pid": 1, "tid": RUN_TRACK, "ts": at_us,
                    "args": {"unit": skipped.unit, "reason": skip_reason_text(&skipped.reason)},
                }))?;
            }
            Event::UnitReused(reused) if self.filter.keeps(record, origin) => {
                // A reused unit runs nothing in this run: without an instant of its own it
                // would read as never started, where every other view says reused (issue 35,
                // found by tests/e2e/agreement.rs).
                self.events.event(&json!({
                    "name": format!("reused {}", reused.unit), "cat": "reuse",
                    "ph": "i", "s": "t", "pid": 1, "tid": RUN_TRACK, "ts": at_us,
                    "args": {"unit": reused.unit, "from_run": reused.from_run,
                             "from_attempt": reused.from_attempt},
                }))?;
            }
            Event::UnitMarked(marked) if self.filter.keeps(record, origin) => {
                let verdict = marked.verdict.as_str();
                self.events.event(&json!({
                    "name": format!("marked {} {verdict}", marked.unit), "cat": "mark",
                    "ph": "i", "s": "t", "pid": 1, "tid": RUN_TRACK, "ts": at_us,
                    "args": {"unit": marked.unit, "attempt": marked.attempt,
                             "verdict": verdict, "by": marked.by, "note": marked.note},
                }))?;
            }
            Event::RunFinished(finished) => {
                self.finished = Some((record.ts, finished.status.as_str()));
            }
            // Filtered out, a second run_started, or a kind this version does not know.
            _ => {}
        }
        Ok(())
    }

    fn finish(mut self) -> io::Result<()> {
        let live_until = self.live_until.filter(|_| self.finished.is_none());
        // The attempts still open at the end of a live run's records are running now.
        self.drawing_live = live_until.is_some();
        if let Some(end) = live_until.or(self.last_alive_ts) {
            self.abandon_open_attempts(end)?;
        }
        let run_name = match self.run_name.take() {
            Some(name) => name,
            None => {
                let name = "apollo run".to_owned();
                self.name_process(&name)?;
                name
            }
        };
        if let Some(origin) = self.origin {
            let (end, status) = match self.finished {
                Some((end, status)) => (end, status),
                None => match live_until {
                    Some(now) => (now.max(origin), "running"),
                    None => (self.last_alive_ts.unwrap_or(origin), "incomplete"),
                },
            };
            self.events.event(&json!({
                "name": run_name, "cat": "run", "ph": "X", "pid": 1, "tid": RUN_TRACK,
                "ts": 0, "dur": offset_us(origin, end),
                "args": {"status": status, "host": self.host},
            }))?;
        }
        self.events.finish()
    }

    fn name_process(&mut self, name: &str) -> io::Result<()> {
        self.events
            .event(&json!({"name": "process_name", "ph": "M", "pid": 1, "args": {"name": name}}))?;
        self.events.thread_name(RUN_TRACK, "run")
    }

    /// Places an attempt on a lane (see [`Lanes`]), naming the lane's track the first time it
    /// is used.
    fn place_lane(&mut self, start: DateTime<Utc>, end: DateTime<Utc>) -> io::Result<usize> {
        let lane = self.lanes.place(start, end);
        while self.n_named_lanes <= lane {
            self.n_named_lanes += 1;
            let tid = self.n_named_lanes;
            self.events.thread_name(tid, &format!("lane {tid}"))?;
        }
        Ok(lane)
    }

    /// Ends every open attempt at `end`: their apollo process died before finishing them.
    fn abandon_open_attempts(&mut self, end: DateTime<Utc>) -> io::Result<()> {
        let mut open: Vec<_> = self.open.drain().collect();
        open.sort_unstable_by_key(|(_, open)| open.seq);
        for ((unit, attempt), open) in &open {
            self.write_attempt(unit, *attempt, open, end, None)?;
        }
        Ok(())
    }

    fn write_attempt(
        &mut self,
        unit: &str,
        attempt: u32,
        open: &OpenAttempt,
        end: DateTime<Utc>,
        finished: Option<&UnitFinished>,
    ) -> io::Result<()> {
        let Some(origin) = self.origin else {
            return Ok(());
        };
        let end = end.max(open.start);
        // Placed whether or not it is drawn, so lanes match the unfiltered timeline's.
        let lane = self.place_lane(open.start, end)?;
        if !self.filter.keeps_unit(unit) || !self.filter.overlaps(open.start, end, origin) {
            return Ok(());
        }
        let start_us = offset_us(origin, open.start);
        let end_us = offset_us(origin, end).max(start_us);
        let tid = lane + 1;
        let input_hash = Some(open.input_hash.as_str()).filter(|hash| !hash.is_empty());
        // Attempts and phases are most of a trace: typed events serialise without building
        // a `Value` per event.
        let name = format!("{unit} #{attempt}");
        self.events.event(&CompleteEvent {
            name: &name,
            cat: "attempt",
            ph: "X",
            pid: 1,
            tid,
            ts: start_us,
            dur: end_us - start_us,
            args: AttemptArgs {
                unit,
                attempt,
                status: match finished {
                    Some(finished) => finished.status.as_str(),
                    None if self.drawing_live => "running",
                    None => "unfinished",
                },
                exit: finished.and_then(|f| f.exit),
                timed_out: finished.is_some_and(|f| f.timed_out),
                input_hash,
                output_hash: finished.and_then(|f| f.output_hash.as_deref()),
                user_cpu_ms: finished.map(|f| f.user_cpu_ms),
                sys_cpu_ms: finished.map(|f| f.sys_cpu_ms),
                max_rss_kib: finished.map(|f| f.max_rss_kib),
                stdout_bytes: finished.map(|f| f.stdout_bytes),
                stderr_bytes: finished.map(|f| f.stderr_bytes),
                error: finished
                    .and_then(|f| f.error.as_deref())
                    .map(first_line)
                    .filter(|line| !line.is_empty()),
            },
        })?;
        for phase in finished.map_or(&[][..], |f| &f.phases) {
            // Clamped into the attempt so the viewer nests the phases under it.
            let phase_start = start_us
                .saturating_add(phase.offset_ms.saturating_mul(1000))
                .min(end_us);
            let phase_end = phase_start
                .saturating_add(phase.duration_ms.saturating_mul(1000))
                .min(end_us);
            self.events.event(&CompleteEvent {
                name: phase.phase.as_str(),
                cat: "phase",
                ph: "X",
                pid: 1,
                tid,
                ts: phase_start,
                dur: phase_end - phase_start,
                args: PhaseArgs {
                    unit,
                    attempt,
                    exit: phase.exit,
                    timed_out: phase.timed_out,
                },
            })?;
        }
        Ok(())
    }
}

/// A complete (`ph: "X"`) trace event.
#[derive(Serialize)]
struct CompleteEvent<'a, A: Serialize> {
    name: &'a str,
    cat: &'static str,
    ph: &'static str,
    pid: u32,
    tid: usize,
    ts: u64,
    dur: u64,
    args: A,
}

/// `args` of an attempt's event. `exit` is `{"code": n}` or `{"signal": n}`, as in the journal.
#[derive(Serialize)]
struct AttemptArgs<'a> {
    unit: &'a str,
    attempt: u32,
    status: &'static str,
    exit: Option<ExitStatus>,
    timed_out: bool,
    input_hash: Option<&'a str>,
    output_hash: Option<&'a str>,
    user_cpu_ms: Option<u64>,
    sys_cpu_ms: Option<u64>,
    max_rss_kib: Option<u64>,
    stdout_bytes: Option<u64>,
    stderr_bytes: Option<u64>,
    error: Option<&'a str>,
}

/// `args` of a phase's event.
#[derive(Serialize)]
struct PhaseArgs<'a> {
    unit: &'a str,
    attempt: u32,
    exit: Option<ExitStatus>,
    timed_out: bool,
}

/// Writes the `traceEvents` array one event per line, so a trace is never held whole.
struct EventWriter<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> EventWriter<W> {
    fn new(mut out: W) -> io::Result<Self> {
        out.write_all(b"{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n")?;
        Ok(Self { out, first: true })
    }

    fn event(&mut self, event: &impl Serialize) -> io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut self.out, event).map_err(io::Error::from)
    }

    fn thread_name(&mut self, tid: usize, name: &str) -> io::Result<()> {
        self.event(
            &json!({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                           "args": {"name": name}}),
        )?;
        self.event(
            &json!({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid,
                           "args": {"sort_index": tid}}),
        )
    }

    fn finish(mut self) -> io::Result<()> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()
    }
}
