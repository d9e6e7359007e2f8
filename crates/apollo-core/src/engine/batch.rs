//! The batch being assembled for the next commit: the records to append in one durable
//! [`Journal::append`](crate::Journal::append), the attempts that may start once it is
//! durable, and the notices that may be shown once it is.

use super::observer::HeldNotice;
use super::workers::Job;
use crate::event::{
    Event, FileSide, UnitFiles, UnitFinished, UnitReused, UnitSkipped, UnitStarted, UnitSubmitted,
};
use crate::input_manifest;
use crate::journal::{Journal, JournalError, MAX_RECORD_BYTES};
use crate::model::Pipeline;

/// Where a batch's manifests go before the records naming them are appended: the journal's
/// blob side ([`Journal::store_input_manifest`]), the one piece of I/O the scheduler's
/// machine does itself — a manifest that cannot be stored changes what the batch holds (its
/// attempt fails without a process). Rare: only input lists larger than a record.
pub(super) trait ManifestStore {
    /// Store `bytes` (SHA-256 `sha256`) durably; see [`Journal::store_input_manifest`].
    fn store_input_manifest(&mut self, sha256: &str, bytes: &[u8]) -> Result<(), JournalError>;
}

impl<J: Journal + ?Sized> ManifestStore for J {
    fn store_input_manifest(&mut self, sha256: &str, bytes: &[u8]) -> Result<(), JournalError> {
        Journal::store_input_manifest(self, sha256, bytes)
    }
}

/// The next batch. Only the scheduler fills and commits it.
#[derive(Default)]
pub(super) struct Batch {
    events: Vec<Event>,
    jobs: Vec<Job>,
    notices: Vec<HeldNotice>,
    /// The batch holds a record that must not wait for company: a failure, a skip, a
    /// submission to a remote scheduler, or the end
    /// of a non-idempotent unit's attempt (after a crash its unrecorded end would make apollo
    /// stop and ask a human). Routine records — starts and successes — may wait (see
    /// [`Pacer::may_hold_back`](super::pacer::Pacer::may_hold_back)).
    urgent: bool,
    /// The batch holds a `unit_started` whose input list does not fit in a record: it goes to
    /// an input manifest before the commit ([`Batch::store_input_manifests`]).
    oversized: bool,
    /// How many of `events` are `unit_reused`.
    reused: usize,
    /// Since when records were appended unsynced (a full batch of reuses, see
    /// [`Journal::append_unsynced`]), and their notices: told once a later append is durable.
    unsynced: Option<(std::time::Instant, Vec<HeldNotice>)>,
}

/// An attempt whose `unit_started` cannot be recorded whole: it is recorded without its
/// input list and fails without a process.
pub(super) struct Unrecordable {
    pub(super) unit_idx: usize,
    pub(super) attempt: u32,
    /// Why, for the attempt's error.
    pub(super) error: String,
}

/// What a commit takes out of the batch.
pub(super) struct Committing {
    pub(super) events: Vec<Event>,
    pub(super) jobs: Vec<Job>,
    pub(super) notices: Vec<HeldNotice>,
}

impl Batch {
    pub(super) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Whether the batch holds records and every one is a `unit_reused`: nothing waits for
    /// them to be durable (see [`Pacer::may_hold_reuses`](super::pacer::Pacer::may_hold_reuses)).
    pub(super) fn only_reuses(&self) -> bool {
        !self.events.is_empty() && self.reused == self.events.len()
    }

    /// How many records the batch holds.
    pub(super) fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the batch must be committed at once.
    pub(super) fn is_urgent(&self) -> bool {
        self.urgent
    }

    /// An attempt's `unit_started`, and the attempt that starts once it is durable (`None`
    /// for one the engine fails itself without spawning).
    pub(super) fn push_start(&mut self, started: UnitStarted, job: Option<Job>) {
        self.oversized |= !input_manifest::fits_in_record(&started);
        self.events.push(Event::UnitStarted(started));
        self.jobs.extend(job);
    }

