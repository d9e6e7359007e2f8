//! [`RunSummary::fold`](super::RunSummary::fold): a run read record by record, keeping per
//! unit only what the diff compares (the timeline builder's rules, keeping less).

use std::collections::{HashMap, HashSet};

use apollo_core::Record;
use apollo_core::event::{
    Event, FileSide, InputComponent, InputManifestRef, RunStatus, SkipReason, UnitFinished,
};
use chrono::{DateTime, Utc};

use super::{LastAttempt, RunSide, RunSummary, UnitSide};
use crate::UnitStatus;
use crate::display::{first_line, offset_ms, skip_reason_text};

/// What [`RunSummary::fold`] keeps per unit while reading.
struct FoldUnit {
    name: String,
    status: UnitStatus,
    last: Option<FoldAttempt>,
    last_skip: Option<SkipReason>,
    /// Its latest `unit_reused`, compared as its last attempt while it is `Reused`.
    reused: Option<LastAttempt>,
    /// The attempt before `last`, whose inputs a job reattached to ran under.
    before_last: Option<FoldAttempt>,
}

/// A unit's last attempt so far (the one that started last, as in a [`Timeline`]).
struct FoldAttempt {
    number: u32,
    input_hash: Option<String>,
    inputs: Vec<InputComponent>,
    inputs_manifest: Option<InputManifestRef>,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    /// Still open (no finish, not closed by a later start or a resume).
    open: bool,
    outcome: Option<UnitFinished>,
    /// Its recorded output manifest (path → SHA-256), if any.
    output_files: Option<Vec<(String, String)>>,
}

/// The state of [`RunSummary::fold`]: the timeline builder's rules, keeping less.
#[derive(Default)]
pub(super) struct Fold {
    /// Whether an apollo is writing the run now (see `ManifestLoader::is_live`).
    live: bool,
    run_id: Option<String>,
    pipeline: Option<String>,
    params: std::collections::BTreeMap<String, serde_json::Value>,
    finished: Option<RunStatus>,
    units: Vec<FoldUnit>,
    index: HashMap<String, usize>,
    /// Open attempts of every unit, as the timeline builder tracks them.
    open: HashSet<(usize, u32)>,
    last_alive_ts: Option<DateTime<Utc>>,
}

impl Fold {
    /// A fold of a run that an apollo is writing now (`live`) or not.
    pub(super) fn new(live: bool) -> Self {
        Self {
            live,
            ..Self::default()
        }
    }

    fn unit_idx(&mut self, name: &str) -> usize {
        if let Some(&unit_idx) = self.index.get(name) {
            return unit_idx;
        }
        self.index.insert(name.to_owned(), self.units.len());
        self.units.push(FoldUnit {
            name: name.to_owned(),
            status: UnitStatus::NotRun,
            last: None,
            last_skip: None,
            reused: None,
            before_last: None,
        });
        self.units.len() - 1
    }

    /// Ends the open attempt `attempt` of `unit_idx` at `end`, if it is the unit's last.
    fn close(&mut self, unit_idx: usize, attempt: u32, end: DateTime<Utc>) {
        if let Some(last) = &mut self.units[unit_idx].last
            && last.open
            && last.number == attempt
        {
            last.open = false;
            last.end = end.max(last.start);
        }
    }

    fn close_all(&mut self, end: DateTime<Utc>) {
        for (unit_idx, attempt) in std::mem::take(&mut self.open) {
            self.close(unit_idx, attempt, end);
        }
    }

    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    pub(super) fn push(&mut self, record: Record) {
        let Record { ts, event, .. } = record;
        let previous_alive_ts = self.last_alive_ts;
        if !matches!(event, Event::UnitMarked(_)) {
            self.last_alive_ts = Some(ts);
        }
        match event {
            Event::RunStarted(started) => {
                if self.run_id.is_none() {
                    self.run_id = Some(started.run_id);
                    self.pipeline = Some(started.pipeline);
                    self.params = started.params;
                }
                for name in &started.units {
                    self.unit_idx(name);
                }
            }
            Event::RunResumed(resumed) => {
                self.close_all(previous_alive_ts.unwrap_or(ts));
                self.finished = None;
                for name in &resumed.units {
                    self.unit_idx(name);
                }
            }
            Event::UnitStarted(started) => {
                let unit_idx = self.unit_idx(&started.unit);
                if self.open.remove(&(unit_idx, started.attempt)) {
                    self.close(unit_idx, started.attempt, ts);
                }
                self.open.insert((unit_idx, started.attempt));
                let unit = &mut self.units[unit_idx];
                unit.status = UnitStatus::Unfinished;
                unit.before_last = unit.last.take();
                unit.last = Some(FoldAttempt {
                    number: started.attempt,
                    input_hash: Some(started.input_hash),
                    inputs: started.inputs,
                    inputs_manifest: started.inputs_manifest,
                    start: ts,
                    end: ts,
                    open: true,
                    outcome: None,
                    output_files: None,
                });
            }
            Event::UnitFinished(finished) => {
                let unit_idx = self.unit_idx(&finished.unit);
                let was_open = self.open.remove(&(unit_idx, finished.attempt));
                let unit = &mut self.units[unit_idx];
                unit.status = UnitStatus::from_attempt(finished.status);
                if !was_open {
                    // No start on record: the timeline adds the attempt as it finished.
                    unit.last = Some(FoldAttempt {
                        number: finished.attempt,
                        input_hash: None,
                        inputs: Vec::new(),
                        inputs_manifest: None,
                        start: ts,
                        end: ts,
                        open: false,
                        outcome: Some(finished),
                        output_files: None,
                    });
                } else if let Some(last) = &mut unit.last
                    && last.open
                    && last.number == finished.attempt
                {
                    last.open = false;
                    last.end = ts;
                    last.outcome = Some(finished);
                }
            }
            Event::UnitSkipped(skipped) => {
                let unit_idx = self.unit_idx(&skipped.unit);
                let unit = &mut self.units[unit_idx];
                unit.status = UnitStatus::after_skip(&skipped.reason);
                unit.last_skip = Some(skipped.reason);
            }
            Event::UnitMarked(marked) => {
                let unit_idx = self.unit_idx(&marked.unit);
                let unit = &mut self.units[unit_idx];
                unit.status = unit.status.after_mark(marked.verdict);
            }
            Event::RunFinished(finished) => self.finished = Some(finished.status),
            // An attempt's outputs manifest precedes its `unit_finished`. One kept in a
            // manifest file (a huge directory) is not read: the output hash still compares.
            Event::UnitFiles(files)
                if files.side == FileSide::Outputs && files.manifest.is_none() =>
            {
                let unit_idx = self.unit_idx(&files.unit);
                if let Some(last) = &mut self.units[unit_idx].last
                    && last.number == files.attempt
                {
                    last.output_files = Some(
                        (files.files.into_iter())
                            .map(|file| (file.path, file.sha256))
                            .collect(),
                    );
                }
            }
            Event::UnitReused(reused) => {
                let unit_idx = self.unit_idx(&reused.unit);
                let unit = &mut self.units[unit_idx];
                unit.status = UnitStatus::Reused;
                unit.reused = Some(LastAttempt::reused(
                    reused.input_hash,
                    reused.inputs,
                    reused.output_hash,
                ));
            }
            // As the timeline: a job reattached to ran under its submitting attempt's inputs.
            Event::UnitSubmitted(submitted) => self.submitted(&submitted),
            // A kind this version does not know (a newer minor format): nothing to compare.
            _ => {}
        }
    }

