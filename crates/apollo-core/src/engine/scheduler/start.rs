//! Starting attempts: deciding for each ready unit whether it runs (the resume policy) and
//! queuing its `unit_started` in the next batch.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::reuse::with_reuse;
use super::{Scheduler, checked};
use crate::engine::admission::{Admission, Head, Limits, Turn, admit_next};
use crate::engine::hasher::HashJob;
use crate::engine::observer::{Notice, Observer};
use crate::engine::policy::{Decision, OutputCheck, decide, needs_output_check};
use crate::engine::reuse::{self, ReuseCheck};
use crate::engine::workers::{Done, Job, failed_to_start};
use crate::event::{AttemptStatus, FileSide, InputComponent, UnitFiles, UnitStarted};
use crate::hash;
use crate::resume::PriorUnitState;

impl Scheduler<'_> {
    /// Decide and queue the `unit_started` of ready units, up to the pacer's commit limit
    /// (`max_parallel` running plus a lookahead per worker). The attempts go into the batch at
    /// once, so a stop during this very call (a unit whose inputs changed, an input that
    /// cannot be read) takes them back with the rest.
    ///
    /// A unit that declares input files, or is done in the prior state and declares outputs
    /// (they are checked before it is reused), is handed to a hashing thread first (reading
    /// files can take long, or forever): it holds its place among the running until its hash
    /// comes back ([`take_hashed`](Self::take_hashed)). Any other unit is hashed here: its
    /// commands, env and upstream outputs are in memory, so that costs no I/O and no round
    /// trip (deciding so costs one emptiness test, or for a unit with outputs a look-up in the
    /// prior state).
    pub(super) fn start_ready(&mut self, observer: &mut dyn Observer) {
        let max_parallel = self.options.max_parallel.max(1);
        let limits = Limits {
            max_parallel,
            commit_limit: self.pacer.commit_limit(max_parallel),
            max_jobs: self.max_jobs,
        };
        // Ready units passed over because their executor's limit is reached while the other's
        // is not (local units and Slurm jobs count separately); queued again below. In a
        // pipeline without Slurm units nothing is ever passed over.
        let mut passed_over: Vec<usize> = Vec::new();
        loop {
            let turn = Turn {
                // A worker raises `halt` itself when an attempt fails for good (see `Job`).
                stopped: self.stop_starting || self.halt.load(Ordering::SeqCst),
                // A full batch of reuses goes out before more units are decided (a chain of
                // reused units is otherwise decided whole in this one call).
                reuses_full: self.batch.only_reuses() && self.pacer.reuses_full(self.batch.len()),
                passed_over: passed_over.len(),
            };
            let head = self.queue.peek();
            let checks = head.map(|unit_idx| self.checks(unit_idx));
            let admission = admit_next(
                &self.ledger.counts(),
                &limits,
                &turn,
                head.zip(checks).map(|(unit_idx, checks)| Head {
                    kind: self.kind(unit_idx),
                    fresh_reuse_check: checks.reuse_only && self.units[unit_idx].stashed.is_none(),
                }),
            );
            let (Some(unit_idx), Some(checks)) = (head, checks) else {
                break;
            };
            match admission {
                Admission::Stop => break,
                Admission::PassOver => {
                    self.queue.pop();
                    passed_over.push(unit_idx);
                    continue;
                }
                Admission::Take => {}
            }
            self.queue.pop();
            if !self.start_one(unit_idx, checks, observer) {
                break;
            }
        }
        for unit_idx in passed_over {
            self.queue.requeue(unit_idx);
        }
    }

    /// Start `unit_idx`, just taken from the ready queue: skip it (`when:` false), admit it
    /// with what a reuse check found, hand it to be hashed first, or hash and admit it here.
    /// Returns `false` when the run stopped starting units.
    fn start_one(&mut self, unit_idx: usize, checks: Checks, observer: &mut dyn Observer) -> bool {
        let Checks {
            check_outputs,
            check_reuse,
            reuse_only,
        } = checks;
        let unit = &self.pipeline.units[unit_idx];
        // Its `when:` was false at load: skipped by apollo, nothing of it runs or is hashed.
        if self.pipeline.units[unit_idx].skip_when.is_some() {
            self.skip_when(unit_idx);
            return true;
        }
        if let Some(stashed) = self.units[unit_idx].stashed.take() {
            let (inputs, files, reuse_check, took) = *stashed;
            let found = Found {
                components: Ok(inputs),
                input_hash: None,
                files,
                outputs: None,
                reuse: Some(reuse_check),
                spent: took,
            };
            return self.admit(unit_idx, found, observer);
        }
        if (check_outputs || check_reuse || !unit.inputs.is_empty()) && self.hashing {
            let job = HashJob {
                unit_idx,
                upstream: Vec::new(),
                check_outputs,
                check_reuse,
                reuse_only,
            };
            self.hash_first(job);
            // A job the driver may do on its own thread is reported before more is decided.
            return !self.hash_here_pending;
        }
        let upstream: Vec<(&str, &str)> = self
            .dag
            .deps(unit_idx)
            .iter()
            .map(|&dep_idx| {
                (
                    self.pipeline.units[dep_idx].name.as_str(),
                    self.units[dep_idx].output_hash.as_deref().unwrap_or(""),
                )
            })
            .collect();
        let inputs = hash::input_components(unit, &self.pipeline.base_dir, &upstream);
        let found = Found {
            components: inputs,
            input_hash: None,
            files: crate::hash::HashedFiles::default(),
            outputs: None,
            reuse: None,
            spent: Duration::ZERO,
        };
        self.admit(unit_idx, found, observer)
    }

    /// Decide whether a unit whose input components are known runs (resume policy) and, if
    /// so, queue its `unit_started` (and the manifest of its input files, when it declares
    /// any, in a `unit_files` record right after it), from what was `found` about it. An input
    /// that could not be hashed records an attempt that failed (or timed out) without a
    /// process. Returns `false` when the run stopped starting units.
    pub(super) fn admit(
        &mut self,
        unit_idx: usize,
        found: Found,
        observer: &mut dyn Observer,
    ) -> bool {
        let Found {
            components,
            input_hash,
            files,
            outputs,
            reuse: reuse_check,
            spent,
        } = found;
        let unit = &self.pipeline.units[unit_idx];
        let (inputs, hash_error) = match components {
            Ok(inputs) => (inputs, None),
            Err(error) => (Vec::new(), Some(error)),
        };
        let input_hash = input_hash.unwrap_or_else(|| hash::combine_components(&inputs));
        if self.units[unit_idx].attempts_here == 0 && hash_error.is_none() {
            let OutputCheck {
                changes: output_changes,
                marked_hash,
            } = outputs.unwrap_or_default();
            let decision = decide(
                self.prior,
                unit,
                &input_hash,
                &inputs,
                &output_changes,
                self.options.on_input_change,
            );
            let (decision, candidate) = with_reuse(decision, reuse_check);
            observer.notice(&Notice::Decided {
                unit: &unit.name,
                decision: &decision,
            });
            match decision {
                Decision::Reuse { .. } => {
                    self.reuse(unit_idx, marked_hash);
                    return true;
                }
                Decision::Reused { .. } => {
                    if let Some(candidate) = candidate {
                        self.reuse_from_run(unit_idx, candidate, input_hash, inputs);
                    }
                    return true;
                }
                Decision::ChangedNeedsVerdict { .. } => {
                    self.human_needed = decision.stop_error(&unit.name);
                    self.stop();
                    return false;
                }
                _ => {}
            }
        }
        let in_flight = self.left_in_flight(unit_idx);
        let attempt = self.units[unit_idx].begin_attempt();
        let started = UnitStarted {
            unit: unit.name.clone(),
            attempt,
            input_hash,
            inputs,
            inputs_manifest: None,
        };
        checked(self.ledger.commit(unit_idx, self.kind(unit_idx)));
        if let Some(error) = hash_error {
            self.fail_without_process(unit_idx, started, &error, spent, observer);
            return !self.stop_starting;
        }
        let halt_on_failure =
            !self.options.keep_going && self.units[unit_idx].attempts_here > unit.retries;
        let job = Job {
            unit_idx,
            attempt,
            committed_at: self.now,
            halt_on_failure,
            spent,
            in_flight,
            input_stamps: files.stamps,
        };
        self.batch.push_start(started, Some(job));
        if !files.entries.is_empty() {
            self.batch.push_files(UnitFiles {
                unit: unit.name.clone(),
                attempt,
                side: FileSide::Inputs,
                files: files.entries,
                manifest: None,
            });
        }
        true
    }

    /// An attempt left in flight by an earlier apollo, for a remote executor to reattach to
    /// (on the unit's first attempt here only).
    fn left_in_flight(&self, unit_idx: usize) -> Option<u32> {
        if self.units[unit_idx].attempts_here > 0 {
            return None;
        }
        let unit = &self.pipeline.units[unit_idx];
        match self.prior.unit(&unit.name).map(|prior| &prior.state) {
            Some(PriorUnitState::InFlight { attempt }) => Some(*attempt),
            // A graceful stop may have left a cluster job running (`on_stop: detach`).
            Some(PriorUnitState::CutOff {
                attempt,
                status: AttemptStatus::Interrupted,
            }) => Some(*attempt),
            _ => None,
        }
    }

    /// The attempt `started` cannot start (its inputs could not be hashed: `error`, after
    /// `spent`): record it as failed (or timed out) without spawning.
    fn fail_without_process(
        &mut self,
        unit_idx: usize,
        started: UnitStarted,
        error: &hash::HashError,
        spent: Duration,
        observer: &mut dyn Observer,
    ) {
        let attempt = started.attempt;
        self.batch.push_start(started, None);
        observer.notice(&Notice::Started {
            unit: &self.pipeline.units[unit_idx].name,
            attempt,
        });
        let mut outcome = failed_to_start(error.to_string());
        if error.timed_out() {
            outcome.status = AttemptStatus::TimedOut;
            outcome.timed_out = true;
            outcome.wall_time = spent;
        }
        self.finish_attempt(Done {
            worker: None,
            unit_idx,
            attempt,
            queued: Duration::ZERO,
            log_dir: PathBuf::new(),
            outcome,
            outputs: None,
            output_files: Vec::new(),
            awaits_ack: false,
        });
    }
}

