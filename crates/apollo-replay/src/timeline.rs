//! [`Timeline`]: a run's attempts, skips, marks and resumes, laid out on parallel lanes.

use std::collections::HashMap;

use apollo_core::Record;
use apollo_core::UnitCounts;
use apollo_core::event::{
    AttemptStatus, Event, ExitStatus, InputComponent, InputManifestRef, PhaseRecord, RunStatus,
    SkipReason, UnitFinished, Verdict,
};
use chrono::{DateTime, Utc};

use crate::Filter;

mod facts;
mod lanes;
mod reused;
mod status;
mod submitted;
use crate::display::first_line;
pub use facts::{AttemptFiles, DeadlineStatus, Deadlines, RunFacts};
pub(crate) use lanes::Lanes;
pub use reused::Reused;
pub use status::UnitStatus;

/// A run's history, built by streaming its records once: per unit its attempts (with their
/// phases, outcome, hashes and resource use), skips and human marks; the run's start, its
/// resumes and its end.
///
/// Every attempt is given a **lane** where it really ran (after any wait in the queue of
/// attempts committed ahead): when it ends, it takes the lowest lane whose attempts all ended
/// by its start. The number of lanes is about the run's peak parallelism, and lanes are the
/// tracks of the Chrome trace. Attempts that never got their `unit_finished`
/// (apollo died mid-unit) are [`AttemptState::Unfinished`]; they end at the last record
/// apollo wrote before it was resumed, or at the journal's last record.
///
/// A timeline holds one entry per attempt, not per record: building one from a journal of a
/// million records of a small pipeline takes little memory, but it does grow with the number
/// of attempts. The text and JSON renderers do not need one and stream instead.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeline {
    /// The run's id, from `run_started`.
    pub run_id: Option<String>,
    /// The pipeline's name, from `run_started`.
    pub pipeline: Option<String>,
    /// The host that started the run.
    pub host: Option<String>,
    /// When the run started: `run_started`'s timestamp (or the first record's).
    pub started: Option<DateTime<Utc>>,
    /// The timestamp of the last record.
    pub last_ts: Option<DateTime<Utc>>,
    /// How and when the run ended, when its last process recorded it.
    pub finished: Option<RunEnd>,
    /// Every time a later apollo process picked the run up again.
    pub resumes: Vec<Resume>,
    /// The units: the pipeline's config order, then units only seen in events.
    pub units: Vec<UnitTimeline>,
    /// How many lanes the attempts use (about the run's peak parallelism).
    pub n_lanes: usize,
    /// How many records were read.
    pub n_records: u64,
    /// The run's params, from `run_started` (empty when the pipeline declares none).
    pub params: std::collections::BTreeMap<String, serde_json::Value>,
    /// Whether an apollo is writing the run now. The records cannot tell (a live run and a
    /// killed one end alike): the reader sets it from the state directory's lock. An attempt
    /// without its end is running in a live run and cut off otherwise.
    pub live: bool,
    /// What the run's records say about where it came from (config, definition, kind).
    pub facts: RunFacts,
}

/// How a run ended (`run_finished`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunEnd {
    /// The record's sequence number.
    pub seq: u64,
    /// When the run ended.
    pub ts: DateTime<Utc>,
    /// How it ended.
    pub status: RunStatus,
    /// Units that succeeded.
    pub succeeded: u32,
    /// Units that failed for good.
    pub failed: u32,
    /// Units skipped.
    pub skipped: u32,
    /// Units reused from an earlier run (format 1.3; 0 before).
    pub reused: u32,
}

/// A later apollo process picked the run up again (`run_resumed`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resume {
    /// The record's sequence number.
    pub seq: u64,
    /// When the run was resumed.
    pub ts: DateTime<Utc>,
    /// The host of the resuming apollo.
    pub host: String,
    /// The process id of the resuming apollo.
    pub pid: u32,
    /// Attempts left unfinished by the process that died before this resume.
    pub n_abandoned: usize,
    /// The last record the previous apollo process wrote: from then until `ts` nothing ran
    /// this run.
    pub previous_last_ts: DateTime<Utc>,
    /// Whether the previous process stopped without recording the run's end (a crash, a
    /// kill): the gap is a loss, not a pause between invocations.
    pub after_crash: bool,
}