    /// A job reattached to ran under the inputs of the attempt that submitted it.
    fn submitted(&mut self, submitted: &apollo_core::event::UnitSubmitted) {
        let unit_idx = self.unit_idx(&submitted.unit);
        let unit = &mut self.units[unit_idx];
        if let (Some(from), Some(last), Some(before)) =
            (submitted.reattached_from, &mut unit.last, &unit.before_last)
            && last.number == submitted.attempt
            && before.number == from
        {
            last.input_hash.clone_from(&before.input_hash);
            last.inputs.clone_from(&before.inputs);
            last.inputs_manifest.clone_from(&before.inputs_manifest);
        }
    }

    pub(super) fn finish(mut self) -> RunSummary {
        if let Some(last_ts) = self.last_alive_ts {
            self.close_all(last_ts);
        }
        let units: Vec<(String, UnitSide)> = (self.units.into_iter())
            .map(|unit| {
                let detail = match unit.status {
                    UnitStatus::UpstreamFailed | UnitStatus::NotStarted => {
                        unit.last_skip.as_ref().map(skip_reason_text)
                    }
                    _ => (unit.last.as_ref())
                        .and_then(|last| last.outcome.as_ref()?.error.as_deref())
                        .map(first_line)
                        .filter(|line| !line.is_empty())
                        .map(str::to_owned),
                };
                // As the timeline: an attempt still open has started no recorded phase (what
                // matters when an older attempt's end came after its start, out of order).
                let ran = (unit.last.as_ref()).is_none_or(|last| {
                    (last.outcome.as_ref()).is_some_and(|outcome| !outcome.phases.is_empty())
                });
                let last = unit.last.map(|last| LastAttempt {
                    output_hash: (last.outcome.as_ref())
                        .and_then(|outcome| outcome.output_hash.clone()),
                    duration_ms: match &last.outcome {
                        Some(outcome) => outcome.duration_ms,
                        None => offset_ms(last.start, last.end),
                    },
                    output_files: last.output_files,
                    input_hash: last.input_hash,
                    inputs: last.inputs,
                    inputs_manifest: last.inputs_manifest,
                });
                let last = match (unit.status, unit.reused) {
                    (UnitStatus::Reused, Some(reused)) => Some(reused),
                    _ => last,
                };
                let side = UnitSide {
                    state: unit.status.state(ran, self.live),
                    last,
                    detail,
                };
                (unit.name, side)
            })
            .collect();
        RunSummary {
            side: RunSide {
                run_id: self.run_id,
                pipeline: self.pipeline,
                status: self.finished.map_or("incomplete", RunStatus::as_str),
                params: self.params,
            },
            units,
            index: self.index,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Timeline;
    use crate::diff::RunSummary;
    use crate::testkit::RunBuilder;

    /// The diff's fold agrees with the run model on a job reattached to after apollo died: the
    /// attempt is compared under the inputs its job was submitted with (issue 36).
    #[test]
    fn a_reattached_attempt_is_compared_under_its_submitting_attempt_s_inputs() {
        let mut run = RunBuilder::new("20261203T000000Z-0001", &["a"]);
        run.file("a", "in.txt", "v1")
            .start(0, "a", 1)
            .submit(1, "a", 1, None);
        run.file("a", "in.txt", "v2")
            .start(10, "a", 2)
            .submit(11, "a", 2, Some(1));
        run.succeed(20, "a", 2);
        let timeline = Timeline::from_records(run.reads()).unwrap();
        let folded = RunSummary::fold(run.reads(), false).unwrap();
        assert_eq!(folded, RunSummary::of(&timeline));
        let hash = |summary: &RunSummary| {
            let side = summary.unit("a").unwrap();
            side.last.as_ref().unwrap().input_hash.clone()
        };
        assert_eq!(hash(&folded), timeline.units[0].attempts[0].input_hash);
    }
}
