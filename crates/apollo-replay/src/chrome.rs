//! `apollo replay --format chrome-trace`: a Trace Event Format document for Perfetto and
//! chrome://tracing.

use std::io::{self, Write};

use apollo_core::event::{ExitStatus, Verdict};
use serde_json::{Value, json};

use crate::Timeline;
use crate::display::{offset_us, skip_reason_text};

/// Track (`tid`) of run-level events: the run span, resumes, skips and marks. Lane `n` is
/// track `n + 1`, so lanes are numbered from 1 in the viewer.
const RUN_TRACK: usize = 0;

/// Writes the timeline as a [Trace Event Format] JSON document.
///
/// * one process (`pid` 1) named after the run; one thread per parallel lane (`tid` = lane
///   number, from 1), named by `thread_name` metadata, plus thread 0 for the run itself;
/// * a complete event (`ph: "X"`) per attempt on its lane, with `args` attempt, status, exit,
///   input/output hashes, CPU, RSS, byte counts and error; nested inside it, one per phase;
/// * instant events (`ph: "i"`) for skips, marks and resumes, on thread 0.
///
/// Timestamps are microseconds from the run's start.
///
/// [Trace Event Format]: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
pub fn write_chrome_trace<W: Write>(timeline: &Timeline, mut out: W) -> io::Result<()> {
    let origin = timeline.origin();
    let mut writer = EventWriter::new(&mut out)?;

    let run_name = format!(
        "apollo run {} ({})",
        timeline.run_id.as_deref().unwrap_or("?"),
        timeline.pipeline.as_deref().unwrap_or("?")
    );
    writer
        .event(&json!({"name": "process_name", "ph": "M", "pid": 1, "args": {"name": run_name}}))?;
    writer.thread_name(RUN_TRACK, "run")?;
    for lane in 0..timeline.n_lanes {
        writer.thread_name(lane + 1, &format!("lane {}", lane + 1))?;
    }

    if timeline.started.is_some() {
        writer.event(&json!({
            "name": run_name, "cat": "run", "ph": "X", "pid": 1, "tid": RUN_TRACK,
            "ts": 0, "dur": timeline.duration_ms() * 1000,
            "args": {"status": timeline.status_str(), "host": timeline.host},
        }))?;
    }
    for resume in &timeline.resumes {
        writer.event(&json!({
            "name": "resumed", "cat": "resume", "ph": "i", "s": "g", "pid": 1, "tid": RUN_TRACK,
            "ts": offset_us(origin, resume.ts),
            "args": {"seq": resume.seq, "host": resume.host, "pid": resume.pid,
                     "abandoned_attempts": resume.n_abandoned},
        }))?;
    }

    for (unit, attempt) in timeline.attempts() {
        let start_us = offset_us(origin, attempt.start);
        let end_us = offset_us(origin, attempt.end).max(start_us);
        let outcome = attempt.outcome.as_ref();
        writer.event(&json!({
            "name": format!("{} #{}", unit.name, attempt.number),
            "cat": "attempt",
            "ph": "X", "pid": 1, "tid": attempt.lane + 1,
            "ts": start_us, "dur": end_us - start_us,
            "args": {
                "unit": unit.name,
                "attempt": attempt.number,
                "status": attempt.state.as_str(),
                "exit": exit_value(attempt.exit()),
                "timed_out": attempt.timed_out(),
                "input_hash": attempt.input_hash,
                "output_hash": attempt.output_hash(),
                "user_cpu_ms": outcome.map(|o| o.user_cpu_ms),
                "sys_cpu_ms": outcome.map(|o| o.sys_cpu_ms),
                "max_rss_kib": outcome.map(|o| o.max_rss_kib),
                "stdout_bytes": outcome.map(|o| o.stdout_bytes),
                "stderr_bytes": outcome.map(|o| o.stderr_bytes),
                "error": attempt.error_line(),
            },
        }))?;
        for phase in attempt.phases() {
            // Clamped into the attempt so the viewer nests the phases under it.
            let phase_start = (start_us + phase.offset_ms * 1000).min(end_us);
            let phase_end = (phase_start + phase.duration_ms * 1000).min(end_us);
            writer.event(&json!({
                "name": phase.phase.as_str(), "cat": "phase",
                "ph": "X", "pid": 1, "tid": attempt.lane + 1,
                "ts": phase_start, "dur": phase_end - phase_start,
                "args": {"unit": unit.name, "attempt": attempt.number,
                         "exit": exit_value(phase.exit), "timed_out": phase.timed_out},
            }))?;
        }
    }

    for unit in &timeline.units {
        for skip in &unit.skips {
            let reason = skip_reason_text(&skip.reason);
            writer.event(&json!({
                "name": format!("skipped {}", unit.name), "cat": "skip",
                "ph": "i", "s": "t", "pid": 1, "tid": RUN_TRACK,
                "ts": offset_us(origin, skip.ts),
                "args": {"unit": unit.name, "reason": reason},
            }))?;
        }
        for mark in &unit.marks {
            let verdict = match mark.verdict {
                Verdict::Succeeded => "succeeded",
                Verdict::Failed => "failed",
            };
            writer.event(&json!({
                "name": format!("marked {} {verdict}", unit.name), "cat": "mark",
                "ph": "i", "s": "t", "pid": 1, "tid": RUN_TRACK,
                "ts": offset_us(origin, mark.ts),
                "args": {"unit": unit.name, "attempt": mark.attempt, "verdict": verdict,
                         "by": mark.by, "note": mark.note},
            }))?;
        }
    }
    writer.finish()?;
    out.flush()
}

fn exit_value(exit: Option<ExitStatus>) -> Value {
    match exit {
        Some(ExitStatus::Code(code)) => json!({"code": code}),
        Some(ExitStatus::Signal(signal)) => json!({"signal": signal}),
        None => Value::Null,
    }
}

/// Writes the `traceEvents` array one event per line, so a large trace is never held whole.
struct EventWriter<'a, W: Write> {
    out: &'a mut W,
    first: bool,
}

impl<'a, W: Write> EventWriter<'a, W> {
    fn new(out: &'a mut W) -> io::Result<Self> {
        out.write_all(b"{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n")?;
        Ok(Self { out, first: true })
    }

    fn event(&mut self, event: &Value) -> io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut *self.out, event).map_err(io::Error::from)
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

    fn finish(self) -> io::Result<()> {
        self.out.write_all(b"\n]}\n")
    }
}