/// One unit's history in a run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnitTimeline {
    /// The unit's name.
    pub name: String,
    /// Whether the pipeline's config lists the unit (`run_started` / `run_resumed`).
    pub listed: bool,
    /// Its attempts, in the order they started.
    pub attempts: Vec<Attempt>,
    /// Times it was skipped.
    pub skips: Vec<Skip>,
    /// Verdicts humans recorded on it.
    pub marks: Vec<Mark>,
    /// When it was reused from an earlier run instead of run (its latest `unit_reused`).
    pub reused: Option<Reused>,
    /// Its status after the last record about it.
    pub status: UnitStatus,
    /// Its definition's `idempotent:` (records do not say it; set by the reader of the
    /// definition: [`Timeline::set_not_idempotent`]).
    pub idempotent: bool,
}

impl UnitTimeline {
    fn new(name: String, listed: bool) -> Self {
        Self {
            name,
            listed,
            attempts: Vec::new(),
            skips: Vec::new(),
            marks: Vec::new(),
            reused: None,
            status: UnitStatus::NotRun,
            idempotent: true,
        }
    }

    /// The last attempt, if the unit ever started.
    pub fn last_attempt(&self) -> Option<&Attempt> {
        self.attempts.last()
    }

    /// Whether the unit has nothing recorded (no attempt, skip, mark or reuse).
    pub fn is_empty(&self) -> bool {
        self.attempts.is_empty()
            && self.skips.is_empty()
            && self.marks.is_empty()
            && self.reused.is_none()
    }
}

/// One attempt of a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// The attempt number, from 1, counted across resumes.
    pub number: u32,
    /// The lane the attempt ran on, from 0 (given when it ends; 0 until then).
    pub lane: usize,
    /// Sequence number of its `unit_started` (or `unit_finished` when the start is missing).
    pub seq: u64,
    /// When it started.
    pub start: DateTime<Utc>,
    /// When it ended (for an unfinished attempt: the last record its apollo process wrote).
    pub end: DateTime<Utc>,
    /// How it ended.
    pub state: AttemptState,
    /// Its input hash, from `unit_started`.
    pub input_hash: Option<String>,
    /// The components of its input hash, from `unit_started` (empty when they are in an
    /// input manifest).
    pub inputs: Vec<InputComponent>,
    /// The input manifest holding its components, when they were too large for the record
    /// (read it with the store; this crate reads records only).
    pub inputs_manifest: Option<InputManifestRef>,
    /// Its `unit_finished` payload, when it finished.
    pub outcome: Option<UnitFinished>,
    /// The cluster job that ran it (its `unit_submitted`), if any: with `reattached_from`
    /// set when the attempt took over the job of an earlier attempt after apollo died.
    pub job: Option<apollo_core::event::UnitSubmitted>,
    /// Its declared input and output files (`unit_files`), when the unit declares any.
    pub files: AttemptFiles,
}

impl Attempt {
    /// The attempt's wall time in milliseconds: as measured by apollo when it finished,
    /// otherwise from its start to its end.
    pub fn duration_ms(&self) -> u64 {
        match &self.outcome {
            Some(outcome) => outcome.duration_ms,
            None => crate::display::offset_ms(self.start, self.end),
        }
    }

    /// The output hash, when the attempt succeeded.
    pub fn output_hash(&self) -> Option<&str> {
        self.outcome.as_ref()?.output_hash.as_deref()
    }

    /// How the deciding phase's process ended.
    pub fn exit(&self) -> Option<ExitStatus> {
        self.outcome.as_ref()?.exit
    }

    /// Whether apollo's timeout ended the attempt.
    pub fn timed_out(&self) -> bool {
        self.outcome
            .as_ref()
            .is_some_and(|outcome| outcome.timed_out)
    }

    /// The first line of the attempt's error, when it has one.
    pub fn error_line(&self) -> Option<&str> {
        let error = self.outcome.as_ref()?.error.as_deref()?;
        Some(first_line(error)).filter(|line| !line.is_empty())
    }

    /// The phases that ran, in order (empty for an unfinished attempt).
    pub fn phases(&self) -> &[PhaseRecord] {
        self.outcome.as_ref().map_or(&[], |outcome| &outcome.phases)
    }
}

/// How an attempt ended, as far as the journal knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttemptState {
    /// Its `unit_finished` says how it ended.
    Finished(AttemptStatus),
    /// It has no `unit_finished`: apollo died (or is still running it).
    Unfinished,
}

impl AttemptState {
    /// The state for users: the attempt status, or `unfinished`.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptState::Finished(status) => status.as_str(),
            AttemptState::Unfinished => "unfinished",
        }
    }
}

/// A `unit_skipped` record.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Skip {
    /// The record's sequence number.
    pub seq: u64,
    /// When the unit was skipped.
    pub ts: DateTime<Utc>,
    /// Why.
    pub reason: SkipReason,
}