    /// An attempt's `unit_finished`, shown as `notice` once durable. `may_wait`: the unit is
    /// idempotent (an unrecorded end only makes a resume run it again).
    pub(super) fn push_finished(
        &mut self,
        record: UnitFinished,
        notice: HeldNotice,
        may_wait: bool,
    ) {
        self.urgent |= !may_wait || !record.status.satisfies_dependents();
        self.notices.push(notice);
        self.events.push(Event::UnitFinished(record));
    }

    /// An attempt's manifest of declared files (`unit_files`): for inputs, right after its
    /// `unit_started`; for outputs, right before its `unit_finished`.
    pub(super) fn push_files(&mut self, files: UnitFiles) {
        self.oversized |= !input_manifest::files_fit_in_record(&files);
        self.events.push(Event::UnitFiles(files));
    }

    /// A running attempt's `unit_submitted`, shown as `notice` once durable.
    pub(super) fn push_submitted(&mut self, submitted: UnitSubmitted, notice: HeldNotice) {
        self.urgent = true;
        self.events.push(Event::UnitSubmitted(submitted));
        self.notices.push(notice);
    }

    /// A `unit_skipped`, shown as `notice` once durable.
    pub(super) fn push_skipped(&mut self, skipped: UnitSkipped, notice: HeldNotice) {
        self.urgent = true;
        self.events.push(Event::UnitSkipped(skipped));
        self.notices.push(notice);
    }

    /// A `unit_reused`, shown as `notice` once durable. Routine, like a success: unrecorded
    /// after a crash, the resume decides the unit again.
    pub(super) fn push_reused(&mut self, reused: UnitReused, notice: HeldNotice) {
        self.events.push(Event::UnitReused(reused));
        self.reused += 1;
        self.notices.push(notice);
    }

    /// Take back the attempts of this batch, and their `unit_started` records: they are never
    /// written, so they leave no record of an attempt that never had a process.
    pub(super) fn take_back_starts(&mut self, pipeline: &Pipeline) -> Vec<Job> {
        let jobs = std::mem::take(&mut self.jobs);
        for job in &jobs {
            let unit = &pipeline.units[job.unit_idx].name;
            self.events.retain(|event| match event {
                Event::UnitStarted(started) => {
                    !(&started.unit == unit && started.attempt == job.attempt)
                }
                Event::UnitFiles(files) => {
                    !(&files.unit == unit
                        && files.attempt == job.attempt
                        && files.side == FileSide::Inputs)
                }
                _ => true,
            });
        }
        jobs
    }

    /// Move the input list of every `unit_started` too large for a record into an input
    /// manifest stored through `journal` (durable when this returns, so before the record
    /// naming it is appended). An attempt whose manifest cannot be stored keeps its record,
    /// without the list, loses its job, and is returned: it fails without a process. The
    /// journal's own state is not touched, so other units' records go out as usual.
    pub(super) fn store_input_manifests<M: ManifestStore + ?Sized>(
        &mut self,
        journal: &mut M,
        pipeline: &Pipeline,
    ) -> Vec<Unrecordable> {
        if !std::mem::take(&mut self.oversized) {
            return Vec::new();
        }
        let mut unrecordable = Vec::new();
        for event in &mut self.events {
            if let Event::UnitFiles(files) = event {
                store_files_manifest(files, journal);
                continue;
            }
            let Event::UnitStarted(started) = event else {
                continue;
            };
            if started.inputs_manifest.is_some() || input_manifest::fits_in_record(started) {
                continue;
            }
            let inputs = std::mem::take(&mut started.inputs);
            let stored = input_manifest::encode(&inputs)
                .map_err(|error| error.to_string())
                .and_then(|manifest| {
                    journal
                        .store_input_manifest(&manifest.reference.sha256, &manifest.bytes)
                        // The journal's "failed to append" says nothing here: its cause does.
                        .map_err(|error| match std::error::Error::source(&error) {
                            Some(cause) => error_chain(cause),
                            None => error.to_string(),
                        })
                        .map(|()| manifest.reference)
                });
            let error = match stored {
                Ok(reference) => {
                    started.inputs_manifest = Some(reference);
                    if input_manifest::fits_in_record(started) {
                        continue;
                    }
                    // Only a record with no input list left can get here; unit names are
                    // short (validated), so this is a defence, not a path.
                    started.inputs_manifest = None;
                    format!(
                        "the attempt's unit_started record is larger than a journal record may be ({MAX_RECORD_BYTES} bytes) even without its input list"
                    )
                }
                Err(cause) => format!(
                    "the attempt's {} input components do not fit in a journal record ({MAX_RECORD_BYTES} bytes), and storing them as an input manifest failed: {cause}",
                    inputs.len()
                ),
            };
            let Some(job_idx) = self.jobs.iter().position(|job| {
                job.attempt == started.attempt && pipeline.units[job.unit_idx].name == started.unit
            }) else {
                // An attempt that already fails without a process: its list goes unrecorded.
                continue;
            };
            let job = self.jobs.remove(job_idx);
            unrecordable.push(Unrecordable {
                unit_idx: job.unit_idx,
                attempt: job.attempt,
                error,
            });
        }
        unrecordable
    }

