//! One method per record kind: what each kind of record contributes to the timeline.
//!
//! Each method first updates the renderer's state (unit column width, attempts still open),
//! whether or not the filter keeps the record, and then, if it does, writes the record's
//! line(s). [`TextRenderer::write_record`] only works out the record's [`Context`] and picks
//! the method.

use std::io::{self, Write};

use apollo_core::Phase;
use apollo_core::event::{
    AttemptStatus, Event, ExitStatus, HookFinished, PhaseRecord, RunFinished, RunResumed,
    RunStarted, UnitFinished, UnitMarked, UnitReused, UnitSkipped, UnitStarted, Verdict,
};
use chrono::{DateTime, Utc};

use super::line::Line;
use super::{OpenAttempt, TextRenderer};
use crate::display::{first_line, format_offset, offset_ms, short_hash, skip_reason_text};

/// Where a record sits in the run, worked out once per record by
/// [`TextRenderer::write_record`].
pub(super) struct Context {
    /// The record's sequence number (orders attempts still open).
    pub(super) seq: u64,
    /// When the record was written.
    pub(super) ts: DateTime<Utc>,
    /// When the run started (the first record's time if `run_started` is missing).
    pub(super) origin: DateTime<Utc>,
    /// Milliseconds from `origin` to `ts`.
    pub(super) offset: u64,
    /// Whether the filter shows this record's own line.
    pub(super) keep: bool,
}

impl<W: Write> TextRenderer<W> {
    /// `run start`: the run's id, pipeline, size and owner. All units widen the unit column
    /// before the header is written.
    pub(super) fn write_run_started(
        &mut self,
        started: &RunStarted,
        context: &Context,
    ) -> io::Result<()> {
        self.widen_units(&started.units);
        if !context.keep {
            return Ok(());
        }
        let detail = format!(
            "run {} · pipeline {} · {} units · pid {} on {}",
            started.run_id,
            started.pipeline,
            started.units.len(),
            started.pid,
            started.host
        );
        self.write_line(&Line::run(0, "run start", "running", detail))
    }

    /// `resume`: the new owner, then one `abandoned` line per attempt the earlier process
    /// left open (in the order they started). Those lines follow the time filter, not the
    /// unit filter of the resume record itself.
    pub(super) fn write_run_resumed(
        &mut self,
        resumed: &RunResumed,
        context: &Context,
    ) -> io::Result<()> {
        self.widen_units(&resumed.units);
        let mut abandoned: Vec<_> = self.open.drain().collect();
        abandoned.sort_unstable_by_key(|(_, open)| open.seq);
        if context.keep {
            let detail = format!(
                "pid {} on {} · {} attempt(s) abandoned",
                resumed.pid,
                resumed.host,
                abandoned.len()
            );
            self.write_line(&Line::run(context.offset, "resume", "running", detail))?;
        }
        if self.options.filter.keeps_time(context.ts, context.origin) {
            for ((unit, attempt), open) in &abandoned {
                self.write_unfinished(unit, *attempt, open, context.offset, "abandoned")?;
            }
        }
        Ok(())
    }

    /// `start`: an attempt began (remembered until it finishes), with its input hash.
    pub(super) fn write_unit_started(
        &mut self,
        started: &UnitStarted,
        context: &Context,
    ) -> io::Result<()> {
        self.widen_unit(&started.unit);
        self.open.insert(
            (started.unit.clone(), started.attempt),
            OpenAttempt {
                seq: context.seq,
                start: context.ts,
            },
        );
        if !context.keep {
            return Ok(());
        }
        self.write_line(&Line {
            offset_ms: context.offset,
            unit: &started.unit,
            attempt: Some(started.attempt),
            event: "start",
            duration_ms: None,
            status: "running",
            hash: format!("in {}", short_hash(&started.input_hash)),
            detail: String::new(),
        })
    }