/// A `unit_marked` record: a human's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Mark {
    /// The record's sequence number.
    pub seq: u64,
    /// When the verdict was recorded.
    pub ts: DateTime<Utc>,
    /// The attempt it is about.
    pub attempt: u32,
    /// The verdict.
    pub verdict: Verdict,
    /// Who recorded it.
    pub by: String,
    /// Their note.
    pub note: Option<String>,
}

impl Timeline {
    /// Builds the timeline of a run by streaming its records; stops at the first read error.
    pub fn from_records<I, E>(records: I) -> Result<Timeline, E>
    where
        I: IntoIterator<Item = Result<Record, E>>,
    {
        Self::from_records_with_workers(records, None)
    }

    /// [`from_records`](Self::from_records) for a run known to have run at most `workers`
    /// attempts at once: its attempts use at most that many lanes.
    pub fn from_records_with_workers<I, E>(
        records: I,
        workers: Option<usize>,
    ) -> Result<Timeline, E>
    where
        I: IntoIterator<Item = Result<Record, E>>,
    {
        let mut builder = TimelineBuilder::new().workers(workers);
        for record in records {
            builder.push(record?);
        }
        Ok(builder.finish())
    }

    /// The instant offsets are measured from: the run's start, or the Unix epoch for a
    /// timeline without records.
    pub fn origin(&self) -> DateTime<Utc> {
        self.started.unwrap_or(DateTime::UNIX_EPOCH)
    }

    /// The run's status for users: how it finished, `running` while an apollo writes it
    /// ([`live`](Self::live)), or `incomplete`.
    pub fn status_str(&self) -> &'static str {
        match self.finished {
            Some(end) => end.status.as_str(),
            // A live run is running, not a run apollo left (issue 35: it looked killed).
            None if self.live => "running",
            None => "incomplete",
        }
    }

    /// Wall time from the run's start to its end (or its last record), in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        let end = self.finished.map(|end| end.ts).or(self.last_ts);
        match (self.started, end) {
            (Some(start), Some(end)) => crate::display::offset_ms(start, end),
            _ => 0,
        }
    }

    /// How many of the run's units (those its pipeline lists) are in each [`UnitState`].
    pub fn counts(&self) -> UnitCounts {
        (self.units.iter())
            .filter(|unit| unit.listed)
            .map(|unit| self.state_of(unit))
            .collect()
    }

    /// The unit called `name`.
    pub fn unit(&self, name: &str) -> Option<&UnitTimeline> {
        self.units.iter().find(|unit| unit.name == name)
    }

    /// Every attempt with its unit, in unit order.
    pub fn attempts(&self) -> impl Iterator<Item = (&UnitTimeline, &Attempt)> {
        self.units
            .iter()
            .flat_map(|unit| unit.attempts.iter().map(move |attempt| (unit, attempt)))
    }

    /// The part of the timeline a filter selects: the filter's units, and the attempts, skips
    /// and marks that overlap its time window (a unit left with nothing is dropped when a time
    /// window is set). Lane numbers are kept as they were.
    pub fn filtered(&self, filter: &Filter) -> Timeline {
        let windowed = filter.has_window();
        let origin = self.origin();
        let units = self
            .units
            .iter()
            .filter(|unit| filter.keeps_unit(&unit.name))
            .map(|unit| UnitTimeline {
                name: unit.name.clone(),
                listed: unit.listed,
                attempts: unit
                    .attempts
                    .iter()
                    .filter(|attempt| filter.overlaps(attempt.start, attempt.end, origin))
                    .cloned()
                    .collect(),
                skips: (unit.skips.iter())
                    .filter(|skip| filter.keeps_time(skip.ts, origin))
                    .cloned()
                    .collect(),
                marks: (unit.marks.iter())
                    .filter(|mark| filter.keeps_time(mark.ts, origin))
                    .cloned()
                    .collect(),
                reused: (unit.reused.iter())
                    .find(|reused| filter.keeps_time(reused.ts, origin))
                    .cloned(),
                status: unit.status,
                idempotent: unit.idempotent,
            })
            .filter(|unit| !windowed || !unit.is_empty())
            .collect();
        Timeline {
            units,
            resumes: (self.resumes.iter())
                .filter(|resume| filter.keeps_time(resume.ts, origin))
                .cloned()
                .collect(),
            ..self.clone_header()
        }
    }

    fn clone_header(&self) -> Timeline {
        Timeline {
            run_id: self.run_id.clone(),
            pipeline: self.pipeline.clone(),
            host: self.host.clone(),
            started: self.started,
            last_ts: self.last_ts,
            finished: self.finished,
            resumes: Vec::new(),
            units: Vec::new(),
            n_lanes: self.n_lanes,
            n_records: self.n_records,
            params: self.params.clone(),
            live: self.live,
            facts: self.facts.clone(),
        }
    }
}