/// What a ready unit is checked for before it is decided (see `Scheduler::checks`).
#[derive(Clone, Copy)]
struct Checks {
    check_outputs: bool,
    check_reuse: bool,
    /// A reuse check only, of an idempotent unit.
    reuse_only: bool,
}

impl Scheduler<'_> {
    /// What `unit_idx` is checked for before it is decided.
    fn checks(&self, unit_idx: usize) -> Checks {
        let unit = &self.pipeline.units[unit_idx];
        let first = self.units[unit_idx].attempts_here == 0;
        // Only the first decision looks at the outputs: a retry reruns anyway.
        let check_outputs = first && needs_output_check(self.prior, unit);
        let check_reuse =
            first && reuse::wants_check(self.options.reuse.as_ref(), self.prior, unit);
        // A reuse check of an idempotent unit starts nothing, so it does not hold a place
        // among the running: many are in flight at once (a no-op run of a large pipeline
        // is then a few commits, not one per handful of units). One that finds the unit
        // must run comes back through the queue ([`take_hashed`](Self::take_hashed)).
        let reuse_only = check_reuse && !check_outputs && unit.idempotent;
        Checks {
            check_outputs,
            check_reuse,
            reuse_only,
        }
    }
}

/// What was found out about a unit before it is admitted (see `Scheduler::admit`).
pub(super) struct Found {
    /// Its input components, or why they could not be hashed.
    pub(super) components: Result<Vec<InputComponent>, hash::HashError>,
    /// The input hash of `components`, when a hashing thread computed it already.
    pub(super) input_hash: Option<String>,
    /// The manifest of its declared input files (empty when it declares none).
    pub(super) files: crate::hash::HashedFiles,
    /// What the check of its declared outputs found (`None`: it needed none, see
    /// [`needs_output_check`]).
    pub(super) outputs: Option<OutputCheck>,
    /// What its reuse check found (`None`: it had none, see [`reuse::wants_check`]).
    pub(super) reuse: Option<ReuseCheck>,
    /// The part of its timeout hashing its inputs took.
    pub(super) spent: Duration,
}