    /// `finish`: an attempt ended; its phases follow when the options ask for them.
    pub(super) fn write_unit_finished(
        &mut self,
        finished: &UnitFinished,
        context: &Context,
    ) -> io::Result<()> {
        self.widen_unit(&finished.unit);
        // Phases are placed from where the attempt really started (after any wait in the
        // queue of attempts committed ahead).
        let start = self
            .open
            .remove(&(finished.unit.clone(), finished.attempt))
            .map(|open| {
                crate::display::real_span(
                    open.start,
                    context.ts,
                    finished.queued_ms,
                    finished.duration_ms,
                )
                .0
            });
        if !context.keep {
            return Ok(());
        }
        self.write_finished(finished, context.offset, start)
    }

    /// `skip`: a unit that will not run, and why.
    pub(super) fn write_unit_skipped(
        &mut self,
        skipped: &UnitSkipped,
        context: &Context,
    ) -> io::Result<()> {
        self.widen_unit(&skipped.unit);
        if !context.keep {
            return Ok(());
        }
        // The state the skip leaves the unit in, by the run model's one rule: a `when:` false
        // is `skipped_when`, never `skipped` (which every view means as the unit's own exit
        // 77; issue 35, found by tests/e2e/agreement.rs).
        let status = crate::timeline::UnitStatus::after_skip(&skipped.reason).as_str();
        self.write_line(&Line {
            offset_ms: context.offset,
            unit: &skipped.unit,
            attempt: None,
            event: "skip",
            duration_ms: None,
            status,
            hash: String::new(),
            detail: skip_reason_text(&skipped.reason),
        })
    }

    /// `reuse`: a unit not run because an earlier run's success stands for it.
    pub(super) fn write_unit_reused(
        &mut self,
        reused: &UnitReused,
        context: &Context,
    ) -> io::Result<()> {
        self.widen_unit(&reused.unit);
        if !context.keep {
            return Ok(());
        }
        self.write_line(&Line {
            offset_ms: context.offset,
            unit: &reused.unit,
            attempt: None,
            event: "reuse",
            duration_ms: None,
            status: "reused",
            // The input hash fits the column ("out …" is a character wider).
            hash: format!("in {}", short_hash(&reused.input_hash)),
            detail: format!(
                "inputs identical to run {} attempt {} · out {}{}",
                reused.from_run,
                reused.from_attempt,
                short_hash(&reused.output_hash),
                if reused.restored.is_empty() {
                    String::new()
                } else {
                    format!(" · restored {}", reused.restored.join(", "))
                }
            ),
        })
    }

    /// `mark`: a human's verdict, who gave it and the first line of their note.
    pub(super) fn write_unit_marked(
        &mut self,
        marked: &UnitMarked,
        context: &Context,
    ) -> io::Result<()> {
        self.widen_unit(&marked.unit);
        if !context.keep {
            return Ok(());
        }
        let status = match marked.verdict {
            Verdict::Succeeded => "marked_succeeded",
            Verdict::Failed => "marked_failed",
            Verdict::Rerun => "marked_rerun",
        };
        let mut detail = format!("by {}", marked.by);
        if let Some(note) = &marked.note {
            detail.push_str(": ");
            detail.push_str(first_line(note));
        }
        self.write_line(&Line {
            offset_ms: context.offset,
            unit: &marked.unit,
            attempt: Some(marked.attempt),
            event: "mark",
            duration_ms: None,
            status,
            hash: String::new(),
            detail,
        })
    }