/// Builds a [`Timeline`] one record at a time, for callers that already iterate records.
#[derive(Debug, Default)]
pub struct TimelineBuilder {
    timeline: Timeline,
    unit_index: HashMap<String, usize>,
    /// Open attempts: (unit index, attempt number) → index in the unit's attempts.
    open: HashMap<(usize, u32), usize>,
    /// Where ended attempts were laid out.
    lanes: Lanes,
    /// The last record written by a running apollo (not by `apollo mark`).
    last_alive_ts: Option<DateTime<Utc>>,
}

impl TimelineBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// For a run known to have run at most `workers` attempts at once (`None`: unknown): its
    /// attempts use at most that many lanes.
    pub fn workers(mut self, workers: Option<usize>) -> Self {
        self.lanes = Lanes::with_max(workers);
        self
    }

    /// Adds the next record of the run (records must come in journal order).
    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    pub fn push(&mut self, record: Record) {
        let Record { seq, ts, event } = record;
        let previous_alive_ts = self.last_alive_ts;
        if !matches!(event, Event::UnitMarked(_)) {
            self.last_alive_ts = Some(ts);
        }
        self.timeline.n_records += 1;
        self.note_facts(&event);
        self.timeline.last_ts = Some(ts);
        if self.timeline.started.is_none() {
            self.timeline.started = Some(ts);
        }
        match event {
            Event::RunStarted(started) => {
                if self.timeline.run_id.is_none() {
                    self.timeline.run_id = Some(started.run_id);
                    self.timeline.pipeline = Some(started.pipeline);
                    self.timeline.host = Some(started.host);
                    self.timeline.started = Some(ts);
                    self.timeline.params = started.params;
                }
                self.list_units(started.units);
            }
            Event::RunResumed(resumed) => {
                // The process that wrote the attempts still open died: they end at the last
                // record it wrote (a mark is written by `apollo mark`, after it died).
                let abandoned_end = previous_alive_ts.unwrap_or(ts);
                let n_abandoned = self.close_open_attempts(abandoned_end);
                let after_crash = self.timeline.finished.is_none();
                self.timeline.finished = None;
                self.timeline.resumes.push(Resume {
                    seq,
                    ts,
                    host: resumed.host,
                    pid: resumed.pid,
                    n_abandoned,
                    previous_last_ts: abandoned_end,
                    after_crash,
                });
                self.list_units(resumed.units);
            }
            Event::UnitStarted(started) => {
                let unit_idx = self.unit_idx(started.unit);
                if let Some(attempt_idx) = self.open.remove(&(unit_idx, started.attempt)) {
                    // A second start of an attempt still open: the first never finished.
                    self.close_attempt(unit_idx, attempt_idx, ts);
                }
                let unit = &mut self.timeline.units[unit_idx];
                unit.attempts.push(Attempt {
                    number: started.attempt,
                    // Placed when it ends.
                    lane: 0,
                    seq,
                    start: ts,
                    end: ts,
                    state: AttemptState::Unfinished,
                    input_hash: Some(started.input_hash),
                    inputs: started.inputs,
                    inputs_manifest: started.inputs_manifest,
                    outcome: None,
                    job: None,
                    files: AttemptFiles::default(),
                });
                unit.status = UnitStatus::Unfinished;
                self.open
                    .insert((unit_idx, started.attempt), unit.attempts.len() - 1);
            }
            Event::UnitFinished(finished) => {
                let unit_idx = self.unit_idx(finished.unit.clone());
                let attempt_idx = match self.open.remove(&(unit_idx, finished.attempt)) {
                    Some(attempt_idx) => attempt_idx,
                    None => {
                        // No start on record (should not happen in a sound journal): place the
                        // attempt by its measured duration.
                        let origin = self.timeline.origin();
                        let start = crate::display::before(ts, finished.duration_ms, origin);
                        let unit = &mut self.timeline.units[unit_idx];
                        unit.attempts.push(Attempt {
                            number: finished.attempt,
                            lane: 0,
                            seq,
                            start,
                            end: ts,
                            state: AttemptState::Unfinished,
                            input_hash: None,
                            inputs: Vec::new(),
                            inputs_manifest: None,
                            outcome: None,
                            job: None,
                            files: AttemptFiles::default(),
                        });
                        unit.attempts.len() - 1
                    }
                };
                let unit = &mut self.timeline.units[unit_idx];
                unit.status = UnitStatus::from_attempt(finished.status);
                let attempt = &mut unit.attempts[attempt_idx];
                // An attempt committed ahead waited `queued_ms` for a worker, and its outcome
                // may have waited for a commit: it ran for `duration_ms` from its real start.
                (attempt.start, attempt.end) = crate::display::real_span(
                    attempt.start,
                    ts,
                    finished.queued_ms,
                    finished.duration_ms,
                );
                attempt.state = AttemptState::Finished(finished.status);
                attempt.outcome = Some(finished);
                let (start, end) = (attempt.start, attempt.end);
                let lane = self.place(start, end);
                self.timeline.units[unit_idx].attempts[attempt_idx].lane = lane;
            }
            Event::UnitSkipped(skipped) => {
                let unit_idx = self.unit_idx(skipped.unit);
                let unit = &mut self.timeline.units[unit_idx];
                unit.status = UnitStatus::after_skip(&skipped.reason);
                unit.skips.push(Skip {
                    seq,
                    ts,
                    reason: skipped.reason,
                });
            }
            Event::UnitMarked(marked) => {
                let unit_idx = self.unit_idx(marked.unit);
                let unit = &mut self.timeline.units[unit_idx];
                unit.status = unit.status.after_mark(marked.verdict);
                unit.marks.push(Mark {
                    seq,
                    ts,
                    attempt: marked.attempt,
                    verdict: marked.verdict,
                    by: marked.by,
                    note: marked.note,
                });
            }
            Event::RunFinished(finished) => {
                self.timeline.finished = Some(RunEnd {
                    seq,
                    ts,
                    status: finished.status,
                    succeeded: finished.succeeded,
                    failed: finished.failed,
                    skipped: finished.skipped,
                    reused: finished.reused,
                });
            }
            Event::UnitReused(reused) => self.reused(seq, ts, reused),
            Event::UnitSubmitted(submitted) => self.submitted(submitted),
            // A kind this version does not know (a newer minor format): nothing to lay out.
            _ => {}
        }
    }

    /// The timeline; attempts still open end at the last record a running apollo wrote.
    pub fn finish(mut self) -> Timeline {
        if let Some(last_ts) = self.last_alive_ts {
            self.close_open_attempts(last_ts);
        }
        self.timeline
    }

    fn list_units(&mut self, units: Vec<String>) {
        for name in units {
            match self.unit_index.get(&name) {
                Some(&unit_idx) => self.timeline.units[unit_idx].listed = true,
                None => {
                    self.unit_index
                        .insert(name.clone(), self.timeline.units.len());
                    self.timeline.units.push(UnitTimeline::new(name, true));
                }
            }
        }
    }

    fn unit_idx(&mut self, name: String) -> usize {
        if let Some(&unit_idx) = self.unit_index.get(&name) {
            return unit_idx;
        }
        let unit_idx = self.timeline.units.len();
        self.unit_index.insert(name.clone(), unit_idx);
        self.timeline.units.push(UnitTimeline::new(name, false));
        unit_idx
    }

    fn place(&mut self, start: DateTime<Utc>, end: DateTime<Utc>) -> usize {
        let lane = self.lanes.place(start, end);
        self.timeline.n_lanes = self.timeline.n_lanes.max(lane + 1);
        lane
    }

    fn close_attempt(&mut self, unit_idx: usize, attempt_idx: usize, end: DateTime<Utc>) {
        let attempt = &mut self.timeline.units[unit_idx].attempts[attempt_idx];
        attempt.end = end.max(attempt.start);
        let (start, end) = (attempt.start, attempt.end);
        let lane = self.place(start, end);
        self.timeline.units[unit_idx].attempts[attempt_idx].lane = lane;
    }

    /// Ends the open attempts at `end`, in the order they started (as the Chrome renderer
    /// does, so both lay them out alike).
    fn close_open_attempts(&mut self, end: DateTime<Utc>) -> usize {
        let mut open: Vec<_> = self.open.drain().collect();
        open.sort_unstable_by_key(|&((unit_idx, _), attempt_idx)| {
            self.timeline.units[unit_idx].attempts[attempt_idx].seq
        });
        for &((unit_idx, _), attempt_idx) in &open {
            self.close_attempt(unit_idx, attempt_idx, end);
        }
        open.len()
    }
}