    /// Everything in the batch, leaving it empty.
    pub(super) fn take(&mut self) -> Committing {
        self.urgent = false;
        self.oversized = false;
        self.reused = 0;
        Committing {
            events: std::mem::take(&mut self.events),
            jobs: std::mem::take(&mut self.jobs),
            notices: std::mem::take(&mut self.notices),
        }
    }

    /// `notices` are of records appended unsynced `now`: they wait for a durable append.
    pub(super) fn hold_unsynced(&mut self, now: std::time::Instant, notices: &mut Vec<HeldNotice>) {
        self.unsynced
            .get_or_insert_with(|| (now, Vec::new()))
            .1
            .append(notices);
    }

    /// Since when records appended unsynced wait for a durable append, if any do.
    pub(super) fn unsynced_since(&self) -> Option<std::time::Instant> {
        self.unsynced.as_ref().map(|(since, _)| *since)
    }

    /// The notices of records appended unsynced, if any were: to deliver once a durable
    /// append returned (which made those records durable too).
    pub(super) fn take_unsynced(&mut self) -> Option<Vec<HeldNotice>> {
        self.unsynced.take().map(|(_, notices)| notices)
    }

    /// Take back a commit's emptied vectors, keeping their capacity for the next batch: a
    /// batch of reuses holds thousands of records, and growing fresh vectors for each one
    /// touched megabytes of new pages every commit (page faults were a seventh of the engine
    /// thread's time in a no-op run).
    pub(super) fn recycle(&mut self, mut committed: Committing) {
        if self.events.is_empty() && self.jobs.is_empty() && self.notices.is_empty() {
            committed.events.clear();
            committed.jobs.clear();
            committed.notices.clear();
            self.events = committed.events;
            self.jobs = committed.jobs;
            self.notices = committed.notices;
        }
    }
}

/// Move the file list of a `unit_files` too large for a record into a manifest stored through
/// `journal`. When that fails, the record keeps the files that fit and says nothing of the
/// rest: a manifest is a record of what was seen, and losing part of it must not fail a unit
/// whose files were hashed (the hashes that matter are in `unit_started`/`unit_finished`).
fn store_files_manifest<M: ManifestStore + ?Sized>(files: &mut UnitFiles, journal: &mut M) {
    if files.manifest.is_some() || input_manifest::files_fit_in_record(files) {
        return;
    }
    let stored = input_manifest::encode_files(&files.files)
        .ok()
        .and_then(|manifest| {
            journal
                .store_input_manifest(&manifest.reference.sha256, &manifest.bytes)
                .ok()
                .map(|()| manifest.reference)
        });
    match stored {
        Some(reference) => {
            files.files.clear();
            files.manifest = Some(reference);
        }
        None => {
            while !files.files.is_empty() && !input_manifest::files_fit_in_record(files) {
                let keep = files.files.len() / 2;
                files.files.truncate(keep);
            }
        }
    }
}

/// An error and its causes on one line, for an attempt's recorded error.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