    /// `run end`: the run's status and counts; its duration is the offset itself.
    pub(super) fn write_run_finished(
        &mut self,
        finished: &RunFinished,
        context: &Context,
    ) -> io::Result<()> {
        if !context.keep {
            return Ok(());
        }
        // The run model's counts for the run's final end; an earlier end (before a resume)
        // has only its record's tally, printed the same way.
        let detail = match &self.options.counts {
            Some((seq, counts)) if *seq == context.seq => counts.text(0),
            _ => {
                use apollo_core::UnitState;
                let mut tally = [0; UnitState::ALL.len()];
                for (state, n) in [
                    (UnitState::Succeeded, finished.succeeded),
                    (UnitState::Failed, finished.failed),
                    (UnitState::Skipped, finished.skipped),
                    (UnitState::Reused, finished.reused),
                ] {
                    if let Some(at) = UnitState::ALL.iter().position(|of| *of == state) {
                        tally[at] = n;
                    }
                }
                apollo_core::UnitCounts::from_array(tally).text(0)
            }
        };
        self.write_line(&Line {
            duration_ms: Some(context.offset),
            ..Line::run(context.offset, "run end", finished.status.as_str(), detail)
        })
    }

    /// `hook`: a pipeline hook ran after the run ended.
    pub(super) fn write_hook_finished(
        &mut self,
        hook: &HookFinished,
        context: &Context,
    ) -> io::Result<()> {
        if !context.keep {
            return Ok(());
        }
        let mut detail = format!("{} · run {}", hook.hook, hook.run_status);
        if let Some(exit) = hook.exit.filter(|exit| *exit != ExitStatus::Code(0)) {
            detail.push_str(&format!(" · {}", describe_exit(Some(exit))));
        }
        if let Some(error) = hook.error.as_deref().map(first_line)
            && !error.is_empty()
        {
            detail.push_str(&format!(": {error}"));
        }
        self.write_line(&Line {
            duration_ms: Some(hook.duration_ms),
            ..Line::run(context.offset, "hook", hook.status.as_str(), detail)
        })
    }

    /// A kind this renderer has no line for (such as `unit_submitted`): its kind tag and unit,
    /// rather than hiding it.
    pub(super) fn write_other(&mut self, event: &Event, context: &Context) -> io::Result<()> {
        if !context.keep {
            return Ok(());
        }
        // A cluster job: its id, and whether the attempt reattached to an earlier one's job.
        let (attempt, event_name, detail) = match event {
            Event::UnitSubmitted(submitted) => match submitted.reattached_from {
                Some(from) => (
                    Some(submitted.attempt),
                    "reattached",
                    format!(
                        "{} job {} of attempt {from} (submitted before apollo died)",
                        submitted.executor, submitted.job_id
                    ),
                ),
                None => (
                    Some(submitted.attempt),
                    "submitted",
                    format!("{} job {}", submitted.executor, submitted.job_id),
                ),
            },
            // A reproduction's verdict, recorded after its `run_finished`.
            Event::ReproductionCompared(compared) => {
                (None, "compared", crate::display::verdict_text(compared))
            }
            _ => (None, event.kind(), String::new()),
        };
        self.write_line(&Line {
            offset_ms: context.offset,
            unit: event.unit().unwrap_or("-"),
            attempt,
            event: event_name,
            duration_ms: None,
            status: "",
            hash: String::new(),
            detail,
        })
    }

    /// An `abandoned` or `unfinished` line for an attempt that never finished, written at
    /// `offset` and naming when it started.
    pub(super) fn write_unfinished(
        &mut self,
        unit: &str,
        attempt: u32,
        open: &OpenAttempt,
        offset: u64,
        event: &str,
    ) -> io::Result<()> {
        if !self.options.filter.keeps_unit(unit) {
            return Ok(());
        }
        let start_offset = offset_ms(self.origin.unwrap_or(open.start), open.start);
        let (status, detail) = match self.options.live {
            Some(pid) if event == "running" => (
                "running",
                format!(
                    "started at {}; still running (apollo pid {pid})",
                    format_offset(start_offset)
                ),
            ),
            _ => (
                "unfinished",
                format!(
                    "started at {}; cut off after ≥ {}: apollo stopped before it finished",
                    format_offset(start_offset),
                    crate::display::format_duration(
                        self.previous_alive_offset.saturating_sub(start_offset)
                    )
                ),
            ),
        };
        self.write_line(&Line {
            offset_ms: offset,
            unit,
            attempt: Some(attempt),
            event,
            duration_ms: None,
            status,
            hash: String::new(),
            detail,
        })
    }

    /// The last line of a run being run right now.
    pub(super) fn write_still_running(&mut self, pid: u32) -> io::Result<()> {
        self.write_line(&Line::run(
            self.last_offset,
            "so far",
            "running",
            format!("the run is still running (apollo pid {pid})"),
        ))
    }

    /// The `finish` line: status, duration, output hash, and a detail that names the exit,
    /// a timeout, the failed phase and the first error line. Then one line per phase.
    fn write_finished(
        &mut self,
        finished: &UnitFinished,
        offset: u64,
        start: Option<DateTime<Utc>>,
    ) -> io::Result<()> {
        let mut detail = String::new();
        if let Some(exit) = finished.exit.filter(|exit| *exit != ExitStatus::Code(0)) {
            detail.push_str(&describe_exit(Some(exit)));
        }
        if finished.timed_out && finished.status != AttemptStatus::TimedOut {
            append_detail(&mut detail, "timed out");
        }
        if let Some(phase) = finished.failed_phase {
            append_detail(&mut detail, &format!("in {phase}"));
        }
        if let Some(error) = finished.error.as_deref().map(first_line)
            && !error.is_empty()
        {
            detail.push_str(if detail.is_empty() { "" } else { ": " });
            detail.push_str(error);
        }
        // The phases come before the finish line, so an attempt's lines read in time order.
        if self.options.phases {
            let origin = self.origin.unwrap_or_default();
            // Without a start on record, phases are placed from the measured duration.
            let attempt_start = start.map_or_else(
                || offset.saturating_sub(finished.duration_ms),
                |start| offset_ms(origin, start),
            );
            for phase in &finished.phases {
                self.write_phase(finished, phase, attempt_start)?;
            }
        }
        self.write_line(&Line {
            offset_ms: offset,
            unit: &finished.unit,
            attempt: Some(finished.attempt),
            event: "finish",
            duration_ms: Some(finished.duration_ms),
            status: finished.status.as_str(),
            hash: finished
                .output_hash
                .as_deref()
                .map(|hash| format!("out {}", short_hash(hash)))
                .unwrap_or_default(),
            detail,
        })?;
        Ok(())
    }

    /// One indented phase line, placed at its own start within the attempt.
    fn write_phase(
        &mut self,
        finished: &UnitFinished,
        phase: &PhaseRecord,
        attempt_start: u64,
    ) -> io::Result<()> {
        let event = format!("  {}", phase.phase);
        let status = match phase.exit {
            _ if phase.timed_out => "timed_out",
            Some(ExitStatus::Code(0)) => "ok",
            // A `when: {command}` that was false: apollo's skip follows.
            Some(_) if phase.phase == Phase::When && finished.when_false() => "false",
            Some(ExitStatus::Code(77))
                if phase.phase == Phase::Execute && finished.status == AttemptStatus::Skipped =>
            {
                "skipped"
            }
            Some(_) => "failed",
            None => "not_started",
        };
        let detail = describe_exit(phase.exit);
        self.write_line(&Line {
            offset_ms: attempt_start.saturating_add(phase.offset_ms),
            unit: &finished.unit,
            attempt: Some(finished.attempt),
            event: &event,
            duration_ms: Some(phase.duration_ms),
            status,
            hash: String::new(),
            detail,
        })
    }
}

/// Appends `text` to a comma-separated detail.
fn append_detail(detail: &mut String, text: &str) {
    if !detail.is_empty() {
        detail.push_str(", ");
    }
    detail.push_str(text);
}

/// `exit 3`, `signal 9`, or `could not start`.
pub(crate) fn describe_exit(exit: Option<ExitStatus>) -> String {
    match exit {
        Some(ExitStatus::Code(code)) => format!("exit {code}"),
        Some(ExitStatus::Signal(signal)) => format!("signal {signal}"),
        None => "could not start".to_owned(),
    }
}
